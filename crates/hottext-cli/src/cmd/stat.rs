//! `hottext stat`: the counters that tell whether hot text helps, for one command.

use std::ffi::OsString;
use std::io::Write;
use std::process::{ExitCode, Stdio};
use std::sync::atomic::Ordering;

use anyhow::{bail, Context};
use std::os::fd::AsFd;

use hottext::measure::counts::{Counts, METRICS};
use hottext::measure::events::{Counter, EventPlan, Vendor};
use hottext::measure::{perf_stat, stat};
use hottext::os::cancel;
use serde::Serialize;

use crate::output::{self, number, with_unit, Mode, Stream};

/// Count a command's instructions, cycles, iTLB walks and L1i misses, and its time
///
/// `perf stat` counts instructions, cycles, instruction-TLB walks, iTLB hits by page size and
/// L1 instruction-cache misses, plus wall time, CPU time, context switches and page faults, for
/// the command and every process it starts.
///
/// The events are the CPU vendor's own, not perf's generic aliases (which mean other things on
/// AMD and Intel): each is probed with `perf stat -e EV true` first, and the report names the
/// ones this machine lacks. Without a hardware PMU (most VMs) only the software figures are
/// counted, and the report says so. Counters that had to share (multiplexing) are flagged.
///
/// The command writes to hottext's stdout and stderr; perf writes its counts to a file, so
/// they are untouched. The report goes to stderr; with --json it goes to stdout, and the
/// command's stdout is sent to stderr so that stdout holds only the JSON. perf and the command
/// run in a process group of their own, with stdin from /dev/null when hottext's is a
/// terminal: Ctrl-C, SIGTERM or SIGHUP to hottext sends them SIGINT, perf writes what it
/// counted, the report shows it, and what still runs 2 s later is stopped. Nothing outlives
/// hottext, even when it is killed.
///
/// Exit status: 0, or 1 when the command failed (exited non-zero or was killed; its counts are
/// still shown), 2 when perf cannot run, the command cannot start, or the run was interrupted.
///
/// Examples:
///   hottext stat -- ./server --requests 100000
///   hottext stat --json -- sh -c 'make -j2' > counts.json
///   hottext stat --simulate --baseline './server --requests 100' -- ./server --requests 10000
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[command(flatten)]
    pub json: output::OutputArgs,
    /// Simulate instead of counting: run the command under valgrind's cachegrind with models
    /// of the L1 iTLB, L2 iTLB and L1i (this CPU's geometry where known) and report exact
    /// instructions and misses per million instructions; for machines without a PMU. The
    /// "huge" iTLB rows put a hot range's whole 2 MiB pages on 2 MiB pages, as the runtime does.
    #[arg(long)]
    simulate: bool,
    /// With --simulate: the same program doing less work (a smaller input), run the same way;
    /// its counts are subtracted so that start-up cancels out.
    #[arg(long, value_name = "CMD", requires = "simulate")]
    baseline: Option<String>,
    /// The command and its arguments (put them after --).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    command: Vec<OsString>,
}

#[derive(Serialize)]
struct Report<'a> {
    command: Vec<String>,
    exit_code: Option<i32>,
    vendor: Vendor,
    hardware_pmu: bool,
    /// Every figure, with the perf event that counted it.
    figures: Vec<Figure<'a>>,
    /// Derived figures (IPC, misses per instruction) where their inputs were counted.
    derived: Vec<Figure<'a>>,
    events: &'a EventPlan,
    counts: &'a Counts,
    readings: &'a [perf_stat::Reading],
    interrupted: bool,
}

#[derive(Serialize)]
struct Figure<'a> {
    key: &'a str,
    label: &'a str,
    unit: &'a str,
    event: Option<&'a str>,
    value: Option<f64>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // perf and the command run in a process group of their own: Ctrl-C (or SIGTERM, SIGHUP)
    // reaches hottext, which passes SIGINT on; perf then writes what it counted, and we show it.
    let interrupted = cancel::on_interrupt();
    let mode = args.json.mode();
    if args.simulate {
        // The simulator runs a shell line; the words are quoted back into one.
        let words: Vec<&str> = args
            .command
            .iter()
            .map(|w| w.to_str())
            .collect::<Option<_>>()
            .context("--simulate runs a shell line: a word of the command is not UTF-8")?;
        let command = hottext::os::shell::join(words.iter().copied());
        return super::simulate::run_stat(&command, args.baseline.as_deref(), mode, interrupted);
    }
    let plan = EventPlan::probe().context("cannot probe perf's events")?;
    if interrupted.load(Ordering::SeqCst) {
        bail!("interrupted");
    }
    output::parameters("stat", &event_parameters(&plan));
    let run =
        stat(&plan, &args.command, command_stdout(mode)?, interrupted).context("cannot count")?;

    let figures: Vec<Figure> = Counter::SOFTWARE
        .iter()
        .chain(&Counter::HARDWARE)
        .filter_map(|&c| {
            let metric = METRICS.iter().find(|m| m.counter == Some(c))?;
            Some(Figure {
                key: metric.key,
                label: metric.label,
                unit: metric.unit,
                event: plan.event_of(c),
                value: run.counts.get(c),
            })
        })
        .collect();
    let derived: Vec<Figure> = METRICS
        .iter()
        .filter(|m| m.counter.is_none())
        .filter_map(|m| {
            Some(Figure {
                key: m.key,
                label: m.label,
                unit: m.unit,
                event: None,
                value: Some((m.value)(&run.counts)?),
            })
        })
        .collect();
    let report = Report {
        command: args
            .command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        exit_code: run.exit_code,
        vendor: plan.vendor,
        hardware_pmu: plan.has_hardware_pmu(),
        figures,
        derived,
        events: &plan,
        counts: &run.counts,
        readings: &run.readings,
        interrupted: interrupted.load(Ordering::SeqCst),
    };
    output::emit(&report, mode)
}

