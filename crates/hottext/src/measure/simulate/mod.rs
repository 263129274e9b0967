//! Simulated instruction-TLB and i-cache misses, for machines without a hardware PMU (most
//! cloud VMs): the command, or the server under its load, runs under valgrind's cachegrind once
//! per modelled structure ([`models`]), and every process it starts is counted
//! (`--trace-children=yes`). Instruction counts under valgrind are exact, so a pure layout
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
pub mod compare;
pub mod jobs;
pub mod models;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::AtomicBool;

use serde::Serialize;

use super::ab::{capture, Regex, Service};
use super::run::{run_captured, Captured};
use super::server::Server;
use super::MeasureError;
use crate::os::cpus;
use cachegrind::{read_totals, Totals};
pub use models::Model;

/// The environment variables the valgrind wrapper reads, so that no path or command is ever
/// spliced into a shell line.
const ENV_COMMAND: &str = "HOTTEXT_SIMULATED";
const ENV_DIR: &str = "HOTTEXT_SIMULATION_DIR";

/// What runs under the simulator.
#[derive(Debug, Clone)]
pub enum Workload<'a> {
    /// A command (with `sh -c`) and its optional baseline command.
    Command {
        command: &'a str,
        baseline: Option<&'a str>,
    },
    /// A server under `service.load`; its baseline is a lifetime under `baseline_load`, or
    /// with no load at all.
    Service {
        server: &'a str,
        service: &'a Service,
        baseline_load: Option<&'a str>,
    },
}

/// One structure's figures for one workload, net of the baseline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelCounts {
    pub key: &'static str,
    pub instructions: u64,
    pub misses: u64,
    /// Processes that wrote counts in the measured run (the baseline's not included).
    pub processes: usize,
    /// With a count of work ([`Checks::work`]): the run's net of its baseline's.
    pub work: Option<f64>,
    /// With `expect_same`: the text the measured run printed.
    pub same: Option<String>,
}

impl ModelCounts {
    pub fn per_million_instructions(&self) -> f64 {
        self.misses as f64 * 1e6 / self.instructions.max(1) as f64
    }
}

/// What the runs' output must show (the command's, or the load's for a server).
#[derive(Debug, Clone, Default)]
pub struct Checks {
    /// Group 1 is the count of work a run did (requests served), so that figures compare per
    /// unit of it: a time-based load does more or less work from run to run.
    pub work: Option<Regex>,
    /// Group 1 must be the same text in every measured run (a checksum, a request count).
    pub expect_same: Option<Regex>,
}

impl Checks {
    fn matched(
        pattern: &Regex,
        option: &'static str,
        output: &Option<Captured>,
        side: &str,
        run: &str,
    ) -> Result<String, MeasureError> {
        let empty = Captured::default();
        let captured = output.as_ref().unwrap_or(&empty);
        capture(pattern, captured).ok_or_else(|| MeasureError::NoMatch {
            side: side.to_string(),
            run: run.to_string(),
            option,
            pattern: pattern.as_str().to_string(),
            output: format!("{}{}", captured.stdout, captured.stderr),
        })
    }

    fn work_of(
        &self,
        output: &Option<Captured>,
        side: &str,
        run: &str,
    ) -> Result<f64, MeasureError> {
        let Some(pattern) = &self.work else {
            return Ok(0.0);
        };
        let text = Self::matched(pattern, "--metric", output, side, run)?;
        text.trim()
            .parse()
            .map_err(|_| MeasureError::MetricNotNumber {
                side: side.to_string(),
                run: run.to_string(),
                text,
            })
    }

    fn same_of(
        &self,
        output: &Option<Captured>,
        side: &str,
        run: &str,
    ) -> Result<Option<String>, MeasureError> {
        self.expect_same
            .as_ref()
            .map(|p| Self::matched(p, "--expect-same", output, side, run))
            .transpose()
    }
}

/// One side's simulated figures: one entry per model, in the models' order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Simulated {
    pub models: Vec<ModelCounts>,
    /// Whether a baseline run was subtracted.
    pub startup_cancelled: bool,
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

