//! Running `perf record` the way that disturbs the program least on this machine.
//!
//! [`plan`] makes three choices and gives a reason for each:
//!
//! 1. What to sample: branch records filtered to calls (`-j any_call,u`) when the PMU has them
//!    (the paper's LBR profiles), else call stacks by frame pointers (`--call-graph fp`), which
//!    work in VMs and on AMD and Arm.
//! 2. The event: `cycles:u` with a hardware PMU, else the software clock `cpu-clock:u`. User
//!    space only: kernel frames are never used, and unwinding them costs.
//! 3. How: sample the CPUs the program may run on (`-a -C LIST`) rather than the process
//!    (`-p PID`). A per-process event is switched in and out at every context switch of the
//!    program, CPU-wide events stay put: a program that switches often ran 25% slower under
//!    per-process events and 11% under CPU-wide ones on our VMs (bench/RESULTS.md;
//!    a server was once seen 4× slower under `-p`). Other programs on those CPUs are recorded
//!    too; `hottext profile` keeps only the binary's samples.
//!
//! [`Session`] runs perf, pins the program to one CPU first if asked (and puts its affinity back
//! afterwards), and reports what perf itself cost.

mod machine;

use std::ffi::OsString;
use std::io::{self, Read};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::SampleKind;

use crate::os::cpus::{self, Pinned};
pub use crate::os::cpus::{affinity, CpuSet};
use crate::os::proc::Pid;
use crate::os::{proc, shell};
pub use machine::Machine;

/// 4999 rather than 5000 so that sampling does not run in lockstep with periodic timers.
pub const DEFAULT_FREQUENCY: u32 = 4999;
/// Above this many CPUs, sampling all the CPUs a program may use writes too much (each CPU
/// adds its own samples of every program); pin the program with `--cpu` instead.
pub const MAX_CPU_WIDE: usize = 16;

/// The program to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A running process; perf stops after the duration, at Ctrl-C, or when it exits.
    Pid(Pid),
    /// A command perf starts; perf stops when it exits (or after the duration).
    Command(Vec<OsString>),
}

/// Which events perf opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// One event per listed CPU (`-a -C LIST`): cheap at context switches.
    Cpus(CpuSet),
    /// Events that follow the process's threads (`-p PID`, or a command's inherited events).
    Process,
}

/// What the user asked for.
#[derive(Debug, Clone)]
pub struct Request {
    pub target: Target,
    pub output: PathBuf,
    pub duration: Option<Duration>,
    /// Samples per second per CPU; default [`DEFAULT_FREQUENCY`], capped by the kernel's maximum.
    pub frequency: Option<u32>,
    /// Pin the `--pid` process to this CPU while recording, and sample only that CPU.
    pub pin_cpu: Option<u32>,
    /// Use per-process events even where CPU-wide ones would do.
    pub per_process: bool,
    /// Force call stacks or branch records instead of the machine's best.
    pub sampling: Option<SampleKind>,
}

/// The decided recording: perf's arguments follow from it.
#[derive(Debug, Clone)]
pub struct Plan {
    pub target: Target,
    pub output: PathBuf,
    pub duration: Option<Duration>,
    pub sampling: SampleKind,
    pub event: &'static str,
    pub frequency: u32,
    pub scope: Scope,
    pub pin_cpu: Option<u32>,
    /// One line per choice, saying why.
    pub reasons: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    #[error("perf is not installed (no `perf` in PATH); install it (Debian: linux-perf, Ubuntu: linux-tools-$(uname -r))")]
    PerfMissing,
    #[error("kernel.perf_event_paranoid is {level}, which forbids perf for users other than root; run as root, or lower it (sysctl kernel.perf_event_paranoid=2)")]
    Forbidden { level: i32 },
    #[error("cannot tell what this machine's perf can do: {0}")]
    Probe(io::Error),
    #[error("there is no process {pid}")]
    NoSuchProcess { pid: Pid },
    #[error("cannot read the CPU affinity of process {pid}: {source}")]
    Affinity { pid: Pid, source: io::Error },
    #[error("CPU {cpu} is not online (online: {online})")]
    CpuOffline { cpu: u32, online: CpuSet },
    #[error("pinning to a CPU works on a running process (--pid); run a command under `taskset -c N` instead")]
    PinNeedsPid,
    #[error("cannot pin process {pid} to CPU {cpu}: {source}")]
    Pin {
        pid: Pid,
        cpu: u32,
        source: io::Error,
    },
    #[error("this machine has no branch records for calls (perf record -j any_call fails); use call stacks")]
    NoBranchRecords,
    #[error("cannot start perf: {0}")]
    Spawn(io::Error),
    #[error("perf record failed ({status}): {stderr}")]
    PerfFailed { status: String, stderr: String },
}

