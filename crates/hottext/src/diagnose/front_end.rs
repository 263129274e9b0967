//! Is the service's front end the bottleneck, and what would hot text and huge pages change?
//!
//! With a PMU, the process's own counters say it: top-down level 1 from perf's metric tables
//! (Intel `TopdownL1`, AMD Zen 4+ `PipelineL1`), and iTLB walks and L1i misses per instruction
//! with the events `stat` and `ab` use. Without one (most cloud VMs), a few seconds' profile of
//! the process says how spread out its hot code is, and the layout model of `order --algorithm
//! auto` says how many iTLB entries that code needs as it is and laid out by hottext on 2 MiB
//! pages: an estimate, from the profile alone.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use super::{Check, Status};
use crate::binary::Binary;
use crate::graph::fit::Fitted;
use crate::graph::Graph;
use crate::layout::alignment::COMPILED_ALIGNMENT;
use crate::layout::metrics::{measure, place_in_order, Metrics};
use crate::layout::{auto, Params};
use crate::measure::counts::Counts;
use crate::measure::events::{Counter, EventPlan, Vendor};
use crate::measure::perf_stat::{self, Scope};
use crate::measure::run::{read_counts, run_captured};
use crate::os::proc::Pid;
use crate::profile::record::{affinity, plan, Machine, Request, Session, Target};

const AREA: &str = "front-end";
/// Share of pipeline slots lost to instruction supply above which the front end is a
/// bottleneck worth a layout (top-down's own rule of thumb flags 20 % and more).
const FRONTEND_BOUND: f64 = 20.0;
/// L1i misses per 1000 instructions above which fetch stalls matter: small programs stay
/// well under 1, large services that gain from layout run at several.
const L1I_MPKI: f64 = 5.0;
/// iTLB walks per million instructions above which page walks for code matter.
const ITLB_PER_MILLION: f64 = 100.0;
/// L1 iTLB entries for 4 KiB pages on the CPUs we target (AMD Zen 2-4: 64; Intel: 64-128).
const L1_ITLB: u64 = 64;

/// Counts the process's instructions, iTLB walks and L1i misses for `interval`.
pub fn counters(plan: &EventPlan, pid: Pid, interval: Duration, cancel: &AtomicBool) -> Check {
    let name = "iTLB and L1i misses";
    let counts = match count(plan, pid, interval, cancel) {
        Ok(c) => c,
        Err(why) => return Check::new(AREA, name, Status::Info, format!("not counted: {why}")),
    };
    let Some(instructions) = counts.get(Counter::Instructions).filter(|&i| i > 0.0) else {
        return Check::new(
            AREA,
            name,
            Status::Info,
            "no instructions counted: is it idle?",
        );
    };
    let per = |c: Counter, scale: f64| counts.get(c).map(|n| n / instructions * scale);
    let walks = per(Counter::ItlbWalks, 1e6);
    let mpki = per(Counter::L1iMisses, 1e3);
    let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    let value = format!(
        "{} iTLB walks per million instructions, {} L1i misses per 1000 (over {:.1} s)",
        show(walks),
        show(mpki),
        interval.as_secs_f64()
    );
    if walks.is_some_and(|w| w > ITLB_PER_MILLION) || mpki.is_some_and(|m| m > L1I_MPKI) {
        Check::new(AREA, name, Status::Warn, value).remedy(
            "gather the hot code: hottext order PROFILE --binary BIN --format ld-script -o hot.ld; relink; link -lhottext_auto",
        )
    } else {
        Check::new(AREA, name, Status::Pass, value)
    }
}

fn count(
    plan: &EventPlan,
    pid: Pid,
    interval: Duration,
    cancel: &AtomicBool,
) -> Result<Counts, String> {
    let scratch = tempfile::tempdir().map_err(|e| e.to_string())?;
    let output = perf_stat::output_path(scratch.path(), "doctor");
    let scope = Scope::Process(pid as u32);
    let seconds = format!("{:.3}", interval.as_secs_f64());
    let cmd = perf_stat::command(&plan.events(scope), scope, &output, &["sleep", &seconds]);
    let deadline = Instant::now() + interval + Duration::from_secs(10);
    let run = run_captured(cmd, "perf stat", Some(deadline), cancel).map_err(|e| e.to_string())?;
    let status = run.status.ok_or("perf stat did not finish")?;
    let readings = read_counts(&output, status, &run.stderr).map_err(|e| e.to_string())?;
    Ok(Counts::from_readings(&plan.counters(scope), &readings))
}

