//! Bounded waits: retry a condition until it holds or a deadline passes,
//! instead of sleeping and hoping.

use std::time::{Duration, Instant};

/// How often [`eventually`] looks again.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Retries `f` until it returns `Some`, failing the test after `timeout`.
pub fn eventually<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(POLL_INTERVAL);
    }
}
