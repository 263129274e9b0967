//! `hottext verify`: is the hot text in place, in a binary or in a running process.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use hottext::binary::Binary;
use hottext::link::{read_plan, read_ranges};
use hottext::os::proc::Pid;
use hottext::verify::{check_binary, check_process, HotTextReport, ProcessReport};
use serde::Serialize;

use super::pid_arg;
use crate::output::{self, Mode};

/// Check that a binary holds a 2 MiB-aligned hot range, or that a process has it on huge pages
///
/// With --binary, checks for the range between __hot_start and __hot_end: exit status 1 when
/// the markers are missing, the range is empty or misaligned, no function lies inside it, or
/// the runtime would refuse it because no whole 2 MiB page of it lies in the text (too little
/// text follows a small range: `hottext order` pads it by default). A range of which only some
/// pages can be mapped is a warning.
/// With --planned, also compares the range with the linker input `order` or `fetch` wrote (ld
/// script, gold or lld order file, or list; told by its contents): exit status 1 when a planned
/// function is not in the range (an ld script pattern that matched no object, a link that did
/// not use the file), a warning naming the functions in the range the file did not plan (order
/// files pull in every static namesake of a planned function).
/// With --pid, lists each 2 MiB page of the hot range and what backs it (anonymous THP, a
/// 2 MiB page-cache folio, hugetlb, or 4 KiB pages): exit status 1 when any page of the range
/// is not on a huge page (the runtime's cap, HOTTEXT_MAX_PAGES or the CPU's 2 MiB iTLB
/// entries, may leave the coldest pages small on purpose); the report names those pages.
/// With --pid and --ranges, the pages checked are those of a ranges file (`hottext order
/// --format ranges`) instead of the markers: for a program run under the preload library.
///
/// Examples:
///   hottext verify --binary ./server
///   hottext verify --binary ./server --planned hot.ld
///   hottext verify --pid $(pidof server) --json
///   hottext verify --pid $(pidof server) --ranges server.ranges
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The linked executable to check.
    #[arg(
        long,
        value_name = "BIN",
        required_unless_present = "pid",
        conflicts_with = "pid"
    )]
    binary: Option<PathBuf>,
    /// The linker input the binary was linked with, as `hottext order` or `hottext fetch`
    /// wrote it: every function it plans must lie in the hot range.
    #[arg(long, value_name = "FILE", requires = "binary")]
    planned: Option<PathBuf>,
    /// A running process whose hot range should be on huge pages.
    #[arg(long, value_name = "PID", value_parser = pid_arg())]
    pid: Option<Pid>,
    /// With --pid: check the ranges of this file (HOTTEXT_RANGES_FILE of the preload library)
    /// instead of the range between the markers.
    #[arg(long, value_name = "FILE", requires = "pid")]
    ranges: Option<PathBuf>,
    #[command(flatten)]
    pub json: output::OutputArgs,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mode = args.json.mode();
    match (&args.binary, args.pid) {
        (Some(path), _) => verify_binary(path, args.planned.as_deref(), mode),
        (None, Some(pid)) => verify_process(pid, args.ranges.as_deref(), mode),
        (None, None) => anyhow::bail!("give --binary BIN or --pid PID"),
    }
}

fn verify_binary(path: &Path, planned: Option<&Path>, mode: Mode) -> anyhow::Result<ExitCode> {
    let plan = planned
        .map(|file| {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read the linker input {}", file.display()))?;
            read_plan(&text).with_context(|| {
                format!(
                    "{} is not a linker input written by hottext order or fetch",
                    file.display()
                )
            })
        })
        .transpose()?;
    let binary = Binary::open(path).context("cannot verify")?;
    let report = BinaryChecked {
        report: check_binary(&binary, plan.as_ref()),
        links_runtime: binary.links_runtime,
    };
    output::emit(&report, mode)
}

/// A binary's report, with whether it links the runtime, which its human form says; the JSON
/// document is the report alone.
#[derive(Serialize)]
#[serde(transparent)]
struct BinaryChecked {
    report: HotTextReport,
    #[serde(skip)]
    links_runtime: bool,
}

