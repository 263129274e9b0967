//! Commands run as process groups of their own, each in a [`Scope`] that also holds the daemons
//! it started, so that a command and everything it started stop together: when hottext stops
//! them, when it drops them after an error or a signal, and when hottext itself dies first. Everything hottext starts runs this way: `perf record` and
//! the command it records, the commands `ab` and `stat` count under `perf stat`, servers and
//! loads under `ab`, and the pipeline's service and load.
//!
//! Dying first (SIGKILL, a crash) is covered twice: the leader gets SIGTERM from the kernel
//! (`PR_SET_PDEATHSIG`), and a [`Watchdog`] stops the rest of the scope, which the death signal
//! does not reach (a shell's children, perf's workload, daemons).

use std::io::{self, IsTerminal};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::proc::{processes, Pid, ProcStat};
use super::scope::Scope;
use super::watchdog::Watchdog;

/// How long a group dropped without [`Group::stop`] (an error, Ctrl-C) gets after SIGTERM.
pub(crate) const DROP_GRACE: Duration = Duration::from_secs(5);
/// While waiting for a stopped group's processes to go.
const POLL: Duration = Duration::from_millis(10);
/// While a stop waits for the leaves of a tree, how often they get SIGTERM again.
const RESIGNAL: Duration = Duration::from_secs(1);
/// After SIGKILL, how long processes reparented to init get to be reaped.
const REAP_GRACE: Duration = Duration::from_secs(2);

/// Makes `cmd` lead a process group of its own and get SIGTERM should hottext die first.
fn own_group(cmd: &mut Command) {
    cmd.process_group(0);
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
}

/// Sends `signal` to every process of group `pgid`.
pub(crate) fn signal_group(pgid: Pid, signal: libc::c_int) {
    if pgid > 0 {
        // SAFETY: kill has no memory-safety preconditions; a negative pid names the group.
        unsafe { libc::kill(-pgid, signal) };
    }
}

fn signal_all(pids: &[Pid], signal: libc::c_int) {
    for &pid in pids {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(pid, signal) };
    }
}

/// How a group went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped {
    /// The leader, or a process of its tree, outlived SIGTERM and was killed.
    pub forced: bool,
}

/// Stops the process group `leader` leads and every process of its scope, also those that left
/// the group or the tree: SIGTERM, then SIGKILL to what is left after `grace`. Returns once they
/// are all gone and the leader is reaped.
fn stop_tree(leader: &mut Child, scope: &Scope, grace: Duration) -> Stopped {
    let pgid = leader.id() as Pid;
    let scoped = scope.members(&processes(), pgid);
    let stopped = stop_members(leader, &scoped, grace);
    Scope::reap_adopted(&scoped, pgid);
    stopped
}

fn stop_members(leader: &mut Child, scoped: &[ProcStat], grace: Duration) -> Stopped {
    let pgid = leader.id() as Pid;
    let members: Vec<Pid> = scoped.iter().map(|p| p.pid).collect();
    signal_group(pgid, libc::SIGTERM);
    signal_all(&members, libc::SIGTERM);
    let until = Instant::now() + grace;
    while !gone(leader, &members, pgid) {
        if Instant::now() >= until {
            signal_group(pgid, libc::SIGKILL);
            signal_all(&members, libc::SIGKILL);
            let _ = leader.wait();
            let until = Instant::now() + REAP_GRACE;
            while !gone(leader, &members, pgid) && Instant::now() < until {
                std::thread::sleep(POLL);
            }
            return Stopped { forced: true };
        }
        std::thread::sleep(POLL);
    }
    Stopped { forced: false }
}

