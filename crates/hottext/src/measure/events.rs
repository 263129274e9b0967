//! Which perf event counts each figure, on Intel and on AMD, and which of them this machine has.
//!
//! perf's generic names are not what they seem for the instruction side. `iTLB-loads` is not
//! loads: it is `itlb_misses.stlb_hit` on Intel and `bp_l1_tlb_miss_l2_tlb_hit` (an L1 miss)
//! on AMD. `L1-icache-load-misses` is `icache_64b.iftag_miss` on recent Intel kernels but PMCx081
//! (`ic_fw32_miss`) on AMD Family 17h+, which AMD says miscounts (newer kernels map it to
//! PMCx060 umask 0x10 instead). So each figure names the vendor's own event first and the
//! generic alias last; [`probe`] opens each candidate with `perf stat -e EV true` and keeps the
//! first that counts. Event names are those of perf's tables
//! (`tools/perf/pmu-events/arch/x86/{skylake,icelake,...,amdzen1..5}/*.json`).
//!
//! | figure | Intel (Skylake and later) | AMD Zen |
//! | --- | --- | --- |
//! | instructions | `instructions` = INST_RETIRED.ANY (fixed counter) | `instructions` = PMCx0C0 retired instructions |
//! | cycles | `cycles` = CPU_CLK_UNHALTED.THREAD (fixed counter) | `cycles` = PMCx076 core cycles not halted |
//! | iTLB walks | `itlb_misses.walk_completed` (0x85/0x0e): code fetches that missed every TLB level and completed a page walk | `bp_l1_tlb_miss_l2_tlb_miss` (0x85/0xff; Zen 4+: `.all`, 0x0f): fetches that missed the L1 and L2 iTLB, i.e. walks requested |
//! | iTLB walks, 4 KiB | `itlb_misses.walk_completed_4k` (0x85/0x02) | not counted by default (`.if4k` exists; would exceed 6 counters) |
//! | iTLB walks, 2 MiB | `itlb_misses.walk_completed_2m_4m` (0x85/0x04) | not counted by default (`.if2m`) |
//! | iTLB hits, 4 KiB | none: Intel counts no L1 iTLB hits by page size | `bp_l1_tlb_fetch_hit.if4k` (0x94/0x01, Zen 2+; includes 16 KiB coalesced pages) |
//! | iTLB hits, 2 MiB | none | `bp_l1_tlb_fetch_hit.if2m` (0x94/0x02, Zen 2+) |
//! | L1i misses | `icache_64b.iftag_miss` (0x83/0x02): 64-byte fetch-tag lookups that missed; Haswell/Broadwell `icache.misses` | `ic_tag_hit_miss.instruction_cache_miss` (PMCx18E/0x18, Zen 3+); Zen 1/2 `l2_request_g1.cacheable_ic_read` (0x60/0x10: L2 requests for L1i fills) |
//!
//! With these defaults Intel needs 4 general counters (instructions and cycles are fixed
//! counters) and AMD 6, which fits unless the NMI watchdog holds one
//! (`/proc/sys/kernel/nmi_watchdog`); then perf multiplexes, and the report says so.
//!
//! Software events need no PMU and are always counted: `duration_time` (wall time),
//! `task-clock` (CPU time of the command and its children), `user_time`, `system_time`,
//! `context-switches`, `page-faults`.

use std::path::Path;
use std::process::Stdio;

use serde::Serialize;

use super::perf_stat::{self, Scope, Value};
use super::MeasureError;

/// A CPU vendor, as far as choosing events goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Vendor {
    /// `GenuineIntel`.
    Intel,
    /// `AuthenticAMD`, and Hygon's Zen derivative.
    Amd,
    /// Anything else (Arm, other x86): perf's generic events only.
    Other,
}

impl std::fmt::Display for Vendor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Vendor::Intel => "Intel",
            Vendor::Amd => "AMD",
            Vendor::Other => "neither Intel nor AMD",
        })
    }
}

