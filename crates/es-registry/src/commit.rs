//! Group commit for `schemas.json`, sans I/O: the state machine that
//! decides, for each change made in memory, whether its request may be
//! answered (a write holding it is durable), must write (no write is under
//! way: it writes every change applied so far, its own and the ones that
//! arrived while the last write ran), or must wait for the write under way.
//!
//! Changes are numbered as they are applied (`applied`); `durable` is the
//! last number a finished write holds. A request is answered only once
//! `durable` reaches its number, so nothing is acknowledged before the
//! fsync. One write at a time; a failed write latches (`failed`): every
//! later request that is not yet durable is refused and no change is
//! applied until restart, as es fences storage after a failed fsync (the
//! file may hold anything the failed write left; the registry in memory
//! is not trusted to match it).

/// What a request waiting for its change to be durable does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// A finished write holds the change: answer.
    Durable,
    /// A write that should have held it failed: refuse.
    Failed,
    /// Write everything applied up to this number, then call
    /// [`GroupCommit::written`].
    Write(u64),
    /// Another request is writing: wait until it calls `written`.
    Wait,
}

/// The group-commit state (see the module's comment).
#[derive(Debug, Default)]
pub struct GroupCommit {
    applied: u64,
    durable: u64,
    writing: Option<u64>,
    failed: bool,
}

impl GroupCommit {
    pub fn new() -> GroupCommit {
        GroupCommit::default()
    }

    /// Whether changes may be applied (no write has failed).
    pub fn accepting(&self) -> bool {
        !self.failed
    }

    /// A change was applied in memory; returns its number.
    pub fn applied(&mut self) -> u64 {
        assert!(!self.failed, "a change applied after a failed write");
        self.applied += 1;
        self.applied
    }

    /// The number a request that changed nothing waits for: what it saw
    /// may include changes not yet durable.
    pub fn current(&self) -> u64 {
        self.applied
    }

    /// What the request whose change is `seq` does now.
    pub fn next(&mut self, seq: u64) -> Next {
        assert!(seq <= self.applied, "waiting for a change never applied");
        if self.durable >= seq {
            Next::Durable
        } else if self.failed {
            Next::Failed
        } else if self.writing.is_some() {
            Next::Wait
        } else {
            self.writing = Some(self.applied);
            Next::Write(self.applied)
        }
    }

    /// The write of everything up to `upto` finished (`ok`: fsync'd and
    /// renamed into place).
    pub fn written(&mut self, upto: u64, ok: bool) {
        assert_eq!(
            self.writing,
            Some(upto),
            "a write finished that never started"
        );
        self.writing = None;
        if ok {
            assert!(upto >= self.durable);
            self.durable = upto;
        } else {
            self.failed = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_that_arrive_during_a_write_share_the_next_one() {
        let mut g = GroupCommit::new();
        let a = g.applied();
        assert_eq!(g.next(a), Next::Write(1));
        // b and c arrive while a's write runs: they wait.
        let b = g.applied();
        let c = g.applied();
        assert_eq!(g.next(b), Next::Wait);
        assert_eq!(g.next(c), Next::Wait);
        g.written(1, true);
        assert_eq!(g.next(a), Next::Durable);
        // The first of them to wake writes both; the other waits for it.
        assert_eq!(g.next(c), Next::Write(3));
        assert_eq!(g.next(b), Next::Wait);
        g.written(3, true);
        assert_eq!(g.next(b), Next::Durable);
        assert_eq!(g.next(c), Next::Durable);
        // A request that changed nothing is answered once what it saw is
        // durable: at once here.
        assert_eq!(g.next(g.current()), Next::Durable);
    }

    #[test]
    fn a_failed_write_refuses_what_it_held_and_everything_after() {
        let mut g = GroupCommit::new();
        let a = g.applied();
        assert_eq!(g.next(a), Next::Write(1));
        g.written(1, true);
        let b = g.applied();
        assert_eq!(g.next(b), Next::Write(2));
        let c = g.applied();
        g.written(2, false);
        assert_eq!(g.next(b), Next::Failed);
        assert_eq!(g.next(c), Next::Failed);
        assert_eq!(g.next(a), Next::Durable);
        assert!(!g.accepting());
    }

    #[test]
    #[should_panic(expected = "never started")]
    fn a_write_that_never_started_cannot_finish() {
        let mut g = GroupCommit::new();
        g.applied();
        g.written(1, true);
    }
}