/// docs/output.md's stream table rows of this verb: the stream its reports declare.
pub(crate) const STREAMS: &[(&str, output::Stream)] = &[
    ("verify --binary", <BinaryChecked as output::Report>::STREAM),
    ("verify --pid", <ProcessReport as output::Report>::STREAM),
];

impl output::Report for BinaryChecked {
    fn print(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        let report = &self.report;
        let (Some(start), Some(end)) = (report.start, report.end) else {
            return passed(out, report.passed());
        };
        writeln!(out, "binary      {}", report.binary)?;
        writeln!(
            out,
            "range       [{start:#x}, {end:#x})  {}",
            output::bytes(report.size)
        )?;
        let aligned = if report.start_aligned_2m {
            "yes, start on a 2 MiB boundary"
        } else {
            "NO"
        };
        writeln!(out, "aligned     {aligned}")?;
        let mapping = if report.file_offset_aligned_2m {
            "file offset 2 MiB aligned: the runtime can map the file itself on huge pages"
        } else {
            "file offset not 2 MiB aligned: the runtime will copy to anonymous huge pages"
        };
        writeln!(out, "file        {mapping}")?;
        writeln!(
            out,
            "hot text    {} functions, {} of code",
            report.hot.functions,
            output::bytes(report.hot.bytes)
        )?;
        writeln!(
            out,
            "2 MiB pages {} ({} the runtime can map; {} of padding after the last function)",
            report.huge_pages,
            report.mappable_huge_pages,
            output::bytes(report.end_padding)
        )?;
        let runtime = if self.links_runtime {
            "linked (hottext_hugify_self is in the binary)"
        } else {
            "not linked: link -lhottext_auto, or start it with LD_PRELOAD=libhottext_preload.so"
        };
        writeln!(out, "runtime     {runtime}")?;
        if let Some(plan) = &report.plan {
            writeln!(
                out,
                "planned     {} of {} planned functions in the range, {} not planned",
                plan.placed,
                plan.planned,
                plan.unplanned.len()
            )?;
        }
        passed(out, report.passed())
    }

    fn finish(&self, _mode: Mode) -> anyhow::Result<ExitCode> {
        for w in &self.report.warnings {
            output::warn(w);
        }
        Ok(verdict(self.report.passed(), &self.report.problems))
    }
}

fn verify_process(pid: Pid, ranges: Option<&Path>, mode: Mode) -> anyhow::Result<ExitCode> {
    let ranges = ranges
        .map(|path| {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the ranges file {}", path.display()))?;
            read_ranges(&text).with_context(|| format!("{} is no ranges file", path.display()))
        })
        .transpose()?;
    let report = check_process(pid, ranges.as_ref()).context("cannot verify")?;
    output::emit(&report, mode)
}

impl output::Report for ProcessReport {
    fn print(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        writeln!(out, "process     {} ({})", self.pid, self.executable)?;
        let size = self.hot_end.0.saturating_sub(self.hot_start.0);
        writeln!(
            out,
            "hot range   [{:#x}, {:#x})  {}",
            self.hot_start,
            self.hot_end,
            output::bytes(size)
        )?;
        writeln!(
            out,
            "huge pages  {} of {} 2 MiB pages",
            self.huge_pages,
            self.pages.len()
        )?;
        for p in &self.pages {
            let name = if p.mapping.is_empty() {
                "[anonymous]"
            } else {
                p.mapping.as_str()
            };
            writeln!(
                out,
                "  {:#014x}  {:<10} {name}",
                p.address,
                serde_json::to_value(p.backing)?.as_str().unwrap_or("?")
            )?;
        }
        passed(out, self.passed())
    }

    fn finish(&self, _mode: Mode) -> anyhow::Result<ExitCode> {
        Ok(verdict(self.passed(), &self.problems))
    }
}

/// The human form's last line when every check passed.
fn passed(out: &mut dyn Write, passed: bool) -> anyhow::Result<()> {
    if passed {
        writeln!(out, "ok")?;
    }
    Ok(())
}

/// Exit status 1, with each problem on stderr, when a check failed.
fn verdict(passed: bool, problems: &[String]) -> ExitCode {
    if passed {
        return ExitCode::SUCCESS;
    }
    for p in problems {
        eprintln!("hottext: verify failed: {p}");
    }
    ExitCode::from(1)
}
