//! `hottext tune`: the best knob settings for a service, by A/B test.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use hottext::measure::ab::{Config, Regex, Service, ServiceMetric};
use hottext::measure::events::EventPlan;
use hottext::measure::stats::{Better, Verdict};
use hottext::os::cancel;
use hottext::os::cpus;
use hottext::tune::knobs::{self, may_write, Given, KnobSpec, Layout, KNOBS};
use hottext::tune::restore::{Lock, Restore, DEFAULT_STATE_DIR};
use hottext::tune::{tune, Plan, Report};

use crate::output;

/// Find the knob settings that make a service faster, by A/B test (the soft-SKU way)
///
/// For each knob, each other setting is compared with the current one by `hottext ab` (same
/// statistics, interleaved rounds): 6 rounds, doubled while the comparison is neither
/// significant nor hopeless (its interval inside 1 ± --min-effect), up to --max-runs. Then the
/// winners together are confirmed against everything as it was. The result: a table of knobs,
/// effects and intervals, and the configuration to apply (printed, never applied).
///
/// The knobs are listed under --knobs (default all); a knob this machine lacks is reported as
/// not available. System-wide settings are recorded in a restore file (--state-dir) before they
/// change and put back at the end, on Ctrl-C, and at the next start after a crash
/// (`tune --restore` does only that).
///
/// Examples:
///   hottext tune --command './server --requests 100000' --metric '([0-9]+) requests/s' --knobs thp,malloc
///   hottext tune --server './srv' --ready 'curl -sf localhost:8080' --load 'wrk -d10 http://localhost:8080/' --metric 'Requests/sec: *([0-9.]+)'
///   hottext tune --command './demo --requests 100000' --metric '([0-9]+) requests/s' \
///       --layout c3=./build/c3/demo --layout cdsort=./build/cdsort/demo --knobs layout,thp
///   hottext tune --restore
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// A command to run and measure (with sh -c).
    #[arg(long, value_name = "CMD", conflicts_with = "server", required_unless_present_any = ["server", "restore"])]
    command: Option<String>,
    /// A server to start (with sh -c), load and stop per round; needs --ready and --load.
    #[arg(long, value_name = "CMD", requires_all = ["ready", "load"])]
    server: Option<String>,
    /// Exits 0 once the server answers.
    #[arg(long, value_name = "CMD")]
    ready: Option<String>,
    /// The load against the server.
    #[arg(long, value_name = "CMD")]
    load: Option<String>,
    /// The figure to improve: group 1 of this pattern in the output (higher is better unless
    /// --lower-is-better); without it, CPU time (or wall time).
    #[arg(long, value_name = "REGEX")]
    metric: Option<String>,
    /// The figure's name in the report.
    #[arg(long, value_name = "NAME", default_value = "metric")]
    metric_name: String,
    /// The figure is better lower (a latency).
    #[arg(long)]
    lower_is_better: bool,
    /// Another layout for the `layout` knob: NAME=CMD, the command (or server) that runs it,
    /// e.g. c3=./build-c3/server, or a build and a run ('make -s LAYOUT=c3 && ./server').
    /// Repeat for each layout.
    #[arg(long, value_name = "NAME=CMD")]
    layout: Vec<Layout>,
    /// The service's executable, for the numa-text knob (where its page cache sits).
    #[arg(long, value_name = "BIN")]
    binary: Option<PathBuf>,
    /// The knobs to try, comma-separated.
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = knob_parser())]
    knobs: Vec<&'static KnobSpec>,
    /// Stop starting comparisons after this many minutes.
    #[arg(long, value_name = "MIN", default_value_t = 60.0)]
    budget: f64,
    /// Rounds a comparison may grow to.
    #[arg(long, value_name = "N", default_value_t = 24)]
    max_runs: usize,
    /// Effects smaller than this fraction are not worth having.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.02)]
    min_effect: f64,
    /// Where the restore file of system-wide settings lives.
    #[arg(long, value_name = "DIR", default_value = DEFAULT_STATE_DIR)]
    state_dir: PathBuf,
    /// Only put back what a crashed run left changed, and exit.
    #[arg(long)]
    restore: bool,
    #[command(flatten)]
    pub json: output::OutputArgs,
}

/// The state directory's lock; none when this user may not create it (then no knob may
/// change a system setting, which `tune` checks).
/// The parser of `--knobs`: the library's table of knobs, each with its help line.
fn knob_parser() -> impl TypedValueParser<Value = &'static KnobSpec> {
    let choices = KNOBS
        .iter()
        .map(|k| PossibleValue::new(k.name).help(k.help));
    PossibleValuesParser::new(choices)
        .map(|name| knobs::named(&name).expect("the parser accepts only the table's names"))
}

