//! Checks a running process: where its hot range is, and which of its 2 MiB pages are backed by
//! huge pages.
//!
//! The load bias comes from the auxiliary vector (`AT_ENTRY` minus the ELF entry point), which
//! stays right after the runtime has replaced the text mapping with anonymous memory.
//! The process's mappings say how many bytes of each are huge (`AnonHugePages`,
//! `FilePmdMapped`, hugetlb); where a mapping is only partly huge, its frames (root only) tell
//! which 2 MiB pages are. `os::mappings` reads all three.

use serde::Serialize;

use crate::binary::{
    Binary, BinaryError, LoadBias, RuntimeAddr, StatedAddr, HOT_END, HOT_START, HUGE_PAGE,
};
use crate::link::RangesFile;
use crate::os::mappings::{entry_point, smaps, Frames};
use crate::os::proc::{self, Pid, ProcFileError};

/// Why a process could not be checked (as opposed to a check that failed).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProcessError {
    /// A file of `/proc/PID` could not be read: the process is gone, or not ours to read.
    #[error(transparent)]
    Proc(#[from] ProcFileError),
    /// The process's executable could not be read.
    #[error(transparent)]
    Binary(#[from] BinaryError),
    /// The process has no hot range to check, or the ranges file is for another build.
    #[error("process {pid}: {msg}")]
    Layout {
        /// The process.
        pid: Pid,
        /// What is missing or does not match.
        msg: String,
    },
}

/// What backs one 2 MiB page of the hot range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backing {
    /// Transparent huge page of anonymous memory (the runtime's copy).
    AnonHuge,
    /// A 2 MiB page-cache folio mapped by one page-table entry (the file itself).
    FileHuge,
    /// A page from the hugetlbfs pool.
    Hugetlb,
    /// 4 KiB pages.
    Small,
}

impl Backing {
    pub(crate) fn is_huge(self) -> bool {
        self != Backing::Small
    }
}

/// One 2 MiB page of a process's hot range.
#[derive(Debug, Clone, Serialize)]
pub struct PageReport {
    /// Where the 2 MiB page is in the process.
    pub address: RuntimeAddr,
    /// What backs it.
    pub backing: Backing,
    /// The mapping's name in /proc/PID/maps (a path, or empty for anonymous memory).
    pub mapping: String,
}

/// What `hottext verify --pid` found: where the hot range is in the process and what backs
/// each of its 2 MiB pages.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessReport {
    /// The process checked.
    pub pid: Pid,
    /// Its executable (`/proc/PID/exe`).
    pub executable: String,
    /// Where the executable is loaded: runtime address minus stated address.
    pub load_bias: LoadBias,
    /// Where the markers are in the process.
    pub hot_start: RuntimeAddr,
    /// The first address past the hot range in the process.
    pub hot_end: RuntimeAddr,
    /// Each 2 MiB page the range touches, in address order.
    pub pages: Vec<PageReport>,
    /// How many of those are on huge pages.
    pub huge_pages: usize,
    /// Why the check failed: each 2 MiB page of the hot range that is not on a huge page. Empty
    /// when it passed, that is when the whole range is on huge pages.
    pub problems: Vec<String>,
}

impl ProcessReport {
    /// Whether the whole hot range is on huge pages.
    pub fn passed(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Checks the pages of the process's hot range, between its markers, or, for a program run
/// under the preload library without markers, of the `ranges` of its ranges file.
pub fn check_process(pid: Pid, ranges: Option<&RangesFile>) -> Result<ProcessReport, ProcessError> {
    let executable = proc::exe(pid)?.display().to_string();
    let binary = Binary::open(&proc::exe_link(pid))?;
    let layout = |msg: String| ProcessError::Layout { pid, msg };
    let stated: Vec<(StatedAddr, StatedAddr)> = match ranges {
        Some(file) => {
            let running = binary.build_id_hex();
            if let (Some(wanted), Some(running)) = (&file.build_id, &running) {
                if wanted != running {
                    return Err(layout(format!("the ranges are for build-id {wanted}, but {executable} has build-id {running}")));
                }
            }
            file.ranges.clone()
        }
        None => vec![binary
            .hot_range()
            .ok_or_else(|| layout(format!("{executable} has no {HOT_START}/{HOT_END} markers: it was not linked with a hottext layout (for a program run under the preload library, give its --ranges file)")))?],
    };
    let (Some(&(start, _)), Some(&(_, end))) = (stated.first(), stated.last()) else {
        return Err(layout("the ranges file lists no range".into()));
    };

    let entry =
        entry_point(pid)?.ok_or_else(|| layout("no AT_ENTRY in its auxiliary vector".into()))?;
    let load_bias = LoadBias::between(binary.entry, entry);
    let (hot_start, hot_end) = (start.to_runtime(load_bias), end.to_runtime(load_bias));

    let vmas = smaps(pid)?;
    let mut frames = Frames::open(pid);

    let mut pages = Vec::new();
    let each_page = stated.iter().flat_map(|&(s, e)| {
        let (s, e) = (s.to_runtime(load_bias).0, e.to_runtime(load_bias).0);
        (s / HUGE_PAGE..e.div_ceil(HUGE_PAGE)).map(|p| RuntimeAddr(p * HUGE_PAGE))
    });
    for page in each_page {
        let vma = vmas.iter().find(|v| v.contains(page));
        let (backing, mapping) = match vma {
            None => (Backing::Small, "(unmapped)".to_string()),
            Some(v) => {
                let backing = if v.hugetlb {
                    Backing::Hugetlb
                } else if v.huge_bytes == 0 {
                    Backing::Small
                } else if v.huge_bytes >= v.bytes() || frames.huge_folio_at(page) {
                    if v.anonymous {
                        Backing::AnonHuge
                    } else {
                        Backing::FileHuge
                    }
                } else {
                    Backing::Small
                };
                (backing, v.name.clone())
            }
        };
        pages.push(PageReport {
            address: page,
            backing,
            mapping,
        });
    }
    let huge_pages = pages.iter().filter(|p| p.backing.is_huge()).count();
    let mut problems: Vec<String> = pages
        .iter()
        .filter(|p| !p.backing.is_huge())
        .map(|p| {
            let name = if p.mapping.is_empty() {
                "[anonymous]"
            } else {
                &p.mapping
            };
            format!("the 2 MiB page at {} ({name}) is on 4 KiB pages", p.address)
        })
        .collect();
    if pages.is_empty() {
        problems.push("the hot range is empty".to_string());
    }
    Ok(ProcessReport {
        pid,
        executable,
        load_bias,
        hot_start,
        hot_end,
        pages,
        huge_pages,
        problems,
    })
}
