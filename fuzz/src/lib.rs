//! es-fuzz: what the fuzz targets share. The targets themselves are in
//! `fuzz_targets/` (see docs/fuzzing.md).
//!
//! - [`template`]: placeholders (`%P`, `%S`, ...) that the harness replaces in
//!   fuzzer-chosen bytes with values only it knows at run time: a SCRAM proof
//!   over a server nonce drawn from the OS, an API key's secret. Without them a
//!   fuzzer never reaches a successful login, so it could not test that only a
//!   right credential gets one.
//! - [`scram`]: the known SCRAM users and a SCRAM client written here with
//!   `hmac` and `sha2`, not with es-auth's code, so that "the server accepted
//!   only the proof computed from the password" is checked by an independent
//!   oracle. It checks itself against RFC 7677's exchange and Kafka's
//!   transcripts once at start.
//! - [`plain`]: the API keys PLAIN checks: two live keys hashed with the
//!   cheapest argon2id parameters (es-auth reads the cost from each stored PHC
//!   string) and one revoked key.
//! - [`alloc`]: a counting global allocator, for the targets that bound the
//!   memory one decode may take by a multiple of its input.
//! - [`Sampler`]: how often the harness lets an input pay for an argon2id
//!   verification with es's real cost (the dummy hash an unknown API key id is
//!   checked against, about 20 ms here).
//! - [`registry`]: the schema registry's parse-and-reload check, shared by
//!   its targets.
//!
//! The oracles assert; a failed assertion is a finding, as is any panic of es.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

pub mod alloc;
pub mod plain;
pub mod registry;
pub mod scram;
pub mod template;

/// Lets one call in `every` through, the first one included, so that a
/// reproducer run alone behaves as it did in the fuzzing run's first call.
#[derive(Debug)]
pub struct Sampler {
    every: u64,
    calls: AtomicU64,
}

impl Sampler {
    pub const fn new(every: u64) -> Self {
        Sampler {
            every,
            calls: AtomicU64::new(0),
        }
    }

    /// Whether this call may take the expensive path.
    pub fn allow(&self) -> bool {
        self.calls
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(self.every)
    }
}

/// Whether `ES_FUZZ_TRACE` is set: the targets then print each step, to see
/// what an input (a seed, a reproducer) does.
pub fn tracing() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("ES_FUZZ_TRACE").is_some())
}

/// Prints when [`tracing`].
#[macro_export]
macro_rules! trace {
    ($($arg:tt)*) => {
        if $crate::tracing() {
            eprintln!($($arg)*);
        }
    };
}

/// Splits `data` at each occurrence of `sep` (which is dropped).
pub fn split_records<'a>(data: &'a [u8], sep: &[u8]) -> Vec<&'a [u8]> {
    assert!(!sep.is_empty());
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i + sep.len() <= data.len() {
        if &data[i..i + sep.len()] == sep {
            out.push(&data[start..i]);
            i += sep.len();
            start = i;
        } else {
            i += 1;
        }
    }
    out.push(&data[start..]);
    out
}
