//! The knobs `tune` can turn, what each setting does to a run, and which are not available on
//! this machine (and why).
//!
//! Every knob is a [`KnobSpec`] in [`KNOBS`]: its name, the system files it may write (all a
//! restore file may name) and its probe, which finds its current setting and the others to
//! try here. The knobs that write system files live in `system`, those that change how the
//! service runs in `service`. A new knob is a `KnobSpec` in one of them (or a file of its
//! own) and one line in [`KNOBS`]. What a setting does to a run is its [`Change`]s.

mod service;
mod system;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::os::shell;

pub use service::Layout;

/// What a knob is before it looks at this machine.
pub struct KnobSpec {
    /// The name `--knobs` takes and reports print.
    pub name: &'static str,
    /// One line for `tune --help`: what its settings are.
    pub help: &'static str,
    /// Whether `path` is a file this knob writes: what a restore file may name.
    writes: fn(&Path) -> bool,
    /// The knob here: its current setting and those to try, or why it cannot be tried. Gets
    /// the knob's name for its report.
    probe: fn(&str, &Given) -> Knob,
}

/// Every knob, in the order they are tried.
pub static KNOBS: &[KnobSpec] = &[
    service::LAYOUT,
    system::THP,
    system::THP_DEFRAG,
    service::RUNTIME,
    service::MALLOC,
    service::CPUS,
    service::NUMA,
    service::NUMA_TEXT,
    system::GOVERNOR,
    system::PREFETCHERS,
];

/// The knob called `name` (as `--knobs` spells it).
pub fn named(name: &str) -> Option<&'static KnobSpec> {
    KNOBS.iter().find(|k| k.name == name)
}

impl KnobSpec {
    /// The knob as it is on this machine.
    pub fn probe(&self, given: &Given) -> Knob {
        (self.probe)(self.name, given)
    }
}

/// Whether `path` is a file some knob writes: what a restore file may name.
pub fn may_write(path: &Path) -> bool {
    KNOBS.iter().any(|k| (k.writes)(path))
}

/// For the knobs that write no system file.
fn writes_nothing(_: &Path) -> bool {
    false
}

/// One change a setting makes.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Change {
    /// An environment variable of the command.
    Env {
        /// The variable (`HOTTEXT_BACKING`).
        name: String,
        /// Its value.
        value: String,
    },
    /// Words in front of the command (`taskset -c 0`).
    Prefix {
        /// The words, unquoted.
        words: Vec<String>,
    },
    /// A system-wide file written before the run (recorded for restoring first).
    Sysfs {
        /// The file, under `/sys` or `/proc/sys`.
        path: PathBuf,
        /// What is written to it.
        value: String,
    },
    /// Another command altogether (another binary, another layout).
    Command {
        /// The command, run with `sh -c`.
        command: String,
    },
    /// A shell step before each run (where the binary's page cache sits).
    Before {
        /// The step, run with `sh -c`.
        script: String,
    },
}

/// One position of a knob.
#[derive(Debug, Clone, Serialize)]
pub struct Setting {
    /// The setting's name in reports ("as is", "glibc").
    pub label: String,
    /// What putting it in force changes (empty: nothing to change).
    pub changes: Vec<Change>,
}

/// A knob: its setting now and the ones to try, or why it cannot be tried here.
#[derive(Debug, Clone, Serialize)]
pub struct Knob {
    /// The knob's name, as `--knobs` lists it.
    pub name: String,
    /// The setting in force now: side A of every comparison.
    pub current: Setting,
    /// The settings to try against it.
    pub alternatives: Vec<Setting>,
    /// Why the knob cannot be tried on this machine; `None` when it can.
    pub unavailable: Option<String>,
}

fn setting(label: &str, changes: Vec<Change>) -> Setting {
    Setting {
        label: label.into(),
        changes,
    }
}

fn sysfs(path: &str, value: &str) -> Change {
    Change::Sysfs {
        path: path.into(),
        value: value.into(),
    }
}

fn env(name: &str, value: &str) -> Change {
    Change::Env {
        name: name.into(),
        value: value.into(),
    }
}

fn unavailable(name: &str, why: &str) -> Knob {
    Knob {
        name: name.into(),
        current: setting("as is", vec![]),
        alternatives: vec![],
        unavailable: Some(why.into()),
    }
}

/// What some knobs need to know of the service.
#[derive(Debug, Clone, Copy, Default)]
pub struct Given<'a> {
    /// The CPUs tune may use.
    pub cpus: &'a [u32],
    /// The commands the `layout` knob tries against the command as given.
    pub layouts: &'a [Layout],
    /// The service's executable, whose page cache the `numa-text` knob places.
    pub binary: Option<&'a Path>,
    /// A server that `ab` already pins to one CPU (the load runs on the others).
    pub pinned_server: bool,
}

/// How `ab` runs `command` with `settings` applied: the set-up line before each run, not
/// counted (system settings written, a page cache placed), and the `sh -c` line it counts.
pub fn command_line(command: &str, settings: &[&Setting]) -> (String, String) {
    let mut setup = Vec::new();
    let (mut envs, mut prefix, mut base) = (Vec::new(), Vec::new(), command.to_string());
    for change in settings.iter().flat_map(|s| &s.changes) {
        match change {
            Change::Sysfs { path, value } => setup.push(format!(
                "printf '%s' {} > {}",
                shell::word(value),
                shell::word(&path.to_string_lossy())
            )),
            Change::Env { name, value } => envs.push(format!("{name}={}", shell::word(value))),
            Change::Prefix { words } => prefix.extend(words.iter().map(|w| shell::word(w))),
            Change::Command { command } => base = command.clone(),
            Change::Before { script } => setup.push(format!("sh -c {}", shell::word(script))),
        }
    }
    let mut line = String::new();
    if !envs.is_empty() {
        line.push_str(&format!("env {} ", envs.join(" ")));
    }
    if !prefix.is_empty() {
        line.push_str(&format!("{} ", prefix.join(" ")));
    }
    // The command stays a shell line of its own, as `ab` runs it.
    if envs.is_empty() && prefix.is_empty() {
        line.push_str(&base);
    } else {
        line.push_str(&format!("sh -c {}", shell::word(&base)));
    }
    (setup.join(" && "), line)
}

/// The sysfs files `settings` may write.
pub fn files<'a>(settings: impl IntoIterator<Item = &'a Setting>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = settings
        .into_iter()
        .flat_map(|s| &s.changes)
        .filter_map(|c| match c {
            Change::Sysfs { path, .. } => Some(path.clone()),
            _ => None,
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests;
