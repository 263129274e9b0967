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
//! 5. [`run`] and [`server`]: running a command, or a pinned server with a load against it,
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
pub mod run;
pub mod server;
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

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MeasureError {
    #[error("cannot run perf ({source}): install it (Debian: apt-get install linux-perf)")]
    PerfMissing { source: std::io::Error },
    #[error("perf stat failed ({status}) and counted nothing{}", stderr_suffix(.stderr))]
    PerfFailed { status: ExitStatus, stderr: String },
    #[error(transparent)]
    Parse(#[from] perf_stat::ParseError),
    #[error("cannot {what}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("{side} failed in {run} ({status}){}", stderr_suffix(.stderr))]
    CommandFailed {
        side: String,
        run: String,
        /// "exit status 3", or perf's status when the command's own is unknown.
        status: String,
        stderr: String,
    },
    #[error("{side}, {run}: the output has no match for {option} '{pattern}'{}", stderr_suffix(.output))]
    NoMatch {
        side: String,
        run: String,
        option: &'static str,
        pattern: String,
        output: String,
    },
    #[error("{side}, {run}: --metric matched '{text}', which is not a number")]
    MetricNotNumber {
        side: String,
        run: String,
        text: String,
    },
    #[error("a 95 % interval for a median needs at least {needed} rounds; --runs is {runs}")]
    TooFewRuns { runs: usize, needed: usize },
    #[error("server {side} exited ({status}) before it was ready{}", stderr_suffix(.log))]
    ServerExited {
        side: String,
        status: ExitStatus,
        log: String,
    },
    #[error("server {side} was not ready after {timeout:?} (the --ready command never exited 0){}", stderr_suffix(.log))]
    NotReady {
        side: String,
        timeout: Duration,
        log: String,
    },
    #[error("CPU {cpu} is not one this process may run on (allowed: {allowed})")]
    Cpu { cpu: u32, allowed: String },
    #[error("interrupted")]
    Interrupted,
    #[error("cannot run valgrind, which simulates the caches: install it (Debian: apt-get install valgrind)")]
    ValgrindMissing,
    #[error("{side}: the {model} run counted {full} instructions, its baseline {baseline}: the baseline must do less work than the run (a smaller input, a shorter load)")]
    BaselineNotSmaller {
        side: String,
        model: &'static str,
        full: u64,
        baseline: u64,
    },
    #[error(
        "{who} left no simulated counts in {dir}: {why}; see the valgrind.PID.log files there"
    )]
    SimulationLost {
        who: String,
        dir: String,
        why: String,
    },
    #[error("server {side} outlived SIGTERM for --stop-timeout and was killed, losing its simulated counts in {dir}: raise --stop-timeout (valgrind slows its exit too), or stop the server with a signal it handles")]
    ServerKilled { side: String, dir: String },
    #[error("{side}: the {model} run did {full} of the work --metric '{pattern}' counts, its baseline {baseline}: the run must do more (a request-count load, and a smaller or no --baseline-load)")]
    NoWork {
        side: String,
        model: &'static str,
        pattern: String,
        full: f64,
        baseline: f64,
    },
    #[error("the model {model} needs the model {beside} simulated beside it (it keeps that model's misses outside the hot range): simulate both")]
    ModelNotSimulated {
        model: &'static str,
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
