//! hottext's own large buffers on transparent huge pages: what the runtime does for a service's
//! hot code, done for our data.
//!
//! Ordering a 1 M-function profile reads arrays of tens to hundreds of megabytes in random order
//! (edges, jumps, chains, pair tables). On 4 KiB pages nearly every such read also misses the
//! data TLB, and in a VM each of those misses walks two sets of page tables. Asking for huge
//! pages on those buffers (`MADV_HUGEPAGE`, which works in the kernel's default `madvise` mode)
//! took 15 % off `order --algorithm cdsort` on the 1 M-function benchmark, for 2 % more memory
//! in `--algorithm auto` (bench/RESULTS.md).
//!
//! [`HugeHeap`] is the system allocator, except that allocations of at least [`MIN_BYTES`] are
//! mappings of their own, aligned to 2 MiB and advised before their first touch; the `hottext`
//! command installs it as its global allocator. Why not advise what `malloc` returns: its large
//! blocks start at any page, and growing one moves it to another address by `mremap`, which
//! splits huge pages that do not line up there; measured, that left two thirds of the memory on
//! small pages and gained nothing. The advice is a hint: where huge pages are disabled or cannot
//! be had, the memory is ordinary memory.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ptr::null_mut;

/// Allocations from this size on are mappings of their own: a huge page's worth.
pub const MIN_BYTES: usize = HUGE_PAGE;

/// [`crate::binary::HUGE_PAGE`] as the allocator counts bytes.
const HUGE_PAGE: usize = crate::binary::HUGE_PAGE as usize;

/// The system allocator, with large buffers on huge pages.
pub struct HugeHeap;

/// The length of the mapping that holds `size` bytes.
fn mapped_len(size: usize) -> usize {
    size.next_multiple_of(HUGE_PAGE)
}

