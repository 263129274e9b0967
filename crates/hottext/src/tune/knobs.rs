//! The knobs `tune` can turn, what each setting does to a run, and which are not available on
//! this machine (and why).

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::diagnose::system;
use crate::os::shell;

pub const THP_ENABLED: &str = "/sys/kernel/mm/transparent_hugepage/enabled";
pub const THP_DEFRAG: &str = "/sys/kernel/mm/transparent_hugepage/defrag";
/// One directory per cpufreq policy (a group of CPUs that share a clock).
const CPUFREQ: &str = "/sys/devices/system/cpu/cpufreq";

/// Whether `path` is a file some knob writes: what a restore file may name.
pub fn may_write(path: &Path) -> bool {
    if path == Path::new(THP_ENABLED) || path == Path::new(THP_DEFRAG) {
        return true;
    }
    let Ok(rest) = path.strip_prefix(CPUFREQ) else {
        return false;
    };
    let mut parts = rest.iter().map(|p| p.to_string_lossy());
    matches!(
        (parts.next(), parts.next(), parts.next()),
        (Some(policy), Some(file), None)
            if policy.strip_prefix("policy").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                && file == "scaling_governor"
    )
}

/// Whether this process may write `path` (opening for writing changes nothing by itself).
fn writable(path: &str) -> bool {
    std::fs::OpenOptions::new().write(true).open(path).is_ok()
}

/// One change a setting makes.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Change {
    /// An environment variable of the command.
    Env { name: String, value: String },
    /// Words in front of the command (`taskset -c 0`).
    Prefix { words: Vec<String> },
    /// A system-wide file written before the run (recorded for restoring first).
    Sysfs { path: PathBuf, value: String },
    /// Another command altogether (another binary, another layout).
    Command { command: String },
    /// A shell step before each run (where the binary's page cache sits).
    Before { script: String },
}

/// One position of a knob.
#[derive(Debug, Clone, Serialize)]
pub struct Setting {
    pub label: String,
    pub changes: Vec<Change>,
}

/// A knob: its setting now and the ones to try, or why it cannot be tried here.
#[derive(Debug, Clone, Serialize)]
pub struct Knob {
    pub name: String,
    pub current: Setting,
    pub alternatives: Vec<Setting>,
    pub unavailable: Option<String>,
}

/// Every knob's name, in the order they are tried.
pub const NAMES: [&str; 10] = [
    "layout",
    "thp",
    "thp-defrag",
    "runtime",
    "malloc",
    "cpus",
    "numa",
    "numa-text",
    "governor",
    "prefetchers",
];

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

