//! The Raft listener's server: accepts connections (at most
//! [`MAX_CONNECTIONS`] at once), reads request frames one after another on
//! each, hands Raft RPCs to the local `openraft::Raft` and control requests
//! to a [`ControlHandler`], and writes each reply before reading the next
//! request. A bad frame (too long, bad CRC, unknown kind, undecodable JSON)
//! closes its connection with a warning; the server goes on serving others.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use openraft::Raft;
use tokio::io::BufReader;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};

use super::frame::{read_frame, write_frame, FrameError};
use super::rpc::{fatal_of, Envelope, Refusal, Reply, Request};
use crate::control::{ControlReply, ControlRequest};
use crate::{MetaTypes, NodeId};

/// Most connections served at once; a connection beyond them is closed as
/// soon as it is accepted.
pub const MAX_CONNECTIONS: usize = 256;

/// A connection must deliver each whole frame within this time after the
/// previous one, or it is closed: an idle or trickling peer cannot hold one
/// of the [`MAX_CONNECTIONS`] slots for ever. Clients drop their own idle
/// connections sooner (`client::IDLE_REUSE_MAX`), so they never send on one
/// the server has closed.
pub const IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Answers the control requests that arrive on the Raft listener.
pub trait ControlHandler: Send + Sync + 'static {
    fn handle(
        &self,
        req: ControlRequest,
    ) -> Pin<Box<dyn Future<Output = ControlReply> + Send + '_>>;
}

struct Ctx {
    node_id: NodeId,
    directory_id: String,
    raft: Raft<MetaTypes>,
    control: Arc<dyn ControlHandler>,
}

/// Serves the Raft listener until `shutdown` holds `true` (if its sender is
/// dropped, the server serves on until its task is dropped). Requests that
/// expect another data directory than `directory_id` are refused with
/// [`Refusal::WrongDirectory`]. Never returns an error: a failed accept is
/// logged and retried after a short pause.
pub async fn serve(
    listener: TcpListener,
    node_id: NodeId,
    directory_id: String,
    raft: Raft<MetaTypes>,
    control: Arc<dyn ControlHandler>,
    mut shutdown: watch::Receiver<bool>,
) {
    let ctx = Arc::new(Ctx {
        node_id,
        directory_id,
        raft,
        control,
    });
    let limit = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut watching = true;
    loop {
        if *shutdown.borrow() {
            break;
        }
        tokio::select! {
            changed = shutdown.changed(), if watching => {
                if changed.is_err() {
                    watching = false;
                }
            }
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let Ok(permit) = limit.clone().try_acquire_owned() else {
                        tracing::warn!(%peer, max = MAX_CONNECTIONS, "raft listener: too many connections, closing the new one");
                        drop(stream);
                        continue;
                    };
                    let ctx = ctx.clone();
                    let shutdown = shutdown.clone();
                    tokio::spawn(async move {
                        serve_conn(stream, peer, &ctx, shutdown).await;
                        drop(permit);
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "raft listener: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
    tracing::debug!(node_id, "raft listener stopped");
}

/// Resolves once `shutdown` holds `true`; never if its sender is gone.
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    if shutdown.wait_for(|s| *s).await.is_err() {
        std::future::pending::<()>().await;
    }
}

async fn serve_conn(
    stream: TcpStream,
    peer: SocketAddr,
    ctx: &Ctx,
    mut shutdown: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let (r, mut w) = stream.into_split();
    let mut r = BufReader::new(r);
    loop {
        let read = tokio::select! {
            read = tokio::time::timeout(IDLE_TIMEOUT, read_frame(&mut r)) => match read {
                Ok(read) => read,
                Err(_) => {
                    tracing::debug!(%peer, "raft connection idle or too slow for {IDLE_TIMEOUT:?}: closing it");
                    return;
                }
            },
            () = stopped(&mut shutdown) => return,
        };
        let env = match read.and_then(|f| f.map(|(k, p)| Request::decode(k, &p)).transpose()) {
            Ok(Some(env)) => env,
            Ok(None) => return,
            Err(FrameError::Io(e)) => {
                tracing::debug!(%peer, error = %e, "raft connection closed");
                return;
            }
            Err(e) => {
                tracing::warn!(%peer, error = %e, "raft connection: bad frame, closing it");
                return;
            }
        };
        let reply = handle(ctx, env).await;
        let written = match reply.encode() {
            Ok(frame) => write_frame(&mut w, &frame).await,
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            tracing::warn!(%peer, error = %e, "raft connection: reply not sent, closing it");
            return;
        }
    }
}

async fn handle(ctx: &Ctx, env: Envelope<Request>) -> Reply {
    if !env.directory_id.is_empty() && env.directory_id != ctx.directory_id {
        tracing::warn!(
            from = env.from,
            expected = %env.directory_id,
            own = %ctx.directory_id,
            "refusing a request for another data directory"
        );
        return Reply::Refused(Refusal::WrongDirectory {
            node_id: ctx.node_id,
            directory_id: ctx.directory_id.clone(),
        });
    }
    match env.body {
        Request::Vote(r) => Reply::Vote(ctx.raft.vote(r).await.map_err(fatal_of)),
        Request::AppendEntries(r) => {
            Reply::AppendEntries(ctx.raft.append_entries(r).await.map_err(fatal_of))
        }
        Request::InstallSnapshot(r) => Reply::InstallSnapshot(ctx.raft.install_snapshot(r).await),
        Request::Control(r) => Reply::Control(ctx.control.handle(r).await),
    }
}