impl Vendor {
    /// The vendor of this machine's CPUs, from `/proc/cpuinfo`.
    pub fn detect() -> Vendor {
        match crate::os::sys::cpu_vendor_id().as_deref() {
            Some("GenuineIntel") => Vendor::Intel,
            Some("AuthenticAMD") | Some("HygonGenuine") => Vendor::Amd,
            _ => Vendor::Other,
        }
    }
}

/// A figure hottext reports. The first six are software and need no PMU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Counter {
    /// Elapsed time (`duration_time`).
    WallTime,
    /// CPU time of the command and its children (`task-clock`).
    TaskClock,
    /// The command's CPU time in user mode (`user_time`).
    UserTime,
    /// The command's CPU time in the kernel (`system_time`).
    SystemTime,
    /// `context-switches`.
    ContextSwitches,
    /// `page-faults`: minor and major.
    PageFaults,
    /// Instructions retired: the same on both sides of a pure layout change.
    Instructions,
    /// Core cycles not halted: the figure a layout change is judged by.
    Cycles,
    /// Code fetches that missed every iTLB level (page walks).
    ItlbWalks,
    /// iTLB walks for 4 KiB pages (Intel only).
    ItlbWalks4k,
    /// iTLB walks for 2 MiB and 4 MiB pages (Intel only).
    ItlbWalks2m,
    /// L1 iTLB hits on 4 KiB pages (AMD Zen 2+ only).
    ItlbHits4k,
    /// L1 iTLB hits on 2 MiB pages (AMD Zen 2+ only).
    ItlbHits2m,
    /// Instruction-cache misses (L1i).
    L1iMisses,
}

impl Counter {
    /// The figures perf counts in software, on every machine.
    pub const SOFTWARE: [Counter; 6] = [
        Counter::WallTime,
        Counter::TaskClock,
        Counter::UserTime,
        Counter::SystemTime,
        Counter::ContextSwitches,
        Counter::PageFaults,
    ];
    /// The figures that need a hardware PMU, probed per machine.
    pub const HARDWARE: [Counter; 8] = [
        Counter::Instructions,
        Counter::Cycles,
        Counter::ItlbWalks,
        Counter::ItlbWalks4k,
        Counter::ItlbWalks2m,
        Counter::ItlbHits4k,
        Counter::ItlbHits2m,
        Counter::L1iMisses,
    ];

