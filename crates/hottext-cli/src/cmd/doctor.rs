//! `hottext doctor`: what holds the front end back, and the remedies.

use std::fs::File;
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context;
use hottext::binary::{built_by_rustc, Binary, BinaryError};
use hottext::diagnose::profile::{call_graph, own_code};
use hottext::diagnose::{binary, build_remedy, front_end, pmd, process, system, Check, Status};
use hottext::graph::fit::fit_for_view;
use hottext::graph::Graph;
use hottext::layout::metrics::Metrics;
use hottext::measure::events::{EventPlan, Vendor};
use hottext::os::cancel;
use hottext::os::proc::{self, Pid};
use serde::Serialize;

use super::pid_arg;
use crate::output::{self, Mode};

/// Say what holds a service's front end back and what would help (never changes anything)
///
/// Each check is a line: pass, warn, fail or info, the measured value, and the remedy as a
/// command to run yourself. The binary: build-id, frame pointers, hot-text markers, the hot
/// range's file offset and padding. The front end: with a PMU, the process's top-down level 1
/// and its iTLB walks and L1i misses per instruction; with a profile (--profile, or --record
/// seconds of the --pid process), the share of the processes' CPU in the binary's own code
/// (the most a layout can gain), how many 4 KiB and 2 MiB pages the hot code spans and the
/// estimate: iTLB entries for 99 % of the samples now and laid out by hottext on 2 MiB pages
/// (the layout model of `order --algorithm auto`). Huge pages: THP enabled and defrag, free 2 MiB blocks in
/// /proc/buddyinfo (fragmentation) and compaction, the hugetlb pool, and whether this kernel
/// maps a file's text on 2 MiB pages on the binary's filesystem (tried on a scratch file). The
/// service (--pid): its THP switch, cgroup memory limit, context switches a second, NUMA
/// placement of its text, allocator, CPUs, and its hot range's pages.
///
/// Exit status: 0, or 1 when a check failed.
///
/// Examples:
///   hottext doctor --pid $(pidof server)
///   hottext doctor --binary ./server --profile server.profile --json
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The running service.
    #[arg(long, value_name = "PID", value_parser = pid_arg())]
    pid: Option<Pid>,
    /// The executable (default: the --pid process's).
    #[arg(long, value_name = "BIN")]
    binary: Option<PathBuf>,
    /// A profile of the binary, for how spread out its hot code is.
    #[arg(long, value_name = "PROFILE")]
    profile: Option<PathBuf>,
    /// Without --profile, record the --pid process this many seconds for one (0: do not).
    #[arg(long, value_name = "SECONDS", default_value_t = 3.0)]
    record: f64,
    /// Seconds to count the service's context switches (and, with a PMU, its counters) over.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    interval: f64,
    #[command(flatten)]
    pub json: output::OutputArgs,
}

/// What `doctor` found: every check, and the figures behind the system's.
#[derive(Serialize)]
struct Report {
    checks: Vec<Check>,
    memory: system::Memory,
    /// kB of a scratch file's text the kernel mapped on 2 MiB pages (0: none), or why not.
    file_pmd_mapped_kb: Result<u64, String>,
    hardware_pmu: bool,
    /// The layout model's figures for the profile's hot code as laid out now and by hottext.
    estimate: Option<Estimate>,
}

#[derive(Serialize)]
struct Estimate {
    now: Metrics,
    then: Metrics,
}

impl output::Report for Report {
    fn print(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        let mut area = "";
        for c in &self.checks {
            if c.area != area {
                area = c.area;
                writeln!(out, "{area}")?;
            }
            let status = match c.status {
                Status::Pass => "pass",
                Status::Warn => "WARN",
                Status::Fail => "FAIL",
                Status::Info => "info",
            };
            writeln!(out, "  {status}  {:<28} {}", c.name, c.value)?;
            if let Some(r) = &c.remedy {
                writeln!(out, "        {:<28} remedy: {r}", "")?;
            }
        }
        Ok(())
    }

    /// Exit status 1 when a check failed, each failure named on stderr.
    fn finish(&self, _mode: Mode) -> anyhow::Result<ExitCode> {
        let failed: Vec<&Check> = (self.checks.iter())
            .filter(|c| c.status == Status::Fail)
            .collect();
        for c in &failed {
            eprintln!("hottext: doctor: {} {}: {}", c.area, c.name, c.value);
        }
        Ok(match failed.is_empty() {
            true => ExitCode::SUCCESS,
            false => ExitCode::from(1),
        })
    }
}

