//! A global allocator that counts, per thread, the bytes live and the peak since the last
//! reset, so the harness can bound what one input makes a decoder allocate. Per thread, because
//! the test runner runs tests on several threads at once.
//!
//! What the C codecs (lz4, zstd) allocate with `malloc` is not seen here; their working memory
//! is bounded by their own frame limits (4 MiB lz4 blocks, zstd's default 128 MiB window limit)
//! and is not held past the call.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Write;

/// A single allocation above this while armed is a runaway decoder: it is refused (the process
/// then aborts, as on a real allocation failure), after printing the input's seed.
const RUNAWAY: usize = 1 << 30;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
    static ARMED_SEED: Cell<Option<u64>> = const { Cell::new(None) };
}

/// The counting allocator (wraps the system allocator).
pub struct Counting;

impl Counting {
    /// Starts measuring an input: the peak restarts from what is live now.
    pub fn start(&self, seed: u64) -> isize {
        ARMED_SEED.with(|s| s.set(Some(seed)));
        let live = LIVE.with(Cell::get);
        PEAK.with(|p| p.set(live));
        live
    }

    /// Stops measuring; returns the peak bytes allocated above `start`'s baseline.
    pub fn stop(&self, baseline: isize) -> usize {
        ARMED_SEED.with(|s| s.set(None));
        (PEAK.with(Cell::get) - baseline).max(0) as usize
    }
}

fn note(delta: isize) {
    let _ = LIVE.try_with(|l| {
        let live = l.get() + delta;
        l.set(live);
        let _ = PEAK.try_with(|p| p.set(p.get().max(live)));
    });
}

fn runaway(size: usize) -> bool {
    if size < RUNAWAY {
        return false;
    }
    match ARMED_SEED.try_with(Cell::get).ok().flatten() {
        Some(seed) => {
            let _ = writeln!(std::io::stderr(), "fuzz: input FUZZ_SEED={seed} asked for {size} bytes at once");
            true
        }
        None => false,
    }
}

// SAFETY: every call is forwarded to the system allocator with the same layout; the counting
// only touches thread-local cells (const-initialised, no destructor, so no allocation).
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if runaway(layout.size()) {
            return std::ptr::null_mut();
        }
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            note(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if runaway(layout.size()) {
            return std::ptr::null_mut();
        }
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            note(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        note(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if runaway(new_size) {
            return std::ptr::null_mut();
        }
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            note(new_size as isize - layout.size() as isize);
        }
        p
    }
}
