//! A server under measurement: started pinned to one CPU in its own process group, polled until
//! ready, and stopped cleanly (SIGTERM to the whole tree, SIGKILL after a grace period) — also
//! when the measurement fails or is interrupted, because [`Server`] stops it when dropped.
//!
//! Its CPU time is read from `/proc` (utime + stime of every process in its tree, plus what
//! their reaped children used), which costs the server nothing and works without a PMU.

use std::fs::File;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::run::run_captured;
use super::MeasureError;
use crate::os::cpus::{self, CpuSet};
use crate::os::group::Group;
pub use crate::os::group::Stopped;
use crate::os::proc::{clock_ticks_per_second, ProcStat};

/// Between two runs of the ready command.
const READY_POLL: Duration = Duration::from_millis(100);
/// A server: its process group (stopped as a whole tree when dropped), name and log.
#[derive(Debug)]
pub struct Server {
    group: Group,
    side: String,
    log: PathBuf,
}

impl Server {
    /// Starts `sh -c COMMAND` pinned to `cpu`, in its own process group, with `env` added to
    /// its environment, stdin closed and stdout and stderr to `log`. It gets SIGTERM should
    /// this process die first.
    pub fn start(
        side: &str,
        command: &str,
        env: &[(&str, &str)],
        cpu: u32,
        log: PathBuf,
    ) -> Result<Server, MeasureError> {
        let io = |what: String| move |source| MeasureError::Io { what, source };
        let out = File::create(&log).map_err(io(format!("create {}", log.display())))?;
        let err = out
            .try_clone()
            .map_err(io(format!("open {}", log.display())))?;
        let mut cmd = Command::new("sh");
        cmd.args(["-c", command])
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        cpus::pin_command(&mut cmd, &CpuSet::one(cpu));
        let group = Group::spawn(&mut cmd)
            .map_err(io(format!("start server {side} (sh -c {command:?})")))?;
        Ok(Server {
            group,
            side: side.to_string(),
            log,
        })
    }

    #[cfg(test)]
    pub fn pid(&self) -> crate::os::proc::Pid {
        self.group.pid()
    }

    /// What the server wrote so far.
    pub fn log(&self) -> String {
        std::fs::read(&self.log)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// Runs `ready` (with `sh -c`) every 100 ms until it exits 0; an error when the server
    /// exits first, after `timeout`, or when interrupted.
    pub fn wait_ready(
        &mut self,
        ready: &str,
        timeout: Duration,
        cancel: &AtomicBool,
    ) -> Result<(), MeasureError> {
        let give_up = Instant::now() + timeout;
        loop {
            if cancel.load(Ordering::SeqCst) {
                return Err(MeasureError::Interrupted);
            }
            self.check_running()?;
            let mut cmd = Command::new("sh");
            cmd.args(["-c", ready]);
            let probe = run_captured(cmd, "the --ready command", Some(give_up), cancel)?;
            if probe.status.is_some_and(|s| s.success()) {
                return Ok(());
            }
            if Instant::now() + READY_POLL >= give_up {
                self.check_running()?;
                return Err(MeasureError::NotReady {
                    side: self.side.clone(),
                    timeout,
                    log: self.log(),
                });
            }
            std::thread::sleep(READY_POLL);
        }
    }

    /// An error if the server has exited.
    pub(crate) fn check_running(&mut self) -> Result<(), MeasureError> {
        match self.group.try_wait() {
            Ok(Some(status)) => Err(self.exited(status)),
            _ => Ok(()),
        }
    }

    fn exited(&self, status: ExitStatus) -> MeasureError {
        MeasureError::ServerExited {
            side: self.side.clone(),
            status,
            log: self.log(),
        }
    }

    /// CPU seconds the server's processes, daemons included, have used so far.
    pub fn cpu_seconds(&self) -> f64 {
        let ticks: u64 = self
            .group
            .members()
            .iter()
            .map(ProcStat::ticks_with_reaped_children)
            .sum();
        ticks as f64 / clock_ticks_per_second()
    }

    /// SIGTERM to the server's process group and every process of its tree; SIGKILL to what
    /// is left after `grace`. Returns once they are all gone.
    pub fn stop(mut self, grace: Duration) -> Stopped {
        self.group.stop(grace)
    }

    /// Stops it leaves first ([`crate::os::group::stop_leaves_first`]): for a server under
    /// valgrind, whose processes each write their counts at exit, so that a parent that kills
    /// slow children (nginx's master) loses none of them.
    pub fn stop_leaves_first(mut self, grace: Duration) -> Stopped {
        self.group.stop_leaves_first(grace)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::proc::processes;

    fn own_cpus() -> Vec<u32> {
        cpus::own().unwrap().iter().collect()
    }
    use crate::os::cancel;

    #[test]
    fn start_ready_stop_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let cpu = *own_cpus().last().unwrap();
        let flag = dir.path().join("up");
        let script = format!(
            "sleep 300 & touch {}; trap 'kill $!; exit 0' TERM; wait",
            flag.display()
        );
        let mut server = Server::start("A", &script, &[], cpu, dir.path().join("log")).unwrap();
        let pid = server.pid();
        server
            .wait_ready(
                &format!("test -e {}", flag.display()),
                Duration::from_secs(10),
                cancel::never(),
            )
            .unwrap();
        let allowed = crate::os::proc::status_field(pid, "Cpus_allowed_list");
        assert_eq!(allowed, Some(cpu.to_string()));
        assert!(server.cpu_seconds() >= 0.0);
        let stopped = server.stop(Duration::from_secs(5));
        assert!(!stopped.forced);
        assert!(processes()
            .iter()
            .all(|p| p.state == 'Z' || (p.pgrp != pid && p.pid != pid)));
    }

    #[test]
    fn a_server_that_ignores_sigterm_is_killed_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let cpu = own_cpus()[0];
        let server = Server::start(
            "B",
            "trap '' TERM; sleep 300",
            &[],
            cpu,
            dir.path().join("log"),
        )
        .unwrap();
        let pid = server.pid();
        std::thread::sleep(Duration::from_millis(100));
        let stopped = { server }.stop(Duration::from_millis(300));
        assert!(stopped.forced);
        assert!(processes()
            .iter()
            .all(|p| p.state == 'Z' || (p.pgrp != pid && p.pid != pid)));
    }

    #[test]
    fn a_server_that_exits_early_is_an_error_with_its_log() {
        let dir = tempfile::tempdir().unwrap();
        let cpu = own_cpus()[0];
        let mut server = Server::start(
            "A",
            "echo cannot bind >&2; exit 4",
            &[],
            cpu,
            dir.path().join("log"),
        )
        .unwrap();
        let err = server
            .wait_ready("false", Duration::from_secs(10), cancel::never())
            .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("server A exited"), "{msg}");
        assert!(msg.contains("cannot bind"), "{msg}");
    }
}
