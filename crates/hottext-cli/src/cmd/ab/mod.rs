//! `hottext ab`: is B (say, the hot-text build) better than A, and is the difference real.

mod simulated;
mod table;

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::{bail, Context};
use hottext::measure::ab::{self, Config, Regex, RunRecord, Service, ServiceMetric};
use hottext::measure::events::{Counter, EventPlan};
use hottext::measure::stats::{Better, MIN_ROUNDS};
use hottext::os::cancel;
use hottext::os::cpus;
use indicatif::{ProgressBar, ProgressStyle};

use super::stat::event_parameters;

use crate::output;

/// Compare A and B: interleaved runs, counters, B/A with a 95 % interval, a verdict
///
/// A and B run interleaved (warm-up first, then A B, B A, A B, ...), each run counted with perf
/// (the same events as `hottext stat`). For every metric the report gives the medians, the
/// median of the per-round B/A ratios with a 95 % confidence interval, and a verdict: B better,
/// B worse, or no significant difference. Lower is better for time, cycles, instructions and
/// misses; higher for IPC and for a --metric marked --higher-is-better.
///
/// The interval is distribution-free (order statistics of the ratios, the sign-test method);
/// it needs at least 6 rounds, and 10 or more give a tighter one. Noise is reported: intervals
/// wider than ±5 %, multiplexed counters, CPU frequency that moved. On a pure layout change
/// instructions should not move at all; judge by cycles (they vary 1–9 % between runs, wall
/// time about twice that).
///
/// Before the first run, both sides' executables (the commands' first words) are dropped from
/// the page cache: how a file was written decides how the kernel maps it (BOLT writes its output
/// in large chunks, which can then map in 2 MiB pieces), and the comparison is of the code.
///
/// Commands (-a/-b) run with `sh -c` under `perf stat`, counting each command's process tree.
/// The service form starts the side's server with `sh -c`, pinned to --cpu, in its own process
/// group; runs --ready until it exits 0; counts everything on that CPU (`perf stat -a -C N`)
/// while --load runs on the other CPUs (counting the server's process instead slowed it about
/// 4× on VMs); then stops it: SIGTERM to its whole process tree, SIGKILL after --stop-timeout.
/// A server is never left behind, on errors and Ctrl-C included. The server's CPU time during
/// the load is read from /proc.
///
/// --simulate runs each side once per offset under valgrind's cachegrind instead (models of
/// the L1 iTLB, L2 iTLB and L1i; exact instruction counts; misses per million instructions),
/// for machines without a PMU; see the options. The rows "L1 iTLB huge" and "L2 iTLB huge"
/// put the hot range's whole 2 MiB pages on 2 MiB pages, as the runtime maps them, and the
/// rest of the code on 4 KiB pages: what the huge pages add (one more run for a binary with the
/// hot range's markers; without them, the 4 KiB figures). A server's figures are its lifetime under the
/// load minus a lifetime under --baseline-load (or none), so start-up cancels out; raise
/// --ready-timeout, as valgrind runs a program 20-50× slower. Every process the server starts
/// is counted (a master and its workers, also after they switch user); the server must stay in
/// the foreground (nginx: -g 'daemon off;'). Give it a load that does a fixed amount of work
/// (ab -n N, not wrk -d): a timed load does more or less work from run to run. With --simulate,
/// --metric is that count of work (requests served; one --metric), and the report adds each
/// figure per unit of it; --expect-same checks every measured run. The runs go side by side
/// (--jobs); servers only when their commands name {slot}, each slot with its own port.
///
/// Exit status: 0 when the comparison ran (whatever the verdict), 1 when a run's command, server
/// or load failed (exited non-zero or was killed, as for `hottext stat`) or --expect-same found
/// different outputs, 2 when the arguments are wrong, perf cannot run or a server never got
/// ready.
///
/// Examples:
///   hottext ab --runs 10 --warmup 1 -a './base --requests 100000' -b './hot --requests 100000'
///   hottext ab -a ./base-bfd -b ./hot-bfd --expect-same 'checksum: ([0-9a-f]+)' --json
///   hottext ab -a ./srv -b ./srv --setup-b 'dd if=./srv iflag=nocache count=0'
///   hottext ab --server-a './base --port 8080' --server-b './hot --port 8080' \
///       --ready 'curl -sf http://127.0.0.1:8080/' --load 'wrk -d10 http://127.0.0.1:8080/' \
///       --metric 'Requests/sec: *([0-9.]+)' --metric-name rps --higher-is-better
///   hottext ab --server-a ... --server-b ... --ready ... --load 'pgbench -n -S -T 10 -P 60' \
///       --metric 'tps = ([0-9.]+)' --metric-name tps --higher-is-better tps \
///       --metric 'latency average = ([0-9.]+) ms' --metric-name latency-ms
///   hottext ab --simulate -a './base 100000' -b './hot 100000' \
///       --baseline-a './base 1000' --baseline-b './hot 1000'
///   hottext ab --simulate --offsets 0,64,128,192 -a ./base -b './hot-{offset}'
///   hottext ab --simulate --jobs 2 --server-a "nginx -c $PWD/a-{slot}.conf -g 'daemon off;'" \
///       --server-b "nginx -c $PWD/b-{slot}.conf -g 'daemon off;'" --ready-timeout 300 \
///       --ready 'curl -sf http://127.0.0.1:808{slot}/' --load 'ab -n 2000 http://127.0.0.1:808{slot}/' \
///       --metric 'Complete requests: *([0-9]+)' --metric-name request
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Command A (run with sh -c).
    #[arg(
        short = 'a',
        long = "command-a",
        value_name = "CMD",
        required_unless_present = "server_a",
        conflicts_with = "server_a",
        requires = "b"
    )]
    a: Option<String>,
    /// Command B (run with sh -c).
    #[arg(short = 'b', long = "command-b", value_name = "CMD", requires = "a")]
    b: Option<String>,
    /// Server A (run with sh -c); needs --server-b, --ready and --load.
    #[arg(long, value_name = "CMD", requires_all = ["server_b", "ready", "load"])]
    server_a: Option<String>,
    /// Server B (run with sh -c), started the same way.
    #[arg(long, value_name = "CMD", requires = "server_a")]
    server_b: Option<String>,
    /// Exits 0 once the server answers (polled every 100 ms).
    #[arg(long, value_name = "CMD", requires = "server_a")]
    ready: Option<String>,
    /// Seconds to wait for --ready.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    ready_timeout: f64,
    /// The load against the server; the counts cover its run.
    #[arg(long, value_name = "CMD", requires = "server_a")]
    load: Option<String>,
    /// The CPU the server is pinned to and counted on (default: the last one we may use).
    #[arg(long, value_name = "N", requires = "server_a")]
    cpu: Option<u32>,
    /// Seconds between SIGTERM and SIGKILL when stopping a server.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    stop_timeout: f64,
    /// Measured rounds (one run of A and one of B each); at least 6.
    #[arg(long, value_name = "N", default_value_t = 10)]
    runs: usize,
    /// Rounds run first and not counted.
    #[arg(long, value_name = "N", default_value_t = 1)]
    warmup: usize,
    /// A number each run prints (stdout, else stderr; of the load in the service form):
    /// capture group 1 of this regular expression, e.g. 'tps = ([0-9.]+)'. Repeat it for
    /// several numbers (throughput and latency); the first is the headline. With --simulate,
    /// once: the count of work a run did (e.g. 'Complete requests: *([0-9]+)'), by which the
    /// simulated counts are divided.
    #[arg(long, value_name = "REGEX")]
    metric: Vec<String>,
    /// The name of the --metric at the same position in the report (default: metric,
    /// metric-2, ...).
    #[arg(long, value_name = "NAME", requires = "metric")]
    metric_name: Vec<String>,
    /// A higher value is better (throughput) for the named --metric, or for every --metric
    /// when no name is given; the others are better lower (latency). Repeatable.
    #[arg(long, value_name = "NAME", num_args = 0..=1, requires = "metric")]
    higher_is_better: Option<Vec<String>>,
    /// Every run must print the same text for group 1 of this regular expression (e.g. a
    /// checksum); exit status 1 otherwise.
    #[arg(long, value_name = "REGEX")]
    expect_same: Option<String>,
    /// A shell line run before each run of A, not counted (e.g. a page cache to drop).
    #[arg(long, value_name = "CMD", conflicts_with = "simulate")]
    setup_a: Option<String>,
    /// A shell line run before each run of B, not counted.
    #[arg(long, value_name = "CMD", conflicts_with = "simulate")]
    setup_b: Option<String>,
    /// Simulate instead of counting: run each side under valgrind's cachegrind with models of
    /// the L1 iTLB, L2 iTLB (on 4 KiB pages, and with the hot range on 2 MiB pages) and L1i,
    /// and compare exact instruction counts and misses per million instructions (for
    /// machines without a hardware PMU). One run per side and
    /// offset: simulated counts do not vary between runs of the same work, so --runs does not
    /// apply (a server's load must do a fixed amount of work: ab -n N, not wrk -d).
    #[arg(long, conflicts_with = "higher_is_better")]
    simulate: bool,
    /// With --simulate: simulations at once (default: the CPUs this process may use). Servers
    /// side by side need a port each: the service form runs more than one at once only when
    /// --server-a and --server-b name {slot} (0, 1, ...; e.g. 'listen 1808{slot}'), which is
    /// also substituted in --ready, --load and --baseline-load.
    #[arg(long, value_name = "N", requires = "simulate")]
    jobs: Option<usize>,
    /// With --simulate: start offsets of the hot range in bytes, substituted for {offset} in
    /// the commands (e.g. -b './hot-{offset}' for binaries linked with `hottext order
    /// --hot-offset N`), to tell a layout's effect from set-conflict luck.
    #[arg(
        long,
        value_name = "BYTES,...",
        value_delimiter = ',',
        requires = "simulate"
    )]
    offsets: Vec<u64>,
    /// With --simulate: command A doing less work (a smaller input); its counts are
    /// subtracted, so that start-up cancels out.
    #[arg(long, value_name = "CMD", requires_all = ["simulate", "baseline_b", "a"])]
    baseline_a: Option<String>,
    /// With --simulate: the same for command B.
    #[arg(long, value_name = "CMD", requires_all = ["simulate", "baseline_a"])]
    baseline_b: Option<String>,
    /// With --simulate and a server: the load of the baseline lifetime whose counts are
    /// subtracted (default: none; the server starts, gets ready and stops).
    #[arg(long, value_name = "CMD", requires_all = ["simulate", "server_a"])]
    baseline_load: Option<String>,
    #[command(flatten)]
    pub json: output::OutputArgs,
}

