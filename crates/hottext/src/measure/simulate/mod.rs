//! Simulated instruction-TLB and i-cache misses, for machines without a hardware PMU (most
//! cloud VMs): the command, or the server under its load, runs under valgrind's cachegrind once
//! per modelled structure ([`models`]; both iTLB levels with the hot range on 2 MiB pages in one
//! run, made only for an executable with such a range: `hot_range`), and every process it
//! starts is counted (`--trace-children=yes`). Instruction counts under valgrind are exact, so a pure layout
//! change shows the same instructions on both sides.
//!
//! Start-up cancels out: a figure is the difference between the run and a *baseline* run of the
//! same program that does less or no work: for a server, a lifetime with a shorter load or none
//! (start, ready, stop); for a command, a second command the user names (the same program with
//! a smaller input). Without a baseline a command's figures include its start-up.
//!
//! [`compare`] runs A and B this way, at several start offsets of the hot range when the
//! commands name them, and gives each figure's spread and a verdict.

mod cachegrind;
mod checks;
pub mod compare;
mod config;
mod hot_range;
mod jobs;
mod lifetime;
pub mod models;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::AtomicBool;

use serde::Serialize;

use super::ab::Service;
use super::MeasureError;
pub use checks::Checks;
use hot_range::HotCode;
pub use hot_range::HotRanges;
use lifetime::Simulation;
pub use models::Model;
use models::Slot;

/// The environment variables the valgrind wrapper reads, so that no path or command is ever
/// spliced into a shell line.
const ENV_COMMAND: &str = "HOTTEXT_SIMULATED";
const ENV_DIR: &str = "HOTTEXT_SIMULATION_DIR";

/// The name of the run of the 2 MiB-page models, in its directory's name.
const HUGE_PAGES_RUN: &str = "itlb-huge";

/// What runs under the simulator.
#[derive(Debug, Clone)]
pub enum Workload<'a> {
    /// A command (with `sh -c`) and its optional baseline command.
    Command {
        /// The command.
        command: &'a str,
        /// The same program doing less work, whose counts are subtracted.
        baseline: Option<&'a str>,
    },
    /// A server under `service.load`; its baseline is a lifetime under `baseline_load`, or
    /// with no load at all.
    Service {
        /// The server's command.
        server: &'a str,
        /// Readiness check, load, pinning and stop timeout.
        service: &'a Service,
        /// The lighter load of the baseline lifetime.
        baseline_load: Option<&'a str>,
    },
}

/// One structure's figures for one workload, net of the baseline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelCounts {
    /// The model's key ([`Model::key`]).
    pub key: &'static str,
    /// Instructions executed, net of the baseline's.
    pub instructions: u64,
    /// Simulated misses of the model's structure, net of the baseline's.
    pub misses: u64,
    /// Processes that wrote counts in the measured run (the baseline's not included).
    pub processes: usize,
    /// With a count of work ([`Checks::work`]): the run's net of its baseline's.
    pub work: Option<f64>,
    /// With `expect_same`: the text the measured run printed.
    pub same: Option<String>,
}

impl ModelCounts {
    /// Misses per million instructions (the report's rate).
    pub fn per_million_instructions(&self) -> f64 {
        self.misses as f64 * 1e6 / self.instructions.max(1) as f64
    }
}

/// One side's simulated figures: one entry per model, in the models' order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Simulated {
    /// One entry per model, in the models' order.
    pub models: Vec<ModelCounts>,
    /// Whether a baseline run was subtracted.
    pub startup_cancelled: bool,
    /// The executables the measured run ran whose hot range has whole 2 MiB pages, and how
    /// many: the 2 MiB-page models put those pages on 2 MiB pages. Empty: no such executable,
    /// and those models' figures are their 4 KiB-page models' own.
    pub hot_ranges: HotRanges,
}

/// Fails with the install command when valgrind cannot run.
pub fn check_valgrind() -> Result<(), MeasureError> {
    match Command::new("valgrind").arg("--version").output() {
        Ok(out) if out.status.success() => Ok(()),
        _ => Err(MeasureError::ValgrindMissing),
    }
}

/// Runs `workload` once per model (and its baseline), in a temporary directory.
pub fn simulate(
    workload: &Workload,
    models: &[Model],
    cancel: &AtomicBool,
) -> Result<Simulated, MeasureError> {
    let scratch = super::scratch_dir()?;
    simulate_in(
        workload,
        models,
        &Checks::default(),
        "the command",
        scratch.path(),
        "run",
        cancel,
    )
}

/// Runs `workload` once per model (and its baseline), files under `scratch/label-*`: the
/// 4 KiB-page and i-cache models a run each, then, when a process ran an executable with a hot
/// range on whole 2 MiB pages, one run for both 2 MiB-page models ([`hot_range`]).
pub(crate) fn simulate_in(
    workload: &Workload,
    models: &[Model],
    checks: &Checks,
    side: &str,
    scratch: &Path,
    label: &str,
    cancel: &AtomicBool,
) -> Result<Simulated, MeasureError> {
    let simulation = Simulation {
        workload,
        checks,
        side,
        scratch,
        label,
        cancel,
    };
    let mut hot = HotCode::default();
    let mut small = Vec::new();
    for model in models.iter().filter(|m| m.huge_pages.is_none()) {
        let lifetimes = simulation.lifetimes(&model.cachegrind_options(), model.key, &mut hot)?;
        small.push((model.key, lifetimes));
    }
    // Every run sees every executable the workload runs; the first one's measured run tells.
    let hot_ranges = small
        .first()
        .map(|(_, l)| l.full.totals.hot_ranges.clone())
        .unwrap_or_default();
    let huge_options: Vec<String> = models
        .iter()
        .filter(|m| m.huge_pages.is_some())
        .flat_map(Model::cachegrind_options)
        .collect();
    let huge = match hot_ranges.is_empty() || huge_options.is_empty() {
        true => None,
        false => Some(simulation.lifetimes(&huge_options, HUGE_PAGES_RUN, &mut hot)?),
    };
    let mut out = Vec::with_capacity(models.len());
    for model in models {
        let beside = model.huge_pages.map_or(model.key, |h| h.beside);
        let Some((_, lifetimes)) = small.iter().find(|(key, _)| *key == beside) else {
            return Err(MeasureError::ModelNotSimulated {
                model: model.key,
                beside,
            });
        };
        let mut counts = match (model.huge_pages, &huge) {
            (Some(on), Some(huge)) => {
                simulation.net(model.key, &lifetimes.on_huge_pages(huge, on.slot))?
            }
            _ => simulation.net(model.key, lifetimes)?,
        };
        // `same_outputs` counts runs: the 2 MiB-page models share one run (the I1 model
        // carries its text), and without that run they repeat their 4 KiB models'.
        if model
            .huge_pages
            .is_some_and(|on| huge.is_none() || on.slot != Slot::I1)
        {
            counts.same = None;
        }
        out.push(counts);
    }
    Ok(Simulated {
        models: out,
        startup_cancelled: small.iter().all(|(_, l)| l.baseline.is_some()),
        hot_ranges,
    })
}
