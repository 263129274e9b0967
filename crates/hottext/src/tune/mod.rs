//! `hottext tune`: the soft-SKU way (usku-soft-skus-slides.txt) for any service. Each knob's
//! alternatives are A/B-tested against its current setting with `ab`'s statistics, stopping a
//! comparison once it is significant or hopeless; the winners are combined and the combination
//! is confirmed by one more A/B. System-wide settings are put back afterwards ([`restore`]).

pub mod knobs;
pub mod restore;

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::measure::ab::{self, Config};
use crate::measure::events::EventPlan;
use crate::measure::stats::{self, Verdict};
use crate::measure::MeasureError;
use knobs::{command_line, files, Change, Knob, Setting};
use restore::{Lock, Recovered, Restore};

/// What to tune and how hard to try.
pub struct Plan {
    /// `ab`'s set-up: the command (or server) is `command`; `a`, `b` and `runs` are set here.
    pub ab: Config,
    /// The command (or server) every trial runs on both sides (`sh -c`).
    pub command: String,
    /// The knobs to try, in order.
    pub knobs: Vec<Knob>,
    /// Rounds of a first comparison; doubled while it is inconclusive, up to `max_runs`.
    pub min_runs: usize,
    /// The most rounds one comparison may take.
    pub max_runs: usize,
    /// An effect smaller than this (0.02: 2 %) is not worth having: an interval inside
    /// 1 ± min_effect ends a comparison as hopeless.
    pub min_effect: f64,
    /// No knob's comparison starts after this long; the confirmation of the winners found by
    /// then still runs, since a configuration is applied only once confirmed.
    pub budget: Duration,
    /// Where the restore file and the lock live, so that a crashed run's settings are put back.
    pub state_dir: PathBuf,
}

/// One comparison: a knob's setting against its current one.
#[derive(Debug, Clone, Serialize)]
pub struct Trial {
    /// The knob's name (`all` for the confirmation).
    pub knob: String,
    /// The setting tried, as `tune --help` names it.
    pub setting: String,
    /// B/A of the headline figure and its interval.
    pub ratio: Option<(f64, f64, f64)>,
    /// What the comparison concluded for the headline figure.
    pub verdict: Verdict,
    /// Rounds run.
    pub runs: usize,
    /// Why it stopped: `significant`, `hopeless`, `max-runs` or `budget`.
    pub stopped: &'static str,
}

/// The result of `hottext tune`: every comparison, the winners, and what to apply.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The figure judged by (the headline of `ab`).
    pub metric: String,
    /// Every knob's comparison, in the order run.
    pub trials: Vec<Trial>,
    /// Knobs not available here, and why.
    pub unavailable: Vec<(String, String)>,
    /// The winning setting of each knob that had one.
    pub winners: Vec<(String, Setting)>,
    /// All winners together against everything as it was.
    pub confirmation: Option<Trial>,
    /// The configuration to apply, one line each (environment, sysfs, command prefix): the
    /// winners, once the confirmation found them better together; empty otherwise.
    pub apply: Vec<String>,
    /// Settings a crashed run had left changed, put back at the start.
    pub recovered: Vec<(PathBuf, String)>,
    /// Settings that run had changed whose files are gone since.
    pub recovered_gone: Vec<PathBuf>,
}