/// Decides how to record `req` on `machine`; `affinity` is where the target may run (the
/// process's threads for a pid, this process's for a command, which inherits it).
pub fn plan(req: &Request, machine: &Machine, affinity: &CpuSet) -> Result<Plan, RecordError> {
    if !machine.root && machine.paranoid >= 3 {
        return Err(RecordError::Forbidden {
            level: machine.paranoid,
        });
    }
    let mut reasons = Vec::new();
    let sampling = match (req.sampling, machine.branch_calls) {
        (Some(SampleKind::Branch), false) => return Err(RecordError::NoBranchRecords),
        (Some(s), _) => {
            reasons.push(format!("{}: as asked", sampling_name(s)));
            s
        }
        (None, true) => {
            reasons.push("branch records of calls: the PMU records them (LBR)".into());
            SampleKind::Branch
        }
        (None, false) => {
            reasons.push(
                "call stacks by frame pointers: this machine has no branch records of calls".into(),
            );
            SampleKind::Stack
        }
    };
    let event = if machine.cycles {
        reasons.push("event cycles:u: the CPU has a hardware cycle counter".into());
        "cycles:u"
    } else {
        reasons
            .push("event cpu-clock:u: no hardware PMU here (a VM?), so the software clock".into());
        "cpu-clock:u"
    };
    let wanted = req.frequency.unwrap_or(DEFAULT_FREQUENCY);
    let frequency = wanted.min(machine.max_sample_rate);
    if frequency < wanted {
        reasons.push(format!(
            "{frequency} samples/s per CPU: the kernel allows at most that (kernel.perf_event_max_sample_rate)"
        ));
    }

    if let Some(cpu) = req.pin_cpu {
        if !matches!(req.target, Target::Pid(_)) {
            return Err(RecordError::PinNeedsPid);
        }
        if !machine.online.contains(cpu) {
            return Err(RecordError::CpuOffline {
                cpu,
                online: machine.online.clone(),
            });
        }
    }
    let runs_on = req
        .pin_cpu
        .map(CpuSet::one)
        .unwrap_or_else(|| affinity.clone());
    let scope = if req.per_process {
        reasons.push("per-process events: as asked (they cost more at each context switch)".into());
        Scope::Process
    } else if !machine.may_sample_cpus() {
        reasons.push(format!(
            "per-process events: sampling whole CPUs needs root or CAP_PERFMON (kernel.perf_event_paranoid is {})",
            machine.paranoid
        ));
        Scope::Process
    } else if runs_on.is_empty() || runs_on.len() > MAX_CPU_WIDE {
        reasons.push(format!(
            "per-process events: the program may run on {} CPUs, too many to sample them all; \
             pin it with --cpu N for cheaper CPU-wide sampling",
            runs_on.len()
        ));
        Scope::Process
    } else {
        let why = match req.pin_cpu {
            Some(cpu) => format!("pinned to CPU {cpu} while recording"),
            None if runs_on.len() == 1 => "the program is pinned to it".into(),
            None => "the CPUs the program may run on".into(),
        };
        reasons.push(format!(
            "CPU-wide events on CPU {runs_on} ({why}): cheaper than per-process events at context switches"
        ));
        Scope::Cpus(runs_on)
    };
    Ok(Plan {
        target: req.target.clone(),
        output: req.output.clone(),
        duration: req.duration,
        sampling,
        event,
        frequency,
        scope,
        pin_cpu: req.pin_cpu,
        reasons,
    })
}

fn sampling_name(s: SampleKind) -> &'static str {
    match s {
        SampleKind::Stack => "call stacks by frame pointers",
        SampleKind::Branch => "branch records of calls",
    }
}

