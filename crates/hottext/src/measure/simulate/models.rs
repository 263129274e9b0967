//! The structures a simulated run models, and their geometry.
//!
//! Cachegrind simulates one first-level instruction cache of any power-of-two geometry. With a
//! 4 KiB "line" that cache is an instruction TLB of 4 KiB pages, so three runs give the three
//! figures the hot-text papers report: L1 iTLB misses, L2 iTLB misses (each a page walk) and
//! L1i misses. The geometry is this CPU's where it says so (the i-cache from sysfs, the iTLBs
//! from AMD's CPUID leaves), else that of AMD Zen 2-4, which `bench/postgres/sim.py` used.

use serde::Serialize;

/// One modelled structure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Model {
    /// `itlb-l1`, `itlb-l2`, `icache`: the report's key prefix.
    pub key: &'static str,
    pub label: &'static str,
    pub bytes: u64,
    pub ways: u64,
    /// A page for the TLB models.
    pub line: u64,
    /// Where the geometry came from: `cpu` or `default`.
    pub source: &'static str,
}

impl Model {
    /// Cachegrind's option that makes its first-level i-cache this structure.
    pub fn cachegrind_option(&self) -> String {
        format!("--I1={},{},{}", self.bytes, self.ways, self.line)
    }

    /// `64 entries, fully associative, 4096 B pages`
    pub fn describe(&self) -> String {
        let entries = self.bytes / self.line;
        let ways = if self.ways == entries {
            "fully associative".to_string()
        } else {
            format!("{}-way", self.ways)
        };
        match self.line {
            4096 => format!("{entries} entries, {ways}, 4 KiB pages"),
            line => format!("{} KiB, {ways}, {line} B lines", self.bytes / 1024),
        }
    }

    /// Cachegrind refuses a geometry whose line size or set count is not a power of two.
    fn valid(&self) -> bool {
        self.ways > 0
            && self.line.is_power_of_two()
            && self.bytes % (self.ways * self.line) == 0
            && (self.bytes / (self.ways * self.line)).is_power_of_two()
    }
}

const PAGE: u64 = 4096;

fn default_models() -> [Model; 3] {
    [
        Model {
            key: "itlb-l1",
            label: "L1 iTLB",
            bytes: 64 * PAGE,
            ways: 64,
            line: PAGE,
            source: "default",
        },
        Model {
            key: "itlb-l2",
            label: "L2 iTLB",
            bytes: 512 * PAGE,
            ways: 8,
            line: PAGE,
            source: "default",
        },
        Model {
            key: "icache",
            label: "L1i",
            bytes: 32 * 1024,
            ways: 8,
            line: 64,
            source: "default",
        },
    ]
}

/// The three models with this CPU's geometry where it is known and cachegrind can model it.
pub fn probe() -> Vec<Model> {
    let [mut l1, mut l2, mut icache] = default_models();
    let (tlb1, tlb2) = amd_itlbs();
    for (model, probed) in [
        (&mut l1, tlb1),
        (&mut l2, tlb2),
        (&mut icache, sysfs_icache()),
    ] {
        if let Some((entries_or_bytes, ways, line)) = probed {
            let candidate = Model {
                bytes: entries_or_bytes,
                ways,
                line,
                source: "cpu",
                ..model.clone()
            };
            if candidate.valid() {
                *model = candidate;
            }
        }
    }
    vec![l1, l2, icache]
}

/// The L1 instruction cache as the kernel describes it: (bytes, ways, line).
fn sysfs_icache() -> Option<(u64, u64, u64)> {
    for index in 0..8 {
        let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{index}");
        let read = |name: &str| std::fs::read_to_string(format!("{dir}/{name}")).ok();
        if read("level")?.trim() != "1" || read("type")?.trim() != "Instruction" {
            continue;
        }
        let size = read("size")?;
        let bytes = match size.trim().strip_suffix('K') {
            Some(kib) => kib.parse::<u64>().ok()? * 1024,
            None => size.trim().parse().ok()?,
        };
        let ways = read("ways_of_associativity")?.trim().parse().ok()?;
        let line = read("coherency_line_size")?.trim().parse().ok()?;
        return Some((bytes, ways, line));
    }
    None
}

