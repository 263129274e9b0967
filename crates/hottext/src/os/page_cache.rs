//! A file's pages in the page cache, dropped so that two binaries compared start alike.
//!
//! How a file came into the page cache shapes how a process maps it: a file written in large
//! chunks sits in large folios, which one fault maps whole (Linux 6.18 maps a 2 MiB folio with
//! one 2 MiB entry where the mapping is aligned to it), while a file written a page at a time
//! sits in small ones that fault in 64 KiB at a time. BOLT writes its output the first way, GNU
//! ld the second. Measured on the demo (bench/blocks, 2026-11-27): BOLT's freshly written binary
//! faulted 169 times in 20 000 requests against 1 085 for hottext's layout, and ran 1.42× the
//! default build's requests/s against 1.15×; both dropped from the page cache and read back
//! through readahead, BOLT's faulted 1 210 times and ran level with hottext's. An A/B of two
//! binaries drops both first, so that it compares their code and not how they were written.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

/// Drops `path`'s pages from the page cache (after writing any dirty ones, which the kernel
/// would keep).
pub fn evict(path: &Path) -> io::Result<()> {
    let file = File::open(path)?;
    file.sync_data()?;
    // SAFETY: the descriptor is open for the call; the advice only drops cached pages.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    match rc {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// How many of `path`'s pages are in the page cache, and how many it has: what the tests of
/// [`evict`] and its callers check.
#[cfg(test)]
pub(crate) fn resident(path: &Path) -> io::Result<(usize, usize)> {
    let file = File::open(path)?;
    let len = file.metadata()?.len() as usize;
    if len == 0 {
        return Ok((0, 0));
    }
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    let pages = len.div_ceil(page);
    // SAFETY: a private read-only mapping of an open file, unmapped below; mincore only reads it.
    unsafe {
        let at = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            file.as_raw_fd(),
            0,
        );
        if at == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut flags = vec![0u8; pages];
        let rc = libc::mincore(at, len, flags.as_mut_ptr());
        let error = io::Error::last_os_error();
        libc::munmap(at, len);
        if rc != 0 {
            return Err(error);
        }
        Ok((flags.iter().filter(|&&f| f & 1 != 0).count(), pages))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_evicted_file_has_no_page_in_the_cache_until_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("binary");
        std::fs::write(&path, vec![7u8; 1 << 20]).unwrap();
        std::fs::read(&path).unwrap();
        let (before, pages) = resident(&path).unwrap();
        assert_eq!(pages, (1 << 20) / 4096);
        assert!(before > 0, "a file just written and read is cached");
        evict(&path).unwrap();
        assert_eq!(resident(&path).unwrap().0, 0);
        std::fs::read(&path).unwrap();
        assert!(resident(&path).unwrap().0 > 0);
    }
}
