//! One client connection: frames in, requests handled concurrently, responses
//! out in request order.
//!
//! Generic over any `AsyncRead + AsyncWrite` byte stream so a TLS stream drops
//! in later. The reader checks each frame's announced size against the limit
//! (via [`crate::codec::frame`]) before reserving memory for it, peeks the
//! request header, and spawns the request's handler; the handler's
//! `JoinHandle` goes into a bounded queue that the writer drains in order, so
//! responses leave in request order while requests run concurrently, and at
//! most `in_flight_max` requests are outstanding per connection.
//!
//! State changes keep the order the client sent them in: every request gets a
//! [`Turn`] ([`crate::turn`]) that resolves when the previous request has finished its ordered
//! phase (a produce's append, an admin change); slow tails (fsync waits, long
//! polls) run outside it. A malformed or oversized frame, or a request that
//! cannot be parsed, closes this connection with a log line and nothing else.
//!
//! A client over its quota is muted (KIP-219): the connection's
//! [`ConnThrottle`] holds when the mute ends, and no further request is
//! dispatched before then.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use es_auth::principal::Principal;

use crate::broker::Broker;
use crate::codec::frame::{self, FrameStatus, ResponseFrame};
use crate::handlers::throttle::ConnThrottle;
use crate::handlers::{self, Client, CloseReason};
use crate::metrics::{RequestTiming, Timed};
use crate::security::sasl::{Outcome, SaslSession};
use crate::turn::Turn;

/// Bytes read from the socket at once when no larger frame is pending.
const READ_CHUNK_BYTES: usize = 64 * 1024;
/// How far ahead of the received bytes the buffer of a large frame grows.
const FRAME_GROW_BYTES_MAX: usize = 4 * 1024 * 1024;
/// The writer's buffer: responses smaller than this are copied into it and
/// leave together; larger ones go out with vectored writes of their parts.
const WRITE_BUFFER_BYTES: usize = 64 * 1024;

/// A request accepted on this connection: its handler's task, and where its
/// time goes (docs/metrics.md; none for answers the connection makes itself).
struct Pending {
    handle: JoinHandle<Result<Option<ResponseFrame>, CloseReason>>,
    timing: Option<Arc<RequestTiming>>,
}

impl Pending {
    fn untimed(handle: JoinHandle<Result<Option<ResponseFrame>, CloseReason>>) -> Pending {
        Pending {
            handle,
            timing: None,
        }
    }
}

/// How long a client on a SASL listener has to authenticate after it
/// connects. Kafka has no such bound (only `connections.max.idle.ms`, 10
/// minutes); clients authenticate at once, and without one a peer could
/// hold every connection slot with sockets that never authenticate.
pub const AUTHENTICATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Resolves at `deadline` while a SASL client has not authenticated;
/// never otherwise.
async fn unauthenticated_deadline(deadline: tokio::time::Instant, sasl: Option<&SaslSession>) {
    match sasl {
        Some(s) if !s.authenticated() => tokio::time::sleep_until(deadline).await,
        _ => std::future::pending().await,
    }
}

/// Logs why a request closed its connection: a fault of ours as an error,
/// the client's (bytes we cannot parse, a failed acks=0 produce) as a
/// warning.
fn log_close(peer: &str, reason: &CloseReason) {
    if reason.is_broker_fault() {
        tracing::error!(%peer, error = %reason, "closing connection: request cannot be served");
    } else {
        tracing::warn!(%peer, error = %reason, "closing connection: request cannot be served");
    }
}

/// Who is on the other end of a connection, as far as its listener knows
/// before the first request.
#[derive(Debug)]
pub struct Session {
    /// The listener's name (`None`: a connection made outside a listener,
    /// in tests).
    pub listener: Option<Arc<str>>,
    /// The principal of a client certificate, or `User:ANONYMOUS`.
    pub principal: Arc<Principal>,
    /// On a SASL listener, the exchange that must complete first.
    pub sasl: Option<SaslSession>,
}

/// A response that is already encoded, as a pending entry of the writer.
fn ready(frame: Bytes) -> Pending {
    Pending::untimed(tokio::spawn(
        async move { Ok(Some(ResponseFrame::from(frame))) },
    ))
}

