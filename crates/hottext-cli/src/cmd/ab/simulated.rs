//! `ab --simulate`: its settings from the command line, its runs and its table.

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;

use anyhow::{bail, Context};
use hottext::measure::ab::{Config, Side};
use hottext::measure::simulate::compare::{self, SimConfig, SimRecord, SimReport};
use hottext::measure::simulate::{Checks, HotRanges, Model};
use hottext::os::cpus;
use indicatif::{ProgressBar, ProgressStyle};

use super::Args;
use crate::cmd::simulate::{models, print_hot_ranges, print_models, stopped};
use crate::output::{self, number, with_unit, Comparison, ComparisonColumns, Mode};
use serde::Serialize;

/// The --simulate run's settings: offsets once each, the --metric as the count of work, the
/// number of simulations at once.
pub(super) fn config(args: &Args, config: Config) -> anyhow::Result<SimConfig> {
    let mut offsets = Vec::new();
    for &offset in &args.offsets {
        if !offsets.contains(&offset) {
            offsets.push(offset); // each offset once: runs share a directory per offset
        }
    }
    if offsets.is_empty() {
        offsets.push(0);
    }
    if config.metrics.len() > 1 {
        bail!(
            "--simulate takes one --metric, the count of work a run did (e.g. 'Complete requests: *([0-9]+)'); {} given",
            config.metrics.len()
        );
    }
    let own: Vec<u32> = cpus::own()
        .context("cannot read this process's CPU affinity")?
        .iter()
        .collect();
    let first = config.service.as_ref().map(|s| s.cpu);
    let cpus = first
        .into_iter()
        .chain(own.iter().copied().filter(|&c| Some(c) != first))
        .collect();
    let metric = config.metrics.into_iter().next();
    let mut sim = SimConfig {
        a: config.a,
        b: config.b,
        baseline_a: args.baseline_a.clone(),
        baseline_b: args.baseline_b.clone(),
        service: config.service,
        baseline_load: args.baseline_load.clone(),
        offsets,
        work_name: metric.as_ref().map_or_else(String::new, |m| m.name.clone()),
        checks: Checks {
            work: metric.map(|m| m.pattern),
            expect_same: config.expect_same,
        },
        jobs: 1,
        cpus,
    };
    let parallel_ok = sim.service.is_none() || sim.names_slot();
    sim.jobs = match args.jobs {
        Some(0) => bail!("--jobs 0: give at least 1"),
        Some(n) if n > 1 && !parallel_ok => bail!(
            "--jobs {n}: servers side by side would listen on the same port; put {{slot}} in \
             --server-a and --server-b where the port goes (e.g. -c nginx-{{slot}}.conf), and in \
             --ready and --load, or use --jobs 1"
        ),
        Some(n) => n,
        None if parallel_ok => own.len().max(1),
        None => 1,
    };
    Ok(sim)
}

/// How many runs a side takes: one per model, the 2 MiB-page models one together, and only for
/// a binary with a hot range; each with its baseline.
fn runs_per_side(models: &[Model]) -> String {
    let small = models.iter().filter(|m| m.huge_pages.is_none()).count();
    let huge = models.len() - small;
    match huge {
        0 => format!("{small} runs a side"),
        _ => format!(
            "{small} runs a side, one more for a binary with a hot range (its {huge} models of 2 MiB pages)"
        ),
    }
}

