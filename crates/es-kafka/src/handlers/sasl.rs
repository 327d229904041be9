//! SaslHandshake and SaslAuthenticate outside a SASL exchange, as Kafka's
//! request handler answers them: on a listener without SASL, or after the
//! client has authenticated (a re-authentication's SaslHandshake never gets
//! here: the connection runs it, see `security::sasl`). Both get
//! ILLEGAL_SASL_STATE.

use bytes::Bytes;
use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::{Ctx, RequestError};
use crate::errors::{code, ResponseError};

pub fn handshake(ctx: &Ctx, _req: SaslHandshakeRequest) -> Result<Option<Bytes>, RequestError> {
    let mut r = SaslHandshakeResponse::default();
    r.error_code = code(ResponseError::IllegalSaslState);
    ctx.respond(&r)
}

pub fn authenticate(
    ctx: &Ctx,
    _req: SaslAuthenticateRequest,
) -> Result<Option<Bytes>, RequestError> {
    let mut r = SaslAuthenticateResponse::default();
    r.error_code = code(ResponseError::IllegalSaslState);
    r.error_message = Some(StrBytes::from_static_str(
        "SaslAuthenticate request received after successful authentication",
    ));
    ctx.respond(&r)
}
