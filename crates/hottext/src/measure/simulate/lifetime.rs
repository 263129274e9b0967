//! One cachegrind configuration of a workload: its measured run and its baseline run (each a
//! command, or a lifetime of the server), and the figures net of the baseline.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;

use super::cachegrind::{self, read_totals, Totals};
use super::hot_range::HotCode;
use super::models::Slot;
use super::{Checks, ModelCounts, Workload, ENV_COMMAND, ENV_DIR};
use crate::measure::ab::Service;
use crate::measure::run::{run_captured, Captured};
use crate::measure::server::Server;
use crate::measure::MeasureError;
use crate::os::cpus;

/// One side's workload and where its runs write.
pub(super) struct Simulation<'a> {
    pub workload: &'a Workload<'a>,
    pub checks: &'a Checks,
    pub side: &'a str,
    pub scratch: &'a Path,
    /// The prefix of the run directories' names.
    pub label: &'a str,
    pub cancel: &'a AtomicBool,
}

/// The measured run and the baseline run of one configuration.
#[derive(Debug, Clone)]
pub(super) struct Lifetimes {
    /// The measured run's directory; the baseline's has `-baseline` appended.
    dir: PathBuf,
    pub full: Run,
    pub baseline: Option<Run>,
}

/// One simulated run: its counts, and what the command (or the load) printed, if it ran.
#[derive(Debug, Clone, Default)]
pub(super) struct Run {
    pub totals: Totals,
    output: Option<Captured>,
}

impl Simulation<'_> {
    /// Runs the workload and its baseline under cachegrind with `options`, in directories
    /// named after `name`.
    pub fn lifetimes(
        &self,
        options: &[String],
        name: &str,
        hot: &mut HotCode,
    ) -> Result<Lifetimes, MeasureError> {
        let dir = self.scratch.join(format!("{}-{name}", self.label));
        let mut run = |what: Option<&str>, dir: &Path| -> Result<Run, MeasureError> {
            cachegrind::make_run_dir(self.scratch, dir)?;
            let script = valgrind_script(options);
            match self.workload {
                Workload::Command { .. } => {
                    run_command(what.unwrap_or_default(), &script, dir, self, hot)
                }
                Workload::Service {
                    server, service, ..
                } => run_service(server, service, what, &script, dir, self, hot),
            }
        };
        let baseline_dir = baseline_dir(&dir);
        let (full, baseline) = match self.workload {
            Workload::Command { command, baseline } => (
                run(Some(command), &dir)?,
                baseline.map(|b| run(Some(b), &baseline_dir)).transpose()?,
            ),
            Workload::Service {
                service,
                baseline_load,
                ..
            } => (
                run(Some(&service.load), &dir)?,
                Some(run(*baseline_load, &baseline_dir)?),
            ),
        };
        Ok(Lifetimes {
            dir,
            full,
            baseline,
        })
    }

    /// The figures of `lifetimes` as model `key`'s, net of the baseline, with the checks.
    pub fn net(
        &self,
        key: &'static str,
        lifetimes: &Lifetimes,
    ) -> Result<ModelCounts, MeasureError> {
        let (full, side, checks) = (&lifetimes.full, self.side, self.checks);
        let base = lifetimes.baseline.clone().unwrap_or_default();
        if full.totals.instructions <= base.totals.instructions {
            return Err(MeasureError::BaselineNotSmaller {
                side: side.to_string(),
                model: key,
                full: full.totals.instructions,
                baseline: base.totals.instructions,
            });
        }
        let what = |dir: &Path| format!("the {key} run in {}", dir.display());
        let (measured, baseline) = (what(&lifetimes.dir), what(&baseline_dir(&lifetimes.dir)));
        let work = match &checks.work {
            None => None,
            Some(pattern) => {
                let done = checks.work_of(&full.output, side, &measured)?;
                let before = match &base.output {
                    Some(_) => checks.work_of(&base.output, side, &baseline)?,
                    None => 0.0,
                };
                if done <= before {
                    return Err(MeasureError::NoWork {
                        side: side.to_string(),
                        model: key,
                        pattern: pattern.as_str().to_string(),
                        full: done,
                        baseline: before,
                    });
                }
                Some(done - before)
            }
        };
        Ok(ModelCounts {
            key,
            instructions: full.totals.instructions - base.totals.instructions,
            // A baseline can miss more than its run where both are near zero (the L2 iTLB):
            // that is 0, and compare gives no verdict on such rates.
            misses: full.totals.misses.saturating_sub(base.totals.misses),
            processes: full.totals.processes,
            work,
            same: checks.same_of(&full.output, side, &measured)?,
        })
    }
}

