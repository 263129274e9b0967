//! The machine's huge-page settings and memory: THP modes, free 2 MiB blocks (fragmentation),
//! compaction, the hugetlb pool, and whether this kernel maps a file's text with 2 MiB pages
//! on a given filesystem (tried on a scratch file).

use serde::Serialize;

use super::{Check, Status};
/// `tune`'s knobs ask it too.
pub use crate::os::sys::numa_nodes;
use crate::os::sys::{self, Counters, Zone, THP_DIR as THP};

/// The THP settings: the selected word of each file (`[madvise]` → `madvise`).
#[derive(Debug, Clone, Serialize)]
pub struct Thp {
    /// `transparent_hugepage/enabled`: `always`, `madvise` or `never`; `None` when unreadable.
    pub enabled: Option<String>,
    /// `transparent_hugepage/defrag`: whether a fault may stall to compact memory.
    pub defrag: Option<String>,
    /// khugepaged's own defrag switch (0 or 1).
    pub khugepaged_defrag: Option<String>,
}

/// What the system section measured.
#[derive(Debug, Clone, Serialize)]
pub struct Memory {
    /// THP settings.
    pub thp: Thp,
    /// Free blocks of every zone (/proc/buddyinfo).
    pub zones: Vec<Zone>,
    /// Free memory in blocks of order 9 or more, as 2 MiB blocks.
    pub free_2m_blocks: u64,
    /// Times an allocation stalled to compact memory since boot (/proc/vmstat).
    pub compact_stall: Option<u64>,
    /// Times such compaction failed to free a block.
    pub compact_fail: Option<u64>,
    /// Pages in the hugetlb pool (/proc/meminfo `HugePages_Total`).
    pub hugetlb_total: Option<u64>,
    /// Pages of the pool not in use.
    pub hugetlb_free: Option<u64>,
    /// The pool's page size in KiB (2048; 1048576 for 1 GiB pages).
    pub hugetlb_page_kb: Option<u64>,
}

fn thp() -> Thp {
    Thp {
        enabled: sys::thp_mode("enabled"),
        defrag: sys::thp_mode("defrag"),
        khugepaged_defrag: sys::thp_value("khugepaged/defrag"),
    }
}

/// Free blocks of order 9 and up, counted in 2 MiB blocks.
fn free_2m_blocks(zones: &[Zone]) -> u64 {
    zones
        .iter()
        .flat_map(|z| {
            z.free
                .iter()
                .enumerate()
                .skip(9)
                .map(|(order, n)| n << (order - 9))
        })
        .sum()
}

/// What the system section measures: THP, free 2 MiB blocks, compaction, the hugetlb pool.
pub fn memory() -> Memory {
    let zones = sys::buddyinfo();
    let vmstat = Counters::vmstat();
    let meminfo = Counters::meminfo();
    Memory {
        thp: thp(),
        free_2m_blocks: free_2m_blocks(&zones),
        zones,
        compact_stall: vmstat.get("compact_stall "),
        compact_fail: vmstat.get("compact_fail "),
        hugetlb_total: meminfo.get("HugePages_Total"),
        hugetlb_free: meminfo.get("HugePages_Free"),
        hugetlb_page_kb: meminfo.get("Hugepagesize"),
    }
}

/// The checks of the machine's memory; `hot_pages` is how many 2 MiB pages the hot text needs
/// (1 when unknown).
pub fn checks(m: &Memory, hot_pages: u64) -> Vec<Check> {
    let area = "huge-pages";
    let mut out = Vec::new();
    let enabled = m.thp.enabled.as_deref().unwrap_or("unknown");
    out.push(match enabled {
        "always" | "madvise" => Check::new(area, "THP enabled", Status::Pass, enabled),
        "never" => Check::new(area, "THP enabled", Status::Fail, enabled)
            .remedy(format!("echo madvise > {THP}/enabled")),
        _ => Check::new(
            area,
            "THP enabled",
            Status::Warn,
            "no transparent huge pages in this kernel",
        )
        .remedy("use the hugetlb backing of the runtime (HOTTEXT_BACKING=hugetlb) with a pool"),
    });
    let defrag = m.thp.defrag.as_deref().unwrap_or("unknown");
    let defrag_status = if matches!(defrag, "madvise" | "defer+madvise" | "always") {
        Status::Pass
    } else {
        Status::Warn
    };
    let mut check = Check::new(area, "THP defrag", defrag_status, defrag);
    if defrag_status == Status::Warn {
        // Section 6.1: without direct compaction for madvised regions, a fragmented machine
        // gives the hot text small pages.
        check = check.remedy(format!("echo defer+madvise > {THP}/defrag"));
    }
    out.push(check);
    let free = m.free_2m_blocks;
    let fragmented = free < hot_pages.max(1) * 4;
    let mut check = Check::new(
        area,
        "free 2 MiB blocks",
        if fragmented { Status::Warn } else { Status::Pass },
        format!(
            "{free} free blocks of 2 MiB or more (/proc/buddyinfo); compaction stalls {}, failures {}",
            m.compact_stall.map_or("?".into(), |v| v.to_string()),
            m.compact_fail.map_or("?".into(), |v| v.to_string())
        ),
    );
    if fragmented {
        check = check.remedy("echo 1 > /proc/sys/vm/compact_memory  (before starting the service)");
    }
    out.push(check);
    out.push(Check::new(
        area,
        "hugetlb pool",
        Status::Info,
        format!(
            "{} pages of {} KiB, {} free (only the runtime's hugetlb backing uses them, and only pages of 2048 KiB)",
            m.hugetlb_total.unwrap_or(0),
            m.hugetlb_page_kb.map_or("?".into(), |k| k.to_string()),
            m.hugetlb_free.unwrap_or(0)
        ),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_blocks_count_orders_of_2_mib_and_more() {
        let zone = |free: Vec<u64>| Zone {
            node: 0,
            zone: "Normal".into(),
            free,
        };
        let zones = [
            zone(vec![0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 3]),
            zone(vec![
                40617, 10541, 6020, 4168, 1867, 564, 426, 244, 117, 206, 2807,
            ]),
        ];
        // Order 9 counts once, order 10 twice.
        assert_eq!(free_2m_blocks(&zones), 1 + 3 * 2 + 206 + 2807 * 2);
    }
}