impl Plan {
    /// The arguments after `perf`.
    pub fn perf_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> =
            vec!["record".into(), "-o".into(), self.output.clone().into()];
        args.extend([
            "-e".into(),
            self.event.into(),
            "-F".into(),
            self.frequency.to_string().into(),
        ]);
        match self.sampling {
            SampleKind::Stack => args.extend(["--call-graph".into(), "fp".into()]),
            SampleKind::Branch => args.extend(["-j".into(), "any_call,u".into()]),
        }
        match (&self.scope, &self.target) {
            (Scope::Cpus(cpus), _) => {
                args.extend(["-a".into(), "-C".into(), cpus.to_string().into()])
            }
            (Scope::Process, Target::Pid(pid)) => {
                args.extend(["-p".into(), pid.to_string().into()])
            }
            (Scope::Process, Target::Command(_)) => {}
        }
        match (&self.target, self.duration) {
            (Target::Command(cmd), _) => {
                args.push("--".into());
                args.extend(cmd.iter().cloned());
            }
            // perf times the recording itself: it starts `sleep` once its events are set up,
            // which on a loaded machine (or CPU-wide, where perf first lists every process)
            // takes a second or more of a short recording's time.
            (Target::Pid(_), Some(d)) => args.extend([
                "--".into(),
                "sleep".into(),
                format!("{:.3}", d.as_secs_f64()).into(),
            ]),
            (Target::Pid(_), None) => {}
        }
        args
    }

    /// When to stop perf ourselves: after the duration for a command, which runs as long as it
    /// likes; for a process perf stops itself (see [`Plan::perf_args`]), and this is only a
    /// safety net, as long again as the duration plus 30 s.
    pub fn stop_after(&self) -> Option<Duration> {
        let d = self.duration?;
        Some(match self.target {
            Target::Command(_) => d,
            Target::Pid(_) => d.saturating_mul(2).saturating_add(Duration::from_secs(30)),
        })
    }

    /// The whole command line, for people to read and re-run.
    pub fn command_line(&self) -> String {
        std::iter::once("perf".to_string())
            .chain(
                self.perf_args()
                    .iter()
                    .map(|a| shell::word(&a.to_string_lossy())),
            )
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A running `perf record`.
pub struct Session {
    child: Child,
    stderr: Option<JoinHandle<String>>,
    pinned: Option<Pinned>,
    started: Instant,
    output: PathBuf,
    /// A pid target recorded CPU-wide: perf does not notice when it exits, so we watch it.
    watch_pid: Option<Pid>,
    stop_sent: bool,
    perf_cpu_ticks: u64,
    sigint_before: Option<libc::sighandler_t>,
}

/// How a recording went.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub wall_seconds: f64,
    /// CPU time of the perf process itself (not the kernel's sampling work in the program).
    pub perf_cpu_seconds: f64,
    /// perf's own count, from its closing line.
    pub samples: Option<u64>,
    pub bytes: u64,
    /// perf's messages (warnings about lost samples and the like).
    pub perf_messages: String,
    /// Set when the pinned process's affinity could not be put back.
    pub restore_error: Option<String>,
}

impl Session {
    /// Pins the target if the plan says so, then starts perf. While perf runs this process
    /// ignores Ctrl-C, so that perf (which gets it too) stops and writes its file, and we still
    /// put the affinity back.
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
        perf.args(plan.perf_args())
            .stdin(Stdio::inherit())
            .stdout(Stdio::inherit())
            .stderr(Stdio::piped());
        // SAFETY: prctl is async-signal-safe, as the code between fork and exec must be.
        // If we die, perf is told to stop and write its file rather than record forever.
        unsafe {
            perf.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGINT) == 0 {
                    Ok(())
                } else {
                    Err(io::Error::last_os_error())
                }
            });
        }
        let spawned = perf.spawn();
        let mut child = match spawned {
            Ok(child) => child,
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
        let stderr = child.stderr.take().map(|mut pipe| {
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = pipe.read_to_string(&mut text);
                text
            })
        });
        // SAFETY: installing SIG_IGN has no preconditions; the old handler is put back on drop.
        let sigint_before = Some(unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) });
        let watch_pid = match (&plan.target, &plan.scope) {
            (Target::Pid(pid), Scope::Cpus(_)) => Some(*pid),
            _ => None,
        };
        Ok(Session {
            child,
            stderr,
            pinned,
            started: Instant::now(),
            output: plan.output.clone(),
            watch_pid,
            stop_sent: false,
            perf_cpu_ticks: 0,
            sigint_before,
        })
    }

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
            unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        }
    }

    /// Checks on perf without blocking: `Some` once it has exited.
    pub fn poll(&mut self) -> Result<Option<Outcome>, RecordError> {
        if let Some(perf) = proc::stat(self.child.id() as i32) {
            self.perf_cpu_ticks = perf.own_ticks;
        }
        if self.watch_pid.is_some_and(|pid| !proc::exists(pid)) {
            self.stop();
        }
        match self.child.try_wait().map_err(RecordError::Spawn)? {
            None => Ok(None),
            Some(status) => self.finish(status).map(Some),
        }
    }

    fn finish(&mut self, status: ExitStatus) -> Result<Outcome, RecordError> {
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
        self.restore_sigint();
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

    fn restore_sigint(&mut self) {
        if let Some(handler) = self.sigint_before.take() {
            // SAFETY: puts back the handler `signal` returned earlier.
            unsafe { libc::signal(libc::SIGINT, handler) };
        }
    }
}

