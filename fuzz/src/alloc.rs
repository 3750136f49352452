//! The heap one call holds at once, on its own thread: a global allocator that keeps
//! each thread's live bytes and their high-water mark.
//!
//! Only a binary can install it (`#[global_allocator] static A: Counting = Counting;`,
//! as the fuzz test binary and bench do); elsewhere [`peak_of`] reports `None`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

/// The system allocator, counting per thread.
pub struct Counting;

thread_local! {
    // Const-initialized and without destructors: usable from inside the allocator,
    // at any point of a thread's life.
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

/// Set by the first allocation through [`Counting`]: it is the global allocator.
static INSTALLED: AtomicBool = AtomicBool::new(false);

fn count(delta: isize) {
    let live = LIVE.get() + delta;
    LIVE.set(live);
    if live > PEAK.get() {
        PEAK.set(live);
    }
}

// SAFETY: every call is forwarded to `System` unchanged; only counters are kept.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) };
        count(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if !INSTALLED.load(Ordering::Relaxed) {
                INSTALLED.store(true, Ordering::Relaxed);
            }
            count(new_size as isize - layout.size() as isize);
        }
        p
    }
}

/// Runs `f`; with it, the most heap bytes this thread held at once while it ran, above
/// what it held before (`None` when [`Counting`] is not the global allocator).
pub fn peak_of<T>(f: impl FnOnce() -> T) -> (T, Option<usize>) {
    let before = LIVE.get();
    PEAK.set(before);
    // A growing Vec reallocates: the first realloc through us says we are installed
    // (once known, not asked again: this runs once per input).
    if !INSTALLED.load(Ordering::Relaxed) {
        let mut probe: Vec<u8> = std::hint::black_box(Vec::with_capacity(1));
        probe.reserve(64);
        drop(probe);
    }
    let out = f();
    let peak = (PEAK.get() - before).max(0) as usize;
    (out, INSTALLED.load(Ordering::Relaxed).then_some(peak))
}
