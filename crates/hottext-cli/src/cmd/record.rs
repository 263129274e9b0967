//! `hottext record`: run perf the way that disturbs the program least, and say how it went.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::ValueEnum;
use hottext::binary::Binary;
use hottext::os::cancel;
use hottext::os::proc::Pid;
use hottext::profile::frame_pointer_share;
use hottext::profile::record::{
    affinity, check_frequency, check_seconds, plan, Machine, Outcome, Plan, Request, Sampling,
    Scope, Session, Target,
};
use hottext::profile::SampleKind;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use super::pid_arg;
use crate::output::{self, Stream};

/// How often to check on perf and redraw the progress line.
const TICK: Duration = Duration::from_millis(100);

/// Sample a program with perf: call stacks, or branch records where the CPU has them
///
/// Chooses what this machine supports and says why: branch records of calls (LBR) when the PMU
/// has them, else call stacks by frame pointers, or by DWARF unwinding (perf copies each
/// sample's stack; it costs more) when the program was built without frame pointers; the hardware cycle counter, else the software
/// clock; and, to keep the cost to the program small, CPU-wide sampling of the CPUs it runs on
/// rather than per-process events: --cpu N pins a --pid process to CPU N while recording, or
/// runs a command pinned to CPU N (under `taskset -c N`), and samples only that CPU. Without
/// --cpu, a command is sampled on every CPU hottext may use: every process there is recorded.
/// Prints the perf command line it ran, and what perf cost.
///
/// With --pid, records for --duration seconds, or until Ctrl-C or the process exits; with a
/// command, until the command exits (or --duration, or Ctrl-C). Ctrl-C, SIGTERM and SIGHUP
/// stop the recording as the duration would: perf writes its file, and the command and what
/// it started are stopped. perf and the command run in a process group of their own (stdin
/// from /dev/null when hottext's is a terminal), which is stopped even when hottext is killed.
///
/// The recorded command's stdout is hottext's stdout, so the report goes to stderr (with
/// --json, the JSON document is the last thing on stdout).
///
/// Examples:
///   hottext record -o perf.data -- ./server --port 8080
///   hottext record --pid 4242 --duration 30 --cpu 3
///   hottext record --cpu 1 -o perf.data -- ./bench --iterations 100
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The perf.data file to write.
    #[arg(short, long, value_name = "FILE", default_value = "perf.data")]
    output: PathBuf,
    /// Record this running process.
    #[arg(long, value_name = "PID", value_parser = pid_arg(), conflicts_with = "command")]
    pid: Option<Pid>,
    /// Stop after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    duration: Option<f64>,
    /// Pin the --pid process to this CPU while recording (its affinity is given back
    /// afterwards, unless hottext is killed with SIGKILL), or run the command pinned to it;
    /// either way sample only that CPU.
    #[arg(long, value_name = "N")]
    cpu: Option<u32>,
    /// Samples per second per CPU (capped by kernel.perf_event_max_sample_rate).
    #[arg(short = 'F', long, value_name = "HZ")]
    frequency: Option<u32>,
    /// Force call stacks (frame pointers or DWARF unwinding) or branch records instead of the
    /// best this machine and program allow.
    #[arg(long, value_enum)]
    sampling: Option<SamplingArg>,
    /// Use per-process events (perf -p) even where CPU-wide sampling would do.
    #[arg(long)]
    per_process: bool,
    #[command(flatten)]
    pub json: output::OutputArgs,
    /// The command to start and record (after --).
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

#[derive(Clone, Copy, ValueEnum)]
enum SamplingArg {
    /// Call stacks by frame pointers
    Stack,
    /// Call stacks by DWARF unwinding (perf --call-graph dwarf): for programs without frame
    /// pointers
    Dwarf,
    /// Branch records of calls (LBR)
    Branch,
    /// Branch records of every taken branch (perf -j any; LBR, AMD's BRS): fewer calls a
    /// sample, but the jumps and fall-throughs between a function's blocks, which `profile`
    /// writes as block edges for the cluster file's block order (a clang build with
    /// -fbasic-block-address-map)
    EveryBranch,
    /// Samples without stacks: the cheapest; `profile` infers the edges from the code
    Plain,
}

/// docs/output.md's stream table rows of this verb: the stream its reports declare.
pub(crate) const STREAMS: &[(&str, Stream)] = &[("record", <Summary as output::Report>::STREAM)];

