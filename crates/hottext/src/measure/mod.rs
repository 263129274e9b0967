//! Measuring a layout change: hardware counters for one command ([`stat`]), and A/B runs with a
//! verdict ([`ab`]).
//!
//! The layers, bottom up:
//!
//! 1. [`perf_stat`]: the `perf stat -x,` command line and its CSV output.
//! 2. [`events`]: which event counts each figure on Intel and on AMD, and which of them this
//!    machine has (probed, not assumed: VMs often have no PMU at all).
//! 3. [`counts`]: one run's figures and the metrics derived from them.
//! 4. [`stats`]: medians, per-round B/A ratios and their distribution-free 95 % interval.
//! 5. `run` and `server`: running a command, or a pinned server with a load against it,
//!    under perf, and never leaving a server behind.
//! 6. [`ab`]: interleaved rounds, the optional service metric, noise checks, the report.
//!
//! Counting protocol (from the project's issue #4): instructions are exact for a pure layout
//! change, cycles vary 1–9 % between runs and wall time twice that; so judge by cycles, with
//! instructions as the check that A and B do the same work. A busy server is counted by the CPU
//! it is pinned to (`perf stat -a -C N`): per-process counting (`-p`) slowed one about 4× on
//! these VMs.
//!
//! ```no_run
//! use hottext::measure::{events::EventPlan, stat};
//! use hottext::os::cancel;
//!
//! let plan = EventPlan::probe()?;
//! let stdout = std::process::Stdio::inherit();
//! let run = stat(&plan, &["sh", "-c", "sleep 0.1"], stdout, cancel::never())?;
//! println!("{:?}", run.counts.get(hottext::measure::events::Counter::WallTime));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod ab;
pub mod counts;
pub mod events;
pub mod perf_stat;
pub(crate) mod run;
pub(crate) mod server;
pub mod simulate;
pub mod stats;

use std::process::ExitStatus;
use std::time::Duration;

pub use run::{stat, StatRun};

/// A temporary directory for perf's output files and servers' logs.
pub(crate) fn scratch_dir() -> Result<tempfile::TempDir, MeasureError> {
    tempfile::Builder::new()
        .prefix("hottext-measure")
        .tempdir()
        .map_err(|source| MeasureError::Io {
            what: "create a temporary directory".into(),
            source,
        })
}

