//! The structures a simulated run models, and their geometry.
//!
//! Cachegrind simulates one first-level instruction cache of any power-of-two geometry. With a
//! 4 KiB "line" that cache is an instruction TLB of 4 KiB pages, so three runs give the three
//! figures the hot-text papers report: L1 iTLB misses, L2 iTLB misses (each a page walk) and
//! L1i misses. The geometry is this CPU's where it says so (the i-cache from sysfs, the iTLBs
//! from AMD's CPUID leaves), else [`crate::caches`]' defaults (AMD Zen 2-4's).
//!
//! Two more models put the hot range's whole 2 MiB pages, those the runtime maps, on 2 MiB
//! pages (`hot_range`): the iTLB entries for 2 MiB pages, from the same CPUID leaves,
//! else the defaults. Intel's Skylake has 8 fully associative L1 entries for 2 MiB pages beside 128 for 4 KiB
//! ones; its leaf 0x18 is not read, as for the 4 KiB models.

use serde::Serialize;

use crate::binary::HUGE_PAGE;
use crate::caches::{Geometry, L1I, L1_ITLB, L1_ITLB_HUGE, L2_ITLB, L2_ITLB_HUGE, PAGE};

/// One modelled structure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Model {
    /// `itlb-l1`, `itlb-l2`, `icache`: the report's key prefix.
    pub key: &'static str,
    /// Name in tables ("L1 iTLB").
    pub label: &'static str,
    /// Sets, ways and line (or page) size.
    #[serde(flatten)]
    pub geometry: Geometry,
    /// Where the geometry came from: `cpu` or `default`.
    pub source: &'static str,
    /// Set on the models of the hot range on 2 MiB pages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub huge_pages: Option<OnHugePages>,
}

/// A model of the hot range on 2 MiB pages: its figure is the misses of the 4 KiB-page model
/// `beside` outside the range's whole 2 MiB pages plus its own inside them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct OnHugePages {
    /// The key of the 4 KiB-page model it completes.
    pub beside: &'static str,
    /// Where the model sits in the one cachegrind run of 2 MiB pages.
    #[serde(skip)]
    pub slot: Slot,
}

/// Cachegrind's two instruction caches, so that both 2 MiB-page iTLB levels take one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// The first-level cache: every instruction fetch looks it up.
    I1,
    /// The last-level cache: the fetches the I1 missed look it up, as the L2 iTLB is looked up
    /// on an L1 miss. Data the D1 missed would too; the D1 gets the LL's geometry, so that
    /// only a data region's first touch of a 2 MiB page reaches it.
    LL,
}

impl Model {
    /// Cachegrind's options that make its cache in this model's slot this structure.
    pub(crate) fn cachegrind_options(&self) -> Vec<String> {
        let Geometry { bytes, ways, line } = self.geometry;
        let geometry = format!("{bytes},{ways},{line}");
        match self.huge_pages.map(|h| h.slot) {
            None | Some(Slot::I1) => vec![format!("--I1={geometry}")],
            Some(Slot::LL) => vec![format!("--LL={geometry}"), format!("--D1={geometry}")],
        }
    }

    /// `64 entries, fully associative, 4096 B pages`
    pub fn describe(&self) -> String {
        let Geometry { bytes, ways, line } = self.geometry;
        let entries = self.geometry.entries();
        let ways = if ways == entries {
            "fully associative".to_string()
        } else {
            format!("{ways}-way")
        };
        match line {
            PAGE => format!("{entries} entries, {ways}, 4 KiB pages"),
            HUGE_PAGE => format!(
                "{entries} entries, {ways}, 2 MiB pages: the hot range's whole pages; other code as {}",
                self.huge_pages.map_or("4 KiB", |h| h.beside)
            ),
            line => format!("{} KiB, {ways}, {line} B lines", bytes / 1024),
        }
    }

    /// Cachegrind refuses a geometry whose line size or set count is not a power of two.
    fn valid(&self) -> bool {
        let Geometry { bytes, ways, line } = self.geometry;
        ways > 0
            && line.is_power_of_two()
            && bytes % (ways * line) == 0
            && self.geometry.sets().is_power_of_two()
    }
}