/// docs/output.md's stream table rows of this verb: the stream its reports declare.
pub(crate) const STREAMS: &[(&str, output::Stream)] =
    &[("ab", table::STREAM), ("ab --simulate", simulated::STREAM)];

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.runs < MIN_ROUNDS {
        bail!(
            "--runs {}: a 95 % interval for a median needs at least {MIN_ROUNDS} rounds (10 or more give a usable one)",
            args.runs
        );
    }
    let config = config(&args)?;
    // From here on Ctrl-C stops the current run and any server, then ends with an error.
    let interrupted = cancel::on_interrupt();
    let mode = args.json.mode();
    if args.simulate {
        return simulated::run(simulated::config(&args, config)?, mode, interrupted);
    }
    let plan = EventPlan::probe().context("cannot probe perf's events")?;
    output::parameters("ab", &parameters(&config, &plan));
    if !plan.has_hardware_pmu() {
        output::warn("no hardware PMU: instructions/cycles/iTLB not available; comparing time (and the --metric) only");
    }
    let bar = progress_bar(2 * (args.runs + args.warmup) as u64);
    let mut progress = |r: &RunRecord, done: usize, _total: usize| {
        bar.set_position(done as u64);
        let wall = r
            .counts
            .get(Counter::WallTime)
            .map_or(String::new(), |w| format!(" {w:.3} s"));
        let metric = match (r.metrics.first(), config.metrics.first()) {
            (Some(value), Some(m)) => format!(" {} {value}", m.name),
            _ => String::new(),
        };
        let round = if r.warmup {
            format!("warm-up {}", r.round + 1)
        } else {
            format!("round {}/{}", r.round + 1, args.runs)
        };
        bar.set_message(format!("{round} {:?}{wall}{metric}", r.side));
    };
    let result = ab::run(&config, &plan, interrupted, &mut progress);
    bar.finish_and_clear();
    let report = match result {
        Ok(report) => report,
        Err(e) if e.is_command_failure() => {
            return Err(output::failed(format!("A/B run stopped: {e}")))
        }
        Err(e) => return Err(anyhow::Error::new(e).context("A/B run stopped")),
    };

    output::emit(&report, mode)
}