/// Why a measurement failed; every message names the side, the run or the command involved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MeasureError {
    /// perf could not be started.
    #[error("cannot run perf ({source}): install it (Debian: apt-get install linux-perf)")]
    PerfMissing {
        /// Why spawning perf failed.
        source: std::io::Error,
    },
    /// perf exited unsuccessfully without printing a single reading.
    #[error("perf stat failed ({status}) and counted nothing{}", stderr_suffix(.stderr))]
    PerfFailed {
        /// perf's own exit status.
        status: ExitStatus,
        /// perf's standard error, whose last lines the message shows.
        stderr: String,
    },
    /// perf's CSV output had a line that is not a reading.
    #[error(transparent)]
    Parse(#[from] perf_stat::ParseError),
    /// A file or process operation failed.
    #[error("cannot {what}")]
    Io {
        /// The operation, as a verb phrase ("create a temporary directory").
        what: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The measured command failed (exit status or signal).
    #[error("{side} failed in {run} ({status}){}", stderr_suffix(.stderr))]
    CommandFailed {
        /// What failed: a side ("A"), its set-up ("set-up of A"), a simulated command.
        side: String,
        /// Which run: "round 3", "warm-up round 1".
        run: String,
        /// "exit status 3", or perf's status when the command's own is unknown.
        status: String,
        /// The command's standard error.
        stderr: String,
    },
    /// A `--metric` or `--ready` pattern found nothing in a run's output.
    #[error("{side}, {run}: the output has no match for {option} '{pattern}'{}", stderr_suffix(.output))]
    NoMatch {
        /// Which command: "A" or "B".
        side: String,
        /// Which run: "round 3", "warm-up round 1".
        run: String,
        /// The option that gave the pattern (`--metric`).
        option: &'static str,
        /// The regular expression as given.
        pattern: String,
        /// The output searched.
        output: String,
    },
    /// `--metric` matched text that does not parse as a number.
    #[error("{side}, {run}: --metric matched '{text}', which is not a number")]
    MetricNotNumber {
        /// Which command: "A" or "B".
        side: String,
        /// Which run: "round 3", "warm-up round 1".
        run: String,
        /// The matched text.
        text: String,
    },
    /// Too few rounds for a distribution-free interval at the chosen confidence.
    #[error("a 95 % interval for a median needs at least {needed} rounds; --runs is {runs}")]
    TooFewRuns {
        /// Rounds asked for (`--runs`).
        runs: usize,
        /// The fewest rounds that give the interval.
        needed: usize,
    },
    /// A server exited while its `--ready` command was still failing.
    #[error("server {side} exited ({status}) before it was ready{}", stderr_suffix(.log))]
    ServerExited {
        /// Which server: "A" or "B".
        side: String,
        /// The server's exit status.
        status: ExitStatus,
        /// What the server wrote.
        log: String,
    },
    /// A server's `--ready` command never exited 0 within the timeout.
    #[error("server {side} was not ready after {timeout:?} (the --ready command never exited 0){}", stderr_suffix(.log))]
    NotReady {
        /// Which server: "A" or "B".
        side: String,
        /// How long hottext waited.
        timeout: Duration,
        /// What the server wrote.
        log: String,
    },
    /// A CPU to pin to is outside this process's affinity mask.
    #[error("CPU {cpu} is not one this process may run on (allowed: {allowed})")]
    Cpu {
        /// The CPU asked for.
        cpu: u32,
        /// The CPUs this process may run on.
        allowed: String,
    },
    /// SIGINT or SIGTERM arrived; whatever was running was stopped.
    #[error("interrupted")]
    Interrupted,
    /// valgrind could not be started.
    #[error("cannot run valgrind, which simulates the caches: install it (Debian: apt-get install valgrind)")]
    ValgrindMissing,
    /// A simulated baseline ran at least as many instructions as the run it is subtracted from.
    #[error("{side}: the {model} run counted {full} instructions, its baseline {baseline}: the baseline must do less work than the run (a smaller input, a shorter load)")]
    BaselineNotSmaller {
        /// Which command: "A" or "B".
        side: String,
        /// The simulated structure ([`simulate::Model`]'s name).
        model: &'static str,
        /// Instructions of the full run.
        full: u64,
        /// Instructions of the baseline run.
        baseline: u64,
    },
    /// A simulation ended without cachegrind's output files.
    #[error(
        "{who} left no simulated counts in {dir}: {why}; see the valgrind.PID.log files there"
    )]
    SimulationLost {
        /// The command or server simulated.
        who: String,
        /// The directory cachegrind was to write to.
        dir: String,
        /// What went wrong (no file, an unreadable one).
        why: String,
    },
    /// A simulated server needed SIGKILL, so cachegrind never wrote its counts.
    #[error("server {side} outlived SIGTERM for --stop-timeout and was killed, losing its simulated counts in {dir}: raise --stop-timeout (valgrind slows its exit too), or stop the server with a signal it handles")]
    ServerKilled {
        /// Which server: "A" or "B".
        side: String,
        /// The directory its counts were to be written to.
        dir: String,
    },
    /// The service metric of a simulated run is not above its baseline's, so per-unit figures
    /// would divide by nothing.
    #[error("{side}: the {model} run did {full} of the work --metric '{pattern}' counts, its baseline {baseline}: the run must do more (a request-count load, and a smaller or no --baseline-load)")]
    NoWork {
        /// Which server: "A" or "B".
        side: String,
        /// The simulated structure.
        model: &'static str,
        /// The `--metric` pattern.
        pattern: String,
        /// The metric in the full run.
        full: f64,
        /// The metric in the baseline run.
        baseline: f64,
    },
    /// A model was asked for without the one it is computed against.
    #[error("the model {model} needs the model {beside} simulated beside it (it keeps that model's misses outside the hot range): simulate both")]
    ModelNotSimulated {
        /// The model asked for.
        model: &'static str,
        /// The model it needs.
        beside: &'static str,
    },
}

impl MeasureError {
    /// The measured command or server failed (exit status, signal), not hottext or perf: what
    /// the CLI reports with exit status 1, as for `stat` of a failing command.
    pub fn is_command_failure(&self) -> bool {
        matches!(
            self,
            MeasureError::CommandFailed { .. } | MeasureError::ServerExited { .. }
        )
    }

    pub(crate) fn perf_missing(source: std::io::Error) -> MeasureError {
        MeasureError::PerfMissing { source }
    }
}

/// The last lines of a captured stream, to put after an error message.
fn stderr_suffix(text: &str) -> String {
    let tail = tail(text, 8);
    if tail.is_empty() {
        String::new()
    } else {
        format!(":\n{tail}")
    }
}

/// The last `lines` non-empty lines of `text`, each indented.
pub(crate) fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    all[all.len().saturating_sub(lines)..]
        .iter()
        .map(|l| format!("  | {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