/// The models in the order the reports list them; the i-cache last.
fn default_models() -> [Model; 5] {
    let on_huge_pages = |beside, slot| Some(OnHugePages { beside, slot });
    [
        Model {
            key: "itlb-l1",
            label: "L1 iTLB",
            geometry: L1_ITLB,
            source: "default",
            huge_pages: None,
        },
        Model {
            key: "itlb-l2",
            label: "L2 iTLB",
            geometry: L2_ITLB,
            source: "default",
            huge_pages: None,
        },
        Model {
            key: "itlb-l1-huge",
            label: "L1 iTLB huge",
            geometry: L1_ITLB_HUGE,
            source: "default",
            huge_pages: on_huge_pages("itlb-l1", Slot::I1),
        },
        Model {
            key: "itlb-l2-huge",
            label: "L2 iTLB huge",
            geometry: L2_ITLB_HUGE,
            source: "default",
            huge_pages: on_huge_pages("itlb-l2", Slot::LL),
        },
        Model {
            key: "icache",
            label: "L1i",
            geometry: L1I,
            source: "default",
            huge_pages: None,
        },
    ]
}

/// The models with this CPU's geometry where it is known and cachegrind can model it.
pub fn probe() -> Vec<Model> {
    let [mut l1, mut l2, mut l1_huge, mut l2_huge, mut icache] = default_models();
    let [tlb1, tlb2, tlb1_huge, tlb2_huge] = amd_itlbs();
    for (model, probed) in [
        (&mut l1, tlb1),
        (&mut l2, tlb2),
        (&mut l1_huge, tlb1_huge),
        (&mut l2_huge, tlb2_huge),
        (&mut icache, sysfs_icache()),
    ] {
        if let Some(geometry) = probed {
            let candidate = Model {
                geometry,
                source: "cpu",
                ..model.clone()
            };
            if candidate.valid() {
                *model = candidate;
            }
        }
    }
    vec![l1, l2, l1_huge, l2_huge, icache]
}

/// The L1 instruction cache as the kernel describes it.
fn sysfs_icache() -> Option<Geometry> {
    for index in 0..8 {
        let read = |name: &str| crate::os::sys::cpu0_cache_file(index, name);
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
        return Some(Geometry { bytes, ways, line });
    }
    None
}

/// The instruction TLBs from AMD's CPUID leaves 0x80000005 and 0x80000006: L1 and L2 for 4 KiB pages (register EBX), then for 2 MiB pages (EAX, the same
/// layout). Intel describes its TLBs in leaf 0x18 in a form cachegrind cannot always model;
/// there the defaults stand.
#[cfg(target_arch = "x86_64")]
fn amd_itlbs() -> [Option<Geometry>; 4] {
    use std::arch::x86_64::__cpuid;
    // SAFETY: CPUID exists on every x86-64 CPU (the intrinsic is safe from Rust 1.87 on; our
    // minimum is older, hence the block and the allow).
    #[allow(unused_unsafe)]
    let (vendor, max_extended) = unsafe { (__cpuid(0), __cpuid(0x8000_0000).eax) };
    let amd = (vendor.ebx, vendor.edx, vendor.ecx) == (0x6874_7541, 0x6974_6e65, 0x444d_4163);
    if !amd || max_extended < 0x8000_0006 {
        return [None; 4];
    }
    // The extended leaves are read only when the maximum extended leaf says they exist.
    // SAFETY: as above.
    #[allow(unused_unsafe)]
    let (l1, l2) = unsafe { (__cpuid(0x8000_0005), __cpuid(0x8000_0006)) };
    let [small_l1, small_l2] = amd_itlb_pair(l1.ebx, l2.ebx, PAGE);
    let [huge_l1, huge_l2] = amd_itlb_pair(l1.eax, l2.eax, HUGE_PAGE);
    [small_l1, small_l2, huge_l1, huge_l2]
}

