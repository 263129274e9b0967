//! The figures of one measured run, and the metrics derived from them (IPC, misses per
//! instruction), each with the direction that counts as better.

use std::collections::BTreeMap;

use serde::Serialize;

use super::events::Counter;
use super::perf_stat::{readings_of, Reading, Value};
use super::stats::Better;

/// An event perf could count only part of the time (it shared a counter).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Multiplexed {
    /// The perf event name.
    pub event: String,
    /// Share (0 to 1) of the run the event was on a counter; perf scaled its value up from it.
    pub enabled_fraction: f64,
}

/// What one run counted. Times are in seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Counts {
    /// Each counted figure's value; times summed over hybrid cores' PMUs and in seconds.
    pub values: BTreeMap<Counter, f64>,
    /// Figures asked for that perf did not count in this run.
    pub not_counted: Vec<Counter>,
    /// Events that shared a counter, so their values are scaled estimates.
    pub multiplexed: Vec<Multiplexed>,
}

impl Counts {
    /// Gathers the readings of the `(figure, event)` pairs that were asked for.
    pub(crate) fn from_readings(asked: &[(Counter, &str)], readings: &[Reading]) -> Counts {
        let mut counts = Counts::default();
        for &(counter, event) in asked {
            let of = readings_of(readings, event);
            let mut total = None;
            for r in &of {
                if let Value::Counted(v) = r.value {
                    let v = if counter.is_time() {
                        v * Counter::to_seconds_factor(&r.unit).unwrap_or(1.0)
                    } else {
                        v
                    };
                    *total.get_or_insert(0.0) += v;
                }
                if r.multiplexed() {
                    counts.multiplexed.push(Multiplexed {
                        event: r.event.clone(),
                        enabled_fraction: r.enabled_fraction.unwrap_or(0.0),
                    });
                }
            }
            match total {
                Some(v) => {
                    counts.values.insert(counter, v);
                }
                // perf's time events say <not counted> for a zero (a command with no
                // system time); that is a zero, not a gap.
                None if counter.is_time() && of.iter().any(|r| r.value == Value::NotCounted) => {
                    counts.values.insert(counter, 0.0);
                }
                None => counts.not_counted.push(counter),
            }
        }
        counts
    }

    /// The figure's value; `None` when it was not asked for or not counted.
    pub fn get(&self, counter: Counter) -> Option<f64> {
        self.values.get(&counter).copied()
    }
}

/// A figure a report shows: a counter or a ratio of counters.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// Stable name for JSON.
    pub key: &'static str,
    /// Name in tables ("iTLB walks").
    pub label: &'static str,
    /// Unit shown after the label: "s", "" (a count), "/M instr".
    pub unit: &'static str,
    /// Which direction is an improvement.
    pub better: Better,
    /// The counter a raw figure shows; None for a derived one.
    pub counter: Option<Counter>,
    /// Computes the figure from one run's counts; `None` when an input is missing.
    pub value: fn(&Counts) -> Option<f64>,
}

fn ratio(num: Option<f64>, den: Option<f64>, scale: f64) -> Option<f64> {
    match (num, den) {
        (Some(n), Some(d)) if d > 0.0 => Some(n / d * scale),
        _ => None,
    }
}

