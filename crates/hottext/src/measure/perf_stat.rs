//! Running `perf stat` and reading its CSV output (`-x,`).
//!
//! perf writes the counts to a file (`-o`), so the measured command's own stderr passes through
//! untouched. Each line of that file is
//!
//! ```text
//! value,unit,event,run-time-ns,percent-enabled,metric-value,metric-unit
//! 120.98,msec,task-clock,120975434,100.00,0.979,CPUs utilized
//! <not supported>,,instructions,0,100.00,,
//! 8123456,,cycles,250000000,50.00,,
//! ```
//!
//! `value` is `<not supported>` when the kernel has no such event here (no PMU in a VM),
//! `<not counted>` when the event was never scheduled (or, for perf's time events, counted
//! nothing). A percentage below 100 means the event shared a counter with others
//! (multiplexing): perf scaled the value up from the fraction of the run it was counted.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

/// What one event counted.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "status", content = "value")]
pub enum Value {
    /// A count (seconds, nanoseconds or events: see the reading's unit).
    Counted(f64),
    /// Never scheduled on a counter, or (time events) nothing counted.
    NotCounted,
    /// The kernel cannot count it on this machine.
    NotSupported,
}

/// One line of `perf stat -x,` output.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reading {
    /// The event's name as perf prints it (with a PMU prefix on hybrid CPUs: `cpu_core/cycles/`).
    pub event: String,
    /// What it counted.
    pub value: Value,
    /// perf's unit: `msec`, `ns`, or empty for a count.
    pub unit: String,
    /// Nanoseconds the event was counted.
    pub run_ns: Option<u64>,
    /// Share (0 to 1) of the enabled time the event was on a counter: below 1 means
    /// multiplexed. perf prints it in percent; it is read as a fraction, as hottext reports
    /// every share.
    pub enabled_fraction: Option<f64>,
}

impl Reading {
    /// The value, if the event counted.
    pub fn count(&self) -> Option<f64> {
        match self.value {
            Value::Counted(v) => Some(v),
            _ => None,
        }
    }

    /// Whether perf scaled the value up from part of the run (the event shared a counter).
    pub fn multiplexed(&self) -> bool {
        self.count().is_some() && self.enabled_fraction.is_some_and(|f| f < 0.99995)
    }
}

/// A `perf stat -x` line that is not a reading.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// One line does not parse.
    #[error("perf stat output line {line}: {reason}: '{text}'")]
    Line {
        /// 1-based line number in perf's output.
        line: usize,
        /// What is wrong with it.
        reason: &'static str,
        /// The line as perf wrote it.
        text: String,
    },
}

/// Parses `perf stat -x<sep>` output. Comment lines (`# started on ...`), blank lines and
/// perf's extra metric lines (no event name) are skipped; anything else malformed is an error.
pub fn parse(text: &str, sep: char) -> Result<Vec<Reading>, ParseError> {
    let mut readings = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let err = |reason| ParseError::Line {
            line: line_no,
            reason,
            text: line.to_string(),
        };
        let fields: Vec<&str> = line.split(sep).collect();
        if fields.len() < 3 {
            return Err(err("fewer than 3 fields"));
        }
        let event = fields[2].trim();
        if event.is_empty() {
            // A second metric of the event above: `,,,,,1.5,frontend cycles idle`.
            continue;
        }
        let value = match fields[0].trim() {
            "<not supported>" => Value::NotSupported,
            "<not counted>" => Value::NotCounted,
            v => Value::Counted(
                v.parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite())
                    .ok_or_else(|| err("the value is not a number"))?,
            ),
        };
        let run_ns = match fields.get(3).map(|f| f.trim()) {
            None | Some("") => None,
            Some(f) => Some(f.parse().map_err(|_| err("the run time is not a number"))?),
        };
        let enabled_fraction = match fields.get(4).map(|f| f.trim()) {
            None | Some("") => None,
            Some(f) => Some(
                f.parse::<f64>()
                    .map_err(|_| err("the enabled percentage is not a number"))?
                    / 100.0,
            ),
        };
        readings.push(Reading {
            event: event.to_string(),
            value,
            unit: fields[1].trim().to_string(),
            run_ns,
            enabled_fraction,
        });
    }
    Ok(readings)
}

/// Which events follow what.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "cpu")]
pub enum Scope {
    /// The command perf starts and every process it starts (perf's default, `inherit`).
    Command,
    /// Everything that runs on one CPU (`-a -C N`), for as long as the command perf starts runs.
    Cpu(u32),
    /// A running process's threads (`-p PID`), for as long as the command perf starts runs.
    Process(u32),
}

/// A `perf stat` command line that writes its counts to `output`.
pub fn command<S: AsRef<OsStr>>(
    events: &[String],
    scope: Scope,
    output: &Path,
    argv: &[S],
) -> Command {
    let mut cmd = Command::new("perf");
    cmd.args(["stat", "-x,", "--no-big-num", "-o"]).arg(output);
    match scope {
        Scope::Command => {}
        Scope::Cpu(cpu) => {
            cmd.args(["-a", "-C"]).arg(cpu.to_string());
        }
        Scope::Process(pid) => {
            cmd.arg("-p").arg(pid.to_string());
        }
    }
    cmd.arg("-e").arg(events.join(","));
    cmd.arg("--").args(argv);
    cmd
}

