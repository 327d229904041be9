//! `es-broker mirror ...`: mirror links and mirror topics through a running
//! broker (es's mirror request, `es_kafka::handlers::mirror_admin`), logged
//! in as `--command-config` says (as `keys --bootstrap`). What it changes is
//! metadata, so every node of a cluster learns it.
//!
//! ```text
//! es-broker mirror link create NAME --source-bootstrap HOST:PORT [--source-config FILE] [--replace] [--sync-acls] [--sync-quotas]
//! es-broker mirror link list | describe NAME | delete NAME
//! es-broker mirror topic create TOPIC --link NAME [--source-topic T]
//! es-broker mirror topic create --link NAME --pattern REGEX [--prefix P]
//! es-broker mirror groups --link NAME [--group G]... [--group-pattern REGEX]... [--group-sync-interval-ms MS]
//! es-broker mirror status [TOPIC] [--json]
//! es-broker mirror pause TOPIC | resume TOPIC
//! es-broker mirror promote (TOPIC... | --all) [--max-lag N] [--timeout-s S]
//! es-broker mirror schemas --from URL [--to URL] [--from-user-info U:P] [--to-user-info U:P]
//! ```
//! (`schemas` talks to the two schema registries over HTTP, not to the
//! broker: [`crate::schema_copy`].)
//! Every command takes `--bootstrap HOST:PORT` (es, default
//! 127.0.0.1:9092) and `--command-config FILE`. The source settings file is
//! a properties file of librdkafka settings (`security.protocol`,
//! `sasl.mechanism`, `sasl.username`, `sasl.password`, `ssl.ca.location`,
//! ...); they are stored in the metadata and never printed.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use es_kafka::handlers::mirror_admin::{MirrorRequest, MirrorResponse, ES_MIRROR};
use es_kafka::mirror::TopicStatus;
use es_meta::mirror::{MirrorLink, GROUP_SYNC_INTERVAL_MS_DEFAULT};

use crate::keys_remote::Remote;
use crate::settings::read_properties;

/// How long a broker may take to answer anything but a promotion.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, clap::Args)]
pub struct MirrorArgs {
    /// The es broker to talk to.
    #[arg(long, global = true, default_value = "127.0.0.1:9092")]
    bootstrap: String,
    /// Kafka client properties to log in with (as `keys --bootstrap`).
    #[arg(long, global = true)]
    command_config: Option<PathBuf>,
    #[command(subcommand)]
    command: MirrorCommand,
}

