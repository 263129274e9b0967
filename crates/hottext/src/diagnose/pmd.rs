//! Can this kernel map a file's text with 2 MiB pages on this filesystem? Tried for real, as the
//! runtime's file backing would: a scratch file of 4 MiB in the folder, mapped read-only and
//! executable at a 2 MiB boundary, `MADV_HUGEPAGE`, then `MADV_COLLAPSE`, then `FilePmdMapped`
//! in this process's smaps. (It needs CONFIG_READ_ONLY_THP_FOR_FS, or a filesystem with large
//! folios, and THP not `never`.)

use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::Path;

use crate::binary::RuntimeAddr;
use crate::os::mappings::{smaps, Vma};
use crate::os::proc::Pid;

/// One huge page, as the mapping calls count bytes.
const TWO_MIB: usize = crate::binary::HUGE_PAGE as usize;
/// Linux's MADV_COLLAPSE (6.1); libc names it only on newer versions.
const MADV_COLLAPSE: libc::c_int = 25;

/// `Ok(kB)` of the scratch file mapped with 2 MiB pages (0: none), or why it could not be tried.
pub fn file_pmd_mapped(dir: &Path) -> Result<u64, String> {
    let mut file = tempfile::Builder::new()
        .prefix(".hottext-doctor-")
        .tempfile_in(dir)
        .map_err(|e| format!("cannot write a scratch file in {}: {e}", dir.display()))?;
    file.write_all(&vec![0xc3u8; 2 * TWO_MIB])
        .and_then(|()| file.as_file().sync_all())
        .map_err(|e| format!("cannot write the scratch file: {e}"))?;
    // Collapsing needs a file nobody has open for writing.
    let path = file.into_temp_path();
    let reader = std::fs::File::open(&path).map_err(|e| e.to_string())?;
    // SAFETY: a fresh PROT_NONE reservation, then a fixed mapping of the file inside it; both
    // are unmapped before returning and no reference to them escapes.
    unsafe {
        let span = 3 * TWO_MIB;
        let reserved = libc::mmap(
            std::ptr::null_mut(),
            span,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if reserved == libc::MAP_FAILED {
            return Err("cannot reserve address space".into());
        }
        let aligned = (reserved as usize).next_multiple_of(TWO_MIB) as *mut libc::c_void;
        let mapped = libc::mmap(
            aligned,
            2 * TWO_MIB,
            libc::PROT_READ | libc::PROT_EXEC,
            libc::MAP_PRIVATE | libc::MAP_FIXED,
            reader.as_raw_fd(),
            0,
        );
        let result = if mapped == libc::MAP_FAILED {
            Err(format!(
                "cannot map it: {}",
                std::io::Error::last_os_error()
            ))
        } else {
            libc::madvise(mapped, 2 * TWO_MIB, libc::MADV_HUGEPAGE);
            let bytes = std::slice::from_raw_parts(mapped as *const u8, 2 * TWO_MIB);
            let touched: u64 = bytes.iter().step_by(4096).map(|&b| u64::from(b)).sum();
            std::hint::black_box(touched);
            let collapse = libc::madvise(mapped, 2 * TWO_MIB, MADV_COLLAPSE);
            let errno = std::io::Error::last_os_error();
            let kb = own_mapping(RuntimeAddr(mapped as u64)).map(|v| v.file_huge_bytes / 1024);
            match (kb, collapse) {
                (Some(kb), _) if kb > 0 => Ok(kb),
                (_, 0) => Ok(0),
                _ => Err(format!("MADV_COLLAPSE: {errno}")),
            }
        };
        libc::munmap(reserved, span);
        result
    }
}

/// This process's mapping that starts at `start`.
fn own_mapping(start: RuntimeAddr) -> Option<Vma> {
    smaps(std::process::id() as Pid)
        .ok()?
        .into_iter()
        .find(|v| v.start == start)
}
