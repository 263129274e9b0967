//! A/B runs: A and B interleaved, counted the same way, compared round by round.
//!
//! Steps:
//! 1. Warm-up rounds (page cache, CPU frequency, the server's own caches) whose figures are
//!    dropped.
//! 2. `runs` rounds, A then B in even rounds and B then A in odd ones, so that neither side
//!    always runs second.
//! 3. Each run is counted by `perf stat`: a command and its children (`sh -c CMD`), or, for a
//!    service, everything on the CPU the server is pinned to while the load command runs
//!    (`-a -C N`). The server's CPU time comes from `/proc`; the service metrics from the
//!    command's (or the load's) output.
//! 4. Every metric present in every run is compared with [`stats::compare`]: medians of A and
//!    B, the median of the per-round B/A ratios and its 95 % interval, and a verdict.
//! 5. Noise checks: intervals wider than ±5 %, counters that were multiplexed, CPU frequency
//!    that moved (sysfs `scaling_cur_freq`, or cycles per task-clock second).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

pub use regex::Regex;
use serde::Serialize;

use super::counts::{Counts, METRICS};
use super::events::{Counter, EventPlan};
use super::perf_stat::{self, Scope};
use super::run::{run_captured, Captured, ExitFile};
use super::server::Server;
use super::stats::{self, Better, Comparison, MIN_ROUNDS};
use super::MeasureError;
use crate::os::cpus::{self, CpuSet};

/// An interval wider than this (half-width relative to the median) is called noisy.
pub const NOISY_HALF_WIDTH: f64 = 0.05;
/// Frequency (or cycles per CPU-second) that moves by more than this between runs is reported.
pub const FREQUENCY_DRIFT: f64 = 0.05;
/// Instructions of a pure layout change are exact; a median ratio further than this from 1
/// means A and B do different work.
pub const INSTRUCTIONS_TOLERANCE: f64 = 0.001;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Side {
    A,
    B,
}

/// The service form: each run starts the side's server, loads it, stops it.
#[derive(Debug, Clone)]
pub struct Service {
    /// Exits 0 once the server answers; run with `sh -c` every 100 ms.
    pub ready: String,
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
    pub pattern: Regex,
    pub name: String,
    pub better: Better,
}

#[derive(Debug, Clone)]
pub struct Config {
    /// Commands, or with `service` the servers' commands (all run with `sh -c`).
    pub a: String,
    pub b: String,
    pub runs: usize,
    pub warmup: usize,
    pub service: Option<Service>,
    /// Numbers the runs print (throughput, latency percentiles), in report order; the first
    /// is the headline. Names are unique.
    pub metrics: Vec<ServiceMetric>,
    /// Every run's match (group 1) must be the same text, e.g. a checksum.
    pub expect_same: Option<Regex>,
}

impl Config {
    fn command(&self, side: Side) -> &str {
        match side {
            Side::A => &self.a,
            Side::B => &self.b,
        }
    }
}

/// One run of one side.
#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    /// 0-based; warm-up rounds are numbered separately.
    pub round: usize,
    pub warmup: bool,
    pub side: Side,
    pub counts: Counts,
    /// Service form: CPU seconds of the server's process tree during the load.
    pub server_cpu_seconds: Option<f64>,
    /// The values of `Config::metrics`, in the same order.
    pub metrics: Vec<f64>,
    pub same: Option<String>,
    /// Mean `scaling_cur_freq` of the counted CPUs when the run started, if sysfs has it.
    pub mhz: Option<f64>,
    /// The server outlived SIGTERM.
    pub server_killed: bool,
}

/// One metric across the measured rounds.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub key: String,
    pub label: String,
    pub unit: String,
    pub better: Better,
    pub a: Vec<f64>,
    pub b: Vec<f64>,
    pub comparison: Comparison,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub form: &'static str,
    pub a: String,
    pub b: String,
    pub runs: usize,
    pub warmup: usize,
    pub cpu: Option<u32>,
    pub confidence: f64,
    /// 1-based ranks of the ratios that bound the intervals, and their exact coverage.
    pub interval_ranks: (usize, usize),
    pub interval_coverage: f64,
    pub hardware_pmu: bool,
    pub events: EventPlan,
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
    pub records: Vec<RunRecord>,
}