/// Runs `workload` once per model (and its baseline), files under `scratch/label-*`.
pub(crate) fn simulate_in(
    workload: &Workload,
    models: &[Model],
    checks: &Checks,
    side: &str,
    scratch: &Path,
    label: &str,
    cancel: &AtomicBool,
) -> Result<Simulated, MeasureError> {
    let mut out = Vec::with_capacity(models.len());
    let mut startup_cancelled = false;
    for model in models {
        let run_dir = |suffix: &str| scratch.join(format!("{label}-{}{suffix}", model.key));
        let run = |what: Option<&str>, suffix: &str| -> Result<Run, MeasureError> {
            let dir = run_dir(suffix);
            cachegrind::make_run_dir(scratch, &dir)?;
            match workload {
                Workload::Command { .. } => {
                    run_command(what.unwrap_or_default(), model, &dir, side, cancel)
                }
                Workload::Service {
                    server, service, ..
                } => run_service(server, service, what, model, &dir, side, cancel),
            }
        };
        let (full, baseline) = match workload {
            Workload::Command { command, baseline } => (
                run(Some(command), "")?,
                baseline.map(|b| run(Some(b), "-baseline")).transpose()?,
            ),
            Workload::Service {
                service,
                baseline_load,
                ..
            } => (
                run(Some(&service.load), "")?,
                Some(run(*baseline_load, "-baseline")?),
            ),
        };
        startup_cancelled = baseline.is_some();
        let base = baseline.unwrap_or_default();
        if full.totals.instructions <= base.totals.instructions {
            return Err(MeasureError::BaselineNotSmaller {
                side: side.to_string(),
                model: model.key,
                full: full.totals.instructions,
                baseline: base.totals.instructions,
            });
        }
        let what = |suffix| {
            format!(
                "the {} run{suffix} in {}",
                model.key,
                run_dir(suffix).display()
            )
        };
        let work = match &checks.work {
            None => None,
            Some(pattern) => {
                let done = checks.work_of(&full.output, side, &what(""))?;
                let before = match &base.output {
                    Some(output) => {
                        checks.work_of(&Some(output.clone()), side, &what("-baseline"))?
                    }
                    None => 0.0,
                };
                if done <= before {
                    return Err(MeasureError::NoWork {
                        side: side.to_string(),
                        model: model.key,
                        pattern: pattern.as_str().to_string(),
                        full: done,
                        baseline: before,
                    });
                }
                Some(done - before)
            }
        };
        out.push(ModelCounts {
            key: model.key,
            instructions: full.totals.instructions - base.totals.instructions,
            // A baseline can miss more than its run where both are near zero (the L2 iTLB):
            // that is 0, and compare gives no verdict on such rates.
            misses: full.totals.misses.saturating_sub(base.totals.misses),
            processes: full.totals.processes,
            work,
            same: checks.same_of(&full.output, side, &what(""))?,
        });
    }
    Ok(Simulated {
        models: out,
        startup_cancelled,
    })
}

/// One simulated run: its counts, and what the command (or the load) printed, if it ran.
#[derive(Debug, Default)]
struct Run {
    totals: Totals,
    output: Option<Captured>,
}

/// `sh -c`'s script that runs `$HOTTEXT_SIMULATED` under cachegrind with `model`.
fn valgrind_script(model: &Model) -> String {
    format!(
        "exec valgrind --tool=cachegrind --cache-sim=yes {} --trace-children=yes \
         \"--cachegrind-out-file=${ENV_DIR}/cg.%p\" \"--log-file=${ENV_DIR}/valgrind.%p.log\" \
         sh -c \"${ENV_COMMAND}\"",
        model.cachegrind_option()
    )
}

fn run_command(
    command: &str,
    model: &Model,
    dir: &Path,
    side: &str,
    cancel: &AtomicBool,
) -> Result<Run, MeasureError> {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &valgrind_script(model)])
        .env(ENV_COMMAND, command)
        .env(ENV_DIR, dir);
    let captured = run_captured(cmd, "valgrind", None, cancel)?;
    check_exit(&captured, &format!("command {side} under valgrind"), dir)?;
    Ok(Run {
        totals: read_totals(dir)?,
        output: Some(captured),
    })
}

/// A lifetime of the server under `load` (none: start, ready, stop). It is stopped leaves
/// first, so that no process of it is killed before it wrote its counts.
fn run_service(
    server: &str,
    service: &Service,
    load: Option<&str>,
    model: &Model,
    dir: &Path,
    side: &str,
    cancel: &AtomicBool,
) -> Result<Run, MeasureError> {
    let env = [(ENV_COMMAND, server), (ENV_DIR, &*dir.to_string_lossy())];
    let script = valgrind_script(model);
    let mut running = Server::start(side, &script, &env, service.cpu, dir.join("server.log"))?;
    running.wait_ready(&service.ready, service.ready_timeout, cancel)?;
    let mut output = None;
    if let Some(load) = load {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", load]);
        let allowed: Vec<u32> = cpus::own()
            .map(|set| set.iter().collect())
            .unwrap_or_default();
        service.pin_load(&mut cmd, &allowed);
        let captured = run_captured(cmd, "the load", None, cancel)?;
        check_exit(&captured, &format!("the load against server {side}"), dir)?;
        running.check_running()?;
        output = Some(captured);
    }
    if running.stop_leaves_first(service.stop_timeout).forced {
        return Err(MeasureError::ServerKilled {
            side: side.to_string(),
            dir: dir.display().to_string(),
        });
    }
    Ok(Run {
        totals: read_totals(dir)?,
        output,
    })
}

fn check_exit(captured: &Captured, what: &str, dir: &Path) -> Result<(), MeasureError> {
    match captured.status {
        None => Err(MeasureError::Interrupted),
        Some(status) if status.success() => Ok(()),
        Some(status) => Err(MeasureError::CommandFailed {
            side: what.to_string(),
            run: format!("the simulated run in {}", dir.display()),
            status: status.to_string(),
            stderr: captured.stderr.clone(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wrapper_splices_no_path_or_command() {
        let script = valgrind_script(&models::probe()[2]);
        assert!(script.contains("sh -c \"$HOTTEXT_SIMULATED\""), "{script}");
        assert!(script.contains("\"--cachegrind-out-file=$HOTTEXT_SIMULATION_DIR/cg.%p\""));
    }
}