/// Why tuning could not run or finish.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// A comparison failed.
    #[error(transparent)]
    Measure(#[from] MeasureError),
    /// The record of changed settings could not be written, so no setting is changed.
    #[error("cannot keep the restore file in {dir}: {source}")]
    Restore {
        /// The state directory.
        dir: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// Another run holds a lock this one needs (the message says which).
    #[error("{0}")]
    Busy(std::io::Error),
    /// A knob would change a system setting, and there is no state directory to record it in.
    #[error("the knobs change system settings ({files}), which needs the state directory {dir}: run as root, or give --state-dir DIR")]
    NoStateDir {
        /// The state directory that could not be used.
        dir: PathBuf,
        /// The files the knobs would write, comma-separated.
        files: String,
    },
}

/// Tunes; `progress` hears each comparison as it starts. `lock` is the state directory's,
/// held since before the knobs read their current settings (after [`Restore::recover`] put
/// back a crashed run's); without it no knob may change a system setting.
pub fn tune(
    plan: &Plan,
    lock: Option<&Lock>,
    recovered: Recovered,
    events: &EventPlan,
    cancel: &AtomicBool,
    progress: &mut dyn FnMut(&str),
) -> Result<Report, TuneError> {
    let restore_err = |source: std::io::Error| match source.kind() {
        std::io::ErrorKind::WouldBlock => TuneError::Busy(source),
        _ => TuneError::Restore {
            dir: plan.state_dir.clone(),
            source,
        },
    };
    let settings = plan
        .knobs
        .iter()
        .filter(|k| k.unavailable.is_none())
        .flat_map(|k| std::iter::once(&k.current).chain(&k.alternatives));
    let touched = files(settings);
    let touched: Vec<&std::path::Path> = touched.iter().map(PathBuf::as_path).collect();
    let restore = match lock {
        _ if touched.is_empty() => None,
        Some(lock) => Some(Restore::save(&plan.state_dir, lock, &touched).map_err(restore_err)?),
        None => {
            return Err(TuneError::NoStateDir {
                dir: plan.state_dir.clone(),
                files: touched
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
        }
    };
    let started = Instant::now();
    let mut report = Report {
        metric: String::new(),
        trials: Vec::new(),
        unavailable: Vec::new(),
        winners: Vec::new(),
        confirmation: None,
        apply: Vec::new(),
        recovered: recovered.put_back,
        recovered_gone: recovered.gone,
    };
    for knob in &plan.knobs {
        if let Some(why) = &knob.unavailable {
            report.unavailable.push((knob.name.clone(), why.clone()));
            continue;
        }
        let mut best: Option<(f64, &Setting)> = None;
        for alt in &knob.alternatives {
            if started.elapsed() >= plan.budget {
                report.unavailable.push((
                    knob.name.clone(),
                    format!("{}: not tried, the budget ran out", alt.label),
                ));
                continue;
            }
            progress(&format!(
                "{}: {} against {}",
                knob.name, alt.label, knob.current.label
            ));
            let a = command_line(&plan.command, &[&knob.current]);
            let b = command_line(&plan.command, &[alt]);
            let (trial, metric) =
                compare(plan, events, cancel, started, &knob.name, &alt.label, a, b)?;
            report.metric = metric;
            if trial.verdict == Verdict::BBetter {
                let gain = trial.ratio.map_or(0.0, |r| (r.0 - 1.0).abs());
                if best.is_none_or(|(g, _)| gain > g) {
                    best = Some((gain, alt));
                }
            }
            report.trials.push(trial);
        }
        if let Some((_, winner)) = best {
            report.winners.push((knob.name.clone(), winner.clone()));
        }
    }
    if !report.winners.is_empty() {
        let currents: Vec<&Setting> = plan
            .knobs
            .iter()
            .filter(|k| report.winners.iter().any(|(n, _)| *n == k.name))
            .map(|k| &k.current)
            .collect();
        let chosen: Vec<&Setting> = report.winners.iter().map(|(_, s)| s).collect();
        progress("all winners together against everything as it was");
        let a = command_line(&plan.command, &currents);
        let b = command_line(&plan.command, &chosen);
        let confirmation = compare(plan, events, cancel, started, "all", "winners", a, b)?.0;
        if confirmation.verdict == Verdict::BBetter {
            report.apply = chosen
                .iter()
                .flat_map(|s| &s.changes)
                .map(apply_line)
                .collect();
        }
        report.confirmation = Some(confirmation);
    }
    if let Some(restore) = restore {
        restore.finish().map_err(restore_err)?;
    }
    Ok(report)
}

/// How to apply one change for good.
fn apply_line(change: &Change) -> String {
    match change {
        Change::Env { name, value } => format!("environment: {name}={value}"),
        Change::Sysfs { path, value } => format!("echo {value} > {}", path.display()),
        Change::Prefix { words } => format!("run the service under: {}", words.join(" ")),
        Change::Command { command } => format!("run: {command}"),
        Change::Before { script } => format!("before each start: {script}"),
    }
}

/// A/B of `a` against `b`: `min_runs` rounds, doubled while inconclusive (see [`Plan`]);
/// each doubling adds rounds to those already run.
#[allow(clippy::too_many_arguments)]
fn compare(
    plan: &Plan,
    events: &EventPlan,
    cancel: &AtomicBool,
    started: Instant,
    knob: &str,
    setting: &str,
    a: (String, String),
    b: (String, String),
) -> Result<(Trial, String), TuneError> {
    let (mut runs, mut more) = (0, plan.min_runs);
    let (mut values_a, mut values_b) = (Vec::new(), Vec::new());
    loop {
        let config = Config {
            a: a.1.clone(),
            b: b.1.clone(),
            setup: [a.0.clone(), b.0.clone()],
            runs: more,
            ..plan.ab.clone()
        };
        let report = ab::run(&config, events, cancel, &mut |_, _, _| {})?;
        runs += more;
        let key = report.headline.clone().unwrap_or_default();
        let row = report.row(&key);
        let comparison = row.and_then(|r| {
            values_a.extend_from_slice(&r.a);
            values_b.extend_from_slice(&r.b);
            stats::compare(&values_a, &values_b, r.better)
        });
        let ratio = comparison
            .as_ref()
            .and_then(|c| c.ratio.as_ref())
            .map(|r| (r.median, r.low, r.high));
        let verdict = comparison.map_or(Verdict::Undetermined, |c| c.verdict);
        let hopeless = ratio
            .is_some_and(|(_, lo, hi)| lo >= 1.0 - plan.min_effect && hi <= 1.0 + plan.min_effect);
        let stopped = match verdict {
            Verdict::BBetter | Verdict::BWorse => Some("significant"),
            _ if hopeless => Some("hopeless"),
            _ if runs * 2 > plan.max_runs => Some("max-runs"),
            _ if started.elapsed() >= plan.budget => Some("budget"),
            _ => None,
        };
        if let Some(stopped) = stopped {
            let label = row.map_or(key, |r| r.label.clone());
            let trial = Trial {
                knob: knob.into(),
                setting: setting.into(),
                ratio,
                verdict,
                runs,
                stopped,
            };
            return Ok((trial, label));
        }
        more = runs;
    }
}
