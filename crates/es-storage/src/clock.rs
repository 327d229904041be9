//! Time, as storage, the coordinators and retention read it.
//!
//! Two kinds of time, never mixed: *wall* time in milliseconds since the Unix
//! epoch (record timestamps, retention by age, transaction and group
//! deadlines that Kafka states in wall time) and *monotonic* time (how long
//! something took, when a timer is due). Everything that reads time takes a
//! [`Clock`] passed in, so that a test, or the cluster simulation, can drive
//! time by hand with a [`ManualClock`]; [`SystemClock`] is the real one.
//! [`wall_ms`] is the one place the process reads the system's wall clock.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

/// A source of wall and monotonic time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Milliseconds since the Unix epoch (0 if the system clock is before it).
    fn now_ms(&self) -> i64;
    /// A monotonic instant: never goes backwards, unaffected by wall-clock steps.
    fn monotonic(&self) -> Instant;
}

/// A shared clock handle, as passed to storage and the coordinators.
pub type SharedClock = Arc<dyn Clock>;

/// The system's wall clock, in milliseconds since the Unix epoch.
pub fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The real clock: [`wall_ms`] and [`Instant::now`].
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        wall_ms()
    }

    fn monotonic(&self) -> Instant {
        Instant::now()
    }
}

/// The real clock as a shared handle.
pub fn system() -> SharedClock {
    Arc::new(SystemClock)
}

/// A clock that moves only when told to ([`ManualClock::advance`]); wall and
/// monotonic time move together.
#[derive(Debug)]
pub struct ManualClock {
    base: Instant,
    state: Mutex<ManualState>,
}

#[derive(Debug)]
struct ManualState {
    wall_ms: i64,
    elapsed: Duration,
}

impl ManualClock {
    /// A clock whose wall time starts at `wall_ms`.
    pub fn new(wall_ms: i64) -> Arc<ManualClock> {
        Arc::new(ManualClock {
            base: Instant::now(),
            state: Mutex::new(ManualState {
                wall_ms,
                elapsed: Duration::ZERO,
            }),
        })
    }

    /// Moves both wall and monotonic time forward by `by`.
    pub fn advance(&self, by: Duration) {
        let mut s = self.state.lock();
        s.elapsed += by;
        s.wall_ms = s
            .wall_ms
            .saturating_add(i64::try_from(by.as_millis()).unwrap_or(i64::MAX));
    }

    /// Sets wall time alone (a wall-clock step); monotonic time is unchanged.
    pub fn set_wall_ms(&self, wall_ms: i64) {
        self.state.lock().wall_ms = wall_ms;
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.state.lock().wall_ms
    }

    fn monotonic(&self) -> Instant {
        self.base + self.state.lock().elapsed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = ManualClock::new(1_000);
        let t0 = c.monotonic();
        assert_eq!(c.now_ms(), 1_000);
        assert_eq!(c.monotonic(), t0);
        c.advance(Duration::from_millis(250));
        assert_eq!(c.now_ms(), 1_250);
        assert_eq!(c.monotonic() - t0, Duration::from_millis(250));
        c.set_wall_ms(10);
        assert_eq!(c.now_ms(), 10);
        assert_eq!(c.monotonic() - t0, Duration::from_millis(250));
    }

    #[test]
    fn system_clock_reads_the_epoch() {
        // 2020-01-01 in ms: any real machine is past it.
        assert!(SystemClock.now_ms() > 1_577_836_800_000);
        let a = SystemClock.monotonic();
        assert!(SystemClock.monotonic() >= a);
    }
}