/// Serves one connection until the peer closes it, a frame is bad, or
/// `shutdown` flips to true (then in-flight requests are finished and answered).
pub async fn serve<S>(
    broker: Arc<Broker>,
    stream: S,
    peer: String,
    mut session: Session,
    mut shutdown: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    // The server passes the peer's `SocketAddr` as text (it is also the log
    // field); handlers get its IP (DescribeGroups' client host).
    let peer_ip = peer.parse::<std::net::SocketAddr>().ok().map(|a| a.ip());
    let (mut reader, writer) = tokio::io::split(stream);
    let in_flight_max = broker.config().in_flight_max.max(1);
    let normal_frame_max = broker.config().frame_bytes_max;
    let (tx, rx) = mpsc::channel::<Pending>(in_flight_max);
    let mut writer_task = tokio::spawn(write_responses(writer, rx, peer.clone()));
    let authenticate_by = tokio::time::Instant::now() + AUTHENTICATION_TIMEOUT;
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let mut prev_turn: Option<oneshot::Receiver<()>> = None;
    let mut writer_done = false;
    // KIP-219: a client over its quota is muted; its next request waits.
    let throttle = Arc::new(ConnThrottle::default());
    'conn: loop {
        // Take every whole frame already buffered.
        loop {
            // Until a SASL client has authenticated, frames are held to
            // `sasl.server.max.receive.size`.
            let frame_bytes_max = session
                .sasl
                .as_ref()
                .map_or(normal_frame_max, |s| s.frame_limit(normal_frame_max));
            match frame::check_frame(&buf, frame_bytes_max) {
                Err(e) => {
                    tracing::warn!(%peer, error = %e, "closing connection: bad frame");
                    break 'conn;
                }
                Ok(FrameStatus::Incomplete { frame_bytes }) => {
                    // `frame_bytes` was checked against the limit; even so,
                    // memory grows with the bytes that actually arrive (at
                    // most FRAME_GROW_BYTES_MAX ahead of them), so a peer
                    // that announces 100 MiB and sends nothing costs nothing.
                    if let Some(n) = frame_bytes {
                        buf.reserve(n.saturating_sub(buf.len()).min(FRAME_GROW_BYTES_MAX));
                    }
                    break;
                }
                Ok(FrameStatus::Complete { .. }) => {
                    if let Some(until) = throttle.muted_until() {
                        tracing::debug!(%peer, "connection muted: client over its quota");
                        tokio::select! {
                            _ = tokio::time::sleep_until(until) => {}
                            _ = shutdown.changed() => break 'conn,
                        }
                    }
                    let body = match frame::split_frame(&mut buf, frame_bytes_max) {
                        Ok(Some(b)) => b,
                        Ok(None) => break,
                        Err(e) => {
                            tracing::warn!(%peer, error = %e, "closing connection: bad frame");
                            break 'conn;
                        }
                    };
                    if let Some(sasl) = session.sasl.as_mut() {
                        match sasl.on_frame(&body).await {
                            Outcome::Serve => {}
                            Outcome::Reply(frame) => {
                                if tx.send(ready(frame)).await.is_err() {
                                    break 'conn;
                                }
                                continue;
                            }
                            Outcome::Fail { reply, reason } => {
                                // Kafka answers a failed authentication
                                // after a delay, then closes.
                                let delay = sasl.failure_delay();
                                crate::metrics::kafka_metrics()
                                    .authentication_failures
                                    .get_or_create(&crate::metrics::AuthLabel {
                                        listener: session
                                            .listener
                                            .as_deref()
                                            .unwrap_or("")
                                            .to_string(),
                                        mechanism: sasl.mechanism_name().to_string(),
                                    })
                                    .inc();
                                let failed = Pending::untimed(tokio::spawn(async move {
                                    tokio::time::sleep(delay).await;
                                    Ok(reply.map(ResponseFrame::from))
                                }));
                                let close = Pending::untimed(tokio::spawn(async move {
                                    Err(CloseReason::AuthenticationFailed(reason))
                                }));
                                let _ = tx.send(failed).await;
                                let _ = tx.send(close).await;
                                break 'conn;
                            }
                            Outcome::Close(reason) => {
                                tracing::info!(%peer, %reason, "closing connection");
                                break 'conn;
                            }
                        }
                    }
                    let prefix = match frame::peek_request_header(&body) {
                        Ok(p) => p,
                        Err(e) => {
                            tracing::warn!(%peer, error = %e, "closing connection: bad request header");
                            break 'conn;
                        }
                    };
                    let timing = RequestTiming::received(prefix.api_key, prefix.api_version);
                    let (turn, next) = match prev_turn.take() {
                        Some(p) => Turn::after(p),
                        None => Turn::first(),
                    };
                    prev_turn = Some(next);
                    let b = broker.clone();
                    let client = Client {
                        peer: peer_ip,
                        principal: session
                            .sasl
                            .as_ref()
                            .and_then(SaslSession::principal)
                            .unwrap_or_else(|| session.principal.clone()),
                        listener: session.listener.clone(),
                        throttle: Some(throttle.clone()),
                    };
                    let handle = tokio::spawn(Timed::new(
                        async move { handlers::handle_from(b, client, body, turn).await },
                        timing.clone(),
                    ));
                    let pending = Pending {
                        handle,
                        timing: Some(timing),
                    };
                    if tx.send(pending).await.is_err() {
                        break 'conn;
                    }
                }
            }
        }
        if buf.capacity() - buf.len() < READ_CHUNK_BYTES / 4 {
            buf.reserve(READ_CHUNK_BYTES);
        }
        tokio::select! {
            n = reader.read_buf(&mut buf) => match n {
                Ok(0) => {
                    if !buf.is_empty() {
                        tracing::debug!(%peer, bytes = buf.len(), "peer closed mid-frame");
                    }
                    break;
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "read failed");
                    break;
                }
            },
            _ = shutdown.changed() => break,
            _ = &mut writer_task => {
                writer_done = true;
                break;
            }
            _ = unauthenticated_deadline(authenticate_by, session.sasl.as_ref()) => {
                tracing::info!(%peer, "closing connection: no SASL authentication within {AUTHENTICATION_TIMEOUT:?}");
                break;
            }
        }
    }
    // Let the writer answer everything already accepted, then finish.
    drop(tx);
    if !writer_done {
        if let Err(e) = writer_task.await {
            tracing::error!(%peer, error = %e, "response writer failed");
        }
    }
    tracing::debug!(%peer, "connection closed");
}

