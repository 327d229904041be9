//! es-broker: the binary. It parses the command line (a stable contract, see
//! DESIGN.md), sets up logging, opens the data directory, binds the listener,
//! runs the background tasks (periodic flush, retention, compaction, the
//! coordinators' timers; see [`background`]), and shuts down gracefully on SIGTERM/SIGINT: stop
//! accepting, finish in-flight requests, let the background tasks end their
//! current partition, then sync and close every partition. Everything
//! Kafka-specific lives in es-kafka; everything on disk in es-storage.

mod admin;
mod background;
mod dump_log;
mod fd_limit;
mod keys;
mod keys_remote;
mod listeners;
mod mirror_cmd;
mod quorum;
mod schema_copy;
mod schema_registry;
mod settings;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use background::Cleaner;
use clap::{ArgAction, Parser};
use es_kafka::broker::{split_host_port, Broker, BrokerConfig};
use es_kafka::config::{OFFSETS_TOPIC_PARTITIONS_DEFAULT, TRANSACTION_STATE_PARTITIONS_DEFAULT};
use es_kafka::topics::PARTITIONS_MAX;
use es_storage::{CachingFs, RealFs, Storage, SyncMode, SyncPool};
use tokio::sync::watch;

/// How long a controlled shutdown waits for the quorum to move this
/// broker's leaderships: well inside the grace period supervisors give a
/// SIGTERM (scripts/cluster's 30 s), since a broker stopping with the rest
/// of its cluster may find no quorum left to ask.
const CONTROLLED_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long shutdown waits for open connections to finish their requests.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// A Kafka-compatible message broker.
#[derive(Debug, Parser)]
#[command(
    name = "es-broker",
    version,
    about,
    args_conflicts_with_subcommands = true,
    args_override_self = true
)]
struct Args {
    /// Without a subcommand, es-broker runs the broker.
    #[command(subcommand)]
    command: Option<Command>,
    /// Directory holding topics and broker metadata.
    #[arg(long, default_value = "./data")]
    data_dir: PathBuf,
    /// Address of the one PLAINTEXT listener when no --listener is given
    /// (port 0 picks a free port).
    #[arg(long, default_value = listeners::LISTEN_DEFAULT)]
    listen: String,
    /// A listener, NAME://HOST:PORT (repeated; Kafka's `listeners`). Its
    /// security protocol is the name's, or as --listener-security-protocol-map says.
    #[arg(long = "listener")]
    listeners: Vec<String>,
    /// NAME:PROTOCOL,... (Kafka's `listener.security.protocol.map`):
    /// PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL for each listener name.
    #[arg(long)]
    listener_security_protocol_map: Option<String>,
    /// NAME://HOST:PORT clients are told to connect to on listener NAME
    /// (repeated); a bare HOST:PORT is the first listener's. Default: the
    /// bound address.
    #[arg(long = "advertised-listener")]
    advertised_listeners: Vec<String>,
    /// PEM certificate chain of TLS listeners (Kafka's ssl.keystore.location).
    #[arg(long)]
    ssl_cert: Option<PathBuf>,
    /// PEM private key of TLS listeners.
    #[arg(long)]
    ssl_key: Option<PathBuf>,
    /// PEM certificates of the CAs client certificates are checked against
    /// (ssl.client.auth=requested or required).
    #[arg(long)]
    ssl_ca: Option<PathBuf>,
    /// A Kafka-style properties file of broker settings (docs/operations.md).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// A broker setting in Kafka's name, NAME=VALUE (repeated; over --config).
    #[arg(long = "set", value_name = "NAME=VALUE")]
    set: Vec<String>,
    /// This node's id (Kafka's node.id): a broker id and, in a cluster, a
    /// member of the metadata quorum. Never reused.
    #[arg(long, default_value_t = 0)]
    node_id: i32,
    /// The metadata quorum's voters, ID@HOST:PORT,... (their Raft
    /// listeners). Absent: a one-voter quorum of this node alone.
    #[arg(long, value_parser = parse_voters)]
    controller_quorum_voters: Option<BTreeMap<u64, String>>,
    /// Where this node's Raft listener binds (HOST:PORT); needed in a
    /// cluster, unused alone.
    #[arg(long)]
    controller_listen: Option<String>,
    /// Fsync once this many records wait; 1 = fsync before every acknowledgement.
    #[arg(long, default_value_t = 1)]
    flush_every_records: u64,
    /// Fsync at least this often (e.g. 1s, 250ms, 2m).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    flush_interval: Duration,
    /// Where retention copies (and fsyncs) segments before deleting them, as
    /// DIR/TOPIC/PARTITION/.
    #[arg(long)]
    cold_storage_dir: Option<PathBuf>,
    /// How often retention visits every partition (Kafka's
    /// log.retention.check.interval.ms).
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    retention_check_interval: Duration,
    /// How often compaction visits every partition (Kafka's log.cleaner.backoff.ms).
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    compaction_interval: Duration,
    /// Shortest session timeout a group member may ask for (Kafka's
    /// group.min.session.timeout.ms).
    #[arg(long, default_value_t = 6_000)]
    group_min_session_timeout_ms: i32,
    /// Longest session timeout a group member may ask for (Kafka's
    /// group.max.session.timeout.ms).
    #[arg(long, default_value_t = 1_800_000)]
    group_max_session_timeout_ms: i32,
    /// Partitions of `__consumer_offsets` when es creates it (Kafka's
    /// offsets.topic.num.partitions): they spread the group coordinators
    /// over a cluster's brokers. Every node of a cluster should say the same.
    #[arg(long, default_value_t = OFFSETS_TOPIC_PARTITIONS_DEFAULT)]
    offsets_topic_num_partitions: i32,
    /// Partitions of `__transaction_state` when es creates it (Kafka's
    /// transaction.state.log.num.partitions): they spread the transaction
    /// coordinators over a cluster's brokers.
    #[arg(long, default_value_t = TRANSACTION_STATE_PARTITIONS_DEFAULT)]
    transaction_state_log_num_partitions: i32,
    /// Create unknown topics a Metadata request names (Kafka's auto.create.topics.enable).
    #[arg(long, default_value_t = true, action = ArgAction::Set)]
    auto_create_topics: bool,
    /// Partitions of an auto-created topic (Kafka's num.partitions).
    #[arg(long, default_value_t = 1)]
    default_partitions: i32,
    /// Threads that serve connections (0: one fewer than the CPUs, at least
    /// one; see `worker_threads`).
    #[arg(long, default_value_t = 0)]
    worker_threads: usize,
    /// How group-commit fsyncs of different partitions are run: `grouped`
    /// (partitions waiting together share one device flush: written out
    /// over preallocated zeros on ext4 and XFS, else one syncfs; Linux 5.8
    /// and later), `per-partition` (one fdatasync per partition, in
    /// parallel), or `auto`: grouped where the kernel allows it, else per
    /// partition (docs/storage.md, "Group commit across partitions").
    #[arg(long, value_enum, default_value_t = SyncModeArg::Auto)]
    sync_mode: SyncModeArg,
    /// Sync threads (0: the mode's own, 2 grouped and 8 per partition).
    #[arg(long, default_value_t = 0)]
    sync_threads: usize,
    /// MiB of fetches read and encoded ahead of their requests, all
    /// partitions together: a consumer catching up gets its next fetch
    /// prepared while it handles the last one (0: off).
    #[arg(long, default_value_t = 64)]
    fetch_read_ahead_mb: usize,
    /// Kafka's `replica.lag.time.max.ms`: a follower that has not caught
    /// up with its partition's leader for this long leaves the ISR.
    #[arg(long, default_value_t = 30_000)]
    replica_lag_time_max_ms: i64,
    /// Kafka's `default.replication.factor`: the replication factor of a
    /// topic created with -1 (and of auto-created topics). Default:
    /// min(3, brokers available).
    #[arg(long)]
    default_replication_factor: Option<i16>,
    /// Kafka's `auto.leader.rebalance.enable`: the quorum leader
    /// periodically elects partitions' preferred leaders back.
    #[arg(long, default_value_t = true, action = ArgAction::Set)]
    auto_leader_rebalance_enable: bool,
    /// Kafka's `leader.imbalance.check.interval.seconds`: how often the
    /// automatic rebalance checks.
    #[arg(long, default_value_t = 300)]
    leader_imbalance_check_interval_seconds: u64,
    /// Kafka's `leader.imbalance.per.broker.percentage`: the share of a
    /// broker's preferred partitions it may not lead before a rebalance.
    #[arg(long, default_value_t = 10)]
    leader_imbalance_per_broker_percentage: u32,
    /// Kafka's `unclean.leader.election.interval.ms`: how often the quorum
    /// leader elects leaders outside the ISR for leaderless partitions of
    /// topics with `unclean.leader.election.enable=true`.
    #[arg(long, default_value_t = 300_000)]
    unclean_leader_election_interval_ms: u64,
    /// Where the schema registry's HTTP server listens (HOST:PORT, port 0
    /// picks a free one), or `none` for no registry. Its data is
    /// DATA_DIR/schemas.json.
    #[arg(long, default_value = schema_registry::LISTEN_DEFAULT)]
    schema_registry_listen: String,
    /// Where the admin HTTP listener listens (HOST:PORT, port 0 picks a
    /// free one), or `none`: /healthz, /readyz, /metrics, the console at /
    /// and its JSON API under /api/v1 (docs/admin-api.md).
    #[arg(long, default_value = admin::LISTEN_DEFAULT)]
    admin_listen: String,
    /// Partitions written with their own labels in /metrics (the largest
    /// logs, the largest lags); the others are summed per topic as
    /// partition="other" (docs/metrics.md).
    #[arg(long, default_value_t = admin::PARTITION_LABELS_DEFAULT)]
    metrics_partition_labels: usize,
    /// Log level or tracing filter (error, warn, info, debug, trace).
    #[arg(long, default_value = "info")]
    log_level: String,
    /// Log lines as text for people, or as one JSON object per line for
    /// log shippers.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

/// `--log-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// es-broker's tools.
#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Print (or only check) a partition's segments as they lie on disk:
    /// records, index entries, batch notes and any corruption.
    DumpLog(dump_log::DumpLogArgs),
    /// Describe the controller quorum, or add and remove its voters, over a
    /// node's Raft listener.
    Quorum(quorum::QuorumArgs),
    /// Create, list and revoke the API keys SASL/PLAIN authenticates.
    Keys(keys::KeysArgs),
    /// Mirror topics of a source Kafka cluster at their source offsets:
    /// links, topics, group offsets, status, promotion.
    Mirror(mirror_cmd::MirrorArgs),
}

