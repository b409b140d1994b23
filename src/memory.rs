//! Giving memory back to the system at the points where a run lets go of a
//! large part of what it held.

/// Returns freed memory to the system. The play is read on every core, so
/// its operation definitions live in the allocator arenas of threads that
/// are gone by the time the run lets go of them; glibc keeps such free
/// memory mapped until asked (a 100 000-operation play: about 30 MB of
/// resident memory held for nothing).
pub fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointers; it walks glibc's own free
    // lists under the allocator's locks and may be called from any thread
    // at any time.
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
}
