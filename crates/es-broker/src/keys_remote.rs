//! `es-broker keys ... --bootstrap HOST:PORT`: the `keys` commands through a
//! running broker's Kafka listener (es's API-keys request,
//! `es_kafka::handlers::api_keys`), logged in as a Kafka client properties
//! file says (`--command-config`, as Kafka's tools take it):
//! `security.protocol` PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL;
//! `sasl.mechanism=PLAIN` (or SCRAM-SHA-256/512) with the username and
//! password of `sasl.jaas.config` (an API key of a super user); `ssl.truststore.location`
//! (PEM) for TLS, and `ssl.keystore.location` (PEM: certificate chain and
//! key in one file) for a client certificate. The connection is es's own
//! client's (`es_client`), which also speaks SCRAM.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context};
use es_client::{ClientSettings, Connection};
use es_kafka::handlers::api_keys::{KeysRequest, KeysResponse, ES_API_KEYS};

/// How long the broker may take to answer.
const TIMEOUT: Duration = Duration::from_secs(30);

/// A connection to a broker, authenticated.
pub struct Remote {
    conn: Connection,
}

impl Remote {
    /// Connects to `bootstrap` and logs in as `config` (a Kafka client
    /// properties file; none: PLAINTEXT) says.
    pub fn connect(bootstrap: &str, config: Option<&Path>) -> anyhow::Result<Remote> {
        Remote::connect_with_timeout(bootstrap, config, TIMEOUT)
    }

    /// [`Remote::connect`], waiting up to `timeout` for each answer.
    pub fn connect_with_timeout(
        bootstrap: &str,
        config: Option<&Path>,
        timeout: Duration,
    ) -> anyhow::Result<Remote> {
        let props: BTreeMap<String, String> = match config {
            Some(path) => crate::settings::read_properties(path)?
                .into_iter()
                .collect(),
            None => BTreeMap::new(),
        };
        let mut settings = ClientSettings::from_java(&props, "es-broker-keys")?;
        settings.timeout = timeout;
        let conn = Connection::open(bootstrap, &settings)?;
        Ok(Remote { conn })
    }

    /// Sends one API-keys request; its answer, or its error.
    pub fn call(&mut self, req: &KeysRequest) -> anyhow::Result<KeysResponse> {
        let r: KeysResponse = self.call_json(ES_API_KEYS, req)?;
        if r.error_code != 0 {
            bail!(
                "the broker refused (error {}): {}",
                r.error_code,
                r.error_message.as_deref().unwrap_or("")
            );
        }
        Ok(r)
    }

    /// Sends one of es's own requests (api key `api_key`, version 0, a
    /// JSON body); its JSON answer.
    pub fn call_json<Req: serde::Serialize, Resp: serde::de::DeserializeOwned>(
        &mut self,
        api_key: i16,
        req: &Req,
    ) -> anyhow::Result<Resp> {
        let resp = self.conn.call_raw(api_key, &serde_json::to_vec(req)?)?;
        serde_json::from_slice(&resp).context("the broker's answer")
    }
}
