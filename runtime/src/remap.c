/* The mechanisms: put [a, b) of the text on 2 MiB pages without ever
 * leaving it unmapped.
 *
 * Each way prepares a complete replacement somewhere else and then swaps it
 * in with one mremap(MREMAP_MAYMOVE | MREMAP_FIXED) onto a. The kernel does
 * that under the mmap lock: other code sees the old text or the new, never a
 * hole. That also means the code doing the swap (this library, libc's
 * mremap wrapper) may itself lie in the range: it returns into the same bytes
 * at the same address. (Node's and early BOLT's munmap-then-copy-back could
 * not allow that, hence their special sections for the remapping code.)
 *
 *  file:  map the program file again at a 2 MiB-aligned spare address with
 *         MADV_HUGEPAGE and fault it in. If the page cache hands out 2 MiB
 *         folios, they are mapped with PMDs (smaps FilePmdMapped). The text
 *         stays a file mapping: named after the file, shared page cache,
 *         symbols for every tool. Needs file offset = address mod 2 MiB.
 *  copy:  copy the text into 2 MiB-aligned anonymous memory (transparent huge
 *         pages made real by MADV_COLLAPSE, or hugetlbfs pages), mprotect it
 *         read+execute (never writable and executable at once), swap.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1 */
#endif
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif
#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << 26) /* log2(2 MiB) << MAP_HUGE_SHIFT */
#endif

/* len bytes of address space at a 2 MiB boundary: over-allocate by 2 MiB and
 * give back the ends. */
static void *map_aligned(size_t len, int prot)
{
    char *raw = mmap(NULL, len + HX_HUGE, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    char *p = (char *)(((uintptr_t)raw + HX_HUGE - 1) & ~(HX_HUGE - 1));
    if (p > raw)
        munmap(raw, (size_t)(p - raw));
    if (raw + len + HX_HUGE > p + len)
        munmap(p + len, (size_t)(raw + len + HX_HUGE - (p + len)));
    return p;
}

/* Whether every page of [a, a + len) is mapped: mincore fails with ENOMEM
 * on a hole. No file to open and no memory to allocate (a 2 MiB chunk at a
 * time, its page vector on the stack), so it still answers when the process
 * is out of memory or descriptors, which is when a swap fails. */
int hottext__mapped(uintptr_t a, size_t len)
{
    unsigned char pages[HX_HUGE / 4096];
    for (size_t off = 0; off < len; off += HX_HUGE) {
        size_t n = len - off < HX_HUGE ? len - off : HX_HUGE;
        if (mincore((void *)(a + off), n, pages) < 0 && errno == ENOMEM)
            return 0;
    }
    return 1;
}

/* Put the text back at a after a failed swap left a hole there: tmp still
 * holds the same bytes (a copy of the text, or the program file mapped
 * again), so move it in once more (1: the swap is done after all), else copy
 * tmp's bytes into fresh memory at a and make it read+execute (these are the
 * bytes the program ran, private changes such as relocated text included),
 * else map the file back from fd, opened before the attempt (0: the text is
 * back). Only when all three fail (-1) is the text gone. */
static int restore(void *tmp, uintptr_t a, size_t len, int fd, const struct hx_vma *vma)
{
    if (mremap(tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)a) == (void *)a)
        return 1;
    void *p = mmap((void *)a, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == (void *)a) {
        memcpy(p, tmp, len);
        if (mprotect(p, len, PROT_READ | PROT_EXEC) == 0)
            return 0;
        munmap(p, len);
    } else if (p != MAP_FAILED) {
        munmap(p, len); /* a kernel before 4.17 took NOREPLACE as a hint */
    }
    if (fd >= 0 && mmap((void *)a, len, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED, fd,
                        (off_t)(vma->offset + (a - vma->start))) != MAP_FAILED)
        return 0;
    return -1;
}