/// The measured command's stdout: the terminal's, or stderr under --json, so that the JSON
/// document stays alone on stdout.
fn command_stdout(mode: Mode) -> anyhow::Result<Stdio> {
    match mode {
        Mode::Human => Ok(Stdio::inherit()),
        Mode::Json => {
            let fd = std::io::stderr()
                .as_fd()
                .try_clone_to_owned()
                .context("cannot pass the command's stdout to stderr")?;
            Ok(Stdio::from(fd))
        }
    }
}

/// "exited 0", "FAILED with exit status 3", or "was ended by a signal".
fn how_it_ended(exit_code: Option<i32>) -> String {
    match exit_code {
        Some(0) => "exited 0".to_string(),
        Some(code) => format!("FAILED with exit status {code}"),
        None => "was ended by a signal".to_string(),
    }
}

/// docs/output.md's stream table rows of this verb: the stream its reports declare.
pub(crate) const STREAMS: &[(&str, Stream)] = &[
    ("stat", <Report as output::Report>::STREAM),
    ("stat --simulate", super::simulate::STAT_STREAM),
];

impl output::Report for Report<'_> {
    /// Stderr: stdout is the measured command's.
    const STREAM: Stream = Stream::Stderr;

    fn print(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        let r = self;
        let status = how_it_ended(r.exit_code);
        writeln!(
            out,
            "\nhottext stat: {} {status}",
            output_command(&r.command)
        )?;
        for f in r.figures.iter().chain(&r.derived) {
            let label = with_unit(f.label, f.unit);
            match (f.value, f.event) {
                (Some(v), Some(e)) => writeln!(out, "  {label:<28} {:>16}   {e}", number(v))?,
                (Some(v), None) => writeln!(out, "  {label:<28} {:>16}", number(v))?,
                (None, Some(e)) => writeln!(out, "  {label:<28} {:>16}   {e}", "not counted")?,
                (None, None) if r.hardware_pmu => {
                    writeln!(out, "  {label:<28} {:>16}", "not on this CPU")?
                }
                (None, None) => {}
            }
        }
        if !r.hardware_pmu {
            writeln!(
            out,
            "hottext: no hardware PMU: instructions/cycles/iTLB not available (usual in a VM); \
             only software events were counted"
        )?;
        }
        if !r.events.missing.is_empty() {
            writeln!(out, "hottext: events this {} CPU lacks:", r.vendor)?;
            for m in &r.events.missing {
                let tried: Vec<String> = m
                    .tried
                    .iter()
                    .map(|t| format!("{} {}", t.event, t.probe.describe()))
                    .collect();
                writeln!(out, "  {:<18} {}", m.counter.label(), tried.join("; "))?;
            }
        }
        for m in &r.counts.multiplexed {
            output::warn(format!(
                "{} was multiplexed: counted {:.1} % of the time, value scaled up",
                m.event,
                100.0 * m.enabled_fraction
            ));
        }
        Ok(())
    }

    /// Exit status 1 when the command failed; under --json the human report, which says so,
    /// is not printed, so the reason goes to stderr.
    fn finish(&self, mode: Mode) -> anyhow::Result<ExitCode> {
        if self.interrupted {
            bail!("interrupted");
        }
        if self.exit_code == Some(0) {
            return Ok(ExitCode::SUCCESS);
        }
        if mode == Mode::Json {
            eprintln!(
                "hottext: stat: the command {}",
                how_it_ended(self.exit_code)
            );
        }
        Ok(ExitCode::from(1))
    }
}

/// The perf event that counts each figure, for `--verbose` (stat and ab count the same ones).
pub fn event_parameters(plan: &EventPlan) -> serde_json::Value {
    let events: serde_json::Map<String, serde_json::Value> = Counter::SOFTWARE
        .iter()
        .chain(&Counter::HARDWARE)
        .map(|&c| {
            let event = plan.event_of(c).unwrap_or("(not on this machine)");
            (c.label().to_string(), event.into())
        })
        .collect();
    serde_json::json!({ "vendor": plan.vendor, "events": events })
}

fn output_command(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "'\"$`\\".contains(c)) {
                format!("'{}'", a.replace('\'', r"'\''"))
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
