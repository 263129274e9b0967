//! Everything a command started, daemons included. A process that daemonizes (a double fork, a
//! `setsid` child whose parent exits) leaves the command's process tree and its process group:
//! the kernel hands it to the nearest subreaper, or to init. hottext makes itself that subreaper,
//! so such orphans become its own children, and marks every command it starts with a variable
//! of its environment, which descendants inherit and which tells whose orphan is whose when
//! several commands run at once (a server and its load, `--jobs` servers).
//!
//! Why a subreaper and not a cgroup: a cgroup would also catch a daemon that clears its
//! environment, but creating one needs a writable, delegated cgroup v2 tree, which a user's
//! session under systemd does not have and containers often lack; the subreaper works for any
//! user on any Linux since 3.4, and so behaves the same on every machine hottext runs on.

use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

use super::proc::{tree, Pid, ProcStat};

/// The variable that marks a command's processes; its value names the scope.
pub(crate) const SCOPE_VARIABLE: &str = "HOTTEXT_SCOPE";

/// The processes of one command: its process group, its tree, and the orphans it left to hottext.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// `HOTTEXT_SCOPE`'s value: hottext's pid and a serial number, unique on the machine.
    marker: String,
}

impl Scope {
    /// A new scope; the first one makes hottext the subreaper of its descendants.
    pub fn new() -> Scope {
        static SUBREAPER: Once = Once::new();
        // SAFETY: prctl with PR_SET_CHILD_SUBREAPER only sets a flag of this process.
        SUBREAPER.call_once(|| unsafe {
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1);
        });
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let serial = NEXT.fetch_add(1, Ordering::SeqCst);
        Scope {
            marker: format!("{}.{serial}", std::process::id()),
        }
    }

    pub fn marker(&self) -> &str {
        &self.marker
    }

    /// Marks `cmd`, and so everything it starts, as this scope's.
    pub fn mark(&self, cmd: &mut Command) {
        cmd.env(SCOPE_VARIABLE, &self.marker);
    }

    /// The processes of the scope whose command `leader` leads: its tree and process group
    /// ([`tree`]) and every orphan hottext adopted that carries the scope's mark, with theirs.
    pub fn members(&self, all: &[ProcStat], leader: Pid) -> Vec<ProcStat> {
        let mut members = tree(all, leader);
        for orphan in self.orphans(all, leader) {
            for p in tree(all, orphan) {
                if !members.iter().any(|m| m.pid == p.pid) {
                    members.push(p);
                }
            }
        }
        members
    }

    /// hottext's live children other than `leader` that carry the scope's mark: processes it
    /// did not start itself but adopted as their subreaper.
    fn orphans(&self, all: &[ProcStat], leader: Pid) -> Vec<Pid> {
        let own = std::process::id() as Pid;
        all.iter()
            .filter(|p| p.ppid == own && p.pid != leader && p.state != 'Z')
            .filter(|p| self.marks(p.pid))
            .map(|p| p.pid)
            .collect()
    }

    /// Whether the environment process `pid` started with holds this scope's mark.
    fn marks(&self, pid: Pid) -> bool {
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            return false;
        };
        let want = format!("{SCOPE_VARIABLE}={}", self.marker);
        environ.split(|&b| b == 0).any(|v| v == want.as_bytes())
    }

    /// Reaps those of `members` hottext adopted and that have exited: nothing else waits for
    /// them. The leader is left to its `Child`, which waits for it.
    pub(crate) fn reap_adopted(members: &[ProcStat], leader: Pid) {
        let own = std::process::id() as Pid;
        for p in members.iter().filter(|p| p.pid != leader && p.ppid == own) {
            // SAFETY: waitpid on a child of ours that no other code waits for; WNOHANG never
            // blocks, and a null status pointer is allowed.
            unsafe { libc::waitpid(p.pid, std::ptr::null_mut(), libc::WNOHANG) };
        }
    }
}

impl Default for Scope {
    fn default() -> Scope {
        Scope::new()
    }
}