/* Rounds of restore() before giving up, with pauses of 1, 2, 4 ... 128 ms
 * between them (1.3 s in all): a fault that lasts a few calls or a moment
 * (the kernel short of memory until reclaim catches up) must not leave the
 * text unmapped, which would crash the program at its next hot call. */
#define RESTORE_TRIES 16
#define RESTORE_PAUSE_MAX_SHIFT 7

/* Swap the prepared copy at tmp onto a. mremap(MREMAP_FIXED) unmaps the
 * destination before it moves the source, so a failure late in the move (out
 * of kernel memory) could leave a hole where the text was: see restore. The
 * prepared copy is the only other copy of the text's bytes, so it is freed
 * only once the text is known to be back; if it never comes back, the copy
 * stays mapped (and the caller must not read the range: hottext__mapped). */
static int swap_in(void *tmp, uintptr_t a, size_t len, int fd, const struct hx_vma *vma, hottext_result *res)
{
    void *p = mremap(tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)a);
    if (p == (void *)a)
        return 0;
    int err = errno;
    int restored = hottext__mapped(a, len) ? 2 : -1;
    for (int i = 0; restored < 0 && i < RESTORE_TRIES; i++) {
        if (i > 0) {
            int shift = i - 1 < RESTORE_PAUSE_MAX_SHIFT ? i - 1 : RESTORE_PAUSE_MAX_SHIFT;
            struct timespec pause = {0, 1000000L << shift};
            nanosleep(&pause, NULL);
        }
        restored = restore(tmp, a, len, fd, vma);
    }
    if (restored == 1)
        return 0; /* a later move put the prepared copy in place: swapped */
    res->error = err;
    res->status = HOTTEXT_SYSCALL_FAILED;
    if (restored == 2) {
        hottext__detail(res, "mremap onto the text failed (%s); text unchanged", hottext__errname(err));
    } else if (restored == 0) {
        hottext__detail(res, "mremap onto the text failed (%s) and unmapped it; restored from the prepared copy's bytes or the program file",
                        hottext__errname(err));
    } else {
        hottext__detail(res, "mremap onto the text failed (%s) and left it unmapped; %d tries to restore it failed (the prepared copy stays at %p)",
                        hottext__errname(err), RESTORE_TRIES, tmp);
        return -1;
    }
    munmap(tmp, len);
    return -1;
}

/* Fault in every page of a mapping (MADV_POPULATE_READ, else by touching). */
static void populate(const char *p, size_t len)
{
    if (madvise((void *)p, len, MADV_POPULATE_READ) == 0)
        return;
    for (size_t off = 0; off < len; off += 4096)
        (void)*(volatile const char *)(p + off);
}

static int same_file(int fd, const struct hx_vma *vma)
{
    struct stat st;
    return fstat(fd, &st) == 0 && st.st_ino == vma->inode && major(st.st_dev) == vma->dev_major &&
           minor(st.st_dev) == vma->dev_minor;
}

/* The file behind vma: /proc/self/exe when it is the program (works even if
 * the file was replaced on disk), else the path in the maps line. */
static int open_vma_file(const struct hx_vma *vma)
{
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && same_file(fd, vma))
        return fd;
    if (fd >= 0)
        close(fd);
    if (vma->path[0] != '/' || vma->path_truncated)
        return -1;
    fd = open(vma->path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && same_file(fd, vma))
        return fd;
    if (fd >= 0)
        close(fd);
    return -1;
}

/* Map the file range at a spare aligned address, fault it in, and report how
 * many kB the kernel mapped with PMDs. *tmp_out is the mapping (caller owns). */
static long file_try(int fd, unsigned long long off, size_t len, void **tmp_out)
{
    *tmp_out = NULL;
    char *tmp = map_aligned(len, PROT_NONE);
    if (!tmp)
        return -1;
    if (mmap(tmp, len, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED, fd, (off_t)off) == MAP_FAILED ||
        madvise(tmp, len, MADV_HUGEPAGE) < 0) {
        int e = errno;
        munmap(tmp, len);
        errno = e;
        return -1;
    }
    *tmp_out = tmp;
    populate(tmp, len);
    struct hx_smaps s;
    return hottext__smaps_read((uintptr_t)tmp, &s) == 0 ? s.file_pmd : -1;
}

