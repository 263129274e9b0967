//! One run of an A/B experiment: the command or the service under `perf stat`, its counts,
//! metrics and output checked.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use super::{Config, Regex, RunRecord, Service, Side};
use crate::measure::counts::Counts;
use crate::measure::events::EventPlan;
use crate::measure::perf_stat::{self, Scope};
use crate::measure::run::{run_captured, Captured, ExitFile};
use crate::measure::server::Server;
use crate::measure::MeasureError;

/// What every run needs.
pub(super) struct Runner<'a> {
    pub(super) config: &'a Config,
    pub(super) plan: &'a EventPlan,
    /// The CPUs this process may use.
    pub(super) allowed: &'a [u32],
    /// perf's output files and the servers' logs.
    pub(super) dir: &'a Path,
    pub(super) cancel: &'a AtomicBool,
}

/// One run's identity, for file names and messages.
struct RunId {
    side: Side,
    /// `round3-A`
    file: String,
    /// `round 3`, `warm-up round 1`
    label: String,
}

impl Runner<'_> {
    pub(super) fn run_once(
        &self,
        side: Side,
        round: usize,
        warmup: bool,
    ) -> Result<RunRecord, MeasureError> {
        let (file, label) = match warmup {
            true => ("warmup", "warm-up round"),
            false => ("round", "round"),
        };
        let id = RunId {
            side,
            file: format!("{file}{}-{side:?}", round + 1),
            label: format!("{label} {}", round + 1),
        };
        let mut record = RunRecord {
            round,
            warmup,
            side,
            counts: Counts::default(),
            server_cpu_seconds: None,
            metrics: Vec::new(),
            same: None,
            mhz: None,
            server_killed: false,
        };
        self.set_up(&id)?;
        let captured = match &self.config.service {
            None => self.run_command(&id, &mut record)?,
            Some(service) => self.run_service(service, &id, &mut record)?,
        };
        self.read_output(&id, &captured, &mut record)?;
        Ok(record)
    }

    /// The side's set-up line, before anything is counted; its failure fails the run.
    fn set_up(&self, id: &RunId) -> Result<(), MeasureError> {
        let script = self.config.setup(id.side);
        if script.is_empty() {
            return Ok(());
        }
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", script]);
        let what = format!("set-up of {:?}", id.side);
        let captured = run_captured(cmd, &what, None, self.cancel)?;
        match captured.status {
            None => Err(MeasureError::Interrupted),
            Some(status) if status.success() => Ok(()),
            Some(status) => Err(MeasureError::CommandFailed {
                side: what,
                run: id.label.clone(),
                status: status.to_string(),
                stderr: captured.stderr,
            }),
        }
    }

    /// `perf stat -- sh -c CMD`: the command's process tree.
    fn run_command(&self, id: &RunId, record: &mut RunRecord) -> Result<Captured, MeasureError> {
        record.mhz = mean_mhz(self.allowed);
        let scope = Scope::Command;
        let output = perf_stat::output_path(self.dir, &id.file);
        let exit = ExitFile::new(self.dir, &id.file);
        let script = exit.wrap_script(self.config.command(id.side));
        let cmd = perf_stat::command(
            &self.plan.events(scope),
            scope,
            &output,
            &["sh", "-c", &script],
        );
        let what = format!("perf stat for {:?}", id.side);
        let captured = run_captured(cmd, &what, None, self.cancel)?;
        let what = format!("command {:?}", id.side);
        let readings = finish(&captured, &output, &exit, &what, &id.label)?;
        record.counts = Counts::from_readings(&self.plan.counters(scope), &readings);
        Ok(captured)
    }

    /// Start the server pinned to its CPU, wait until it is ready, count that CPU while the
    /// load runs on the others, stop the server.
    fn run_service(
        &self,
        service: &Service,
        id: &RunId,
        record: &mut RunRecord,
    ) -> Result<Captured, MeasureError> {
        let log = self.dir.join(format!("{}-server.log", id.file));
        let side = format!("{:?}", id.side);
        let mut server = Server::start(&side, self.config.command(id.side), &[], service.cpu, log)?;
        server.wait_ready(&service.ready, service.ready_timeout, self.cancel)?;
        record.mhz = mean_mhz(&[service.cpu]);
        let scope = Scope::Cpu(service.cpu);
        let output = perf_stat::output_path(self.dir, &id.file);
        let exit = ExitFile::new(self.dir, &id.file);
        let load = exit.wrap_script(&service.load);
        let mut cmd = perf_stat::command(
            &self.plan.events(scope),
            scope,
            &output,
            &["sh", "-c", &load],
        );
        service.pin_load(&mut cmd, self.allowed);
        let cpu_before = server.cpu_seconds();
        let captured = run_captured(cmd, "perf stat for the load", None, self.cancel)?;
        let cpu_after = server.cpu_seconds();
        server.check_running()?;
        let what = format!("the load against server {side}");
        let readings = finish(&captured, &output, &exit, &what, &id.label)?;
        record.counts = Counts::from_readings(&self.plan.counters(scope), &readings);
        record.server_cpu_seconds = Some((cpu_after - cpu_before).max(0.0));
        record.server_killed = server.stop(service.stop_timeout).forced;
        Ok(captured)
    }

    /// The --metric and --expect-same matches in what the command (or load) printed.
    fn read_output(
        &self,
        id: &RunId,
        captured: &Captured,
        record: &mut RunRecord,
    ) -> Result<(), MeasureError> {
        let no_match = |option: &'static str, pattern: &Regex| MeasureError::NoMatch {
            side: format!("{:?}", id.side),
            run: id.label.clone(),
            option,
            pattern: pattern.as_str().to_string(),
            output: format!("{}{}", captured.stdout, captured.stderr),
        };
        for metric in &self.config.metrics {
            let text = capture(&metric.pattern, captured)
                .ok_or_else(|| no_match("--metric", &metric.pattern))?;
            let value = text
                .trim()
                .parse::<f64>()
                .map_err(|_| MeasureError::MetricNotNumber {
                    side: format!("{:?}", id.side),
                    run: id.label.clone(),
                    text: text.clone(),
                })?;
            record.metrics.push(value);
        }
        if let Some(pattern) = &self.config.expect_same {
            let text =
                capture(pattern, captured).ok_or_else(|| no_match("--expect-same", pattern))?;
            record.same = Some(text);
        }
        Ok(())
    }
}

