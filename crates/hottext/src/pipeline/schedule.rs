//! Running the pipeline every week: a systemd timer and service, or the cron line where there
//! is no systemd. The paper refreshes weekly: most services' hot functions change slowly.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use crate::os::shell;

/// Where systemd reads the units that an administrator installs.
pub const SYSTEM_UNIT_DIR: &str = "/etc/systemd/system";

/// What every unit name starts with; the service's name follows.
const UNIT_PREFIX: &str = "hottext-pipeline-";
/// The longest ending a unit name gets after the service's name (a fleet host's service unit).
const LONGEST_UNIT_ENDING: &str = "-upload.service";
/// systemd's limit on a unit name, in bytes.
const UNIT_NAME_MAX: usize = 255;

/// Whether `service` can name systemd units (`hottext-pipeline-SERVICE.timer` and the like):
/// systemd takes ASCII letters, digits and `:-_.\`, `@` at most once (a template's instance),
/// and at most 255 bytes. A name it would reject is refused here, before anything is written.
pub(crate) fn check_service_name(service: &str) -> Result<(), String> {
    let rule = "letters, digits and :-_.\\, '@' at most once";
    if let Some(c) = service
        .chars()
        .find(|&c| !(c.is_ascii_alphanumeric() || ":-_.\\@".contains(c)))
    {
        return Err(format!(
            "[service] name {service:?} holds {c:?}, which systemd does not take in a unit name ({rule})"
        ));
    }
    if service.matches('@').count() > 1 {
        return Err(format!(
            "[service] name {service:?} holds '@' more than once, which systemd does not take in a unit name ({rule})"
        ));
    }
    let most = UNIT_NAME_MAX - UNIT_PREFIX.len() - LONGEST_UNIT_ENDING.len();
    if service.is_empty() || service.len() > most {
        return Err(format!(
            "[service] name must be 1 to {most} bytes (it names systemd units, at most {UNIT_NAME_MAX}), not {}",
            service.len()
        ));
    }
    Ok(())
}

/// The two unit files for one service's pipeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Units {
    /// `hottext-pipeline-<service>`; the files are `<name>.service` and `<name>.timer`.
    pub name: String,
    /// The `.service` unit's text.
    pub service: String,
    /// The `.timer` unit's text.
    pub timer: String,
    /// The crontab line that does the same.
    pub cron: String,
}

/// Which run a schedule starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Job {
    /// Record here, merge with the previous profile, commit (one host).
    Refresh,
    /// A fleet's host: record and upload (`--upload-only`).
    Upload,
    /// A fleet's merge job (`--merge-uploads`), six hours after the hosts' uploads.
    Merge,
}

impl Job {
    /// The unit name's suffix, the flag, and when it runs (systemd calendar, cron fields).
    fn parts(
        self,
    ) -> (
        &'static str,
        Option<&'static str>,
        &'static str,
        &'static str,
    ) {
        match self {
            Job::Refresh => ("", None, "weekly", "0 3 * * 1"),
            Job::Upload => ("-upload", Some("--upload-only"), "weekly", "0 3 * * 1"),
            Job::Merge => ("-merge", Some("--merge-uploads"), "Mon 06:00", "0 9 * * 1"),
        }
    }
}