/// `--sync-mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum SyncModeArg {
    /// Grouped where the kernel allows it (Linux 5.8 and later), else per partition.
    Auto,
    /// One fdatasync per partition.
    PerPartition,
    /// Partitions waiting together share one device flush (or one syncfs).
    Grouped,
}

/// The runtime's worker threads: `asked`, or with 0 one fewer than `cpus`
/// (the CPUs this process may use), and at least one. The CPU left over runs the
/// group-commit fsyncs (the kernel's writeback and device-flush path) and
/// the blocking reads and decodes; with one worker per CPU, the worker that
/// a finished fsync woke was often not the one holding the request's
/// connection, and requests bounced between the two (measured on 2 CPUs:
/// 1 partition, 1 librdkafka producer, 410,000-440,000 records/s with two
/// workers, 550,000-580,000 with one, and CPU per GB 4.6-5.2 s against
/// 3.6; docs/benchmarks.md).
fn worker_threads(asked: usize, cpus: usize) -> usize {
    if asked > 0 {
        return asked;
    }
    cpus.saturating_sub(1).max(1)
}

/// Parses `1s`, `250ms`, `2m`, `1h`, or a bare number of seconds.
/// `1@host:port,2@host:port`: Kafka's `controller.quorum.voters`.
fn parse_voters(s: &str) -> Result<BTreeMap<u64, String>, String> {
    let mut out = BTreeMap::new();
    for v in s.split(',').map(str::trim).filter(|v| !v.is_empty()) {
        let (id, addr) = v
            .split_once('@')
            .ok_or_else(|| format!("{v:?} is not ID@HOST:PORT"))?;
        let id: u64 = id
            .parse()
            .map_err(|_| format!("{v:?}: {id:?} is not a node id"))?;
        if split_host_port(addr).is_none() {
            return Err(format!("{v:?}: {addr:?} is not HOST:PORT"));
        }
        if out.insert(id, addr.to_string()).is_some() {
            return Err(format!("node {id} is listed twice"));
        }
    }
    if out.is_empty() {
        return Err("no voters given".into());
    }
    Ok(out)
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 1s or 250ms"))?;
    let d = match unit {
        "ms" => Duration::from_millis(n),
        "" | "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n.saturating_mul(60)),
        "h" => Duration::from_secs(n.saturating_mul(3600)),
        other => {
            return Err(format!(
                "unknown duration unit {other:?} (use ms, s, m or h)"
            ))
        }
    };
    if d.is_zero() {
        return Err("an interval must be positive".into());
    }
    Ok(d)
}

