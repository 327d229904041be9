//! Checking a config value against its entry in the table: the one place a
//! topic or dynamic broker config value is accepted or refused, and the
//! typed [`ConfigError`] that says why.

use super::broker_only::broker_dynamic_def;
use super::table::{topic_config_def, Check, TopicConfigDef};

/// Why a config value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("unknown topic config name: {0}")]
    UnknownName(String),
    #[error("invalid value {value:?} for configuration {name}: {why}")]
    InvalidValue {
        name: String,
        value: String,
        why: String,
    },
    #[error("configuration {0} must have a value")]
    NullValue(String),
}

fn bad(name: &str, value: &str, why: impl Into<String>) -> ConfigError {
    ConfigError::InvalidValue {
        name: name.to_string(),
        value: value.to_string(),
        why: why.into(),
    }
}

/// Checks one topic config value; the value is trimmed as Kafka does.
pub fn validate_topic_config(name: &str, value: Option<&str>) -> Result<(), ConfigError> {
    let d = topic_config_def(name).ok_or_else(|| ConfigError::UnknownName(name.to_string()))?;
    check_value(d, name, value)
}

/// Checks one dynamic broker config value (see [`broker_dynamic_def`]).
pub fn validate_broker_config(name: &str, value: Option<&str>) -> Result<(), ConfigError> {
    let d = broker_dynamic_def(name).ok_or_else(|| ConfigError::UnknownName(name.to_string()))?;
    check_value(d, name, value)
}

/// Checks `value` against `d`'s rule; errors name the config `name`.
fn check_value(d: &TopicConfigDef, name: &str, value: Option<&str>) -> Result<(), ConfigError> {
    let v = value
        .ok_or_else(|| ConfigError::NullValue(name.to_string()))?
        .trim();
    match d.check {
        Check::Any => Ok(()),
        Check::Bool => match v.to_ascii_lowercase().as_str() {
            "true" | "false" => Ok(()),
            _ => Err(bad(name, v, "expected true or false")),
        },
        Check::Long { min, max } | Check::Int { min, max } => {
            let n: i64 = v.parse().map_err(|_| bad(name, v, "not an integer"))?;
            if n < min || n > max {
                return Err(bad(name, v, format!("must be in [{min}, {max}]")));
            }
            Ok(())
        }
        Check::Double { min, max } => {
            let n: f64 = v.parse().map_err(|_| bad(name, v, "not a number"))?;
            if !(min..=max).contains(&n) {
                return Err(bad(name, v, format!("must be in [{min}, {max}]")));
            }
            Ok(())
        }
        Check::OneOf(allowed) => {
            if allowed.contains(&v) {
                Ok(())
            } else {
                Err(bad(
                    name,
                    v,
                    format!("must be one of {}", allowed.join(", ")),
                ))
            }
        }
        Check::ListOf(allowed) => {
            for item in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                if !allowed.contains(&item) {
                    return Err(bad(
                        name,
                        v,
                        format!("items must be in {}", allowed.join(", ")),
                    ));
                }
            }
            Ok(())
        }
    }
}
