//! The comparison of an A/B experiment's runs: a row a metric, the headline, the notes.

use std::collections::BTreeMap;

use super::{noise, Config, Report, Row, RunRecord, Side, SERVER_CPU_TIME};
use crate::measure::counts::METRICS;
use crate::measure::events::EventPlan;
use crate::measure::stats::{self, Better};

/// The report of `records`: every metric that all measured runs have, compared round by round
/// ([`stats::compare`]), the noise checks, and the headline (the first service metric, else
/// cycles, server CPU time, task-clock or wall time).
pub(super) fn report(
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

    noise::check(plan, &rows, &measured, &mut warnings, &mut notes);

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
