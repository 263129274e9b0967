//! What this machine's perf can sample: a hardware cycle counter, branch records (LBR), how
//! fast, and whether this user may sample whole CPUs.
//!
//! The hardware questions are answered by opening the exact events we would record, on this
//! process, with `perf_event_open`: sysfs says what the CPU has, but not what a VM passes
//! through or what the kernel accepts for `-j any_call` (AMD's BRS, for one, takes no filter).

use std::io;

use crate::os::cpus::{self, CpuSet};
use crate::os::sys;

const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_COUNT_HW_CPU_CYCLES: u64 = 0;
const PERF_SAMPLE_BRANCH_STACK: u64 = 1 << 11;
const PERF_SAMPLE_BRANCH_USER: u64 = 1 << 0;
const PERF_SAMPLE_BRANCH_ANY: u64 = 1 << 3;
const PERF_SAMPLE_BRANCH_ANY_CALL: u64 = 1 << 4;
const ATTR_DISABLED: u64 = 1 << 0;
const ATTR_EXCLUDE_KERNEL: u64 = 1 << 5;
const ATTR_EXCLUDE_HV: u64 = 1 << 6;
/// The period of the trial events: any value works, they are never enabled.
const TRIAL_PERIOD: u64 = 1_000_000;

/// `struct perf_event_attr` up to `branch_sample_type` (`PERF_ATTR_SIZE_VER2`).
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
}

/// What this machine's perf can record, and as whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// A hardware cycle counter that can sample (none in most VMs: only software clocks).
    pub cycles: bool,
    /// Branch records filtered to calls (`-j any_call`): Intel LBR, AMD LbrExtV2, Arm BRBE.
    pub branch_calls: bool,
    /// Branch records of every taken branch (`-j any`): those, and AMD's BRS, which takes no
    /// other filter.
    pub branch_any: bool,
    /// `kernel.perf_event_max_sample_rate`: perf refuses `-F` above it.
    pub max_sample_rate: u32,
    /// `kernel.perf_event_paranoid`.
    pub paranoid: i32,
    /// Running as root (perf may then record every process and the kernel).
    pub root: bool,
    /// The CPUs online.
    pub online: CpuSet,
}

impl Machine {
    /// Finds out by trying: opens the events perf would and reads the kernel's limits.
    pub fn probe() -> io::Result<Machine> {
        let cycles = can_open(None);
        Ok(Machine {
            cycles,
            branch_calls: cycles && can_open(Some(PERF_SAMPLE_BRANCH_ANY_CALL)),
            branch_any: cycles && can_open(Some(PERF_SAMPLE_BRANCH_ANY)),
            max_sample_rate: sys::kernel_number("perf_event_max_sample_rate")?.max(1) as u32,
            paranoid: sys::kernel_number("perf_event_paranoid")? as i32,
            // SAFETY: geteuid has no preconditions.
            root: unsafe { libc::geteuid() } == 0,
            online: cpus::online()?,
        })
    }

    /// Sampling whole CPUs (`perf record -a`) needs CAP_PERFMON unless paranoid is -1.
    pub(crate) fn may_sample_cpus(&self) -> bool {
        self.root || self.paranoid <= -1
    }
}

/// Opens (and closes) a sampling cycles event on this process, with branch records of the
/// `branch_filter` (user space only) if one is given.
fn can_open(branch_filter: Option<u64>) -> bool {
    let mut attr = PerfEventAttr {
        type_: PERF_TYPE_HARDWARE,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: PERF_COUNT_HW_CPU_CYCLES,
        sample_period: TRIAL_PERIOD,
        flags: ATTR_DISABLED | ATTR_EXCLUDE_KERNEL | ATTR_EXCLUDE_HV,
        ..PerfEventAttr::default()
    };
    if let Some(filter) = branch_filter {
        attr.sample_type = PERF_SAMPLE_BRANCH_STACK;
        attr.branch_sample_type = PERF_SAMPLE_BRANCH_USER | filter;
    }
    // SAFETY: attr is a valid perf_event_attr of the size it states; pid 0 / cpu -1 is this
    // process on any CPU, no group, no flags.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfEventAttr,
            0,
            -1,
            -1,
            0,
        )
    };
    if fd < 0 {
        return false;
    }
    // SAFETY: fd is the descriptor perf_event_open just returned to us.
    unsafe { libc::close(fd as i32) };
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_has_the_kernel_ver2_size() {
        assert_eq!(std::mem::size_of::<PerfEventAttr>(), 80);
    }

    #[test]
    fn probe_agrees_with_sysfs_about_a_core_pmu() {
        let m = Machine::probe().unwrap();
        // Without any core PMU in sysfs no cycles event can open (x86 and Arm name it differently).
        let pmus = crate::os::sys::pmus().unwrap();
        let core = pmus
            .iter()
            .any(|p| p == "cpu" || p.starts_with("cpu_") || p.starts_with("armv8"));
        if !core {
            assert!(!m.cycles && !m.branch_calls && !m.branch_any, "{pmus:?}");
        }
        assert!(!m.branch_calls || m.cycles);
        assert!(!m.branch_any || m.cycles);
        assert!(m.max_sample_rate > 0 && !m.online.is_empty());
    }
}
