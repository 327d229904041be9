//! ApiVersions: what we advertise, straight from [`crate::versions::SUPPORTED`].
//!
//! KIP-511: a client may send an ApiVersions version newer than ours; we
//! cannot parse its body, so we answer in v0 (which every client can read)
//! with UNSUPPORTED_VERSION and, as Kafka does, only ApiVersions' own range,
//! and the client retries with the highest version listed.
//!
//! From v3 the client names its software; as Kafka's
//! `ApiVersionsRequest.isValid`, a name or version that is not
//! `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?` gets INVALID_REQUEST and no
//! ranges.

use bytes::Bytes;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};

use super::{encode_response, Ctx, RequestError};
use crate::errors::{code, ResponseError};
use crate::versions::{ApiRange, SUPPORTED};

fn api_keys<'a>(ranges: impl Iterator<Item = &'a ApiRange>) -> Vec<ApiVersion> {
    ranges
        .map(|a| {
            let mut v = ApiVersion::default();
            v.api_key = a.key as i16;
            v.min_version = a.min;
            v.max_version = a.max;
            v
        })
        .collect()
}

pub fn handle(ctx: &Ctx, req: ApiVersionsRequest) -> Result<Option<Bytes>, RequestError> {
    let mut r = ApiVersionsResponse::default();
    if ctx.version >= 3
        && !(is_software_token(&req.client_software_name)
            && is_software_token(&req.client_software_version))
    {
        r.error_code = code(ResponseError::InvalidRequest);
        return ctx.respond(&r);
    }
    r.api_keys = api_keys(SUPPORTED.iter());
    ctx.respond(&r)
}

/// Kafka's client software name and version pattern,
/// `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`, matched whole.
fn is_software_token(s: &str) -> bool {
    let b = s.as_bytes();
    let (Some(first), Some(last)) = (b.first(), b.last()) else {
        return false;
    };
    first.is_ascii_alphanumeric()
        && last.is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'.')
}

/// The KIP-511 answer to an ApiVersions request of a version we do not know.
pub fn fallback(correlation_id: i32) -> Result<Bytes, RequestError> {
    let mut r = ApiVersionsResponse::default();
    r.error_code = code(ResponseError::UnsupportedVersion);
    r.api_keys = api_keys(SUPPORTED.iter().filter(|a| a.key == ApiKey::ApiVersions));
    encode_response(ApiKey::ApiVersions, 0, correlation_id, &r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn software_names_follow_kafkas_pattern() {
        for ok in ["librdkafka", "apache-kafka-java", "2.12.1", "a", "x.y-z9"] {
            assert!(is_software_token(ok), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            ".a",
            "a.",
            "a b",
            "a_b",
            "caf\u{e9}",
            "\u{fffd}",
        ] {
            assert!(!is_software_token(bad), "{bad}");
        }
    }

    #[test]
    fn an_unknown_version_gets_only_api_versions_range() {
        let frame = fallback(9).expect("encodes");
        let mut body = frame.slice(8..); // size prefix, correlation id (header v0)
        let r = <ApiVersionsResponse as kafka_protocol::protocol::Decodable>::decode(&mut body, 0)
            .expect("decodes");
        assert_eq!(r.error_code, code(ResponseError::UnsupportedVersion));
        let keys: Vec<(i16, i16, i16)> = r
            .api_keys
            .iter()
            .map(|k| (k.api_key, k.min_version, k.max_version))
            .collect();
        let own = crate::versions::advertised(ApiKey::ApiVersions).expect("advertised");
        assert_eq!(keys, vec![(18, own.min, own.max)]);
    }
}
