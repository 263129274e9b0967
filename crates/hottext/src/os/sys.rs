//! The kernel's settings and the machine as `/sys` and the system-wide files of `/proc` show
//! them: transparent huge pages, free memory by order, memory counters, NUMA nodes, cgroup
//! limits, `kernel.*` sysctls, PMUs, the CPUs' vendor and clock, the host name.

use std::io;
use std::path::PathBuf;

use serde::Serialize;

use super::proc::{cgroups, Pid};

/// The folder of the transparent-huge-page switches, spelled once for the constants below.
macro_rules! thp_dir {
    () => {
        "/sys/kernel/mm/transparent_hugepage"
    };
}

/// The folder of the transparent-huge-page switches (`enabled`, `defrag`, `khugepaged/defrag`).
pub(crate) const THP_DIR: &str = thp_dir!();
/// The system-wide THP switch: always, madvise, never.
pub(crate) const THP_ENABLED_FILE: &str = concat!(thp_dir!(), "/enabled");
/// How hard a THP fault works for a huge page: defer+madvise, madvise, always, ...
pub(crate) const THP_DEFRAG_FILE: &str = concat!(thp_dir!(), "/defrag");
/// One folder per cpufreq policy (a group of CPUs that share a clock): `policyN`.
pub(crate) const CPUFREQ_DIR: &str = "/sys/devices/system/cpu/cpufreq";

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// `always [madvise] never` → `madvise`.
pub fn selected(text: &str) -> Option<String> {
    let start = text.find('[')? + 1;
    let end = start + text[start..].find(']')?;
    Some(text[start..end].to_string())
}

/// The selected word of a THP switch with choices (`enabled`, `defrag`); `None` without THP.
pub(crate) fn thp_mode(name: &str) -> Option<String> {
    read(&format!("{THP_DIR}/{name}")).and_then(|t| selected(&t))
}

/// The value of a THP switch that holds a plain value (`khugepaged/defrag`: 0 or 1).
pub(crate) fn thp_value(name: &str) -> Option<String> {
    read(&format!("{THP_DIR}/{name}")).map(|t| t.trim().to_string())
}

/// One zone's line of /proc/buddyinfo.
#[derive(Debug, Clone, Serialize)]
pub struct Zone {
    /// The NUMA node.
    pub node: u32,
    /// The zone's name (`DMA32`, `Normal`).
    pub zone: String,
    /// Free blocks of each order (order k is 2^k pages of 4 KiB).
    pub free: Vec<u64>,
}

/// The free blocks of every zone (empty when /proc/buddyinfo cannot be read).
pub fn buddyinfo() -> Vec<Zone> {
    read("/proc/buddyinfo")
        .map(|t| parse_buddyinfo(&t))
        .unwrap_or_default()
}

/// Parses /proc/buddyinfo: `Node 0, zone   Normal  40617  10541 …`.
fn parse_buddyinfo(text: &str) -> Vec<Zone> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let node = words.nth(1)?.trim_end_matches(',').parse().ok()?;
            let zone = words.nth(1)?.to_string();
            let free = words
                .map(|w| w.parse().ok())
                .collect::<Option<Vec<u64>>>()?;
            Some(Zone { node, zone, free })
        })
        .collect()
}

/// The counters of /proc/vmstat (`compact_stall`) or /proc/meminfo (`HugePages_Free`), read
/// once for several look-ups.
pub struct Counters(String);

impl Counters {
    /// /proc/vmstat's event counters (empty when it cannot be read).
    pub fn vmstat() -> Counters {
        Counters(read("/proc/vmstat").unwrap_or_default())
    }

    /// /proc/meminfo's sizes and counts (empty when it cannot be read).
    pub fn meminfo() -> Counters {
        Counters(read("/proc/meminfo").unwrap_or_default())
    }

    /// The first number after `key` (the key as the file spells it, without its colon).
    pub fn get(&self, key: &str) -> Option<u64> {
        self.0.lines().find_map(|l| {
            let rest = l.strip_prefix(key)?;
            rest.trim_start_matches(':')
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
    }
}

/// NUMA nodes of the machine (`node0`, `node1`, … in sysfs); 1 when sysfs does not say.
pub fn numa_nodes() -> usize {
    std::fs::read_dir("/sys/devices/system/node")
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    let name = e.file_name();
                    let name = name.to_string_lossy();
                    name.strip_prefix("node")
                        .is_some_and(|n| n.parse::<u32>().is_ok())
                })
                .count()
                .max(1)
        })
        .unwrap_or(1)
}

