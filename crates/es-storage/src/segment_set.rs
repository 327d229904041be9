//! A partition's segment list, oldest first, the last one active.
//!
//! Readers take a [`SegmentSet::snapshot`] (an `Arc` of the list) and never
//! block a change; a change publishes a new list. The changes are few and
//! named: a roll appends ([`SegmentSet::push_rolled`]), compaction replaces
//! sealed segments ([`SegmentSet::swap_sealed`]), retention drops the oldest
//! ([`SegmentSet::remove_prefix`]). The last two check that the list still
//! starts with the segments their caller read, and change nothing if it does
//! not, so that a pass that raced with another one cannot publish a list
//! built from a stale one. The partition makes every change under its writer
//! lock; the checks keep the list right even so.

use std::sync::Arc;

use parking_lot::RwLock;

use crate::segment::Segment;

/// A snapshot of the segment list.
pub type Segments = Arc<Vec<Arc<Segment>>>;

/// The list changed since the caller read it: nothing was changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Changed;

/// See the module documentation.
#[derive(Debug)]
pub struct SegmentSet {
    list: RwLock<Segments>,
}

/// Whether `list` starts with exactly the segments of `prefix`.
fn starts_with(list: &[Arc<Segment>], prefix: &[Arc<Segment>]) -> bool {
    list.len() >= prefix.len() && prefix.iter().zip(list).all(|(a, b)| Arc::ptr_eq(a, b))
}

impl SegmentSet {
    /// The list recovery found; never empty (a partition always has an
    /// active segment).
    pub fn new(segments: Vec<Arc<Segment>>) -> SegmentSet {
        assert!(!segments.is_empty(), "a partition has an active segment");
        SegmentSet {
            list: RwLock::new(Arc::new(segments)),
        }
    }

    /// The list as it is now.
    pub fn snapshot(&self) -> Segments {
        self.list.read().clone()
    }

    /// The active segment (the last).
    pub fn active(&self) -> Arc<Segment> {
        let list = self.list.read();
        list[list.len() - 1].clone()
    }

    /// Whether the list is exactly `expected` (the same segments).
    pub fn is(&self, expected: &[Arc<Segment>]) -> bool {
        let list = self.list.read();
        list.len() == expected.len() && starts_with(&list, expected)
    }

    /// Whether the list starts with `prefix` and has more after it.
    pub fn starts_with_sealed(&self, prefix: &[Arc<Segment>]) -> bool {
        let list = self.list.read();
        list.len() > prefix.len() && starts_with(&list, prefix)
    }

    /// A roll: `seg` becomes the active segment.
    pub fn push_rolled(&self, seg: Arc<Segment>) {
        let mut list = self.list.write();
        assert!(
            list.last().is_none_or(|a| a.base_offset < seg.base_offset),
            "a rolled segment starts after the active one"
        );
        let mut next = Vec::with_capacity(list.len() + 1);
        next.extend(list.iter().cloned());
        next.push(seg);
        *list = Arc::new(next);
    }

    /// Compaction: replaces the sealed segments `expected` (a prefix of the
    /// list, not the active segment) with `new`. Fails, changing nothing, if
    /// the list no longer starts with `expected`.
    pub fn swap_sealed(
        &self,
        expected: &[Arc<Segment>],
        new: Vec<Arc<Segment>>,
    ) -> Result<Segments, Changed> {
        let mut list = self.list.write();
        if list.len() <= expected.len() || !starts_with(&list, expected) {
            return Err(Changed);
        }
        let mut next = new;
        next.extend(list[expected.len()..].iter().cloned());
        *list = Arc::new(next);
        Ok(list.clone())
    }

    /// A truncation: keeps the first `keep` segments (at least one; the
    /// last of them becomes the active segment) and returns the ones it
    /// dropped. Under the partition's writer lock.
    pub fn truncate_to(&self, keep: usize) -> Vec<Arc<Segment>> {
        let mut list = self.list.write();
        assert!(
            keep >= 1 && keep <= list.len(),
            "a partition keeps a segment"
        );
        let dropped = list[keep..].to_vec();
        *list = Arc::new(list[..keep].to_vec());
        dropped
    }

    /// A truncation of everything: `seg` becomes the only segment.
    /// Returns the ones it replaced.
    pub fn replace_all(&self, seg: Arc<Segment>) -> Vec<Arc<Segment>> {
        let mut list = self.list.write();
        let old = list.to_vec();
        *list = Arc::new(vec![seg]);
        old
    }

    /// Retention: drops the oldest segments `doomed` (a prefix of the list,
    /// never the active segment). Fails, changing nothing, if the list no
    /// longer starts with them.
    pub fn remove_prefix(&self, doomed: &[Arc<Segment>]) -> Result<Segments, Changed> {
        self.swap_sealed(doomed, Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::Fs;
    use crate::simfs::SimFs;
    use std::path::Path;

    fn seg(fs: &dyn Fs, base: u64) -> Arc<Segment> {
        Arc::new(Segment::create(fs, Path::new("/p"), base, 0).expect("create"))
    }

    #[test]
    fn changes_check_what_their_caller_read() {
        let fs = SimFs::new();
        crate::fs::create_dir_durable(&fs, Path::new("/p")).expect("dir");
        let (a, b, c) = (seg(&fs, 0), seg(&fs, 10), seg(&fs, 20));
        let set = SegmentSet::new(vec![a.clone(), b.clone()]);
        let read = set.snapshot();
        set.push_rolled(c.clone());
        assert!(Arc::ptr_eq(&set.active(), &c));
        assert!(!set.is(&read), "a roll changed the list");
        assert!(set.starts_with_sealed(&read));
        // Compaction rewrote a and b into one segment.
        let ab = seg(&fs, 1);
        let after = set.swap_sealed(&read, vec![ab.clone()]).expect("swap");
        assert_eq!(after.len(), 2);
        // A retention pass that read the old list changes nothing.
        assert!(matches!(set.remove_prefix(&read[..1]), Err(Changed)));
        assert_eq!(set.snapshot().len(), 2);
        // Never the active segment.
        assert!(matches!(set.remove_prefix(&set.snapshot()), Err(Changed)));
        let now = set.remove_prefix(&[ab]).expect("retention");
        assert_eq!(now.len(), 1);
        assert!(Arc::ptr_eq(&now[0], &c));
    }
}
