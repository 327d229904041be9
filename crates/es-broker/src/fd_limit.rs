//! The open-file limit, raised at start. A partition keeps a few files open
//! (its active segment's log, index and batch marks, the sealed segments
//! being read), and every connection is a file too, so a broker with
//! thousands of partitions needs more than the 1,024 most systems give a
//! process by default. es raises its soft limit to the hard one, and the
//! hard one too where it may (as root, up to the kernel's `fs.nr_open`),
//! and logs what it did. The partition logs use at most three quarters of
//! the limit (es-kafka's `limits::open_files_budget`, `log.open.files.max`)
//! and close the least recently used segment files beyond it (es-storage's
//! `fd_cache`), so a low limit slows a broker with many partitions down
//! instead of stopping it.

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// The most the hard limit is raised to (the kernel's default `fs.nr_open`).
const RAISE_TO_MAX: u64 = 1 << 20;

/// The open-file limits before and after [`raise`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Raised {
    pub before: u64,
    pub after: u64,
    pub hard: u64,
}

/// Raises `RLIMIT_NOFILE` as far as allowed.
pub fn raise() -> Raised {
    let now = getrlimit(Resource::Nofile);
    let before = now.current.unwrap_or(u64::MAX);
    let hard = now.maximum.unwrap_or(u64::MAX);
    let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(RAISE_TO_MAX)
        .min(RAISE_TO_MAX);
    // The hard limit first, where the process may raise it.
    if hard < nr_open
        && setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(nr_open),
                maximum: Some(nr_open),
            },
        )
        .is_ok()
    {
        return Raised {
            before,
            after: nr_open,
            hard: nr_open,
        };
    }
    if before < hard
        && setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(hard),
                maximum: Some(hard),
            },
        )
        .is_ok()
    {
        return Raised {
            before,
            after: hard,
            hard,
        };
    }
    Raised {
        before,
        after: before,
        hard,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_ends_at_the_hard_one_or_higher() {
        let r = raise();
        let now = getrlimit(Resource::Nofile);
        assert_eq!(now.current, Some(r.after));
        assert!(r.after >= r.before);
        assert_eq!(now.maximum, Some(r.hard));
        assert_eq!(r.after, r.hard);
        // A second call has nothing left to raise.
        assert_eq!(raise().after, r.after);
    }
}