fn main() -> anyhow::Result<()> {
    let expanded = settings::expand(std::env::args_os().collect())?;
    let args = Args::parse_from(expanded.argv);
    match &args.command {
        Some(Command::DumpLog(a)) => return dump_log::run(a),
        Some(Command::Quorum(a)) => return quorum::run(a),
        Some(Command::Keys(a)) => return keys::run(a),
        Some(Command::Mirror(a)) => return mirror_cmd::run(a),
        None => {}
    }
    let security = expanded.security;
    let topic_defaults = expanded.topic_defaults;
    let share = expanded.share;
    let filter = tracing_subscriber::EnvFilter::try_new(&args.log_level)
        .with_context(|| format!("bad --log-level {:?}", args.log_level))?;
    match args.log_format {
        LogFormat::Text => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_target(false)
            .init(),
        LogFormat::Json => tracing_subscriber::fmt()
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_env_filter(filter)
            .init(),
    }
    let files = fd_limit::raise();
    if files.after > files.before {
        tracing::info!(
            before = files.before,
            after = files.after,
            "raised the open-file limit (RLIMIT_NOFILE)"
        );
    } else {
        tracing::info!(
            limit = files.after,
            "open-file limit (RLIMIT_NOFILE) already at its hard limit"
        );
    }
    let mode = match args.sync_mode {
        SyncModeArg::Grouped => SyncMode::Grouped,
        SyncModeArg::PerPartition => SyncMode::PerPartition,
        SyncModeArg::Auto if es_storage::syncer::grouping_supported() => SyncMode::Grouped,
        SyncModeArg::Auto => {
            tracing::info!(
                "sync mode per partition: grouped syncs need Linux 5.8 or later (--sync-mode)"
            );
            SyncMode::PerPartition
        }
    };
    // The partition logs' descriptors, bounded: least recently used segment
    // files close beyond it and reopen when next read.
    let mut limits = es_kafka::limits::ConnectionLimits::default();
    if let Some(v) = security.get("log.open.files.max") {
        limits
            .apply("log.open.files.max", v)
            .map_err(|e| anyhow::anyhow!(e))?;
    }
    let budget = es_kafka::limits::open_files_budget(limits.log_open_files_max);
    tracing::info!(
        files = budget,
        "partition logs keep at most this many files open (log.open.files.max)"
    );
    let fs = CachingFs::new(Arc::new(RealFs), budget);
    let pool = match args.sync_threads {
        0 => SyncPool::new(mode),
        n => SyncPool::with_threads(mode, n),
    };
    let Ok(pool) = pool else {
        bail!("--sync-mode grouped needs Linux 5.8 or later (syncfs reports write-back errors from 5.8 on)");
    };
    tracing::info!(mode = ?mode, threads = pool.threads(), "group-commit sync pool (--sync-mode, --sync-threads)");
    let storage = Storage::new(Arc::new(fs)).with_sync_pool(pool);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads(
            args.worker_threads,
            std::thread::available_parallelism().map_or(1, |n| n.get()),
        ))
        .enable_all()
        .thread_name("es-broker")
        .build()
        .context("starting the runtime")?;
    rt.block_on(run(args, security, topic_defaults, share, storage))
}