#[cfg(not(target_arch = "x86_64"))]
fn amd_itlbs() -> [Option<Geometry>; 4] {
    [None; 4]
}

/// The L1 and L2 iTLBs for one page size from the registers of leaves 0x80000005 and
/// 0x80000006 that describe it.
fn amd_itlb_pair(l1: u32, l2: u32, page: u64) -> [Option<Geometry>; 2] {
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
        ways.filter(|_| entries > 0).map(|ways| Geometry {
            bytes: entries * page,
            ways,
            line: page,
        })
    };
    [tlb(l1_entries, Some(l1_ways)), tlb(l2_entries, l2_ways)]
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
            .flat_map(|m| m.cachegrind_options())
            .collect();
        assert_eq!(
            options,
            [
                "--I1=262144,64,4096",
                "--I1=2097152,8,4096",
                "--I1=134217728,64,2097152",
                "--LL=1073741824,8,2097152",
                "--D1=1073741824,8,2097152",
                "--I1=32768,8,64"
            ]
        );
    }

    #[test]
    fn a_geometry_cachegrind_refuses_is_not_used() {
        let mut odd = default_models()[1].clone();
        odd.geometry.bytes = 3072 * PAGE; // 3072 entries, 8-way: 384 sets
        assert!(!odd.valid());
        assert!(default_models().iter().all(Model::valid));
    }

    #[test]
    fn probed_models_are_valid_and_named() {
        let models = probe();
        assert_eq!(
            models.iter().map(|m| m.key).collect::<Vec<_>>(),
            [
                "itlb-l1",
                "itlb-l2",
                "itlb-l1-huge",
                "itlb-l2-huge",
                "icache"
            ]
        );
        assert!(models.iter().all(Model::valid), "{models:?}");
    }

    #[test]
    fn every_huge_page_model_stands_beside_a_4_kib_one_and_they_fill_both_slots() {
        let models = probe();
        let huge: Vec<OnHugePages> = models.iter().filter_map(|m| m.huge_pages).collect();
        assert_eq!(
            huge.iter().map(|h| h.slot).collect::<Vec<_>>(),
            [Slot::I1, Slot::LL]
        );
        for h in huge {
            let beside = models.iter().find(|m| m.key == h.beside).unwrap();
            assert!(
                beside.huge_pages.is_none() && beside.geometry.line == PAGE,
                "{beside:?}"
            );
        }
    }

    #[test]
    fn amd_s_cpuid_registers_give_both_page_sizes() {
        // An EPYC's leaves: L1 64 entries fully associative, L2 512 entries, 2-way (code 2)
        // for 2 MiB pages and 4-way (code 4) for 4 KiB ones.
        assert_eq!(
            amd_itlb_pair(0xff48_ff40, 0x5c00_2200, HUGE_PAGE),
            [
                Some(L1_ITLB_HUGE),
                Some(Geometry {
                    ways: 2,
                    ..L2_ITLB_HUGE
                })
            ]
        );
        assert_eq!(
            amd_itlb_pair(0xff48_ff40, 0x6c00_4200, PAGE),
            [Some(L1_ITLB), Some(Geometry { ways: 4, ..L2_ITLB })]
        );
        assert_eq!(amd_itlb_pair(0, 0, PAGE), [None, None]);
    }

    #[test]
    fn a_model_s_json_names_its_geometry_beside_its_key() {
        let json = serde_json::to_value(&default_models()[4]).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "key": "icache", "label": "L1i", "bytes": 32768, "ways": 8, "line": 64,
                "source": "default"
            })
        );
    }

    #[test]
    fn descriptions_say_what_is_modelled() {
        let [l1, _, l1_huge, _, icache] = default_models();
        assert_eq!(l1.describe(), "64 entries, fully associative, 4 KiB pages");
        assert_eq!(
            l1_huge.describe(),
            "64 entries, fully associative, 2 MiB pages: the hot range's whole pages; other code as itlb-l1"
        );
        assert_eq!(icache.describe(), "32 KiB, 8-way, 64 B lines");
    }
}
