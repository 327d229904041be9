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
//!
//! An idle connection holds no read buffer: it reads into a few hundred
//! bytes of its own state, takes a read buffer when a request arrives and
//! gives it back a second after its last read; the writer keeps at most a
//! kilobyte between answers. The limits of [`crate::limits`] apply here: a
//! request's bytes are reserved from `queued.max.request.bytes` before its
//! body is read (the socket is not read while the pool is short) and given
//! back once its handler is done with them; a request must arrive whole within
//! `request.read.timeout.ms` of its first byte; a connection with nothing
//! read or written for `connections.max.idle.ms` and no request being
//! handled, or whose answer the peer has not taken for that long, is closed.
//!
//! Each connection has an id ([`next_connection_id`]), which its requests
//! carry ([`Client::connection`]); when it closes, the share sessions it
//! opened are removed and their members' records released
//! (`ShareManager::connection_closed`).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use es_auth::principal::Principal;

use crate::broker::Broker;
use crate::codec::frame::{self, FrameStatus, ResponseFrame};
use crate::handlers::throttle::ConnThrottle;
use crate::handlers::{self, Client, CloseReason};
use crate::limits::{RequestMemory, Reserved};
use crate::metrics::{RequestTiming, Timed};
use crate::security::sasl::{Outcome, SaslSession};
use crate::shares::sessions::ConnectionId;
use crate::turn::Turn;

/// Bytes read from the socket at once when no larger frame is pending.
const READ_CHUNK_BYTES: usize = 64 * 1024;
/// How far ahead of the received bytes the buffer of a large frame grows.
const FRAME_GROW_BYTES_MAX: usize = 4 * 1024 * 1024;
/// The writer's buffer: responses smaller than this are copied into it and
/// leave together; larger ones go out with vectored writes of their parts.
const WRITE_BUFFER_BYTES: usize = 64 * 1024;
/// The writer's buffer is kept between answers up to this size.
const WRITE_BUFFER_KEEP_BYTES: usize = 1024;
/// What a connection holding no read buffer reads at once, into its own state.
const IDLE_READ_BYTES: usize = 256;
/// How long a connection keeps its read buffer after its last read.
const READ_BUFFER_KEEP: Duration = Duration::from_secs(1);

/// The next connection's id ([`next_connection_id`]).
static NEXT_CONNECTION_ID: AtomicU64 = AtomicU64::new(1);

/// A new connection id, unique for the life of the process (share sessions
/// are tagged with it, and its close releases them).
pub fn next_connection_id() -> ConnectionId {
    NEXT_CONNECTION_ID.fetch_add(1, Ordering::Relaxed)
}

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

/// What the reader and the writer of a connection tell each other about
/// its activity, for `connections.max.idle.ms`.
#[derive(Debug)]
struct Activity {
    epoch: Instant,
    /// When something was last read or written, in ms since `epoch`.
    last_ms: AtomicU64,
    /// When the write in progress began (`NOT_WRITING`: none).
    writing_since_ms: AtomicU64,
    /// Requests read and not yet answered (or closed on).
    unanswered: AtomicUsize,
}

const NOT_WRITING: u64 = u64::MAX;

impl Activity {
    fn new() -> Activity {
        Activity {
            epoch: Instant::now(),
            last_ms: AtomicU64::new(0),
            writing_since_ms: AtomicU64::new(NOT_WRITING),
            unanswered: AtomicUsize::new(0),
        }
    }

    fn ms(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.epoch).as_millis() as u64
    }

    fn touch(&self) {
        self.last_ms
            .store(self.ms(Instant::now()), Ordering::Relaxed);
    }

    fn writing(&self) {
        self.writing_since_ms
            .store(self.ms(Instant::now()), Ordering::Relaxed);
    }

    fn wrote(&self) {
        self.writing_since_ms.store(NOT_WRITING, Ordering::Relaxed);
        self.touch();
    }

    /// How long the connection has been idle at `now`: since its last read
    /// or write when no request is being handled, since the write in
    /// progress began when the peer does not take it; `None` while a
    /// request is being handled (a long poll, a join waiting for its group).
    fn idle_for(&self, now: Instant) -> Option<Duration> {
        let now_ms = self.ms(now);
        let writing = self.writing_since_ms.load(Ordering::Relaxed);
        if writing != NOT_WRITING {
            return Some(Duration::from_millis(now_ms.saturating_sub(writing)));
        }
        if self.unanswered.load(Ordering::Relaxed) > 0 {
            return None;
        }
        let last = self.last_ms.load(Ordering::Relaxed);
        Some(Duration::from_millis(now_ms.saturating_sub(last)))
    }
}

