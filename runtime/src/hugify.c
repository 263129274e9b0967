/* hottext_hugify_range() and hottext_hugify_self(): the policy.
 *
 * Checks come first and refuse without touching anything: the operator's
 * settings (HOTTEXT_HUGIFY, THP disabled for the process or the system,
 * memory-deny-write-execute), other threads, and the geometry of the range.
 * Then the ways to get huge pages are tried in order of merit:
 *   1. the program file itself on 2 MiB page-cache folios (keeps symbols,
 *      /proc/PID/maps names and page-cache sharing), then
 *   2. an anonymous copy on transparent huge pages,
 *   hugetlbfs pages only when asked (HOTTEXT_BACKING=hugetlb): the pool is
 *   reserved memory that the operator may have meant for something else.
 * The number of pages is capped at the CPU's 2 MiB iTLB entries. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

#include "internal.h"

#ifndef PR_GET_THP_DISABLE
#define PR_GET_THP_DISABLE 42
#endif
#ifndef PR_THP_DISABLE_EXCEPT_ADVISED
#define PR_THP_DISABLE_EXCEPT_ADVISED (1 << 1) /* Linux 6.18: disabled unless madvised */
#endif
#ifndef PR_GET_MDWE
#define PR_SET_MDWE 65 /* Linux 6.3 */
#define PR_GET_MDWE 66
#endif
#ifndef PR_MDWE_REFUSE_EXEC_GAIN
#define PR_MDWE_REFUSE_EXEC_GAIN (1UL << 0)
#endif

/* When the CPU does not say (VMs may hide leaf 0x18): the 2 MiB iTLB of
 * Intel cores from Ivy Bridge to Ice Lake, the smallest common value. */
#define DEFAULT_MAX_PAGES 8

/* Ranges this copy of the library has remapped, to answer "called twice". */
#define MAX_DONE 16
static struct { uintptr_t a, b; } done[MAX_DONE];
static size_t ndone, pages_done;
static hottext_result last;

static const char *const names[] = {
    [HOTTEXT_OK] = "OK",
    [HOTTEXT_DISABLED_BY_ENV] = "DISABLED_BY_ENV",
    [HOTTEXT_THP_DISABLED_PROCESS] = "THP_DISABLED_PROCESS",
    [HOTTEXT_THP_NEVER] = "THP_NEVER",
    [HOTTEXT_MDWE] = "MDWE",
    [HOTTEXT_EXEC_DENIED] = "EXEC_DENIED",
    [HOTTEXT_MULTITHREADED] = "MULTITHREADED",
    [HOTTEXT_NO_MARKERS] = "NO_MARKERS",
    [HOTTEXT_BAD_RANGE] = "BAD_RANGE",
    [HOTTEXT_RANGE_TOO_SMALL] = "RANGE_TOO_SMALL",
    [HOTTEXT_ALREADY_DONE] = "ALREADY_DONE",
    [HOTTEXT_CAPPED] = "CAPPED",
    [HOTTEXT_NO_HUGE_PAGES] = "NO_HUGE_PAGES",
    [HOTTEXT_SYSCALL_FAILED] = "SYSCALL_FAILED",
};

static const char *const sentences[] = {
    [HOTTEXT_OK] = "the hot text is on huge pages",
    [HOTTEXT_DISABLED_BY_ENV] = "disabled by HOTTEXT_HUGIFY=0",
    [HOTTEXT_THP_DISABLED_PROCESS] = "transparent huge pages are disabled for this process (prctl PR_SET_THP_DISABLE)",
    [HOTTEXT_THP_NEVER] = "transparent huge pages are disabled system-wide (never)",
    [HOTTEXT_MDWE] = "memory-deny-write-execute is on: a copy of the text may not become executable",
    [HOTTEXT_EXEC_DENIED] = "making the copy of the text executable was refused (security policy)",
    [HOTTEXT_MULTITHREADED] = "other threads are running: call before starting threads",
    [HOTTEXT_NO_MARKERS] = "no __hot_start/__hot_end markers in the program and no range given",
    [HOTTEXT_BAD_RANGE] = "the range is empty or not inside an executable mapping of the program",
    [HOTTEXT_RANGE_TOO_SMALL] = "no whole 2 MiB page fits in the range",
    [HOTTEXT_ALREADY_DONE] = "the range is already on huge pages",
    [HOTTEXT_CAPPED] = "the cap on huge pages (2 MiB iTLB entries) is used up",
    [HOTTEXT_NO_HUGE_PAGES] = "no huge page could be had",
    [HOTTEXT_SYSCALL_FAILED] = "a system call failed unexpectedly (the detail says whether the text is as it was)",
};

