//! The pipeline's configuration file (TOML). Relative paths are relative to the file's folder,
//! so a config kept in the service's repository works from anywhere.
//!
//! ```toml
//! [service]
//! name = "server"                      # names the commit, the lock and the systemd units
//! binary = "build/server"              # the executable, with its symbol table
//! pid_file = "/run/server.pid"         # or: pid = 4242 / systemd_unit = "server.service"
//!                                      # or: command = ["build/server", "--port", "8080"]
//!                                      #     load = ["./load.sh"]  (runs while recording)
//! version_command = ["git", "describe", "--always"]   # or: version = "2.14.1"
//!
//! [record]
//! seconds = 60
//! sampling = "every-branch"            # optional: stack, dwarf, branch, every-branch, plain
//!
//! [store]
//! url = "s3://profiles/server?region=eu-west-1"
//!
//! [repo]
//! path = "."                           # the service's git repository
//! meta = "hottext/server.meta"         # the meta file, relative to the repository
//! branch = "hottext/profile"
//! push = "origin"                      # optional
//!
//! [merge]
//! decay = 0.5                          # weight = new + decay × previous
//!
//! [fleet]                              # a service on many hosts (see `pipeline::fleet`)
//! window_days = 14                     # the merge job merges the uploads of the last 14 days
//! half_life_days = 7                   # an upload's weight halves every 7 days of its age
//! min_matched = 0.5                    # an upload the binary matches less is refused
//!
//! [gate]
//! min_samples = 1000
//! min_resolved = 0.9
//! max_drift = 0.9
//! min_previous_matched = 0.5
//! ```

use std::path::{Path, PathBuf};

use crate::os::proc::Pid;
use crate::profile::record;
use serde::Deserialize;

/// A service's pipeline configuration (`hottext.toml`), read by [`Config::read`].
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `[service]`: what to record and how to find it.
    pub service: Service,
    /// `[record]`: how long and how often to sample.
    #[serde(default)]
    pub record: Record,
    /// `[store]`: where profiles are kept.
    pub store: StoreConfig,
    /// `[repo]`: the repository that holds the meta file.
    pub repo: RepoConfig,
    /// `[merge]`: how the previous profile is weighed.
    #[serde(default)]
    pub merge: Merge,
    /// `[fleet]`: how the merge job weighs the hosts' uploads.
    #[serde(default)]
    pub fleet: Fleet,
    /// `[gate]`: what a profile must show to be stored.
    #[serde(default)]
    pub gate: Gate,
    /// The config file's folder: relative paths and commands start from here.
    #[serde(skip)]
    pub base: PathBuf,
}

/// `[service]`: the service to record.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Service {
    /// Its name: in unit files, upload entries and commit messages.
    pub name: String,
    /// The executable (with symbols). Defaults to the running process's `/proc/PID/exe`.
    pub binary: Option<PathBuf>,
    /// The running process to record.
    pub pid: Option<Pid>,
    /// A file holding the pid of the process to record.
    pub pid_file: Option<PathBuf>,
    /// The systemd unit whose main process to record.
    pub systemd_unit: Option<String>,
    /// Start the service with this command, record it, stop it.
    pub command: Option<Vec<String>>,
    /// With `command`: the load to run while recording; recording ends when it exits (or
    /// after `record.seconds`).
    pub load: Option<Vec<String>>,
    /// With `command`: how long the service needs to start before recording begins.
    #[serde(default = "default_startup")]
    pub startup_seconds: f64,
    /// The service's version, written into the meta file.
    pub version: Option<String>,
    /// A command that prints the version (instead of `version`).
    pub version_command: Option<Vec<String>>,
    /// The host's name in its uploads (`--upload-only`); default: the kernel's host name.
    pub host: Option<String>,
}

/// `[record]`: how the service is sampled.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// How long to record. The paper's job records a few minutes a week.
    #[serde(default = "default_seconds")]
    pub seconds: f64,
    /// Samples per second (default: `hottext record`'s).
    pub frequency: Option<u32>,
    /// What the samples carry (default: the best the machine and binary allow, as `hottext
    /// record` chooses); `every-branch` gives block edges for the cluster file's block order.
    pub sampling: Option<record::Sampling>,
}

