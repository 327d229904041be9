//! A share-partition's acknowledgements and releases (design §2.4-2.5):
//! Accept, Release, Reject, Gap and Renew applied all or nothing, a
//! member's records released (session or connection close), lock expiry,
//! and the log start passing the share-partition's start.

use super::*;

impl SharePartition {
    /// Applies acknowledgement batches (§2.4), all or nothing: the first
    /// failing batch rolls back every change of the call and its error is
    /// the partition's answer. Batches wholly below start are ignored.
    ///
    /// The request-shape rules the handler checks first (ascending batches,
    /// Renew only with IsRenewAck) are not repeated here; a batch whose
    /// shape is wrong anyway (first > last, types neither one nor one per
    /// offset, a type outside 0-4) answers INVALID_REQUEST.
    pub fn acknowledge(
        &mut self,
        p: &AckParams,
        batches: &[AckBatch],
    ) -> Result<Outcome, ShareError> {
        // Acknowledging never re-keys a batch (splits keep their extent and
        // start moves only in `finish`), so restoring the touched batches
        // undoes the call.
        let saved: Vec<(i64, Batch)> = if self.cursor > self.start {
            let lo = batches
                .iter()
                .map(|b| b.first.max(self.start))
                .min()
                .unwrap_or(self.start);
            let hi = batches
                .iter()
                .map(|b| b.last.min(self.cursor - 1))
                .max()
                .unwrap_or(self.start - 1);
            self.keys_overlapping(lo, hi)
                .into_iter()
                .filter_map(|k| self.cache.get(&k).map(|b| (k, b.clone())))
                .collect()
        } else {
            Vec::new()
        };
        let mut fx = Effects::new(self.start);
        for b in batches {
            if let Err(e) = self.ack_batch(p, b, &mut fx) {
                for (k, b) in saved {
                    self.cache.insert(k, b);
                }
                return Err(e);
            }
        }
        Ok(self.finish(fx))
    }

    fn ack_batch(
        &mut self,
        p: &AckParams,
        b: &AckBatch,
        fx: &mut Effects,
    ) -> Result<(), ShareError> {
        if b.first > b.last {
            return Err(ShareError::InvalidRequest(format!(
                "Batch first offset {} is greater than its last offset {}.",
                b.first, b.last
            )));
        }
        let len = i128::from(b.last) - i128::from(b.first) + 1;
        if b.types.is_empty() || (b.types.len() != 1 && b.types.len() as i128 != len) {
            return Err(ShareError::InvalidRequest(format!(
                "Invalid acknowledge types for batch {}-{}.",
                b.first, b.last
            )));
        }
        let mut types = Vec::with_capacity(b.types.len());
        for &t in &b.types {
            match AckType::from_wire(t) {
                Some(t) => types.push(t),
                None => {
                    return Err(ShareError::InvalidRequest(format!(
                        "Invalid acknowledge type: {:?}",
                        b.types
                    )))
                }
            }
        }
        if !p.renew_allowed && types.contains(&AckType::Renew) {
            return Err(ShareError::InvalidRecordState(msg::RENEW_DISABLED));
        }
        if b.last < self.start {
            return Ok(());
        }
        if self.cache.is_empty() {
            return Err(ShareError::InvalidRecordState(msg::NOT_FOUND));
        }
        let from = b.first.max(self.start);
        if from >= self.cursor {
            return Err(ShareError::InvalidRequest(msg::FIRST_PAST.to_string()));
        }
        if b.last >= self.cursor {
            return Err(ShareError::InvalidRequest(msg::LAST_PAST.to_string()));
        }
        let single = (types.len() == 1).then_some(types[0]);
        let limit = self.limits.delivery_count_limit;
        let renew_deadline = p.now_ms.saturating_add(p.lock_duration_ms);
        for key in self.keys_overlapping(from, b.last) {
            let Some(batch) = self.cache.get_mut(&key) else {
                continue;
            };
            let last = batch.last;
            if let States::Whole(r) = &mut batch.states {
                let covered = key >= from && last <= b.last;
                match single {
                    Some(t) if covered => {
                        if r.state != RecordState::Acquired {
                            return Err(ShareError::InvalidRecordState(msg::BATCH_NOT_ACQUIRED));
                        }
                        if !r.owned_by(p.member) {
                            return Err(ShareError::InvalidRecordState(msg::NOT_OWNER_BATCH));
                        }
                        let effect = r.apply(t, limit, renew_deadline);
                        fx.note(key, last, effect);
                        continue;
                    }
                    _ => {
                        if r.state != RecordState::Acquired {
                            return Err(ShareError::InvalidRecordState(msg::SUBSET_NOT_ACQUIRED));
                        }
                    }
                }
                if !self.split(key) {
                    return Err(ShareError::InvalidRecordState(msg::UNABLE));
                }
            }
            let Some(Batch {
                states: States::PerOffset(v),
                ..
            }) = self.cache.get_mut(&key)
            else {
                return Err(ShareError::InvalidRecordState(msg::UNABLE));
            };
            for o in key.max(from)..=last.min(b.last) {
                let Some(r) = v.get_mut((o - key) as usize) else {
                    return Err(ShareError::InvalidRecordState(msg::UNABLE));
                };
                if r.state != RecordState::Acquired {
                    return Err(ShareError::InvalidRecordState(msg::OFFSET_NOT_ACQUIRED));
                }
                if !r.owned_by(p.member) {
                    return Err(ShareError::InvalidRecordState(msg::NOT_OWNER_OFFSET));
                }
                let t = match single {
                    Some(t) => t,
                    None => types
                        .get((o - b.first) as usize)
                        .copied()
                        .ok_or(ShareError::InvalidRecordState(msg::UNABLE))?,
                };
                let effect = r.apply(t, limit, renew_deadline);
                fx.note(o, o, effect);
            }
        }
        Ok(())
    }

