//! Request dispatch: the one boundary around the kafka-protocol crate.
//!
//! [`handle`] classifies a frame by (api key, version) against our
//! ApiVersions table ([`crate::versions`]) *before* decoding its body, then
//! decodes it with the crate at exactly that version, runs the API's handler
//! (one module per API family) and encodes the response with the matching
//! header version. Anything a client can send gets Kafka's answer: a served
//! API its response, a known-but-unserved one UNSUPPORTED_VERSION in its own
//! shape (see [`unsupported`]); only what Kafka's protocol has no answer
//! for ends the connection, for a typed [`CloseReason`] the connection logs
//! (bytes that cannot be parsed, a failed acks=0 produce, a bug).

pub mod acls;
pub mod admin;
pub mod api_keys;
pub mod api_versions;
pub mod authz;
pub mod client_quotas;
pub mod cluster;
pub mod durable;
pub mod fetch;
pub mod groups;
pub mod list_offsets;
pub mod metadata;
pub mod mirror_admin;
pub mod offset_for_leader_epoch;
pub mod past_crate;
pub mod produce;
pub mod route;
pub mod sasl;
pub mod scram;
pub mod share;
pub mod share_admin;
pub mod share_state;
pub mod throttle;
pub mod txn;
pub mod txn_verify;
pub mod unsupported;
pub mod write_txn_markers;

#[cfg(test)]
mod acls_tests;
#[cfg(test)]
mod client_quotas_tests;
#[cfg(test)]
mod internal_topics_tests;
#[cfg(test)]
mod throttle_tests;
#[cfg(test)]
pub(crate) mod wire_client;

use std::net::IpAddr;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable};

use es_auth::principal::Principal;

use crate::broker::Broker;
use crate::codec::frame::{self, ResponseFrame};
use crate::codec::share_wire::{self, HandRequest};
use crate::shares::sessions::ConnectionId;
use crate::turn::Turn;
use crate::versions::{self, Support};

