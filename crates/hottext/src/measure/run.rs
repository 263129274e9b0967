//! Running commands: one under `perf stat` with the terminal ([`stat`]), and captured ones that
//! stop when asked ([`run_captured`]).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::counts::Counts;
use super::events::EventPlan;
use super::perf_stat::{self, Reading, Scope};
use super::MeasureError;
use crate::os::group::Group;

/// How often waiting loops look at the child and the interrupt flag.
const POLL: Duration = Duration::from_millis(5);
/// How long a process group gets between SIGTERM and SIGKILL when a run is cut short.
const KILL_GRACE: Duration = Duration::from_secs(2);
/// How long the output pipes may stay open after the command exited (a background process
/// it left may hold them) before the rest of its process group is killed.
const PIPE_GRACE: Duration = Duration::from_secs(1);

/// `hottext stat`: one command under perf, with its terminal.
#[derive(Debug, Clone, Serialize)]
pub struct StatRun {
    /// The figures this run counted.
    pub counts: Counts,
    /// perf's readings, one per event, as printed.
    pub readings: Vec<Reading>,
    /// The command's exit code (perf passes it on); None when a signal ended it.
    pub exit_code: Option<i32>,
}

/// Runs `argv` under `perf stat` with every figure of `plan`, with this process's stderr, its
/// stdin unless that is a terminal, and the given stdout. perf's counts go to a temporary file,
/// so the command's own output passes through untouched. perf and the command run in a process
/// group of their own: when `cancel` is set (Ctrl-C, SIGTERM), the group gets SIGINT, perf
/// writes what it counted, and whatever is still running `KILL_GRACE` later is stopped.
pub fn stat<S: AsRef<std::ffi::OsStr>>(
    plan: &EventPlan,
    argv: &[S],
    stdout: Stdio,
    cancel: &AtomicBool,
) -> Result<StatRun, MeasureError> {
    let scratch = super::scratch_dir()?;
    let output = perf_stat::output_path(scratch.path(), "stat");
    let exit = ExitFile::new(scratch.path(), "stat");
    let mut cmd = perf_stat::command(
        &plan.events(Scope::Command),
        Scope::Command,
        &output,
        &exit.wrap_argv(argv),
    );
    cmd.stdin(crate::os::group::stdin_for_group())
        .stdout(stdout);
    let mut group = Group::spawn(&mut cmd).map_err(MeasureError::perf_missing)?;
    let mut interrupted_at = None;
    let status = loop {
        match group.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(source) => {
                return Err(MeasureError::Io {
                    what: "wait for perf stat".into(),
                    source,
                })
            }
        }
        match interrupted_at {
            None if cancel.load(Ordering::SeqCst) => {
                group.signal(libc::SIGINT);
                interrupted_at = Some(Instant::now());
            }
            Some(at) if at.elapsed() >= KILL_GRACE => {
                group.stop(KILL_GRACE);
                return Err(MeasureError::Interrupted);
            }
            _ => {}
        }
        std::thread::sleep(POLL);
    };
    // What the command left running in the background goes with it.
    group.stop(KILL_GRACE);
    let readings = read_counts(&output, status, "")?;
    Ok(StatRun {
        counts: Counts::from_readings(&plan.counters(Scope::Command), &readings),
        readings,
        exit_code: exit.read().or(status.code()),
    })
}

/// Where the shell that runs a measured command writes the command's exit status.
///
/// perf stat passes its command's exit status on, but not reliably: perf 6.1 returned 0 for
/// `sh -c 'exit 7'` in 1 to 5 runs of 100 on CI's VMs. So the command runs in a shell whose
/// EXIT trap writes `$?` to a file. A command that replaces the shell (`exec`) or is killed
/// by a signal writes nothing; then perf's status is all there is.
pub(crate) struct ExitFile(PathBuf);

impl ExitFile {
    pub fn new(dir: &Path, name: &str) -> ExitFile {
        ExitFile(dir.join(format!("{name}.exit")))
    }

    fn trap(&self) -> Option<String> {
        let path = self
            .0
            .to_str()
            .filter(|p| !p.contains(['\'', '\\', '"', '$', '`']))?;
        Some(format!("trap \"echo \\$? > '{path}'\" EXIT\n"))
    }

    /// `script` (for `sh -c`) with the trap in front: no extra process.
    pub(crate) fn wrap_script(&self, script: &str) -> String {
        match self.trap() {
            Some(trap) => format!("{trap}{script}"),
            None => script.to_string(),
        }
    }

    /// `sh -c 'TRAP "$@"' sh ARGV...`: one shell more than running ARGV itself (about a
    /// millisecond of CPU in the counts).
    pub(crate) fn wrap_argv<S: AsRef<std::ffi::OsStr>>(
        &self,
        argv: &[S],
    ) -> Vec<std::ffi::OsString> {
        let Some(trap) = self.trap() else {
            return argv.iter().map(|a| a.as_ref().to_os_string()).collect();
        };
        ["sh", "-c", &format!("{trap}\"$@\""), "sh"]
            .into_iter()
            .map(std::ffi::OsString::from)
            .chain(argv.iter().map(|a| a.as_ref().to_os_string()))
            .collect()
    }

