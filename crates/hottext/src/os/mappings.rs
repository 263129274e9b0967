//! A process's memory as `/proc/PID` shows it: its mappings (`smaps`), where its executable was
//! loaded (`auxv`), and which physical frames back a page (`pagemap`, `/proc/kpageflags`).

use std::fs;
use std::io::{Read, Seek, SeekFrom};

use super::proc::{read, Pid, ProcFileError};
use crate::binary::{RuntimeAddr, HUGE_PAGE};

/// One mapping of `/proc/PID/smaps`, the fields hottext uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vma {
    pub start: RuntimeAddr,
    /// Just past its last byte.
    pub end: RuntimeAddr,
    /// Its name in /proc/PID/maps (a path, `[heap]` and the like, or empty).
    pub name: String,
    pub anonymous: bool,
    pub hugetlb: bool,
    /// Bytes mapped by 2 MiB entries: AnonHugePages + FilePmdMapped + ShmemPmdMapped.
    pub huge_bytes: u64,
    /// Of those, the bytes of a file's page cache (FilePmdMapped).
    pub file_huge_bytes: u64,
    /// The `VmFlags` line's two-letter flags (`hg`: advised `MADV_HUGEPAGE`).
    pub flags: Vec<String>,
}

impl Vma {
    /// Whether `addr` is in this mapping.
    pub fn contains(&self, addr: RuntimeAddr) -> bool {
        self.start <= addr && addr < self.end
    }

    /// Its length in bytes.
    pub fn bytes(&self) -> u64 {
        self.end.0 - self.start.0
    }
}

/// The mappings of a `/proc/PID/smaps` text, in its order.
fn parse_smaps(text: &str) -> Vec<Vma> {
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
                start: RuntimeAddr(start),
                end: RuntimeAddr(end),
                name,
                anonymous,
                hugetlb: false,
                huge_bytes: 0,
                file_huge_bytes: 0,
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
            "FilePmdMapped:" => {
                vma.huge_bytes += kb();
                vma.file_huge_bytes += kb();
            }
            "AnonHugePages:" | "ShmemPmdMapped:" => vma.huge_bytes += kb(),
            "KernelPageSize:" if kb() == HUGE_PAGE => vma.hugetlb = true,
            "Private_Hugetlb:" | "Shared_Hugetlb:" if kb() > 0 => vma.hugetlb = true,
            "VmFlags:" => vma.flags = fields.map(str::to_string).collect(),
            _ => {}
        }
    }
    vmas
}

/// The mappings of process `pid`, in address order.
pub fn smaps(pid: Pid) -> Result<Vec<Vma>, ProcFileError> {
    Ok(parse_smaps(&String::from_utf8_lossy(&read(pid, "smaps")?)))
}

/// Where process `pid` was entered (`AT_ENTRY` of its auxiliary vector): with the ELF entry
/// point, its load bias. It stays right after the runtime replaced the text mapping with
/// anonymous memory. `Ok(None)`: the vector has no `AT_ENTRY`.
pub(crate) fn entry_point(pid: Pid) -> Result<Option<RuntimeAddr>, ProcFileError> {
    Ok(auxv_entry(&read(pid, "auxv")?).map(RuntimeAddr))
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

/// Which frames back the pages of one process: its `pagemap` and the kernel's `kpageflags`,
/// both readable by root only (frame numbers are hidden from others).
pub(crate) struct Frames {
    pagemap: Option<fs::File>,
    kpageflags: Option<fs::File>,
}

impl Frames {
    /// Opens the files; one that cannot be opened makes every answer `false`.
    pub fn open(pid: Pid) -> Frames {
        Frames {
            pagemap: fs::File::open(format!("/proc/{pid}/pagemap")).ok(),
            kpageflags: fs::File::open("/proc/kpageflags").ok(),
        }
    }

    /// Whether the 2 MiB page at `addr` is one 2 MiB folio: its first and last 4 KiB pages are
    /// present, physically contiguous from a 2 MiB-aligned frame, and flagged as a transparent
    /// huge page; `false` when it cannot tell.
    pub(crate) fn huge_folio_at(&mut self, addr: RuntimeAddr) -> bool {
        const PRESENT: u64 = 1 << 63;
        const PFN_MASK: u64 = (1 << 55) - 1;
        const KPF_THP: u64 = 1 << 22;
        let (Some(pagemap), Some(kpageflags)) = (self.pagemap.as_mut(), self.kpageflags.as_mut())
        else {
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
            frame(pagemap, addr.0),
            frame(pagemap, addr.0 + HUGE_PAGE - 4096),
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
            ("/usr/bin/demo", false, HUGE_PAGE)
        );
        assert_eq!((v[0].file_huge_bytes, v[1].file_huge_bytes), (HUGE_PAGE, 0));
        assert_eq!(
            (v[0].start, v[0].bytes()),
            (RuntimeAddr(0x55d0_a000_0000), 2 * HUGE_PAGE)
        );
        assert!(v[0].contains(RuntimeAddr(0x55d0_a03f_ffff)) && !v[0].contains(v[0].end));
        assert_eq!(
            (v[1].anonymous, v[1].huge_bytes, v[1].hugetlb),
            (true, HUGE_PAGE, false)
        );
        assert!(v[2].hugetlb);
        assert_eq!(v[2].flags, ["rd", "ex", "mr", "mw", "me", "hg"]);
        assert!(v[0].flags.is_empty());
    }

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

    #[test]
    fn this_process_is_mapped_and_entered() {
        let me = std::process::id() as Pid;
        let entry = entry_point(me).unwrap().unwrap();
        let exe = std::env::current_exe().unwrap();
        let vmas = smaps(me).unwrap();
        let holder = vmas.iter().find(|v| v.contains(entry)).unwrap();
        assert_eq!(holder.name, exe.to_string_lossy());
        let gone = smaps(Pid::MAX).unwrap_err().to_string();
        assert!(
            gone.contains("smaps") && gone.contains(&Pid::MAX.to_string()),
            "{gone}"
        );
    }
}