fn lock(dir: &Path) -> anyhow::Result<Option<Lock>> {
    match Lock::take(dir) {
        Ok(lock) => Ok(Some(lock)),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Ok(None),
        Err(e) => Err(e).with_context(|| format!("--state-dir {}", dir.display())),
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // Before the knobs read the current settings: a crashed run's changes are put back first,
    // so that its values are not taken for the current ones.
    let lock = lock(&args.state_dir)?;
    let recovered = match &lock {
        Some(held) => Restore::recover(&args.state_dir, held, &may_write)
            .with_context(|| format!("cannot restore from {}", args.state_dir.display()))?,
        None => Default::default(),
    };
    if args.restore {
        if lock.is_none() {
            bail!(
                "cannot open {}: run as the user that ran tune (root for system settings)",
                args.state_dir.display()
            );
        }
        for (path, value) in &recovered.put_back {
            println!("put back {} = {value}", path.display());
        }
        for path in &recovered.gone {
            println!("{} is gone: nothing to put back", path.display());
        }
        if recovered.put_back.is_empty() && recovered.gone.is_empty() {
            println!("nothing to put back");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let plan = plan(&args)?;
    let events = EventPlan::probe().context("cannot probe perf's events")?;
    let interrupted = cancel::on_interrupt();
    let report = tune(
        &plan,
        lock.as_ref(),
        recovered,
        &events,
        interrupted,
        &mut |what| {
            eprintln!("hottext: tune: {what}");
        },
    )?;
    output::emit(&report, args.json.mode())
}

/// docs/output.md's stream table rows of this verb: the stream its reports declare.
pub(crate) const STREAMS: &[(&str, output::Stream)] =
    &[("tune", <Report as output::Report>::STREAM)];

impl output::Report for Report {
    fn print(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        let r = self;
        for (path, value) in &r.recovered {
            writeln!(
                out,
                "put back {} = {value} (left changed by a run that crashed)",
                path.display()
            )?;
        }
        writeln!(
            out,
            "{:<12} {:<44} {:>24} {:>5}  verdict",
            "knob",
            "setting",
            format!("B/A of {}", r.metric),
            "runs"
        )?;
        let rows = r.trials.iter().chain(&r.confirmation);
        for t in rows {
            let ratio = t.ratio.map_or("-".into(), |(m, lo, hi)| {
                format!("{m:.3} [{lo:.3}, {hi:.3}]")
            });
            writeln!(
                out,
                "{:<12} {:<44} {:>24} {:>5}  {} ({})",
                t.knob,
                t.setting,
                ratio,
                t.runs,
                verdict_words(t.verdict),
                t.stopped
            )?;
        }
        for (knob, why) in &r.unavailable {
            writeln!(out, "{knob:<12} {why}")?;
        }
        for path in &r.recovered_gone {
            writeln!(
                out,
                "{} was left changed by a run that crashed and is gone now: nothing to put back",
                path.display()
            )?;
        }
        match &r.confirmation {
            _ if !r.apply.is_empty() => {}
            None => writeln!(
                out,
                "no setting beat the current one: keep the configuration as it is"
            )?,
            Some(c) => writeln!(
                out,
                "the winners together were not confirmed better ({}): keep the configuration as it is, or tune the winning knobs again one by one",
                verdict_words(c.verdict)
            )?,
        }
        if !r.apply.is_empty() {
            writeln!(out, "to apply:")?;
            for line in &r.apply {
                writeln!(out, "  {line}")?;
            }
        }
        Ok(())
    }
}

/// The trials' plan from the options, each checked: the knobs as probed on this machine, the
/// A/B settings of a trial, the budget.
fn plan(args: &Args) -> anyhow::Result<Plan> {
    if !(args.budget > 0.0 && args.budget <= 60.0 * 24.0 * 365.0) {
        bail!(
            "--budget {}: give minutes, more than 0 and at most a year",
            args.budget
        );
    }
    if let Some(binary) = &args.binary {
        if !binary.is_file() {
            bail!(
                "--binary {}: not a file; give the service's executable",
                binary.display()
            );
        }
    }
    if !(0.0..0.5).contains(&args.min_effect) {
        bail!("--min-effect {}: a fraction from 0 to 0.5", args.min_effect);
    }
    let allowed: Vec<u32> = cpus::own()
        .context("cannot read this process's CPU affinity")?
        .iter()
        .collect();
    let specs: Vec<&KnobSpec> = if args.knobs.is_empty() {
        KNOBS.iter().collect()
    } else {
        args.knobs.clone()
    };
    if !args.layout.is_empty() && !specs.iter().any(|k| k.name == "layout") {
        bail!("--layout is for the layout knob: add layout to --knobs");
    }
    let given = Given {
        cpus: &allowed,
        layouts: &args.layout,
        binary: args.binary.as_deref(),
        pinned_server: args.server.is_some(),
    };
    let knobs = specs.iter().map(|k| k.probe(&given)).collect();
    let metrics = match &args.metric {
        Some(pattern) => vec![ServiceMetric {
            pattern: Regex::new(pattern).with_context(|| format!("--metric {pattern:?}"))?,
            name: args.metric_name.clone(),
            better: if args.lower_is_better {
                Better::Lower
            } else {
                Better::Higher
            },
        }],
        None => vec![],
    };
    let (command, service) = match (&args.command, &args.server) {
        (Some(c), None) => (c.clone(), None),
        (None, Some(s)) => {
            let service = Service {
                ready: args.ready.clone().unwrap_or_default(),
                ready_timeout: Duration::from_secs(30),
                load: args.load.clone().unwrap_or_default(),
                cpu: *allowed.last().context("this process may run on no CPU")?,
                stop_timeout: Duration::from_secs(5),
            };
            (s.clone(), Some(service))
        }
        _ => bail!("give --command CMD, or --server CMD --ready CMD --load CMD"),
    };
    Ok(Plan {
        ab: Config {
            a: String::new(),
            b: String::new(),
            runs: 6,
            warmup: 1,
            service,
            metrics,
            expect_same: None,
            setup: Default::default(),
        },
        command,
        knobs,
        min_runs: 6,
        max_runs: args.max_runs.max(6),
        min_effect: args.min_effect,
        budget: output::seconds("--budget", args.budget * 60.0)?,
        state_dir: args.state_dir.clone(),
    })
}

/// `b-better` → `b better`.
fn verdict_words(verdict: Verdict) -> String {
    serde_json::to_value(verdict)
        .ok()
        .and_then(|v| v.as_str().map(|w| w.replace('-', " ")))
        .unwrap_or_default()
}