impl Report {
    pub fn outputs_differ(&self) -> bool {
        self.same_outputs.len() > 1
    }

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

/// What every run needs.
struct Runner<'a> {
    config: &'a Config,
    plan: &'a EventPlan,
    /// The CPUs this process may use.
    allowed: &'a [u32],
    /// perf's output files and the servers' logs.
    dir: &'a Path,
    cancel: &'a AtomicBool,
}

/// One run's identity, for file names and messages.
struct RunId {
    side: Side,
    /// `round3-A`
    file: String,
    /// `round 3`, `warm-up round 1`
    label: String,
}

impl Runner<'_> {
    fn run_once(&self, side: Side, round: usize, warmup: bool) -> Result<RunRecord, MeasureError> {
        let (file, label) = match warmup {
            true => ("warmup", "warm-up round"),
            false => ("round", "round"),
        };
        let id = RunId {
            side,
            file: format!("{file}{}-{side:?}", round + 1),
            label: format!("{label} {}", round + 1),
        };
        let mut record = RunRecord {
            round,
            warmup,
            side,
            counts: Counts::default(),
            server_cpu_seconds: None,
            metrics: Vec::new(),
            same: None,
            mhz: None,
            server_killed: false,
        };
        let captured = match &self.config.service {
            None => self.run_command(&id, &mut record)?,
            Some(service) => self.run_service(service, &id, &mut record)?,
        };
        self.read_output(&id, &captured, &mut record)?;
        Ok(record)
    }

    /// `perf stat -- sh -c CMD`: the command's process tree.
    fn run_command(&self, id: &RunId, record: &mut RunRecord) -> Result<Captured, MeasureError> {
        record.mhz = mean_mhz(self.allowed);
        let scope = Scope::Command;
        let output = perf_stat::output_path(self.dir, &id.file);
        let exit = ExitFile::new(self.dir, &id.file);
        let script = exit.wrap_script(self.config.command(id.side));
        let cmd = perf_stat::command(
            &self.plan.events(scope),
            scope,
            &output,
            &["sh", "-c", &script],
        );
        let what = format!("perf stat for {:?}", id.side);
        let captured = run_captured(cmd, &what, None, self.cancel)?;
        let what = format!("command {:?}", id.side);
        let readings = finish(&captured, &output, &exit, &what, &id.label)?;
        record.counts = Counts::from_readings(&self.plan.counters(scope), &readings);
        Ok(captured)
    }

    /// Start the server pinned to its CPU, wait until it is ready, count that CPU while the
    /// load runs on the others, stop the server.
    fn run_service(
        &self,
        service: &Service,
        id: &RunId,
        record: &mut RunRecord,
    ) -> Result<Captured, MeasureError> {
        let log = self.dir.join(format!("{}-server.log", id.file));
        let side = format!("{:?}", id.side);
        let mut server = Server::start(&side, self.config.command(id.side), &[], service.cpu, log)?;
        server.wait_ready(&service.ready, service.ready_timeout, self.cancel)?;
        record.mhz = mean_mhz(&[service.cpu]);
        let scope = Scope::Cpu(service.cpu);
        let output = perf_stat::output_path(self.dir, &id.file);
        let exit = ExitFile::new(self.dir, &id.file);
        let load = exit.wrap_script(&service.load);
        let mut cmd = perf_stat::command(
            &self.plan.events(scope),
            scope,
            &output,
            &["sh", "-c", &load],
        );
        service.pin_load(&mut cmd, self.allowed);
        let cpu_before = server.cpu_seconds();
        let captured = run_captured(cmd, "perf stat for the load", None, self.cancel)?;
        let cpu_after = server.cpu_seconds();
        server.check_running()?;
        let what = format!("the load against server {side}");
        let readings = finish(&captured, &output, &exit, &what, &id.label)?;
        record.counts = Counts::from_readings(&self.plan.counters(scope), &readings);
        record.server_cpu_seconds = Some((cpu_after - cpu_before).max(0.0));
        record.server_killed = server.stop(service.stop_timeout).forced;
        Ok(captured)
    }

    /// The --metric and --expect-same matches in what the command (or load) printed.
    fn read_output(
        &self,
        id: &RunId,
        captured: &Captured,
        record: &mut RunRecord,
    ) -> Result<(), MeasureError> {
        let no_match = |option: &'static str, pattern: &Regex| MeasureError::NoMatch {
            side: format!("{:?}", id.side),
            run: id.label.clone(),
            option,
            pattern: pattern.as_str().to_string(),
            output: format!("{}{}", captured.stdout, captured.stderr),
        };
        for metric in &self.config.metrics {
            let text = capture(&metric.pattern, captured)
                .ok_or_else(|| no_match("--metric", &metric.pattern))?;
            let value = text
                .trim()
                .parse::<f64>()
                .map_err(|_| MeasureError::MetricNotNumber {
                    side: format!("{:?}", id.side),
                    run: id.label.clone(),
                    text: text.clone(),
                })?;
            record.metrics.push(value);
        }
        if let Some(pattern) = &self.config.expect_same {
            let text =
                capture(pattern, captured).ok_or_else(|| no_match("--expect-same", pattern))?;
            record.same = Some(text);
        }
        Ok(())
    }
}