/// Exit status 1, saying what differed, when --expect-same found different outputs (`same`:
/// each text seen and in how many runs); else success. Timed and simulated A/B runs alike.
pub(crate) fn expect_same_status(differ: bool, same: &BTreeMap<String, usize>) -> ExitCode {
    if !differ {
        return ExitCode::SUCCESS;
    }
    let seen: Vec<String> = same
        .iter()
        .map(|(text, n)| format!("'{text}' in {n} runs"))
        .collect();
    eprintln!(
        "hottext: ab failed: --expect-same found different outputs: {}",
        seen.join(", ")
    );
    ExitCode::from(1)
}

fn config(args: &Args) -> anyhow::Result<Config> {
    let regex = |option: &str, pattern: &str| {
        Regex::new(pattern)
            .with_context(|| format!("{option} '{pattern}' is not a regular expression"))
    };
    let metrics = metrics(args, &regex)?;
    let expect_same = args
        .expect_same
        .as_deref()
        .map(|p| regex("--expect-same", p))
        .transpose()?;
    let seconds = output::seconds;
    let (a, b, service) = match (&args.a, &args.b, &args.server_a, &args.server_b) {
        (Some(a), Some(b), None, None) => (a.clone(), b.clone(), None),
        (None, None, Some(a), Some(b)) => {
            let (Some(ready), Some(load)) = (&args.ready, &args.load) else {
                bail!("the service form needs --ready CMD and --load CMD");
            };
            let cpu = match args.cpu {
                Some(cpu) => cpu,
                None => cpus::own()
                    .context("cannot read this process's CPU affinity")?
                    .iter()
                    .last()
                    .context("this process may run on no CPU")?,
            };
            let service = Service {
                ready: ready.clone(),
                ready_timeout: seconds("--ready-timeout", args.ready_timeout)?,
                load: load.clone(),
                cpu,
                stop_timeout: seconds("--stop-timeout", args.stop_timeout)?,
            };
            (a.clone(), b.clone(), Some(service))
        }
        _ => {
            bail!("give -a CMD and -b CMD, or --server-a CMD --server-b CMD --ready CMD --load CMD")
        }
    };
    Ok(Config {
        a,
        b,
        runs: args.runs,
        warmup: args.warmup,
        service,
        metrics,
        expect_same,
        setup: [
            args.setup_a.clone().unwrap_or_default(),
            args.setup_b.clone().unwrap_or_default(),
        ],
    })
}