#[derive(Debug, clap::Subcommand)]
enum MirrorCommand {
    /// Links to source clusters.
    #[command(subcommand)]
    Link(LinkCommand),
    /// Mirror topics.
    #[command(subcommand)]
    Topic(TopicCommand),
    /// The consumer groups whose offsets a link copies (replaces the lists).
    Groups {
        #[arg(long)]
        link: String,
        #[arg(long = "group")]
        groups: Vec<String>,
        #[arg(long = "group-pattern")]
        patterns: Vec<String>,
        #[arg(long)]
        group_sync_interval_ms: Option<u64>,
    },
    /// Per mirror topic and partition: source high watermark, mirrored end,
    /// lag, state.
    Status {
        topic: Option<String>,
        /// Print the answer as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stops copying a mirror topic (it stays read-only).
    Pause { topic: String },
    /// Copies a paused mirror topic again.
    Resume { topic: String },
    /// Cut-over: waits until caught up, copies group offsets a last time,
    /// stops mirroring and makes the topics writable.
    Promote {
        topics: Vec<String>,
        #[arg(long)]
        all: bool,
        /// Offsets a partition may still be behind.
        #[arg(long, default_value_t = 0)]
        max_lag: u64,
        #[arg(long, default_value_t = 60)]
        timeout_s: u64,
    },
    /// Copies a schema registry's schemas into es's registry with the same
    /// ids and versions (IMPORT mode), and the compatibility levels; safe
    /// to run again.
    Schemas(crate::schema_copy::SchemaCopyArgs),
}

#[derive(Debug, clap::Subcommand)]
enum LinkCommand {
    Create {
        name: String,
        #[arg(long)]
        source_bootstrap: String,
        /// librdkafka settings for the source (properties file).
        #[arg(long)]
        source_config: Option<PathBuf>,
        /// Change the link if it exists.
        #[arg(long)]
        replace: bool,
        /// Copy the source's ACL bindings to es and keep them in step (at
        /// every group sync); needs DESCRIBE on the source's cluster.
        #[arg(long)]
        sync_acls: bool,
        /// Copy the source's client quotas to es and keep them in step (at
        /// every group sync); needs DESCRIBE_CONFIGS on the source's
        /// cluster.
        #[arg(long)]
        sync_quotas: bool,
    },
    List,
    Describe {
        name: String,
    },
    Delete {
        name: String,
    },
}

#[derive(Debug, clap::Subcommand)]
enum TopicCommand {
    Create {
        topic: Option<String>,
        #[arg(long)]
        link: String,
        #[arg(long)]
        source_topic: Option<String>,
        #[arg(long)]
        pattern: Option<String>,
        #[arg(long, default_value = "")]
        prefix: String,
    },
}

pub fn run(a: &MirrorArgs) -> anyhow::Result<()> {
    if let MirrorCommand::Schemas(args) = &a.command {
        return crate::schema_copy::run(args);
    }
    let req = request(&a.command)?;
    // A promotion answers once done: wait for it, and a margin.
    let wait = match &a.command {
        MirrorCommand::Promote { timeout_s, .. } => {
            Duration::from_secs(timeout_s.saturating_add(30))
        }
        _ => ANSWER_TIMEOUT,
    };
    let mut remote = Remote::connect_with_timeout(&a.bootstrap, a.command_config.as_deref(), wait)?;
    let r: MirrorResponse = remote.call_json(ES_MIRROR, &req)?;
    if r.error_code != 0 {
        bail!(
            "the broker refused (error {}): {}",
            r.error_code,
            r.error_message.as_deref().unwrap_or("")
        );
    }
    match &a.command {
        MirrorCommand::Status { json: true, .. } => {
            println!("{}", serde_json::json!({ "topics": r.topics }));
        }
        MirrorCommand::Status { .. } => print_status(&r.topics),
        MirrorCommand::Link(LinkCommand::Describe { name }) => {
            let l = r
                .links
                .iter()
                .find(|l| &l.name == name)
                .with_context(|| format!("no mirror link {name}"))?;
            println!("{}", serde_json::to_string_pretty(l)?);
        }
        MirrorCommand::Link(_) | MirrorCommand::Groups { .. } => {
            for l in &r.links {
                print_link(l);
            }
        }
        MirrorCommand::Promote { .. } => {
            for t in &r.topics {
                println!("promoted {}", t.topic);
                for p in &t.partitions {
                    println!(
                        "  partition {}: log end {} (source high watermark {})",
                        p.partition, p.mirrored_end, p.source_high_watermark
                    );
                }
            }
        }
        _ => println!("ok"),
    }
    Ok(())
}

fn request(c: &MirrorCommand) -> anyhow::Result<MirrorRequest> {
    Ok(match c {
        MirrorCommand::Link(LinkCommand::Create {
            name,
            source_bootstrap,
            source_config,
            replace,
            sync_acls,
            sync_quotas,
        }) => {
            let source_config = match source_config {
                Some(p) => read_properties(p)?.into_iter().collect(),
                None => Default::default(),
            };
            MirrorRequest::LinkCreate {
                link: MirrorLink {
                    name: name.clone(),
                    source_bootstrap: source_bootstrap.clone(),
                    source_config,
                    topic_patterns: Vec::new(),
                    groups: Vec::new(),
                    group_patterns: Vec::new(),
                    group_sync_interval_ms: GROUP_SYNC_INTERVAL_MS_DEFAULT,
                    sync_acls: *sync_acls,
                    sync_quotas: *sync_quotas,
                    created_ms: now_ms(),
                },
                replace: *replace,
            }
        }
        MirrorCommand::Link(LinkCommand::List)
        | MirrorCommand::Link(LinkCommand::Describe { .. }) => MirrorRequest::LinkList,
        MirrorCommand::Link(LinkCommand::Delete { name }) => {
            MirrorRequest::LinkDelete { name: name.clone() }
        }
        MirrorCommand::Topic(TopicCommand::Create {
            topic,
            link,
            source_topic,
            pattern,
            prefix,
        }) => MirrorRequest::TopicCreate {
            link: link.clone(),
            topic: topic.clone(),
            source_topic: source_topic.clone(),
            pattern: pattern.clone(),
            prefix: prefix.clone(),
        },
        MirrorCommand::Groups {
            link,
            groups,
            patterns,
            group_sync_interval_ms,
        } => MirrorRequest::Groups {
            link: link.clone(),
            groups: groups.clone(),
            patterns: patterns.clone(),
            interval_ms: *group_sync_interval_ms,
        },
        MirrorCommand::Status { topic, .. } => MirrorRequest::Status {
            topic: topic.clone(),
        },
        MirrorCommand::Pause { topic } => MirrorRequest::Pause {
            topic: topic.clone(),
        },
        MirrorCommand::Resume { topic } => MirrorRequest::Resume {
            topic: topic.clone(),
        },
        MirrorCommand::Promote {
            topics,
            all,
            max_lag,
            timeout_s,
        } => {
            if topics.is_empty() != *all {
                bail!("name the topics to promote, or --all");
            }
            MirrorRequest::Promote {
                topics: topics.clone(),
                all: *all,
                max_lag: *max_lag,
                timeout_ms: timeout_s.saturating_mul(1000),
            }
        }
        MirrorCommand::Schemas(_) => bail!("`mirror schemas` sends no request to the broker"),
    })
}

fn print_link(l: &MirrorLink) {
    println!(
        "{}\tsource {}\tgroups {:?} patterns {:?}\ttopic patterns {}",
        l.name,
        l.source_bootstrap,
        l.groups,
        l.group_patterns,
        l.topic_patterns
            .iter()
            .map(|p| format!("{}{}", p.prefix, p.regex))
            .collect::<Vec<_>>()
            .join(",")
    );
}

fn print_status(topics: &[TopicStatus]) {
    println!("TOPIC\tPARTITION\tSTATE\tSOURCE_HW\tMIRRORED_END\tLAG\tRECORDS\tRECORDS/S");
    for t in topics {
        if t.partitions.is_empty() {
            println!("{}\t-\t{}\t-\t-\t-\t-\t-", t.topic, t.state);
        }
        for p in &t.partitions {
            println!(
                "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
                t.topic,
                p.partition,
                t.state,
                p.source_high_watermark,
                p.mirrored_end,
                p.lag,
                p.records_copied,
                p.records_per_second
            );
            if p.offsets_skipped > 0 {
                println!(
                    "  {}-{}: {} offsets deleted on the source before they were copied",
                    t.topic, p.partition, p.offsets_skipped
                );
            }
            if let Some(e) = &p.error {
                println!("  {}-{}: {e}", t.topic, p.partition);
            }
        }
        if let Some(e) = &t.error {
            println!("  {}: {e}", t.topic);
        }
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
