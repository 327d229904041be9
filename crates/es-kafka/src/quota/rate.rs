//! Kafka's windowed rate (`Rate` over a `WindowedSum`, as a quota sensor
//! measures it) and the throttle time of a rate over its bound
//! (`QuotaUtils.throttleTime`).
//!
//! Sans-io: every call takes the time, in milliseconds, so tests drive it
//! by hand. The arithmetic follows Kafka's step by step (its samples, the
//! extra "overlapping" sample, the purge of samples without events in the
//! last `samples x window`, the window size that counts at least
//! `samples - 1` whole windows), because the throttle times a client sees
//! come straight out of it.

/// How a rate is measured: `samples` windows of `window_ms` each (Kafka's
/// `quota.window.num` and `quota.window.size.seconds`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateConfig {
    pub samples: u32,
    pub window_ms: u64,
}

#[derive(Clone, Copy, Debug)]
struct Sample {
    value: f64,
    event_count: u64,
    start_ms: i64,
    last_event_ms: i64,
}

impl Sample {
    fn new(now: i64) -> Self {
        Sample {
            value: 0.0,
            event_count: 0,
            start_ms: now,
            last_event_ms: now,
        }
    }

    fn reset(&mut self, now: i64) {
        *self = Sample::new(now);
    }
}

/// A sum over the last windows, and its rate per second.
#[derive(Clone, Debug)]
pub struct Rate {
    samples: Vec<Sample>,
    current: usize,
    /// The time of the last record, for expiry of idle sensors.
    pub last_record_ms: i64,
}

impl Rate {
    pub fn new(now: i64) -> Self {
        Rate {
            samples: Vec::new(),
            current: 0,
            last_record_ms: now,
        }
    }

    fn window_ms(c: &RateConfig) -> i64 {
        i64::try_from(c.window_ms.max(1)).unwrap_or(i64::MAX)
    }

    fn current_sample(&mut self, now: i64) -> &mut Sample {
        if self.samples.is_empty() {
            self.samples.push(Sample::new(now));
        }
        let i = self.current.min(self.samples.len() - 1);
        &mut self.samples[i]
    }

    /// Adds `value` at `now` (negative to take back what was added).
    pub fn record(&mut self, c: &RateConfig, value: f64, now: i64) {
        self.last_record_ms = now;
        let window = Self::window_ms(c);
        let s = *self.current_sample(now);
        // Kafka's `isComplete` (its event window is unbounded for quotas).
        if now - s.start_ms >= window {
            // One extra slot: the sample that overlaps the window's start.
            let slots = c.samples.max(1) as usize + 1;
            self.current = (self.current + 1) % slots;
            if self.current >= self.samples.len() {
                self.samples.push(Sample::new(now));
            } else {
                self.samples[self.current].reset(now);
            }
        }
        let s = self.current_sample(now);
        s.value += value;
        s.event_count += 1;
        s.last_event_ms = now;
    }

    /// Resets the samples that saw no event in the last `samples x window`.
    fn purge(&mut self, c: &RateConfig, now: i64) {
        let expire = i64::from(c.samples.max(1)).saturating_mul(Self::window_ms(c));
        for s in &mut self.samples {
            if now - s.last_event_ms >= expire {
                s.reset(now);
            }
        }
    }

    /// Kafka's `Rate.windowSize`: the time the samples cover, counting at
    /// least `samples - 1` whole windows; never below 1 ms.
    pub fn window_size_ms(&mut self, c: &RateConfig, now: i64) -> i64 {
        self.purge(c, now);
        if self.samples.is_empty() {
            self.samples.push(Sample::new(now));
        }
        let oldest = self.samples.iter().map(|s| s.start_ms).min().unwrap_or(now);
        let window = Self::window_ms(c);
        let mut elapsed = now - oldest;
        let full = elapsed / window;
        let min_full = i64::from(c.samples.max(1)) - 1;
        if full < min_full {
            elapsed += (min_full - full) * window;
        }
        elapsed.max(1)
    }

    /// The rate per second at `now` (Kafka's `Rate.measure`, in seconds).
    pub fn measure(&mut self, c: &RateConfig, now: i64) -> f64 {
        self.purge(c, now);
        let total: f64 = self.samples.iter().map(|s| s.value).sum();
        let window = self.window_size_ms(c, now);
        total / (window as f64 / 1000.0)
    }
}

/// Kafka's `QuotaUtils.throttleTime`: how long until a rate of `value`
/// measured over `window_ms` comes down to `bound` if nothing more is
/// recorded, `(value - bound) / bound x window`, rounded.
pub fn throttle_time_ms(value: f64, bound: f64, window_ms: i64) -> i64 {
    let t = (value - bound) / bound * window_ms as f64;
    if t.is_nan() || t <= 0.0 {
        return 0;
    }
    // Java's Math.round, saturating as its long conversion does.
    let r = (t + 0.5).floor();
    if r >= i64::MAX as f64 {
        i64::MAX
    } else {
        r as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const C: RateConfig = RateConfig {
        samples: 11,
        window_ms: 1000,
    };

    #[test]
    fn a_first_burst_is_spread_over_ten_windows() {
        // One record: the window counts 10 whole windows (samples - 1), so
        // 10_000 bytes at once read as 1_000 bytes per second.
        let mut r = Rate::new(0);
        r.record(&C, 10_000.0, 0);
        assert_eq!(r.window_size_ms(&C, 0), 10_000);
        assert!((r.measure(&C, 0) - 1_000.0).abs() < 1e-9);
        // Half a window later, the same.
        assert_eq!(r.window_size_ms(&C, 500), 10_500);
    }

    #[test]
    fn samples_roll_over_and_expire() {
        let mut r = Rate::new(0);
        for s in 0..30 {
            r.record(&C, 100.0, s * 1000);
        }
        // 12 slots hold the samples of 18 s .. 29 s; the one of 18 s saw
        // its last event 11 s ago and is purged: 11 samples of 100 over the
        // 10 s since the oldest one started.
        let now = 29_000;
        let rate = r.measure(&C, now);
        let window = r.window_size_ms(&C, now);
        assert_eq!(window, 10_000);
        assert!((rate - 110.0).abs() < 1e-9, "{rate}");
        // After 11 idle seconds every sample is gone.
        assert!(r.measure(&C, now + 11_000).abs() < 1e-9);
    }

    #[test]
    fn throttle_time_is_kafkas() {
        // Twice the bound over 10 s: 10 s more bring it down.
        assert_eq!(throttle_time_ms(2_000.0, 1_000.0, 10_000), 10_000);
        assert_eq!(throttle_time_ms(1_000.0, 1_000.0, 10_000), 0);
        assert_eq!(throttle_time_ms(1_000.5, 1_000.0, 1_000), 1);
        assert_eq!(throttle_time_ms(1_000.4, 1_000.0, 1_000), 0);
        assert_eq!(throttle_time_ms(f64::INFINITY, 1.0, 1_000), i64::MAX);
    }
}