    /// The figure's name in tables and messages ("iTLB walks").
    pub fn label(self) -> &'static str {
        match self {
            Counter::WallTime => "wall time",
            Counter::TaskClock => "task-clock",
            Counter::UserTime => "user time",
            Counter::SystemTime => "system time",
            Counter::ContextSwitches => "context switches",
            Counter::PageFaults => "page faults",
            Counter::Instructions => "instructions",
            Counter::Cycles => "cycles",
            Counter::ItlbWalks => "iTLB walks",
            Counter::ItlbWalks4k => "iTLB walks 4K",
            Counter::ItlbWalks2m => "iTLB walks 2M",
            Counter::ItlbHits4k => "iTLB hits 4K",
            Counter::ItlbHits2m => "iTLB hits 2M",
            Counter::L1iMisses => "L1i misses",
        }
    }

    /// The perf event of a software figure.
    pub(crate) fn software_event(self) -> Option<&'static str> {
        Some(match self {
            Counter::WallTime => "duration_time",
            Counter::TaskClock => "task-clock",
            Counter::UserTime => "user_time",
            Counter::SystemTime => "system_time",
            Counter::ContextSwitches => "context-switches",
            Counter::PageFaults => "page-faults",
            _ => return None,
        })
    }

    /// The events that may count a hardware figure, best first (see the module's table).
    pub fn candidates(self, vendor: Vendor) -> &'static [&'static str] {
        use Counter::*;
        use Vendor::*;
        match (self, vendor) {
            (Instructions, _) => &["instructions"],
            (Cycles, _) => &["cycles"],
            (ItlbWalks, Intel) => &["itlb_misses.walk_completed", "iTLB-load-misses"],
            (ItlbWalks, Amd) => &[
                "bp_l1_tlb_miss_l2_tlb_miss.all",
                "bp_l1_tlb_miss_l2_tlb_miss",
                "iTLB-load-misses",
            ],
            (ItlbWalks, Other) => &["iTLB-load-misses"],
            (ItlbWalks4k, Intel) => &["itlb_misses.walk_completed_4k"],
            (ItlbWalks2m, Intel) => &["itlb_misses.walk_completed_2m_4m"],
            (ItlbHits4k, Amd) => &["bp_l1_tlb_fetch_hit.if4k"],
            (ItlbHits2m, Amd) => &["bp_l1_tlb_fetch_hit.if2m"],
            (L1iMisses, Intel) => &[
                "icache_64b.iftag_miss",
                "icache.misses",
                "L1-icache-load-misses",
            ],
            (L1iMisses, Amd) => &[
                "ic_tag_hit_miss.instruction_cache_miss",
                "l2_request_g1.cacheable_ic_read",
                "L1-icache-load-misses",
            ],
            (L1iMisses, Other) => &["L1-icache-load-misses"],
            _ => &[],
        }
    }

    /// perf reports times in ns (`duration_time`, `user_time`) or ms (`task-clock`); figures
    /// keep seconds.
    pub(crate) fn to_seconds_factor(unit: &str) -> Option<f64> {
        match unit {
            "ns" => Some(1e-9),
            "us" | "usec" => Some(1e-6),
            "msec" | "ms" => Some(1e-3),
            "s" | "sec" => Some(1.0),
            _ => None,
        }
    }

    pub(crate) fn is_time(self) -> bool {
        matches!(
            self,
            Counter::WallTime | Counter::TaskClock | Counter::UserTime | Counter::SystemTime
        )
    }
}

/// What opening one candidate event showed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "status", content = "detail")]
pub enum Probe {
    /// It counted (or was accepted and scheduled).
    Counts,
    /// perf knows it but the kernel cannot count it here (`<not supported>`).
    NotSupported,
    /// perf does not know the name on this CPU (another vendor's or model's event), or has
    /// no PMU for it; perf's first line of complaint.
    Unknown(String),
}

impl Probe {
    /// How the result reads in `hottext stat`'s list of events it could not count.
    pub fn describe(&self) -> String {
        match self {
            Probe::Counts => "counts".to_string(),
            Probe::NotSupported => "<not supported>".to_string(),
            Probe::Unknown(why) if why == "parser error" => "unknown to perf on this CPU".into(),
            Probe::Unknown(why) => format!("unknown to perf on this CPU ({why})"),
        }
    }
}

/// One candidate event that was tried for a figure and did not count.
#[derive(Debug, Clone, Serialize)]
pub struct Tried {
    /// The perf event name.
    pub event: String,
    /// What opening it showed.
    pub probe: Probe,
}

/// A hardware figure no candidate could count.
#[derive(Debug, Clone, Serialize)]
pub struct Missing {
    /// The figure.
    pub counter: Counter,
    /// Every candidate, in the order tried.
    pub tried: Vec<Tried>,
}

/// The events to count on this machine.
#[derive(Debug, Clone, Serialize)]
pub struct EventPlan {
    /// The CPU vendor the events were chosen for.
    pub vendor: Vendor,
    /// Hardware figures and the event chosen for each.
    pub hardware: Vec<(Counter, String)>,
    /// Hardware figures this machine cannot count, with what was tried.
    pub missing: Vec<Missing>,
}