/// Checks how a counted run ended and reads perf's counts.
fn finish(
    captured: &Captured,
    output: &Path,
    exit: &ExitFile,
    what: &str,
    run: &str,
) -> Result<Vec<perf_stat::Reading>, MeasureError> {
    let Some(status) = captured.status else {
        return Err(MeasureError::Interrupted);
    };
    // Without counts it is perf's own failure.
    let readings = super::run::read_counts(output, status, &captured.stderr)?;
    let failed = match exit.read() {
        Some(0) => None,
        Some(code) => Some(format!("exit status {code}")),
        None if status.success() => None,
        None => Some(status.to_string()),
    };
    if let Some(status) = failed {
        return Err(MeasureError::CommandFailed {
            side: what.to_string(),
            run: run.to_string(),
            status,
            stderr: captured.stderr.clone(),
        });
    }
    Ok(readings)
}

/// Group 1 of the first match in stdout, else in stderr (the whole match without a group).
fn capture(pattern: &Regex, captured: &Captured) -> Option<String> {
    [&captured.stdout, &captured.stderr]
        .iter()
        .find_map(|text| {
            let caps = pattern.captures(text)?;
            caps.get(1)
                .or_else(|| caps.get(0))
                .map(|m| m.as_str().to_string())
        })
}

/// The mean of `scaling_cur_freq` over `cpus`, in MHz; None without cpufreq (most VMs).
fn mean_mhz(cpus: &[u32]) -> Option<f64> {
    let khz: Vec<f64> = cpus
        .iter()
        .filter_map(|cpu| {
            std::fs::read_to_string(format!(
                "/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq"
            ))
            .ok()?
            .trim()
            .parse()
            .ok()
        })
        .collect();
    (!khz.is_empty()).then(|| khz.iter().sum::<f64>() / khz.len() as f64 / 1000.0)
}

