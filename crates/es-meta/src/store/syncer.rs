//! Group commit for the metadata log: one thread takes every append written
//! so far, covers them with one `sync_data` per segment file they touched,
//! and only then completes their callbacks, in order. A failed sync fails
//! every waiting callback and every later one (the log is marked failed, so
//! appends are refused until a restart runs recovery).

use std::io;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

use es_storage::fs::FileHandle;
use parking_lot::Mutex;

use super::log::Log;

/// What to do once an append is durable (or failed): complete openraft's
/// `LogFlushed` callback.
pub type Done = Box<dyn FnOnce(io::Result<()>) + Send>;

/// One append waiting to be durable.
pub struct SyncReq {
    /// The segment written last (None if the append wrote nothing).
    pub file: Option<Arc<dyn FileHandle>>,
    pub done: Done,
}

/// The sending side; dropping it ends the thread once it has drained.
#[derive(Debug)]
pub struct Syncer {
    tx: Option<mpsc::Sender<SyncReq>>,
    thread: Option<JoinHandle<()>>,
    /// Set when syncs run on the submitting thread ([`super::Io::Inline`]).
    inline: Option<Arc<Mutex<Log>>>,
}

impl Syncer {
    pub fn start(log: Arc<Mutex<Log>>) -> io::Result<Syncer> {
        let (tx, rx) = mpsc::channel::<SyncReq>();
        let thread = std::thread::Builder::new()
            .name("es-meta-log-sync".into())
            .spawn(move || run(rx, log))?;
        Ok(Syncer {
            tx: Some(tx),
            thread: Some(thread),
            inline: None,
        })
    }

    /// A syncer that syncs each append on the submitting thread before it
    /// returns (no group commit; the simulation's mode).
    pub fn inline(log: Arc<Mutex<Log>>) -> Syncer {
        Syncer {
            tx: None,
            thread: None,
            inline: Some(log),
        }
    }

    /// Queues an append; its callback is completed once it is durable.
    pub fn submit(&self, req: SyncReq) {
        if let Some(log) = &self.inline {
            complete(vec![req], log);
            return;
        }
        match &self.tx {
            Some(tx) => {
                if let Err(mpsc::SendError(req)) = tx.send(req) {
                    (req.done)(Err(io::Error::other("the log syncer has stopped")));
                }
            }
            None => (req.done)(Err(io::Error::other("the log syncer has stopped"))),
        }
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(rx: mpsc::Receiver<SyncReq>, log: Arc<Mutex<Log>>) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
        }
        complete(batch, &log);
    }
}

/// Covers a batch of appends with one sync per file, then completes them.
fn complete(batch: Vec<SyncReq>, log: &Mutex<Log>) {
    {
        let failed = log.lock().failed.clone();
        let res = match failed {
            Some(why) => Err(why),
            None => sync_all(&batch).map_err(|e| {
                let why = format!("fsync of the metadata log failed: {e}");
                tracing::error!("{why}");
                let mut l = log.lock();
                if l.failed.is_none() {
                    l.failed = Some(why.clone());
                }
                why
            }),
        };
        for req in batch {
            (req.done)(res.clone().map_err(io::Error::other));
        }
    }
}

/// Syncs each distinct file of the batch once, in order of first appearance.
fn sync_all(batch: &[SyncReq]) -> io::Result<()> {
    let mut done: Vec<*const ()> = Vec::new();
    for f in batch.iter().filter_map(|r| r.file.as_ref()) {
        let key = Arc::as_ptr(f) as *const ();
        if done.contains(&key) {
            continue;
        }
        f.sync_data()?;
        done.push(key);
    }
    Ok(())
}

#[cfg(test)]
#[path = "syncer_tests.rs"]
mod tests;
