//! `ab --simulate` and `stat --simulate`: the cache models instead of hardware counters.

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;

use anyhow::bail;
use hottext::measure::ab::Side;
use hottext::measure::simulate::compare::{self, SimConfig, SimRecord, SimReport};
use hottext::measure::simulate::{self, HotRanges, Model, Simulated, Workload};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use super::stat::{number, with_unit};
use crate::output;

/// The models, after checking that valgrind runs; says which geometry is used.
fn models() -> anyhow::Result<Vec<Model>> {
    simulate::check_valgrind()?;
    let models = simulate::models::probe();
    output::parameters("simulate", &models);
    Ok(models)
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

/// The error for a failed simulated run: exit status 1 when the command, load or server
/// failed, 2 otherwise.
fn stopped(e: hottext::measure::MeasureError, what: &str) -> anyhow::Error {
    if e.is_command_failure() {
        output::failed(format!("{what} stopped: {e}"))
    } else {
        anyhow::Error::new(e).context(format!("{what} stopped"))
    }
}

pub fn run_ab(config: SimConfig, json: bool, interrupted: &AtomicBool) -> anyhow::Result<ExitCode> {
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
    if json {
        output::json(&report)?;
    } else {
        print_ab(&config, &report)?;
    }
    Ok(super::ab::expect_same_status(
        report.outputs_differ(),
        &report.same_outputs,
    ))
}

fn print_ab(config: &SimConfig, r: &SimReport) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "A  {}", config.a)?;
    writeln!(out, "B  {}", config.b)?;
    print_models(&mut out, &r.models, r.startup_cancelled)?;
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
    print_hot_ranges(&mut out, &sides)?;
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
    writeln!(
        out,
        "{:<34} {:>14} {:>14} {:>8}  {:<18} verdict",
        "figure", "A", "B", "B/A", "B/A range"
    )?;
    for row in &r.rows {
        let (ratio, range) = match row.ratio {
            Some(x) => (
                format!("{:.3}", x.median),
                format!("[{:.3}, {:.3}]", x.min, x.max),
            ),
            None => ("-".into(), "-".into()),
        };
        writeln!(
            out,
            "{:<34} {:>14} {:>14} {:>8}  {:<18} {}",
            with_unit(&row.label, row.unit),
            number(row.a.median),
            number(row.b.median),
            ratio,
            range,
            row.verdict.describe()
        )?;
    }
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

fn print_models(out: &mut impl Write, models: &[Model], cancelled: bool) -> anyhow::Result<()> {
    writeln!(
        out,
        "simulated with valgrind's cachegrind (exact instruction counts; no hardware counters):"
    )?;
    for m in models {
        let source = match m.source {
            "cpu" => "this CPU's geometry",
            _ => "default geometry (AMD Zen 2-4)",
        };
        writeln!(out, "  {:<12} {} ({source})", m.label, m.describe())?;
    }
    let startup = match cancelled {
        true => "start-up cancelled: each figure is the run minus its baseline run",
        false => "start-up included (no baseline run; give one to cancel it)",
    };
    writeln!(out, "{startup}")?;
    Ok(())
}

/// Which executables had their hot range on 2 MiB pages in the huge-page models, per side.
fn print_hot_ranges(out: &mut impl Write, sides: &[(&str, HotRanges)]) -> anyhow::Result<()> {
    const SHOWN: usize = 3;
    let described: Vec<String> = sides
        .iter()
        .map(|(side, ranges)| {
            let prefix = match side.is_empty() {
                true => String::new(),
                false => format!("{side}: "),
            };
            if ranges.is_empty() {
                return format!("{prefix}none, so its huge figures are its 4 KiB ones");
            }
            let mut listed: Vec<String> = ranges
                .iter()
                .take(SHOWN)
                .map(|(executable, pages)| {
                    let s = if *pages == 1 { "" } else { "s" };
                    format!("{executable} ({pages} page{s})")
                })
                .collect();
            if ranges.len() > SHOWN {
                listed.push(format!("{} more", ranges.len() - SHOWN));
            }
            format!("{prefix}{}", listed.join(", "))
        })
        .collect();
    writeln!(
        out,
        "hot range on whole 2 MiB pages (the huge models): {}",
        described.join("; ")
    )?;
    Ok(())
}

#[derive(Serialize)]
struct StatReport<'a> {
    command: &'a str,
    baseline: Option<&'a str>,
    models: &'a [Model],
    simulated: &'a Simulated,
}

pub fn run_stat(
    command: &str,
    baseline: Option<&str>,
    json: bool,
    interrupted: &AtomicBool,
) -> anyhow::Result<ExitCode> {
    let models = models()?;
    let bar = ProgressBar::new_spinner();
    bar.set_message(format!(
        "simulating the command under {} models (20-50× slower than native)",
        models.len()
    ));
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    let workload = Workload::Command { command, baseline };
    let result = simulate::simulate(&workload, &models, interrupted);
    bar.finish_and_clear();
    let simulated = result.map_err(|e| stopped(e, "simulated run"))?;
    if json {
        return output::json(&StatReport {
            command,
            baseline,
            models: &models,
            simulated: &simulated,
        })
        .map(|()| ExitCode::SUCCESS);
    }
    let mut out = std::io::stdout().lock();
    print_models(&mut out, &models, simulated.startup_cancelled)?;
    print_hot_ranges(&mut out, &[("", simulated.hot_ranges.clone())])?;
    let instructions = simulated.models.last().map_or(0, |m| m.instructions);
    writeln!(
        out,
        "\n{:<34} {:>16}",
        "instructions (exact)",
        number(instructions as f64)
    )?;
    for (m, counts) in models.iter().zip(&simulated.models) {
        writeln!(
            out,
            "{:<34} {:>16}   {} misses",
            format!("{} misses (per M instr)", m.label),
            number(counts.per_million_instructions()),
            number(counts.misses as f64)
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