const char *hottext_status_name(int s)
{
    return s >= 0 && s < HOTTEXT_STATUS_COUNT_ ? names[s] : "UNKNOWN";
}

const char *hottext_status_str(int s)
{
    return s >= 0 && s < HOTTEXT_STATUS_COUNT_ ? sentences[s] : "unknown status";
}

const char *hottext_backing_name(int b)
{
    switch (b) {
    case HOTTEXT_BACKING_FILE: return "file";
    case HOTTEXT_BACKING_ANON: return "anon";
    case HOTTEXT_BACKING_HUGETLB: return "hugetlb";
    default: return "none";
    }
}

/* Copies r into the caller's res, no more than the res->size bytes the
 * caller's struct has (its own size field left as it is). */
static void copy_out(hottext_result *res, const hottext_result *r)
{
    if (!res || res->size <= sizeof res->size)
        return;
    size_t n = res->size < sizeof *r ? res->size : sizeof *r;
    memcpy((char *)res + sizeof res->size, (const char *)r + sizeof r->size, n - sizeof r->size);
}

int hottext_version(void)
{
    return HOTTEXT_VERSION;
}

void hottext_last_result(hottext_result *res)
{
    copy_out(res, &last);
}

static size_t max_pages(char *why, size_t whylen)
{
    const struct hx_options *o = hottext__options();
    if (o->max_pages > 0) {
        snprintf(why, whylen, "HOTTEXT_MAX_PAGES");
        return (size_t)o->max_pages;
    }
    struct hx_itlb t;
    hottext__itlb_2m(&t);
    if (t.l1_2m) {
        snprintf(why, whylen, "L1 iTLB 2M entries from %s (L2: %u)", t.source, t.l2_2m);
        return t.l1_2m;
    }
    snprintf(why, whylen, "default; the CPU did not report its 2M iTLB");
    return DEFAULT_MAX_PAGES;
}

/* Refuses before the range's memory is looked at: the operator said no, the
 * range is empty, other threads run, or THP is off for this process or the
 * system. Returns 1 when refused, with res saying why. */
static int refuse_early(uintptr_t start, uintptr_t end, const struct hx_options *o, hottext_result *res)
{
    char why[160] = "";
    if (!o->enabled) {
        res->status = HOTTEXT_DISABLED_BY_ENV;
        return 1;
    }
    if (!start || end <= start) {
        res->status = HOTTEXT_BAD_RANGE;
        hottext__detail(res, "empty range %#lx-%#lx", (unsigned long)start, (unsigned long)end);
        return 1;
    }
    long threads = hottext__threads();
    if (threads != 1) {
        res->status = threads > 1 ? HOTTEXT_MULTITHREADED : HOTTEXT_SYSCALL_FAILED;
        res->error = threads > 1 ? 0 : errno;
        hottext__detail(res, threads > 1 ? "%ld threads (/proc/self/status)" : "cannot read /proc/self/status", threads);
        return 1;
    }
    /* THP switches gate the THP ways; hugetlb pages are not THP, so an
     * explicit HOTTEXT_BACKING=hugetlb is still honoured. We never clear the
     * operator's setting. */
    if (o->backing != HX_HUGETLB) {
        int td = prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0);
        if (td > 0 && !(td & PR_THP_DISABLE_EXCEPT_ADVISED)) {
            res->status = HOTTEXT_THP_DISABLED_PROCESS;
            hottext__detail(res, "prctl(PR_GET_THP_DISABLE) = %d", td);
            return 1;
        }
        if (hottext__thp_mode(why, sizeof why) == HX_THP_NEVER) {
            res->status = HOTTEXT_THP_NEVER;
            hottext__detail(res, "%s", why);
            return 1;
        }
    }
    return 0;
}

