//! Processes as `/proc` shows them: one reader of `/proc/PID/stat`, process trees, CPU time.

use std::path::Path;

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

#[cfg(test)]
mod tests {
    use super::*;

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
