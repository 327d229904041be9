//! Every change the API can make to the registry, as a value: what a
//! write request asks for, applied by [`Registry::apply`] with the answer
//! the API sends. A value can be written to a log: a cluster's nodes apply
//! the same changes in the same order (the metadata log) and reach the
//! same registry, ids included, since applying is deterministic (no clock,
//! no randomness, ids from the state alone).

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::error::Result;
use crate::model::{Compatibility, Mode, NewSchema, VersionSpec};
use crate::registry::Registry;

/// One write of the API.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Change {
    /// `POST /subjects/{s}/versions`.
    Register {
        subject: String,
        schema: Box<NewSchema>,
        normalize: bool,
    },
    /// `DELETE /subjects/{s}`.
    DeleteSubject { subject: String, permanent: bool },
    /// `DELETE /subjects/{s}/versions/{v}` (the path's `{v}`, checked when
    /// applied).
    DeleteVersion {
        subject: String,
        version: String,
        permanent: bool,
    },
    /// `PUT /config[/{s}]`.
    SetConfig {
        subject: Option<String>,
        level: Compatibility,
    },
    /// `DELETE /config[/{s}]`.
    DeleteConfig { subject: Option<String> },
    /// `PUT /mode[/{s}]`.
    SetMode {
        subject: Option<String>,
        mode: Mode,
        force: bool,
    },
    /// `DELETE /mode/{s}`.
    DeleteMode { subject: String },
}

/// A boxed future, as [`Replicated`]'s methods return.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// A log the registry's changes go through when several nodes serve one
/// registry (es-broker: the cluster's metadata log). With one, a write is
/// [`Replicated::change`] (whichever node it arrives at, the log's leader
/// orders it) and the embedder hands every node's applied registry to
/// [`crate::server::Shared::set_committed`]; a read first waits on
/// [`Replicated::barrier`], so that it sees every write answered before it
/// began, on any node.
pub trait Replicated: Send + Sync + fmt::Debug + 'static {
    /// Commits `change` through the log; the answer once this node serves
    /// a registry that holds it.
    fn change(&self, change: Change) -> BoxFuture<Result<Value>>;

    /// Waits until this node has applied every change committed before
    /// the call.
    fn barrier(&self) -> BoxFuture<Result<()>>;
}

impl Registry {
    /// Applies `change`: the API's answer, or why it was refused (then the
    /// registry is as it was only if the caller works on a copy, as
    /// [`crate::server::Shared`] and the metadata log's apply do).
    pub fn apply(&mut self, change: &Change) -> Result<Value> {
        Ok(match change {
            Change::Register {
                subject,
                schema,
                normalize,
            } => {
                let reg = self.register(subject, schema, *normalize)?;
                // Confluent's answer carries the metadata and rule set the
                // schema was stored with (given, or inherited from the
                // latest version).
                let mut out = json!({"id": reg.id});
                if let Ok(stored) = self.schema_by_id(reg.id) {
                    if let Some(m) = stored.metadata {
                        out["metadata"] = json!(m);
                    }
                    if let Some(rs) = stored.rule_set {
                        out["ruleSet"] = json!(rs);
                    }
                }
                out
            }
            Change::DeleteSubject { subject, permanent } => {
                json!(self.delete_subject(subject, *permanent)?)
            }
            Change::DeleteVersion {
                subject,
                version,
                permanent,
            } => json!(self.delete_version(subject, VersionSpec::parse(version)?, *permanent)?),
            Change::SetConfig { subject, level } => {
                json!({"compatibility": self.set_config(subject.as_deref(), *level)?.as_str()})
            }
            Change::DeleteConfig { subject } => {
                json!({"compatibilityLevel": self.delete_config(subject.as_deref())?.as_str()})
            }
            Change::SetMode {
                subject,
                mode,
                force,
            } => json!({"mode": self.set_mode(subject.as_deref(), *mode, *force)?.as_str()}),
            Change::DeleteMode { subject } => {
                json!({"mode": self.delete_mode(subject)?.as_str()})
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SchemaType;

    fn avro(schema: &str) -> NewSchema {
        NewSchema {
            schema_type: SchemaType::Avro,
            schema: schema.into(),
            references: Vec::new(),
            metadata: None,
            rule_set: None,
            id: None,
            version: None,
        }
    }

    #[test]
    fn changes_survive_a_round_trip_through_json_and_apply_alike() {
        let changes = vec![
            Change::SetConfig {
                subject: None,
                level: Compatibility::Full,
            },
            Change::Register {
                subject: "a-value".into(),
                schema: Box::new(avro(r#"{"type":"record","name":"A","fields":[]}"#)),
                normalize: false,
            },
            Change::Register {
                subject: "b-value".into(),
                schema: Box::new(avro(r#""string""#)),
                normalize: true,
            },
            Change::DeleteVersion {
                subject: "b-value".into(),
                version: "latest".into(),
                permanent: false,
            },
            Change::SetMode {
                subject: Some("a-value".into()),
                mode: Mode::Readonly,
                force: false,
            },
            Change::DeleteVersion {
                subject: "nope".into(),
                version: "0".into(),
                permanent: false,
            },
        ];
        let (mut one, mut two) = (Registry::new(), Registry::new());
        for c in &changes {
            let text = serde_json::to_string(c).expect("encode");
            let back: Change = serde_json::from_str(&text).expect("decode");
            assert_eq!(&back, c);
            assert_eq!(one.apply(c), two.apply(&back));
        }
        assert_eq!(one.state(), two.state());
        assert_eq!(
            one.schema_by_id(2).map(|s| s.schema),
            Ok(r#""string""#.into())
        );
    }
}
