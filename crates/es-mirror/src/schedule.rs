//! When a link's worker does its periodic work, apart from copying: the
//! refresh (topics, partitions, configs, the assignment; every [`REFRESH`]
//! while the source answers, and after a failure again after a back-off
//! that doubles from [`BACKOFF_MIN`] to [`BACKOFF_MAX`] and is reset by a
//! refresh with no failure since the one before) and the group offset sync
//! (every link's `group_sync_interval_ms`, whatever the refresh's period).
//! Pure bookkeeping over instants the caller passes, so it is tested
//! without a clock.

use std::time::{Duration, Instant};

/// How often the worker re-reads the source's topics and its own while
/// all is well.
pub const REFRESH: Duration = Duration::from_secs(5);
/// The first wait before a failed refresh (or a source error) is followed
/// by another refresh; it doubles after each failure ...
pub const BACKOFF_MIN: Duration = Duration::from_secs(1);
/// ... up to this.
pub const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// The worker's timers.
#[derive(Debug)]
pub struct Schedule {
    next_refresh: Instant,
    backoff: Duration,
    /// The source consumer reported an error since the last refresh.
    trouble: bool,
    last_groups: Option<Instant>,
}

impl Schedule {
    /// A first refresh due at once.
    pub fn new(now: Instant) -> Schedule {
        Schedule {
            next_refresh: now,
            backoff: BACKOFF_MIN,
            trouble: false,
            last_groups: None,
        }
    }

    pub fn refresh_due(&self, now: Instant) -> bool {
        now >= self.next_refresh
    }

    /// Something changed (the metadata, a topic was created, an append
    /// failed): refresh at once.
    pub fn refresh_now(&mut self, now: Instant) {
        self.next_refresh = now;
    }

    /// A refresh ended, `ok` when nothing in it failed.
    pub fn refreshed(&mut self, ok: bool, now: Instant) {
        if ok {
            self.next_refresh = now + REFRESH;
            if !self.trouble {
                self.backoff = BACKOFF_MIN;
            }
        } else {
            self.next_refresh = now + self.backoff;
            self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
        }
        self.trouble = false;
    }

    /// The source consumer reported an error: the next refresh (which
    /// re-reads the source and may assign again) comes within the current
    /// back-off, which then doubles. Errors repeated before that refresh
    /// change nothing.
    pub fn source_failed(&mut self, now: Instant) {
        self.trouble = true;
        let at = now + self.backoff;
        if at < self.next_refresh {
            self.next_refresh = at;
            self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
        }
    }

    /// The wait before the next refresh after a failure now.
    pub fn backoff(&self) -> Duration {
        self.backoff
    }

    /// Whether the group offsets are due, every `interval`.
    pub fn groups_due(&self, interval: Duration, now: Instant) -> bool {
        self.last_groups
            .is_none_or(|t| now.saturating_duration_since(t) >= interval)
    }

    pub fn groups_synced(&mut self, now: Instant) {
        self.last_groups = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_refreshes_back_off_doubling_to_the_cap_and_a_clean_one_resets() {
        let t0 = Instant::now();
        let mut s = Schedule::new(t0);
        assert!(s.refresh_due(t0));
        let mut now = t0;
        let mut waits = Vec::new();
        for _ in 0..8 {
            s.refreshed(false, now);
            let next = s.next_refresh;
            waits.push(next - now);
            assert!(!s.refresh_due(next - Duration::from_millis(1)));
            assert!(s.refresh_due(next));
            now = next;
        }
        let secs: Vec<u64> = waits.iter().map(Duration::as_secs).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 30, 30, 30]);
        s.refreshed(true, now);
        assert_eq!(s.next_refresh - now, REFRESH);
        assert_eq!(s.backoff(), BACKOFF_MIN);
    }

    #[test]
    fn a_source_error_brings_the_refresh_forward_once_and_keeps_the_back_off_until_a_clean_interval(
    ) {
        let t0 = Instant::now();
        let mut s = Schedule::new(t0);
        s.refreshed(true, t0);
        // An error 1 s later: refresh 1 s after it, not at t0 + 5 s.
        let t1 = t0 + Duration::from_secs(1);
        s.source_failed(t1);
        assert_eq!(s.next_refresh, t1 + BACKOFF_MIN);
        // The same error again before that refresh changes nothing.
        s.source_failed(t1 + Duration::from_millis(100));
        assert_eq!(s.next_refresh, t1 + BACKOFF_MIN);
        // The refresh succeeds, but the interval had an error: the
        // back-off stays doubled, so an error that persists (every
        // assignment fails again) is retried ever less often.
        let t2 = t1 + BACKOFF_MIN;
        s.refreshed(true, t2);
        assert_eq!(s.backoff(), 2 * BACKOFF_MIN);
        let t3 = t2 + Duration::from_millis(10);
        s.source_failed(t3);
        assert_eq!(s.next_refresh, t3 + 2 * BACKOFF_MIN);
        // A clean interval resets it.
        let t4 = t3 + 2 * BACKOFF_MIN;
        s.refreshed(true, t4);
        s.refreshed(true, t4 + REFRESH);
        assert_eq!(s.backoff(), BACKOFF_MIN);
    }

    #[test]
    fn group_syncs_follow_their_own_interval_not_the_refresh() {
        let t0 = Instant::now();
        let mut s = Schedule::new(t0);
        let every = Duration::from_millis(500);
        assert!(s.groups_due(every, t0));
        s.groups_synced(t0);
        s.refreshed(true, t0);
        let mut syncs = 0;
        let mut now = t0;
        // Over one refresh period, ten syncs at 500 ms.
        while now < t0 + REFRESH {
            now += Duration::from_millis(100);
            if s.groups_due(every, now) {
                s.groups_synced(now);
                syncs += 1;
            }
        }
        assert_eq!(syncs, 10);
        assert!(!s.refresh_due(t0 + REFRESH - Duration::from_millis(1)));
    }
}