fn report(
    config: &Config,
    plan: &EventPlan,
    records: Vec<RunRecord>,
    mut warnings: Vec<String>,
) -> Report {
    let measured: Vec<&RunRecord> = records.iter().filter(|r| !r.warmup).collect();
    let side = |s: Side| -> Vec<&RunRecord> {
        let mut v: Vec<&RunRecord> = measured.iter().copied().filter(|r| r.side == s).collect();
        v.sort_by_key(|r| r.round);
        v
    };
    let (a, b) = (side(Side::A), side(Side::B));
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    let mut add = |key: &str,
                   label: &str,
                   unit: &str,
                   better: Better,
                   get: &dyn Fn(&RunRecord) -> Option<f64>| {
        let va: Option<Vec<f64>> = a.iter().map(|r| get(r)).collect();
        let vb: Option<Vec<f64>> = b.iter().map(|r| get(r)).collect();
        match (va, vb) {
            (Some(va), Some(vb)) => {
                if let Some(comparison) = stats::compare(&va, &vb, better) {
                    rows.push(Row {
                        key: key.to_string(),
                        label: label.to_string(),
                        unit: unit.to_string(),
                        better,
                        a: va,
                        b: vb,
                        comparison,
                    });
                }
            }
            _ if a.iter().chain(&b).any(|r| get(r).is_some()) => {
                notes.push(format!("{label} was not counted in every run: left out"));
            }
            _ => {}
        }
    };
    for (i, m) in config.metrics.iter().enumerate() {
        add(&m.name, &m.name, "", m.better, &|r| {
            r.metrics.get(i).copied()
        });
    }
    for m in METRICS {
        add(m.key, m.label, m.unit, m.better, &|r| (m.value)(&r.counts));
    }
    if config.service.is_some() {
        add(
            SERVER_CPU_TIME,
            "server CPU time",
            "s",
            Better::Lower,
            &|r| r.server_cpu_seconds,
        );
    }

    // Noise: wide intervals.
    let wide: Vec<String> = rows
        .iter()
        .filter_map(|r| {
            let ratio = r.comparison.ratio?;
            let w = ratio.relative_half_width();
            (w > NOISY_HALF_WIDTH && r.better != Better::Neither)
                .then(|| format!("{} ±{:.1} %", r.label_with_unit(), 100.0 * w))
        })
        .collect();
    if !wide.is_empty() {
        warnings.push(format!(
            "noisy: intervals wider than ±{:.0} %: {}; run more rounds, on a quieter machine",
            100.0 * NOISY_HALF_WIDTH,
            wide.join(", ")
        ));
    }
    // Noise: multiplexed counters.
    let mut multiplexed: BTreeMap<&str, (usize, f64)> = BTreeMap::new();
    for r in &measured {
        for m in &r.counts.multiplexed {
            let e = multiplexed.entry(m.event.as_str()).or_insert((0, 1.0));
            e.0 += 1;
            e.1 = e.1.min(m.enabled_fraction);
        }
    }
    if !multiplexed.is_empty() {
        let list: Vec<String> = multiplexed
            .iter()
            .map(|(e, (n, share))| {
                format!(
                    "{e} in {n} runs (down to {:.0} % of the time)",
                    100.0 * share
                )
            })
            .collect();
        warnings.push(format!(
            "counters were multiplexed, so those counts are scaled estimates: {}; \
             count fewer events, or free the counter the NMI watchdog holds \
             (sysctl kernel.nmi_watchdog=0)",
            list.join(", ")
        ));
    }
    // Noise: CPU frequency.
    let mhz: Vec<f64> = measured.iter().filter_map(|r| r.mhz).collect();
    let ghz: Vec<f64> = measured
        .iter()
        .filter_map(|r| {
            let cycles = r.counts.get(Counter::Cycles)?;
            let time = r.counts.get(Counter::TaskClock)?;
            (time > 0.0).then(|| cycles / time / 1e9)
        })
        .collect();
    let mut checked = false;
    if let Some(spread) = spread(&mhz) {
        checked = true;
        if spread.2 > FREQUENCY_DRIFT {
            warnings.push(format!(
                "CPU frequency moved between runs: scaling_cur_freq {:.0}–{:.0} MHz; fix it \
                 (cpupower frequency-set -g performance) or expect noise",
                spread.0, spread.1
            ));
        }
    }
    if let Some(spread) = spread(&ghz) {
        checked = true;
        if spread.2 > FREQUENCY_DRIFT {
            warnings.push(format!(
                "cycles per CPU-second drifted between runs: {:.2}–{:.2} GHz (frequency \
                 scaling or turbo); compare cycles, not time",
                spread.0, spread.1
            ));
        }
    }
    if !checked {
        notes.push(
            "CPU frequency not checked: no cpufreq in sysfs and no cycles counter".to_string(),
        );
    }
    if !plan.has_hardware_pmu() {
        notes.push(
            "no hardware PMU: instructions/cycles/iTLB not available; comparing time only"
                .to_string(),
        );
    }
    // The protocol's check: a pure layout change runs the same instructions.
    if let Some(r) = rows.iter().find(|r| r.key == "instructions") {
        if let Some(ratio) = r.comparison.ratio {
            if (ratio.median - 1.0).abs() > INSTRUCTIONS_TOLERANCE {
                warnings.push(format!(
                    "instructions differ by {:+.2} %: A and B do not do the same work (not a \
                     pure layout change, or the workload varies); judge by cycles per unit of work",
                    100.0 * (ratio.median - 1.0)
                ));
            }
        }
    }
    let killed = measured.iter().filter(|r| r.server_killed).count();
    if killed > 0 {
        warnings.push(format!(
            "{killed} server runs outlived SIGTERM and were killed with SIGKILL"
        ));
    }

    let headline = config
        .metrics
        .first()
        .map(|m| m.name.as_str())
        .into_iter()
        .chain(["cycles", SERVER_CPU_TIME, "task-clock", "wall-time"])
        .find(|k| rows.iter().any(|r| r.key == *k))
        .map(str::to_string);
    let mut same_outputs = BTreeMap::new();
    for r in &records {
        if let Some(s) = &r.same {
            *same_outputs.entry(s.clone()).or_insert(0) += 1;
        }
    }
    let (lo, hi, coverage) =
        stats::median_ranks(config.runs, stats::CONFIDENCE).unwrap_or((1, config.runs, 0.0));
    Report {
        form: if config.service.is_some() {
            "service"
        } else {
            "commands"
        },
        a: config.a.clone(),
        b: config.b.clone(),
        runs: config.runs,
        warmup: config.warmup,
        cpu: config.service.as_ref().map(|s| s.cpu),
        confidence: stats::CONFIDENCE,
        interval_ranks: (lo, hi),
        interval_coverage: coverage,
        hardware_pmu: plan.has_hardware_pmu(),
        events: plan.clone(),
        rows,
        headline,
        same_outputs,
        warnings,
        notes,
        records,
    }
}

