//! Answers for APIs and versions we do not serve, in each API's own shape.
//!
//! Kafka clients only send what ApiVersions advertised, so these answers are
//! for old or confused clients: they get UNSUPPORTED_VERSION where the API's
//! response has a place for it, instead of a dropped connection. Produce
//! v0-2 (advertised for librdkafka's sake, KAFKA-18659, but refused as Kafka
//! 4 does) is parsed by hand here, since the kafka-protocol crate starts at
//! v3; every partition gets UNSUPPORTED_VERSION, and acks=0 gets nothing.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::*;

use super::{encode_response, RequestError};
use crate::codec::frame::REQUEST_HEADER_PREFIX_BYTES;
use crate::errors::{code, ResponseError};

/// Builds the UNSUPPORTED_VERSION answer to `key` at `version`, or a
/// [`RequestError`] when the API's response has nowhere to put it.
pub fn respond(key: ApiKey, version: i16, frame: Bytes) -> Result<Option<Bytes>, RequestError> {
    let correlation_id = frame
        .get(4..8)
        .map_or(0, |b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    tracing::debug!(?key, version, "answering unsupported API version");
    if key == ApiKey::Produce && version < crate::versions::PRODUCE_SERVED_MIN {
        return legacy_produce(version, correlation_id, frame);
    }
    let unsupported = code(ResponseError::UnsupportedVersion);
    macro_rules! top_level_error {
        ($($k:ident => $resp:ty),* $(,)?) => {
            match key {
                $(ApiKey::$k => {
                    let mut r = <$resp>::default();
                    r.error_code = unsupported;
                    Some(encode_response(key, version, correlation_id, &r))
                })*
                _ => None,
            }
        };
    }
    let answer = top_level_error! {
        JoinGroup => JoinGroupResponse,
        Heartbeat => HeartbeatResponse,
        LeaveGroup => LeaveGroupResponse,
        SyncGroup => SyncGroupResponse,
        ListGroups => ListGroupsResponse,
        SaslHandshake => SaslHandshakeResponse,
        InitProducerId => InitProducerIdResponse,
        EndTxn => EndTxnResponse,
        AddOffsetsToTxn => AddOffsetsToTxnResponse,
        SaslAuthenticate => SaslAuthenticateResponse,
        FindCoordinator => FindCoordinatorResponse,
        OffsetFetch => OffsetFetchResponse,
        DescribeAcls => DescribeAclsResponse,
        ConsumerGroupHeartbeat => ConsumerGroupHeartbeatResponse,
        GetTelemetrySubscriptions => GetTelemetrySubscriptionsResponse,
        PushTelemetry => PushTelemetryResponse,
        ListTransactions => ListTransactionsResponse,
        DescribeUserScramCredentials => DescribeUserScramCredentialsResponse,
        ListPartitionReassignments => ListPartitionReassignmentsResponse,
        AlterPartitionReassignments => AlterPartitionReassignmentsResponse,
        OffsetDelete => OffsetDeleteResponse,
        DescribeClientQuotas => DescribeClientQuotasResponse,
        CreateDelegationToken => CreateDelegationTokenResponse,
        RenewDelegationToken => RenewDelegationTokenResponse,
        ExpireDelegationToken => ExpireDelegationTokenResponse,
        DescribeDelegationToken => DescribeDelegationTokenResponse,
        ShareGroupHeartbeat => ShareGroupHeartbeatResponse,
        UpdateFeatures => UpdateFeaturesResponse,
        ElectLeaders => ElectLeadersResponse,
        DescribeQuorum => DescribeQuorumResponse,
        AddPartitionsToTxn => AddPartitionsToTxnResponse,
    };
    match answer {
        Some(r) => r.map(Some),
        None => Err(RequestError::UnsupportedVersion { key, version }),
    }
}

fn short(what: &str) -> RequestError {
    RequestError::InvalidRequest(format!("Produce v0-2 request truncated in {what}"))
}

fn get_i16(b: &mut Bytes, what: &str) -> Result<i16, RequestError> {
    if b.remaining() < 2 {
        return Err(short(what));
    }
    Ok(b.get_i16())
}

fn get_i32(b: &mut Bytes, what: &str) -> Result<i32, RequestError> {
    if b.remaining() < 4 {
        return Err(short(what));
    }
    Ok(b.get_i32())
}

/// Takes a length-prefixed field (`i16` or `i32` length, -1 = null).
fn take(b: &mut Bytes, len: i64, what: &str) -> Result<Bytes, RequestError> {
    if len < 0 {
        return Ok(Bytes::new());
    }
    let n = usize::try_from(len).map_err(|_| short(what))?;
    if b.remaining() < n {
        return Err(short(what));
    }
    Ok(b.split_to(n))
}

/// Produce v0-2: `acks i16, timeout i32, [name string, [partition i32, records bytes]]`
/// after a v1 request header; answered per partition with UNSUPPORTED_VERSION.
fn legacy_produce(
    version: i16,
    correlation_id: i32,
    mut b: Bytes,
) -> Result<Option<Bytes>, RequestError> {
    if b.remaining() < REQUEST_HEADER_PREFIX_BYTES {
        return Err(short("header"));
    }
    b.advance(REQUEST_HEADER_PREFIX_BYTES);
    let client_id_len = get_i16(&mut b, "client id")?;
    take(&mut b, i64::from(client_id_len), "client id")?;
    let acks = get_i16(&mut b, "acks")?;
    let _timeout = get_i32(&mut b, "timeout")?;
    let topics = get_i32(&mut b, "topic count")?;
    let mut body = BytesMut::new();
    body.put_i32(topics.max(0));
    for _ in 0..topics.max(0) {
        let name_len = get_i16(&mut b, "topic name")?;
        let name = take(&mut b, i64::from(name_len), "topic name")?;
        body.put_i16(name_len.max(0));
        body.put_slice(&name);
        let partitions = get_i32(&mut b, "partition count")?;
        body.put_i32(partitions.max(0));
        for _ in 0..partitions.max(0) {
            let p = get_i32(&mut b, "partition")?;
            let records_len = get_i32(&mut b, "records")?;
            take(&mut b, i64::from(records_len), "records")?;
            body.put_i32(p);
            body.put_i16(code(ResponseError::UnsupportedVersion));
            body.put_i64(-1);
            if version >= 2 {
                body.put_i64(-1);
            }
        }
    }
    if version >= 1 {
        body.put_i32(0); // throttle_time_ms
    }
    tracing::info!(version, "refused Produce below v3 with UNSUPPORTED_VERSION");
    if acks == 0 {
        return Ok(None);
    }
    let mut out = BytesMut::with_capacity(8 + body.len());
    let size = i32::try_from(4 + body.len()).map_err(|_| RequestError::ResponseTooLarge {
        key: ApiKey::Produce,
        bytes: 4 + body.len(),
    })?;
    out.put_i32(size);
    out.put_i32(correlation_id);
    out.put_slice(&body);
    Ok(Some(out.freeze()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_produce_answers_every_partition() {
        let mut req = BytesMut::new();
        req.put_i16(0); // api key
        req.put_i16(2); // version
        req.put_i32(77); // correlation id
        req.put_i16(-1); // null client id
        req.put_i16(1); // acks
        req.put_i32(1000);
        req.put_i32(1);
        req.put_i16(1);
        req.put_slice(b"t");
        req.put_i32(2);
        for p in 0..2 {
            req.put_i32(p);
            req.put_i32(3);
            req.put_slice(b"abc");
        }
        let out = legacy_produce(2, 77, req.freeze())
            .expect("parses")
            .expect("answers");
        let mut b = out;
        let size = b.get_i32() as usize;
        assert_eq!(size, b.remaining());
        assert_eq!(b.get_i32(), 77);
        assert_eq!(b.get_i32(), 1);
        assert_eq!(b.get_i16(), 1);
        assert_eq!(b.get_u8(), b't');
        assert_eq!(b.get_i32(), 2);
        for p in 0..2 {
            assert_eq!(b.get_i32(), p);
            assert_eq!(b.get_i16(), 35);
            assert_eq!(b.get_i64(), -1);
            assert_eq!(b.get_i64(), -1);
        }
        assert_eq!(b.get_i32(), 0);
        assert_eq!(b.remaining(), 0);
    }

    #[test]
    fn truncated_legacy_produce_is_an_error() {
        let mut req = BytesMut::new();
        req.put_i16(0);
        req.put_i16(0);
        req.put_i32(1);
        req.put_i16(-1);
        req.put_i16(1);
        req.put_i32(5);
        req.put_i32(1_000_000);
        assert!(legacy_produce(0, 1, req.freeze()).is_err());
    }

    #[test]
    fn unknown_group_api_gets_unsupported_version() {
        let mut req = BytesMut::new();
        req.put_i16(ApiKey::Heartbeat as i16);
        req.put_i16(0);
        req.put_i32(5);
        let out = respond(ApiKey::Heartbeat, 0, req.freeze())
            .expect("answers")
            .expect("a frame");
        let mut b = out;
        b.advance(4);
        assert_eq!(b.get_i32(), 5);
        assert_eq!(b.get_i16(), 35);
    }
}
