//! The knobs that change how the service runs: its command, environment, CPUs and memory
//! placement. They write no system file.

use std::path::Path;

use super::{env, setting, unavailable, writes_nothing, Change, Given, Knob, KnobSpec};
use crate::diagnose::system;
use crate::os::shell;

pub(super) const LAYOUT: KnobSpec = KnobSpec {
    name: "layout",
    help:
        "each --layout NAME=CMD against the command as given: another binary, or a build and a run",
    writes: writes_nothing,
    probe: layout,
};

pub(super) const RUNTIME: KnobSpec = KnobSpec {
    name: "runtime",
    help: "hottext's runtime off; its file, anon or hugetlb backing",
    writes: writes_nothing,
    probe: |name, _| runtime(name),
};

pub(super) const MALLOC: KnobSpec = KnobSpec {
    name: "malloc",
    help: "glibc.malloc.hugetlb=1; jemalloc, tcmalloc through LD_PRELOAD when installed",
    writes: writes_nothing,
    probe: |name, _| malloc(name),
};

pub(super) const CPUS: KnobSpec = KnobSpec {
    name: "cpus",
    help: "the service on one CPU",
    writes: writes_nothing,
    probe: cpus,
};

pub(super) const NUMA: KnobSpec = KnobSpec {
    name: "numa",
    help: "its memory interleaved over the nodes, with two nodes or more",
    writes: writes_nothing,
    probe: |name, _| numa(name, system::numa_nodes()),
};

pub(super) const NUMA_TEXT: KnobSpec = KnobSpec {
    name: "numa-text",
    help: "the --binary's page cache dropped and read again on each node before every run",
    writes: writes_nothing,
    probe: |name, given| numa_text(name, system::numa_nodes(), given.binary),
};

/// Each `--layout` against the command as given.
fn layout(name: &str, given: &Given) -> Knob {
    if given.layouts.is_empty() {
        return unavailable(
            name,
            "no other layout given (--layout NAME=CMD, one per layout)",
        );
    }
    Knob {
        name: name.into(),
        current: setting("as given", vec![]),
        alternatives: given
            .layouts
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
    }
}

/// hottext's runtime off, and each backing it may pick.
fn runtime(name: &str) -> Knob {
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

/// glibc's malloc on huge pages, and the other allocators installed here.
fn malloc(name: &str) -> Knob {
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

/// The service on the first CPU it may use, against all of them.
fn cpus(name: &str, given: &Given) -> Knob {
    let allowed_cpus = given.cpus;
    if given.pinned_server {
        return unavailable(
            name,
            "the server already runs on one CPU (ab pins it; the load runs on the others)",
        );
    }
    if allowed_cpus.len() <= 1 {
        return unavailable(name, "one CPU here");
    }
    Knob {
        name: name.into(),
        current: setting(&format!("{} CPUs", allowed_cpus.len()), vec![]),
        alternatives: vec![setting(
            &format!("CPU {} only", allowed_cpus[0]),
            vec![Change::Prefix {
                words: vec!["taskset".into(), "-c".into(), allowed_cpus[0].to_string()],
            }],
        )],
        unavailable: None,
    }
}

/// The service's memory interleaved over the NUMA nodes.
fn numa(name: &str, nodes: usize) -> Knob {
    if nodes < 2 {
        return unavailable(name, "one NUMA node here");
    }
    Knob {
        name: name.into(),
        current: setting("default", vec![]),
        alternatives: vec![setting(
            "interleaved",
            vec![Change::Prefix {
                words: vec!["numactl".into(), "--interleave=all".into()],
            }],
        )],
        unavailable: None,
    }
}

/// The binary's page cache (its text, shared by every process of it) on each node in turn,
/// against wherever the first reader's node puts it: dropped before each run (GNU dd's
/// documented way to drop a file's cache, `iflag=nocache count=0`) and read again under `numactl --membind` (the
/// userspace lessons' "NUMA placement of the binary").
pub(super) fn numa_text(name: &str, nodes: usize, binary: Option<&Path>) -> Knob {
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

/// Another layout to try: its name and the command that runs it (another binary, or a build
/// and a run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The setting's label in the report.
    pub name: String,
    /// The command that runs with this layout instead of the tuned one.
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
