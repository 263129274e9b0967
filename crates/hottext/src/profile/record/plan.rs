//! The choices of a recording and their reasons (see the module above).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use super::{
    Machine, RecordError, Request, Sampling, Scope, Target, DEFAULT_FREQUENCY, MAX_CPU_WIDE,
};
use crate::os::cpus::CpuSet;
use crate::os::shell;
use crate::profile::code::FRAME_POINTERS_KEPT;
use crate::profile::SampleKind;

/// The decided recording: perf's arguments follow from it.
#[derive(Debug, Clone)]
pub struct Plan {
    /// What to record: a command or a running process.
    pub target: Target,
    /// Where perf writes its perf.data.
    pub output: PathBuf,
    /// How long to record; `None` until the command ends or a signal stops it.
    pub duration: Option<Duration>,
    /// What the samples carry: stacks (frame pointers or DWARF), branch records or nothing.
    pub sampling: SampleKind,
    /// With branch records: of every taken branch (`-j any`), not only of calls.
    pub every_branch: bool,
    /// The perf event sampled (`cycles` or the software `cpu-clock`).
    pub event: &'static str,
    /// Samples per second per CPU.
    pub frequency: u32,
    /// Which CPUs and threads the events follow.
    pub scope: Scope,
    /// The CPU the process is pinned to while recording, if any.
    pub pin_cpu: Option<u32>,
    /// perf's ring buffer per CPU (`-m`), where its default would lose samples.
    pub ring_buffer: Option<&'static str>,
    /// One line per choice, saying why.
    pub reasons: Vec<String>,
}

/// Decides how to record `req` on `machine`; `affinity` is where the target may run (the
/// process's threads for a pid, this process's for a command, which inherits it).
pub fn plan(req: &Request, machine: &Machine, affinity: &CpuSet) -> Result<Plan, RecordError> {
    if !machine.root && machine.paranoid >= 3 {
        return Err(RecordError::Forbidden {
            level: machine.paranoid,
        });
    }
    if let Some(asked) = req.sampling {
        asked.check(machine)?;
    }
    let mut reasons = Vec::new();
    let every_branch = req.sampling == Some(Sampling::EveryBranch);
    let sampling = if every_branch {
        reasons.push(
            "branch records of every taken branch: as asked (the jumps and fall-throughs \
             between a function's blocks, for the cluster file's block order; fewer calls a \
             sample than records of calls only)"
                .into(),
        );
        SampleKind::Branch
    } else {
        choose_sampling(req, machine, &mut reasons)
    };
    // 8 KiB of stack a sample fill perf's default 516 KiB buffer in 60 samples: it lost up to
    // 2 % of them CPU-wide on this project's 2-CPU VM, none with 16 MiB. Above
    // kernel.perf_event_mlock_kb only root may lock that much.
    let ring_buffer = (sampling == SampleKind::Dwarf && machine.root).then(|| {
        reasons.push(
            "a 16 MiB ring buffer per CPU (perf -m 16M): each sample carries 8 KiB of stack".into(),
        );
        "16M"
    });
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
        let why = match (req.pin_cpu, &req.target) {
            (Some(cpu), Target::Pid(_)) => format!("pinned to CPU {cpu} while recording"),
            (Some(cpu), Target::Command(_)) => {
                format!("the command runs pinned to it: taskset -c {cpu}")
            }
            (None, _) if runs_on.len() == 1 => "the program is pinned to it".into(),
            (None, Target::Pid(_)) => "the CPUs the program may run on".into(),
            // What the command does with its affinity (a taskset of its own) is not known here.
            (None, Target::Command(_)) => {
                "the CPUs hottext may run on, and so the command unless it pins itself; \
                 --cpu N runs it pinned to CPU N and records only that CPU"
                    .into()
            }
        };
        reasons.push(format!(
            "CPU-wide events on CPU {runs_on} ({why}): every process on them is recorded (`hottext profile` keeps the binary's samples), which costs less than per-process events at context switches"
        ));
        Scope::Cpus(runs_on)
    };
    Ok(Plan {
        target: req.target.clone(),
        output: req.output.clone(),
        duration: req.duration,
        sampling,
        every_branch,
        event,
        frequency,
        scope,
        pin_cpu: req.pin_cpu,
        ring_buffer,
        reasons,
    })
}

/// What the samples should carry, with the reason, where every branch was not asked for: what
/// was asked (which the machine can record), else branch records of calls where the PMU has
/// them, else stacks.
fn choose_sampling(req: &Request, machine: &Machine, reasons: &mut Vec<String>) -> SampleKind {
    match (req.sampling.map(Sampling::kind), machine.branch_calls) {
        (Some(s), _) => {
            reasons.push(format!("{}: as asked", s.description()));
            s
        }
        (None, true) => {
            reasons.push("branch records of calls: the PMU records them (LBR)".into());
            SampleKind::Branch
        }
        (None, false) => match req.frame_pointer_share {
            Some(share) if share < FRAME_POINTERS_KEPT => {
                reasons.push(format!(
                    "call stacks by DWARF unwinding: this machine has no branch records of calls, \
                     and only {:.0}% of the program's calling functions set up a frame pointer; {DWARF_COST}",
                    100.0 * share
                ));
                SampleKind::Dwarf
            }
            _ => {
                reasons.push(
                    "call stacks by frame pointers: this machine has no branch records of calls"
                        .into(),
                );
                SampleKind::Stack
            }
        },
    }
}

/// What `--call-graph dwarf` costs, as measured (bench/RESULTS.md).
const DWARF_COST: &str = "perf copies 8 KiB of stack into each sample: \
    perf.data grows about 90 times faster (21 MB/s against 0.25 MB/s at 2500 samples/s) and \
    perf and the kernel take about 2.4 % more CPU; build with -fno-omit-frame-pointer to avoid it";

impl Plan {
    /// What the samples carry, as `hottext record` says it.
    pub fn description(&self) -> &'static str {
        if self.every_branch {
            "branch records of every taken branch (LBR, BRS)"
        } else {
            self.sampling.description()
        }
    }

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
            SampleKind::Branch if self.every_branch => args.extend(["-j".into(), "any,u".into()]),
            SampleKind::Branch => args.extend(["-j".into(), "any_call,u".into()]),
            SampleKind::Plain => {}
            SampleKind::Dwarf => args.extend(["--call-graph".into(), "dwarf".into()]),
        }
        if let Some(size) = self.ring_buffer {
            args.extend(["-m".into(), size.into()]);
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
                // perf starts the command: pinned, it runs on the one CPU that is sampled
                // while perf itself stays free to run elsewhere.
                if let Some(cpu) = self.pin_cpu {
                    args.extend(["taskset".into(), "-c".into(), cpu.to_string().into()]);
                }
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

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
