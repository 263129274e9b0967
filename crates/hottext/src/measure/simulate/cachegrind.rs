//! Cachegrind's files of one simulated run: one `cg.PID` of counts and one `valgrind.PID.log`
//! for every process valgrind ran, and their totals; of those, the misses in the hot range's
//! whole 2 MiB pages ([`super::hot_range`]), from the counts per function and the executable
//! the log names.
//!
//! A process whose counts are missing is an error that names it, never a smaller total: the
//! log is written from a process's start, the counts only at its exit, so a log without counts
//! is a process that could not write them (a server's worker that switched to another user)
//! or was killed before it could (SIGKILL, also from its own parent).

use std::path::Path;

use foldhash::HashSet;

use super::hot_range::{HotCode, HotRanges};
use super::models::Slot;
use crate::measure::MeasureError;

/// Totals of one run's cachegrind files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Totals {
    pub instructions: u64,
    /// Of the I1 slot's structure.
    pub misses: u64,
    pub processes: usize,
    /// Of `misses`, those of functions on an executable's hot 2 MiB pages.
    pub hot_misses: u64,
    /// The LL slot's misses of the same functions' instructions.
    pub hot_ll_misses: u64,
    /// The executables with hot pages the processes ran.
    pub hot_ranges: HotRanges,
}

