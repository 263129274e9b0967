//! `ab --simulate`: A and B under the cache models, at one or more start offsets of the hot
//! range, with each figure's spread over the offsets and a verdict.
//!
//! Simulated counts are deterministic (valgrind loads a program at the same addresses every
//! time), so repeating a run measures nothing; what does vary is set-conflict luck. Where an
//! L1i line maps depends on the code's address modulo 4 KiB, so moving the hot range by a
//! multiple of 64 B against the rest of the code (the cold text, the shared libraries) changes
//! which lines collide. A layout's systematic effect holds at every offset; luck does not. The
//! commands name the offset as `{offset}` (e.g. a binary linked with
//! `hottext order --hot-offset N`), and each offset is one round.
//!
//! Verdict: B better (worse) when B/A is below (above) 1 by more than [`SIMULATION_TOLERANCE`]
//! at every offset; otherwise no significant difference.

use std::sync::atomic::AtomicBool;

use std::collections::BTreeMap;

use serde::Serialize;

pub use super::config::{SimConfig, SimRecord};
use super::jobs;
use super::{Model, ModelCounts, Simulated};
use crate::measure::ab::Side;
use crate::measure::stats::{median, Verdict};
use crate::measure::MeasureError;

/// How far from 1 every offset's B/A must be for a verdict: simulated counts are exact, but a
/// server's background work (timers, housekeeping) differs slightly from run to run.
pub const SIMULATION_TOLERANCE: f64 = 0.01;

/// Miss rates below this many per million instructions on both sides are noise (a server's
/// background work, a baseline that happened to miss more than its run): no verdict.
pub(crate) const NEGLIGIBLE_PER_MILLION: f64 = 1.0;

/// The unit of the miss rates.
const PER_MILLION: &str = "per M instr";

/// A value's median and range over the offsets.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    /// The median.
    pub median: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
}