/* The whole 2 MiB pages of [start, end) inside its text mapping, into [*a, *b)
 * and *vma, after the checks that need the mapping: read-execute text, not
 * remapped before, not huge already, a whole page in it, pages left under the
 * cap. Returns 1 when there is something to map; else res says why not. */
static int round_to_pages(uintptr_t start, uintptr_t end, struct hx_vma *vma, uintptr_t *pa, uintptr_t *pb,
                          hottext_result *res)
{
    char why[160] = "";
    if (hottext__vma_find(start, vma) < 0) {
        res->status = errno == ENOENT ? HOTTEXT_BAD_RANGE : HOTTEXT_SYSCALL_FAILED;
        res->error = errno == ENOENT ? 0 : errno;
        hottext__detail(res, "%#lx is in no mapping (/proc/self/maps)", (unsigned long)start);
        return 0;
    }
    if (vma->perms[2] != 'x' || vma->perms[1] == 'w') {
        res->status = HOTTEXT_BAD_RANGE;
        hottext__detail(res, "%#lx is in a %s mapping, not read-execute text", (unsigned long)start, vma->perms);
        return 0;
    }
    /* Round to whole 2 MiB pages, outward where the mapping has room (cold
     * neighbours cost nothing on the same page), inward where it has not:
     * a page reaching past the text mapping would replace whatever follows. */
    uintptr_t a = start & ~(HX_HUGE - 1), b = (end + HX_HUGE - 1) & ~(HX_HUGE - 1);
    if (a < vma->start)
        a += HX_HUGE;
    if (b > vma->end)
        b = vma->end & ~(HX_HUGE - 1);
    res->start = a;
    res->end = b;
    struct hx_smaps sm;
    for (size_t i = 0; i < ndone; i++) {
        if (a < done[i].b && done[i].a < b) {
            res->status = HOTTEXT_ALREADY_DONE;
            if (hottext__smaps_read(done[i].a, &sm) == 0)
                res->pages = (size_t)(sm.file_pmd + sm.anon_huge + sm.hugetlb) / HX_KB_PER_HUGE;
            hottext__detail(res, "%#lx-%#lx was remapped by an earlier call", (unsigned long)done[i].a, (unsigned long)done[i].b);
            return 0;
        }
    }
    if (vma->inode == 0) {
        /* Text in anonymous memory: someone (another copy of this library,
         * BOLT's hugify, iodlr) has already copied it. */
        res->status = HOTTEXT_ALREADY_DONE;
        hottext__detail(res, "the text at %#lx is already anonymous memory (%s)", (unsigned long)start,
                        vma->path[0] ? vma->path : "remapped before");
        return 0;
    }
    if (b <= a) {
        res->status = HOTTEXT_RANGE_TOO_SMALL;
        res->start = res->end = 0;
        hottext__detail(res, "range %#lx-%#lx (%lu kB) in mapping %#lx-%#lx holds no aligned 2 MiB page",
                        (unsigned long)start, (unsigned long)end, (unsigned long)(end - start) / 1024,
                        (unsigned long)vma->start, (unsigned long)vma->end);
        return 0;
    }
    /* A file mapping can be huge without us: once the page cache holds the
     * program's text as 2 MiB folios (e.g. after an earlier process took the
     * file path), the kernel maps them with PMDs at the first touch. */
    if (hottext__smaps_read(vma->start, &sm) == 0 && (sm.file_pmd >= (long)((b - a) / 1024) || sm.hugetlb > 0)) {
        res->status = HOTTEXT_ALREADY_DONE;
        res->pages = (size_t)(sm.file_pmd + sm.hugetlb) / HX_KB_PER_HUGE;
        hottext__detail(res, "the mapping is already huge: %ld kB FilePmdMapped, %ld kB hugetlb", sm.file_pmd, sm.hugetlb);
        return 0;
    }
    res->max_pages = max_pages(why, sizeof why);
    size_t want = (b - a) / HX_HUGE;
    if (pages_done >= res->max_pages) {
        res->status = HOTTEXT_CAPPED;
        hottext__detail(res, "%zu pages mapped already, cap %zu (%s)", pages_done, res->max_pages, why);
        return 0;
    }
    if (want > res->max_pages - pages_done) {
        /* The layout puts the hottest code first, so keep the start. */
        hottext__say("capping %zu pages to %zu (%s)", want, res->max_pages - pages_done, why);
        want = res->max_pages - pages_done;
        b = a + want * HX_HUGE;
        res->end = b;
    }
    *pa = a;
    *pb = b;
    return 1;
}