    /// Every record `member` holds becomes AVAILABLE, or ARCHIVED at the
    /// delivery count limit; counts are kept (session close, connection
    /// close, §2.6).
    ///
    /// Deviation: Kafka's `releaseAcquiredRecords` lowers the delivery
    /// count ("fetched but not delivered") and never archives there; es
    /// cannot know whether the response reached the client, has already
    /// journaled the acquisition with its count, and keeps delivery counts
    /// monotonic, so a poison record cannot dodge the limit by closing
    /// sessions.
    pub fn release_member(&mut self, member: &str) -> Outcome {
        let limit = self.limits.delivery_count_limit;
        self.release_where(|r| r.owned_by(member), limit)
    }

    /// Locks past their deadline: ACQUIRED → AVAILABLE, or ARCHIVED at the
    /// limit; counts are kept (§2.5). Returns the next deadline still
    /// pending.
    pub fn expire_locks(&mut self, now_ms: i64) -> Expired {
        let limit = self.limits.delivery_count_limit;
        let due = |r: &Rec| r.state == RecordState::Acquired && r.deadline_ms <= now_ms;
        let mut records = 0i64;
        for (&key, b) in &self.cache {
            match &b.states {
                States::Whole(r) if due(r) => records += b.last - key + 1,
                States::Whole(_) => {}
                States::PerOffset(v) => records += v.iter().filter(|r| due(r)).count() as i64,
            }
        }
        let outcome = self.release_where(|r| r.deadline_ms <= now_ms, limit);
        Expired {
            records,
            outcome,
            next_deadline_ms: self.next_lock_deadline(),
        }
    }

    fn release_where(&mut self, pick: impl Fn(&Rec) -> bool, limit: u16) -> Outcome {
        let mut fx = Effects::new(self.start);
        for (&key, b) in self.cache.iter_mut() {
            match &mut b.states {
                States::Whole(r) => {
                    if r.state == RecordState::Acquired && pick(r) {
                        let effect = r.release(limit);
                        fx.note(key, b.last, effect);
                    }
                }
                States::PerOffset(v) => {
                    for (i, r) in v.iter_mut().enumerate() {
                        if r.state == RecordState::Acquired && pick(r) {
                            let o = key + i as i64;
                            let effect = r.release(limit);
                            fx.note(o, o, effect);
                        }
                    }
                }
            }
        }
        self.finish(fx)
    }

    /// The log start moved (retention, DeleteRecords): start follows it
    /// (§2.5, §3.11). Records below it are dropped, ACQUIRED ones too: they
    /// are never delivered again and acknowledgements of them are ignored as
    /// below start, which is where Kafka ends up when their locks come back.
    pub fn advance_log_start(&mut self, log_start: i64) -> Outcome {
        let fx = Effects::new(self.start);
        self.move_log_start(log_start.clamp(0, OFFSET_MAX));
        self.finish(fx)
    }

    /// Moves start to `log_start` when beyond it; `finish` journals it.
    pub(super) fn move_log_start(&mut self, log_start: i64) {
        if log_start <= self.start {
            return;
        }
        while let Some(entry) = self.cache.first_entry() {
            let key = *entry.key();
            if entry.get().last < log_start {
                entry.remove();
                continue;
            }
            if key < log_start {
                let mut b = entry.remove();
                if let States::PerOffset(v) = &mut b.states {
                    v.drain(..(log_start - key) as usize);
                }
                self.cache.insert(log_start, b);
            }
            break;
        }
        self.start = log_start;
        self.cursor = self.cursor.max(log_start);
    }
}