impl Row {
    pub fn label_with_unit(&self) -> String {
        match self.unit.as_str() {
            "" => self.label.clone(),
            u if u.starts_with('/') => format!("{} {u}", self.label),
            u => format!("{} ({u})", self.label),
        }
    }
}

/// (min, max, max/min − 1) of positive values; None for fewer than two.
fn spread(values: &[f64]) -> Option<(f64, f64, f64)> {
    if values.len() < 2 {
        return None;
    }
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(0.0, f64::max);
    (min > 0.0).then(|| (min, max, max / min - 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_prefers_group_one_and_stdout() {
        let c = Captured {
            status: None,
            stdout: "requests: 10\nchecksum: 00ff\n".into(),
            stderr: "tps=123.5\n".into(),
        };
        let re = |p| Regex::new(p).unwrap();
        assert_eq!(
            capture(&re("checksum: ([0-9a-f]+)"), &c).as_deref(),
            Some("00ff")
        );
        assert_eq!(capture(&re("tps=([0-9.]+)"), &c).as_deref(), Some("123.5"));
        assert_eq!(
            capture(&re("requests: [0-9]+"), &c).as_deref(),
            Some("requests: 10")
        );
        assert_eq!(capture(&re("nothing"), &c), None);
    }

    #[test]
    fn spread_of_frequencies() {
        assert_eq!(spread(&[1.0]), None);
        let (lo, hi, s) = spread(&[2000.0, 2100.0, 2050.0]).unwrap();
        assert_eq!((lo, hi), (2000.0, 2100.0));
        assert!((s - 0.05).abs() < 1e-12);
    }
}
