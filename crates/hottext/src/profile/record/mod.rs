//! Running `perf record` the way that disturbs the program least on this machine.
//!
//! [`plan`] makes three choices and gives a reason for each:
//!
//! 1. What to sample: branch records filtered to calls (`-j any_call,u`) when the PMU has them
//!    (the paper's LBR profiles), else call stacks by frame pointers (`--call-graph fp`), which
//!    work in VMs and on AMD and Arm; for a program built without frame pointers (fewer than
//!    half its functions set one up, as the doctor counts them), perf copies each sample's
//!    stack (`--call-graph dwarf`, about 90 times the data) for `hottext profile` to unwind.
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
mod plan;
mod session;

use std::ffi::OsString;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

use super::SampleKind;

pub use crate::os::cpus::{affinity, CpuSet};
use crate::os::proc::Pid;
pub use machine::Machine;
pub use plan::{plan, Plan};
pub use session::{Outcome, Session};

/// 4999 rather than 5000 so that sampling does not run in lockstep with periodic timers.
pub const DEFAULT_FREQUENCY: u32 = 4999;
/// The shortest recording asked for: perf takes tens of milliseconds to start, and a recording
/// stopped before that ends perf by the stop signal with nothing written.
pub(crate) const MIN_SECONDS: f64 = 0.1;

/// Why `seconds` (named `what`) cannot be how long to record, if it cannot.
pub fn check_seconds(what: &str, seconds: f64) -> Result<(), String> {
    if seconds.is_finite() && seconds >= MIN_SECONDS {
        return Ok(());
    }
    Err(format!(
        "{what} {seconds} is not a recording length: give at least {MIN_SECONDS} seconds (perf needs that to start)"
    ))
}

/// Why `frequency` (named `what`) cannot be a sampling rate, if it cannot.
pub fn check_frequency(what: &str, frequency: u32) -> Result<(), String> {
    if frequency == 0 {
        return Err(format!(
            "{what} 0 samples a second records nothing: give at least 1 (default {DEFAULT_FREQUENCY})"
        ));
    }
    Ok(())
}
/// Above this many CPUs, sampling all the CPUs a program may use writes too much (each CPU
/// adds its own samples of every program); pin the program with `--cpu` instead.
pub(crate) const MAX_CPU_WIDE: usize = 16;

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

/// A way of sampling a user may ask for: `record --sampling`, the pipeline's `[record] sampling`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Sampling {
    /// Call stacks by frame pointers.
    Stack,
    /// Call stacks by DWARF unwinding, for programs without frame pointers.
    Dwarf,
    /// Branch records of calls (LBR).
    Branch,
    /// Branch records of every taken branch (`-j any`): fewer calls a sample, but the jumps
    /// and fall-throughs between a function's blocks (`block-edge` lines).
    EveryBranch,
    /// Samples without stacks: `profile` infers the edges from the code.
    Plain,
}

impl Sampling {
    /// What the samples carry.
    pub fn kind(self) -> SampleKind {
        match self {
            Sampling::Stack => SampleKind::Stack,
            Sampling::Dwarf => SampleKind::Dwarf,
            Sampling::Branch | Sampling::EveryBranch => SampleKind::Branch,
            Sampling::Plain => SampleKind::Plain,
        }
    }

    /// Refuses what `machine` cannot record: branch records without a PMU that has them.
    pub fn check(self, machine: &Machine) -> Result<(), RecordError> {
        match self {
            Sampling::Branch if !machine.branch_calls => Err(RecordError::NoBranchRecords),
            Sampling::EveryBranch if !machine.branch_any => Err(RecordError::NoEveryBranchRecords),
            _ => Ok(()),
        }
    }
}

/// What the user asked for.
#[derive(Debug, Clone)]
pub struct Request {
    /// What to record: a command or a running process.
    pub target: Target,
    /// Where perf writes its perf.data.
    pub output: PathBuf,
    /// How long to record; `None` records until the command ends or a signal stops it.
    pub duration: Option<Duration>,
    /// Samples per second per CPU; default [`DEFAULT_FREQUENCY`], capped by the kernel's maximum.
    pub frequency: Option<u32>,
    /// Pin the `--pid` process to this CPU while recording, and sample only that CPU.
    pub pin_cpu: Option<u32>,
    /// Use per-process events even where CPU-wide ones would do.
    pub per_process: bool,
    /// Force a way of sampling instead of the best the machine and program allow.
    pub sampling: Option<Sampling>,
    /// Share of the program's calling functions that set up a frame pointer
    /// ([`crate::profile::frame_pointer_share`]); `None` when not known. Below
    /// `FRAME_POINTERS_KEPT` (a half), stacks are unwound by DWARF CFI.
    pub frame_pointer_share: Option<f64>,
}

/// Why a recording could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// There is no perf in PATH.
    #[error("perf is not installed (no `perf` in PATH); install it (Debian: linux-perf, Ubuntu: linux-tools-$(uname -r))")]
    PerfMissing,
    /// `kernel.perf_event_paranoid` forbids perf to this user.
    #[error("kernel.perf_event_paranoid is {level}, which forbids perf for users other than root; run as root, or lower it (sysctl kernel.perf_event_paranoid=2)")]
    Forbidden {
        /// The setting's value.
        level: i32,
    },
    /// Probing what perf can do failed.
    #[error("cannot tell what this machine's perf can do: {0}")]
    Probe(io::Error),
    /// The process to record does not exist.
    #[error("there is no process {pid}")]
    NoSuchProcess {
        /// Its pid.
        pid: Pid,
    },
    /// The process's CPU affinity could not be read.
    #[error("cannot read the CPU affinity of process {pid}: {source}")]
    Affinity {
        /// The process.
        pid: Pid,
        /// What the system said.
        source: io::Error,
    },
    /// The CPU to pin to is offline.
    #[error("CPU {cpu} is not online (online: {online})")]
    CpuOffline {
        /// The CPU asked for.
        cpu: u32,
        /// The CPUs online.
        online: CpuSet,
    },
    /// The process could not be pinned to the CPU.
    #[error("cannot pin process {pid} to CPU {cpu}: {source}")]
    Pin {
        /// The process.
        pid: Pid,
        /// The CPU.
        cpu: u32,
        /// What the system said.
        source: io::Error,
    },
    /// Branch records were asked for, and the machine has none for calls.
    #[error("this machine has no branch records for calls (perf record -j any_call fails); use call stacks")]
    NoBranchRecords,
    /// Every taken branch was asked for, and the machine cannot record it.
    #[error("this machine has no branch records of every branch (perf record -j any fails): block edges need a CPU whose PMU records them (Intel LBR, AMD LbrExtV2 or BRS) and a VM that passes it through; without them, record call stacks (the cluster file then keeps the compiler's block order)")]
    NoEveryBranchRecords,
    /// perf could not be started.
    #[error("cannot start perf: {0}")]
    Spawn(io::Error),
    /// perf ran and failed.
    #[error("perf record failed ({status}): {stderr}")]
    PerfFailed {
        /// How it exited.
        status: String,
        /// What it wrote on stderr.
        stderr: String,
    },
}
