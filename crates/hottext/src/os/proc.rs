//! Processes as `/proc/PID` shows them: one reader of `/proc/PID/stat`, process trees, CPU time,
//! `status` fields, the executable, cgroups and the text of `maps`; their memory mappings are
//! in `os::mappings`.

use std::io;
use std::path::{Path, PathBuf};

/// A process id, as the kernel's `pid_t`.
pub type Pid = libc::pid_t;

/// One line of `/proc/PID/stat`, the fields hottext uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProcStat {
    /// The process.
    pub pid: Pid,
    /// Its parent.
    pub ppid: Pid,
    /// Its process group.
    pub pgrp: Pid,
    /// `R` running, `S` sleeping, `Z` zombie, … (proc(5)).
    pub state: char,
    /// CPU time of the process itself (utime + stime), in clock ticks.
    pub own_ticks: u64,
    /// CPU time of its children that it has waited for (cutime + cstime), in clock ticks:
    /// what a process tree used includes it, since reaped children are no longer in the tree.
    pub reaped_children_ticks: u64,
}

impl ProcStat {
    /// Its CPU time with that of the children it reaped.
    pub(crate) fn ticks_with_reaped_children(&self) -> u64 {
        self.own_ticks + self.reaped_children_ticks
    }
}

/// Parses a `/proc/PID/stat` line. The command name may hold spaces and parentheses, so the
/// fields are counted from the last ')'.
pub(crate) fn parse_stat(line: &str) -> Option<ProcStat> {
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
pub(crate) fn stat(pid: Pid) -> Option<ProcStat> {
    parse_stat(&std::fs::read_to_string(path(pid, "stat")).ok()?)
}

/// Whether process `pid` exists (a zombie still does).
pub fn exists(pid: Pid) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// A file of `/proc/PID` that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {path} (is process {pid} running, and may we read it?)")]
pub struct ProcFileError {
    /// The process.
    pub pid: Pid,
    /// The file that could not be read.
    pub path: PathBuf,
    /// The operating system's error.
    #[source]
    pub source: io::Error,
}

/// The path of `name` in the folder of process `pid`.
fn path(pid: Pid, name: &str) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}/{name}"))
}

/// The bytes of `/proc/PID/name`, or an error naming the file and the process.
pub(super) fn read(pid: Pid, name: &str) -> Result<Vec<u8>, ProcFileError> {
    std::fs::read(path(pid, name)).map_err(|source| ProcFileError {
        pid,
        path: path(pid, name),
        source,
    })
}

/// The path that opens the executable of `pid`: `/proc/PID/exe` still reaches the file after a
/// package upgrade replaced it, and from outside the process's container.
pub fn exe_link(pid: Pid) -> PathBuf {
    path(pid, "exe")
}

/// The file the executable of `pid` was started from (` (deleted)` appended once replaced).
pub fn exe(pid: Pid) -> Result<PathBuf, ProcFileError> {
    std::fs::read_link(exe_link(pid)).map_err(|source| ProcFileError {
        pid,
        path: exe_link(pid),
        source,
    })
}

/// The value of one field of `/proc/PID/status` (`Seccomp`, `Cpus_allowed_list`), trimmed;
/// `None` when the process or the field is not there.
pub(crate) fn status_field(pid: Pid, name: &str) -> Option<String> {
    let text = std::fs::read_to_string(path(pid, "status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(|v| v.trim().to_string())
}

/// Context switches, voluntary and not, of every thread of `pid` (0 when it is gone).
pub(crate) fn context_switches(pid: Pid) -> u64 {
    let Ok(tasks) = std::fs::read_dir(path(pid, "task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .map(|s| {
            s.lines()
                .filter(|l| l.contains("ctxt_switches"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>()
        })
        .sum()
}

/// One line of `/proc/PID/cgroup`: `0::/system.slice/db.service` (v2, no controllers) or
/// `4:memory:/user.slice` (v1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cgroup {
    /// The v1 controllers, comma-separated; empty for the v2 hierarchy.
    pub controllers: String,
    /// The group's path below the hierarchy's root.
    pub path: String,
}

/// The cgroups of `pid`, in the file's order (empty when it cannot be read).
pub(crate) fn cgroups(pid: Pid) -> Vec<Cgroup> {
    let text = std::fs::read_to_string(path(pid, "cgroup")).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            Some(Cgroup {
                controllers: controllers.to_string(),
                path: path.to_string(),
            })
        })
        .collect()
}

/// A path that opens this process's descriptor `file` again (`/proc/self/fd/N`), for readers
/// that take a path: an in-memory file has no other.
pub(crate) fn fd_path(file: &impl std::os::fd::AsRawFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()))
}

/// The text of `/proc/PID/maps` (one `start-end perms offset dev inode path` line a mapping).
pub(crate) fn maps(pid: Pid) -> Option<String> {
    std::fs::read_to_string(path(pid, "maps")).ok()
}

/// The text of `/proc/PID/numa_maps` (a mapping's start address, then `N0=12`-style counts).
pub(crate) fn numa_maps(pid: Pid) -> Option<String> {
    std::fs::read_to_string(path(pid, "numa_maps")).ok()
}

/// Every process now (those that exit while we read are skipped).
pub(crate) fn processes() -> Vec<ProcStat> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| stat(e.ok()?.file_name().to_str()?.parse().ok()?))
        .collect()
}

/// `root`, its descendants, and the members of its process group.
pub(crate) fn tree(all: &[ProcStat], root: Pid) -> Vec<ProcStat> {
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
pub(crate) fn clock_ticks_per_second() -> f64 {
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
    fn this_process_status_and_executable() {
        let me = std::process::id() as Pid;
        let allowed = status_field(me, "Cpus_allowed_list").unwrap();
        assert!(!allowed.is_empty() && !allowed.contains(':'), "{allowed}");
        assert_eq!(status_field(me, "No_such_field"), None);
        assert_eq!(exe(me).unwrap(), std::env::current_exe().unwrap());
        assert!(maps(me)
            .unwrap()
            .contains(&*exe(me).unwrap().to_string_lossy()));
        assert!(!cgroups(me).is_empty());
        let gone = exe(Pid::MAX).unwrap_err().to_string();
        assert!(gone.contains(&format!("/proc/{}/exe", Pid::MAX)), "{gone}");
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
