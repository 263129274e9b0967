//! Checks a running process: where its hot range is, and which of its 2 MiB pages are backed by
//! huge pages.
//!
//! The load bias comes from the auxiliary vector (`AT_ENTRY` minus the ELF entry point), which
//! stays right after the runtime has replaced the text mapping with anonymous memory.
//! `/proc/PID/smaps` says how many bytes of each mapping are huge (`AnonHugePages`,
//! `FilePmdMapped`, hugetlb); where a mapping is only partly huge, `/proc/PID/pagemap` and
//! `/proc/kpageflags` (root only) tell which 2 MiB pages are.

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use serde::Serialize;

use crate::binary::{
    Binary, BinaryError, LoadBias, RuntimeAddr, StatedAddr, HOT_END, HOT_START, HUGE_PAGE,
};
use crate::link::RangesFile;
use crate::os::proc::{parse_smaps, Pid};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProcessError {
    #[error("cannot read {path} (is process {pid} running, and may we read it?)")]
    Proc {
        pid: Pid,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Binary(#[from] BinaryError),
    #[error("process {pid}: {msg}")]
    Layout { pid: Pid, msg: String },
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
    pub fn is_huge(self) -> bool {
        self != Backing::Small
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct PageReport {
    /// Where the 2 MiB page is in the process.
    pub address: RuntimeAddr,
    pub backing: Backing,
    /// The mapping's name in /proc/PID/maps (a path, or empty for anonymous memory).
    pub mapping: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProcessReport {
    pub pid: Pid,
    pub executable: String,
    pub load_bias: LoadBias,
    /// Where the markers are in the process.
    pub hot_start: RuntimeAddr,
    pub hot_end: RuntimeAddr,
    pub pages: Vec<PageReport>,
    pub huge_pages: usize,
    /// Why the check failed: each 2 MiB page of the hot range that is not on a huge page. Empty
    /// when it passed, that is when the whole range is on huge pages.
    pub problems: Vec<String>,
}

impl ProcessReport {
    pub fn passed(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Checks the pages of the process's hot range, between its markers, or, for a program run
/// under the preload library without markers, of the `ranges` of its ranges file.
pub fn check_process(pid: Pid, ranges: Option<&RangesFile>) -> Result<ProcessReport, ProcessError> {
    let proc = |name: &str| PathBuf::from(format!("/proc/{pid}/{name}"));
    let read = |name: &str| {
        fs::read(proc(name)).map_err(|source| ProcessError::Proc {
            pid,
            path: proc(name),
            source,
        })
    };

    let exe_path = proc("exe");
    let executable = fs::read_link(&exe_path)
        .map_err(|source| ProcessError::Proc {
            pid,
            path: exe_path.clone(),
            source,
        })?
        .display()
        .to_string();
    let binary = Binary::open(&exe_path)?;
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

    let entry = auxv_entry(&read("auxv")?)
        .ok_or_else(|| layout("no AT_ENTRY in its auxiliary vector".into()))?;
    let load_bias = LoadBias::between(binary.entry, RuntimeAddr(entry));
    let (hot_start, hot_end) = (start.to_runtime(load_bias), end.to_runtime(load_bias));

    let smaps = String::from_utf8_lossy(&read("smaps")?).into_owned();
    let vmas = parse_smaps(&smaps);
    let mut pagemap = fs::File::open(proc("pagemap")).ok();
    let mut kpageflags = fs::File::open("/proc/kpageflags").ok();

    let mut pages = Vec::new();
    let each_page = stated.iter().flat_map(|&(s, e)| {
        let (s, e) = (s.to_runtime(load_bias).0, e.to_runtime(load_bias).0);
        (s / HUGE_PAGE..e.div_ceil(HUGE_PAGE)).map(|p| p * HUGE_PAGE)
    });
    for page in each_page {
        let vma = vmas.iter().find(|v| v.start <= page && page < v.end);
        let (backing, mapping) = match vma {
            None => (Backing::Small, "(unmapped)".to_string()),
            Some(v) => {
                let backing = if v.hugetlb {
                    Backing::Hugetlb
                } else if v.huge_bytes == 0 {
                    Backing::Small
                } else if v.huge_bytes >= v.end - v.start
                    || huge_folio_at(page, &mut pagemap, &mut kpageflags)
                {
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
            address: RuntimeAddr(page),
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

/// `AT_ENTRY` from a 64-bit auxiliary vector: (type, value) pairs of native words.
fn auxv_entry(auxv: &[u8]) -> Option<u64> {
    const AT_ENTRY: u64 = 9;
    auxv.chunks_exact(16).find_map(|pair| {
        let kind = u64::from_ne_bytes(pair[..8].try_into().ok()?);
        let value = u64::from_ne_bytes(pair[8..].try_into().ok()?);
        (kind == AT_ENTRY).then_some(value)
    })
}

/// Whether the 2 MiB page at `addr` is one 2 MiB folio: its first and last 4 KiB pages are
/// present, physically contiguous from a 2 MiB-aligned frame, and flagged as a transparent huge
/// page. Needs root (pagemap hides frame numbers otherwise); `false` when it cannot tell.
fn huge_folio_at(
    addr: u64,
    pagemap: &mut Option<fs::File>,
    kpageflags: &mut Option<fs::File>,
) -> bool {
    const PRESENT: u64 = 1 << 63;
    const PFN_MASK: u64 = (1 << 55) - 1;
    const KPF_THP: u64 = 1 << 22;
    let (Some(pagemap), Some(kpageflags)) = (pagemap.as_mut(), kpageflags.as_mut()) else {
        return false;
    };
    let word = |file: &mut fs::File, index: u64| -> Option<u64> {
        let mut buf = [0u8; 8];
        file.seek(SeekFrom::Start(index * 8)).ok()?;
        file.read_exact(&mut buf).ok()?;
        Some(u64::from_ne_bytes(buf))
    };
    let frame = |pagemap: &mut fs::File, a: u64| {
        word(pagemap, a / 4096)
            .filter(|e| e & PRESENT != 0)
            .map(|e| e & PFN_MASK)
    };
    let (Some(first), Some(last)) = (
        frame(pagemap, addr),
        frame(pagemap, addr + HUGE_PAGE - 4096),
    ) else {
        return false;
    };
    let thp = |kpageflags: &mut fs::File, pfn: u64| {
        word(kpageflags, pfn).is_some_and(|f| f & KPF_THP != 0)
    };
    first != 0
        && first % 512 == 0
        && last == first + 511
        && thp(kpageflags, first)
        && thp(kpageflags, last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auxv_entry_is_found() {
        let mut auxv = Vec::new();
        for (k, v) in [(6u64, 4096u64), (9, 0x55d0_a000_1040), (0, 0)] {
            auxv.extend(k.to_ne_bytes());
            auxv.extend(v.to_ne_bytes());
        }
        assert_eq!(auxv_entry(&auxv), Some(0x55d0_a000_1040));
        assert_eq!(auxv_entry(&[]), None);
    }
}
