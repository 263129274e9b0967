//! Processes as `/proc` shows them: one reader of `/proc/PID/stat`, process trees, CPU time, and
//! the mappings `/proc/PID/smaps` lists.

use std::path::Path;

use crate::binary::HUGE_PAGE;

/// A process id, as the kernel's `pid_t`.
pub type Pid = libc::pid_t;

/// One line of `/proc/PID/stat`, the fields hottext uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: Pid,
    pub ppid: Pid,
    pub pgrp: Pid,
    pub state: char,
    /// CPU time of the process itself (utime + stime), in clock ticks.
    pub own_ticks: u64,
    /// CPU time of its children that it has waited for (cutime + cstime), in clock ticks:
    /// what a process tree used includes it, since reaped children are no longer in the tree.
    pub reaped_children_ticks: u64,
}

impl ProcStat {
    /// Its CPU time with that of the children it reaped.
    pub fn ticks_with_reaped_children(&self) -> u64 {
        self.own_ticks + self.reaped_children_ticks
    }
}

/// Parses a `/proc/PID/stat` line. The command name may hold spaces and parentheses, so the
/// fields are counted from the last ')'.
pub fn parse_stat(line: &str) -> Option<ProcStat> {
    let (head, rest) = line.rsplit_once(')')?;
    let pid = head.split_whitespace().next()?.parse().ok()?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    Some(ProcStat {
        pid,
        state: f.first()?.chars().next()?,
        ppid: f.get(1)?.parse().ok()?,
        pgrp: f.get(2)?.parse().ok()?,
        // Fields 14–17 of proc(5); `rest` starts at field 3.
        own_ticks: num(11)? + num(12)?,
        reaped_children_ticks: num(13)? + num(14)?,
    })
}

/// The stat line of process `pid`, if it exists.
pub fn stat(pid: Pid) -> Option<ProcStat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Whether process `pid` exists (a zombie still does).
pub fn exists(pid: Pid) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Every process now (those that exit while we read are skipped).
pub fn processes() -> Vec<ProcStat> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| stat(e.ok()?.file_name().to_str()?.parse().ok()?))
        .collect()
}

/// `root`, its descendants, and the members of its process group.
pub fn tree(all: &[ProcStat], root: Pid) -> Vec<ProcStat> {
    let mut inside: Vec<Pid> = vec![root];
    let mut i = 0;
    while i < inside.len() {
        let parent = inside[i];
        for p in all {
            if p.ppid == parent && !inside.contains(&p.pid) {
                inside.push(p.pid);
            }
        }
        i += 1;
    }
    all.iter()
        .filter(|p| inside.contains(&p.pid) || p.pgrp == root)
        .cloned()
        .collect()
}

/// Clock ticks a second, the unit of `/proc`'s CPU times.
pub fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

/// One mapping of `/proc/PID/smaps`, the fields hottext uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vma {
    pub start: u64,
    pub end: u64,
    /// Its name in /proc/PID/maps (a path, `[heap]` and the like, or empty).
    pub name: String,
    pub anonymous: bool,
    pub hugetlb: bool,
    /// Bytes mapped by 2 MiB entries: AnonHugePages + FilePmdMapped + ShmemPmdMapped.
    pub huge_bytes: u64,
    /// The `VmFlags` line's two-letter flags (`hg`: advised `MADV_HUGEPAGE`).
    pub flags: Vec<String>,
}

/// The mappings of a `/proc/PID/smaps` text, in its order.
pub fn parse_smaps(text: &str) -> Vec<Vma> {
    let mut vmas: Vec<Vma> = Vec::new();
    for line in text.lines() {
        let mut fields = line.split_ascii_whitespace();
        let Some(first) = fields.next() else { continue };
        if let Some((lo, hi)) = first.split_once('-').filter(|_| !first.ends_with(':')) {
            let (Ok(start), Ok(end)) = (u64::from_str_radix(lo, 16), u64::from_str_radix(hi, 16))
            else {
                continue;
            };
            let name = fields.nth(4).unwrap_or("").to_string();
            let anonymous = name.is_empty() || name.starts_with('[');
            vmas.push(Vma {
                start,
                end,
                name,
                anonymous,
                hugetlb: false,
                huge_bytes: 0,
                flags: Vec::new(),
            });
            continue;
        }
        let Some(vma) = vmas.last_mut() else { continue };
        let kb = || {
            fields
                .clone()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
                * 1024
        };
        match first {
            "AnonHugePages:" | "FilePmdMapped:" | "ShmemPmdMapped:" => vma.huge_bytes += kb(),
            "KernelPageSize:" if kb() == HUGE_PAGE => vma.hugetlb = true,
            "Private_Hugetlb:" | "Shared_Hugetlb:" if kb() > 0 => vma.hugetlb = true,
            "VmFlags:" => vma.flags = fields.map(str::to_string).collect(),
            _ => {}
        }
    }
    vmas
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smaps_mappings_and_huge_bytes() {
        let text = "\
55d0a0000000-55d0a0400000 r-xp 00000000 fe:01 123 /usr/bin/demo
Size:               4096 kB
AnonHugePages:         0 kB
FilePmdMapped:      2048 kB
7f0000000000-7f0000200000 r-xp 00000000 00:00 0 
AnonHugePages:      2048 kB
KernelPageSize:        4 kB
7f1000000000-7f1000200000 r-xp 00000000 00:10 9 /dev/hugepages/x
KernelPageSize:     2048 kB
VmFlags: rd ex mr mw me hg
";
        let v = parse_smaps(text);
        assert_eq!(v.len(), 3);
        assert_eq!(
            (v[0].name.as_str(), v[0].anonymous, v[0].huge_bytes),
            ("/usr/bin/demo", false, 2 << 20)
        );
        assert_eq!(
            (v[1].anonymous, v[1].huge_bytes, v[1].hugetlb),
            (true, 2 << 20, false)
        );
        assert!(v[2].hugetlb);
        assert_eq!(v[2].flags, ["rd", "ex", "mr", "mw", "me", "hg"]);
        assert!(v[0].flags.is_empty());
    }

    #[test]
    fn stat_line_with_a_strange_name() {
        let line = "4242 (my (odd) server) S 4200 4242 1947 0 -1 4194304 101 0 0 0 \
                    150 30 7 3 20 0 1 0 184244 3133440 418";
        let p = parse_stat(line).unwrap();
        assert_eq!((p.pid, p.ppid, p.pgrp, p.state), (4242, 4200, 4242, 'S'));
        assert_eq!((p.own_ticks, p.reaped_children_ticks), (150 + 30, 7 + 3));
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn this_process_is_read() {
        let me = stat(std::process::id() as i32).unwrap();
        assert_eq!(me.pid, std::process::id() as i32);
        assert!(exists(me.pid) && processes().iter().any(|p| p.pid == me.pid));
    }

    #[test]
    fn tree_follows_parents_and_the_group() {
        let p = |pid, ppid, pgrp| ProcStat {
            pid,
            ppid,
            pgrp,
            state: 'S',
            own_ticks: 1,
            reaped_children_ticks: 0,
        };
        let all = [
            p(1, 0, 1),
            p(10, 1, 10),
            p(11, 10, 10),
            p(12, 11, 12), // left the group, still a descendant
            p(13, 1, 10),  // reparented, still in the group
            p(20, 1, 20),
        ];
        let mut pids: Vec<i32> = tree(&all, 10).iter().map(|p| p.pid).collect();
        pids.sort();
        assert_eq!(pids, [10, 11, 12, 13]);
    }
}