/// When the connection's timer should next look at it: the request being
/// read must be whole by `frame_started + read_timeout`, an idle connection
/// is closed `max_idle` after its last activity, a read buffer is given back
/// `READ_BUFFER_KEEP` after the last read.
fn next_check(
    now: Instant,
    activity: &Activity,
    max_idle: Option<Duration>,
    frame_deadline: Option<Instant>,
    buffer_held_since: Option<Instant>,
) -> Instant {
    let mut at = now + max_idle.unwrap_or(Duration::from_secs(3600));
    if let (Some(idle), Some(max)) = (activity.idle_for(now), max_idle) {
        at = at.min(now + max.saturating_sub(idle));
    }
    if let Some(t) = frame_deadline {
        at = at.min(t);
    }
    if let Some(t) = buffer_held_since {
        at = at.min((t + READ_BUFFER_KEEP).max(now + Duration::from_millis(10)));
    }
    at.max(now + Duration::from_millis(1))
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
    /// The connection's id; `None`: [`serve`] takes the next one
    /// ([`next_connection_id`]).
    pub connection: Option<ConnectionId>,
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
    let connection_id = session.connection.unwrap_or_else(next_connection_id);
    let (mut reader, writer) = tokio::io::split(stream);
    let in_flight_max = broker.config().in_flight_max.max(1);
    let normal_frame_max = broker.config().frame_bytes_max;
    let limits = &broker.config().security.connections;
    let (max_idle, read_timeout) = (limits.max_idle, limits.request_read_timeout);
    let memory = broker.extension(|| RequestMemory::new(limits.queued_max_request_bytes));
    let activity = Arc::new(Activity::new());
    let (tx, rx) = mpsc::channel::<Pending>(in_flight_max);
    let mut writer_task = tokio::spawn(write_responses(writer, rx, peer.clone(), activity.clone()));
    let authenticate_by = tokio::time::Instant::now() + AUTHENTICATION_TIMEOUT;
    // No buffer until the first bytes arrive (see `read_some`).
    let mut buf = BytesMut::new();
    let mut small = [0u8; IDLE_READ_BYTES];
    let mut last_read = Instant::now();
    // The request being read: when its first byte came, and its bytes in
    // `queued.max.request.bytes` once its size is known.
    let mut frame_deadline: Option<Instant> = None;
    let mut frame_memory: Option<Reserved> = None;
    let mut frame_reserved = false;
    let timer =
        tokio::time::sleep_until(next_check(Instant::now(), &activity, max_idle, None, None));
    tokio::pin!(timer);
    let mut prev_turn: Option<oneshot::Receiver<()>> = None;
    let mut writer_done = false;
    // Closed on a deadline: what is left unwritten is dropped, not waited for
    // (the peer may be the one not reading it).
    let mut expire = false;
    // KIP-219: a client over its quota is muted; its next request waits.
    let throttle = Arc::new(ConnThrottle::default());
    // Hands an answer (or a pending one) to the writer, counted as unanswered
    // until the writer is done with it.
    let send = |p: Pending| {
        activity.unanswered.fetch_add(1, Ordering::Relaxed);
        tx.send(p)
    };
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
                    if let Some(n) = frame_bytes {
                        if !frame_reserved {
                            // Its bytes are reserved before its body is read;
                            // meanwhile the socket is not read at all.
                            tokio::select! {
                                m = memory.reserve(n) => frame_memory = m,
                                _ = shutdown.changed() => break 'conn,
                            }
                            frame_reserved = true;
                            // The read deadline counts from now: es's own wait
                            // is not the client's slowness.
                            frame_deadline = None;
                        }
                        // `frame_bytes` was checked against the limit; even
                        // so, memory grows with the bytes that actually
                        // arrive (doubling, at most FRAME_GROW_BYTES_MAX
                        // ahead of them), so a peer that announces 100 MiB
                        // and trickles costs what it sent.
                        let want = n.saturating_sub(buf.len());
                        let ahead = buf.len().clamp(READ_CHUNK_BYTES, FRAME_GROW_BYTES_MAX);
                        buf.reserve(want.min(ahead));
                    }
                    if frame_deadline.is_none() && !buf.is_empty() {
                        let at = Instant::now() + read_timeout;
                        frame_deadline = Some(at);
                        if at < timer.deadline() {
                            timer.as_mut().reset(at);
                        }
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
                    frame_deadline = None;
                    let mut reserved = frame_memory.take();
                    if !std::mem::take(&mut frame_reserved) {
                        // A request that arrived whole with one read: it is
                        // in memory already, but the next one waits.
                        tokio::select! {
                            m = memory.reserve(body.len()) => reserved = m,
                            _ = shutdown.changed() => break 'conn,
                        }
                    }
                    if let Some(sasl) = session.sasl.as_mut() {
                        match sasl.on_frame(&body).await {
                            Outcome::Serve => {}
                            Outcome::Reply(frame) => {
                                if send(ready(frame)).await.is_err() {
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
                                let _ = send(failed).await;
                                let _ = send(close).await;
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
                        connection: Some(connection_id),
                    };
                    // The request's bytes count until its handler is done
                    // with them (as Kafka releases a request's buffer once it
                    // is handled), not until the answer is written: a client
                    // that does not read its answers holds no pool.
                    let handle = tokio::spawn(Timed::new(
                        async move {
                            let answer = handlers::handle_from(b, client, body, turn).await;
                            drop(reserved);
                            answer
                        },
                        timing.clone(),
                    ));
                    let pending = Pending {
                        handle,
                        timing: Some(timing),
                    };
                    if send(pending).await.is_err() {
                        break 'conn;
                    }
                }
            }
        }
        if buf.capacity() > 0 && buf.capacity() - buf.len() < READ_CHUNK_BYTES / 4 {
            buf.reserve(READ_CHUNK_BYTES);
        }
        tokio::select! {
            n = read_some(&mut reader, &mut buf, &mut small) => match n {
                Ok(0) => {
                    if !buf.is_empty() {
                        tracing::debug!(%peer, bytes = buf.len(), "peer closed mid-frame");
                    }
                    break;
                }
                Ok(_) => {
                    last_read = Instant::now();
                    activity.touch();
                    // A buffer just taken is given back READ_BUFFER_KEEP
                    // after the last read: the timer must look by then.
                    let give_back = last_read + READ_BUFFER_KEEP + Duration::from_millis(10);
                    if give_back < timer.deadline() {
                        timer.as_mut().reset(give_back);
                    }
                }
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
            _ = &mut timer => {
                let now = Instant::now();
                if frame_deadline.is_some_and(|t| now >= t) {
                    tracing::info!(%peer, bytes = buf.len(), "closing connection: a request did not arrive whole within request.read.timeout.ms ({read_timeout:?})");
                    expired("request_read");
                    expire = true;
                    break;
                }
                if let (Some(idle), Some(max)) = (activity.idle_for(now), max_idle) {
                    if idle >= max {
                        tracing::info!(%peer, "closing connection: idle for connections.max.idle.ms ({max:?})");
                        expired("idle");
                        expire = true;
                        break;
                    }
                }
                if buf.is_empty() && buf.capacity() > 0 && now >= last_read + READ_BUFFER_KEEP {
                    buf = BytesMut::new();
                }
                let held = (buf.capacity() > 0).then_some(last_read);
                timer.as_mut().reset(next_check(now, &activity, max_idle, frame_deadline, held));
            }
        }
    }
    // Let the writer answer everything already accepted, then finish.
    drop(tx);
    if expire {
        writer_task.abort();
    }
    if !writer_done {
        match writer_task.await {
            Err(e) if !e.is_cancelled() => {
                tracing::error!(%peer, error = %e, "response writer failed");
            }
            _ => {}
        }
    }
    // Its share sessions end with it and their members' records are
    // released at once (docs/share-groups-design.md §2.6), after every
    // request it sent has been answered (or, closed on a deadline,
    // abandoned).
    // Most connections have none and need no blocking thread for it.
    let closed = broker.shares().take_connection_sessions(connection_id);
    if !closed.is_empty() {
        tracing::debug!(%peer, sessions = closed.len(), "share sessions of the connection closed");
        let b = broker.clone();
        let released = tokio::task::spawn_blocking(move || {
            for r in &closed {
                b.shares().release_session(r);
            }
        });
        if let Err(e) = released.await {
            tracing::error!(%peer, error = %e, "releasing the connection's share records failed");
        }
    }
    tracing::debug!(%peer, "connection closed");
}

/// Counts a connection es closed on one of its deadlines.
fn expired(reason: &'static str) {
    crate::metrics::kafka_metrics()
        .connections_expired
        .get_or_create(&crate::metrics::ExpiredLabel { reason })
        .inc();
}

/// Reads what the peer sent: into `buf` when the connection holds a buffer,
/// otherwise into `small` (the connection's own few hundred bytes), copied
/// into a buffer taken only now. Cancel-safe, as `tokio::select!` needs.
async fn read_some<R>(
    reader: &mut R,
    buf: &mut BytesMut,
    small: &mut [u8; IDLE_READ_BYTES],
) -> std::io::Result<usize>
where
    R: AsyncRead + Unpin,
{
    if buf.capacity() > 0 {
        return reader.read_buf(buf).await;
    }
    let n = reader.read(small).await?;
    if n > 0 {
        // A request that came whole in these bytes takes a buffer of its
        // own size (it leaves as the request's body, and the connection
        // holds no buffer again); one that filled them means more is on its
        // way, and takes a full read chunk.
        let frame = match small.get(..4) {
            Some(&[a, b, c, d]) if n >= 4 => {
                usize::try_from(i32::from_be_bytes([a, b, c, d])).unwrap_or(0) + 4
            }
            _ => 0,
        };
        let want = if n == IDLE_READ_BYTES {
            READ_CHUNK_BYTES
        } else {
            n.max(frame.min(READ_CHUNK_BYTES))
        };
        buf.reserve(want);
        buf.extend_from_slice(&small[..n]);
    }
    Ok(n)
}

async fn write_responses<W>(
    mut writer: W,
    mut rx: mpsc::Receiver<Pending>,
    peer: String,
    activity: Arc<Activity>,
) where
    W: AsyncWrite + Unpin,
{
    // Small answers gather here and leave together; beyond
    // WRITE_BUFFER_KEEP_BYTES it is given back whenever the queue is empty,
    // so an idle connection holds at most that.
    let mut out: Vec<u8> = Vec::new();
    while let Some(pending) = rx.recv().await {
        // Responses already written wait in the buffer only while the next
        // one is ready too: a pipelining client (five produce requests in
        // flight) gets each answer as soon as it exists, not when the
        // requests behind it have had their fsyncs as well.
        if !pending.handle.is_finished() && !out.is_empty() {
            if let Err(e) = flush(&mut writer, &mut out, &activity).await {
                tracing::debug!(%peer, error = %e, "flush failed");
                break;
            }
        }
        let result = pending.handle.await;
        activity.unanswered.fetch_sub(1, Ordering::Relaxed);
        match result {
            Ok(Ok(Some(response))) => {
                activity.writing();
                let written = write_frame(&mut writer, &mut out, &response).await;
                activity.wrote();
                if let Err(e) = written {
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
            if let Err(e) = flush(&mut writer, &mut out, &activity).await {
                tracing::debug!(%peer, error = %e, "flush failed");
                break;
            }
            // A buffer grown past a few small answers is given back; one
            // that held only small answers (a produce's acknowledgements)
            // is kept, so that each answer does not allocate anew.
            if out.capacity() > WRITE_BUFFER_KEEP_BYTES {
                out = Vec::new();
            }
        }
    }
    let _ = flush(&mut writer, &mut out, &activity).await;
    let _ = writer.shutdown().await;
}

/// Writes out what `out` holds, counted as a write in progress while the
/// peer does not take it.
async fn flush<W>(w: &mut W, out: &mut Vec<u8>, activity: &Activity) -> std::io::Result<()>
where
    W: AsyncWrite + Unpin,
{
    if out.is_empty() {
        return Ok(());
    }
    activity.writing();
    let r = w.write_all(out).await;
    activity.wrote();
    out.clear();
    r?;
    w.flush().await
}

/// Writes one response: a small one into `out` (it leaves with the next
/// flush), a large one straight to the stream after what is buffered, its
/// parts in vectored writes (one system call for a whole Fetch response
/// when the socket takes it).
async fn write_frame<W>(w: &mut W, out: &mut Vec<u8>, frame: &ResponseFrame) -> std::io::Result<()>
where
    W: AsyncWrite + Unpin,
{
    let parts = frame.parts();
    if frame.len() < WRITE_BUFFER_BYTES {
        if out.len() + frame.len() > WRITE_BUFFER_BYTES {
            w.write_all(out).await?;
            out.clear();
        }
        for p in parts {
            out.extend_from_slice(p);
        }
        return Ok(());
    }
    if !out.is_empty() {
        w.write_all(out).await?;
        out.clear();
    }
    write_all_vectored(w, parts).await
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
            let mut t = Trickle {
                got: Vec::new(),
                step,
                writes: 0,
            };
            let activity = Activity::new();
            let mut out = Vec::new();
            write_frame(&mut t, &mut out, &small).await.expect("write");
            write_frame(&mut t, &mut out, &big).await.expect("write");
            write_frame(&mut t, &mut out, &small).await.expect("write");
            flush(&mut t, &mut out, &activity).await.expect("flush");
            let mut want = small.clone().into_bytes().to_vec();
            want.extend_from_slice(&big.clone().into_bytes());
            want.extend_from_slice(b"small");
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
        let activity = Arc::new(Activity::new());
        activity.unanswered.store(2, Ordering::Relaxed);
        let writer = tokio::spawn(write_responses(server, rx, "test".into(), activity));
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

    /// A connection's close removes the share sessions it opened and
    /// releases their members' records (docs/share-groups-design.md §2.6).
    #[tokio::test]
    async fn closing_a_connection_ends_its_share_sessions() {
        use crate::shares::sessions::{SessionKey, ShareFetchSession, TopicPartition};
        let dir = tempfile::tempdir().expect("tmp");
        let cfg = crate::broker::BrokerConfig::new(dir.path().join("data"), "127.0.0.1:0");
        let b = Broker::open_running(cfg).await.expect("open");
        let tp = [TopicPartition {
            topic_id: uuid::Uuid::from_bytes([3; 16]),
            partition: 0,
        }];
        for (member, conn) in [("a", 9_001), ("b", 9_002)] {
            let key = SessionKey::new("g", member);
            let opened = b.shares().with_sessions(|c| {
                c.share_fetch(ShareFetchSession {
                    key: &key,
                    epoch: 0,
                    partitions: &tp,
                    forgotten: &[],
                    acknowledgements_present: false,
                    connection: conn,
                })
            });
            assert!(opened.is_ok(), "{opened:?}");
        }
        let (client, server) = tokio::io::duplex(1 << 16);
        let session = Session {
            listener: None,
            principal: Arc::new(Principal::anonymous()),
            sasl: None,
            connection: Some(9_001),
        };
        let (_stop, shutdown) = watch::channel(false);
        let serving = tokio::spawn(serve(
            b.clone(),
            server,
            "127.0.0.1:5555".into(),
            session,
            shutdown,
        ));
        drop(client);
        tokio::time::timeout(std::time::Duration::from_secs(60), serving)
            .await
            .expect("the connection ends when its peer closes")
            .expect("task");
        let left = b.shares().with_sessions(|c| {
            (
                c.epoch(&SessionKey::new("g", "a")),
                c.epoch(&SessionKey::new("g", "b")),
            )
        });
        assert_eq!(
            left,
            (None, Some(1)),
            "only the closed connection's session ends"
        );
    }
}