impl Spread {
    fn of(values: &[f64]) -> Option<Spread> {
        Some(Spread {
            median: median(values)?,
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }
}

/// One figure compared.
#[derive(Debug, Clone, Serialize)]
pub struct SimRow {
    /// Stable name for JSON.
    pub key: String,
    /// Name in tables.
    pub label: String,
    /// Unit shown after the label (`per M instr`, or empty for a count).
    pub unit: &'static str,
    /// A's value over the offsets.
    pub a: Spread,
    /// B's value over the offsets.
    pub b: Spread,
    /// B/A at each offset, summarised.
    pub ratio: Option<Spread>,
    /// B better or worse only when every offset agrees (see the module's verdict rule).
    pub verdict: Verdict,
}

/// The result of a simulated comparison: every figure's spread and verdict, and every run.
#[derive(Debug, Clone, Serialize)]
pub struct SimReport {
    /// The structures simulated.
    pub models: Vec<Model>,
    /// The hot-range start offsets, one round each.
    pub offsets: Vec<u64>,
    /// Whether baselines were subtracted, so the figures leave out start-up.
    pub startup_cancelled: bool,
    /// One row per figure, in report order.
    pub rows: Vec<SimRow>,
    /// With --expect-same: each text the measured runs printed, and in how many runs.
    pub same_outputs: BTreeMap<String, usize>,
    /// Every simulated side at every offset, in the order run.
    pub records: Vec<SimRecord>,
}

impl SimReport {
    /// Whether the runs printed different `--expect-same` text (a failed check).
    pub fn outputs_differ(&self) -> bool {
        self.same_outputs.len() > 1
    }
}

/// Called after each simulated side: (record, done, total).
pub(crate) type SimProgress<'a> = dyn FnMut(&SimRecord, usize, usize) + 'a;

/// Runs A and B at every offset (A first at even offsets, B first at odd ones), up to
/// `config.jobs` at once.
pub fn run(
    config: &SimConfig,
    models: &[Model],
    cancel: &AtomicBool,
    progress: &mut SimProgress,
) -> Result<SimReport, MeasureError> {
    let scratch = crate::measure::scratch_dir()?;
    let jobs = jobs::jobs(&config.offsets);
    let total = jobs.len();
    let records = jobs::run_all(
        config,
        models,
        &jobs,
        scratch.path(),
        cancel,
        &mut |record, done| progress(record, done, total),
    )?;
    Ok(report(config, models, records))
}

fn report(config: &SimConfig, models: &[Model], records: Vec<SimRecord>) -> SimReport {
    let values = |side: Side, figure: &dyn Fn(&Simulated) -> f64| -> Vec<f64> {
        config
            .offsets
            .iter()
            .filter_map(|&offset| {
                records
                    .iter()
                    .find(|r| r.side == side && r.offset == offset)
                    .map(|r| figure(&r.simulated))
            })
            .collect()
    };
    let mut rows = Vec::new();
    let mut add =
        |key: String, label: String, unit: &'static str, figure: &dyn Fn(&Simulated) -> f64| {
            let (a, b) = (values(Side::A, figure), values(Side::B, figure));
            let ratios: Option<Vec<f64>> = a
                .iter()
                .zip(&b)
                .map(|(a, b)| match (*a, *b) {
                    (0.0, 0.0) => Some(1.0),
                    (a, b) => (a > 0.0).then(|| b / a),
                })
                .collect();
            let ratio = ratios.as_deref().and_then(Spread::of);
            if let (Some(a), Some(b)) = (Spread::of(&a), Spread::of(&b)) {
                let negligible = unit == PER_MILLION && a.max.max(b.max) < NEGLIGIBLE_PER_MILLION;
                rows.push(SimRow {
                    key,
                    label,
                    unit,
                    a,
                    b,
                    ratio,
                    verdict: if negligible {
                        Verdict::NoSignificantDifference
                    } else {
                        verdict(ratio)
                    },
                });
            }
        };
    // Every model's run counts the instructions; the i-cache run's (the last) stands for them.
    let last = models.len().saturating_sub(1);
    add(
        "instructions".into(),
        "instructions (exact)".into(),
        "",
        &|s| s.models.get(last).map_or(0.0, |m| m.instructions as f64),
    );
    for (i, model) in models.iter().enumerate() {
        add(
            format!("{}-misses-per-m", model.key),
            format!("{} misses", model.label),
            PER_MILLION,
            &|s| {
                s.models
                    .get(i)
                    .map_or(0.0, |m| m.per_million_instructions())
            },
        );
    }
    if config.checks.work.is_some() {
        let name = &config.work_name;
        let per_work = |figure: fn(&ModelCounts) -> u64, i: usize| {
            move |s: &Simulated| {
                s.models
                    .get(i)
                    .and_then(|m| Some(figure(m) as f64 / m.work?))
                    .unwrap_or(0.0)
            }
        };
        add(
            format!("instructions-per-{name}"),
            format!("instructions per {name}"),
            "",
            &per_work(|m| m.instructions, last),
        );
        for (i, model) in models.iter().enumerate() {
            add(
                format!("{}-misses-per-{name}", model.key),
                format!("{} misses per {name}", model.label),
                "",
                &per_work(|m| m.misses, i),
            );
        }
        // The same misses per unit of work are as negligible as their rate per instruction:
        // one set of counts must not get a verdict in one row and none in the other.
        for i in 0..rows.len() {
            let Some(model) = rows[i]
                .key
                .strip_suffix(&format!("-misses-per-{name}"))
                .map(str::to_owned)
            else {
                continue;
            };
            let per_million = format!("{model}-misses-per-m");
            let negligible = rows
                .iter()
                .any(|r| r.key == per_million && r.a.max.max(r.b.max) < NEGLIGIBLE_PER_MILLION);
            if negligible {
                rows[i].verdict = Verdict::NoSignificantDifference;
            }
        }
    }
    let mut same_outputs = BTreeMap::new();
    for text in records
        .iter()
        .flat_map(|r| &r.simulated.models)
        .filter_map(|m| m.same.clone())
    {
        *same_outputs.entry(text).or_insert(0) += 1;
    }
    SimReport {
        models: models.to_vec(),
        same_outputs,
        offsets: config.offsets.clone(),
        startup_cancelled: records.iter().all(|r| r.simulated.startup_cancelled),
        rows,
        records,
    }
}

/// Lower is better for every simulated figure.
fn verdict(ratio: Option<Spread>) -> Verdict {
    match ratio {
        None => Verdict::Undetermined,
        Some(r) if r.max < 1.0 - SIMULATION_TOLERANCE => Verdict::BBetter,
        Some(r) if r.min > 1.0 + SIMULATION_TOLERANCE => Verdict::BWorse,
        Some(_) => Verdict::NoSignificantDifference,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::simulate::Checks;

    fn spread(min: f64, max: f64) -> Option<Spread> {
        Some(Spread {
            median: (min + max) / 2.0,
            min,
            max,
        })
    }

    #[test]
    fn a_verdict_needs_every_offset_on_the_same_side_of_one() {
        assert_eq!(verdict(spread(0.80, 0.95)), Verdict::BBetter);
        assert_eq!(verdict(spread(1.05, 1.30)), Verdict::BWorse);
        // Better at one offset, worse at another: luck, not layout.
        assert_eq!(
            verdict(spread(0.90, 1.10)),
            Verdict::NoSignificantDifference
        );
        assert_eq!(
            verdict(spread(0.995, 0.999)),
            Verdict::NoSignificantDifference
        );
        assert_eq!(verdict(None), Verdict::Undetermined);
    }

    #[test]
    fn rates_near_zero_on_both_sides_get_no_verdict() {
        let side = |side, misses| SimRecord {
            offset: 0,
            side,
            simulated: Simulated {
                models: vec![super::super::ModelCounts {
                    key: "itlb-l2",
                    instructions: 10_000_000,
                    misses,
                    processes: 1,
                    work: None,
                    same: None,
                }],
                startup_cancelled: true,
                hot_ranges: Default::default(),
            },
        };
        let config = SimConfig {
            a: "a".into(),
            b: "b".into(),
            baseline_a: None,
            baseline_b: None,
            service: None,
            baseline_load: None,
            offsets: vec![0],
            checks: Checks::default(),
            work_name: String::new(),
            jobs: 1,
            cpus: Vec::new(),
        };
        let models = &super::super::models::probe()[1..2];
        // 5 misses in 10 M instructions (0.5 per M) against none: noise, not a better layout.
        let r = report(&config, models, vec![side(Side::A, 5), side(Side::B, 0)]);
        assert_eq!(
            r.rows[1].verdict,
            Verdict::NoSignificantDifference,
            "{:?}",
            r.rows[1]
        );
        // 50 per M against none is a verdict.
        let r = report(&config, models, vec![side(Side::A, 500), side(Side::B, 0)]);
        assert_eq!(r.rows[1].verdict, Verdict::BBetter);
        // Per unit of work, the same negligible counts get no verdict either.
        let config = SimConfig {
            checks: Checks {
                work: Some(regex::Regex::new("requests: ([0-9]+)").unwrap()),
                ..Checks::default()
            },
            work_name: "request".into(),
            ..config
        };
        let with_work = |side_key, misses| {
            let mut record = side(side_key, misses);
            record.simulated.models[0].work = Some(1000.0);
            record
        };
        let r = report(
            &config,
            models,
            vec![with_work(Side::A, 5), with_work(Side::B, 0)],
        );
        let per_request = r
            .rows
            .iter()
            .find(|r| r.key == "itlb-l2-misses-per-request");
        assert_eq!(
            per_request.map(|r| r.verdict),
            Some(Verdict::NoSignificantDifference),
            "{:?}",
            r.rows
        );
    }

    #[test]
    fn the_spread_is_median_and_range() {
        let s = Spread::of(&[3.0, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.5, 1.0, 10.0));
    }
}