/// `[store]`: the profile store.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// The store's location: a folder, `file://` or `s3://` URL.
    pub url: String,
}

/// `[repo]`: the repository the meta file is committed to.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepoConfig {
    /// The repository's folder (default: the config file's).
    #[serde(default = "default_repo")]
    pub path: PathBuf,
    /// The meta file's path inside the repository.
    pub meta: PathBuf,
    /// The branch to commit to.
    #[serde(default = "default_branch")]
    pub branch: String,
    /// A remote to push the branch to after committing.
    pub push: Option<String>,
    /// `Name <email>` for the commits; default: git's configured identity, else
    /// `hottext pipeline <hottext@localhost>`.
    pub author: Option<String>,
}

/// How the merge job weighs a fleet's uploads (`pipeline run --merge-uploads`).
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Fleet {
    /// Uploads whose recording ended longer ago than this are not merged, and their entries are
    /// withdrawn once a merge is committed.
    #[serde(default = "default_window_days")]
    pub window_days: f64,
    /// An upload's weight is 0.5^(age / half_life_days): last week's counts half as much.
    #[serde(default = "default_half_life_days")]
    pub half_life_days: f64,
    /// Share of an upload's weight that the binary must have (by name or by code) for it to be
    /// merged: an upload from a much older build is refused, not merged in part.
    #[serde(default = "default_min_previous_matched")]
    pub min_matched: f64,
}

/// `[merge]`: how a run's profile and the previous one are merged.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Merge {
    /// Weight of the previous profile: merged = new + decay × previous. 0.5 halves last week's
    /// weight each week, so a function that stops being hot fades out within a month or so.
    #[serde(default = "default_decay")]
    pub decay: f64,
}

/// `[gate]`: the quality gate's limits.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Gate {
    /// Fewer samples of the binary than this say the recording missed the service (wrong pid,
    /// no load), not that the service changed.
    #[serde(default = "default_min_samples")]
    pub min_samples: u64,
    /// Share of the binary's samples that fell in a function symbol; below it the binary does
    /// not match the symbols we read (stripped, or another build).
    #[serde(default = "default_min_resolved")]
    pub min_resolved: f64,
    /// Largest drift (total variation distance between this run's and the previous profile's
    /// sample shares, 0 = same, 1 = disjoint) to accept: a profile that shares less than 10%
    /// of its weight with the last one is more likely a broken load than a code change.
    #[serde(default = "default_max_drift")]
    pub max_drift: f64,
    /// Share of the previous profile's weight that must match the current binary for it to be
    /// merged; below it the previous profile is left out (not a failure) and the report says so.
    #[serde(default = "default_min_previous_matched")]
    pub min_previous_matched: f64,
}

fn default_startup() -> f64 {
    0.5
}
fn default_seconds() -> f64 {
    60.0
}
fn default_repo() -> PathBuf {
    PathBuf::from(".")
}
fn default_branch() -> String {
    "hottext/profile".into()
}
fn default_decay() -> f64 {
    0.5
}
fn default_window_days() -> f64 {
    14.0
}
fn default_half_life_days() -> f64 {
    7.0
}
fn default_min_samples() -> u64 {
    1000
}
fn default_min_resolved() -> f64 {
    0.9
}
fn default_max_drift() -> f64 {
    0.9
}
fn default_min_previous_matched() -> f64 {
    0.5
}

impl Default for Record {
    fn default() -> Self {
        Record {
            seconds: default_seconds(),
            frequency: None,
            sampling: None,
        }
    }
}

impl Default for Merge {
    fn default() -> Self {
        Merge {
            decay: default_decay(),
        }
    }
}

impl Default for Fleet {
    fn default() -> Self {
        Fleet {
            window_days: default_window_days(),
            half_life_days: default_half_life_days(),
            min_matched: default_min_previous_matched(),
        }
    }
}

impl Default for Gate {
    fn default() -> Self {
        Gate {
            min_samples: default_min_samples(),
            min_resolved: default_min_resolved(),
            max_drift: default_max_drift(),
            min_previous_matched: default_min_previous_matched(),
        }
    }
}

/// Why a configuration cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A config file that cannot be read.
    #[error("cannot read config {path}: {source}")]
    Io {
        /// The config file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A config file that is not valid TOML or holds a bad value.
    #[error("config {path}: {msg}")]
    Invalid {
        /// The config file.
        path: PathBuf,
        /// What is wrong, naming the field.
        msg: String,
    },
}

