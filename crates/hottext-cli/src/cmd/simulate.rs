//! The cache models instead of hardware counters: what `ab --simulate` and `stat --simulate`
//! share (the models, the errors, the header lines), and `stat --simulate` itself.

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;

use hottext::measure::simulate::{self, HotRanges, Model, Simulated, Workload};
use indicatif::ProgressBar;
use serde::Serialize;

use crate::output::{self, number, Mode};

/// The models, after checking that valgrind runs; says which geometry is used.
pub(super) fn models() -> anyhow::Result<Vec<Model>> {
    simulate::check_valgrind()?;
    let models = simulate::models::probe();
    output::parameters("simulate", &models);
    Ok(models)
}

/// The error for a failed simulated run: exit status 1 when the command, load or server
/// failed, 2 otherwise.
pub(super) fn stopped(e: hottext::measure::MeasureError, what: &str) -> anyhow::Error {
    if e.is_command_failure() {
        output::failed(format!("{what} stopped: {e}"))
    } else {
        anyhow::Error::new(e).context(format!("{what} stopped"))
    }
}

pub(super) fn print_models(
    out: &mut dyn Write,
    models: &[Model],
    cancelled: bool,
) -> anyhow::Result<()> {
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
pub(super) fn print_hot_ranges(
    out: &mut dyn Write,
    sides: &[(&str, HotRanges)],
) -> anyhow::Result<()> {
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
    mode: Mode,
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
    let report = StatReport {
        command,
        baseline,
        models: &models,
        simulated: &simulated,
    };
    output::emit(&report, mode)
}

/// The stream of `stat --simulate`'s report (`stat::STREAMS`).
pub(super) const STAT_STREAM: output::Stream = <StatReport as output::Report>::STREAM;

impl output::Report for StatReport<'_> {
    fn print(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        let simulated = self.simulated;
        print_models(out, self.models, simulated.startup_cancelled)?;
        print_hot_ranges(out, &[("", simulated.hot_ranges.clone())])?;
        let instructions = simulated.models.last().map_or(0, |m| m.instructions);
        writeln!(
            out,
            "\n{:<34} {:>16}",
            "instructions (exact)",
            number(instructions as f64)
        )?;
        for (m, counts) in self.models.iter().zip(&simulated.models) {
            writeln!(
                out,
                "{:<34} {:>16}   {} misses",
                format!("{} misses (per M instr)", m.label),
                number(counts.per_million_instructions()),
                number(counts.misses as f64)
            )?;
        }
        Ok(())
    }
}