impl Lifetimes {
    /// These 4 KiB-page runs with the hot range on the 2 MiB pages of `huge`'s runs at the
    /// level in `slot` (`Totals::on_huge_pages`); the output and directory are `huge`'s.
    pub fn on_huge_pages(&self, huge: &Lifetimes, slot: Slot) -> Lifetimes {
        let run = |small: &Run, huge: &Run| Run {
            totals: small.totals.on_huge_pages(&huge.totals, slot),
            output: huge.output.clone(),
        };
        Lifetimes {
            dir: huge.dir.clone(),
            full: run(&self.full, &huge.full),
            baseline: self
                .baseline
                .as_ref()
                .zip(huge.baseline.as_ref())
                .map(|(small, huge)| run(small, huge)),
        }
    }
}

fn baseline_dir(dir: &Path) -> PathBuf {
    let mut name = dir.as_os_str().to_owned();
    name.push("-baseline");
    name.into()
}

/// `sh -c`'s script that runs `$HOTTEXT_SIMULATED` under cachegrind with `options`. `-v` makes
/// each process's log name the executable it ran, and `--demangle=no` keeps function names as
/// the symbol table has them, for [`hot_range`].
fn valgrind_script(options: &[String]) -> String {
    format!(
        "exec valgrind --tool=cachegrind --cache-sim=yes -v --demangle=no {} --trace-children=yes \
         \"--cachegrind-out-file=${ENV_DIR}/cg.%p\" \"--log-file=${ENV_DIR}/valgrind.%p.log\" \
         sh -c \"${ENV_COMMAND}\"",
        options.join(" ")
    )
}

fn run_command(
    command: &str,
    script: &str,
    dir: &Path,
    simulation: &Simulation,
    hot: &mut HotCode,
) -> Result<Run, MeasureError> {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script])
        .env(ENV_COMMAND, command)
        .env(ENV_DIR, dir);
    let captured = run_captured(cmd, "valgrind", None, simulation.cancel)?;
    let what = format!("command {} under valgrind", simulation.side);
    check_exit(&captured, &what, dir)?;
    Ok(Run {
        totals: read_totals(dir, hot)?,
        output: Some(captured),
    })
}

/// A lifetime of the server under `load` (none: start, ready, stop). It is stopped leaves
/// first, so that no process of it is killed before it wrote its counts.
fn run_service(
    server: &str,
    service: &Service,
    load: Option<&str>,
    script: &str,
    dir: &Path,
    simulation: &Simulation,
    hot: &mut HotCode,
) -> Result<Run, MeasureError> {
    let (side, cancel) = (simulation.side, simulation.cancel);
    let env = [(ENV_COMMAND, server), (ENV_DIR, &*dir.to_string_lossy())];
    let mut running = Server::start(side, script, &env, service.cpu, dir.join("server.log"))?;
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
        totals: read_totals(dir, hot)?,
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
        let script = valgrind_script(&["--I1=32768,8,64".to_string()]);
        assert!(script.contains("sh -c \"$HOTTEXT_SIMULATED\""), "{script}");
        assert!(script.contains("\"--cachegrind-out-file=$HOTTEXT_SIMULATION_DIR/cg.%p\""));
        assert!(
            script.contains(" -v --demangle=no --I1=32768,8,64 "),
            "{script}"
        );
    }
}
