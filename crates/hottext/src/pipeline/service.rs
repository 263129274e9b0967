//! Finding the service and recording it: a pid, a pid file, a systemd unit's main process, or
//! a command the pipeline starts (with a load command that runs while it is recorded).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime};

use crate::profile::record::{affinity, plan, Machine, Outcome, Request, Session, Target};

use super::config::Config;
use super::PipelineError;
use crate::os::group::Group;
use crate::os::proc::Pid;

/// How often to check on perf, the load and the service.
const TICK: Duration = Duration::from_millis(100);
/// How long a started service gets to exit after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// A finished recording.
#[derive(Debug)]
pub struct Recording {
    /// The perf.data written.
    pub perf_data: PathBuf,
    /// The process recorded.
    pub pid: Pid,
    /// The executable to read symbols from.
    pub binary: PathBuf,
    /// When the recording began.
    pub start: SystemTime,
    /// When it ended.
    pub end: SystemTime,
    /// How `perf record` ended.
    pub outcome: Outcome,
}

/// Records the service for the configured time into `dir/perf.data`; `progress` hears the time
/// recorded so far and the configured length, every `TICK`. When `cancel` is set, perf, the
/// load and a service the pipeline started are stopped and the run is
/// [`PipelineError::Interrupted`].
pub fn record(
    config: &Config,
    dir: &Path,
    cancel: &AtomicBool,
    progress: &mut dyn FnMut(Duration, Duration),
) -> Result<Recording, PipelineError> {
    let service = &config.service;
    let machine = Machine::probe()
        .map_err(|e| PipelineError::Service(format!("cannot tell what perf can do here: {e}")))?;
    // What this machine cannot record is refused before a service is started for nothing.
    if let Some(asked) = config.record.sampling {
        asked.check(&machine)?;
    }
    let mut started = match &service.command {
        Some(cmd) => Some(Started::spawn(cmd, service.startup_seconds, &config.base)?),
        None => None,
    };
    let result = record_running(config, &machine, dir, started.as_mut(), cancel, progress);
    if let Some(s) = started {
        s.stop();
    }
    result
}

fn record_running(
    config: &Config,
    machine: &Machine,
    dir: &Path,
    started: Option<&mut Started>,
    cancel: &AtomicBool,
    progress: &mut dyn FnMut(Duration, Duration),
) -> Result<Recording, PipelineError> {
    let service = &config.service;
    let pid = match (
        &started,
        service.pid,
        &service.pid_file,
        &service.systemd_unit,
    ) {
        (Some(s), ..) => s.service.pid(),
        (None, Some(pid), ..) => pid,
        (None, None, Some(file), _) => pid_from_file(file)?,
        (None, None, None, Some(unit)) => pid_of_unit(unit)?,
        _ => return Err(PipelineError::Service("no service to record".into())),
    };
    let binary = match &service.binary {
        Some(b) => b.clone(),
        None => crate::os::proc::exe(pid).map_err(|e| {
            PipelineError::Service(format!(
                "cannot find the executable of process {pid} ({}); set [service] binary",
                e.source
            ))
        })?,
    };
    let output = dir.join("perf.data");
    let request = Request {
        target: Target::Pid(pid),
        output: output.clone(),
        duration: Some(Duration::from_secs_f64(config.record.seconds)),
        frequency: config.record.frequency,
        pin_cpu: None,
        per_process: false,
        sampling: config.record.sampling,
        frame_pointer_share: crate::binary::Binary::open(&binary)
            .ok()
            .and_then(|b| crate::profile::code::frame_pointer_share(&b)),
    };
    let runs_on = affinity(pid).map_err(|e| {
        PipelineError::Service(format!("cannot read where process {pid} may run: {e}"))
    })?;
    let plan = plan(&request, machine, &runs_on)?;

    let mut load = match (&service.load, started.is_some()) {
        (Some(cmd), true) => Some(spawn(cmd, &config.base, "load")?),
        _ => None,
    };
    let start = SystemTime::now();
    let session = Session::start(&plan)?;
    let total = Duration::from_secs_f64(config.record.seconds);
    let outcome = session.wait(plan.stop_after(), TICK, cancel, |session| {
        progress(session.elapsed(), total);
        load.as_mut()
            .is_some_and(|l| l.try_wait().ok().flatten().is_some())
    })?;
    // Cancelled: dropping the load stops it; the caller stops the service.
    let Some(outcome) = outcome else {
        return Err(PipelineError::Interrupted);
    };
    let end = SystemTime::now();
    if let Some(mut l) = load {
        l.stop(STOP_GRACE);
    }
    Ok(Recording {
        perf_data: output,
        pid,
        binary,
        start,
        end,
        outcome,
    })
}