async fn write_responses<W>(writer: W, mut rx: mpsc::Receiver<Pending>, peer: String)
where
    W: AsyncWrite + Unpin,
{
    let mut w = BufWriter::with_capacity(WRITE_BUFFER_BYTES, writer);
    while let Some(pending) = rx.recv().await {
        // Responses already written wait in the buffer only while the next
        // one is ready too: a pipelining client (five produce requests in
        // flight) gets each answer as soon as it exists, not when the
        // requests behind it have had their fsyncs as well.
        if !pending.handle.is_finished() && !w.buffer().is_empty() {
            if let Err(e) = w.flush().await {
                tracing::debug!(%peer, error = %e, "flush failed");
                break;
            }
        }
        match pending.handle.await {
            Ok(Ok(Some(response))) => {
                if let Err(e) = write_frame(&mut w, &response).await {
                    tracing::debug!(%peer, error = %e, "write failed");
                    break;
                }
                if let Some(t) = &pending.timing {
                    t.sent();
                }
            }
            Ok(Ok(None)) => {
                if let Some(t) = &pending.timing {
                    t.sent();
                }
            }
            Ok(Err(reason)) => {
                log_close(&peer, &reason);
                break;
            }
            Err(e) => {
                tracing::error!(%peer, error = %e, "request handler failed; closing connection");
                break;
            }
        }
        if rx.is_empty() {
            if let Err(e) = w.flush().await {
                tracing::debug!(%peer, error = %e, "flush failed");
                break;
            }
        }
    }
    let _ = w.flush().await;
    let _ = w.shutdown().await;
}

/// Writes one response: a small one into the buffer (it leaves with the
/// next flush), a large one straight to the stream after what is buffered,
/// its parts in vectored writes (one system call for a whole Fetch response
/// when the socket takes it).
async fn write_frame<W>(w: &mut BufWriter<W>, frame: &ResponseFrame) -> std::io::Result<()>
where
    W: AsyncWrite + Unpin,
{
    let parts = frame.parts();
    if frame.len() < WRITE_BUFFER_BYTES {
        for p in parts {
            w.write_all(p).await?;
        }
        return Ok(());
    }
    w.flush().await?;
    write_all_vectored(w.get_mut(), parts).await
}