/// Stops a tree whose parents may kill their children when asked to stop (nginx's master sends
/// SIGKILL to a worker still there 1.5 s after its SIGTERM), which a child slowed down 20-50× by
/// valgrind, writing its counts at exit, does not survive. Every process with a child in the
/// tree is frozen (SIGSTOP) with a SIGTERM pending; the others, the leaves, get SIGTERM and until
/// `grace` to exit; then the parents resume (SIGCONT), handle their SIGTERM with no child left
/// to kill, and [`stop_tree`] finishes as usual.
fn stop_leaves_first(leader: &mut Child, scope: &Scope, grace: Duration) -> Stopped {
    let pgid = leader.id() as Pid;
    let members = scope.members(&processes(), pgid);
    let is_parent = |pid: Pid| members.iter().any(|p| p.ppid == pid);
    let (parents, leaves): (Vec<Pid>, Vec<Pid>) = members
        .iter()
        .map(|p| p.pid)
        .partition(|&pid| is_parent(pid));
    signal_all(&parents, libc::SIGSTOP);
    signal_all(&parents, libc::SIGTERM);
    signal_all(&leaves, libc::SIGTERM);
    let until = Instant::now() + grace;
    let mut resend = Instant::now() + RESIGNAL;
    while Instant::now() < until && !all_exited(&leaves) {
        // A child stopped just after its fork can lose the first (seen with nginx's worker
        // under valgrind, with its master frozen and the signal pending in neither).
        if Instant::now() >= resend {
            signal_all(&leaves, libc::SIGTERM);
            resend += RESIGNAL;
        }
        std::thread::sleep(POLL);
    }
    signal_all(&parents, libc::SIGCONT);
    stop_tree(leader, scope, grace)
}

/// None of `pids` is alive (a zombie has exited; its frozen parent reaps it later).
fn all_exited(pids: &[Pid]) -> bool {
    processes()
        .iter()
        .all(|p| p.state == 'Z' || !pids.contains(&p.pid))
}

/// The leader is reaped and no process of the tree or the group is alive.
fn gone(leader: &mut Child, members: &[Pid], pgid: Pid) -> bool {
    if !matches!(leader.try_wait(), Ok(Some(_))) {
        return false;
    }
    processes()
        .iter()
        .filter(|p| p.state != 'Z')
        .all(|p| p.pgrp != pgid && !members.contains(&p.pid))
}

/// The stdin for a command in a group of its own: hottext's, unless that is a terminal. A
/// process outside the terminal's foreground group that reads it is stopped (SIGTTIN), and the
/// run would hang; Ctrl-C reaches hottext, which passes it on.
pub(crate) fn stdin_for_group() -> Stdio {
    if io::stdin().is_terminal() {
        Stdio::null()
    } else {
        Stdio::inherit()
    }
}

/// A running command leading its own process group ([`own_group`]) in a [`Scope`] of its own,
/// watched by a [`Watchdog`]; its whole scope is stopped when it is dropped.
#[derive(Debug)]
pub struct Group {
    child: Child,
    scope: Scope,
    stopped: bool,
    _watchdog: Watchdog,
}

impl Group {
    /// Starts `cmd` in a process group and a scope of its own, and its watchdog.
    pub fn spawn(cmd: &mut Command) -> io::Result<Group> {
        own_group(cmd);
        let scope = Scope::new();
        scope.mark(cmd);
        let mut child = cmd.spawn()?;
        let watchdog = match Watchdog::start(child.id() as Pid, &scope) {
            Ok(w) => w,
            Err(e) => {
                stop_tree(&mut child, &scope, Duration::ZERO);
                return Err(e);
            }
        };
        Ok(Group {
            child,
            scope,
            stopped: false,
            _watchdog: watchdog,
        })
    }

    /// Every live process of the scope now: the tree, the group and the daemons it left.
    pub fn members(&self) -> Vec<ProcStat> {
        self.scope.members(&processes(), self.pid())
    }

    pub fn pid(&self) -> Pid {
        self.child.id() as Pid
    }

    /// The leader, for its pipes and its status; stop it through the group.
    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Sends `signal` to every process of the group (not to those that left it).
    pub fn signal(&self, signal: libc::c_int) {
        signal_group(self.pid(), signal);
    }