/// Units that run `hottext pipeline run --config CONFIG` (with `job`'s flag) weekly. Both paths
/// should be absolute. A path that no unit file or crontab line can hold (a newline, a control
/// character, not UTF-8) is refused.
pub fn weekly(
    service: &str,
    hottext: &Path,
    config: &Path,
    job: Job,
) -> Result<Units, ScheduleError> {
    let (suffix, flag, calendar, cron_time) = job.parts();
    let name = format!("{UNIT_PREFIX}{service}{suffix}");
    let (hottext, config) = (line_safe(hottext)?, line_safe(config)?);
    if hottext.contains(['\'', '"', '\\']) {
        return Err(ScheduleError::UnsafePath {
            path: hottext.into(),
            why: "systemd runs no executable whose path holds a quote or a backslash".into(),
        });
    }
    let mut args = vec!["pipeline", "run", "--config", config];
    args.extend(flag);
    let command = std::iter::once(systemd_word(hottext, false))
        .chain(args.iter().map(|a| systemd_word(a, true)))
        .collect::<Vec<_>>()
        .join(" ");
    let dir = Path::new(config).parent().unwrap_or(Path::new("/"));
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
        // The rest of the line is the path; only specifiers are expanded.
        dir.display().to_string().replace('%', "%%")
    );
    let unit_timer = format!(
        "[Unit]\n\
         Description=hottext: weekly profile refresh of {service}\n\
         \n\
         [Timer]\n\
         OnCalendar={calendar}\n\
         # A missed run (machine off) runs at the next boot; fleets do not all profile at once.\n\
         Persistent=true\n\
         RandomizedDelaySec=1h\n\
         \n\
         [Install]\n\
         WantedBy=timers.target\n"
    );
    // cron hands the line to `sh`, but first reads an unescaped `%` as a newline.
    let shell_line = shell::join(std::iter::once(hottext).chain(args));
    Ok(Units {
        name,
        service: unit_service,
        timer: unit_timer,
        cron: format!("{cron_time} {}", shell_line.replace('%', "\\%")),
    })
}

/// `path` as text that fits on one line of a unit file or crontab.
fn line_safe(path: &Path) -> Result<&str, ScheduleError> {
    let unsafe_path = |why: &str| ScheduleError::UnsafePath {
        path: path.to_path_buf(),
        why: why.to_string(),
    };
    let text = path
        .to_str()
        .ok_or_else(|| unsafe_path("it is not UTF-8"))?;
    if text.chars().any(char::is_control) {
        return Err(unsafe_path(
            "it holds a newline or another control character",
        ));
    }
    Ok(text)
}

/// One word of a systemd command line (systemd.service(5), "Command lines"): in double quotes
/// with C escapes when it holds anything but plain characters, `%` doubled (specifiers) and,
/// in an argument, `$` doubled (variables; the executable's path is not expanded).
fn systemd_word(word: &str, argument: bool) -> String {
    let mut out = word.replace('%', "%%");
    if argument {
        out = out.replace('$', "$$");
    }
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:=,+@%$".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        return out;
    }
    format!("\"{}\"", out.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Whether systemd manages this machine (its own test, as `sd_booted()` does).
pub fn systemd_running() -> bool {
    Path::new("/run/systemd/system").is_dir()
}

/// Why the pipeline cannot be scheduled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleError {
    /// A unit file cannot be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A path a unit file or crontab line cannot hold safely.
    #[error("cannot schedule the pipeline with the path {path:?}: {why}; move it to a plain path")]
    UnsafePath {
        /// The path.
        path: PathBuf,
        /// What is unsafe about it.
        why: String,
    },
    /// systemctl failed.
    #[error("systemctl {args} failed: {stderr}")]
    Systemctl {
        /// Its arguments.
        args: String,
        /// What it said.
        stderr: String,
    },
}

