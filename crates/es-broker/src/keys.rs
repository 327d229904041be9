//! `es-broker keys create|list|revoke`: the API keys SASL/PLAIN
//! authenticates (the username is the key's id, the password its secret).
//!
//! With `--data-dir` the command edits `DIR/api_keys.json` directly: how
//! the first super user gets a key, on a stopped node or beside a running
//! one (which reads the file again when it changes and proposes the change
//! to the cluster metadata). With `--bootstrap` it goes through a running
//! broker's Kafka listener instead, logged in as `--command-config` says
//! (`keys_remote`). The secret is printed once, with the id, as `KEY_ID
//! SECRET`; only its argon2id hash is stored, and with `--bootstrap` only
//! the hash travels. Two commands on one directory at once are serialised by
//! a lock file.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use es_auth::api_keys::{ApiKey, ApiKeys};
use es_auth::principal::Principal;
use es_kafka::handlers::api_keys::KeysRequest;
use es_kafka::security::credentials::API_KEYS_FILE;

use crate::keys_remote;

/// `es-broker keys`.
/// `es-broker keys`.
#[derive(Debug, clap::Args)]
pub struct KeysArgs {
    #[command(subcommand)]
    command: KeysCommand,
}

/// Where the keys are: a data directory, or a running broker.
#[derive(Debug, Clone, clap::Args)]
#[group(required = true, multiple = false)]
pub struct Target {
    /// The broker's data directory (`api_keys.json` there).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// A running broker's Kafka listener, HOST:PORT; needs ALTER (create,
    /// revoke) or DESCRIBE (list) on the cluster when an authorizer runs.
    #[arg(long)]
    bootstrap: Option<String>,
}

#[derive(Debug, clap::Subcommand)]
enum KeysCommand {
    /// Create a key acting as PRINCIPAL; prints `KEY_ID SECRET` once.
    Create {
        #[command(flatten)]
        target: Target,
        /// With --bootstrap: a Kafka client properties file (security.protocol,
        /// sasl.mechanism=PLAIN, sasl.jaas.config, ssl.truststore.location).
        #[arg(long, requires = "bootstrap")]
        command_config: Option<PathBuf>,
        /// The principal the key acts as, e.g. User:alice.
        #[arg(long)]
        principal: String,
        /// The key's id, the PLAIN username clients give (default: 16
        /// random characters). Letters, digits and `._@-`; never reused.
        #[arg(long)]
        id: Option<String>,
        /// A note for `keys list`.
        #[arg(long)]
        description: Option<String>,
    },
    /// List keys (ids, principals, creation times; never secrets).
    List {
        #[command(flatten)]
        target: Target,
        #[arg(long, requires = "bootstrap")]
        command_config: Option<PathBuf>,
    },
    /// Revoke a key: it authenticates no one from now on.
    Revoke {
        #[command(flatten)]
        target: Target,
        #[arg(long, requires = "bootstrap")]
        command_config: Option<PathBuf>,
        /// The key's id.
        key_id: String,
    },
}

/// Holds `DIR/api_keys.json.lock` until dropped.
fn lock(dir: &std::path::Path) -> anyhow::Result<std::fs::File> {
    es_auth::api_keys::lock_dir(dir).map_err(|e| anyhow::anyhow!("{e}"))
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn print_key(id: &str, principal: &str, created_ms: i64, revoked: bool, description: Option<&str>) {
    println!(
        "{id}\t{principal}\t{created_ms}\t{}{}",
        if revoked { "revoked" } else { "active" },
        description.map(|d| format!("\t{d}")).unwrap_or_default()
    );
}

/// A new key in `keys`, named `id` or at random: the key and its secret.
fn new_key(
    keys: &mut ApiKeys,
    id: Option<&str>,
    principal: Principal,
    description: &Option<String>,
) -> anyhow::Result<(ApiKey, String)> {
    match id {
        Some(id) => keys.create_named(id, principal, description.clone(), now_ms()),
        None => keys.create(principal, description.clone(), now_ms()),
    }
    .map_err(|e| anyhow::anyhow!("{e}"))
}

pub fn run(args: &KeysArgs) -> anyhow::Result<()> {
    let remote = |target: &Target, config: &Option<PathBuf>| {
        target
            .bootstrap
            .as_deref()
            .map(|b| keys_remote::Remote::connect(b, config.as_deref()))
            .transpose()
    };
    match &args.command {
        KeysCommand::Create {
            target,
            command_config,
            principal,
            id,
            description,
        } => {
            let principal: Principal = principal
                .parse()
                .map_err(|e| anyhow::anyhow!("--principal {principal:?}: {e}"))?;
            if let Some(mut broker) = remote(target, command_config)? {
                // Made here, hashed here: only the hash goes to the broker.
                let (key, secret) =
                    new_key(&mut ApiKeys::new(), id.as_deref(), principal, description)?;
                broker.call(&KeysRequest::Create { key: key.clone() })?;
                println!("{} {secret}", key.id);
                return Ok(());
            }
            let data_dir = target.data_dir.as_deref().context("--data-dir")?;
            let _lock = lock(data_dir)?;
            let path = data_dir.join(API_KEYS_FILE);
            let mut keys = ApiKeys::load(&path).map_err(|e| anyhow::anyhow!("{e}"))?;
            let (key, secret) = new_key(&mut keys, id.as_deref(), principal, description)?;
            keys.save(&path).map_err(|e| anyhow::anyhow!("{e}"))?;
            println!("{} {secret}", key.id);
        }
        KeysCommand::List {
            target,
            command_config,
        } => {
            if let Some(mut broker) = remote(target, command_config)? {
                for k in broker.call(&KeysRequest::List)?.keys {
                    print_key(
                        &k.id,
                        &k.principal,
                        k.created_ms,
                        k.revoked,
                        k.description.as_deref(),
                    );
                }
                return Ok(());
            }
            let data_dir = target.data_dir.as_deref().context("--data-dir")?;
            let keys =
                ApiKeys::load(&data_dir.join(API_KEYS_FILE)).map_err(|e| anyhow::anyhow!("{e}"))?;
            for k in keys.list() {
                let principal = k.principal.to_string();
                print_key(
                    &k.id,
                    &principal,
                    k.created_ms,
                    k.revoked,
                    k.description.as_deref(),
                );
            }
        }
        KeysCommand::Revoke {
            target,
            command_config,
            key_id,
        } => {
            if let Some(mut broker) = remote(target, command_config)? {
                broker.call(&KeysRequest::Revoke { id: key_id.clone() })?;
                println!("revoked {key_id}");
                return Ok(());
            }
            let data_dir = target.data_dir.as_deref().context("--data-dir")?;
            let _lock = lock(data_dir)?;
            let path = data_dir.join(API_KEYS_FILE);
            let mut keys = ApiKeys::load(&path).map_err(|e| anyhow::anyhow!("{e}"))?;
            if !keys.revoke(key_id) {
                bail!("no active key {key_id}");
            }
            keys.save(&path).map_err(|e| anyhow::anyhow!("{e}"))?;
            println!("revoked {key_id}");
        }
    }
    Ok(())
}
