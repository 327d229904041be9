//! A share-partition's acquisition (ShareFetch, design §2.3): which
//! AVAILABLE offsets below the cursor are taken again and which new ones
//! from it, batch alignment, record-limit mode, the lock limit, throttling
//! of records near the delivery limit, and archiving what the log no longer
//! holds.

use std::sync::Arc;

use super::*;

impl SharePartition {
    /// ShareFetch's acquisition (§2.3) over what the caller read: re-acquires
    /// AVAILABLE offsets below the cursor and takes new ones from it, at most
    /// `min(MaxRecords, max.record.locks − in flight)` (at the lock limit
    /// only AVAILABLE ones below the cursor); batch-optimized mode extends
    /// new records to the end of the batch holding the last one wanted and
    /// splits them at about `batch_size` at batch boundaries; record-limit
    /// mode takes exactly that many. A batch holding a record delivered
    /// [`ShareLimits::throttle_limit`] times or more is delivered alone.
    ///
    /// Before acquiring it applies `log.log_start` (§2.5) and archives
    /// AVAILABLE offsets between `fetch_offset` and the first batch read
    /// (the log no longer has them: compaction), as Kafka's
    /// `maybeArchiveStaleBatches`; new offsets the log skips between the
    /// cursor and the first batch read are archived with count 0 (Kafka
    /// leaves a hole in its cache; es keeps the cache contiguous).
    pub fn acquire(&mut self, p: &AcquireParams, log: &LogView) -> Result<Acquired, ShareError> {
        check_offset("log start", log.log_start)?;
        check_offset("end", log.end)?;
        check_offset("fetch offset", log.fetch_offset)?;
        let mut prev: Option<i64> = None;
        for &(f, l) in log.batches {
            check_offset("batch first offset", f)?;
            check_offset("batch last offset", l)?;
            if f > l || prev.is_some_and(|p| f <= p) {
                return Err(ShareError::Internal(format!(
                    "log batches not ascending at ({f}, {l})"
                )));
            }
            prev = Some(l);
        }

        let mut fx = Effects::new(self.start);
        self.move_log_start(log.log_start);
        let mut records = Vec::new();
        if p.max_records > 0 {
            self.acquire_inner(p, log, &mut fx, &mut records);
        }
        Ok(Acquired {
            records,
            outcome: self.finish(fx),
        })
    }

    fn acquire_inner(
        &mut self,
        p: &AcquireParams,
        log: &LogView,
        fx: &mut Effects,
        out: &mut Vec<AcquiredRecords>,
    ) {
        // The batches read, below the end and not wholly below start.
        let wins: Vec<(i64, i64)> = log
            .batches
            .iter()
            .filter(|&&(f, l)| l >= self.start && f < log.end)
            .map(|&(f, l)| (f, l.min(log.end - 1)))
            .collect();
        let (Some(&(first_read, _)), Some(&(_, hi))) = (wins.first(), wins.last()) else {
            return;
        };
        let lo = first_read.max(self.start);
        let fetch_offset = log.fetch_offset.max(self.start);
        if fetch_offset < lo {
            // Nothing of [fetch_offset, lo) is in the log any more.
            self.archive_available(fetch_offset, lo.min(self.cursor) - 1, fx);
        }

        let member: Arc<str> = Arc::from(p.member);
        let deadline = p.now_ms.saturating_add(p.lock_duration_ms);
        let limit = self.limits.delivery_count_limit;
        let throttle = self.limits.throttle_limit();
        let max_records = i64::from(p.max_records);
        let mut allowed = max_records.min(self.limits.max_record_locks - self.in_flight());
        let mut hi_acq = hi;
        if allowed <= 0 {
            if fetch_offset < self.cursor {
                // At the lock limit: only records below the cursor.
                allowed = max_records.min(self.cursor - fetch_offset);
                hi_acq = hi.min(self.cursor - 1);
            } else {
                return;
            }
        }

        let mut acquired: i64 = 0;
        let mut stop = false;
        for key in self.keys_overlapping(lo, hi_acq) {
            if acquired >= allowed {
                break;
            }
            let Some(b) = self.cache.get(&key) else {
                continue;
            };
            let last = b.last;
            let full = key >= lo && last <= hi_acq;
            let remaining = allowed - acquired;
            let record_limit_subset =
                p.mode == AcquireMode::RecordLimit && last - key + 1 > remaining;
            let throttled = match &b.states {
                States::Whole(r) => r.state == RecordState::Available && r.count >= throttle,
                States::PerOffset(v) => (key.max(lo)..=last.min(hi_acq)).any(|o| {
                    v.get((o - key) as usize)
                        .is_some_and(|r| r.state == RecordState::Available && r.count >= throttle)
                }),
            };
            if throttled && acquired > 0 {
                // The throttled batch goes alone, in a later fetch.
                stop = true;
                break;
            }
            let whole_available = match &b.states {
                States::Whole(r) => Some(r.state == RecordState::Available),
                States::PerOffset(_) => None,
            };
            if !full || whole_available.is_none() || record_limit_subset || throttled {
                if whole_available == Some(false)
                    || (whole_available == Some(true) && !self.split(key))
                {
                    continue;
                }
                let cap = (p.mode == AcquireMode::RecordLimit).then_some(remaining);
                let got = self.acquire_offsets(key, lo, hi_acq, cap, &member, deadline, fx, out);
                acquired += got;
                if throttled && got > 0 {
                    stop = true;
                    break;
                }
                continue;
            }
            let Some(Batch {
                states: States::Whole(r),
                ..
            }) = self.cache.get_mut(&key)
            else {
                continue;
            };
            if r.state != RecordState::Available {
                continue;
            }
            if r.count >= limit {
                // Only after the limit was lowered: never delivered again.
                r.state = RecordState::Archived;
                fx.mark(key, last);
                continue;
            }
            r.acquire(&member, deadline);
            fx.mark(key, last);
            out.push(AcquiredRecords {
                first: key,
                last,
                delivery_count: r.count,
            });
            acquired += last - key + 1;
        }

        if stop || acquired >= allowed || hi_acq < self.cursor {
            return;
        }
        // New records, from the cursor (or the first one read above it).
        let new_first = self.cursor.max(lo);
        let remaining = allowed - acquired;
        let mut new_last = hi_acq;
        if new_last - new_first + 1 > remaining {
            let target = new_first + remaining - 1;
            new_last = match p.mode {
                AcquireMode::RecordLimit => target,
                // Kafka's alignment overshoot: to the end of the batch
                // holding (or, in a gap, following) the last record wanted.
                AcquireMode::BatchOptimized => {
                    wins.iter().find(|w| w.1 >= target).map_or(target, |w| w.1)
                }
            };
        }
        if new_first > self.cursor {
            let hole = Rec::at_rest(RecordState::Archived, 0);
            self.cache.insert(
                self.cursor,
                Batch {
                    last: new_first - 1,
                    states: States::Whole(hole),
                },
            );
            fx.mark(self.cursor, new_first - 1);
        }
        let batch_size = i64::from(p.batch_size.max(1));
        let mut pieces = Vec::new();
        let mut cur = new_first;
        if new_last - new_first + 1 > batch_size {
            for &(f, _) in &wins {
                if f > new_last {
                    break;
                }
                if f - cur >= batch_size {
                    pieces.push((cur, f - 1));
                    cur = f;
                }
            }
        }
        pieces.push((cur, new_last));
        for (f, l) in pieces {
            let mut r = Rec::at_rest(RecordState::Available, 0);
            r.acquire(&member, deadline);
            self.cache.insert(
                f,
                Batch {
                    last: l,
                    states: States::Whole(r),
                },
            );
            fx.mark(f, l);
            out.push(AcquiredRecords {
                first: f,
                last: l,
                delivery_count: 1,
            });
        }
        self.cursor = new_last + 1;
    }