/// Why a request closes its connection instead of being answered: Kafka's
/// protocol has no answer for it, so the connection logs the reason and
/// closes, as Kafka does.
#[derive(Debug, thiserror::Error)]
pub enum CloseReason {
    /// The frame's size or request header cannot be parsed.
    #[error(transparent)]
    MalformedFrame(#[from] frame::FrameError),
    /// An api key Kafka does not define.
    #[error("unknown api key {key} (version {version})")]
    UnknownApiKey { key: i16, version: i16 },
    /// A version past any whose layout we know, so not even an
    /// UNSUPPORTED_VERSION answer can be shaped for it.
    #[error("{key:?} v{version} is beyond any version we can parse")]
    UnparseableVersion { key: ApiKey, version: i16 },
    /// A version we do not serve, whose response has no error field.
    #[error("{key:?} v{version} is not supported and its response has no error field to say so")]
    UnsupportedVersion { key: ApiKey, version: i16 },
    /// The request header does not decode.
    #[error("cannot decode {key:?} v{version} request header: {detail}")]
    MalformedHeader {
        key: ApiKey,
        version: i16,
        detail: String,
    },
    /// The request body does not decode.
    #[error("cannot decode {key:?} v{version}: {detail}")]
    MalformedRequest {
        key: ApiKey,
        version: i16,
        detail: String,
    },
    /// The request decodes but holds what Kafka refuses by closing the
    /// connection (UNKNOWN elements in an ACL filter, a truncated Produce
    /// v0-2 body).
    #[error("{0}")]
    InvalidRequest(String),
    /// An acks=0 produce failed: closing the connection is the only signal
    /// such a client gets to refresh its metadata.
    #[error("acks=0 produce to partition {partition} failed with error {error}: {message}")]
    AcksZeroFailed {
        partition: i32,
        error: i16,
        message: String,
    },
    /// The response does not encode at the request's version (a bug).
    #[error("cannot encode {key:?} v{version} response: {detail}")]
    EncodeFailed {
        key: ApiKey,
        version: i16,
        detail: String,
    },
    /// The response exceeds what a frame's size field can say.
    #[error("{key:?} response of {bytes} bytes is too large")]
    ResponseTooLarge { key: ApiKey, bytes: usize },
    /// The versions table serves an API no handler is wired to (a bug).
    #[error("{key:?} is in the versions table but has no handler")]
    NoHandler { key: ApiKey },
    /// SASL authentication failed (its answer, if any, was sent first).
    #[error("authentication failed: {0}")]
    AuthenticationFailed(String),
    /// A handler's blocking task panicked or was cancelled.
    #[error("blocking task failed: {0}")]
    TaskFailed(#[from] tokio::task::JoinError),
}

impl CloseReason {
    /// Whether the reason is a fault of the broker rather than of the
    /// client or its request.
    pub fn is_broker_fault(&self) -> bool {
        matches!(
            self,
            CloseReason::EncodeFailed { .. }
                | CloseReason::ResponseTooLarge { .. }
                | CloseReason::NoHandler { .. }
                | CloseReason::TaskFailed(_)
        )
    }
}

/// The error of every handler: the connection closes, for this reason.
pub type RequestError = CloseReason;

/// Who sent a request, and over what.
#[derive(Clone, Debug)]
pub struct Client {
    /// The client's address, when the request came over a connection.
    pub peer: Option<IpAddr>,
    /// Who the client authenticated as (`User:ANONYMOUS` on a PLAINTEXT
    /// listener, or an SSL one without a client certificate).
    pub principal: Arc<Principal>,
    /// The listener the request arrived on; `None` for a request made
    /// inside the broker or by a test.
    pub listener: Option<Arc<str>>,
    /// The connection's mute, which a client over its quota is given
    /// ([`throttle`]); `None` outside a connection.
    pub throttle: Option<Arc<throttle::ConnThrottle>>,
    /// The connection's id (share sessions remember it, and its close
    /// releases them); `None` outside a connection.
    pub connection: Option<ConnectionId>,
}

impl Client {
    /// A request that did not come over a connection.
    pub fn internal() -> Self {
        Client {
            peer: None,
            principal: Arc::new(Principal::anonymous()),
            listener: None,
            throttle: None,
            connection: None,
        }
    }
}

/// What a handler needs to know about its request.
#[derive(Debug)]
pub struct Ctx {
    pub broker: Arc<Broker>,
    pub key: ApiKey,
    pub version: i16,
    pub header: RequestHeader,
    /// The client's address, when the request came over a connection.
    pub peer: Option<IpAddr>,
    /// Who sent the request ([`Client::principal`]).
    pub principal: Arc<Principal>,
    /// Made inside the broker or by a test, not over a listener: never
    /// refused for authorization.
    pub internal: bool,
    /// The request's size in bytes (after the size prefix), as Kafka's
    /// produce quota counts it.
    pub request_bytes: usize,
    /// What the request has used so far, for the quotas ([`throttle`]).
    pub usage: Arc<throttle::Usage>,
    /// The connection's mute.
    pub conn: Option<Arc<throttle::ConnThrottle>>,
    /// The connection's id ([`Client::connection`]).
    pub connection: Option<ConnectionId>,
}

impl Ctx {
    /// The client's host as Kafka reports it (DescribeGroups'
    /// `client_host`): Java's `InetAddress.toString()` of an unresolved
    /// address, "/" and the literal, IPv6 in full uncompressed groups
    /// ("/0:0:0:0:0:0:0:1"); empty when there is no connection.
    pub fn client_host(&self) -> String {
        match self.peer {
            None => String::new(),
            Some(IpAddr::V4(a)) => format!("/{a}"),
            Some(IpAddr::V6(a)) => {
                let groups: Vec<String> = a.segments().iter().map(|g| format!("{g:x}")).collect();
                format!("/{}", groups.join(":"))
            }
        }
    }

    /// Encodes `body` as this request's response frame.
    pub fn respond<T: Encodable>(&self, body: &T) -> Result<Option<Bytes>, RequestError> {
        encode_response(self.key, self.version, self.header.correlation_id, body).map(Some)
    }
}

/// Decodes a request body at `version`.
pub fn decode_body<T: Decodable>(
    body: &mut Bytes,
    key: ApiKey,
    version: i16,
) -> Result<T, RequestError> {
    T::decode(body, version).map_err(|e| CloseReason::MalformedRequest {
        key,
        version,
        detail: format!("{e:#}"),
    })
}

/// Builds a whole response frame: size, response header, body.
pub fn encode_response<T: Encodable>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &T,
) -> Result<Bytes, RequestError> {
    let header_version = key.response_header_version(version);
    let version = versions::crate_version(key, version);
    let mut header = ResponseHeader::default();
    header.correlation_id = correlation_id;
    let header_len = header
        .compute_size(header_version)
        .map_err(|e| encode_failed(key, version, e))?;
    let body_len = body
        .compute_size(version)
        .map_err(|e| encode_failed(key, version, e))?;
    let total = header_len + body_len;
    let size =
        i32::try_from(total).map_err(|_| CloseReason::ResponseTooLarge { key, bytes: total })?;
    let mut out = BytesMut::with_capacity(4 + total);
    out.put_i32(size);
    header
        .encode(&mut out, header_version)
        .map_err(|e| encode_failed(key, version, e))?;
    body.encode(&mut out, version)
        .map_err(|e| encode_failed(key, version, e))?;
    debug_assert_eq!(out.len(), 4 + total, "compute_size disagrees with encode");
    Ok(out.freeze())
}

fn encode_failed(key: ApiKey, version: i16, e: impl std::fmt::Display) -> RequestError {
    // A handler set a field the version cannot carry: a bug, but one that
    // must cost this connection only, never the broker.
    tracing::error!(?key, version, error = %e, "cannot encode response");
    CloseReason::EncodeFailed {
        key,
        version,
        detail: e.to_string(),
    }
}

/// Handles one request frame (the body after the size prefix). `Ok(None)` is
/// "send nothing" (a produce with acks=0). For requests that did not come
/// over a connection (tests, internal calls); see [`handle_from`].
/// The response comes back as one buffer.
pub async fn handle(
    broker: Arc<Broker>,
    frame: Bytes,
    turn: Turn,
) -> Result<Option<Bytes>, RequestError> {
    let r = handle_from(broker, Client::internal(), frame, turn).await?;
    Ok(r.map(ResponseFrame::into_bytes))
}

/// Handles one request frame from `client`: as a request on its listener
/// ([`crate::security::on_listener`]) when it has one.
pub async fn handle_from(
    broker: Arc<Broker>,
    client: Client,
    frame: Bytes,
    turn: Turn,
) -> Result<Option<ResponseFrame>, RequestError> {
    match client.listener.clone() {
        Some(l) => crate::security::on_listener(l, dispatch(broker, client, frame, turn)).await,
        None => dispatch(broker, client, frame, turn).await,
    }
}

async fn dispatch(
    broker: Arc<Broker>,
    client: Client,
    frame: Bytes,
    turn: Turn,
) -> Result<Option<ResponseFrame>, RequestError> {
    let prefix = frame::peek_request_header(&frame)?;
    if prefix.api_key == api_keys::ES_API_KEYS {
        let mut turn = turn;
        turn.wait().await;
        return Ok(Some(
            api_keys::handle(&broker, &client, &frame).await.into(),
        ));
    }
    if prefix.api_key == share_state::ES_SHARE_STATE {
        let mut turn = turn;
        turn.wait().await;
        return Ok(Some(
            share_state::handle(&broker, &client, &frame).await.into(),
        ));
    }
    if prefix.api_key == mirror_admin::ES_MIRROR {
        let mut turn = turn;
        turn.wait().await;
        return Ok(Some(
            mirror_admin::handle(&broker, &client, &frame).await.into(),
        ));
    }
    if prefix.api_key == share_admin::ES_SHARE_ADMIN {
        let mut turn = turn;
        turn.wait().await;
        return Ok(Some(
            share_admin::handle(&broker, &client, &frame).await.into(),
        ));
    }
    match versions::classify(prefix.api_key, prefix.api_version) {
        Support::UnknownKey => Err(CloseReason::UnknownApiKey {
            key: prefix.api_key,
            version: prefix.api_version,
        }),
        Support::Unparseable(ApiKey::ApiVersions) => {
            api_versions::fallback(prefix.correlation_id).map(|b| Some(b.into()))
        }
        Support::Unparseable(key) => Err(CloseReason::UnparseableVersion {
            key,
            version: prefix.api_version,
        }),
        Support::Unsupported(key) => {
            drop(turn);
            let r = unsupported::respond(key, prefix.api_version, frame)?;
            Ok(r.map(ResponseFrame::from))
        }
        Support::Served(key) => {
            let version = prefix.api_version;
            let header_version = key.request_header_version(version);
            let frame_bytes = frame.len();
            // No count or length in the request is trusted before it is held
            // against the bytes that follow it, and strings that are not
            // UTF-8 read as Kafka reads them (codec::shape).
            let mut body =
                match crate::codec::shape::check_frame(&frame, key as i16, version, header_version)
                {
                    Ok(None) => frame,
                    Ok(Some(repaired)) => Bytes::from(repaired),
                    Err(e) => {
                        return Err(CloseReason::MalformedRequest {
                            key,
                            version,
                            detail: e.to_string(),
                        })
                    }
                };
            let header = RequestHeader::decode(&mut body, header_version).map_err(|e| {
                CloseReason::MalformedHeader {
                    key,
                    version,
                    detail: format!("{e:#}"),
                }
            })?;
            let internal = client.listener.is_none();
            let usage = Arc::new(throttle::Usage::default());
            let finish = throttle::Finish {
                key,
                version,
                subject: (!internal).then(|| {
                    let client_id = header.client_id.clone().unwrap_or_default();
                    (client.principal.clone(), client_id)
                }),
                usage: usage.clone(),
                conn: client.throttle.clone(),
            };
            let ctx = Ctx {
                broker: broker.clone(),
                key,
                version,
                header,
                peer: client.peer,
                internal,
                principal: client.principal,
                request_bytes: frame_bytes,
                usage: usage.clone(),
                conn: client.throttle,
                connection: client.connection,
            };
            let r = throttle::Timed::new(served(ctx, body, turn), usage).await?;
            // Only responses encoded in one buffer need the dispatcher's
            // throttle time (Fetch writes its own).
            Ok(match r {
                Some(frame) if frame.parts().len() == 1 => finish
                    .finish(&broker, Some(frame.into_bytes()))
                    .map(ResponseFrame::from),
                other => {
                    let _ = finish.finish(&broker, None);
                    other
                }
            })
        }
    }
}

async fn served(
    ctx: Ctx,
    mut body: Bytes,
    mut turn: Turn,
) -> Result<Option<ResponseFrame>, RequestError> {
    // Bodies are decoded at the crate's version of the same shape; handlers
    // see the wire version in `ctx.version`.
    let (key, v) = (ctx.key, versions::crate_version(ctx.key, ctx.version));
    if matches!(key, ApiKey::ShareFetch | ApiKey::ShareAcknowledge) {
        // Both versions are decoded by share_wire (v1's bytes are the
        // crate's), so the handlers see one type.
        let request = decode_share(&mut body, key, ctx.version)?;
        // Share calls wait for fsyncs: in connection order to start, the
        // wait outside it (as Fetch).
        turn.wait().await;
        turn.finish();
        let r = match request {
            HandRequest::ShareFetch(req, x) => share::share_fetch(&ctx, req, x).await?,
            HandRequest::ShareAcknowledge(req, x) => share::share_acknowledge(&ctx, req, x).await?,
        };
        return Ok(r.map(ResponseFrame::from));
    }
    if key == ApiKey::Fetch {
        // Fetch writes its own response frame around its record batches.
        let req = decode_body(&mut body, key, v)?;
        turn.wait().await;
        turn.finish();
        return fetch::handle(&ctx, req).await;
    }
    let r = served_encoded(ctx, body, turn).await?;
    Ok(r.map(ResponseFrame::from))
}

/// Decodes a ShareFetch or ShareAcknowledge body at v1 or v2 with
/// `codec::share_wire` (v2 is [`versions::BY_HAND`]; v1's bytes are the
/// crate's, a test holds them together), failing as [`decode_body`] does.
fn decode_share(body: &mut Bytes, key: ApiKey, version: i16) -> Result<HandRequest, RequestError> {
    let malformed = |e: share_wire::WireError| CloseReason::MalformedRequest {
        key,
        version,
        detail: e.to_string(),
    };
    match key {
        ApiKey::ShareFetch => share_wire::decode_share_fetch_request(body, version)
            .map(|(r, x)| HandRequest::ShareFetch(r, x))
            .map_err(malformed),
        _ => share_wire::decode_share_acknowledge_request(body, version)
            .map(|(r, x)| HandRequest::ShareAcknowledge(r, x))
            .map_err(malformed),
    }
}

/// Decodes a request body at a [`versions::BY_HAND`] version, failing as
/// [`decode_body`] does.
pub fn decode_by_hand(
    body: &mut Bytes,
    key: ApiKey,
    version: i16,
) -> Result<HandRequest, RequestError> {
    share_wire::decode_request(key, version, body).map_err(|e| CloseReason::MalformedRequest {
        key,
        version,
        detail: e.to_string(),
    })
}

/// Every API but Fetch: the response is encoded by kafka-protocol into one buffer.
async fn served_encoded(
    ctx: Ctx,
    mut body: Bytes,
    mut turn: Turn,
) -> Result<Option<Bytes>, RequestError> {
    let (key, v) = (ctx.key, versions::crate_version(ctx.key, ctx.version));
    match key {
        ApiKey::Produce => produce::handle(&ctx, decode_body(&mut body, key, v)?, turn).await,
        // Group calls that park or wait for durability manage their turn
        // themselves: the state change in order, the wait outside it.
        ApiKey::JoinGroup => groups::join_group(&ctx, decode_body(&mut body, key, v)?, turn).await,
        ApiKey::SyncGroup => groups::sync_group(&ctx, decode_body(&mut body, key, v)?, turn).await,
        ApiKey::OffsetCommit => {
            groups::offset_commit(&ctx, decode_body(&mut body, key, v)?, turn).await
        }
        ApiKey::OffsetFetch => {
            groups::offset_fetch(&ctx, decode_body(&mut body, key, v)?, turn).await
        }
        ApiKey::OffsetDelete => {
            groups::offset_delete(&ctx, decode_body(&mut body, key, v)?, turn).await
        }
        _ => {
            // Everything else is quick: run it wholly in connection order.
            turn.wait().await;
            let r = match key {
                ApiKey::ApiVersions => api_versions::handle(&ctx, decode_body(&mut body, key, v)?),
                ApiKey::Metadata => metadata::handle(&ctx, decode_body(&mut body, key, v)?).await,
                ApiKey::ListOffsets => {
                    list_offsets::handle(&ctx, decode_body(&mut body, key, v)?).await
                }
                ApiKey::OffsetForLeaderEpoch => {
                    offset_for_leader_epoch::handle(&ctx, decode_body(&mut body, key, v)?)
                }
                ApiKey::CreateTopics => {
                    admin::create_topics(&ctx, decode_body(&mut body, key, v)?).await
                }
                ApiKey::DeleteTopics => {
                    admin::delete_topics(&ctx, decode_body(&mut body, key, v)?).await
                }
                ApiKey::CreatePartitions => {
                    admin::create_partitions(&ctx, decode_body(&mut body, key, v)?).await
                }
                ApiKey::DescribeConfigs => {
                    admin::describe_configs(&ctx, decode_body(&mut body, key, v)?)
                }
                ApiKey::AlterConfigs => {
                    admin::alter_configs(&ctx, decode_body(&mut body, key, v)?).await
                }
                ApiKey::IncrementalAlterConfigs => {
                    admin::incremental_alter_configs(&ctx, decode_body(&mut body, key, v)?).await
                }
                ApiKey::DescribeCluster => {
                    admin::describe_cluster(&ctx, decode_body(&mut body, key, v)?)
                }
                ApiKey::DescribeLogDirs => {
                    admin::describe_log_dirs(&ctx, decode_body(&mut body, key, v)?).await
                }
                ApiKey::DescribeTopicPartitions => {
                    admin::describe_topic_partitions(&ctx, decode_body(&mut body, key, v)?)
                }
                ApiKey::DeleteRecords => {
                    admin::delete_records(&ctx, decode_body(&mut body, key, v)?).await
                }
                ApiKey::ElectLeaders => {
                    admin::elect_leaders(&ctx, decode_body(&mut body, key, v)?).await
                }
                ApiKey::SaslHandshake => sasl::handshake(&ctx, decode_body(&mut body, key, v)?),
                ApiKey::SaslAuthenticate => {
                    sasl::authenticate(&ctx, decode_body(&mut body, key, v)?)
                }
                ApiKey::DescribeUserScramCredentials => {
                    scram::describe(&ctx, decode_body(&mut body, key, v)?)
                }
                ApiKey::AlterUserScramCredentials => {
                    scram::alter(&ctx, decode_body(&mut body, key, v)?).await
                }
                ApiKey::DescribeClientQuotas => {
                    client_quotas::describe(&ctx, decode_body(&mut body, key, v)?)
                }
                ApiKey::AlterClientQuotas => {
                    client_quotas::alter(&ctx, decode_body(&mut body, key, v)?).await
                }
                ApiKey::DescribeAcls => acls::describe_acls(&ctx, decode_body(&mut body, key, v)?),
                ApiKey::CreateAcls => {
                    acls::create_acls(&ctx, decode_body(&mut body, key, v)?).await
                }
                ApiKey::DeleteAcls => {
                    acls::delete_acls(&ctx, decode_body(&mut body, key, v)?).await
                }
                ApiKey::DescribeQuorum => {
                    cluster::describe_quorum(&ctx, decode_body(&mut body, key, v)?).await
                }
                ApiKey::ListPartitionReassignments => {
                    cluster::list_partition_reassignments(&ctx, decode_body(&mut body, key, v)?)
                }
                ApiKey::AlterPartitionReassignments => {
                    cluster::alter_partition_reassignments(&ctx, decode_body(&mut body, key, v)?)
                        .await
                }
                ApiKey::AlterReplicaLogDirs => {
                    cluster::alter_replica_log_dirs(&ctx, decode_body(&mut body, key, v)?)
                }
                ApiKey::ListConfigResources => {
                    cluster::list_config_resources(&ctx, decode_body(&mut body, key, v)?)
                }
                ApiKey::InitProducerId => {
                    txn::init_producer_id(&ctx, decode_body(&mut body, key, v)?).await
                }
                ApiKey::AddPartitionsToTxn => {
                    txn::add_partitions_to_txn(&ctx, decode_body(&mut body, key, v)?).await
                }
                ApiKey::AddOffsetsToTxn => {
                    txn::add_offsets_to_txn(&ctx, decode_body(&mut body, key, v)?).await
                }
                ApiKey::TxnOffsetCommit => {
                    txn::txn_offset_commit(&ctx, decode_body(&mut body, key, v)?).await
                }
                ApiKey::EndTxn => txn::end_txn(&ctx, decode_body(&mut body, key, v)?).await,
                ApiKey::WriteTxnMarkers => {
                    write_txn_markers::write_txn_markers(&ctx, decode_body(&mut body, key, v)?)
                        .await
                }
                ApiKey::DescribeTransactions => {
                    txn::describe_transactions(&ctx, decode_body(&mut body, key, v)?)
                }
                ApiKey::ListTransactions => {
                    txn::list_transactions(&ctx, decode_body(&mut body, key, v)?)
                }
                ApiKey::DescribeProducers => {
                    txn::describe_producers(&ctx, decode_body(&mut body, key, v)?).await
                }
                ApiKey::FindCoordinator => {
                    groups::find_coordinator(&ctx, decode_body(&mut body, key, v)?).await
                }
                ApiKey::Heartbeat => groups::heartbeat(&ctx, decode_body(&mut body, key, v)?),
                ApiKey::LeaveGroup => groups::leave_group(&ctx, decode_body(&mut body, key, v)?),
                ApiKey::DescribeGroups => {
                    groups::describe_groups(&ctx, decode_body(&mut body, key, v)?)
                }
                ApiKey::ListGroups => groups::list_groups(&ctx, decode_body(&mut body, key, v)?),
                ApiKey::DeleteGroups => {
                    groups::delete_groups(&ctx, decode_body(&mut body, key, v)?).await
                }
                ApiKey::ConsumerGroupHeartbeat => {
                    groups::consumer_group_heartbeat(&ctx, decode_body(&mut body, key, v)?)
                }
                ApiKey::ConsumerGroupDescribe => {
                    groups::consumer_group_describe(&ctx, decode_body(&mut body, key, v)?)
                }
                ApiKey::ShareGroupHeartbeat => {
                    groups::share_group_heartbeat(&ctx, decode_body(&mut body, key, v)?)
                }
                ApiKey::ShareGroupDescribe => {
                    groups::share_group_describe(&ctx, decode_body(&mut body, key, v)?)
                }
                ApiKey::DescribeShareGroupOffsets => {
                    groups::describe_share_group_offsets(&ctx, decode_body(&mut body, key, v)?)
                        .await
                }
                ApiKey::AlterShareGroupOffsets => {
                    groups::alter_share_group_offsets(&ctx, decode_body(&mut body, key, v)?).await
                }
                ApiKey::DeleteShareGroupOffsets => {
                    groups::delete_share_group_offsets(&ctx, decode_body(&mut body, key, v)?).await
                }
                other => Err(CloseReason::NoHandler { key: other }),
            };
            turn.finish();
            r
        }
    }
}

/// Runs blocking storage work off the async runtime.
pub async fn blocking<T, F>(f: F) -> Result<T, RequestError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    Ok(tokio::task::spawn_blocking(f).await?)
}