/// A knob written through a sysfs file: the current value and the others of `values`.
fn sysfs_knob(name: &str, path: &str, values: &[&str]) -> Knob {
    let current = std::fs::read_to_string(path)
        .map(|t| super::restore::current_value(&t))
        .ok();
    let Some(current) = current else {
        return unavailable(name, &format!("{path} is not on this machine"));
    };
    if !writable(path) {
        return unavailable(name, &format!("{path} is not writable here: run as root"));
    }
    Knob {
        name: name.into(),
        current: setting(&current, vec![sysfs(path, &current)]),
        alternatives: values
            .iter()
            .filter(|&&v| v != current)
            .map(|v| setting(v, vec![sysfs(path, v)]))
            .collect(),
        unavailable: None,
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

/// Another layout to try: its name and the command that runs it (another binary, or a build
/// and a run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub name: String,
    pub command: String,
}

impl std::str::FromStr for Layout {
    type Err = String;

    /// `NAME=CMD`, NAME of letters, digits, `.`, `_` and `-`.
    fn from_str(text: &str) -> Result<Layout, String> {
        let (name, command) = text
            .split_once('=')
            .ok_or_else(|| format!("{text:?} is not NAME=CMD (e.g. c3=./build-c3/server)"))?;
        let name_ok = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
        if !name_ok {
            return Err(format!(
                "layout name {name:?}: use letters, digits, '.', '_' and '-'"
            ));
        }
        if command.trim().is_empty() {
            return Err(format!("layout {name}: the command is empty"));
        }
        Ok(Layout {
            name: name.into(),
            command: command.into(),
        })
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

/// The frequency governor of every cpufreq policy, tried with each governor the driver offers.
fn governor(name: &str) -> Knob {
    let mut policies: Vec<PathBuf> = std::fs::read_dir(CPUFREQ)
        .map(|d| {
            d.flatten()
                .map(|e| e.path().join("scaling_governor"))
                .filter(|p| may_write(p) && p.exists())
                .collect()
        })
        .unwrap_or_default();
    policies.sort();
    let Some(first) = policies.first() else {
        return unavailable(name, &format!("no cpufreq policy under {CPUFREQ}"));
    };
    let Ok(current) = std::fs::read_to_string(first).map(|t| t.trim().to_string()) else {
        return unavailable(name, &format!("cannot read {}", first.display()));
    };
    if !policies.iter().all(|p| writable(&p.to_string_lossy())) {
        return unavailable(
            name,
            &format!("{CPUFREQ} is not writable here: run as root"),
        );
    }
    let offered = std::fs::read_to_string(first.with_file_name("scaling_available_governors"))
        .unwrap_or_default();
    let every = |value: &str| {
        policies
            .iter()
            .map(|p| Change::Sysfs {
                path: p.clone(),
                value: value.into(),
            })
            .collect()
    };
    Knob {
        name: name.into(),
        current: setting(&current, every(&current)),
        alternatives: offered
            .split_whitespace()
            .filter(|&g| g != current)
            .map(|g| setting(g, every(g)))
            .collect(),
        unavailable: None,
    }
}

/// The binary's page cache (its text, shared by every process of it) on each node in turn,
/// against wherever the first reader's node puts it: dropped before each run (GNU dd's
/// documented way to drop a file's cache, `iflag=nocache count=0`) and read again under `numactl --membind` (the
/// userspace lessons' "NUMA placement of the binary").
fn numa_text(name: &str, nodes: usize, binary: Option<&Path>) -> Knob {
    if nodes < 2 {
        return unavailable(name, "one NUMA node here");
    }
    let Some(binary) = binary else {
        return unavailable(name, "give --binary, the service's executable");
    };
    let bin = shell::word(&binary.to_string_lossy());
    // Reading with nocache drops the file's cache without opening it for writing, which a
    // running copy of the binary would refuse (ETXTBSY).
    let drop = format!("dd if={bin} iflag=nocache count=0 2>/dev/null");
    let place = |reader: &str| Change::Before {
        script: format!("{drop}; {reader}cat {bin} > /dev/null"),
    };
    Knob {
        name: name.into(),
        current: setting("first reader's node", vec![place("")]),
        alternatives: (0..nodes)
            .map(|n| {
                setting(
                    &format!("on node {n}"),
                    vec![place(&format!("numactl --membind={n} "))],
                )
            })
            .collect(),
        unavailable: None,
    }
}

/// The knob called `name`.
pub fn knob(name: &str, given: &Given) -> Option<Knob> {
    let (allowed_cpus, layouts) = (given.cpus, given.layouts);
    Some(match name {
        "layout" if layouts.is_empty() => unavailable(
            name,
            "no other layout given (--layout NAME=CMD, one per layout)",
        ),
        "layout" => Knob {
            name: name.into(),
            current: setting("as given", vec![]),
            alternatives: layouts
                .iter()
                .map(|l| {
                    setting(
                        &l.name,
                        vec![Change::Command {
                            command: l.command.clone(),
                        }],
                    )
                })
                .collect(),
            unavailable: None,
        },
        "thp" => sysfs_knob(name, THP_ENABLED, &["always", "madvise", "never"]),
        "thp-defrag" => sysfs_knob(name, THP_DEFRAG, &["defer+madvise", "madvise", "always"]),
        "runtime" => {
            let mut alternatives = vec![setting(
                "off (HOTTEXT_HUGIFY=0)",
                vec![env("HOTTEXT_HUGIFY", "0")],
            )];
            // The backings the runtime may pick (auto tries file, then anon); hugetlb only
            // with pages in the pool.
            let mut backings = vec!["file", "anon"];
            let memory = system::memory();
            if memory.hugetlb_free.unwrap_or(0) > 0 && memory.hugetlb_page_kb == Some(2048) {
                backings.push("hugetlb");
            }
            for backing in backings {
                alternatives.push(setting(
                    &format!("{backing} backing (HOTTEXT_BACKING={backing})"),
                    vec![env("HOTTEXT_BACKING", backing)],
                ));
            }
            Knob {
                name: name.into(),
                current: setting("on, auto backing", vec![]),
                alternatives,
                unavailable: None,
            }
        }
        "malloc" => {
            let mut alternatives = vec![setting(
                "glibc with huge pages (glibc.malloc.hugetlb=1)",
                vec![env("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1")],
            )];
            for (label, lib) in [
                ("jemalloc", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"),
                (
                    "tcmalloc",
                    "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
                ),
            ] {
                if Path::new(lib).exists() {
                    alternatives.push(setting(label, vec![env("LD_PRELOAD", lib)]));
                }
            }
            Knob {
                name: name.into(),
                current: setting("glibc", vec![]),
                alternatives,
                unavailable: None,
            }
        }
        "cpus" if given.pinned_server => unavailable(
            name,
            "the server already runs on one CPU (ab pins it; the load runs on the others)",
        ),
        "cpus" if allowed_cpus.len() > 1 => Knob {
            name: name.into(),
            current: setting(&format!("{} CPUs", allowed_cpus.len()), vec![]),
            alternatives: vec![setting(
                &format!("CPU {} only", allowed_cpus[0]),
                vec![Change::Prefix {
                    words: vec!["taskset".into(), "-c".into(), allowed_cpus[0].to_string()],
                }],
            )],
            unavailable: None,
        },
        "cpus" => unavailable(name, "one CPU here"),
        "numa" if system::numa_nodes() < 2 => unavailable(name, "one NUMA node here"),
        "numa" => Knob {
            name: name.into(),
            current: setting("default", vec![]),
            alternatives: vec![setting(
                "interleaved",
                vec![Change::Prefix {
                    words: vec!["numactl".into(), "--interleave=all".into()],
                }],
            )],
            unavailable: None,
        },
        "numa-text" => numa_text(name, system::numa_nodes(), given.binary),
        "governor" => governor(name),
        "prefetchers" => unavailable(
            name,
            "the prefetcher switches are model-specific registers, which tune does not write",
        ),
        _ => return None,
    })
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
#[path = "knobs_tests.rs"]
mod tests;