/// The --metric options with their names (by position) and directions.
fn metrics(
    args: &Args,
    regex: &dyn Fn(&str, &str) -> anyhow::Result<Regex>,
) -> anyhow::Result<Vec<ServiceMetric>> {
    if args.metric_name.len() > args.metric.len() {
        bail!(
            "{} --metric-name for {} --metric: give one name per --metric, in the same order",
            args.metric_name.len(),
            args.metric.len()
        );
    }
    let names: Vec<String> = (0..args.metric.len())
        .map(|i| match args.metric_name.get(i) {
            Some(name) => name.clone(),
            None if i == 0 => "metric".to_string(),
            None => format!("metric-{}", i + 1),
        })
        .collect();
    let higher = args.higher_is_better.as_deref();
    for name in higher.unwrap_or_default() {
        if !names.contains(name) {
            bail!(
                "--higher-is-better {name}: no --metric is named that (names: {})",
                names.join(", ")
            );
        }
    }
    let mut metrics = Vec::new();
    for (pattern, name) in args.metric.iter().zip(&names) {
        if metrics.iter().any(|m: &ServiceMetric| &m.name == name) {
            bail!("--metric-name {name} is given twice; each --metric needs its own name");
        }
        if ab::is_counted_key(name) {
            bail!("--metric-name {name} is the name of a counted figure; choose another");
        }
        let better = match higher {
            Some(names) if names.is_empty() || names.contains(name) => Better::Higher,
            _ => Better::Lower,
        };
        metrics.push(ServiceMetric {
            pattern: regex("--metric", pattern)?,
            name: name.clone(),
            better,
        });
    }
    Ok(metrics)
}

/// What `--verbose` shows: the rounds, the service's settings, the metrics, the events.
fn parameters(config: &Config, plan: &EventPlan) -> serde_json::Value {
    let metrics: Vec<serde_json::Value> = config
        .metrics
        .iter()
        .map(|m| {
            serde_json::json!({
                "name": m.name,
                "regex": m.pattern.as_str(),
                "better": m.better,
            })
        })
        .collect();
    serde_json::json!({
        "runs": config.runs,
        "warmup": config.warmup,
        "cpu": config.service.as_ref().map(|s| s.cpu),
        "ready_timeout_seconds": config.service.as_ref().map(|s| s.ready_timeout.as_secs_f64()),
        "stop_timeout_seconds": config.service.as_ref().map(|s| s.stop_timeout.as_secs_f64()),
        "metrics": metrics,
        "counting": event_parameters(plan),
    })
}

fn progress_bar(runs: u64) -> ProgressBar {
    let bar = ProgressBar::new(runs);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {pos}/{len} runs {bar:20} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}