/// Every metric, in report order. Derived ones are present when their inputs are.
pub const METRICS: &[Metric] = &[
    Metric {
        key: "wall-time",
        label: "wall time",
        unit: "s",
        better: Better::Lower,
        counter: Some(Counter::WallTime),
        value: |c| c.get(Counter::WallTime),
    },
    Metric {
        key: "task-clock",
        label: "task-clock",
        unit: "s",
        better: Better::Lower,
        counter: Some(Counter::TaskClock),
        value: |c| c.get(Counter::TaskClock),
    },
    Metric {
        key: "user-time",
        label: "user time",
        unit: "s",
        better: Better::Lower,
        counter: Some(Counter::UserTime),
        value: |c| c.get(Counter::UserTime),
    },
    Metric {
        key: "system-time",
        label: "system time",
        unit: "s",
        better: Better::Lower,
        counter: Some(Counter::SystemTime),
        value: |c| c.get(Counter::SystemTime),
    },
    Metric {
        key: "context-switches",
        label: "context switches",
        unit: "",
        better: Better::Neither,
        counter: Some(Counter::ContextSwitches),
        value: |c| c.get(Counter::ContextSwitches),
    },
    Metric {
        key: "page-faults",
        label: "page faults",
        unit: "",
        better: Better::Lower,
        counter: Some(Counter::PageFaults),
        value: |c| c.get(Counter::PageFaults),
    },
    Metric {
        key: "instructions",
        label: "instructions",
        unit: "",
        better: Better::Lower,
        counter: Some(Counter::Instructions),
        value: |c| c.get(Counter::Instructions),
    },
    Metric {
        key: "cycles",
        label: "cycles",
        unit: "",
        better: Better::Lower,
        counter: Some(Counter::Cycles),
        value: |c| c.get(Counter::Cycles),
    },
    Metric {
        key: "ipc",
        label: "IPC",
        unit: "instr/cycle",
        better: Better::Higher,
        counter: None,
        value: |c| ratio(c.get(Counter::Instructions), c.get(Counter::Cycles), 1.0),
    },
    Metric {
        key: "itlb-walks",
        label: "iTLB walks",
        unit: "",
        better: Better::Lower,
        counter: Some(Counter::ItlbWalks),
        value: |c| c.get(Counter::ItlbWalks),
    },
    Metric {
        key: "itlb-walks-per-m-instr",
        label: "iTLB walks",
        unit: "/M instr",
        better: Better::Lower,
        counter: None,
        value: |c| ratio(c.get(Counter::ItlbWalks), c.get(Counter::Instructions), 1e6),
    },
    Metric {
        key: "itlb-walks-4k",
        label: "iTLB walks 4K pages",
        unit: "",
        better: Better::Lower,
        counter: Some(Counter::ItlbWalks4k),
        value: |c| c.get(Counter::ItlbWalks4k),
    },
    Metric {
        key: "itlb-walks-2m",
        label: "iTLB walks 2M pages",
        unit: "",
        better: Better::Neither,
        counter: Some(Counter::ItlbWalks2m),
        value: |c| c.get(Counter::ItlbWalks2m),
    },
    Metric {
        key: "itlb-hits-4k",
        label: "iTLB hits 4K pages",
        unit: "",
        better: Better::Neither,
        counter: Some(Counter::ItlbHits4k),
        value: |c| c.get(Counter::ItlbHits4k),
    },
    Metric {
        key: "itlb-hits-2m",
        label: "iTLB hits 2M pages",
        unit: "",
        better: Better::Neither,
        counter: Some(Counter::ItlbHits2m),
        value: |c| c.get(Counter::ItlbHits2m),
    },
    Metric {
        key: "itlb-hits-2m-fraction",
        label: "iTLB hits on 2M pages",
        unit: "fraction",
        better: Better::Higher,
        counter: None,
        value: |c| {
            let (h4, h2) = (c.get(Counter::ItlbHits4k)?, c.get(Counter::ItlbHits2m)?);
            ratio(Some(h2), Some(h2 + h4), 1.0)
        },
    },
    Metric {
        key: "l1i-misses",
        label: "L1i misses",
        unit: "",
        better: Better::Lower,
        counter: Some(Counter::L1iMisses),
        value: |c| c.get(Counter::L1iMisses),
    },
    Metric {
        key: "l1i-mpki",
        label: "L1i misses",
        unit: "/k instr",
        better: Better::Lower,
        counter: None,
        value: |c| ratio(c.get(Counter::L1iMisses), c.get(Counter::Instructions), 1e3),
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::perf_stat::parse;

    #[test]
    fn counts_convert_times_and_sum_hybrid_pmus() {
        let text = "123584628,ns,duration_time,123584628,100.00,,\n\
                    <not counted>,ns,system_time,0,100.00,,\n\
                    120.98,msec,task-clock,120975434,100.00,0.979,CPUs utilized\n\
                    2100,,cpu_core/instructions/,100,100.00,,\n\
                    300,,cpu_atom/instructions/,100,100.00,,\n\
                    9000,,cycles,100,50.00,,\n\
                    <not supported>,,iTLB-load-misses,0,100.00,,\n";
        let readings = parse(text, ',').unwrap();
        let asked = [
            (Counter::WallTime, "duration_time"),
            (Counter::SystemTime, "system_time"),
            (Counter::TaskClock, "task-clock"),
            (Counter::Instructions, "instructions"),
            (Counter::Cycles, "cycles"),
            (Counter::ItlbWalks, "iTLB-load-misses"),
        ];
        let c = Counts::from_readings(&asked, &readings);
        assert!((c.get(Counter::WallTime).unwrap() - 0.123584628).abs() < 1e-12);
        assert_eq!(c.get(Counter::SystemTime), Some(0.0));
        assert!((c.get(Counter::TaskClock).unwrap() - 0.12098).abs() < 1e-12);
        assert_eq!(c.get(Counter::Instructions), Some(2400.0));
        assert_eq!(c.not_counted, [Counter::ItlbWalks]);
        assert_eq!(
            c.multiplexed,
            [Multiplexed {
                event: "cycles".into(),
                enabled_fraction: 0.5
            }]
        );
    }

    #[test]
    fn derived_metrics_need_their_inputs() {
        let mut c = Counts::default();
        c.values.insert(Counter::Instructions, 2e9);
        c.values.insert(Counter::Cycles, 1e9);
        c.values.insert(Counter::ItlbWalks, 3000.0);
        c.values.insert(Counter::ItlbHits4k, 300.0);
        c.values.insert(Counter::ItlbHits2m, 700.0);
        let get = |key: &str| {
            let m = METRICS.iter().find(|m| m.key == key).unwrap();
            (m.value)(&c)
        };
        assert_eq!(get("ipc"), Some(2.0));
        assert_eq!(get("itlb-walks-per-m-instr"), Some(1.5));
        assert_eq!(get("itlb-hits-2m-fraction"), Some(0.7));
        assert_eq!(get("l1i-mpki"), None);
        assert_eq!(get("wall-time"), None);
        let keys: std::collections::BTreeSet<_> = METRICS.iter().map(|m| m.key).collect();
        assert_eq!(keys.len(), METRICS.len(), "metric keys are unique");
    }

    #[test]
    fn every_counter_has_its_raw_metric() {
        for c in Counter::SOFTWARE.iter().chain(&Counter::HARDWARE) {
            let raw: Vec<_> = METRICS.iter().filter(|m| m.counter == Some(*c)).collect();
            assert_eq!(raw.len(), 1, "{c:?}");
        }
    }
}