fn pid_from_file(path: &Path) -> Result<Pid, PipelineError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        PipelineError::Service(format!("cannot read pid file {}: {e}", path.display()))
    })?;
    text.trim().parse().map_err(|_| {
        PipelineError::Service(format!(
            "pid file {} holds '{}', not a process id",
            path.display(),
            text.trim()
        ))
    })
}

fn pid_of_unit(unit: &str) -> Result<Pid, PipelineError> {
    let out = Command::new("systemctl")
        .args(["show", "--property=MainPID", "--value", unit])
        .output()
        .map_err(|e| {
            PipelineError::Service(format!(
                "cannot run systemctl to find unit {unit}'s process: {e}"
            ))
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    match text.trim().parse::<i32>() {
        Ok(pid) if out.status.success() && pid > 0 => Ok(pid),
        _ => Err(PipelineError::Service(format!(
            "systemd unit {unit} has no running main process ({})",
            String::from_utf8_lossy(&out.stderr).trim()
        ))),
    }
}

/// A service the pipeline started; stopped again, with everything it started, when the
/// recording is done (or when dropped).
struct Started {
    service: Group,
}

impl Started {
    fn spawn(cmd: &[String], startup: f64, base: &Path) -> Result<Started, PipelineError> {
        let mut service = spawn(cmd, base, "service")?;
        std::thread::sleep(Duration::from_secs_f64(startup.max(0.0)));
        if let Ok(Some(status)) = service.try_wait() {
            return Err(PipelineError::Service(format!(
                "the service command {cmd:?} exited ({status}) before it could be recorded"
            )));
        }
        Ok(Started { service })
    }

    fn stop(mut self) {
        self.service.stop(STOP_GRACE);
    }
}

/// Starts `cmd` in a process group of its own, so that stopping it stops what it started.
fn spawn(cmd: &[String], base: &Path, what: &str) -> Result<Group, PipelineError> {
    let (program, args) = cmd
        .split_first()
        .ok_or_else(|| PipelineError::Service(format!("the {what} command is empty")))?;
    // A relative program path is relative to the config, like every other path in it.
    let program = if program.contains('/') && Path::new(program).is_relative() {
        base.join(program)
    } else {
        PathBuf::from(program)
    };
    Group::spawn(
        Command::new(&program)
            .args(args)
            .current_dir(base)
            .stdin(Stdio::null())
            .stdout(Stdio::null()),
    )
    .map_err(|e| {
        PipelineError::Service(format!(
            "cannot start the {what} command {}: {e}",
            program.display()
        ))
    })
}

/// The service's version: the configured string, the first line of the version command, or
/// "unknown".
pub fn version(config: &Config) -> String {
    if let Some(v) = &config.service.version {
        return v.clone();
    }
    let Some(cmd) = &config.service.version_command else {
        return "unknown".into();
    };
    let Some((program, args)) = cmd.split_first() else {
        return "unknown".into();
    };
    Command::new(program)
        .args(args)
        .current_dir(&config.base)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(|l| l.trim().to_string())
        })
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "unknown".into())
}
