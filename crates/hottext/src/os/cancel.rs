//! Ctrl-C and termination as a flag, so that a measurement can stop its server before it exits.
//!
//! The library never installs handlers by itself: the command-line tool calls
//! [`on_interrupt`] and passes the flag down; code that waits checks it and returns
//! `measure::MeasureError::Interrupted`.

use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn note(_signal: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// The signals whose default action ends the process and that a program may catch: each is
/// handled as SIGTERM is, so that none ends hottext with a system setting changed or a command
/// left running. SIGPIPE stays ignored (Rust's default: a closed pipe is an error where written).
const TERMINATING: [libc::c_int; 12] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGVTALRM,
    libc::SIGPROF,
    libc::SIGIO,
    libc::SIGPWR,
    libc::SIGSTKFLT,
];

/// Turns every catchable terminating signal (`TERMINATING`) into a flag (instead of ending the
/// process) and returns it.
pub fn on_interrupt() -> &'static AtomicBool {
    for signal in TERMINATING {
        // SAFETY: a zeroed sigaction with a handler that only stores to an atomic; sa_mask is
        // emptied by sigemptyset before use.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = note as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            action.sa_flags = libc::SA_RESTART;
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
    &INTERRUPTED
}

/// A flag that is never set, for callers that handle no signals.
pub fn never() -> &'static AtomicBool {
    static NEVER: AtomicBool = AtomicBool::new(false);
    &NEVER
}