/* Maps [a, b) with the backings the options allow, the file first: returns
 * the pages got, 0 when none took (res says why, and the text is as it was). */
static size_t try_backends(uintptr_t a, uintptr_t b, const struct hx_vma *vma, const struct hx_options *o,
                           hottext_result *res)
{
    int mdwe = prctl(PR_GET_MDWE, 0, 0, 0, 0);
    int no_exec_gain = mdwe > 0 && (mdwe & PR_MDWE_REFUSE_EXEC_GAIN);
    size_t got = 0;
    if (o->backing == HX_AUTO || o->backing == HX_FILE) {
        /* Mapping the file read+execute is allowed under MDWE: nothing that
         * was writable becomes executable (it is what ld.so does). */
        got = hottext__remap_file(a, b, vma, o->backing == HX_FILE, res);
        if (got) {
            res->backing = HOTTEXT_BACKING_FILE;
            return got;
        }
        /* The text as it was, or restored; or, when the swap and every try to
         * undo it failed, unmapped: nothing to copy, the detail says so. */
        if (o->backing != HX_AUTO || !hottext__mapped(a, b - a))
            return 0;
        hottext__say("%s; trying an anonymous copy", res->detail);
    }
    if (no_exec_gain) {
        char prev[sizeof res->detail];
        memcpy(prev, res->detail, sizeof prev);
        res->status = HOTTEXT_MDWE;
        res->error = 0;
        hottext__detail(res, "prctl(PR_GET_MDWE) = %d: the copy could not become executable%s%.140s", mdwe,
                        prev[0] ? "; " : "", prev);
        return 0;
    }
    char file_why[sizeof res->detail];
    memcpy(file_why, res->detail, sizeof file_why); /* why the file path did not do it, if tried */
    res->error = 0;
    got = hottext__remap_copy(a, b, o->backing == HX_HUGETLB, vma, res);
    if (file_why[0]) {
        size_t n = strlen(res->detail);
        snprintf(res->detail + n, sizeof res->detail - n, "; %s", file_why);
    }
    if (got)
        res->backing = o->backing == HX_HUGETLB ? HOTTEXT_BACKING_HUGETLB : HOTTEXT_BACKING_ANON;
    return got;
}

/* Everything is decided here; hugify_range() only records and reports. */
static void hugify(uintptr_t start, uintptr_t end, hottext_result *res)
{
    const struct hx_options *o = hottext__options();
    struct hx_vma vma;
    uintptr_t a, b;
    if (refuse_early(start, end, o, res) || !round_to_pages(start, end, &vma, &a, &b, res))
        return;
    size_t got = try_backends(a, b, &vma, o, res);
    if (!got)
        return;

    /* The result states what smaps says, not what we hoped for. */
    struct hx_smaps sm;
    if (hottext__smaps_read(a, &sm) == 0) {
        long kb = res->backing == HOTTEXT_BACKING_FILE ? sm.file_pmd
                : res->backing == HOTTEXT_BACKING_ANON ? sm.anon_huge : sm.hugetlb;
        got = (size_t)kb / HX_KB_PER_HUGE;
    }
    res->status = HOTTEXT_OK;
    res->error = 0;
    res->pages = got;
    pages_done += got;
    if (ndone < MAX_DONE) {
        done[ndone].a = a;
        done[ndone].b = b;
        ndone++;
    }
    if (res->backing != HOTTEXT_BACKING_FILE && o->perf_map != HX_MAP_OFF) {
        char where[160];
        long n = hottext__perf_map_write(a, b, o->perf_map == HX_MAP_KEEP, where, sizeof where);
        if (n < 0)
            hottext__say("no perf map: %s", where);
        else
            hottext__say("%ld functions named in %s", n, where);
    }
}

