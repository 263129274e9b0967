//! What makes an A/B comparison less trustworthy, said as warnings and notes: wide intervals,
//! multiplexed counters, CPU frequency that moved, no PMU, work that differs between sides, a
//! server that had to be killed.

use std::collections::BTreeMap;

use super::{
    Row, RunRecord, FREQUENCY_DRIFT, INSTRUCTIONS_TOLERANCE, NOISY_HALF_WIDTH, SERVER_CPU_TIME,
};
use crate::measure::events::{Counter, EventPlan};
use crate::measure::stats::Better;
use crate::os::proc::clock_ticks_per_second;

/// Adds the warnings and notes about `rows`, computed from the `measured` runs.
pub(super) fn check(
    plan: &EventPlan,
    rows: &[Row],
    measured: &[&RunRecord],
    warnings: &mut Vec<String>,
    notes: &mut Vec<String>,
) {
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
    for r in measured {
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
    if rows.iter().any(|r| r.key == SERVER_CPU_TIME) {
        notes.push(format!(
            "server CPU time is read from /proc in clock ticks: {:.0} ms resolution, so \
             differences below that are rounding",
            1000.0 / clock_ticks_per_second()
        ));
    }
    let killed = measured.iter().filter(|r| r.server_killed).count();
    if killed > 0 {
        warnings.push(format!(
            "{killed} server runs outlived SIGTERM and were killed with SIGKILL"
        ));
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
    fn spread_of_frequencies() {
        assert_eq!(spread(&[1.0]), None);
        let (lo, hi, s) = spread(&[2000.0, 2100.0, 2050.0]).unwrap();
        assert_eq!((lo, hi), (2000.0, 2100.0));
        assert!((s - 0.05).abs() < 1e-12);
    }
}