/// The lock file in the data directory ([`lock_data_dir`]).
const LOCK_FILE: &str = ".lock";

/// Takes an exclusive lock on `<data dir>/.lock` (flock), as Kafka locks
/// each log directory: two processes writing one data directory would
/// corrupt it. The lock goes with the process, however it ends.
fn lock_data_dir(config: &BrokerConfig) -> anyhow::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    config
        .storage
        .fs
        .create_dir_all(&config.data_dir)
        .with_context(|| format!("creating {}", config.data_dir.display()))?;
    let path = config.data_dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => bail!(
            "{} is in use by another es process (it holds {}); stop it first",
            config.data_dir.display(),
            path.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("locking {}", path.display()))
        }
    }
}

async fn run(
    args: Args,
    security: BTreeMap<String, String>,
    topic_defaults: BTreeMap<String, String>,
    share: es_kafka::config::ShareBrokerConfig,
    storage: Storage,
) -> anyhow::Result<()> {
    if args.default_partitions < 1 {
        bail!("--default-partitions must be at least 1");
    }
    for (flag, n) in [
        (
            "--offsets-topic-num-partitions",
            args.offsets_topic_num_partitions,
        ),
        (
            "--transaction-state-log-num-partitions",
            args.transaction_state_log_num_partitions,
        ),
    ] {
        if !(1..=PARTITIONS_MAX).contains(&n) {
            bail!("{flag} must be between 1 and {PARTITIONS_MAX}");
        }
    }
    if args.flush_every_records < 1 {
        bail!("--flush-every-records must be at least 1");
    }
    if args.group_min_session_timeout_ms < 0
        || args.group_min_session_timeout_ms > args.group_max_session_timeout_ms
    {
        bail!(
            "--group-min-session-timeout-ms ({}) must be between 0 and --group-max-session-timeout-ms ({})",
            args.group_min_session_timeout_ms,
            args.group_max_session_timeout_ms
        );
    }
    let mut security = es_kafka::security::SecurityConfig::from_settings(&security)
        .map_err(|e| anyhow::anyhow!(e))?;
    security.set_tls_files(
        args.ssl_cert.clone(),
        args.ssl_key.clone(),
        args.ssl_ca.clone(),
    );
    let bound = listeners::bind(&args, &security).await?;
    let mut config = BrokerConfig::new(args.data_dir.clone(), &bound.first_bind);
    config.storage = storage;
    config.advertised_host = bound.listeners[0].spec.advertised_host.clone();
    config.advertised_port = bound.listeners[0].spec.advertised_port;
    config.listeners = bound.listeners.iter().map(|l| l.spec.clone()).collect();
    config.security = security;
    config.static_topic_configs = Arc::new(topic_defaults);
    config.share = share;
    config.auto_create_topics = args.auto_create_topics;
    config.default_partitions = args.default_partitions;
    config.flush_every_records = args.flush_every_records;
    config.flush_interval = args.flush_interval;
    config.cold_storage_dir = args.cold_storage_dir.clone();
    config.retention_check_interval = args.retention_check_interval;
    config.compaction_interval = args.compaction_interval;
    config.group_min_session_timeout_ms = args.group_min_session_timeout_ms;
    config.group_max_session_timeout_ms = args.group_max_session_timeout_ms;
    config.offsets_topic_partitions = args.offsets_topic_num_partitions;
    config.transaction_state_partitions = args.transaction_state_log_num_partitions;
    config.fetch_read_ahead_bytes = args.fetch_read_ahead_mb.saturating_mul(1024 * 1024);
    config.replica_lag_time_max_ms = args.replica_lag_time_max_ms.max(1);
    config.default_replication_factor = args.default_replication_factor;
    config.leader_rebalance = es_kafka::broker::LeaderRebalance {
        enable: args.auto_leader_rebalance_enable,
        check_interval: Duration::from_secs(args.leader_imbalance_check_interval_seconds.max(1)),
        per_broker_percentage: args.leader_imbalance_per_broker_percentage,
        unclean_interval: Duration::from_millis(args.unclean_leader_election_interval_ms.max(100)),
    };
    if args.node_id < 0 {
        bail!("--node-id must not be negative");
    }
    config.node_id = args.node_id;

    tracing::info!(data_dir = %args.data_dir.display(), "opening data directory");
    // Held until the process exits: a second es on this directory is refused.
    let _lock = lock_data_dir(&config)?;
    // Up before recovery: /healthz answers and /readyz says why not yet.
    let admin = admin::listen_addr(&args.admin_listen).map(|listen| {
        admin::spawn(
            listen,
            admin::Options {
                partition_labels: args.metrics_partition_labels,
                sasl: bound.listeners.iter().any(|l| l.spec.protocol.sasl()),
            },
        )
    });
    let recovery = admin::Recovery::begin(&args.data_dir);
    let (broker, timers) = tokio::task::spawn_blocking(move || Broker::open(config))
        .await
        .context("opening the data directory")?
        .context("opening the data directory")?;
    recovery.done();
    if let Some(a) = &admin {
        a.set_broker(broker.clone());
    }
    let clustered = args.controller_quorum_voters.is_some();
    if clustered {
        // Before the metadata assigns roles: where each replicated high
        // watermark starts (es_kafka::hw_checkpoint).
        let b = broker.clone();
        tokio::task::spawn_blocking(move || es_kafka::hw_checkpoint::restore(&b))
            .await
            .context("restoring high watermarks")?;
    }
    let mut meta = broker.single_node_metadata();
    if let Some(voters) = &args.controller_quorum_voters {
        if args.controller_listen.is_none() {
            // The leader sends the log to voters and learners alike.
            bail!(
                "in a cluster every node needs --controller-listen HOST:PORT (its Raft listener)"
            );
        }
        meta.voters = voters.clone();
    }
    meta.listen = args.controller_listen.clone();
    meta.advertised = args
        .controller_quorum_voters
        .as_ref()
        .and_then(|v| v.get(&meta.node_id).cloned())
        .or_else(|| args.controller_listen.clone());
    broker
        .start_metadata(meta)
        .await
        .context("starting the metadata quorum")?;
    tracing::info!(
        cluster_id = broker.cluster_id(),
        node_id = broker.node_id(),
        topics = broker.topics().len(),
        "broker ready"
    );
    if let Some(dir) = &args.cold_storage_dir {
        tracing::info!(dir = %dir.display(), "cold storage directory configured");
    }

    let (stop_tx, stop_rx) = watch::channel(false);
    let hw_checkpoint = clustered.then(|| {
        tokio::spawn(background::hw_checkpoint_loop(
            broker.clone(),
            stop_rx.clone(),
        ))
    });
    let background = [
        tokio::spawn(background::flush_loop(
            broker.clone(),
            args.flush_interval,
            stop_rx.clone(),
        )),
        tokio::spawn(background::cleaner_loop(
            broker.clone(),
            Cleaner::Retention,
            args.retention_check_interval,
            stop_rx.clone(),
        )),
        tokio::spawn(background::cleaner_loop(
            broker.clone(),
            Cleaner::Compaction,
            args.compaction_interval,
            stop_rx.clone(),
        )),
        tokio::spawn(background::coordinator_timers(timers, stop_rx.clone())),
        tokio::spawn(background::api_keys_loop(broker.clone(), stop_rx.clone())),
    ];
    // The handlers are installed here, before "listening on" is logged: a
    // SIGTERM sent as soon as the broker says it serves must stop it
    // cleanly, not kill it with the default action.
    let signals = StopSignals::install();
    listeners::reload_on_sighup(bound.tls.clone());
    let b = broker.clone();
    tokio::spawn(async move {
        signals.wait().await;
        // Leaderships move to the other in-sync replicas while this broker
        // still serves; then the listener closes.
        b.controlled_shutdown(CONTROLLED_SHUTDOWN_TIMEOUT).await;
        let _ = stop_tx.send(true);
    });

    for l in &bound.listeners {
        tracing::info!(
            "listening on {} (listener {}, {}; advertised as {}:{})",
            l.socket
                .local_addr()
                .map_or_else(|_| "?".to_string(), |a| a.to_string()),
            l.spec.name,
            l.spec.protocol,
            l.spec.advertised_host,
            l.spec.advertised_port
        );
    }
    if let Some(listen) = schema_registry::listen_addr(&args.schema_registry_listen) {
        schema_registry::spawn(
            listen,
            args.data_dir.clone(),
            broker.clone(),
            clustered,
            stop_rx.clone(),
        );
    }
    // Mirror links (es-broker mirror ...): one worker thread per link,
    // following the metadata.
    let mirrors = es_mirror::MirrorService::start(broker.clone());
    if let Some(a) = &admin {
        a.set_ready(stop_rx.clone());
    }
    es_kafka::server::run(broker.clone(), bound.listeners, stop_rx, DRAIN_TIMEOUT).await;
    let m = mirrors.clone();
    tokio::task::spawn_blocking(move || m.shutdown())
        .await
        .context("stopping the mirror links")?;

    // A cleaner finishes the partition it is on; none runs once we close.
    for task in background {
        if let Err(e) = task.await {
            tracing::error!(error = %e, "background task failed");
        }
    }
    if let Some(task) = hw_checkpoint {
        // The last checkpoint, after the listener has drained.
        let writer = task.await.unwrap_or_default();
        background::write_hw_checkpoint(broker.clone(), writer).await;
    }
    broker.stop_metadata().await;
    tracing::info!("closing partitions");
    let b = broker.clone();
    tokio::task::spawn_blocking(move || b.close())
        .await
        .context("closing partitions")?
        .context("closing partitions")?;
    tracing::info!("stopped");
    Ok(())
}