/// Kafka's controller gives up on a request whose deadline (now +
/// `timeout_ms`) has passed before the request runs: an admin request with a
/// timeout of 0 or less gets REQUEST_TIMED_OUT with this message, and
/// nothing is done.
pub fn controller_deadline_passed(
    timeout_ms: i32,
) -> Option<(crate::errors::ResponseError, &'static str)> {
    (timeout_ms <= 0).then_some((
        crate::errors::ResponseError::RequestTimedOut,
        "The request timed out before the controller processed it.",
    ))
}

/// Kafka's "authorized operations not requested" marker.
pub const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;

/// Topic operations a single-node broker without ACLs allows: READ(3),
/// WRITE(4), CREATE(5), DELETE(6), ALTER(7), DESCRIBE(8), DESCRIBE_CONFIGS(10),
/// ALTER_CONFIGS(11), as Kafka's bit set.
pub const TOPIC_OPERATIONS_ALL: i32 =
    (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 10) | (1 << 11);

/// Cluster operations: CREATE(5), ALTER(7), DESCRIBE(8), CLUSTER_ACTION(9),
/// DESCRIBE_CONFIGS(10), ALTER_CONFIGS(11), IDEMPOTENT_WRITE(12).
pub const CLUSTER_OPERATIONS_ALL: i32 =
    (1 << 5) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12);

