//! CPU sets: the kernel's list syntax (`0-3,8`), a process's affinity, pinning a running
//! process's threads to one CPU (and back), and pinning a command before it starts. Shared by
//! `profile::record` (sample the CPU a server runs on) and `measure` (count it there).

use super::proc::Pid;
use std::collections::BTreeSet;
use std::fmt;
use std::io;
use std::path::Path;
use std::process::Command;

/// A set of CPU numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuSet(BTreeSet<u32>);

impl CpuSet {
    /// The set of one CPU.
    pub fn one(cpu: u32) -> CpuSet {
        CpuSet(BTreeSet::from([cpu]))
    }

    /// Parses the kernel's list syntax, as in `/sys/devices/system/cpu/online` and the
    /// `Cpus_allowed_list` line of `/proc/PID/status`.
    pub fn parse(list: &str) -> Option<CpuSet> {
        let mut set = BTreeSet::new();
        for part in list.trim().split(',').filter(|p| !p.is_empty()) {
            let (lo, hi): (u32, u32) = match part.split_once('-') {
                Some((lo, hi)) => (lo.trim().parse().ok()?, hi.trim().parse().ok()?),
                None => {
                    let cpu = part.trim().parse().ok()?;
                    (cpu, cpu)
                }
            };
            if lo > hi {
                return None;
            }
            set.extend(lo..=hi);
        }
        Some(CpuSet(set))
    }

    /// How many CPUs the set has.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the set has no CPU.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `cpu` is in the set.
    pub fn contains(&self, cpu: u32) -> bool {
        self.0.contains(&cpu)
    }

    /// Whether every CPU of `other` is in this set.
    #[cfg(test)]
    pub fn is_superset(&self, other: &CpuSet) -> bool {
        self.0.is_superset(&other.0)
    }

    /// The CPU numbers, in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().copied()
    }

    /// The one CPU of a single-CPU set.
    #[cfg(test)]
    pub fn only(&self) -> Option<u32> {
        match self.0.len() {
            1 => self.0.first().copied(),
            _ => None,
        }
    }

    fn union_with(&mut self, other: &CpuSet) {
        self.0.extend(other.0.iter().copied());
    }

    fn to_libc(&self) -> libc::cpu_set_t {
        // SAFETY: cpu_set_t is a plain bit array; all-zero is the empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let capacity = 8 * std::mem::size_of::<libc::cpu_set_t>();
        for &cpu in self.0.iter().filter(|&&c| (c as usize) < capacity) {
            // SAFETY: `cpu` is below the set's capacity, checked just above.
            unsafe { libc::CPU_SET(cpu as usize, &mut set) };
        }
        set
    }
}

impl FromIterator<u32> for CpuSet {
    fn from_iter<I: IntoIterator<Item = u32>>(cpus: I) -> CpuSet {
        CpuSet(cpus.into_iter().collect())
    }
}

impl fmt::Display for CpuSet {
    /// The list syntax perf's `-C` takes, with ranges: `0-3,8`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut cpus = self.0.iter().copied().peekable();
        let mut first = true;
        while let Some(lo) = cpus.next() {
            let mut hi = lo;
            while cpus.peek() == Some(&(hi + 1)) {
                hi += 1;
                cpus.next();
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if hi == lo {
                write!(f, "{lo}")?;
            } else {
                write!(f, "{lo}-{hi}")?;
            }
        }
        Ok(())
    }
}

/// The CPUs that are online now.
pub(crate) fn online() -> io::Result<CpuSet> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online")?;
    CpuSet::parse(&text).ok_or_else(|| {
        io::Error::other(format!(
            "cannot parse the online CPU list '{}'",
            text.trim()
        ))
    })
}

/// Thread ids of a process.
fn threads(pid: Pid) -> io::Result<Vec<Pid>> {
    let mut tids = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        if let Some(tid) = entry?.file_name().to_str().and_then(|s| s.parse().ok()) {
            tids.push(tid);
        }
    }
    tids.sort_unstable();
    Ok(tids)
}