int hottext_hugify_range(const void *start, const void *end, hottext_result *res)
{
    hottext_result r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    int saved_errno = errno; /* a library call at start-up should not leave errno changed */
    hugify((uintptr_t)start, (uintptr_t)end, &r);
    if (r.status != HOTTEXT_OK) {
        if (r.status != HOTTEXT_ALREADY_DONE)
            r.pages = 0;
        r.backing = HOTTEXT_BACKING_NONE;
    }
    if (r.status == HOTTEXT_DISABLED_BY_ENV) {
        /* silent: the operator asked for nothing */
    } else if (r.status == HOTTEXT_OK) {
        hottext__say("%#lx-%#lx: %zu huge page(s), %s backing, cap %zu; %s", (unsigned long)r.start, (unsigned long)r.end,
                     r.pages, hottext_backing_name(r.backing), r.max_pages, r.detail);
    } else {
        hottext__say("%s: %s%s%s", hottext_status_name(r.status), hottext_status_str(r.status), r.detail[0] ? "; " : "",
                     r.detail);
    }
    last = r;
    copy_out(res, &r);
    errno = saved_errno;
    return r.status;
}

/* The markers, as linked-in weak references: these resolve when this code is
 * linked into the program (libhottext.a) or the program exports them. A weak
 * undefined reference is NULL when absent, so programs without markers link. */
extern char __hot_start[] __attribute__((weak));
extern char __hot_end[] __attribute__((weak));

/* 0 with the markers; -1 with why and errno: ENOEXEC when the program has
 * none, else the errno of the call that kept us from looking. */
static int markers(uintptr_t *s, uintptr_t *e, char *why, size_t whylen)
{
    struct hx_exe exe;
    int have_exe = hottext__exe_info(&exe) == 0;
    /* Only the main program's markers: a shared library laid out by hottext
     * could export its own, and those are not ours to move. */
    if (__hot_start && __hot_end && have_exe && (uintptr_t)__hot_start >= exe.text_lo &&
        (uintptr_t)__hot_start < exe.text_hi) {
        *s = (uintptr_t)__hot_start;
        *e = (uintptr_t)__hot_end;
        return 0;
    }
    struct hx_elf elf;
    if (hottext__elf_open_self(&elf, why, whylen) < 0)
        return -1;
    uint64_t vs, ve;
    int found = hottext__elf_lookup(&elf, "__hot_start", &vs) == 0 && hottext__elf_lookup(&elf, "__hot_end", &ve) == 0;
    if (found) {
        *s = (uintptr_t)vs + elf.bias;
        *e = (uintptr_t)ve + elf.bias;
    } else {
        snprintf(why, whylen, "neither linked-in nor in the symbol tables of /proc/self/exe");
    }
    hottext__elf_close(&elf);
    errno = ENOEXEC;
    return found ? 0 : -1;
}

int hottext_hugify_self(void)
{
    uintptr_t s, e;
    char why[160] = "";
    int saved_errno = errno;
    if (!hottext__options()->enabled) {
        memset(&last, 0, sizeof last);
        last.status = HOTTEXT_DISABLED_BY_ENV;
        return last.status;
    }
    if (markers(&s, &e, why, sizeof why) < 0) {
        /* A failed open or mmap is not "no markers": the program may have
         * them, and the preload library would go on to its fallbacks. */
        int err = errno;
        memset(&last, 0, sizeof last);
        last.status = err == ENOEXEC ? HOTTEXT_NO_MARKERS : HOTTEXT_SYSCALL_FAILED;
        last.error = err == ENOEXEC ? 0 : err;
        hottext__detail(&last, "__hot_start/__hot_end: %s%s", why,
                        err == ENOEXEC ? "" : "; the markers could not be looked for, the text is as it was");
        hottext__say("%s: %s", hottext_status_name(last.status), last.detail);
        errno = saved_errno;
        return last.status;
    }
    hottext_result r;
    return hottext_hugify_range((const void *)s, (const void *)e, &r);
}
