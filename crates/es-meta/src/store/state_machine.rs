//! [`StateMachine`], openraft's `RaftStateMachine`: the [`MetaImage`], the
//! last applied log id and membership; applying entries, handing what they
//! changed to the [`Materializer`], publishing [`Applied`] on a watch
//! channel; and building, installing and serving snapshots (`snapshot.rs`).

use std::io::{self, Cursor};
use std::path::PathBuf;
use std::sync::Arc;

use es_storage::fs::Fs;
use openraft::storage::RaftStateMachine;
use openraft::{
    EntryPayload, ErrorSubject, ErrorVerb, LogId, OptionalSend, RaftSnapshotBuilder, Snapshot,
    SnapshotMeta, StorageError, StoredMembership,
};
use parking_lot::Mutex;
use tokio::sync::watch;

use super::files::sto;
use super::frame::Entry;
use super::snapshot::{self, SnapshotFile};
use crate::{Materializer, MetaEvent, MetaImage, MetaResponse, MetaTypes, NodeAddr};

/// The applied state as published after every applied batch and snapshot install.
#[derive(Clone, Debug)]
pub struct Applied {
    pub image: Arc<MetaImage>,
    pub last_applied: Option<LogId<u64>>,
}

#[derive(Debug, Clone)]
struct SmState {
    image: Arc<MetaImage>,
    last_applied: Option<LogId<u64>>,
    membership: StoredMembership<u64, NodeAddr>,
}

/// The persisted snapshot: its meta and its bytes.
#[derive(Debug, Clone)]
struct Current {
    meta: SnapshotMeta<u64, NodeAddr>,
    bytes: Arc<Vec<u8>>,
}

#[derive(Debug)]
struct Shared {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    materializer: Arc<dyn Materializer>,
    io_mode: super::Io,
    /// How far the snapshot on disk reaches (shared with the log).
    durable: Arc<super::DurableSnapshot>,
    state: Mutex<SmState>,
    current: Mutex<Option<Current>>,
    tx: watch::Sender<Applied>,
}

/// The metadata state machine of one node.
#[derive(Debug, Clone)]
pub struct StateMachine {
    shared: Arc<Shared>,
}

/// Builds snapshots of the state machine.
#[derive(Debug, Clone)]
pub struct SnapshotBuilder {
    shared: Arc<Shared>,
}

fn sm_err(verb: ErrorVerb, e: io::Error) -> StorageError<u64> {
    sto(ErrorSubject::StateMachine, verb, e)
}

fn snap_err(verb: ErrorVerb, e: io::Error) -> StorageError<u64> {
    sto(ErrorSubject::Snapshot(None), verb, e)
}

/// Runs blocking work on tokio's blocking pool, or here ([`super::Io::Inline`]).
async fn blocking<T: Send + 'static>(
    io_mode: super::Io,
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    match io_mode {
        super::Io::Inline => f(),
        super::Io::Threads => tokio::task::spawn_blocking(f)
            .await
            .map_err(|e| io::Error::other(format!("blocking work did not finish: {e}")))?,
    }
}

/// Writes a snapshot to `snapshot.json` (atomically, on a blocking thread
/// unless inline); from then on the log may purge up to it. Its bytes.
async fn persist_snapshot(
    shared: &Arc<Shared>,
    file: SnapshotFile,
) -> Result<Vec<u8>, StorageError<u64>> {
    let last = file.meta.last_log_id;
    let sh = shared.clone();
    let bytes = blocking(shared.io_mode, move || -> io::Result<Vec<u8>> {
        let bytes = file.to_bytes()?;
        snapshot::persist(sh.fs.as_ref(), &sh.dir, &bytes)?;
        Ok(bytes)
    })
    .await
    .map_err(|e| snap_err(ErrorVerb::Write, e))?;
    if let Some(l) = last {
        shared.durable.covers(l.index);
    }
    Ok(bytes)
}

impl StateMachine {
    /// Starts from the persisted snapshot, if any (`open` calls this).
    pub(super) fn open(
        fs: Arc<dyn Fs>,
        dir: PathBuf,
        materializer: Arc<dyn Materializer>,
        io_mode: super::Io,
    ) -> io::Result<StateMachine> {
        let loaded = snapshot::load(fs.as_ref(), &dir)?;
        let (state, current) = match loaded {
            Some((snap, bytes)) => {
                // A crash may have come between persisting an installed
                // snapshot and materializing it: materialize it again.
                let events = snapshot::whole_image_events(&MetaImage::default(), &snap.image);
                materializer.materialize(&snap.image, &events)?;
                let state = SmState {
                    image: Arc::new(snap.image),
                    last_applied: snap.meta.last_log_id,
                    membership: snap.meta.last_membership.clone(),
                };
                let current = Current {
                    meta: snap.meta,
                    bytes: Arc::new(bytes),
                };
                (state, Some(current))
            }
            None => (
                SmState {
                    image: Arc::new(MetaImage::default()),
                    last_applied: None,
                    membership: StoredMembership::default(),
                },
                None,
            ),
        };
        let durable = Arc::new(super::DurableSnapshot::default());
        if let Some(l) = current.as_ref().and_then(|c| c.meta.last_log_id) {
            durable.covers(l.index);
        }
        let (tx, _) = watch::channel(Applied {
            image: state.image.clone(),
            last_applied: state.last_applied,
        });
        Ok(StateMachine {
            shared: Arc::new(Shared {
                fs,
                dir,
                materializer,
                io_mode,
                durable,
                state: Mutex::new(state),
                current: Mutex::new(current),
                tx,
            }),
        })
    }

