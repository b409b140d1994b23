//! The `playdeck` binary: parse the command line, run one command, turn
//! its error into a message and an exit code, once.

mod cli;
mod cmd;

use std::process::ExitCode;

use clap::Parser;

/// mimalloc, not glibc's malloc: a large run makes millions of small
/// allocations from several threads (the kernel, the event log, the
/// checkpoint writer, the reading threads), where glibc's arenas both
/// fragment and slow down as the heap grows (`cargo bench --bench e2e`,
/// fanout: 1 000 000 operations 13.7 s -> 9.3 s, 100 000 0.96 s -> 0.80 s).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Peak memory over speed where they part: arenas are committed as they
/// are used, not up front, and freed memory goes back within a
/// millisecond (fanout 100 000: 191 -> 116 MiB peak RSS at the same speed).
/// Run as a constructor, before anything allocates: the first arena is
/// reserved by the first allocation and keeps the options of its moment.
#[cfg(target_os = "linux")]
#[used]
// SAFETY: an .init_array entry is a plain `extern "C" fn()` the loader
// calls once before main; this one only sets two allocator options.
#[allow(unsafe_code)]
#[unsafe(link_section = ".init_array")]
static TUNE_ALLOCATOR: extern "C" fn() = tune_allocator;

extern "C" fn tune_allocator() {
    // mimalloc v2's `mi_option_e` positions (libmimalloc-sys 0.1.49,
    // pinned by Cargo.lock; the crate does not export these two).
    const ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;
    const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
    // SAFETY: mi_option_set only stores an integer in mimalloc's option
    // table; any option number and value is accepted.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_option_set(ARENA_EAGER_COMMIT, 0);
        libmimalloc_sys::mi_option_set(PURGE_DELAY, 1);
    }
}

fn main() -> ExitCode {
    #[cfg(not(target_os = "linux"))]
    tune_allocator();
    let cli = cli::Cli::parse();
    let code = match cmd::dispatch(cli.command) {
        Ok(code) => code,
        Err(e) => {
            e.report();
            e.exit_code()
        }
    };
    ExitCode::from(code.clamp(0, 255) as u8)
}