type Geometry = Option<(u64, u64, u64)>;

/// The 4 KiB-page instruction TLBs from AMD's CPUID leaves 0x80000005 and 0x80000006, as
/// (bytes covered, ways, page). Intel describes its TLBs in leaf 0x18 in a form cachegrind
/// cannot always model; there the defaults stand.
#[cfg(target_arch = "x86_64")]
fn amd_itlbs() -> (Geometry, Geometry) {
    use std::arch::x86_64::__cpuid;
    // SAFETY: CPUID exists on every x86-64 CPU (the intrinsic is safe from Rust 1.87 on; our
    // minimum is older, hence the block and the allow).
    #[allow(unused_unsafe)]
    let (vendor, max_extended) = unsafe { (__cpuid(0), __cpuid(0x8000_0000).eax) };
    let amd = (vendor.ebx, vendor.edx, vendor.ecx) == (0x6874_7541, 0x6974_6e65, 0x444d_4163);
    if !amd || max_extended < 0x8000_0006 {
        return (None, None);
    }
    // The extended leaves are read only when the maximum extended leaf says they exist.
    // SAFETY: as above.
    #[allow(unused_unsafe)]
    let (l1, l2) = unsafe { (__cpuid(0x8000_0005).ebx, __cpuid(0x8000_0006).ebx) };
    let l1_entries = u64::from(l1 & 0xff);
    // 0xff is fully associative.
    let l1_ways = match (l1 >> 8) & 0xff {
        0xff => l1_entries,
        w => u64::from(w),
    };
    let l2_entries = u64::from(l2 & 0xfff);
    let l2_ways = match (l2 >> 12) & 0xf {
        0xf => Some(l2_entries),
        code => l2_ways_of(code),
    };
    let tlb = |entries: u64, ways: Option<u64>| {
        ways.filter(|_| entries > 0)
            .map(|ways| (entries * PAGE, ways, PAGE))
    };
    (tlb(l1_entries, Some(l1_ways)), tlb(l2_entries, l2_ways))
}

#[cfg(not(target_arch = "x86_64"))]
fn amd_itlbs() -> (Geometry, Geometry) {
    (None, None)
}

/// AMD's encoding of an L2 TLB's associativity (CPUID 0x80000006).
fn l2_ways_of(code: u32) -> Option<u64> {
    Some(match code {
        1 => 1,
        2 => 2,
        3 => 3,
        4 => 4,
        5 => 6,
        6 => 8,
        8 => 16,
        0xa => 32,
        0xb => 48,
        0xc => 64,
        0xd => 96,
        0xe => 128,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_sim_py_s_geometry() {
        let options: Vec<String> = default_models()
            .iter()
            .map(Model::cachegrind_option)
            .collect();
        assert_eq!(
            options,
            [
                "--I1=262144,64,4096",
                "--I1=2097152,8,4096",
                "--I1=32768,8,64"
            ]
        );
    }

    #[test]
    fn a_geometry_cachegrind_refuses_is_not_used() {
        let mut odd = default_models()[1].clone();
        odd.bytes = 3072 * PAGE; // 3072 entries, 8-way: 384 sets
        assert!(!odd.valid());
        assert!(default_models().iter().all(Model::valid));
    }

    #[test]
    fn probed_models_are_valid_and_named() {
        let models = probe();
        assert_eq!(
            models.iter().map(|m| m.key).collect::<Vec<_>>(),
            ["itlb-l1", "itlb-l2", "icache"]
        );
        assert!(models.iter().all(Model::valid), "{models:?}");
    }

    #[test]
    fn descriptions_say_what_is_modelled() {
        let [l1, _, icache] = default_models();
        assert_eq!(l1.describe(), "64 entries, fully associative, 4 KiB pages");
        assert_eq!(icache.describe(), "32 KiB, 8-way, 64 B lines");
    }
}