    /// Hands what applied entries changed to the materializer (on a
    /// blocking thread, unless inline); its error is a storage error.
    async fn materialize(
        &self,
        image: Arc<MetaImage>,
        events: Vec<MetaEvent>,
    ) -> Result<(), StorageError<u64>> {
        let m = self.shared.materializer.clone();
        blocking(self.shared.io_mode, move || m.materialize(&image, &events))
            .await
            .map_err(|e| sm_err(ErrorVerb::Write, e))
    }

    /// How far the snapshot on disk reaches, for the log's purges.
    pub(super) fn durable_snapshot(&self) -> Arc<super::DurableSnapshot> {
        self.shared.durable.clone()
    }

    /// Whether a snapshot was persisted.
    pub(super) fn has_snapshot(&self) -> bool {
        self.shared.current.lock().is_some()
    }

    /// The applied state, updated after every applied batch and snapshot install.
    pub fn watch(&self) -> watch::Receiver<Applied> {
        self.shared.tx.subscribe()
    }

    fn publish(&self, st: &SmState) {
        self.shared.tx.send_replace(Applied {
            image: st.image.clone(),
            last_applied: st.last_applied,
        });
    }
}

impl RaftSnapshotBuilder<MetaTypes> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<MetaTypes>, StorageError<u64>> {
        let st = self.shared.state.lock().clone();
        let snapshot_id = match st.last_applied {
            Some(l) => format!(
                "{}-{}-{}",
                l.leader_id.term,
                l.index,
                uuid::Uuid::new_v4().simple()
            ),
            None => format!("0-0-{}", uuid::Uuid::new_v4().simple()),
        };
        let meta = SnapshotMeta {
            last_log_id: st.last_applied,
            last_membership: st.membership.clone(),
            snapshot_id,
        };
        let file = SnapshotFile {
            meta: meta.clone(),
            image: (*st.image).clone(),
        };
        let bytes = Arc::new(persist_snapshot(&self.shared, file).await?);
        *self.shared.current.lock() = Some(Current {
            meta: meta.clone(),
            bytes: bytes.clone(),
        });
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new((*bytes).clone())),
        })
    }
}

impl RaftStateMachine<MetaTypes> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<u64>>, StoredMembership<u64, NodeAddr>), StorageError<u64>> {
        let st = self.shared.state.lock();
        Ok((st.last_applied, st.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<MetaResponse>, StorageError<u64>>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut st = self.shared.state.lock().clone();
        let mut image = (*st.image).clone();
        let mut events = Vec::new();
        let mut responses = Vec::new();
        for entry in entries {
            st.last_applied = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Blank => responses.push(MetaResponse::None),
                EntryPayload::Normal(req) => {
                    let (resp, ev) = image.apply(entry.log_id.index, &req);
                    events.extend(ev);
                    responses.push(resp);
                }
                EntryPayload::Membership(m) => {
                    st.membership = StoredMembership::new(Some(entry.log_id), m);
                    responses.push(MetaResponse::None);
                }
            }
        }
        let image = Arc::new(image);
        if !events.is_empty() {
            self.materialize(image.clone(), events).await?;
        }
        st.image = image;
        *self.shared.state.lock() = st.clone();
        self.publish(&st);
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder {
            shared: self.shared.clone(),
        }
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<u64>> {
        // The log must not purge past it before it is on disk (see
        // LogStore::purge).
        self.shared.durable.receiving(true);
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, NodeAddr>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<u64>> {
        let received = SnapshotFile::from_bytes(snapshot.get_ref())
            .map_err(|e| snap_err(ErrorVerb::Read, e))
            .inspect_err(|_| self.shared.durable.receiving(false))?;
        let file = SnapshotFile {
            meta: meta.clone(),
            image: received.image,
        };
        let old = self.shared.state.lock().image.clone();
        let image = Arc::new(file.image.clone());
        let bytes = persist_snapshot(&self.shared, file)
            .await
            .inspect_err(|_| self.shared.durable.receiving(false))?;
        let events = snapshot::whole_image_events(&old, &image);
        self.materialize(image.clone(), events).await?;
        let st = SmState {
            image,
            last_applied: meta.last_log_id,
            membership: meta.last_membership.clone(),
        };
        *self.shared.state.lock() = st.clone();
        *self.shared.current.lock() = Some(Current {
            meta: meta.clone(),
            bytes: Arc::new(bytes),
        });
        self.publish(&st);
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<MetaTypes>>, StorageError<u64>> {
        let cur = self.shared.current.lock().clone();
        Ok(cur.map(|c| Snapshot {
            meta: c.meta,
            snapshot: Box::new(Cursor::new((*c.bytes).clone())),
        }))
    }
}
