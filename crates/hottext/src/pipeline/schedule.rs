//! Running the pipeline every week: a systemd timer and service, or the cron line where there
//! is no systemd. The paper refreshes weekly: most services' hot functions change slowly.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

/// Where systemd reads the units that an administrator installs.
pub const SYSTEM_UNIT_DIR: &str = "/etc/systemd/system";

/// The two unit files for one service's pipeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Units {
    /// `hottext-pipeline-<service>`; the files are `<name>.service` and `<name>.timer`.
    pub name: String,
    pub service: String,
    pub timer: String,
    /// The crontab line that does the same.
    pub cron: String,
}

/// Units that run `hottext pipeline run --config CONFIG` weekly. Both paths should be absolute.
pub fn weekly(service: &str, hottext: &Path, config: &Path) -> Units {
    let name = format!("hottext-pipeline-{service}");
    let command = format!("{} pipeline run --config {}", quote(hottext), quote(config));
    let dir = config.parent().unwrap_or(Path::new("/"));
    let unit_service = format!(
        "[Unit]\n\
         Description=hottext: refresh the hot-text profile of {service}\n\
         Documentation=man:perf(1)\n\
         After=network-online.target\n\
         \n\
         [Service]\n\
         Type=oneshot\n\
         WorkingDirectory={}\n\
         ExecStart={command}\n\
         # perf needs root, or CAP_PERFMON with kernel.perf_event_paranoid lowered.\n\
         Nice=10\n",
        dir.display()
    );
    let unit_timer = format!(
        "[Unit]\n\
         Description=hottext: weekly profile refresh of {service}\n\
         \n\
         [Timer]\n\
         OnCalendar=weekly\n\
         # A missed run (machine off) runs at the next boot; fleets do not all profile at once.\n\
         Persistent=true\n\
         RandomizedDelaySec=1h\n\
         \n\
         [Install]\n\
         WantedBy=timers.target\n"
    );
    Units {
        name,
        service: unit_service,
        timer: unit_timer,
        cron: format!("0 3 * * 1 {command}"),
    }
}

/// Paths in unit files and crontabs: quote what a shell or systemd would split.
fn quote(path: &Path) -> String {
    let s = path.display().to_string();
    if s.contains(|c: char| c.is_whitespace() || c == '"' || c == '\'') {
        format!("\"{}\"", s.replace('"', "\\\""))
    } else {
        s
    }
}

/// Whether systemd manages this machine (its own test, as `sd_booted()` does).
pub fn systemd_running() -> bool {
    Path::new("/run/systemd/system").is_dir()
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleError {
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("systemctl {args} failed: {stderr}")]
    Systemctl { args: String, stderr: String },
}

/// Writes the units into `dir` atomically and returns their paths.
pub fn write(units: &Units, dir: &Path) -> Result<Vec<PathBuf>, ScheduleError> {
    let mut written = Vec::new();
    for (ext, text) in [("service", &units.service), ("timer", &units.timer)] {
        let path = dir.join(format!("{}.{ext}", units.name));
        std::fs::create_dir_all(dir)
            .and_then(|_| crate::store::meta::write_atomic(&path, text.as_bytes()))
            .map_err(|source| ScheduleError::Write {
                path: path.clone(),
                source,
            })?;
        written.push(path);
    }
    Ok(written)
}

/// `systemctl daemon-reload` and `systemctl enable --now <name>.timer`.
pub fn enable(units: &Units) -> Result<(), ScheduleError> {
    let timer = format!("{}.timer", units.name);
    for args in [
        vec!["daemon-reload"],
        vec!["enable", "--now", timer.as_str()],
    ] {
        let out = Command::new("systemctl")
            .args(&args)
            .output()
            .map_err(|e| ScheduleError::Systemctl {
                args: args.join(" "),
                stderr: e.to_string(),
            })?;
        if !out.status.success() {
            return Err(ScheduleError::Systemctl {
                args: args.join(" "),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weekly_units_run_the_pipeline_with_absolute_paths() {
        let u = weekly(
            "server",
            Path::new("/usr/bin/hottext"),
            Path::new("/srv/app/hottext.toml"),
        );
        assert_eq!(u.name, "hottext-pipeline-server");
        assert!(u
            .service
            .contains("ExecStart=/usr/bin/hottext pipeline run --config /srv/app/hottext.toml\n"));
        assert!(u.service.contains("WorkingDirectory=/srv/app\n"));
        assert!(u.timer.contains("OnCalendar=weekly\n"));
        assert_eq!(
            u.cron,
            "0 3 * * 1 /usr/bin/hottext pipeline run --config /srv/app/hottext.toml"
        );
    }
}
