//! `es-broker keys create|list|revoke`: the API keys SASL/PLAIN
//! authenticates (the username is the key's id, the password its secret).
//!
//! With `--data-dir` the command edits `DIR/api_keys.json` directly: how
//! the first super user gets a key, on a stopped node or beside a running
//! one (which reads the file again when it changes). The secret is printed
//! once, with the id, as `KEY_ID SECRET`; the file keeps only its argon2id
//! hash. Two commands on one directory at once are serialised by a lock
//! file.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::bail;
use es_auth::api_keys::ApiKeys;
use es_auth::principal::Principal;
use es_kafka::security::credentials::API_KEYS_FILE;

/// `es-broker keys`.
#[derive(Debug, clap::Args)]
pub struct KeysArgs {
    #[command(subcommand)]
    command: KeysCommand,
}

#[derive(Debug, clap::Subcommand)]
enum KeysCommand {
    /// Create a key acting as PRINCIPAL; prints `KEY_ID SECRET` once.
    Create {
        /// The broker's data directory.
        #[arg(long)]
        data_dir: PathBuf,
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
        #[arg(long)]
        data_dir: PathBuf,
    },
    /// Revoke a key: it authenticates no one from now on.
    Revoke {
        #[arg(long)]
        data_dir: PathBuf,
        /// The key's id.
        key_id: String,
    },
}

/// Holds `DIR/api_keys.json.lock` until dropped.
fn lock(dir: &std::path::Path) -> anyhow::Result<std::fs::File> {
    es_auth::api_keys::lock_dir(dir).map_err(|e| anyhow::anyhow!("{e}"))
}

pub fn run(args: &KeysArgs) -> anyhow::Result<()> {
    match &args.command {
        KeysCommand::Create {
            data_dir,
            principal,
            id,
            description,
        } => {
            let principal: Principal = principal
                .parse()
                .map_err(|e| anyhow::anyhow!("--principal {principal:?}: {e}"))?;
            let _lock = lock(data_dir)?;
            let path = data_dir.join(API_KEYS_FILE);
            let mut keys = ApiKeys::load(&path).map_err(|e| anyhow::anyhow!("{e}"))?;
            let now_ms = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
            let (key, secret) = match id {
                Some(id) => keys.create_named(id, principal, description.clone(), now_ms),
                None => keys.create(principal, description.clone(), now_ms),
            }
            .map_err(|e| anyhow::anyhow!("{e}"))?;
            keys.save(&path).map_err(|e| anyhow::anyhow!("{e}"))?;
            println!("{} {secret}", key.id);
        }
        KeysCommand::List { data_dir } => {
            let keys =
                ApiKeys::load(&data_dir.join(API_KEYS_FILE)).map_err(|e| anyhow::anyhow!("{e}"))?;
            for k in keys.list() {
                println!(
                    "{}\t{}\t{}\t{}{}",
                    k.id,
                    k.principal,
                    k.created_ms,
                    if k.revoked { "revoked" } else { "active" },
                    k.description
                        .as_deref()
                        .map(|d| format!("\t{d}"))
                        .unwrap_or_default()
                );
            }
        }
        KeysCommand::Revoke { data_dir, key_id } => {
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
