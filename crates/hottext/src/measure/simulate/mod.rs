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

pub mod compare;
pub mod models;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::AtomicBool;

use serde::Serialize;

use super::ab::Service;
use super::run::{run_captured, Captured};
use super::server::Server;
use super::MeasureError;
use crate::os::cpus;
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
}

impl ModelCounts {
    pub fn per_million_instructions(&self) -> f64 {
        self.misses as f64 * 1e6 / self.instructions.max(1) as f64
    }
}

/// One side's simulated figures: one entry per model, in the models' order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Simulated {
    pub models: Vec<ModelCounts>,
    /// Whether a baseline run was subtracted.
    pub startup_cancelled: bool,
}

/// Totals of one run's cachegrind files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Totals {
    instructions: u64,
    misses: u64,
    processes: usize,
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
        "the command",
        scratch.path(),
        "run",
        cancel,
    )
}

/// Runs `workload` once per model (and its baseline), files under `dir/label-*`.
pub(crate) fn simulate_in(
    workload: &Workload,
    models: &[Model],
    side: &str,
    dir: &Path,
    label: &str,
    cancel: &AtomicBool,
) -> Result<Simulated, MeasureError> {
    let mut out = Vec::with_capacity(models.len());
    let mut startup_cancelled = false;
    for model in models {
        let run_dir = |suffix: &str| dir.join(format!("{label}-{}{suffix}", model.key));
        let (full, baseline) = match workload {
            Workload::Command { command, baseline } => (
                run_command(command, model, &run_dir(""), side, cancel)?,
                match baseline {
                    Some(b) => Some(run_command(b, model, &run_dir("-baseline"), side, cancel)?),
                    None => None,
                },
            ),
            Workload::Service {
                server,
                service,
                baseline_load,
            } => (
                run_service(
                    server,
                    service,
                    Some(&service.load),
                    model,
                    &run_dir(""),
                    side,
                    cancel,
                )?,
                Some(run_service(
                    server,
                    service,
                    *baseline_load,
                    model,
                    &run_dir("-baseline"),
                    side,
                    cancel,
                )?),
            ),
        };
        startup_cancelled = baseline.is_some();
        let base = baseline.unwrap_or_default();
        if full.instructions <= base.instructions {
            return Err(MeasureError::BaselineNotSmaller {
                side: side.to_string(),
                model: model.key,
                full: full.instructions,
                baseline: base.instructions,
            });
        }
        out.push(ModelCounts {
            key: model.key,
            instructions: full.instructions - base.instructions,
            // A baseline can miss more than its run where both are near zero (the L2 iTLB):
            // that is 0, and compare gives no verdict on such rates.
            misses: full.misses.saturating_sub(base.misses),
            processes: full.processes,
        });
    }
    Ok(Simulated {
        models: out,
        startup_cancelled,
    })
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

fn make_dir(dir: &Path) -> Result<(), MeasureError> {
    std::fs::create_dir_all(dir).map_err(|source| MeasureError::Io {
        what: format!("create {}", dir.display()),
        source,
    })
}

fn run_command(
    command: &str,
    model: &Model,
    dir: &Path,
    side: &str,
    cancel: &AtomicBool,
) -> Result<Totals, MeasureError> {
    make_dir(dir)?;
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &valgrind_script(model)])
        .env(ENV_COMMAND, command)
        .env(ENV_DIR, dir);
    let captured = run_captured(cmd, "valgrind", None, cancel)?;
    check_exit(&captured, &format!("command {side} under valgrind"), dir)?;
    read_totals(dir)
}

fn run_service(
    server: &str,
    service: &Service,
    load: Option<&str>,
    model: &Model,
    dir: &Path,
    side: &str,
    cancel: &AtomicBool,
) -> Result<Totals, MeasureError> {
    make_dir(dir)?;
    let env = [(ENV_COMMAND, server), (ENV_DIR, &*dir.to_string_lossy())];
    let script = valgrind_script(model);
    let mut running = Server::start(side, &script, &env, service.cpu, dir.join("server.log"))?;
    running.wait_ready(&service.ready, service.ready_timeout, cancel)?;
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
    }
    if running.stop(service.stop_timeout).forced {
        return Err(MeasureError::SimulationLost {
            side: side.to_string(),
            dir: dir.display().to_string(),
        });
    }
    read_totals(dir)
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

/// Sums the `summary:` lines of every process's cachegrind file in `dir`.
fn read_totals(dir: &Path) -> Result<Totals, MeasureError> {
    let io = |source| MeasureError::Io {
        what: format!("read {}", dir.display()),
        source,
    };
    let mut totals = Totals::default();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        let is_counts = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("cg."));
        if !is_counts {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(io)?;
        let (instructions, misses) =
            parse_summary(&text).ok_or_else(|| MeasureError::SimulationLost {
                side: "a process".into(),
                dir: path.display().to_string(),
            })?;
        totals.instructions += instructions;
        totals.misses += misses;
        totals.processes += 1;
    }
    if totals.processes == 0 {
        return Err(MeasureError::SimulationLost {
            side: "every process".into(),
            dir: dir.display().to_string(),
        });
    }
    Ok(totals)
}

/// (Ir, I1mr) of a cachegrind output file: its `events:` names the columns of `summary:`.
fn parse_summary(text: &str) -> Option<(u64, u64)> {
    let mut events: Option<Vec<&str>> = None;
    let mut summary: Option<Vec<u64>> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("events:") {
            events = Some(rest.split_whitespace().collect());
        } else if let Some(rest) = line.strip_prefix("summary:") {
            summary = rest.split_whitespace().map(|v| v.parse().ok()).collect();
        }
    }
    let (events, summary) = (events?, summary?);
    let column = |name: &str| {
        let i = events.iter().position(|e| *e == name)?;
        summary.get(i).copied()
    };
    Some((column("Ir")?, column("I1mr")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_is_read_by_its_event_names() {
        let text = "desc: I1 cache: 32768 B, 64 B, 8-way\ncmd: ./x\nevents: Ir I1mr ILmr Dr\n\
                    fl=a.c\n1 5 1 0 2\nsummary: 1000 17 3 200\n";
        assert_eq!(parse_summary(text), Some((1000, 17)));
        assert_eq!(parse_summary("events: Ir\nsummary: 5\n"), None);
        assert_eq!(parse_summary("events: Ir I1mr\n"), None);
    }

    #[test]
    fn the_wrapper_splices_no_path_or_command() {
        let script = valgrind_script(&models::probe()[2]);
        assert!(script.contains("sh -c \"$HOTTEXT_SIMULATED\""), "{script}");
        assert!(script.contains("\"--cachegrind-out-file=$HOTTEXT_SIMULATION_DIR/cg.%p\""));
    }
}
