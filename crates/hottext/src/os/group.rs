//! Commands run as process groups of their own, so that a command and everything it started
//! stop together: when hottext stops them, when it drops them after an error, and when hottext
//! itself dies first (the leader then gets SIGTERM). Servers under `ab`, the pipeline's service
//! and load, and the commands `ab` and `stat` count all run this way.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use super::proc::{processes, tree, Pid};

/// How long a group dropped without [`Group::stop`] (an error, Ctrl-C) gets after SIGTERM.
pub const DROP_GRACE: Duration = Duration::from_secs(5);
/// While waiting for a stopped group's processes to go.
const POLL: Duration = Duration::from_millis(10);
/// After SIGKILL, how long processes reparented to init get to be reaped.
const REAP_GRACE: Duration = Duration::from_secs(2);

/// Makes `cmd` lead a process group of its own and get SIGTERM should hottext die first.
pub fn own_group(cmd: &mut Command) {
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
pub fn signal_group(pgid: Pid, signal: libc::c_int) {
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

/// Stops the process group `leader` leads and every process of its tree, also those that left
/// the group: SIGTERM, then SIGKILL to what is left after `grace`. Returns once they are all
/// gone and the leader is reaped.
pub fn stop_tree(leader: &mut Child, grace: Duration) -> Stopped {
    let pgid = leader.id() as Pid;
    let members: Vec<Pid> = tree(&processes(), pgid).iter().map(|p| p.pid).collect();
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

/// A running command leading its own process group ([`own_group`]); its whole tree is stopped
/// when it is dropped.
#[derive(Debug)]
pub struct Group {
    child: Child,
    stopped: bool,
}

impl Group {
    /// Starts `cmd` in a process group of its own.
    pub fn spawn(cmd: &mut Command) -> io::Result<Group> {
        own_group(cmd);
        Ok(Group {
            child: cmd.spawn()?,
            stopped: false,
        })
    }

    pub fn pid(&self) -> Pid {
        self.child.id() as Pid
    }

    /// The leader's status once it has exited.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.child.try_wait()
    }

    /// Stops the whole tree (see [`stop_tree`]).
    pub fn stop(mut self, grace: Duration) -> Stopped {
        self.stopped = true;
        stop_tree(&mut self.child, grace)
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if !self.stopped {
            stop_tree(&mut self.child, DROP_GRACE);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_tree_that_ignores_sigterm_is_killed_after_the_grace() {
        let group =
            Group::spawn(Command::new("sh").args(["-c", "trap '' TERM; sleep 1000 & wait"]))
                .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let started = Instant::now();
        let stopped = group.stop(Duration::from_millis(300));
        assert!(stopped.forced);
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
