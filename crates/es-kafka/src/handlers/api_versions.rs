//! ApiVersions: what we advertise, straight from [`crate::versions::SUPPORTED`].
//!
//! KIP-511: a client may send an ApiVersions version newer than ours; we
//! cannot parse its body, so we answer in v0 (which every client can read)
//! with UNSUPPORTED_VERSION and our ranges, and the client retries with the
//! highest version we listed.

use bytes::Bytes;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};

use super::{encode_response, Ctx, RequestError};
use crate::errors::{code, ResponseError};
use crate::versions::SUPPORTED;

fn api_keys() -> Vec<ApiVersion> {
    SUPPORTED
        .iter()
        .map(|a| {
            let mut v = ApiVersion::default();
            v.api_key = a.key as i16;
            v.min_version = a.min;
            v.max_version = a.max;
            v
        })
        .collect()
}

pub fn handle(ctx: &Ctx, _req: ApiVersionsRequest) -> Result<Option<Bytes>, RequestError> {
    let mut r = ApiVersionsResponse::default();
    r.api_keys = api_keys();
    ctx.respond(&r)
}

/// The KIP-511 answer to an ApiVersions request of a version we do not know.
pub fn fallback(correlation_id: i32) -> Result<Bytes, RequestError> {
    let mut r = ApiVersionsResponse::default();
    r.error_code = code(ResponseError::UnsupportedVersion);
    r.api_keys = api_keys();
    encode_response(ApiKey::ApiVersions, 0, correlation_id, &r)
}
