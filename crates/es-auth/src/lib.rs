//! es-auth: who a client is and what it may do, with no Kafka wire in sight.
//!
//! - [`principal`]: `User:name` principals and Kafka's `ssl.principal.mapping.rules`
//!   from a client certificate's distinguished name;
//! - [`api_keys`]: PLAIN's credentials, API keys whose secrets are kept only as
//!   argon2id hashes (`data/api_keys.json`);
//! - [`scram`]: SCRAM-SHA-256/512 credentials (salted, never the password) and the
//!   server side of RFC 5802's exchange;
//! - [`acl`]: ACL bindings and filters and an authorizer with Kafka's
//!   StandardAuthorizer semantics.
//!
//! The Kafka layer (es-kafka) decodes SaslHandshake / SaslAuthenticate and the ACL
//! and SCRAM admin APIs and calls in here; the metadata quorum (es-meta) stores the
//! serialisable types of this crate in its log so every node enforces the same.

pub mod acl;
pub mod api_keys;
pub mod principal;
pub mod scram;
pub mod scram_client;