/// Writes the units into `dir` atomically and returns their paths.
pub fn write(units: &Units, dir: &Path) -> Result<Vec<PathBuf>, ScheduleError> {
    let mut written = Vec::new();
    for (ext, text) in [("service", &units.service), ("timer", &units.timer)] {
        let path = dir.join(format!("{}.{ext}", units.name));
        std::fs::create_dir_all(dir)
            .and_then(|_| crate::os::files::write_atomic(&path, text.as_bytes()))
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
    fn service_names_follow_systemds_unit_name_rules() {
        for good in ["web", "db_2:main.x", "a@b", "back\\slash"] {
            check_service_name(good).unwrap();
        }
        let why = |name: &str| check_service_name(name).unwrap_err();
        assert!(why("x%n%i%%").contains("holds '%'"), "{}", why("x%n%i%%"));
        assert!(why("a b").contains("holds ' '"));
        assert!(why("a@b@c").contains("'@' more than once"));
        assert!(why("").contains("1 to 223 bytes"));
        assert!(why(&"x".repeat(224)).contains("not 224"));
        check_service_name(&"x".repeat(223)).unwrap();
    }

    #[test]
    fn weekly_units_run_the_pipeline_with_absolute_paths() {
        let u = weekly(
            "server",
            Path::new("/usr/bin/hottext"),
            Path::new("/srv/app/hottext.toml"),
            Job::Refresh,
        )
        .unwrap();
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

    /// Directories whose names mean something to sh, cron and systemd: `hottext` (a script
    /// that writes its arguments, one a line, to `args` beside it) in one, the config in one
    /// below it whose name also holds quotes and a backslash, which systemd takes in arguments
    /// but not in the executable's path.
    fn hostile_install() -> (tempfile::TempDir, PathBuf, PathBuf) {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("we ird $(touch pwned) `id` 100%n $HOME");
        let config_dir = dir.join("'q' \"d\" \\b");
        std::fs::create_dir_all(&config_dir).unwrap();
        let exe = dir.join("hottext");
        std::fs::write(
            &exe,
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$(dirname \"$0\")/args\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        (root, exe, config_dir.join("hottext.toml"))
    }

    #[test]
    fn the_cron_line_runs_the_paths_it_names_and_nothing_else() {
        let (root, exe, config) = hostile_install();
        let cron = weekly("svc", &exe, &config, Job::Refresh).unwrap().cron;
        let command = cron.splitn(6, ' ').nth(5).unwrap();
        // As cron does: an unescaped % ends the command; \% is a %.
        assert!(!command.replace("\\%", "").contains('%'), "{cron}");
        let command = command.replace("\\%", "%");
        let out = Command::new("sh")
            .args(["-c", &command])
            .current_dir(root.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{cron}: {out:?}");
        let args = std::fs::read_to_string(exe.with_file_name("args")).unwrap();
        assert_eq!(
            args,
            format!("pipeline\nrun\n--config\n{}\n", config.display())
        );
        assert!(!root.path().join("pwned").exists(), "{cron} ran $(…)");
    }

    #[test]
    fn systemd_finds_the_executable_of_a_hostile_path() {
        let (root, exe, config) = hostile_install();
        let units = weekly("svc", &exe, &config, Job::Refresh).unwrap();
        let unit_dir = root.path().join("units");
        let written = write(&units, &unit_dir).unwrap();
        // systemd-analyze parses ExecStart= as systemd does and checks that its executable
        // exists: a misquoted space, `%` or quote points it elsewhere.
        let verify = Command::new("systemd-analyze")
            .arg("verify")
            .arg(&written[0])
            .output()
            .expect("systemd-analyze (Debian package systemd) is needed by this test");
        let said = String::from_utf8_lossy(&verify.stderr);
        assert!(
            verify.status.success() && !said.contains("not executable"),
            "{}\n{said}",
            units.service
        );
        // Arguments: `$` doubled (a variable otherwise), `%` doubled, quotes escaped.
        assert!(
            units.service.contains("$$(touch pwned)"),
            "{}",
            units.service
        );
        assert!(units.service.contains("\\\"d\\\""), "{}", units.service);
    }

    #[test]
    fn a_fleet_uploads_on_every_host_and_merges_six_hours_later() {
        let (exe, config) = (Path::new("/usr/bin/hottext"), Path::new("/srv/app/h.toml"));
        let upload = weekly("server", exe, config, Job::Upload).unwrap();
        assert_eq!(upload.name, "hottext-pipeline-server-upload");
        assert!(upload
            .service
            .contains("--config /srv/app/h.toml --upload-only\n"));
        assert!(upload.cron.starts_with("0 3 * * 1 "));
        let merge = weekly("server", exe, config, Job::Merge).unwrap();
        assert_eq!(merge.name, "hottext-pipeline-server-merge");
        assert!(merge.timer.contains("OnCalendar=Mon 06:00\n"));
        assert!(merge
            .cron
            .ends_with("--config /srv/app/h.toml --merge-uploads"));
    }

    #[test]
    fn a_path_with_a_newline_cannot_be_scheduled() {
        let err = weekly(
            "svc",
            Path::new("/usr/bin/hottext"),
            Path::new("/srv/a\nb.toml"),
            Job::Refresh,
        )
        .unwrap_err();
        assert!(err.to_string().contains("newline"), "{err}");
    }
}