/// docs/output.md's stream table rows of this verb: the stream its reports declare.
pub(crate) const STREAMS: &[(&str, output::Stream)] =
    &[("doctor", <Report as output::Report>::STREAM)];

/// The binary under examination, and the file it was opened as (what /proc/PID/exe points to
/// for a process): its name to show and the folder the scratch file goes in.
struct Examined {
    binary: Option<Binary>,
    exe_file: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let interval = output::seconds("--interval", args.interval)?;
    if interval.is_zero() {
        anyhow::bail!("--interval 0: give the seconds to count over, more than 0");
    }
    output::seconds("--record", args.record)?;
    if let Some(pid) = args.pid {
        if !proc::exists(pid) {
            anyhow::bail!("--pid {pid}: no such process (is the service running? pidof NAME)");
        }
    }
    let mut checks = Vec::new();
    let Examined { binary, exe_file } = examined(&args, &mut checks)?;
    let cancel = cancel::on_interrupt();
    let events = EventPlan::probe().ok();
    let pmu = events.as_ref().is_some_and(|p| p.has_hardware_pmu());
    let mut hot_pages = 1;
    let mut estimate = None;
    if let Some(b) = &binary {
        checks.extend(binary::checks(b));
        if let Some(profile) = profile(&args, b, cancel, &mut checks)? {
            let (pages, now, then) = layout_checks(&profile, b, &mut checks);
            hot_pages = pages;
            estimate = Some(Estimate { now, then });
        }
        if cancel.load(std::sync::atomic::Ordering::SeqCst) {
            anyhow::bail!("interrupted");
        }
    } else if args.profile.is_some() {
        anyhow::bail!("--profile needs the binary it was recorded on: give --binary or --pid");
    }
    checks.extend(counter_checks(
        events.as_ref().filter(|_| pmu),
        pmu,
        args.pid,
        interval,
        cancel,
    ));
    let memory = system::memory();
    checks.extend(system::checks(&memory, hot_pages));
    let dir = exe_file
        .as_deref()
        .and_then(|p| p.parent())
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), PathBuf::from);
    let pmd = pmd::file_pmd_mapped(&dir);
    checks.push(pmd_check(&pmd, &dir));
    if let Some(pid) = args.pid {
        checks.extend(process::checks(
            pid,
            interval.max(Duration::from_millis(100)),
            binary.as_ref().map(|b| b.links_runtime),
            binary.as_ref().is_some_and(|b| built_by_rustc(b.bytes())),
        ));
    }
    let report = Report {
        checks,
        memory,
        file_pmd_mapped_kb: pmd,
        hardware_pmu: pmu,
        estimate,
    };
    output::emit(&report, args.json.mode())
}

/// The binary of --binary or of the --pid process; a stripped one is a failed check, not an
/// error: the rest of the checks still apply.
fn examined(args: &Args, checks: &mut Vec<Check>) -> anyhow::Result<Examined> {
    // The process's executable is opened through /proc, which still reaches it after a
    // package upgrade replaced the file or from outside its container; the link's text names it.
    let binary_path = match (&args.binary, args.pid) {
        (Some(b), _) => Some(b.clone()),
        (None, Some(pid)) => Some(proc::exe_link(pid)),
        (None, None) => None,
    };
    let binary = match binary_path.as_deref().map(Binary::open).transpose() {
        Err(e @ BinaryError::NoSymbols { .. }) => {
            let rust = binary_path
                .as_deref()
                .and_then(|p| std::fs::read(p).ok())
                .is_some_and(|data| built_by_rustc(&data));
            let remedy = build_remedy(
                rust,
                "build without -s and do not strip the binary that runs (or keep a debug-symbols copy)",
                "strip = false (or \"debuginfo\") in [profile.release] of Cargo.toml, and no -C strip=symbols",
            );
            checks
                .push(Check::new("binary", "symbols", Status::Fail, e.to_string()).remedy(remedy));
            None
        }
        other => other?,
    };
    // The file /proc/PID/exe points to: the name to show, and the folder the scratch file
    // goes in (/proc/PID itself takes no files).
    let exe_file = match (&args.binary, args.pid) {
        (Some(b), _) => Some(b.clone()),
        (None, Some(pid)) => proc::exe(pid).ok(),
        (None, None) => None,
    };
    let binary = binary.map(|mut b| {
        if let Some(file) = &exe_file {
            b.path = file.clone();
        }
        b
    });
    Ok(Examined { binary, exe_file })
}