fn spinner(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    let template = format!("{{spinner}} {{pos}}/{{len}} {what} {{elapsed}} {{msg}}");
    bar.set_style(
        ProgressStyle::with_template(&template).unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}

pub(super) fn run(
    config: SimConfig,
    mode: Mode,
    interrupted: &AtomicBool,
) -> anyhow::Result<ExitCode> {
    if config.offsets.len() > 1 && !config.names_offset() {
        bail!(
            "--offsets {:?}: neither command names {{offset}}, so every offset would run the same binaries; \
             put {{offset}} where the command picks the binary linked at that offset \
             (hottext order --hot-offset N)",
            config.offsets
        );
    }
    let models = models()?;
    eprintln!(
        "hottext: simulating {} side(s) under valgrind (20-50× slower than native), {} at once: {}",
        2 * config.offsets.len(),
        config.jobs,
        runs_per_side(&models)
    );
    let bar = spinner(2 * config.offsets.len() as u64, "simulated runs");
    let mut progress = |r: &SimRecord, done: usize, _: usize| {
        bar.set_position(done as u64);
        bar.set_message(format!("offset {} {:?}", r.offset, r.side));
    };
    let result = compare::run(&config, &models, interrupted, &mut progress);
    bar.finish_and_clear();
    let report = result.map_err(|e| stopped(e, "simulated A/B run"))?;
    output::emit(
        &Shown {
            report: &report,
            config: &config,
        },
        mode,
    )
}

/// The simulated A/B report, with the settings its human form names (the commands, the
/// measure of work); the JSON document is the report alone.
#[derive(Serialize)]
#[serde(transparent)]
struct Shown<'a> {
    report: &'a SimReport,
    #[serde(skip)]
    config: &'a SimConfig,
}

/// The stream of `ab --simulate`'s report (`ab::STREAMS`).
pub(super) const STREAM: output::Stream = <Shown as output::Report>::STREAM;

impl output::Report for Shown<'_> {
    fn print(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        print_report(out, self.config, self.report)
    }

    fn finish(&self, _mode: Mode) -> anyhow::Result<ExitCode> {
        let r = self.report;
        Ok(super::expect_same_status(
            r.outputs_differ(),
            &r.same_outputs,
        ))
    }
}

fn print_report(out: &mut dyn Write, config: &SimConfig, r: &SimReport) -> anyhow::Result<()> {
    writeln!(out, "A  {}", config.a)?;
    writeln!(out, "B  {}", config.b)?;
    print_models(out, &r.models, r.startup_cancelled)?;
    let sides: Vec<(&str, HotRanges)> = [("A", Side::A), ("B", Side::B)]
        .into_iter()
        .map(|(name, side)| {
            let ranges = r.records.iter().filter(|x| x.side == side);
            let ranges = ranges
                .flat_map(|x| x.simulated.hot_ranges.clone())
                .collect();
            (name, ranges)
        })
        .collect();
    print_hot_ranges(out, &sides)?;
    let offsets: Vec<String> = r.offsets.iter().map(u64::to_string).collect();
    writeln!(
        out,
        "hot-range offsets: {} B; figures are medians over them, [min, max] their range;\n\
         a verdict needs B/A beyond ±{:.0} % at every offset",
        offsets.join(", "),
        100.0 * compare::SIMULATION_TOLERANCE
    )?;
    if config.checks.work.is_some() {
        writeln!(
            out,
            "per {0}: counts divided by the --metric's count of work ({0}), net of the baseline's",
            config.work_name
        )?;
    }
    if let Some((text, _)) = r.same_outputs.iter().next().filter(|_| !r.outputs_differ()) {
        writeln!(out, "--expect-same: every measured run printed '{text}'")?;
    }
    writeln!(out)?;
    let columns = ComparisonColumns {
        label: "figure",
        label_width: 34,
        a: "A",
        b: "B",
        range: "B/A range",
    };
    let rows = r.rows.iter().map(|row| Comparison {
        label: with_unit(&row.label, row.unit),
        a: row.a.median,
        b: row.b.median,
        ratio: row.ratio.map(|x| (x.median, x.min, x.max)),
        verdict: row.verdict.describe(),
    });
    output::comparison_table(out, &columns, rows)?;
    if r.offsets.len() > 1 {
        writeln!(out, "\nper offset (misses per M instructions, A → B):")?;
        for &offset in &r.offsets {
            let side = |s: Side| r.records.iter().find(|x| x.offset == offset && x.side == s);
            if let (Some(a), Some(b)) = (side(Side::A), side(Side::B)) {
                let cells: Vec<String> = r
                    .models
                    .iter()
                    .zip(a.simulated.models.iter().zip(&b.simulated.models))
                    .map(|(m, (a, b))| {
                        format!(
                            "{} {} → {}",
                            m.label,
                            number(a.per_million_instructions()),
                            number(b.per_million_instructions())
                        )
                    })
                    .collect();
                writeln!(out, "  {offset:>5} B  {}", cells.join("   "))?;
            }
        }
    }
    Ok(())
}