/// A zeroed mapping of `mapped_len(size)` bytes starting on a huge page, advised; null when the
/// system has no memory for it.
fn map(size: usize) -> *mut u8 {
    let len = mapped_len(size);
    // Map one huge page more, then unmap what lies before the first boundary and after the end.
    let Some(padded) = len.checked_add(HUGE_PAGE) else {
        return null_mut();
    };
    // SAFETY: a fresh anonymous private mapping; nothing else refers to it.
    unsafe {
        let raw = libc::mmap(
            null_mut(),
            padded,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if raw == libc::MAP_FAILED {
            return null_mut();
        }
        let raw = raw as usize;
        let start = raw.next_multiple_of(HUGE_PAGE);
        if start > raw {
            libc::munmap(raw as *mut libc::c_void, start - raw);
        }
        let tail = raw + padded - (start + len);
        if tail > 0 {
            libc::munmap((start + len) as *mut libc::c_void, tail);
        }
        // Failure (huge pages compiled out) leaves ordinary pages: harmless.
        libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
        start as *mut u8
    }
}

/// Unmaps what [`map`] returned for `size`.
///
/// # Safety
/// `ptr` came from `map(size)` and is not used again.
unsafe fn unmap(ptr: *mut u8, size: usize) {
    // SAFETY: the caller's contract.
    unsafe {
        libc::munmap(ptr as *mut libc::c_void, mapped_len(size));
    }
}

/// Moves the pages of the mapping at `ptr`, made for `size`, to a new one for `new_size` that
/// starts on a huge page: no copy, no second set of pages while it happens (as `malloc`'s own
/// `mremap` would), and the huge pages stay whole because both ends line up. Null when no
/// memory is left, with the old mapping as it was.
///
/// # Safety
/// `ptr` came from `map(size)`; on success it is gone.
unsafe fn remap(ptr: *mut u8, size: usize, new_size: usize) -> *mut u8 {
    let target = map(new_size);
    if target.is_null() {
        return target;
    }
    // SAFETY: both are mappings of ours; MREMAP_FIXED replaces the fresh one at `target`.
    let moved = unsafe {
        libc::mremap(
            ptr as *mut libc::c_void,
            mapped_len(size),
            mapped_len(new_size),
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            target as *mut libc::c_void,
        )
    };
    if moved == libc::MAP_FAILED {
        // SAFETY: distinct live mappings, each at least as long as the bytes copied.
        unsafe {
            std::ptr::copy_nonoverlapping(ptr, target, size.min(new_size));
            unmap(ptr, size);
        }
    }
    target
}

/// Whether `layout` gets a mapping of its own (an alignment past a huge page never happens in
/// hottext; such a layout goes to the system allocator).
fn is_large(layout: Layout) -> bool {
    layout.size() >= MIN_BYTES && layout.align() <= HUGE_PAGE
}

// SAFETY: large layouts get mappings that are aligned (to 2 MiB, at least the layout's
// alignment), hold the size, are zeroed and are unmapped only by `dealloc` or `realloc` with the
// same size; all others go to `System` unchanged.
unsafe impl GlobalAlloc for HugeHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_large(layout) {
            map(layout.size())
        } else {
            // SAFETY: the caller's contract, passed on.
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_large(layout) {
            map(layout.size()) // fresh anonymous memory reads as zeros
        } else {
            // SAFETY: as above.
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_large(layout) {
            // SAFETY: `alloc` mapped it for this size.
            unsafe { unmap(ptr, layout.size()) }
        } else {
            // SAFETY: as above.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract: `new_size` is valid with this alignment.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (is_large(layout), is_large(new_layout)) {
            // SAFETY: as above.
            (false, false) => unsafe { System.realloc(ptr, layout, new_size) },
            // Room left in the mapping: nothing moves.
            (true, true) if mapped_len(new_size) == mapped_len(layout.size()) => ptr,
            // SAFETY: `ptr` was mapped for the old size, and is not used again on success.
            (true, true) => unsafe { remap(ptr, layout.size(), new_size) },
            _ => {
                // SAFETY: a valid layout (checked by the caller); the copy stays inside both
                // blocks, which are distinct; the old block is freed as it was allocated.
                unsafe {
                    let new = self.alloc(new_layout);
                    if !new.is_null() {
                        std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                    new
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A large buffer from the allocator starts on a huge page and is advised: its mapping says
    /// `hg` (VM_HUGEPAGE) in /proc/self/smaps, where the kernel supports transparent huge pages.
    #[test]
    fn a_large_buffer_is_advised_and_a_small_one_works_as_ever() {
        std::fs::metadata("/sys/kernel/mm/transparent_hugepage/enabled").expect(
            "this test needs a kernel with transparent huge pages \
             (/sys/kernel/mm/transparent_hugepage/enabled)",
        );
        let layout = Layout::from_size_align(64 << 20, 8).unwrap();
        // SAFETY: a non-zero size; freed below with the same layout.
        let ptr = unsafe { HugeHeap.alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        assert_eq!(ptr as usize % HUGE_PAGE, 0);
        let flags = mapping_flags(ptr as usize + (32 << 20));
        // SAFETY: as allocated.
        unsafe { HugeHeap.dealloc(ptr, layout) };
        assert!(flags.iter().any(|f| f == "hg"), "flags: {flags:?}");

        // Grown from small to large and on, the contents stay and the mapping stays advised.
        let small = Layout::from_size_align(100, 8).unwrap();
        // SAFETY: as above.
        unsafe {
            let p = HugeHeap.alloc(small);
            assert!(!p.is_null());
            p.write_bytes(7, 100);
            let p = HugeHeap.realloc(p, small, 4 << 20);
            assert_eq!(*p.add(99), 7, "realloc keeps the contents");
            p.add((4 << 20) - 1).write(9);
            let large = Layout::from_size_align(4 << 20, 8).unwrap();
            let p = HugeHeap.realloc(p, large, 48 << 20);
            assert_eq!((*p.add(99), *p.add((4 << 20) - 1)), (7, 9));
            assert_eq!(*p.add((48 << 20) - 1), 0, "the new part reads as zeros");
            let flags = mapping_flags(p as usize + (40 << 20));
            assert!(flags.iter().any(|f| f == "hg"), "flags: {flags:?}");
            let p = HugeHeap.realloc(p, Layout::from_size_align(48 << 20, 8).unwrap(), 200);
            assert_eq!(*p.add(99), 7, "shrinking keeps the contents");
            HugeHeap.dealloc(p, Layout::from_size_align(200, 8).unwrap());
        }
    }

    /// The flags of the mapping of this process that holds `address`.
    fn mapping_flags(address: usize) -> Vec<String> {
        crate::os::mappings::smaps(std::process::id() as crate::os::proc::Pid)
            .unwrap()
            .into_iter()
            .find(|m| m.contains(crate::binary::RuntimeAddr(address as u64)))
            .unwrap_or_else(|| panic!("no mapping holds {address:#x}"))
            .flags
    }
}