impl Drop for Session {
    /// Stops perf and unpins the target if the session is abandoned (an error in the caller).
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.stop();
            let _ = self.child.wait();
        }
        if let Some(p) = self.pinned.take() {
            let _ = p.restore();
        }
        self.restore_sigint();
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

    fn machine(cycles: bool, branch_calls: bool, cpus: &str) -> Machine {
        Machine {
            cycles,
            branch_calls,
            max_sample_rate: 8700,
            paranoid: 2,
            root: true,
            online: CpuSet::parse(cpus).unwrap(),
        }
    }

    fn request(target: Target) -> Request {
        Request {
            target,
            output: "perf.data".into(),
            duration: None,
            frequency: None,
            pin_cpu: None,
            per_process: false,
            sampling: None,
        }
    }

    fn args(plan: &Plan) -> String {
        plan.command_line()
    }

    #[test]
    fn vm_without_pmu_samples_stacks_on_the_software_clock() {
        let m = machine(false, false, "0-1");
        let p = plan(
            &request(Target::Command(vec!["./prog".into(), "a b".into()])),
            &m,
            &m.online,
        )
        .unwrap();
        assert_eq!(p.sampling, SampleKind::Stack);
        assert_eq!(
            args(&p),
            "perf record -o perf.data -e cpu-clock:u -F 4999 --call-graph fp -a -C 0-1 -- ./prog 'a b'"
        );
    }

    #[test]
    fn lbr_machine_records_call_branches() {
        let m = machine(true, true, "0-7");
        let p = plan(&request(Target::Pid(42)), &m, &CpuSet::parse("3").unwrap()).unwrap();
        assert_eq!(
            args(&p),
            "perf record -o perf.data -e cycles:u -F 4999 -j any_call,u -a -C 3"
        );
    }

    #[test]
    fn perf_times_a_process_recording_and_hottext_only_a_command() {
        let m = machine(false, false, "0-1");
        let mut r = request(Target::Pid(42));
        r.duration = Some(Duration::from_millis(2500));
        let p = plan(&r, &m, &m.online).unwrap();
        assert!(
            args(&p).ends_with(" -a -C 0-1 -- sleep 2.500"),
            "{}",
            args(&p)
        );
        assert_eq!(p.stop_after(), Some(Duration::from_secs(35)));
        r.target = Target::Command(vec!["./prog".into()]);
        let p = plan(&r, &m, &m.online).unwrap();
        assert!(args(&p).ends_with(" -- ./prog"), "{}", args(&p));
        assert_eq!(p.stop_after(), Some(Duration::from_millis(2500)));
    }

    #[test]
    fn pinning_samples_only_that_cpu() {
        let m = machine(false, false, "0-3");
        let mut r = request(Target::Pid(42));
        r.pin_cpu = Some(2);
        let p = plan(&r, &m, &m.online).unwrap();
        assert_eq!(p.scope, Scope::Cpus(CpuSet::one(2)));
        r.pin_cpu = Some(9);
        assert!(matches!(
            plan(&r, &m, &m.online),
            Err(RecordError::CpuOffline { cpu: 9, .. })
        ));
        let mut c = request(Target::Command(vec!["x".into()]));
        c.pin_cpu = Some(1);
        assert!(matches!(
            plan(&c, &m, &m.online),
            Err(RecordError::PinNeedsPid)
        ));
    }

    #[test]
    fn big_unpinned_process_falls_back_to_per_process_events() {
        let m = machine(false, false, "0-63");
        let p = plan(&request(Target::Pid(42)), &m, &m.online).unwrap();
        assert_eq!(p.scope, Scope::Process);
        assert!(args(&p).ends_with("-p 42"), "{}", args(&p));
        assert!(p.reasons.iter().any(|r| r.contains("--cpu")));
    }

    #[test]
    fn unprivileged_users_get_per_process_events_and_paranoid_3_is_an_error() {
        let mut m = machine(false, false, "0-1");
        m.root = false;
        let p = plan(&request(Target::Pid(42)), &m, &m.online).unwrap();
        assert_eq!(p.scope, Scope::Process);
        m.paranoid = 3;
        assert!(matches!(
            plan(&request(Target::Pid(42)), &m, &m.online),
            Err(RecordError::Forbidden { level: 3 })
        ));
    }

    #[test]
    fn frequency_is_capped_by_the_kernel_and_branch_needs_a_pmu() {
        let m = machine(false, false, "0");
        let mut r = request(Target::Pid(1));
        r.frequency = Some(20000);
        assert_eq!(plan(&r, &m, &m.online).unwrap().frequency, 8700);
        r.sampling = Some(SampleKind::Branch);
        assert!(matches!(
            plan(&r, &m, &m.online),
            Err(RecordError::NoBranchRecords)
        ));
    }

    #[test]
    fn reads_perf_closing_line() {
        let msg = "[ perf record: Woken up 1 times to write data ]\n\
                   [ perf record: Captured and wrote 1.403 MB p.data (18304 samples) ]\n";
        assert_eq!(samples_in_closing_line(msg), Some(18304));
        assert_eq!(samples_in_closing_line("nothing"), None);
    }
}