impl EventPlan {
    /// Probes this machine's vendor's candidates for every hardware figure.
    pub fn probe() -> Result<EventPlan, MeasureError> {
        let scratch = super::scratch_dir()?;
        let dir = scratch.path();
        let vendor = Vendor::detect();
        let mut plan = EventPlan {
            vendor,
            hardware: Vec::new(),
            missing: Vec::new(),
        };
        for counter in Counter::HARDWARE {
            let candidates = counter.candidates(vendor);
            if candidates.is_empty() {
                continue; // this vendor's PMU has no such event; see the module's table
            }
            let mut tried = Vec::new();
            for &event in candidates {
                let probe = probe(event, dir)?;
                if probe == Probe::Counts {
                    plan.hardware.push((counter, event.to_string()));
                    tried.clear();
                    break;
                }
                tried.push(Tried {
                    event: event.to_string(),
                    probe,
                });
            }
            if !tried.is_empty() {
                plan.missing.push(Missing { counter, tried });
            }
        }
        Ok(plan)
    }

    /// A plan with only software figures (no probing).
    #[cfg(test)]
    pub fn software_only() -> EventPlan {
        EventPlan {
            vendor: Vendor::detect(),
            hardware: Vec::new(),
            missing: Vec::new(),
        }
    }

    /// Whether instructions or cycles can be counted: without them there is no hardware PMU
    /// to speak of (the usual case in a VM).
    pub fn has_hardware_pmu(&self) -> bool {
        self.event_of(Counter::Instructions).is_some() || self.event_of(Counter::Cycles).is_some()
    }

    /// The event that counts `counter` here; `None` when this machine has none.
    pub fn event_of(&self, counter: Counter) -> Option<&str> {
        if let Some(e) = counter.software_event() {
            return Some(e);
        }
        self.hardware
            .iter()
            .find(|(c, _)| *c == counter)
            .map(|(_, e)| e.as_str())
    }

    /// The figures counted in a scope: a CPU-wide count has only wall time from the software
    /// side (task-clock of a CPU is just the elapsed time, idle included).
    pub fn counters(&self, scope: Scope) -> Vec<(Counter, &str)> {
        let software: &[Counter] = match scope {
            Scope::Command => &Counter::SOFTWARE,
            Scope::Cpu(_) => &[Counter::WallTime],
            // user_time and system_time are the started command's, not the process's.
            Scope::Process(_) => &[
                Counter::WallTime,
                Counter::TaskClock,
                Counter::ContextSwitches,
                Counter::PageFaults,
            ],
        };
        software
            .iter()
            .filter_map(|&c| Some((c, c.software_event()?)))
            .chain(self.hardware.iter().map(|(c, e)| (*c, e.as_str())))
            .collect()
    }

    /// The `-e` list for a scope.
    pub fn events(&self, scope: Scope) -> Vec<String> {
        self.counters(scope)
            .into_iter()
            .map(|(_, e)| e.to_string())
            .collect()
    }
}

/// Opens `event` on `true` and reads what perf made of it.
pub fn probe(event: &str, dir: &Path) -> Result<Probe, MeasureError> {
    let output = perf_stat::output_path(dir, "probe");
    let _ = std::fs::remove_file(&output);
    let result = perf_stat::command(&[event.to_string()], Scope::Command, &output, &["true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(MeasureError::perf_missing)?;
    if !result.status.success() {
        let stderr = String::from_utf8_lossy(&result.stderr);
        let first = stderr
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("perf failed");
        // perf's "\___ parser error" line says why; keep the pair short.
        let why = stderr
            .lines()
            .find_map(|l| l.trim().strip_prefix("\\___ "))
            .map_or(first.to_string(), |w| w.trim().to_string());
        return Ok(Probe::Unknown(why));
    }
    let text = std::fs::read_to_string(&output).map_err(|source| MeasureError::Io {
        what: format!("read perf's output {}", output.display()),
        source,
    })?;
    let readings = perf_stat::parse(&text, ',')?;
    let values: Vec<Value> = perf_stat::readings_of(&readings, event)
        .iter()
        .map(|r| r.value)
        .collect();
    Ok(
        if values.is_empty() || values.iter().all(|v| *v == Value::NotSupported) {
            Probe::NotSupported
        } else {
            Probe::Counts
        },
    )
}

#[cfg(test)]
#[path = "events_tests.rs"]
mod tests;