size_t hottext__remap_file(uintptr_t a, uintptr_t b, const struct hx_vma *vma, int swap_partial,
                           hottext_result *res)
{
    size_t len = b - a;
    long want_kb = (long)(len / 1024);
    unsigned long long off = vma->offset + (a - vma->start);
    res->status = HOTTEXT_NO_HUGE_PAGES;
    if (vma->inode == 0) {
        hottext__detail(res, "file path: the text is not a file mapping");
        return 0;
    }
    if (off % HX_HUGE) {
        hottext__detail(res, "file path: file offset 0x%llx of the range is not 2 MiB-aligned (give the hot output section ALIGN(0x200000), or link with -z max-page-size=0x200000)", off);
        return 0;
    }
    struct hx_smaps s;
    if (hottext__smaps_read(vma->start, &s) == 0 && s.anonymous > 0) {
        /* Private copies (breakpoints, text relocations) would be lost. */
        hottext__detail(res, "file path: the text mapping has %ld kB of private copied pages", s.anonymous);
        return 0;
    }
    int fd = open_vma_file(vma);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || (unsigned long long)st.st_size < off + len) {
        res->error = fd < 0 ? errno : 0;
        hottext__detail(res, "file path: %s", fd < 0 ? "cannot open the program file" : "the range reaches past the end of the file");
        if (fd >= 0)
            close(fd);
        return 0;
    }

    void *tmp;
    long kb = file_try(fd, off, len, &tmp);
    int evicted = 0;
    if (kb >= 0 && kb < want_kb) {
        /* The page cache holds these pages as small folios (read before
         * anyone asked for huge ones, or just written by the linker). Drop
         * them so the next read-in brings 2 MiB folios: first our own
         * mappings of them (MADV_DONTNEED only drops page-table entries of
         * this clean private file mapping; the text refaults from the file),
         * then write back any dirty pages and evict. Pages that other
         * processes map stay; then we fall short and fall back. */
        munmap(tmp, len);
        tmp = NULL;
        sync_file_range(fd, (off_t)off, (off_t)len,
                        SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
        madvise((void *)a, len, MADV_DONTNEED);
        posix_fadvise(fd, (off_t)off, (off_t)len, POSIX_FADV_DONTNEED);
        evicted = 1;
        kb = file_try(fd, off, len, &tmp);
    }
    int err = errno;
    if (kb < 0) {
        close(fd);
        res->error = err;
        res->status = HOTTEXT_SYSCALL_FAILED;
        hottext__detail(res, "file path: mapping the program file again failed (%s)", hottext__errname(err));
        if (tmp)
            munmap(tmp, len);
        return 0;
    }
    if (kb < want_kb && !(swap_partial && kb > 0)) {
        hottext__detail(res, "file path: the page cache gave %ld of %ld kB as 2 MiB folios%s", kb, want_kb,
                        evicted ? " even after evicting the range (other processes map it, or the file system has no large folios)" : "");
        munmap(tmp, len);
        close(fd);
        return 0;
    }
    if (swap_in(tmp, a, len, fd, vma, res) < 0) {
        close(fd);
        return 0;
    }
    close(fd);
    hottext__detail(res, "file path: %ld kB PMD-mapped from the page cache%s", kb, evicted ? " after evicting small folios" : "");
    return (size_t)(kb / HX_KB_PER_HUGE);
}