    /// The leader's status once it has exited.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.child.try_wait()
    }

    /// Stops the whole scope (see [`stop_tree`]); once stopped, dropping does nothing more.
    pub fn stop(&mut self, grace: Duration) -> Stopped {
        if self.stopped {
            return Stopped { forced: false };
        }
        self.stopped = true;
        stop_tree(&mut self.child, &self.scope, grace)
    }

    /// Stops the whole scope leaves first (see [`stop_leaves_first`]).
    pub fn stop_leaves_first(&mut self, grace: Duration) -> Stopped {
        if self.stopped {
            return Stopped { forced: false };
        }
        self.stopped = true;
        stop_leaves_first(&mut self.child, &self.scope, grace)
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if !self.stopped {
            stop_tree(&mut self.child, &self.scope, DROP_GRACE);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::proc::processes;

    fn alive(pid: Pid) -> bool {
        super::super::proc::stat(pid).is_some_and(|p| p.state != 'Z')
    }

    /// The pid of the `sleep` a shell started in the background, from the file it wrote.
    fn background(dir: &std::path::Path) -> Pid {
        let file = dir.join("pid");
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(pid) = std::fs::read_to_string(&file)
                .ok()
                .and_then(|t| t.trim().parse().ok())
            {
                return pid;
            }
            assert!(Instant::now() < until, "the shell never started its child");
            std::thread::sleep(POLL);
        }
    }

    #[test]
    fn dropping_a_group_stops_what_it_started_also_outside_the_group() {
        let dir = tempfile::tempdir().unwrap();
        // One child in the group, one that left it with setsid: both must go.
        let script = format!(
            "sleep 1000 & setsid sleep 1001 & echo $! > {}; wait",
            dir.path().join("pid").display()
        );
        let group = Group::spawn(Command::new("sh").args(["-c", &script])).unwrap();
        let leader = group.pid();
        let outside = background(dir.path());
        let in_group: Vec<Pid> = processes()
            .iter()
            .filter(|p| p.pgrp == leader && p.pid != leader)
            .map(|p| p.pid)
            .collect();
        assert!(!in_group.is_empty() && alive(outside));
        drop(group);
        assert!(!alive(leader) && !alive(outside), "left running");
        assert!(in_group.iter().all(|&p| !alive(p)), "left running");
    }

    #[test]
    fn dropping_a_group_stops_a_daemon_it_left_behind() {
        let dir = tempfile::tempdir().unwrap();
        // A double fork: the subshell starts a new session's `sleep` and exits, so the sleep is
        // in neither the tree nor the group; its parent is now this process, the subreaper.
        let script = format!(
            "(setsid sleep 1003 & echo $! > {}); exec sleep 1004",
            dir.path().join("pid").display()
        );
        let group = Group::spawn(Command::new("sh").args(["-c", &script])).unwrap();
        let daemon = background(dir.path());
        let until = Instant::now() + Duration::from_secs(10);
        while super::super::proc::stat(daemon).map(|p| p.ppid) != Some(std::process::id() as Pid) {
            assert!(Instant::now() < until, "the daemon was never adopted");
            std::thread::sleep(POLL);
        }
        assert!(group.members().iter().any(|p| p.pid == daemon));
        drop(group);
        assert!(!alive(daemon), "the daemon was left running");
        assert!(
            !super::super::proc::exists(daemon),
            "the daemon was left a zombie"
        );
    }

    #[test]
    fn leaves_first_a_child_outlives_a_parent_that_would_kill_it() {
        let dir = tempfile::tempdir().unwrap();
        let done = dir.path().join("child-done");
        // The parent kills its child at once on SIGTERM; the child, a leaf (a loop of shell
        // builtins), needs a second to finish.
        let child = format!(
            "trap 'trap : TERM; sleep 1; touch {}; exit 0' TERM; while :; do :; done",
            done.display()
        );
        let script = format!(
            "sh -c \"{child}\" & c=$!; trap 'kill -KILL $c; exit 0' TERM; echo $c > {}; wait",
            dir.path().join("pid").display()
        );
        let mut group = Group::spawn(Command::new("sh").args(["-c", &script])).unwrap();
        background(dir.path());
        std::thread::sleep(Duration::from_millis(200));
        let stopped = group.stop_leaves_first(Duration::from_secs(20));
        assert!(!stopped.forced);
        assert!(
            done.exists(),
            "the parent killed its child before it finished"
        );
    }

    #[test]
    fn a_tree_that_ignores_sigterm_is_killed_after_the_grace() {
        let mut group =
            Group::spawn(Command::new("sh").args(["-c", "trap '' TERM; sleep 1000 & wait"]))
                .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let started = Instant::now();
        let stopped = group.stop(Duration::from_millis(300));
        assert!(stopped.forced);
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