/// Checks how a counted run ended and reads perf's counts.
fn finish(
    captured: &Captured,
    output: &Path,
    exit: &ExitFile,
    what: &str,
    run: &str,
) -> Result<Vec<perf_stat::Reading>, MeasureError> {
    let Some(status) = captured.status else {
        return Err(MeasureError::Interrupted);
    };
    // Without counts it is perf's own failure.
    let readings = crate::measure::run::read_counts(output, status, &captured.stderr)?;
    let failed = match exit.read() {
        Some(0) => None,
        Some(code) => Some(format!("exit status {code}")),
        None if status.success() => None,
        None => Some(status.to_string()),
    };
    if let Some(status) = failed {
        return Err(MeasureError::CommandFailed {
            side: what.to_string(),
            run: run.to_string(),
            status,
            stderr: captured.stderr.clone(),
        });
    }
    Ok(readings)
}

/// Group 1 of the first match in stdout, else in stderr (the whole match without a group).
pub(crate) fn capture(pattern: &Regex, captured: &Captured) -> Option<String> {
    [&captured.stdout, &captured.stderr]
        .iter()
        .find_map(|text| {
            let caps = pattern.captures(text)?;
            caps.get(1)
                .or_else(|| caps.get(0))
                .map(|m| m.as_str().to_string())
        })
}

/// The mean of `scaling_cur_freq` over `cpus`, in MHz; None without cpufreq (most VMs).
fn mean_mhz(cpus: &[u32]) -> Option<f64> {
    let khz: Vec<f64> = cpus
        .iter()
        .filter_map(|&cpu| crate::os::sys::cpu_khz(cpu))
        .collect();
    (!khz.is_empty()).then(|| khz.iter().sum::<f64>() / khz.len() as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_prefers_group_one_and_stdout() {
        let c = Captured {
            status: None,
            stdout: "requests: 10\nchecksum: 00ff\n".into(),
            stderr: "tps=123.5\n".into(),
        };
        let re = |p| Regex::new(p).unwrap();
        assert_eq!(
            capture(&re("checksum: ([0-9a-f]+)"), &c).as_deref(),
            Some("00ff")
        );
        assert_eq!(capture(&re("tps=([0-9.]+)"), &c).as_deref(), Some("123.5"));
        assert_eq!(
            capture(&re("requests: [0-9]+"), &c).as_deref(),
            Some("requests: 10")
        );
        assert_eq!(capture(&re("nothing"), &c), None);
    }
}
