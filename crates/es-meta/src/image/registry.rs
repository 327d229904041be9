//! The schema registry in the metadata image: es-registry's [`Registry`],
//! changed only by [`MetaRequest::RegistryChange`](crate::MetaRequest)
//! entries, so every node of a cluster serves the same registry with the
//! same ids. A change is applied to a copy, which replaces the registry
//! only when it succeeded and changed something (a refused change leaves
//! nothing behind, as in a single node's registry). Snapshots hold the
//! registry's state in the form `schemas.json` has; loading one checks it
//! as loading that file does.

use std::sync::Arc;

use es_registry::registry::State;
use es_registry::{Change, Registry};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::MetaEvent;
use crate::records::MetaResponse;

/// The registry, shared between images until a change replaces it.
#[derive(Clone, Debug, Default)]
pub struct RegistryImage(Arc<Registry>);

impl RegistryImage {
    /// The registry as of the last applied entry.
    pub fn registry(&self) -> &Registry {
        &self.0
    }

    /// The registry, shared (two images hold the same registry when it is
    /// the same allocation).
    pub fn shared(&self) -> &Arc<Registry> {
        &self.0
    }

    /// Nothing was ever registered or set.
    pub fn is_empty(&self) -> bool {
        *self.0.state() == State::default()
    }

    pub(super) fn apply(&mut self, change: &Change, ev: &mut Vec<MetaEvent>) -> MetaResponse {
        let mut next = Registry::clone(&self.0);
        let result = next.apply(change);
        if result.is_ok() && next.state() != self.0.state() {
            self.0 = Arc::new(next);
            ev.push(MetaEvent::Registry);
        }
        MetaResponse::Registry { result }
    }
}

impl PartialEq for RegistryImage {
    fn eq(&self, other: &Self) -> bool {
        self.0.state() == other.0.state()
    }
}

impl Eq for RegistryImage {}

impl Serialize for RegistryImage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.state().serialize(s)
    }
}

impl<'de> Deserialize<'de> for RegistryImage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let state = State::deserialize(d)?;
        Registry::from_state(state)
            .map(|r| RegistryImage(Arc::new(r)))
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MetaImage, MetaRequest};
    use es_registry::model::{Compatibility, NewSchema, SchemaType};

    fn register(subject: &str, schema: &str) -> MetaRequest {
        MetaRequest::RegistryChange {
            change: Change::Register {
                subject: subject.into(),
                schema: Box::new(NewSchema {
                    schema_type: SchemaType::Avro,
                    schema: schema.into(),
                    references: Vec::new(),
                    metadata: None,
                    rule_set: None,
                    id: None,
                    version: None,
                }),
                normalize: false,
            },
        }
    }

    #[test]
    fn registry_changes_apply_alike_and_survive_a_snapshot() {
        let mut image = MetaImage::default();
        let (r, ev) = image.apply(1, &register("a-value", r#""string""#));
        assert_eq!(
            r,
            MetaResponse::Registry {
                result: Ok(serde_json::json!({"id": 1}))
            }
        );
        assert_eq!(ev, vec![MetaEvent::Registry]);
        // The same schema again: the same id, nothing changed, no event.
        let (r, ev) = image.apply(2, &register("b-value", r#""string""#));
        assert_eq!(
            r,
            MetaResponse::Registry {
                result: Ok(serde_json::json!({"id": 1}))
            }
        );
        assert_eq!(ev, vec![MetaEvent::Registry], "b-value is a new subject");
        let (r, ev) = image.apply(3, &register("b-value", r#""string""#));
        assert!(matches!(r, MetaResponse::Registry { result: Ok(_) }));
        assert!(ev.is_empty(), "{ev:?}");
        // A refused change: BACKWARD refuses an int after a string.
        let before = image.registry.clone();
        let (r, ev) = image.apply(4, &register("a-value", r#""int""#));
        assert!(
            matches!(&r, MetaResponse::Registry { result: Err(e) } if e.code() == 409),
            "{r:?}"
        );
        assert!(ev.is_empty());
        assert_eq!(image.registry, before);
        let (_, ev) = image.apply(
            5,
            &MetaRequest::RegistryChange {
                change: Change::SetConfig {
                    subject: None,
                    level: Compatibility::None,
                },
            },
        );
        assert_eq!(ev, vec![MetaEvent::Registry]);
        // Through a snapshot's encoding and back.
        let text = serde_json::to_string(&image).expect("encode");
        let back: MetaImage = serde_json::from_str(&text).expect("decode");
        assert_eq!(back, image);
        assert_eq!(
            back.registry.registry().subjects("", false),
            ["a-value", "b-value"]
        );
        // An image without a registry encodes without the field.
        let empty = serde_json::to_value(MetaImage::default()).expect("encode");
        assert!(empty.get("registry").is_none(), "{empty}");
    }
}
