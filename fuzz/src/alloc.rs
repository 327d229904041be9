//! A counting global allocator, for the targets whose oracle bounds the
//! memory one call may take ("no input allocates more than a stated multiple
//! of its own size").
//!
//! A target that wants it declares
//! `#[global_allocator] static ALLOC: Counting = Counting;` and wraps the
//! call in [`peak_during`], which returns the most bytes that were live at
//! once during the call above what was live when it started. A `realloc` is
//! counted as the allocator may do it, a new block before the old one is
//! freed, so a growing `Vec` is charged its old and new capacity together.
//!
//! The counters are process-wide (a call that hands work to other threads is
//! charged for their allocations too) and relaxed atomics: libFuzzer runs the
//! targets on one thread, and a bound is all that is asked of them.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting live bytes and their peak.
#[derive(Debug)]
pub struct Counting;

fn grew(bytes: usize) {
    let live = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

fn shrank(bytes: usize) {
    LIVE.fetch_sub(bytes, Ordering::Relaxed);
}

// SAFETY: every call is passed to `System` unchanged; the counters only
// observe sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Charged as a move: the new block is live before the old one goes.
        grew(new_size);
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() {
            shrank(new_size);
        } else {
            shrank(layout.size());
        }
        p
    }
}

/// Runs `f` and returns its result and the peak of live bytes during it
/// above those live when it started.
pub fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    let peak = PEAK.load(Ordering::Relaxed);
    (out, peak.saturating_sub(base))
}