#[cfg(test)]
mod tests {
    use super::*;

    /// What cannot be answered closes the connection for a typed reason.
    #[tokio::test]
    async fn unanswerable_requests_close_for_their_reason() {
        let dir = tempfile::tempdir().expect("tmp");
        let cfg = crate::broker::BrokerConfig::new(dir.path().join("data"), "127.0.0.1:0");
        let broker = Broker::open_running(cfg).await.expect("open");
        let frame = |key: i16, version: i16, rest: &[u8]| {
            let mut b = BytesMut::new();
            b.put_i16(key);
            b.put_i16(version);
            b.put_i32(7);
            b.put_slice(rest);
            b.freeze()
        };
        let short = handle(broker.clone(), Bytes::from_static(b"\0\0"), Turn::free()).await;
        assert!(
            matches!(short, Err(CloseReason::MalformedFrame(_))),
            "{short:?}"
        );
        let unknown = handle(broker.clone(), frame(9_999, 0, &[]), Turn::free()).await;
        assert!(
            matches!(
                unknown,
                Err(CloseReason::UnknownApiKey {
                    key: 9_999,
                    version: 0
                })
            ),
            "{unknown:?}"
        );
        // Metadata v1: a client id of 5 bytes, then nothing of the body.
        let mut rest = BytesMut::new();
        rest.put_i16(5);
        rest.put_slice(b"tests");
        let cut = handle(broker.clone(), frame(3, 1, &rest), Turn::free()).await;
        assert!(
            matches!(
                cut,
                Err(CloseReason::MalformedRequest {
                    key: ApiKey::Metadata,
                    ..
                })
            ),
            "{cut:?}"
        );
        // Metadata v12 (header v2) whose topics array claims 2^32 - 3
        // entries: refused before the crate sizes a Vec by it (this request
        // once aborted the broker).
        let mut rest = BytesMut::new();
        rest.put_i16(5);
        rest.put_slice(b"tests");
        rest.put_u8(0); // no header tags
        rest.put_slice(&[0xfe, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0]);
        let huge = handle(broker.clone(), frame(3, 12, &rest), Turn::free()).await;
        assert!(
            matches!(
                &huge,
                Err(CloseReason::MalformedRequest {
                    key: ApiKey::Metadata,
                    version: 12,
                    detail,
                }) if detail.starts_with("topics: 4294967293 elements")
            ),
            "{huge:?}"
        );
        // ShareFetch v2 is decoded by hand (versions::BY_HAND): a body cut
        // short closes the connection as a malformed request; v3 is beyond
        // any layout es knows.
        let body = [0u8, 0, 0, 0, 0]; // null client id, no header tags, ...
        let share = handle(broker.clone(), frame(78, 2, &body), Turn::free()).await;
        assert!(
            matches!(
                share,
                Err(CloseReason::MalformedRequest {
                    key: ApiKey::ShareFetch,
                    version: 2,
                    ..
                })
            ),
            "{share:?}"
        );
        let share = handle(broker.clone(), frame(78, 3, &body), Turn::free()).await;
        assert!(
            matches!(
                share,
                Err(CloseReason::UnparseableVersion {
                    key: ApiKey::ShareFetch,
                    version: 3
                })
            ),
            "{share:?}"
        );
        assert!(!CloseReason::UnknownApiKey { key: 1, version: 0 }.is_broker_fault());
        assert!(CloseReason::NoHandler { key: ApiKey::Fetch }.is_broker_fault());
    }

