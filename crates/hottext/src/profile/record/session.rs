//! A running `perf record`: started from a [`Plan`], watched, stopped, and what it cost.

use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{Plan, RecordError, Scope, Target};
use crate::os::cpus::{self, Pinned};
use crate::os::group::{stdin_for_group, Group};
use crate::os::proc::{self, Pid};

/// How long perf's group (a recorded command and what it started) gets after SIGTERM once perf
/// has written its file.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// A running `perf record`, in a process group of its own with the command it records (see
/// `os::group`): stopping it or dropping it stops them both, and so does hottext's death.
pub struct Session {
    group: Group,
    stderr: Option<JoinHandle<String>>,
    pinned: Option<Pinned>,
    started: Instant,
    output: PathBuf,
    /// A pid target recorded CPU-wide: perf does not notice when it exits, so we watch it.
    watch_pid: Option<Pid>,
    stop_sent: bool,
    perf_cpu_ticks: u64,
}

/// How a recording went.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// Time from perf's start to its end, in seconds.
    pub wall_seconds: f64,
    /// CPU time of the perf process itself (not the kernel's sampling work in the program).
    pub perf_cpu_seconds: f64,
    /// perf's own count, from its closing line.
    pub samples: Option<u64>,
    /// The size of perf.data.
    pub bytes: u64,
    /// perf's messages (warnings about lost samples and the like).
    pub perf_messages: String,
    /// Set when the pinned process's affinity could not be put back.
    pub restore_error: Option<String>,
}