impl Config {
    /// Reads and checks `path`, and makes its relative paths relative to its folder.
    pub fn read(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.into(),
            source,
        })?;
        Config::parse(&text, path)
    }

    /// Parses and checks config text; relative paths become relative to `path`'s folder.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let invalid = |msg: String| ConfigError::Invalid {
            path: path.into(),
            msg,
        };
        let mut config: Config = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        config.check().map_err(invalid)?;
        let base = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let base = std::fs::canonicalize(&base).unwrap_or(base);
        config.base = base.clone();
        let base = base.as_path();
        let rebase = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = normalize(&base.join(&*p));
            }
        };
        if let Some(b) = &mut config.service.binary {
            rebase(b);
        }
        if let Some(p) = &mut config.service.pid_file {
            rebase(p);
        }
        rebase(&mut config.repo.path);
        // A plain store path is a directory, relative to the config like the others; URLs stay.
        if !config.store.url.contains("://") && Path::new(&config.store.url).is_relative() {
            config.store.url = normalize(&base.join(&config.store.url))
                .display()
                .to_string();
        }
        Ok(config)
    }

    fn check(&self) -> Result<(), String> {
        let s = &self.service;
        let targets = [
            s.pid.is_some(),
            s.pid_file.is_some(),
            s.systemd_unit.is_some(),
            s.command.is_some(),
        ];
        if targets.iter().filter(|&&t| t).count() != 1 {
            return Err(
                "[service] needs exactly one of pid, pid_file, systemd_unit or command".into(),
            );
        }
        if s.command.as_ref().is_some_and(|c| c.is_empty()) {
            return Err("[service] command is empty".into());
        }
        if s.load.is_some() && s.command.is_none() {
            return Err(
                "[service] load runs with command; for a running service, run the load yourself"
                    .into(),
            );
        }
        if s.version.is_some() && s.version_command.is_some() {
            return Err("[service] give version or version_command, not both".into());
        }
        // It names files, the lock and git branches too, which systemd's rule keeps plain.
        super::schedule::check_service_name(&s.name)?;
        // A day is more than any recording needs; a larger figure is a typo (1e30 once panicked).
        if !(self.record.seconds > 0.0 && self.record.seconds <= 86400.0) {
            return Err(
                "[record] seconds must be a number of seconds above 0 and at most 86400".into(),
            );
        }
        // Checked here, before the service starts, not by the recording after it.
        record::check_seconds("[record] seconds", self.record.seconds)?;
        if let Some(f) = self.record.frequency {
            record::check_frequency("[record] frequency", f)?;
        }
        if !(0.0..=3600.0).contains(&s.startup_seconds) {
            return Err("[service] startup_seconds must be from 0 to 3600".into());
        }
        if !(0.0..=1.0).contains(&self.merge.decay) {
            return Err("[merge] decay must be between 0 and 1".into());
        }
        for (name, v) in [
            ("min_resolved", self.gate.min_resolved),
            ("max_drift", self.gate.max_drift),
            ("min_previous_matched", self.gate.min_previous_matched),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("[gate] {name} must be between 0 and 1"));
            }
        }
        if let Some(host) = &s.host {
            crate::store::uploads::check_name("[service] host", host)?;
        }
        let f = &self.fleet;
        if !(f.window_days > 0.0 && f.window_days <= 3650.0) {
            return Err("[fleet] window_days must be above 0 and at most 3650".into());
        }
        if !(f.half_life_days > 0.0 && f.half_life_days <= 3650.0) {
            return Err("[fleet] half_life_days must be above 0 and at most 3650".into());
        }
        if !(0.0..=1.0).contains(&f.min_matched) {
            return Err("[fleet] min_matched must be between 0 and 1".into());
        }
        if self.repo.meta.is_absolute() {
            return Err("[repo] meta is a path inside the repository, not an absolute path".into());
        }
        Ok(())
    }
}

/// `a/b/../c` as `a/c`, without touching the file system (the path may not exist yet). The
/// store path goes into the meta file, where `repo/../store` would puzzle a reviewer.
fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir
                if matches!(out.components().next_back(), Some(Component::Normal(_))) =>
            {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
