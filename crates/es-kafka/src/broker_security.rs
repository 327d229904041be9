//! The broker's side of security: the [`Security`] state it holds for the
//! listeners and the handlers.

use std::sync::Arc;

use es_meta::image::MetaImage;
use es_meta::records::{MetaRequest, MetaResponse};

use super::Broker;
use crate::config::ConfigType;
use crate::errors::{AdminError, ResponseError};
use crate::security::settings::{
    ClientAuth, FAILED_AUTHENTICATION_DELAY_MS_DEFAULT, SASL_MAX_RECEIVE_SIZE_DEFAULT,
    STANDARD_AUTHORIZER,
};
use crate::security::Security;

impl Broker {
    /// Listener settings, credentials and the authorizer.
    pub fn security(&self) -> &Arc<Security> {
        &self.security
    }

    /// Takes the API keys of the applied metadata `image` (and writes them
    /// into `api_keys.json`). Blocking.
    pub(super) fn apply_api_keys(&self, image: &MetaImage) {
        if let Err(e) = self.security.credentials.set_metadata_keys(&image.api_keys) {
            tracing::error!(error = %e, "cannot write the API keys of the metadata to the keys file");
        }
    }

    /// Proposes to the metadata what this node's `api_keys.json` has and the
    /// metadata lacks (keys created or revoked with `es-broker keys
    /// --data-dir`), so that every node learns them. Returns how many keys
    /// were proposed; a refused key (a different key of its id exists, or
    /// it was revoked) is logged, and the file gets the metadata's version.
    pub async fn sync_api_keys(&self) -> Result<usize, AdminError> {
        let creds = self.security.credentials.clone();
        let keys = tokio::task::spawn_blocking(move || creds.to_propose())
            .await
            .map_err(|e| AdminError::new(ResponseError::UnknownServerError, e.to_string()))?;
        if keys.is_empty() {
            return Ok(0);
        }
        let n = keys.len();
        if let MetaResponse::Items { results } =
            self.propose(MetaRequest::PutApiKeys { keys }).await?
        {
            for r in results.iter().filter(|r| r.error_code != 0) {
                tracing::warn!(key = %r.name, why = r.message.as_deref().unwrap_or(""), "API key of the keys file refused by the metadata");
            }
        }
        tracing::info!(
            keys = n,
            "API keys of the keys file proposed to the metadata"
        );
        Ok(n)
    }
}

impl Broker {
    /// Kafka's `listeners` for DescribeConfigs: `NAME://HOST:PORT,...`
    /// where each listener is bound (the first: `--listen` when alone).
    pub(super) fn listeners_setting(&self) -> String {
        if self.config.listeners.is_empty() {
            return format!("PLAINTEXT://{}", self.config.listen);
        }
        self.config
            .listeners
            .iter()
            .map(|l| format!("{}://{}", l.name, l.bind))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Kafka's `advertised.listeners`.
    pub(super) fn advertised_listeners_setting(&self) -> String {
        self.listener_specs()
            .iter()
            .map(|l| format!("{}://{}:{}", l.name, l.advertised_host, l.advertised_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The security settings DescribeConfigs reports for this broker.
    pub(super) fn security_settings(&self) -> Vec<(&'static str, String, ConfigType, bool)> {
        let c = &self.security.config;
        let wide = c.broker_wide();
        let map = self
            .listener_specs()
            .iter()
            .map(|l| format!("{}:{}", l.name, l.protocol))
            .collect::<Vec<_>>()
            .join(",");
        let mut out = vec![
            (
                "listener.security.protocol.map",
                map,
                ConfigType::String,
                false,
            ),
            (
                "authorizer.class.name",
                if c.authorizer {
                    STANDARD_AUTHORIZER.to_string()
                } else {
                    String::new()
                },
                ConfigType::String,
                !c.authorizer,
            ),
            (
                "connections.max.reauth.ms",
                wide.max_reauth_ms.to_string(),
                ConfigType::Long,
                wide.max_reauth_ms == 0,
            ),
            (
                "sasl.enabled.mechanisms",
                wide.mechanisms.join(","),
                ConfigType::List,
                false,
            ),
            (
                "connection.failed.authentication.delay.ms",
                c.failed_authentication_delay_ms.to_string(),
                ConfigType::Int,
                c.failed_authentication_delay_ms == FAILED_AUTHENTICATION_DELAY_MS_DEFAULT,
            ),
            (
                "sasl.server.max.receive.size",
                c.sasl_max_receive_size.to_string(),
                ConfigType::Int,
                c.sasl_max_receive_size == SASL_MAX_RECEIVE_SIZE_DEFAULT,
            ),
            (
                "ssl.principal.mapping.rules",
                c.principal_mapping_rules.clone(),
                ConfigType::String,
                c.principal_mapping_rules == "DEFAULT",
            ),
        ];
        for (name, value, default) in c.connections.describe() {
            let ty = match name {
                "max.connections.per.ip.overrides" => ConfigType::String,
                "max.connections" | "max.connections.per.ip" => ConfigType::Int,
                _ => ConfigType::Long,
            };
            out.push((name, value, ty, default));
        }
        let auth = match wide.tls.client_auth {
            ClientAuth::None => "none",
            ClientAuth::Requested => "requested",
            ClientAuth::Required => "required",
        };
        out.push((
            "ssl.client.auth",
            auth.to_string(),
            ConfigType::String,
            wide.tls.client_auth == ClientAuth::None,
        ));
        out
    }
}
