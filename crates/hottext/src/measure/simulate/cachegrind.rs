//! Cachegrind's files of one simulated run: one `cg.PID` of counts and one `valgrind.PID.log`
//! for every process valgrind ran, and their totals.
//!
//! A process whose counts are missing is an error that names it, never a smaller total: the
//! log is written from a process's start, the counts only at its exit, so a log without counts
//! is a process that could not write them (a server's worker that switched to another user)
//! or was killed before it could (SIGKILL, also from its own parent).

use std::path::Path;

use crate::measure::MeasureError;

/// Totals of one run's cachegrind files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Totals {
    pub instructions: u64,
    pub misses: u64,
    pub processes: usize,
}

/// Makes a run directory that a server's processes can write their counts in after they switch
/// to another user (nginx's workers run as `nobody` when started by root): the directories
/// above it searchable, the run directory writable by all and sticky, as /tmp is.
pub(super) fn make_run_dir(scratch: &Path, dir: &Path) -> Result<(), MeasureError> {
    use std::os::unix::fs::PermissionsExt;
    let io = |what: String| move |source| MeasureError::Io { what, source };
    std::fs::create_dir_all(dir).map_err(io(format!("create {}", dir.display())))?;
    for (path, mode) in [(scratch, 0o711), (dir, 0o1733)] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .map_err(io(format!("set the permissions of {}", path.display())))?;
    }
    Ok(())
}

/// Sums the `summary:` lines of every process's cachegrind file in `dir`; an error when a
/// process valgrind ran (it wrote a log) left no counts.
pub(super) fn read_totals(dir: &Path) -> Result<Totals, MeasureError> {
    let io = |source| MeasureError::Io {
        what: format!("read {}", dir.display()),
        source,
    };
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        if let Some(name) = entry.map_err(io)?.file_name().to_str() {
            names.push(name.to_string());
        }
    }
    names.sort();
    let mut totals = Totals::default();
    for pid in names.iter().filter_map(|n| pid_of(n, "valgrind.", ".log")) {
        let counts = dir.join(format!("cg.{pid}"));
        let text = std::fs::read_to_string(&counts).unwrap_or_default();
        let Some((instructions, misses)) = parse_summary(&text) else {
            let log = std::fs::read_to_string(dir.join(format!("valgrind.{pid}.log")));
            return Err(MeasureError::SimulationLost {
                who: format!("process {pid}"),
                dir: dir.display().to_string(),
                why: lost_because(&log.unwrap_or_default()),
            });
        };
        totals.instructions += instructions;
        totals.misses += misses;
        totals.processes += 1;
    }
    if totals.processes == 0 {
        return Err(MeasureError::SimulationLost {
            who: "every process".into(),
            dir: dir.display().to_string(),
            why: "valgrind wrote no log: it did not start".into(),
        });
    }
    Ok(totals)
}

/// `1234` of `valgrind.1234.log`.
fn pid_of<'a>(name: &'a str, prefix: &str, suffix: &str) -> Option<&'a str> {
    let pid = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
    pid.bytes().all(|b| b.is_ascii_digit()).then_some(pid)
}

/// Why a process left no counts, from its valgrind log.
fn lost_because(log: &str) -> String {
    if log.contains("can't open cache simulation output file") {
        "it could not create its counts file (it switched to a user who may not write there)".into()
    } else if let Some(line) = log.lines().find(|l| l.contains("Process terminating")) {
        format!(
            "valgrind says: {}",
            line.trim_start_matches(|c: char| c == '=' || c.is_ascii_digit())
                .trim()
        )
    } else {
        "it was killed (SIGKILL, also from its own parent) before it could write them".into()
    }
}

/// (Ir, I1mr) of a cachegrind output file: its `events:` names the columns of `summary:`.
fn parse_summary(text: &str) -> Option<(u64, u64)> {
    let mut events: Option<Vec<&str>> = None;
    let mut summary: Option<Vec<u64>> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("events:") {
            events = Some(rest.split_whitespace().collect());
        } else if let Some(rest) = line.strip_prefix("summary:") {
            summary = rest.split_whitespace().map(|v| v.parse().ok()).collect();
        }
    }
    let (events, summary) = (events?, summary?);
    let column = |name: &str| {
        let i = events.iter().position(|e| *e == name)?;
        summary.get(i).copied()
    };
    Some((column("Ir")?, column("I1mr")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_is_read_by_its_event_names() {
        let text = "desc: I1 cache: 32768 B, 64 B, 8-way\ncmd: ./x\nevents: Ir I1mr ILmr Dr\n\
                    fl=a.c\n1 5 1 0 2\nsummary: 1000 17 3 200\n";
        assert_eq!(parse_summary(text), Some((1000, 17)));
        assert_eq!(parse_summary("events: Ir\nsummary: 5\n"), None);
        assert_eq!(parse_summary("events: Ir I1mr\n"), None);
    }

    #[test]
    fn a_process_with_a_log_and_no_counts_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        write("valgrind.10.log", "==10== Cachegrind\n");
        write("cg.10", "events: Ir I1mr\nsummary: 100 2\n");
        assert_eq!(read_totals(dir.path()).unwrap().instructions, 100);
        write(
            "valgrind.11.log",
            "==11== error: can't open cache simulation output file '/x/cg.11'\n",
        );
        let msg = read_totals(dir.path()).unwrap_err().to_string();
        assert!(
            msg.contains("process 11") && msg.contains("switched to a user"),
            "{msg}"
        );
        write("cg.11", "events: Ir I1mr\nsummary: 50 1\n");
        write("valgrind.12.log", "==12== Cachegrind\n");
        let msg = read_totals(dir.path()).unwrap_err().to_string();
        assert!(
            msg.contains("process 12") && msg.contains("SIGKILL"),
            "{msg}"
        );
    }
}