impl Totals {
    /// A run's totals with the hot range on 2 MiB pages: this run's misses outside the hot pages
    /// (its level's, on 4 KiB pages) and `huge`'s inside them at the level in `slot`; the rest of
    /// `huge` (the two runs do the same work).
    pub(super) fn on_huge_pages(&self, huge: &Totals, slot: Slot) -> Totals {
        let inside = match slot {
            Slot::I1 => huge.hot_misses,
            Slot::LL => huge.hot_ll_misses,
        };
        Totals {
            misses: self.misses.saturating_sub(self.hot_misses) + inside,
            ..huge.clone()
        }
    }
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

/// Sums the `summary:` lines of every process's cachegrind file in `dir`, and the misses of
/// functions on hot pages of the executable its log names; an error when a process valgrind
/// ran (it wrote a log) left no counts.
pub(super) fn read_totals(dir: &Path, hot: &mut HotCode) -> Result<Totals, MeasureError> {
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
        let log =
            std::fs::read_to_string(dir.join(format!("valgrind.{pid}.log"))).unwrap_or_default();
        let executable = executable_of(&log);
        let hot_functions = executable.and_then(|e| hot.of(Path::new(e)));
        let text = std::fs::read_to_string(dir.join(format!("cg.{pid}"))).unwrap_or_default();
        let Some(counts) = parse_counts(&text, hot_functions.map(|h| &h.names)) else {
            return Err(MeasureError::SimulationLost {
                who: format!("process {pid}"),
                dir: dir.display().to_string(),
                why: lost_because(&log),
            });
        };
        totals.instructions += counts.instructions;
        totals.misses += counts.misses;
        totals.hot_misses += counts.hot_misses;
        totals.hot_ll_misses += counts.hot_ll_misses;
        totals.processes += 1;
        if let (Some(executable), Some(h)) = (executable, hot_functions) {
            totals.hot_ranges.insert(executable.to_string(), h.pages);
        }
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

/// The executable a process ran, from its log: valgrind's `-v` names every object it reads the
/// symbols of, the executable first.
fn executable_of(log: &str) -> Option<&str> {
    const READING: &str = "Reading syms from ";
    log.lines()
        .find_map(|line| Some(line[line.find(READING)? + READING.len()..].trim()))
}

/// One process's counts.
#[derive(Debug, Default, PartialEq, Eq)]
struct Counts {
    instructions: u64,
    misses: u64,
    hot_misses: u64,
    hot_ll_misses: u64,
}

/// The counts of a cachegrind output file: its `events:` names the columns of `summary:` and
/// of the lines under each `fn=` (a line number, then the counts; absent trailing ones are 0),
/// which are summed for the functions named in `hot`. None when the file is not whole.
fn parse_counts(text: &str, hot: Option<&HashSet<String>>) -> Option<Counts> {
    let mut columns = None;
    let mut in_hot_function = false;
    let mut counts = Counts::default();
    let mut summary = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("events:") {
            let events: Vec<&str> = rest.split_whitespace().collect();
            let at = |name: &str| events.iter().position(|e| *e == name);
            columns = Some((at("Ir")?, at("I1mr")?, at("ILmr")));
        } else if let Some(rest) = line.strip_prefix("summary:") {
            summary = Some(parse_row(rest)?);
        } else if let Some(name) = line.strip_prefix("fn=") {
            in_hot_function = hot.is_some_and(|names| names.contains(name));
        } else if in_hot_function && line.starts_with(|c: char| c.is_ascii_digit()) {
            let (_, i1mr, ilmr) = columns?;
            // The first field is the source line.
            let row = parse_row(line)?;
            let column = |i: usize| row.get(i + 1).copied().unwrap_or(0);
            counts.hot_misses += column(i1mr);
            counts.hot_ll_misses += ilmr.map_or(0, column);
        }
    }
    let (ir, i1mr, _) = columns?;
    let summary = summary?;
    counts.instructions = *summary.get(ir)?;
    counts.misses = *summary.get(i1mr)?;
    Some(counts)
}

fn parse_row(text: &str) -> Option<Vec<u64>> {
    text.split_whitespace().map(|v| v.parse().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(misses: u64, hot_misses: u64, hot_ll_misses: u64) -> Totals {
        Totals {
            instructions: 1_000_000,
            misses,
            processes: 1,
            hot_misses,
            hot_ll_misses,
            hot_ranges: HotRanges::new(),
        }
    }

    #[test]
    fn the_hot_pages_count_from_the_2_mib_run_the_rest_from_the_4_kib_one() {
        // 4 KiB pages: 900 of 1000 misses in the hot range; 2 MiB pages: 3 there (L1), 1 (L2).
        let small = totals(1000, 900, 0);
        let huge = totals(40, 3, 1);
        assert_eq!(small.on_huge_pages(&huge, Slot::I1).misses, 103);
        assert_eq!(small.on_huge_pages(&huge, Slot::LL).misses, 101);
    }

    #[test]
    fn without_hot_code_the_figure_is_the_4_kib_one() {
        let small = totals(1000, 0, 0);
        assert_eq!(
            small.on_huge_pages(&totals(40, 0, 0), Slot::I1).misses,
            1000
        );
    }

    #[test]
    fn the_summary_is_read_by_its_event_names() {
        let text = "desc: I1 cache: 32768 B, 64 B, 8-way\ncmd: ./x\nevents: Ir I1mr ILmr Dr\n\
                    fl=a.c\nfn=f\n1 5 1 0 2\nsummary: 1000 17 3 200\n";
        let totals = |text| parse_counts(text, None).map(|c| (c.instructions, c.misses));
        assert_eq!(totals(text), Some((1000, 17)));
        assert_eq!(totals("events: Ir\nsummary: 5\n"), None);
        assert_eq!(totals("events: Ir I1mr\n"), None);
    }

    #[test]
    fn hot_functions_sum_their_lines_misses_wherever_their_file_is() {
        let text = "events: Ir I1mr ILmr\nfl=???\nfn=hot\n0 100 7 2\nfn=cold\n0 50 9 4\n\
                    fl=h.h\nfn=hot\n3 10 1\n4 10\nsummary: 170 17 6\n";
        let hot: HashSet<String> = ["hot".to_string()].into_iter().collect();
        let counts = parse_counts(text, Some(&hot)).unwrap();
        assert_eq!(
            counts,
            Counts {
                instructions: 170,
                misses: 17,
                hot_misses: 8,
                hot_ll_misses: 2
            }
        );
        assert_eq!(parse_counts(text, None).unwrap().hot_misses, 0);
        assert_eq!(
            parse_counts("events: Ir I1mr\nfn=hot\n0 x\nsummary: 1 1\n", Some(&hot)),
            None
        );
    }

    #[test]
    fn the_executable_is_the_first_object_valgrind_reads() {
        let log = "==7== Command: ./p 1\n--7-- Valgrind library directory: /usr/libexec/valgrind\n\
                   --7-- Reading syms from /tmp/x/p\n--7-- Reading syms from /usr/lib/ld.so\n";
        assert_eq!(executable_of(log), Some("/tmp/x/p"));
        assert_eq!(executable_of("==7== Cachegrind\n"), None);
    }

    #[test]
    fn a_process_with_a_log_and_no_counts_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        write("valgrind.10.log", "==10== Cachegrind\n");
        write("cg.10", "events: Ir I1mr\nsummary: 100 2\n");
        let read = |dir: &Path| read_totals(dir, &mut HotCode::default());
        assert_eq!(read(dir.path()).unwrap().instructions, 100);
        write(
            "valgrind.11.log",
            "==11== error: can't open cache simulation output file '/x/cg.11'\n",
        );
        let msg = read(dir.path()).unwrap_err().to_string();
        assert!(
            msg.contains("process 11") && msg.contains("switched to a user"),
            "{msg}"
        );
        write("cg.11", "events: Ir I1mr\nsummary: 50 1\n");
        write("valgrind.12.log", "==12== Cachegrind\n");
        let msg = read(dir.path()).unwrap_err().to_string();
        assert!(
            msg.contains("process 12") && msg.contains("SIGKILL"),
            "{msg}"
        );
    }
}