/// Top-down level 1 of the process over `interval`, from perf's metric tables.
pub fn top_down(vendor: Vendor, pid: Pid, interval: Duration, cancel: &AtomicBool) -> Check {
    let name = "top-down level 1";
    let group = match vendor {
        Vendor::Intel => "TopdownL1",
        Vendor::Amd => "PipelineL1",
        Vendor::Other => {
            return Check::new(AREA, name, Status::Info, "no metric tables for this CPU")
        }
    };
    let scratch = match tempfile::tempdir() {
        Ok(s) => s,
        Err(e) => return Check::new(AREA, name, Status::Info, format!("not measured: {e}")),
    };
    let output = scratch.path().join("topdown.json");
    let mut cmd = Command::new("perf");
    cmd.args(["stat", "-j", "-M", group, "-o"])
        .arg(&output)
        .args(["-p", &pid.to_string(), "--", "sleep"])
        .arg(format!("{:.3}", interval.as_secs_f64()));
    let deadline = Instant::now() + interval + Duration::from_secs(10);
    let ran = run_captured(cmd, "perf stat", Some(deadline), cancel);
    let text = std::fs::read_to_string(&output).unwrap_or_default();
    let shares = parse_top_down(&text);
    let Some(frontend) = shares.iter().find(|(n, _)| n == "frontend_bound") else {
        let why = match ran {
            Ok(r) => r.stderr.lines().next().unwrap_or_default().to_string(),
            Err(e) => e.to_string(),
        };
        return Check::new(
            AREA,
            name,
            Status::Info,
            format!("perf has no {group} metrics here ({why})"),
        );
    };
    let value = shares
        .iter()
        .map(|(n, v)| format!("{} {v:.1} %", n.replace('_', " ")))
        .collect::<Vec<_>>()
        .join(", ");
    if frontend.1 >= FRONTEND_BOUND {
        Check::new(AREA, name, Status::Warn, value).remedy(
            "front-end bound: gather the hot code and map it on huge pages (hottext order; relink; -lhottext_auto)",
        )
    } else {
        Check::new(AREA, name, Status::Pass, value)
    }
}

/// The level-1 shares in percent from `perf stat -j -M …` output (one JSON object a line):
/// `frontend_bound`, `bad_speculation`, `backend_bound`, `retiring`, whatever perf's tables
/// call them (`tma_frontend_bound`, `Frontend_Bound`, `frontend bound`).
pub(crate) fn parse_top_down(text: &str) -> Vec<(String, f64)> {
    const LEVEL_1: [&str; 4] = [
        "frontend_bound",
        "bad_speculation",
        "backend_bound",
        "retiring",
    ];
    let mut out: Vec<(String, f64)> = Vec::new();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let Some(unit) = v["metric-unit"].as_str() else {
            continue;
        };
        let value = match &v["metric-value"] {
            serde_json::Value::Number(n) => n.as_f64(),
            serde_json::Value::String(s) => s.trim().parse().ok(),
            _ => None,
        };
        let Some(value) = value.filter(|v| v.is_finite()) else {
            continue;
        };
        let key = unit
            .trim_start_matches(|c: char| c == '%' || c.is_whitespace())
            .to_ascii_lowercase()
            .replace(' ', "_");
        let key = key.strip_prefix("tma_").unwrap_or(&key);
        if let Some(name) = LEVEL_1.iter().find(|&&n| n == key) {
            // A unit without "%" is a fraction.
            let percent = if unit.contains('%') {
                value
            } else {
                value * 100.0
            };
            if !out.iter().any(|(n, _)| n == name) {
                out.push((name.to_string(), percent));
            }
        }
    }
    out
}