    /// Acquires the AVAILABLE offsets of a per-offset batch within
    /// `[lo, hi]`, at most `cap` when given. Adjacent offsets with equal
    /// counts go out as one AcquiredRecords (Kafka sends one per offset;
    /// clients read both the same).
    #[allow(clippy::too_many_arguments)]
    fn acquire_offsets(
        &mut self,
        key: i64,
        lo: i64,
        hi: i64,
        cap: Option<i64>,
        member: &Arc<str>,
        deadline: i64,
        fx: &mut Effects,
        out: &mut Vec<AcquiredRecords>,
    ) -> i64 {
        let limit = self.limits.delivery_count_limit;
        let Some(Batch {
            last,
            states: States::PerOffset(v),
        }) = self.cache.get_mut(&key)
        else {
            return 0;
        };
        let mut got = 0;
        for o in key.max(lo)..=(*last).min(hi) {
            if cap.is_some_and(|c| got >= c) {
                break;
            }
            let Some(r) = v.get_mut((o - key) as usize) else {
                break;
            };
            if r.state != RecordState::Available {
                continue;
            }
            fx.mark(o, o);
            if r.count >= limit {
                r.state = RecordState::Archived;
                continue;
            }
            r.acquire(member, deadline);
            match out.last_mut() {
                Some(a) if a.last + 1 == o && a.delivery_count == r.count => a.last = o,
                _ => out.push(AcquiredRecords {
                    first: o,
                    last: o,
                    delivery_count: r.count,
                }),
            }
            got += 1;
        }
        got
    }

    /// AVAILABLE offsets in `[from, to]` become ARCHIVED (count kept).
    fn archive_available(&mut self, from: i64, to: i64, fx: &mut Effects) {
        if from > to {
            return;
        }
        for key in self.keys_overlapping(from, to) {
            let Some(b) = self.cache.get(&key) else {
                continue;
            };
            let last = b.last;
            if let States::Whole(r) = &b.states {
                if r.state != RecordState::Available {
                    continue;
                }
                if (key < from || last > to) && !self.split(key) {
                    continue;
                }
            }
            let Some(b) = self.cache.get_mut(&key) else {
                continue;
            };
            match &mut b.states {
                States::Whole(r) => {
                    r.state = RecordState::Archived;
                    fx.mark(key, last);
                }
                States::PerOffset(v) => {
                    for o in key.max(from)..=last.min(to) {
                        if let Some(r) = v.get_mut((o - key) as usize) {
                            if r.state == RecordState::Available {
                                r.state = RecordState::Archived;
                                fx.mark(o, o);
                            }
                        }
                    }
                }
            }
        }
    }
}