#[derive(Serialize)]
struct Summary<'a> {
    perf_command: String,
    output: &'a PathBuf,
    sampling: SampleKind,
    event: &'a str,
    frequency: u32,
    /// "cpus 0-1" or "process".
    scope: String,
    reasons: &'a [String],
    /// perf's CPU time over the wall time: 0.02 is 2 % of one CPU.
    perf_cpu_fraction: f64,
    #[serde(flatten)]
    outcome: &'a Outcome,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let target = match (args.pid, args.command.is_empty()) {
        (Some(pid), _) => Target::Pid(pid),
        (None, false) => Target::Command(args.command.clone()),
        (None, true) => {
            bail!("give --pid PID or a command after --, e.g. hottext record -- ./server")
        }
    };
    let duration = match args.duration {
        Some(s) => {
            check_seconds("--duration", s).map_err(anyhow::Error::msg)?;
            Some(output::seconds("--duration", s)?)
        }
        None => None,
    };
    if let Some(f) = args.frequency {
        check_frequency("--frequency", f).map_err(anyhow::Error::msg)?;
    }
    let machine = Machine::probe().context("cannot tell what perf can do here")?;
    let runs_on = match &target {
        Target::Pid(pid) => {
            affinity(*pid).with_context(|| format!("cannot read where process {pid} may run"))?
        }
        Target::Command(_) => affinity(std::process::id() as i32)
            .context("cannot read this process's CPU affinity")?,
    };
    // Whether the program keeps frame pointers decides how stacks are unwound.
    let frame_pointer_share = program(&target)
        .and_then(|p| Binary::open(&p).ok())
        .and_then(|b| frame_pointer_share(&b));
    let request = Request {
        target,
        output: args.output.clone(),
        duration,
        frequency: args.frequency,
        pin_cpu: args.cpu,
        per_process: args.per_process,
        sampling: args.sampling.map(|s| match s {
            SamplingArg::Stack => Sampling::Stack,
            SamplingArg::Dwarf => Sampling::Dwarf,
            SamplingArg::Branch => Sampling::Branch,
            SamplingArg::EveryBranch => Sampling::EveryBranch,
            SamplingArg::Plain => Sampling::Plain,
        }),
        frame_pointer_share,
    };
    let plan = plan(&request, &machine, &runs_on)?;
    describe(&plan)?;
    output::parameters(
        "record",
        &serde_json::json!({
            "event": plan.event,
            "frequency_hz": plan.frequency,
            "sampling": plan.sampling,
            "every_branch": plan.every_branch,
            "scope": scope(&plan.scope),
            "duration_seconds": args.duration,
            "pin_cpu": args.cpu,
        }),
    );

    let outcome = record(&plan, duration)?;

    if let Some(e) = &outcome.restore_error {
        output::warn(format!(
            "could not give the process its CPU affinity back: {e}"
        ));
    }
    for line in outcome
        .perf_messages
        .lines()
        .filter(|l| !l.starts_with("[ perf record:"))
    {
        eprintln!("hottext: perf: {line}");
    }
    let summary = Summary {
        perf_command: plan.command_line(),
        output: &plan.output,
        sampling: plan.sampling,
        event: plan.event,
        frequency: plan.frequency,
        scope: scope(&plan.scope),
        reasons: &plan.reasons,
        perf_cpu_fraction: outcome.perf_cpu_seconds / outcome.wall_seconds.max(1e-9),
        outcome: &outcome,
    };
    output::emit(&summary, args.json.mode())
}

/// Runs perf as planned until it ends, the duration is up or the user interrupts, with a
/// progress bar of the time and the bytes written.
fn record(plan: &Plan, duration: Option<Duration>) -> anyhow::Result<Outcome> {
    // perf runs in a process group of its own: Ctrl-C, SIGTERM and SIGHUP reach hottext,
    // which stops perf as the duration would; perf writes its file and the report follows.
    let interrupted = cancel::on_interrupt();
    let mut session = Session::start(plan)?;
    let bar = progress_bar(duration);
    let outcome = loop {
        if let Some(outcome) = session.poll()? {
            break outcome;
        }
        if plan.stop_after().is_some_and(|d| session.elapsed() >= d)
            || interrupted.load(Ordering::SeqCst)
        {
            session.stop();
        }
        bar.set_position(session.elapsed().as_millis() as u64);
        bar.set_message(format!(
            "{} written",
            output::bytes(session.bytes_written())
        ));
        std::thread::sleep(TICK);
    };
    bar.finish_and_clear();
    Ok(outcome)
}

/// The executable of the target: the process's, or the command's (found on PATH as the shell
/// would); `None` when it cannot be found.
fn program(target: &Target) -> Option<PathBuf> {
    match target {
        Target::Pid(pid) => Some(hottext::os::proc::exe_link(*pid)),
        Target::Command(cmd) => hottext::os::shell::find_program(cmd.first()?),
    }
}

fn scope(scope: &Scope) -> String {
    match scope {
        Scope::Cpus(cpus) => format!("cpus {cpus}"),
        Scope::Process => "process".into(),
    }
}

/// What is about to happen and why, before perf starts (it may run for a long time).
fn describe(plan: &Plan) -> anyhow::Result<()> {
    let mut err = std::io::stderr().lock();
    let mode = plan.description();
    writeln!(
        err,
        "hottext: recording {mode} with {} at {} Hz",
        plan.event, plan.frequency
    )?;
    for r in &plan.reasons {
        writeln!(err, "  - {r}")?;
    }
    writeln!(err, "  $ {}", plan.command_line())?;
    Ok(())
}

fn progress_bar(duration: Option<Duration>) -> ProgressBar {
    let (bar, template) = match duration {
        Some(d) => (
            ProgressBar::new(d.as_millis() as u64),
            "{spinner} recording {elapsed_precise} {bar:30} {msg}",
        ),
        None => (
            ProgressBar::new_spinner(),
            "{spinner} recording {elapsed_precise} {msg} (Ctrl-C stops)",
        ),
    };
    bar.set_style(
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

impl output::Report for Summary<'_> {
    /// Stderr: a recorded command keeps stdout.
    const STREAM: Stream = Stream::Stderr;

    fn print(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        let s = self;
        let o = s.outcome;
        let samples = o.samples.map_or("?".to_string(), |n| n.to_string());
        writeln!(
            out,
            "hottext: wrote {} ({}, {samples} samples) in {:.1} s",
            s.output.display(),
            output::bytes(o.bytes),
            o.wall_seconds
        )?;
        writeln!(
            out,
            "  mode              {} sampling, {} on {}",
            s.sampling, s.event, s.scope
        )?;
        writeln!(
        out,
        "  perf's own cost   {:.1}% of one CPU ({:.2} s CPU); the kernel's sampling work is not included",
        100.0 * s.perf_cpu_fraction,
        o.perf_cpu_seconds
    )?;
        writeln!(
            out,
            "  next              hottext profile {} --binary BIN -o BIN.profile",
            s.output.display()
        )?;
        Ok(())
    }
}
