//! A/B runs: A and B interleaved, counted the same way, compared round by round.
//!
//! Steps:
//! 0. Both commands' executables are dropped from the page cache (`page_cache`), so that the
//!    way each file was written does not decide how the kernel maps it.
//! 1. Warm-up rounds (page cache, CPU frequency, the server's own caches) whose figures are
//!    dropped.
//! 2. `runs` rounds, A then B in even rounds and B then A in odd ones, so that neither side
//!    always runs second.
//! 3. Each run is counted by `perf stat`: a command and its children (`sh -c CMD`), or, for a
//!    service, everything on the CPU the server is pinned to while the load command runs
//!    (`-a -C N`). The server's CPU time comes from `/proc`; the service metrics from the
//!    command's (or the load's) output.
//! 4. Every metric present in every run is compared with [`super::stats::compare`]: medians of A and
//!    B, the median of the per-round B/A ratios and its 95 % interval, and a verdict.
//! 5. Noise checks: intervals wider than ±5 %, counters that were multiplexed, CPU frequency
//!    that moved (sysfs `scaling_cur_freq`, or cycles per task-clock second).

mod noise;
mod page_cache;
mod report;
mod runner;

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

pub use regex::Regex;
use serde::Serialize;

use super::counts::{Counts, METRICS};
use super::events::EventPlan;
use super::stats::{Better, Comparison, MIN_ROUNDS};
use super::MeasureError;
use crate::os::cpus::{self, CpuSet};
use report::report;
pub(crate) use runner::capture;
use runner::Runner;

/// An interval wider than this (half-width relative to the median) is called noisy.
pub(crate) const NOISY_HALF_WIDTH: f64 = 0.05;
/// Frequency (or cycles per CPU-second) that moves by more than this between runs is reported.
pub(crate) const FREQUENCY_DRIFT: f64 = 0.05;
/// Instructions of a pure layout change are exact; a median ratio further than this from 1
/// means A and B do different work.
pub(crate) const INSTRUCTIONS_TOLERANCE: f64 = 0.001;

/// Which of the two commands (or servers) compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Side {
    /// The baseline.
    A,
    /// The candidate, compared against A.
    B,
}

/// The service form: each run starts the side's server, loads it, stops it.
#[derive(Debug, Clone)]
pub struct Service {
    /// Exits 0 once the server answers; run with `sh -c` every 100 ms.
    pub ready: String,
    /// How long `ready` may keep failing before the run is abandoned.
    pub ready_timeout: Duration,
    /// The load against the server; its run is what is counted.
    pub load: String,
    /// The CPU the server is pinned to and counted on.
    pub cpu: u32,
    /// Between SIGTERM and SIGKILL when stopping the server.
    pub stop_timeout: Duration,
}

impl Service {
    /// Pins the load to the CPUs of `allowed` other than the server's (none left: unpinned, and
    /// the load shares the server's CPU).
    pub(crate) fn pin_load(&self, load: &mut std::process::Command, allowed: &[u32]) {
        let others: CpuSet = allowed.iter().copied().filter(|&c| c != self.cpu).collect();
        if !others.is_empty() {
            cpus::pin_command(load, &others);
        }
    }
}

/// The report's key for the server's CPU time (service form).
const SERVER_CPU_TIME: &str = "server-cpu-time";

/// Whether `name` is the key of a figure `ab` counts itself, which a service metric's name
/// must not shadow (report rows are looked up by key).
pub fn is_counted_key(name: &str) -> bool {
    name == SERVER_CPU_TIME || METRICS.iter().any(|m| m.key == name)
}

/// A number the command prints, e.g. its throughput: group 1 of `pattern` (or the whole match).
#[derive(Debug, Clone)]
pub struct ServiceMetric {
    /// The regular expression; group 1, if it has one, is the number.
    pub pattern: Regex,
    /// The row's key and label in the report (unique; not a counted figure's key).
    pub name: String,
    /// Which direction is an improvement.
    pub better: Better,
}

/// What `hottext ab` compares, and how.
#[derive(Debug, Clone)]
pub struct Config {
    /// Commands, or with `service` the servers' commands (all run with `sh -c`).
    pub a: String,
    /// Command or server B.
    pub b: String,
    /// Measured rounds (each runs A once and B once).
    pub runs: usize,
    /// Rounds run first and dropped.
    pub warmup: usize,
    /// Present for the service form: a server per side, loaded by a separate command.
    pub service: Option<Service>,
    /// Numbers the runs print (throughput, latency percentiles), in report order; the first
    /// is the headline. Names are unique.
    pub metrics: Vec<ServiceMetric>,
    /// Every run's match (group 1) must be the same text, e.g. a checksum.
    pub expect_same: Option<Regex>,
    /// Shell lines run before each run of A and of B, not counted (a system setting to put
    /// in force, a page cache to place); empty for none.
    pub setup: [String; 2],
}

impl Config {
    fn command(&self, side: Side) -> &str {
        match side {
            Side::A => &self.a,
            Side::B => &self.b,
        }
    }

    fn setup(&self, side: Side) -> &str {
        match side {
            Side::A => &self.setup[0],
            Side::B => &self.setup[1],
        }
    }
}