size_t hottext__remap_copy(uintptr_t a, uintptr_t b, int hugetlb, const struct hx_vma *vma, hottext_result *res)
{
    size_t len = b - a, pages = len / HX_HUGE, huge = 0;
    char *tmp;
    if (!hottext__mapped(a, len)) {
        /* A swap before this one left a hole that nothing could fill: there is
         * nothing to copy, and reading it would be a SIGSEGV. */
        res->status = HOTTEXT_SYSCALL_FAILED;
        hottext__detail(res, "%s: the text at %#lx is not mapped; nothing copied", hugetlb ? "hugetlb" : "anon",
                        (unsigned long)a);
        return 0;
    }
    res->status = HOTTEXT_NO_HUGE_PAGES;
    if (hugetlb) {
        /* Private hugetlb mappings reserve their pages at mmap time, so an
         * empty pool fails here (ENOMEM), not with SIGBUS during the copy. */
        tmp = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_HUGE_2MB, -1, 0);
        if (tmp == MAP_FAILED) {
            res->error = errno;
            hottext__detail(res, "hugetlb: mmap(MAP_HUGETLB) of %zu pages failed (%s; free pages in the pool: %ld)",
                            pages, hottext__errname(errno), hottext__read_long_file("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"));
            return 0;
        }
        memcpy(tmp, (const void *)a, len);
        huge = pages;
    } else {
        tmp = map_aligned(len, PROT_READ | PROT_WRITE);
        if (!tmp) {
            res->error = errno;
            hottext__detail(res, "anon: mmap of %zu bytes failed (%s)", len, hottext__errname(errno));
            return 0;
        }
        /* Advise before the first touch, so the copy's page faults already
         * allocate 2 MiB pages; MADV_COLLAPSE then makes sure of each one
         * (it allocates with direct compaction, whatever the defrag setting). */
        if (madvise(tmp, len, MADV_HUGEPAGE) < 0) {
            res->error = errno;
            hottext__detail(res, "anon: madvise(MADV_HUGEPAGE) failed (%s): no THP in this kernel?", hottext__errname(errno));
            munmap(tmp, len);
            return 0;
        }
        memcpy(tmp, (const void *)a, len);
        int collapse_missing = 0, last_err = 0;
        for (size_t i = 0; i < pages; i++) {
            if (madvise(tmp + i * HX_HUGE, HX_HUGE, MADV_COLLAPSE) == 0)
                huge++;
            else if (errno == EINVAL)
                collapse_missing = 1; /* kernel older than 6.1 */
            else
                last_err = errno;
        }
        if (collapse_missing) {
            struct hx_smaps s;
            huge = hottext__smaps_read((uintptr_t)tmp, &s) == 0 ? (size_t)(s.anon_huge / HX_KB_PER_HUGE) : 0;
        }
        if (huge == 0) {
            res->error = last_err;
            hottext__detail(res, "anon: no 2 MiB page could be had for the copy (%s)", last_err ? hottext__errname(last_err) : "fault-time THP allocation failed");
            munmap(tmp, len);
            return 0;
        }
        /* With some but not all pages huge we still swap: each huge page is
         * a gain, and khugepaged may collapse the rest later (VM_HUGEPAGE). */
    }
    if (mprotect(tmp, len, PROT_READ | PROT_EXEC) < 0) {
        /* EACCES/EPERM: a policy refuses executable copies (SELinux execmem,
         * MDWE). Anything else, ENOMEM above all (no memory to split the
         * mapping), says nothing about policy. */
        int denied = errno == EACCES || errno == EPERM;
        res->error = errno;
        res->status = denied ? HOTTEXT_EXEC_DENIED : HOTTEXT_SYSCALL_FAILED;
        hottext__detail(res, "%s: mprotect(PROT_READ|PROT_EXEC) of the copy %s (%s); the text is as it was",
                        hugetlb ? "hugetlb" : "anon", denied ? "was refused" : "failed", hottext__errname(errno));
        munmap(tmp, len);
        return 0;
    }
    int fd = open_vma_file(vma); /* only to restore the text should the swap fail */
    int swapped = swap_in(tmp, a, len, fd, vma, res) == 0;
    if (fd >= 0)
        close(fd);
    if (!swapped)
        return 0;
    hottext__detail(res, "%s: copied %zu kB, %zu of %zu pages huge", hugetlb ? "hugetlb" : "anon", len / 1024, huge, pages);
    return huge;
}