/// The memory limit of the cgroup of `pid`, v2 or v1; `None` when unlimited or unknown.
pub(crate) fn cgroup_memory_limit(pid: Pid) -> Option<u64> {
    for group in cgroups(pid) {
        let path = &group.path;
        let file = match group.controllers.as_str() {
            "" => format!("/sys/fs/cgroup{path}/memory.max"),
            c if c.split(',').any(|c| c == "memory") => {
                format!("/sys/fs/cgroup/memory{path}/memory.limit_in_bytes")
            }
            _ => continue,
        };
        if let Some(limit) = read(&file).and_then(|t| t.trim().parse().ok()) {
            // v1 writes "no limit" as a page-rounded i64::MAX.
            return (limit < 1 << 60).then_some(limit);
        }
    }
    None
}

/// A numeric `kernel.*` sysctl (`perf_event_paranoid`, `perf_event_max_sample_rate`).
pub(crate) fn kernel_number(name: &str) -> io::Result<i64> {
    let path = format!("/proc/sys/kernel/{name}");
    let text = std::fs::read_to_string(&path)?;
    text.trim()
        .parse()
        .map_err(|_| io::Error::other(format!("{path} holds '{}', not a number", text.trim())))
}

/// This host's name as the kernel knows it.
pub fn hostname() -> io::Result<String> {
    Ok(std::fs::read_to_string("/proc/sys/kernel/hostname")?
        .trim()
        .to_string())
}

/// The names of the performance-monitoring units the kernel has (`cpu`, `software`, …).
#[cfg(test)]
pub fn pmus() -> io::Result<Vec<String>> {
    std::fs::read_dir("/sys/bus/event_source/devices")?
        .map(|e| Ok(e?.file_name().to_string_lossy().into_owned()))
        .collect()
}

/// The `vendor_id` of this machine's CPUs in /proc/cpuinfo (`GenuineIntel`, `AuthenticAMD`).
pub(crate) fn cpu_vendor_id() -> Option<String> {
    let info = read("/proc/cpuinfo")?;
    info.lines()
        .find_map(|l| l.strip_prefix("vendor_id"))
        .map(|v| v.trim_start_matches([' ', '\t', ':']).trim().to_string())
}

/// The current clock of CPU `cpu` in kHz (`scaling_cur_freq`); `None` without cpufreq (most VMs).
pub(crate) fn cpu_khz(cpu: u32) -> Option<f64> {
    read(&format!(
        "/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq"
    ))?
    .trim()
    .parse()
    .ok()
}

/// The `scaling_governor` file of every cpufreq policy folder that has one, sorted; empty
/// without cpufreq (most VMs).
pub(crate) fn cpufreq_governor_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(CPUFREQ_DIR)
        .map(|d| {
            d.flatten()
                .map(|e| e.path().join("scaling_governor"))
                .filter(|p| p.exists())
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// The file `name` (`level`, `type`, `size`, `ways_of_associativity`, ...) describing cache
/// `index` of CPU 0; `None` when it cannot be read.
pub(crate) fn cpu0_cache_file(index: u32, name: &str) -> Option<String> {
    read(&format!(
        "/sys/devices/system/cpu/cpu0/cache/index{index}/{name}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buddyinfo_and_thp_words_are_parsed() {
        let text = "Node 0, zone      DMA      0      0      0      0      0      0      0      0      1      1      3 \n\
                    Node 0, zone   Normal  40617  10541   6020   4168   1867    564    426    244    117    206   2807 \n";
        let zones = parse_buddyinfo(text);
        assert_eq!(zones.len(), 2);
        assert_eq!((zones[1].node, zones[1].zone.as_str()), (0, "Normal"));
        assert_eq!(zones[1].free[10], 2807);
        assert_eq!(selected("always [madvise] never"), Some("madvise".into()));
        assert_eq!(selected("no choice"), None);
    }

    #[test]
    fn this_machine_is_read() {
        assert!(Counters::meminfo().get("MemTotal").is_some_and(|kb| kb > 0));
        assert!(Counters::vmstat().get("nr_free_pages ").is_some());
        assert_eq!(Counters::meminfo().get("NoSuchCounter"), None);
        assert!(kernel_number("perf_event_paranoid").is_ok());
        let not_a_number = kernel_number("ostype").unwrap_err().to_string();
        assert!(
            not_a_number.contains("/proc/sys/kernel/ostype"),
            "{not_a_number}"
        );
        assert!(!hostname().unwrap().is_empty());
        assert!(pmus().unwrap().iter().any(|p| p == "software"));
        assert!(numa_nodes() >= 1 && !buddyinfo().is_empty());
    }
}