/// Records the process for `duration` (as `hottext record --pid` would) and reads the samples
/// of `binary` into a profile. `progress` hears the time recorded so far.
pub fn record(
    binary: &Binary,
    pid: Pid,
    duration: Duration,
    cancel: &AtomicBool,
    progress: &mut dyn FnMut(Duration),
) -> Result<Graph, String> {
    let scratch = tempfile::tempdir().map_err(|e| format!("no scratch directory: {e}"))?;
    let output = scratch.path().join("perf.data");
    let request = Request {
        target: Target::Pid(pid),
        output: output.clone(),
        duration: Some(duration),
        frequency: None,
        pin_cpu: None,
        per_process: false,
        sampling: None,
        frame_pointer_share: crate::profile::code::frame_pointer_share(binary),
    };
    let machine = Machine::probe().map_err(|e| format!("cannot tell what perf can do: {e}"))?;
    let runs_on = affinity(pid).map_err(|e| format!("cannot read process {pid}'s CPUs: {e}"))?;
    let plan = plan(&request, &machine, &runs_on).map_err(|e| e.to_string())?;
    let session = Session::start(&plan).map_err(|e| e.to_string())?;
    let tick = Duration::from_millis(100);
    let outcome = session
        .wait(plan.stop_after(), tick, cancel, |s| {
            progress(s.elapsed());
            false
        })
        .map_err(|e| e.to_string())?;
    if outcome.is_none() {
        return Err("interrupted".into());
    }
    read(&output, binary, pid)
}

fn read(perf_data: &Path, binary: &Binary, pid: Pid) -> Result<Graph, String> {
    let options = crate::profile::Options {
        pid: Some(pid),
        ..Default::default()
    };
    let (graph, stats) = crate::profile::read(perf_data, binary, &options, &mut |_, _| {})
        .map_err(|e| e.to_string())?;
    if stats.samples_in_binary == 0 {
        return Err(format!(
            "none of the {} samples was in {}: the process was idle",
            stats.samples,
            binary.path.display()
        ));
    }
    Ok(graph)
}

/// What hot text and huge pages would change, by the layout model: the iTLB entries the code
/// for 99 % of the samples needs as laid out now and as `order --algorithm auto` would lay it
/// out on 2 MiB pages, and the calls that leave their 4 KiB page.
/// `placed` is the profile as laid out in the binary (`graph::fit::fit_for_view`).
pub fn estimate(placed: &Fitted) -> (Check, Metrics, Metrics) {
    let (graph, at) = (&placed.graph, &placed.placement);
    let now = measure(graph, at);
    let choice = auto::choose(graph, &Params::default(), &|_| {});
    let then = measure(
        graph,
        &place_in_order(graph, &choice.order, COMPILED_ALIGNMENT),
    );
    let value = format!(
        "iTLB entries for 99% of the samples: {} now (4 KiB pages), {} with hot text on 2 MiB pages \
         ({} of 4 KiB); calls leaving their 4 KiB page: {:.0}% now, {:.0}% laid out by {}",
        now.pages_4k_99,
        then.pages_2m_99,
        then.pages_4k_99,
        100.0 * (1.0 - now.calls_within_4k),
        100.0 * (1.0 - then.calls_within_4k),
        choice.algorithm.name,
    );
    let name = "estimate with hot text";
    let helps = now.pages_4k_99 > L1_ITLB && then.pages_2m_99 * 2 <= now.pages_4k_99;
    let check = if helps {
        Check::new(AREA, name, Status::Warn, format!("would help: {value}")).remedy(
            "hottext order PROFILE --binary BIN --format ld-script -o hot.ld; relink; link -lhottext_auto",
        )
    } else {
        Check::new(AREA, name, Status::Pass, format!("little to gain: {value}"))
    };
    (check, now, then)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_down_shares_come_from_any_naming() {
        // As perf 6.x prints `stat -j -M`: events without metrics, metrics under several names.
        let text = r#"{"counter-value" : "123.000000", "unit" : "", "event" : "slots", "event-runtime" : 1000, "pcnt-running" : 100.00, "metric-value" : "0.000000", "metric-unit" : ""}
{"counter-value" : "45.000000", "unit" : "", "event" : "topdown-fe-bound", "event-runtime" : 1000, "pcnt-running" : 100.00, "metric-value" : "31.500000", "metric-unit" : "%  tma_frontend_bound"}
{"metric-value" : "12.0", "metric-unit" : "%  tma_bad_speculation"}
{"metric-value" : 0.25, "metric-unit" : "backend_bound"}
not json
{"metric-value" : "9.0", "metric-unit" : "%  tma_frontend_bound"}"#;
        let shares = parse_top_down(text);
        assert_eq!(
            shares,
            [
                ("frontend_bound".to_string(), 31.5),
                ("bad_speculation".to_string(), 12.0),
                ("backend_bound".to_string(), 25.0),
            ]
        );
        assert!(parse_top_down("").is_empty());
    }
}