    /// The routing hook for BY_HAND versions decodes with the hand codec
    /// and fails as the crate's decoding does.
    #[test]
    fn by_hand_bodies_decode_or_close_as_malformed() {
        // ShareAcknowledge v2: GroupId "g", MemberId null, epoch 5,
        // IsRenewAck true, no topics, no tagged fields.
        let body = [2u8, b'g', 0, 0, 0, 0, 5, 1, 1, 0];
        let mut b = Bytes::copy_from_slice(&body);
        let decoded = decode_by_hand(&mut b, ApiKey::ShareAcknowledge, 2).expect("decodes");
        let HandRequest::ShareAcknowledge(req, extras) = decoded else {
            panic!("{decoded:?}");
        };
        assert_eq!(req.group_id.as_ref().map(|g| g.0.as_str()), Some("g"));
        assert_eq!(req.member_id, None);
        assert_eq!(req.share_session_epoch, 5);
        assert!(extras.is_renew_ack);
        assert!(req.topics.is_empty());
        let mut cut = Bytes::copy_from_slice(&body[..7]);
        let err = decode_by_hand(&mut cut, ApiKey::ShareAcknowledge, 2);
        assert!(
            matches!(
                &err,
                Err(CloseReason::MalformedRequest {
                    key: ApiKey::ShareAcknowledge,
                    version: 2,
                    detail,
                }) if detail.starts_with("IsRenewAck")
            ),
            "{err:?}"
        );
        // Not a BY_HAND pair: refused, not decoded as something else.
        let mut b = Bytes::copy_from_slice(&body);
        assert!(decode_by_hand(&mut b, ApiKey::ShareAcknowledge, 1).is_err());
    }

    #[tokio::test]
    async fn client_host_reads_like_javas_inet_address() {
        let dir = tempfile::tempdir().expect("tmp");
        let cfg = crate::broker::BrokerConfig::new(dir.path().join("data"), "127.0.0.1:0");
        let broker = Broker::open_running(cfg).await.expect("open");
        let ctx = |peer: Option<IpAddr>| Ctx {
            broker: broker.clone(),
            key: ApiKey::DescribeGroups,
            version: 5,
            header: RequestHeader::default(),
            peer,
            principal: Client::internal().principal,
            internal: true,
            request_bytes: 0,
            usage: Default::default(),
            conn: None,
            connection: None,
        };
        assert_eq!(ctx(None).client_host(), "");
        let v4: IpAddr = "10.1.2.3".parse().expect("v4");
        assert_eq!(ctx(Some(v4)).client_host(), "/10.1.2.3");
        let v6: IpAddr = "::1".parse().expect("v6");
        assert_eq!(ctx(Some(v6)).client_host(), "/0:0:0:0:0:0:0:1");
        let v6: IpAddr = "fe80::a:b0c".parse().expect("v6");
        assert_eq!(ctx(Some(v6)).client_host(), "/fe80:0:0:0:0:0:a:b0c");
    }
}