    /// The exit status the shell wrote, if it did.
    pub fn read(&self) -> Option<i32> {
        std::fs::read_to_string(&self.0).ok()?.trim().parse().ok()
    }
}

/// perf's CSV file. perf failing to count (no file, or no line in it) is an error with its
/// stderr, when that was captured.
pub(crate) fn read_counts(
    output: &Path,
    status: ExitStatus,
    stderr: &str,
) -> Result<Vec<Reading>, MeasureError> {
    let failed = || MeasureError::PerfFailed {
        status,
        stderr: stderr.to_string(),
    };
    let text = std::fs::read_to_string(output).map_err(|_| failed())?;
    let readings = perf_stat::parse(&text, ',')?;
    if readings.is_empty() {
        return Err(failed());
    }
    Ok(readings)
}

/// What a captured command did.
#[derive(Debug, Clone, Default)]
pub struct Captured {
    /// None when it ran past its deadline and was killed.
    pub status: Option<ExitStatus>,
    /// All the command wrote to stdout.
    pub stdout: String,
    /// All the command wrote to stderr.
    pub stderr: String,
}

/// Runs `cmd` in its own process group with stdin closed and stdout and stderr captured.
/// At `deadline`, or when `cancel` is set, the whole group gets SIGTERM, then SIGKILL; a
/// cancelled run is [`MeasureError::Interrupted`].
pub fn run_captured(
    mut cmd: Command,
    what: &str,
    deadline: Option<Instant>,
    cancel: &AtomicBool,
) -> Result<Captured, MeasureError> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut group = Group::spawn(&mut cmd).map_err(|source| MeasureError::Io {
        what: format!("start {what}"),
        source,
    })?;
    let child = group.child();
    let (tx, rx) = mpsc::channel();
    for (index, pipe) in [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    ]
    .into_iter()
    .enumerate()
    {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            let _ = tx.send((index, bytes));
        });
    }
    drop(tx);

    let status = loop {
        if cancel.load(Ordering::SeqCst) {
            group.stop(KILL_GRACE);
            return Err(MeasureError::Interrupted);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            group.stop(KILL_GRACE);
            break None;
        }
        match group.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) => std::thread::sleep(POLL),
            Err(source) => {
                group.stop(KILL_GRACE);
                return Err(MeasureError::Io {
                    what: format!("wait for {what}"),
                    source,
                });
            }
        }
    };

    // A background process the command left may hold the pipes open: after a grace period
    // its process group is killed; a process that left the group is given up on.
    let mut streams = [Vec::new(), Vec::new()];
    let mut received = 0;
    let mut until = Instant::now() + PIPE_GRACE;
    let mut killed = false;
    while received < streams.len() {
        match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok((i, bytes)) => {
                streams[i] = bytes;
                received += 1;
            }
            Err(mpsc::RecvTimeoutError::Timeout) if !killed => {
                group.signal(libc::SIGKILL);
                killed = true;
                until = Instant::now() + KILL_GRACE;
            }
            Err(_) => break,
        }
    }
    // What the command left running in the background goes with it.
    group.stop(KILL_GRACE);
    let [stdout, stderr] = streams;
    Ok(Captured {
        status,
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::cancel;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn captures_both_streams_and_the_status() {
        let out = run_captured(
            sh("echo out; echo err >&2; exit 3"),
            "t",
            None,
            cancel::never(),
        )
        .unwrap();
        assert_eq!(out.stdout, "out\n");
        assert_eq!(out.stderr, "err\n");
        assert_eq!(out.status.and_then(|s| s.code()), Some(3));
    }

    #[test]
    fn deadline_kills_the_group() {
        let start = Instant::now();
        let out = run_captured(
            sh("sleep 30 & sleep 30"),
            "t",
            Some(Instant::now() + Duration::from_millis(200)),
            cancel::never(),
        )
        .unwrap();
        assert!(out.status.is_none());
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn a_background_process_holding_the_pipe_does_not_hang_us() {
        let start = Instant::now();
        let out = run_captured(sh("sleep 30 & echo done"), "t", None, cancel::never()).unwrap();
        assert_eq!(out.stdout, "done\n");
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn exit_file_gets_the_status_of_a_script_and_of_argv() {
        let dir = tempfile::tempdir().unwrap();
        let exit = ExitFile::new(dir.path(), "s");
        let script = exit.wrap_script("echo hi; exit 7");
        let out = run_captured(sh(&script), "t", None, cancel::never()).unwrap();
        assert_eq!(out.stdout, "hi\n");
        assert_eq!(exit.read(), Some(7));

        let exit = ExitFile::new(dir.path(), "a");
        let argv = exit.wrap_argv(&["sh", "-c", "echo \"$0 $1\"; exit 3", "x y", "z"]);
        let out = Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "x y z\n");
        assert_eq!(exit.read(), Some(3));
        assert_eq!(ExitFile::new(dir.path(), "none").read(), None);
    }

    #[test]
    fn cancel_is_an_error() {
        let flag = AtomicBool::new(true);
        let err = run_captured(sh("sleep 30"), "t", None, &flag).unwrap_err();
        assert!(matches!(err, MeasureError::Interrupted));
    }
}