/// `write_all` for several buffers: vectored writes until every byte is out.
async fn write_all_vectored<W>(w: &mut W, parts: &[Bytes]) -> std::io::Result<()>
where
    W: AsyncWrite + Unpin,
{
    let mut slices: Vec<std::io::IoSlice<'_>> = parts
        .iter()
        .filter(|p| !p.is_empty())
        .map(|p| std::io::IoSlice::new(p))
        .collect();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        let n = w.write_vectored(rest).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        std::io::IoSlice::advance_slices(&mut rest, n);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream that takes at most `step` bytes per write and remembers
    /// how many writes it was given.
    struct Trickle {
        got: Vec<u8>,
        step: usize,
        writes: usize,
    }

    impl AsyncWrite for Trickle {
        fn poll_write(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            let me = self.get_mut();
            let n = buf.len().min(me.step);
            me.got.extend_from_slice(&buf[..n]);
            me.writes += 1;
            std::task::Poll::Ready(Ok(n))
        }

        fn poll_write_vectored(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            bufs: &[std::io::IoSlice<'_>],
        ) -> std::task::Poll<std::io::Result<usize>> {
            let me = self.get_mut();
            let mut n = 0;
            for b in bufs {
                let take = b.len().min(me.step - n);
                me.got.extend_from_slice(&b[..take]);
                n += take;
                if n == me.step {
                    break;
                }
            }
            me.writes += 1;
            std::task::Poll::Ready(Ok(n))
        }

        fn is_write_vectored(&self) -> bool {
            true
        }

        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn frames_leave_whole_and_in_order_whatever_the_stream_takes() {
        let small = ResponseFrame::from(Bytes::from_static(b"small"));
        let big: Vec<Bytes> = (0..5u8)
            .map(|i| Bytes::from(vec![i; 40_000 * usize::from(i % 2)]))
            .collect();
        let big = ResponseFrame::from_parts(big);
        for step in [1 << 20, 70_001, 4096] {
            let mut w = BufWriter::with_capacity(
                WRITE_BUFFER_BYTES,
                Trickle {
                    got: Vec::new(),
                    step,
                    writes: 0,
                },
            );
            write_frame(&mut w, &small).await.expect("write");
            write_frame(&mut w, &big).await.expect("write");
            write_frame(&mut w, &small).await.expect("write");
            w.flush().await.expect("flush");
            let mut want = small.clone().into_bytes().to_vec();
            want.extend_from_slice(&big.clone().into_bytes());
            want.extend_from_slice(b"small");
            let t = w.into_inner();
            assert_eq!(t.got, want, "step {step}");
            if step == 1 << 20 {
                // The buffered frame, the big frame's parts in one write, the last frame.
                assert_eq!(t.writes, 3);
            }
        }
    }

    /// A pipelining client (a producer with five requests in flight) gets
    /// each response once it is ready, not once the requests queued behind
    /// it are answered too.
    #[tokio::test]
    async fn a_ready_response_leaves_while_the_next_one_is_pending() {
        use tokio::io::AsyncReadExt;
        let frame = |b: &'static [u8]| ResponseFrame::from(Bytes::from_static(b));
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let (tx, rx) = mpsc::channel::<Pending>(4);
        let (release, released) = oneshot::channel::<()>();
        // Both queued before the writer runs (this runtime has one thread).
        let first = Pending::untimed(tokio::spawn(async move { Ok(Some(frame(b"first"))) }));
        let second = Pending::untimed(tokio::spawn(async move {
            let _ = released.await;
            Ok(Some(frame(b"second")))
        }));
        assert!(tx.send(first).await.is_ok());
        assert!(tx.send(second).await.is_ok());
        let writer = tokio::spawn(write_responses(server, rx, "test".into()));
        let want = frame(b"first").into_bytes();
        let mut got = vec![0u8; want.len()];
        tokio::time::timeout(
            std::time::Duration::from_secs(20),
            client.read_exact(&mut got),
        )
        .await
        .expect("the first response leaves while the second is pending")
        .expect("read");
        assert_eq!(got, want);
        assert!(release.send(()).is_ok());
        let want = frame(b"second").into_bytes();
        let mut got = vec![0u8; want.len()];
        client.read_exact(&mut got).await.expect("read");
        assert_eq!(got, want);
        drop(tx);
        writer.await.expect("writer");
    }
}
