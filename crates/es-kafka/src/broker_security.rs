//! The broker's side of security: the [`Security`] state it holds for the
//! listeners and the handlers.

use std::sync::Arc;

use super::Broker;
use crate::config::ConfigType;
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
            (
                "max.connections",
                self.config.connections_max.to_string(),
                ConfigType::Int,
                false,
            ),
        ];
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