/// One run of one side.
#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    /// 0-based; warm-up rounds are numbered separately.
    pub round: usize,
    /// Whether this was a warm-up run, whose figures are dropped.
    pub warmup: bool,
    /// Which command ran.
    pub side: Side,
    /// What perf counted.
    pub counts: Counts,
    /// Service form: CPU seconds of the server's process tree during the load.
    pub server_cpu_seconds: Option<f64>,
    /// The values of `Config::metrics`, in the same order.
    pub metrics: Vec<f64>,
    /// The `--expect-same` match (group 1), if a pattern was given.
    pub same: Option<String>,
    /// Mean `scaling_cur_freq` of the counted CPUs when the run started, if sysfs has it.
    pub mhz: Option<f64>,
    /// The server outlived SIGTERM.
    pub server_killed: bool,
}

/// One metric across the measured rounds.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Stable name for JSON: a metric's key or a service metric's name.
    pub key: String,
    /// Name in tables.
    pub label: String,
    /// Unit shown after the label: "s", "" (a count), "/M instr".
    pub unit: String,
    /// Which direction is an improvement.
    pub better: Better,
    /// A's value in each measured round.
    pub a: Vec<f64>,
    /// B's value in each measured round.
    pub b: Vec<f64>,
    /// Medians, the B/A ratio's interval and the verdict.
    pub comparison: Comparison,
}

/// The result of `hottext ab`: every metric's comparison, the checks, and every run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// `commands` or `service`.
    pub form: &'static str,
    /// Command or server A.
    pub a: String,
    /// Command or server B.
    pub b: String,
    /// Measured rounds.
    pub runs: usize,
    /// Warm-up rounds (dropped).
    pub warmup: usize,
    /// The server's CPU (service form).
    pub cpu: Option<u32>,
    /// Confidence level of the intervals (0.95).
    pub confidence: f64,
    /// 1-based ranks of the ratios that bound the intervals, and their exact coverage.
    pub interval_ranks: (usize, usize),
    /// Coverage of that interval: at least `confidence`, exact for any distribution.
    pub interval_coverage: f64,
    /// Whether instructions or cycles were counted.
    pub hardware_pmu: bool,
    /// The events counted and those this machine lacks.
    pub events: EventPlan,
    /// One row per metric every run has, in report order.
    pub rows: Vec<Row>,
    /// The row to judge by: the first service metric, else cycles, else CPU time, else wall time.
    pub headline: Option<String>,
    /// Distinct `--expect-same` matches and how many runs printed each; more than one is a
    /// failed check.
    pub same_outputs: BTreeMap<String, usize>,
    /// Noise and setup problems a reader should know about.
    pub warnings: Vec<String>,
    /// What could not be checked.
    pub notes: Vec<String>,
    /// Every run, warm-up included, in the order run.
    pub records: Vec<RunRecord>,
}

impl Report {
    /// Whether the runs printed different `--expect-same` text (a failed check).
    pub fn outputs_differ(&self) -> bool {
        self.same_outputs.len() > 1
    }

    /// The row of the metric with this key.
    pub fn row(&self, key: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.key == key)
    }
}

/// Progress: the run just finished, how many runs are done, and how many there are.
pub type Progress<'a> = dyn FnMut(&RunRecord, usize, usize) + 'a;

/// Runs the experiment.
pub fn run(
    config: &Config,
    plan: &EventPlan,
    cancel: &AtomicBool,
    progress: &mut Progress,
) -> Result<Report, MeasureError> {
    if config.runs < MIN_ROUNDS {
        return Err(MeasureError::TooFewRuns {
            runs: config.runs,
            needed: MIN_ROUNDS,
        });
    }
    let allowed: Vec<u32> = cpus::own()
        .map(|set| set.iter().collect())
        .map_err(|source| MeasureError::Io {
            what: "read this process's CPU affinity".into(),
            source,
        })?;
    let mut warnings = Vec::new();
    if let Some(service) = &config.service {
        if !allowed.contains(&service.cpu) {
            return Err(MeasureError::Cpu {
                cpu: service.cpu,
                allowed: format!("{allowed:?}"),
            });
        }
        if allowed.len() < 2 {
            warnings.push(format!(
                "only CPU {} is available: the load runs on the server's CPU and is counted with it",
                service.cpu
            ));
        }
    }

    warnings.extend(page_cache::level([&config.a, &config.b]));
    let scratch = super::scratch_dir()?;
    let runner = Runner {
        config,
        plan,
        allowed: &allowed,
        dir: scratch.path(),
        cancel,
    };
    let total = 2 * (config.warmup + config.runs);
    let mut records = Vec::with_capacity(total);
    let schedule = (0..config.warmup)
        .map(|r| (r, true))
        .chain((0..config.runs).map(|r| (r, false)));
    for (round, warmup) in schedule {
        let order = if round % 2 == 0 {
            [Side::A, Side::B]
        } else {
            [Side::B, Side::A]
        };
        for side in order {
            let record = runner.run_once(side, round, warmup)?;
            progress(&record, records.len() + 1, total);
            records.push(record);
        }
    }
    Ok(report(config, plan, records, warnings))
}

impl Row {
    pub(crate) fn label_with_unit(&self) -> String {
        match self.unit.as_str() {
            "" => self.label.clone(),
            u if u.starts_with('/') => format!("{} {u}", self.label),
            u => format!("{} ({u})", self.label),
        }
    }
}