fn thread_affinity(pid: Pid, tid: Pid) -> io::Result<CpuSet> {
    let status = std::fs::read_to_string(
        Path::new("/proc")
            .join(pid.to_string())
            .join("task")
            .join(tid.to_string())
            .join("status"),
    )?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .and_then(CpuSet::parse)
        .ok_or_else(|| {
            io::Error::other(format!(
                "no Cpus_allowed_list for thread {tid} of process {pid}"
            ))
        })
}

/// The CPUs any thread of the process may run on.
pub fn affinity(pid: Pid) -> io::Result<CpuSet> {
    let mut all = CpuSet::default();
    for tid in threads(pid)? {
        // A thread may exit while we look; the others still tell where the process runs.
        if let Ok(set) = thread_affinity(pid, tid) {
            all.union_with(&set);
        }
    }
    Ok(all)
}

/// The CPUs this process may run on.
pub fn own() -> io::Result<CpuSet> {
    affinity(std::process::id() as i32)
}

/// Makes the command's process (and everything it starts) run only on `set`, from its first
/// instruction on.
pub(crate) fn pin_command(cmd: &mut Command, set: &CpuSet) {
    use std::os::unix::process::CommandExt;
    let mask = set.to_libc();
    // SAFETY: sched_setaffinity is async-signal-safe; `mask` was built before the fork.
    unsafe {
        cmd.pre_exec(move || {
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mask) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Every thread of a process pinned to one CPU, with their previous affinities to put back.
#[derive(Debug)]
pub(crate) struct Pinned {
    before: Vec<(i32, CpuSet)>,
}

/// Pins every thread of `pid` to `cpu`; threads it starts later inherit the pinning.
pub(crate) fn pin(pid: Pid, cpu: u32) -> io::Result<Pinned> {
    let target = CpuSet::one(cpu);
    let mut pinned = Pinned { before: Vec::new() };
    for tid in threads(pid)? {
        let Ok(before) = thread_affinity(pid, tid) else {
            continue;
        };
        set_affinity(tid, &target)?;
        pinned.before.push((tid, before));
    }
    Ok(pinned)
}

impl Pinned {
    /// Gives each thread its affinity back. Threads that exited are skipped; the first other
    /// failure is returned after trying them all.
    pub fn restore(self) -> io::Result<()> {
        let mut result = Ok(());
        for (tid, set) in &self.before {
            match set_affinity(*tid, set) {
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                Err(e) if result.is_ok() => result = Err(e),
                _ => {}
            }
        }
        result
    }
}

fn set_affinity(tid: Pid, set: &CpuSet) -> io::Result<()> {
    let mask = set.to_libc();
    // SAFETY: `mask` is a valid cpu_set_t and its size is passed along.
    let rc = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mask) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_list_syntax_round_trips() {
        let set = CpuSet::parse("0-3,5,7-8\n").unwrap();
        assert_eq!(set.len(), 7);
        assert_eq!(set.to_string(), "0-3,5,7-8");
        assert_eq!(CpuSet::parse("2").unwrap().only(), Some(2));
        assert_eq!(CpuSet::parse("").unwrap(), CpuSet::default());
        assert!(CpuSet::parse("3-1").is_none());
        assert!(CpuSet::parse("a").is_none());
    }

    #[test]
    fn own_affinity_is_among_online_cpus() {
        let own = affinity(std::process::id() as i32).unwrap();
        assert!(!own.is_empty());
        assert!(online().unwrap().is_superset(&own));
    }

    #[test]
    fn pin_and_restore_a_child() {
        let online = online().unwrap();
        let cpu = *online.0.last().unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let before = affinity(pid).unwrap();
        let pinned = pin(pid, cpu).unwrap();
        assert_eq!(affinity(pid).unwrap(), CpuSet::one(cpu));
        pinned.restore().unwrap();
        assert_eq!(affinity(pid).unwrap(), before);
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
