//! Runs openraft's own storage test suite against the metadata store
//! (`es_meta::store`) on the real file system, each test in a fresh
//! temporary `data/meta/`.

use std::sync::Arc;

use es_meta::store::{self, LogStore, StateMachine};
use es_meta::{MetaTypes, NoFiles};
use es_storage::fs::RealFs;
use openraft::testing::{StoreBuilder, Suite};
use openraft::{ErrorSubject, ErrorVerb, StorageError};

struct Builder;

impl StoreBuilder<MetaTypes, LogStore, StateMachine, tempfile::TempDir> for Builder {
    async fn build(
        &self,
    ) -> Result<(tempfile::TempDir, LogStore, StateMachine), StorageError<u64>> {
        let err = |e: std::io::Error| {
            StorageError::from_io_error(ErrorSubject::Store, ErrorVerb::Read, e)
        };
        let tmp = tempfile::tempdir().map_err(err)?;
        let dir = tmp.path().join("data").join("meta");
        let (log, sm) = store::open(Arc::new(RealFs), &dir, Arc::new(NoFiles)).map_err(err)?;
        Ok((tmp, log, sm))
    }
}

/// Suite::test_all is synchronous and runs each test on its own tokio
/// runtime, so this is a plain test, not a tokio one.
#[test]
fn openraft_storage_suite() {
    if let Err(e) = Suite::test_all(Builder) {
        panic!("openraft storage suite failed: {e}");
    }
}
