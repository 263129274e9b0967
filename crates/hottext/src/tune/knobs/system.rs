//! The knobs that write system-wide files: recorded in the restore file before they change and
//! put back afterwards ([`crate::tune::restore`]).

use std::path::{Path, PathBuf};

use super::{setting, sysfs, unavailable, writes_nothing, Change, Given, Knob, KnobSpec};
use crate::os::sys::{cpufreq_governor_files, CPUFREQ_DIR, THP_DEFRAG_FILE, THP_ENABLED_FILE};

pub(super) const THP: KnobSpec = KnobSpec {
    name: "thp",
    help: "transparent huge pages (sysfs): always, madvise, never",
    writes: |path| path == Path::new(THP_ENABLED_FILE),
    probe: |name, _| sysfs_knob(name, THP_ENABLED_FILE, &["always", "madvise", "never"]),
};

pub(super) const THP_DEFRAG: KnobSpec = KnobSpec {
    name: "thp-defrag",
    help: "their defragmentation (sysfs): defer+madvise, madvise, always",
    writes: |path| path == Path::new(THP_DEFRAG_FILE),
    probe: |name, _| {
        sysfs_knob(
            name,
            THP_DEFRAG_FILE,
            &["defer+madvise", "madvise", "always"],
        )
    },
};

pub(super) const GOVERNOR: KnobSpec = KnobSpec {
    name: "governor",
    help: "the cpufreq governor, each one the driver offers",
    writes: is_policy_governor,
    probe: |name, _: &Given| governor(name),
};

pub(super) const PREFETCHERS: KnobSpec = KnobSpec {
    name: "prefetchers",
    help: "the hardware prefetchers: reported, never written (model-specific registers)",
    writes: writes_nothing,
    probe: |name, _| {
        unavailable(
            name,
            "the prefetcher switches are model-specific registers, which tune does not write",
        )
    },
};

/// `CPUFREQ_DIR/policyN/scaling_governor`, N digits: nothing else under CPUFREQ_DIR.
fn is_policy_governor(path: &Path) -> bool {
    let Ok(rest) = path.strip_prefix(CPUFREQ_DIR) else {
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

/// A knob written through a sysfs file: the current value and the others of `values`.
fn sysfs_knob(name: &str, path: &str, values: &[&str]) -> Knob {
    let current = std::fs::read_to_string(path)
        .map(|t| crate::tune::restore::current_value(&t))
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

/// The frequency governor of every cpufreq policy, tried with each governor the driver offers.
fn governor(name: &str) -> Knob {
    let policies: Vec<PathBuf> = cpufreq_governor_files()
        .into_iter()
        .filter(|p| is_policy_governor(p))
        .collect();
    let Some(first) = policies.first() else {
        return unavailable(name, &format!("no cpufreq policy under {CPUFREQ_DIR}"));
    };
    let Ok(current) = std::fs::read_to_string(first).map(|t| t.trim().to_string()) else {
        return unavailable(name, &format!("cannot read {}", first.display()));
    };
    if !policies.iter().all(|p| writable(&p.to_string_lossy())) {
        return unavailable(
            name,
            &format!("{CPUFREQ_DIR} is not writable here: run as root"),
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