/// SIGTERM and SIGINT, watched from the moment `install` returns.
struct StopSignals {
    term: Option<tokio::signal::unix::Signal>,
    int: Option<tokio::signal::unix::Signal>,
}

impl StopSignals {
    fn install() -> Self {
        use tokio::signal::unix::{signal, SignalKind};
        let watch = |kind: SignalKind, name: &str| match signal(kind) {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::error!(error = %e, "cannot watch {name}");
                None
            }
        };
        StopSignals {
            term: watch(SignalKind::terminate(), "SIGTERM"),
            int: watch(SignalKind::interrupt(), "SIGINT"),
        }
    }

    async fn wait(mut self) {
        async fn recv(s: &mut Option<tokio::signal::unix::Signal>) {
            match s {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            _ = recv(&mut self.term) => tracing::info!("SIGTERM received; shutting down"),
            _ = recv(&mut self.int) => tracing::info!("SIGINT received; shutting down"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("1d").is_err());
        assert!(parse_duration("x").is_err());
    }

    #[test]
    fn worker_threads_leave_a_cpu_unless_asked() {
        assert_eq!(worker_threads(0, 1), 1);
        assert_eq!(worker_threads(0, 2), 1);
        assert_eq!(worker_threads(0, 8), 7);
        assert_eq!(worker_threads(3, 2), 3);
    }

    #[test]
    fn cli_defaults_match_the_contract() {
        let a = Args::try_parse_from(["es-broker"]).expect("parses");
        assert_eq!(a.data_dir, PathBuf::from("./data"));
        assert_eq!(a.listen, "127.0.0.1:9092");
        assert_eq!(a.flush_every_records, 1);
        assert_eq!(a.flush_interval, Duration::from_secs(1));
        assert!(a.auto_create_topics);
        assert_eq!(a.default_partitions, 1);
        assert_eq!(a.log_level, "info");
        assert_eq!(a.retention_check_interval, Duration::from_secs(300));
        assert_eq!(a.compaction_interval, Duration::from_secs(15));
        assert_eq!(a.group_min_session_timeout_ms, 6_000);
        assert_eq!(a.group_max_session_timeout_ms, 1_800_000);
        assert_eq!(a.cold_storage_dir, None);
        assert_eq!(a.worker_threads, 0);
        assert_eq!(a.sync_mode, SyncModeArg::Auto);
        assert_eq!(a.sync_threads, 0);
        assert_eq!(a.fetch_read_ahead_mb, 64);
        assert_eq!(a.offsets_topic_num_partitions, 1);
        assert_eq!(a.transaction_state_log_num_partitions, 1);
        assert_eq!(a.schema_registry_listen, "127.0.0.1:8081");
        let b = Args::try_parse_from([
            "es-broker",
            "--auto-create-topics",
            "false",
            "--advertised-listener",
            "h:1",
            "--cold-storage-dir",
            "/c",
            "--retention-check-interval",
            "250ms",
            "--compaction-interval",
            "2m",
            "--group-min-session-timeout-ms",
            "100",
            "--sync-mode",
            "grouped",
            "--fetch-read-ahead-mb",
            "0",
            "--offsets-topic-num-partitions",
            "6",
            "--transaction-state-log-num-partitions",
            "7",
        ])
        .expect("parses");
        assert_eq!(b.sync_mode, SyncModeArg::Grouped);
        assert_eq!(b.fetch_read_ahead_mb, 0);
        assert_eq!(b.offsets_topic_num_partitions, 6);
        assert_eq!(b.transaction_state_log_num_partitions, 7);
        assert!(Args::try_parse_from(["es-broker", "--sync-mode", "sometimes"]).is_err());
        assert_eq!(b.cold_storage_dir, Some(PathBuf::from("/c")));
        assert_eq!(b.retention_check_interval, Duration::from_millis(250));
        assert_eq!(b.compaction_interval, Duration::from_secs(120));
        assert_eq!(b.group_min_session_timeout_ms, 100);
        assert!(Args::try_parse_from(["es-broker", "--compaction-interval", "0s"]).is_err());
        assert!(!b.auto_create_topics);
        assert_eq!(b.advertised_listeners, vec!["h:1".to_string()]);
        let c = Args::try_parse_from([
            "es-broker",
            "--listener",
            "SASL_SSL://127.0.0.1:9093",
            "--listener",
            "INTERNAL://127.0.0.1:9091",
            "--listener-security-protocol-map",
            "INTERNAL:PLAINTEXT",
            "--advertised-listener",
            "SASL_SSL://broker1:9093",
            "--ssl-cert",
            "/c.pem",
        ])
        .expect("parses");
        assert_eq!(c.listeners.len(), 2);
        assert_eq!(c.ssl_cert, Some(PathBuf::from("/c.pem")));
        // A later occurrence of a flag wins (settings come before the
        // command line's own flags).
        let d = Args::try_parse_from([
            "es-broker",
            "--default-partitions=3",
            "--default-partitions",
            "5",
        ])
        .expect("parses");
        assert_eq!(d.default_partitions, 5);
    }
}
