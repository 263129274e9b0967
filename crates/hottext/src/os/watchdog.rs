//! Stops a command's scope should hottext die without stopping it (SIGKILL, a crash). A shell,
//! in a process group of its own (so that Ctrl-C at the terminal does not end it first), reads
//! a pipe whose other end only hottext holds. The pipe ends when hottext does, however it died;
//! the shell then sends SIGTERM to the command's process group and to every process marked as
//! the scope's ([`super::scope`]: daemons hottext had adopted, now init's), and SIGKILL two
//! seconds later. A group that hottext stops itself kills its watchdog first, so that a process
//! group id the kernel may hand out again is never signalled.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

use super::proc::Pid;
use super::scope::{Scope, SCOPE_VARIABLE};

#[derive(Debug)]
pub struct Watchdog {
    shell: Child,
    /// The pipe's write end, held, never written: its closing is the signal.
    _alive: OwnedFd,
}

/// The watchdog's script; `$1` is the process group to stop, `$2` the scope's mark
/// (`HOTTEXT_SCOPE=...`), looked for in every process's environment.
const WATCHDOG: &str = r#"
stop() {
    kill -s "$1" -- -"$2" 2>/dev/null
    for e in /proc/[0-9]*/environ; do
        if grep -qxzF -e "$3" "$e" 2>/dev/null; then
            p=${e#/proc/}
            kill -s "$1" "${p%/environ}" 2>/dev/null
        fi
    done
}
read _
stop TERM "$1" "$2"
sleep 2
stop KILL "$1" "$2"
"#;

impl Watchdog {
    pub fn start(pgid: Pid, scope: &Scope) -> io::Result<Watchdog> {
        let (reader, alive) = pipe()?;
        let mark = format!("{SCOPE_VARIABLE}={}", scope.marker());
        let shell = Command::new("sh")
            .args(["-c", WATCHDOG, "hottext-watchdog", &pgid.to_string(), &mark])
            .stdin(reader)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()?;
        Ok(Watchdog {
            shell,
            _alive: alive,
        })
    }
}

/// A pipe's read and write ends, both close-on-exec: no other child holds the end that must
/// close.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors are new and owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // Killed before `_alive` closes (fields drop after this), so it never acts.
        let _ = self.shell.kill();
        let _ = self.shell.wait();
    }
}