/// The readings of the event named `event`: exact, or as perf names an event of one PMU on a
/// hybrid CPU (`cpu_core/instructions/`). Hybrid CPUs give one reading per PMU.
pub(crate) fn readings_of<'a>(readings: &'a [Reading], event: &str) -> Vec<&'a Reading> {
    readings
        .iter()
        .filter(|r| {
            r.event == event
                || r.event
                    .strip_suffix('/')
                    .and_then(|e| e.rsplit_once('/'))
                    .is_some_and(|(_, name)| name == event)
        })
        .collect()
}

/// A fresh path for perf's output in `dir`.
pub(crate) fn output_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.csv"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured with perf 6.1 on this project's CI kind of VM (AMD EPYC, no PMU):
    /// `perf stat -x, -o out.csv -e duration_time,user_time,system_time,task-clock,instructions,
    /// cycles,iTLB-load-misses -- sh -c 'loop'`.
    const NO_PMU: &str = "# started on Sat Nov 21 21:08:24 2026

123584628,ns,duration_time,123584628,100.00,1.022,G/sec
121756000,ns,user_time,121756000,100.00,1.006,G/sec
<not counted>,ns,system_time,0,100.00,,
120.98,msec,task-clock,120975434,100.00,0.979,CPUs utilized
<not supported>,,instructions,0,100.00,,
<not supported>,,cycles,0,100.00,,
<not supported>,,iTLB-load-misses,0,100.00,,
";

    /// The layout perf 6.1 uses on a host with a PMU when events outnumber counters (written by
    /// hand in that layout: this VM cannot multiplex), with a second-metric line and a hybrid
    /// CPU's per-PMU names.
    const MULTIPLEXED: &str = "# started on Sat Nov 21 21:10:00 2026

2001.52,msec,task-clock,2001520000,100.00,0.999,CPUs utilized
7316442110,,instructions,1500836610,74.98,1.38,insn per cycle
5287399211,,cycles,1500912345,75.01,2.642,GHz
,,,,,0.25,frontend cycles idle
1274532,,bp_l1_tlb_miss_l2_tlb_miss,1000440122,49.98,,
<not counted>,,bp_l1_tlb_fetch_hit.if2m,0,0.00,,
2100,,cpu_core/instructions/,100,100.00,,
300,,cpu_atom/instructions/,100,100.00,,
";

    #[test]
    fn no_pmu_lines_parse_with_their_status() {
        let r = parse(NO_PMU, ',').unwrap();
        assert_eq!(r.len(), 7);
        assert_eq!(r[0].event, "duration_time");
        assert_eq!(r[0].value, Value::Counted(123584628.0));
        assert_eq!(r[0].unit, "ns");
        assert_eq!(r[2].value, Value::NotCounted);
        assert_eq!(r[3].value, Value::Counted(120.98));
        assert_eq!(r[3].unit, "msec");
        assert_eq!(r[3].run_ns, Some(120975434));
        assert_eq!(r[4].event, "instructions");
        assert_eq!(r[4].value, Value::NotSupported);
        assert!(r.iter().all(|r| !r.multiplexed()));
    }

    #[test]
    fn multiplexing_percentages_are_read() {
        let r = parse(MULTIPLEXED, ',').unwrap();
        assert_eq!(r.len(), 7, "the metric-only line is skipped");
        assert_eq!(r[1].enabled_fraction, Some(0.7498));
        assert!(r[1].multiplexed() && r[2].multiplexed() && r[3].multiplexed());
        assert!(!r[0].multiplexed());
        assert_eq!(r[3].value, Value::Counted(1274532.0));
        // Not counted at all is not "multiplexed": it has no value to scale.
        assert_eq!(r[4].value, Value::NotCounted);
        assert!(!r[4].multiplexed());
    }

    #[test]
    fn hybrid_pmu_names_match_the_plain_event() {
        let r = parse(MULTIPLEXED, ',').unwrap();
        let instructions = readings_of(&r, "instructions");
        assert_eq!(instructions.len(), 3);
        assert_eq!(readings_of(&r, "cycles").len(), 1);
        assert!(readings_of(&r, "structions").is_empty());
    }

    #[test]
    fn malformed_lines_name_their_number() {
        let err = parse("# x\n\nabc,,cycles,1,100.00,,\n", ',').unwrap_err();
        assert_eq!(
            err.to_string(),
            "perf stat output line 3: the value is not a number: 'abc,,cycles,1,100.00,,'"
        );
        let err = parse("12\n", ',').unwrap_err();
        assert!(err.to_string().contains("line 1: fewer than 3 fields"));
        let err = parse("12,,cycles,1,most,,\n", ',').unwrap_err();
        assert!(err.to_string().contains("enabled percentage"));
    }

    #[test]
    fn command_line_for_a_cpu() {
        let cmd = command(
            &["duration_time".to_string(), "cycles".to_string()],
            Scope::Cpu(1),
            Path::new("/tmp/o.csv"),
            &["sh", "-c", "load"],
        );
        let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy()).collect();
        assert_eq!(
            args.join(" "),
            "stat -x, --no-big-num -o /tmp/o.csv -a -C 1 -e duration_time,cycles -- sh -c load"
        );
    }
}