/// The checks of the profile's layout in `binary`: its call graph, its own code, how spread
/// out its hot code is and the estimate; returns the 2 MiB pages its hot code needs and the
/// layout model's figures now and laid out by hottext.
fn layout_checks(
    profile: &Graph,
    binary: &Binary,
    checks: &mut Vec<Check>,
) -> (u64, Metrics, Metrics) {
    // Matched once (by name, then by code): both checks judge the same placement.
    checks.push(call_graph(profile));
    checks.extend(own_code(profile));
    let placed = fit_for_view(profile, binary);
    let (check, map) = binary::spread(binary, &placed);
    let hot_pages = (map.pages_99 * 4096)
        .div_ceil(hottext::binary::HUGE_PAGE)
        .max(1);
    checks.push(check);
    let (check, now, then) = front_end::estimate(&placed);
    checks.push(check);
    (hot_pages, now, then)
}

/// The front end's counters: counted for the --pid process with a PMU (`plan`), else what
/// the machine offers instead.
fn counter_checks(
    plan: Option<&EventPlan>,
    pmu: bool,
    pid: Option<Pid>,
    interval: Duration,
    cancel: &AtomicBool,
) -> Vec<Check> {
    match (plan, pid) {
        (Some(plan), Some(pid)) => vec![
            front_end::top_down(Vendor::detect(), pid, interval, cancel),
            front_end::counters(plan, pid, interval, cancel),
        ],
        _ if pmu => vec![
            Check::new("front-end", "hardware counters", Status::Info, "present")
                .remedy("hottext doctor --pid PID counts the service's front end; hottext stat -- CMD a command's"),
        ],
        _ => vec![Check::new(
            "front-end",
            "hardware counters",
            Status::Info,
            "none (a VM without a PMU): the estimate comes from a profile",
        )
        .remedy("hottext stat --simulate -- CMD: cachegrind's iTLB and L1i models")],
    }
}

/// Whether this kernel mapped a scratch file's text in `dir` on 2 MiB pages.
fn pmd_check(pmd: &Result<u64, String>, dir: &Path) -> Check {
    let name = "file text on 2 MiB pages";
    match pmd {
        Ok(kb) if *kb > 0 => Check::new(
            "huge-pages",
            name,
            Status::Pass,
            format!("yes on {} ({kb} kB of a scratch file)", dir.display()),
        ),
        Ok(_) => Check::new(
            "huge-pages",
            name,
            Status::Warn,
            format!(
                "no on {}: the runtime will copy the text to anonymous huge pages",
                dir.display()
            ),
        ),
        Err(why) => Check::new(
            "huge-pages",
            name,
            Status::Info,
            format!("not tried: {why}"),
        ),
    }
}

/// The profile to judge the layout by: --profile, or a short recording of the --pid process
/// (a failed recording is a finding, not an error).
fn profile(
    args: &Args,
    binary: &Binary,
    cancel: &AtomicBool,
    checks: &mut Vec<Check>,
) -> anyhow::Result<Option<Graph>> {
    if let Some(path) = &args.profile {
        let file =
            File::open(path).with_context(|| format!("cannot open profile {}", path.display()))?;
        let profile = Graph::read(BufReader::with_capacity(1 << 20, file))
            .with_context(|| format!("cannot read profile {}", path.display()))?;
        return Ok(Some(profile));
    }
    let Some(pid) = args.pid.filter(|_| args.record > 0.0) else {
        return Ok(None);
    };
    let duration = output::seconds("--record", args.record)?;
    eprintln!(
        "hottext: doctor: recording process {pid} for {:.0} s (--record 0 to skip)",
        duration.as_secs_f64()
    );
    match front_end::record(binary, pid, duration, cancel, &mut |_| {}) {
        Ok(profile) => Ok(Some(profile)),
        Err(why) => {
            checks.push(Check::new(
                "front-end",
                "short profile",
                Status::Info,
                format!("not recorded: {why}"),
            ));
            Ok(None)
        }
    }
}
