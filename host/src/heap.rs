//! The process's heap: jemalloc as the global allocator of every binary built on this library
//! (the operator, its tests, the benchmark's kube-rs floor), and returning freed memory to the
//! operating system after a burst.
//!
//! Why jemalloc: the operator's work is many small, short-lived allocations (request and
//! response buffers, decoded watch events, rendered children). In the image's static musl
//! binary, musl's allocator took about a fifth of the operator's CPU samples at 1000
//! AppServices (glibc's about a twelfth of a glibc build's); with jemalloc the operator used
//! 0.89x the CPU of the same musl build and 0.91x of the glibc one, for about 1 MiB more peak RSS
//! and 1.5 MiB more idle than with musl's (docs/development.md, "The allocator").
//!
//! Configured for one busy thread: one arena (the async runtime is one thread; guest calls on the
//! blocking pool share it through their thread caches), freed pages returned after 1 s
//! (`dirty_decay_ms`) and not kept lazily (`muzzy_decay_ms:0`). The environment variable
//! `_RJEM_MALLOC_CONF` overrides these at start (jemalloc's own option syntax).

use std::ffi::c_char;

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, as its C string: read by jemalloc's C code before `main`, never by Rust.
#[repr(transparent)]
struct Options(#[allow(dead_code)] *const c_char);

// SAFETY: a pointer to a static, immutable, NUL-terminated string; nothing writes through it.
#[allow(unsafe_code)]
unsafe impl Sync for Options {}

/// jemalloc reads its compiled-in options from this symbol (prefixed: the Rust allocator's
/// symbols do not replace the C library's `malloc`).
#[allow(unsafe_code)]
#[unsafe(export_name = "_rjem_malloc_conf")]
#[used]
static OPTIONS: Options = Options(c"narenas:1,dirty_decay_ms:1000,muzzy_decay_ms:0".as_ptr());

/// The `mallctl` name that purges every arena (4096 is jemalloc's `MALLCTL_ARENAS_ALL`).
const PURGE_ALL: &std::ffi::CStr = c"arena.4096.purge";

/// Returns the freed pages of every arena to the operating system now, rather than after the
/// decay time. Costs a walk over the arenas' free extents (well under a millisecond here): call
/// it after a burst (a re-list, a guest compile), not per request.
pub fn trim() {
    let purged = purge_all();
    debug_assert!(purged, "jemalloc refused arena.4096.purge");
}

/// Purges every arena; whether jemalloc accepted the request.
#[allow(unsafe_code)]
fn purge_all() -> bool {
    // SAFETY: `arena.<i>.purge` takes and returns no value (null pointers and zero lengths), and
    // the name is a NUL-terminated static string.
    let status = unsafe {
        tikv_jemalloc_sys::mallctl(
            PURGE_ALL.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    status == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The options compiled in are the ones jemalloc runs with, and purging succeeds.
    #[test]
    fn jemalloc_runs_with_its_options() {
        let mut narenas: u32 = 0;
        let mut len = std::mem::size_of::<u32>();
        // SAFETY: `opt.narenas` is an unsigned (u32) jemalloc writes into `narenas`.
        #[allow(unsafe_code)]
        let failed = unsafe {
            tikv_jemalloc_sys::mallctl(
                c"opt.narenas".as_ptr(),
                (&raw mut narenas).cast(),
                &mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        assert_eq!(failed, 0);
        if std::env::var_os("_RJEM_MALLOC_CONF").is_none() {
            assert_eq!(narenas, 1);
        }
        // NB: something freed for the purge to return; asserted on `purge_all`, not `trim`,
        // whose check is a debug assertion and the tests run in release.
        drop((0..1000).map(|i| vec![0u8; i]).collect::<Vec<_>>());
        assert!(purge_all());
    }
}