impl Session {
    /// Pins the target if the plan says so, then starts perf. Ctrl-C at the terminal reaches
    /// hottext only: the caller passes it on with [`Session::stop`], so that perf writes its file
    /// and the affinity is put back.
    pub fn start(plan: &Plan) -> Result<Session, RecordError> {
        if let Target::Pid(pid) = plan.target {
            if !proc::exists(pid) {
                return Err(RecordError::NoSuchProcess { pid });
            }
        }
        let pinned = match (plan.pin_cpu, &plan.target) {
            (Some(cpu), Target::Pid(pid)) => {
                Some(cpus::pin(*pid, cpu).map_err(|source| RecordError::Pin {
                    pid: *pid,
                    cpu,
                    source,
                })?)
            }
            _ => None,
        };
        let mut perf = Command::new("perf");
        perf.args(with_own_stderr(plan))
            .stdin(stdin_for_group())
            .stdout(Stdio::inherit())
            .stderr(Stdio::piped());
        // The recorded command's stderr: ours, handed to perf as fd 3 (see `with_own_stderr`).
        // Without close-on-exec there, perf and its workload inherit it.
        let mut _own_stderr = None;
        if matches!(plan.target, Target::Command(_)) {
            let copy = io::stderr()
                .as_fd()
                .try_clone_to_owned()
                .map_err(RecordError::Spawn)?;
            let fd = copy.as_raw_fd();
            _own_stderr = Some(copy);
            // SAFETY: dup2 is async-signal-safe; `_own_stderr` keeps `fd` open past the spawn.
            unsafe {
                perf.pre_exec(move || {
                    // The copy may be fd 3 already, where dup2 would keep its close-on-exec.
                    let done = if fd == COMMAND_STDERR {
                        libc::fcntl(fd, libc::F_SETFD, 0)
                    } else {
                        libc::dup2(fd, COMMAND_STDERR)
                    };
                    if done < 0 {
                        return Err(io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        // Should hottext die, perf gets SIGTERM, on which it too writes its file and exits.
        let spawned = Group::spawn(&mut perf);
        let mut group = match spawned {
            Ok(group) => group,
            Err(e) => {
                if let Some(p) = pinned {
                    let _ = p.restore(); // best effort: perf never ran
                }
                return Err(match e.kind() {
                    io::ErrorKind::NotFound => RecordError::PerfMissing,
                    _ => RecordError::Spawn(e),
                });
            }
        };
        // Drain perf's stderr on a thread, or perf blocks once the pipe fills.
        let stderr = group.child().stderr.take().map(|mut pipe| {
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = pipe.read_to_string(&mut text);
                text
            })
        });
        let watch_pid = match (&plan.target, &plan.scope) {
            (Target::Pid(pid), Scope::Cpus(_)) => Some(*pid),
            _ => None,
        };
        Ok(Session {
            group,
            stderr,
            pinned,
            started: Instant::now(),
            output: plan.output.clone(),
            watch_pid,
            stop_sent: false,
            perf_cpu_ticks: 0,
        })
    }

    /// Time since perf was started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Bytes perf has written so far.
    pub fn bytes_written(&self) -> u64 {
        std::fs::metadata(&self.output)
            .map(|m| m.len())
            .unwrap_or(0)
    }

    /// Asks perf to stop (as Ctrl-C would); it then writes its file and exits.
    pub fn stop(&mut self) {
        if !self.stop_sent {
            self.stop_sent = true;
            // SAFETY: kill has no memory preconditions; the pid is our own live child.
            unsafe { libc::kill(self.group.pid(), libc::SIGINT) };
        }
    }

    /// Waits for perf, polling every `tick`: it is stopped once `stop_after` has passed or
    /// `stop_now` (called each tick) says so, and it ends by itself when its target does.
    /// `None` when `cancel` was set first; perf and its group are stopped then.
    pub fn wait(
        mut self,
        stop_after: Option<Duration>,
        tick: Duration,
        cancel: &AtomicBool,
        mut stop_now: impl FnMut(&Session) -> bool,
    ) -> Result<Option<Outcome>, RecordError> {
        loop {
            if let Some(outcome) = self.poll()? {
                return Ok(Some(outcome));
            }
            if cancel.load(Ordering::SeqCst) {
                return Ok(None);
            }
            if stop_now(&self) || stop_after.is_some_and(|d| self.elapsed() >= d) {
                self.stop();
            }
            std::thread::sleep(tick);
        }
    }

    /// Checks on perf without blocking: `Some` once it has exited.
    pub fn poll(&mut self) -> Result<Option<Outcome>, RecordError> {
        if let Some(perf) = proc::stat(self.group.pid()) {
            self.perf_cpu_ticks = perf.own_ticks;
        }
        if self.watch_pid.is_some_and(|pid| !proc::exists(pid)) {
            self.stop();
        }
        match self.group.try_wait().map_err(RecordError::Spawn)? {
            None => Ok(None),
            Some(status) => self.finish(status).map(Some),
        }
    }

    fn finish(&mut self, status: ExitStatus) -> Result<Outcome, RecordError> {
        // A recorded command perf did not outlive, or what it left in the background.
        self.group.stop(STOP_GRACE);
        let messages = self
            .stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        let restore_error = self
            .pinned
            .take()
            .and_then(|p| p.restore().err())
            .map(|e| e.to_string());
        // perf re-raises the SIGINT that stopped it once its file is written. When it times
        // the recording with `sleep` (see `Plan::perf_args`) and we stop it early, it ends
        // `sleep` with SIGTERM and passes that on instead.
        let signal = std::os::unix::process::ExitStatusExt::signal(&status);
        let stopped =
            signal == Some(libc::SIGINT) || (self.stop_sent && signal == Some(libc::SIGTERM));
        let bytes = self.bytes_written();
        if !(status.success() || stopped) || bytes == 0 {
            return Err(RecordError::PerfFailed {
                status: status.to_string(),
                stderr: messages.trim().to_string(),
            });
        }
        Ok(Outcome {
            wall_seconds: self.started.elapsed().as_secs_f64(),
            perf_cpu_seconds: self.perf_cpu_ticks as f64 / proc::clock_ticks_per_second(),
            samples: samples_in_closing_line(&messages),
            bytes,
            perf_messages: messages.trim().to_string(),
            restore_error,
        })
    }
}

/// The fd that carries hottext's stderr to the recorded command, past perf's piped stderr.
const COMMAND_STDERR: libc::c_int = 3;

/// perf's arguments, with a recorded command wrapped so that its stderr is hottext's own
/// rather than perf's pipe: only perf's lines are perf's messages (`hottext: perf: ...`); what
/// the program prints passes through untouched. The shell execs the command, which keeps the
/// process perf started (and its pid).
fn with_own_stderr(plan: &Plan) -> Vec<std::ffi::OsString> {
    let mut args = plan.perf_args();
    if matches!(plan.target, Target::Command(_)) {
        if let Some(at) = args.iter().position(|a| a == "--") {
            let wrapper = format!("exec 2>&{COMMAND_STDERR} {COMMAND_STDERR}>&-; exec \"$@\"");
            let shell = ["/bin/sh".into(), "-c".into(), wrapper.into(), "sh".into()];
            args.splice(at + 1..at + 1, shell);
        }
    }
    args
}

impl Drop for Session {
    /// Stops perf and unpins the target if the session is abandoned (an error in the caller);
    /// the group's drop then stops what perf leaves.
    fn drop(&mut self) {
        if matches!(self.group.try_wait(), Ok(None)) {
            self.stop();
            let _ = self.group.child().wait();
        }
        if let Some(p) = self.pinned.take() {
            let _ = p.restore();
        }
    }
}

/// perf ends with "[ perf record: Captured and wrote 1.403 MB perf.data (18304 samples) ]".
fn samples_in_closing_line(messages: &str) -> Option<u64> {
    let line = messages
        .lines()
        .rev()
        .find(|l| l.contains("Captured and wrote"))?;
    let open = line.rfind('(')?;
    line[open + 1..].split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_perf_closing_line() {
        let msg = "[ perf record: Woken up 1 times to write data ]\n\
                   [ perf record: Captured and wrote 1.403 MB p.data (18304 samples) ]\n";
        assert_eq!(samples_in_closing_line(msg), Some(18304));
        assert_eq!(samples_in_closing_line("nothing"), None);
    }
}
