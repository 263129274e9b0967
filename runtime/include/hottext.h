/* hottext.h - map the hot text of a running program onto 2 MiB pages.
 *
 * The hottext build lays out the hot functions of a program contiguously
 * between the symbols __hot_start and __hot_end (start aligned to 2 MiB).
 * This library, called once early at start-up, maps that range onto 2 MiB
 * pages so that it costs a handful of instruction-TLB entries instead of
 * hundreds ("Hot-text and huge pages", Facebook; hfsort paper, section 6).
 *
 * The two-line use, as the paper promises:
 *
 *     #include <hottext.h>
 *     int main(void) { hugify_self(); ... }
 *
 * No code change at all: link with -lhottext_auto (constructor), or run a
 * binary under LD_PRELOAD=libhottext_preload.so. See runtime/README.md.
 *
 * Every function here is safe to call in any program: it never aborts, never
 * exits, never calls malloc, and leaves the text as it was when it cannot
 * improve it. What it did, and why, is in the returned status and, with
 * HOTTEXT_VERBOSE=1, on stderr (or your output function).
 */
#ifndef HOTTEXT_H
#define HOTTEXT_H

#include <stddef.h>
#include <stdint.h>

#define HOTTEXT_VERSION_MAJOR 0
#define HOTTEXT_VERSION_MINOR 2
#define HOTTEXT_VERSION_PATCH 0
/* One number to compare: major * 10000 + minor * 100 + patch. */
#define HOTTEXT_VERSION (HOTTEXT_VERSION_MAJOR * 10000 + HOTTEXT_VERSION_MINOR * 100 + HOTTEXT_VERSION_PATCH)

#if defined(__GNUC__)
#define HOTTEXT_API __attribute__((visibility("default")))
#else
#define HOTTEXT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* What a call did. Every value but HOTTEXT_OK means "the text is as it was". */
typedef enum hottext_status {
    HOTTEXT_OK = 0,               /* pages of the range are now huge (see .pages) */
    HOTTEXT_DISABLED_BY_ENV,      /* HOTTEXT_HUGIFY=0 */
    HOTTEXT_THP_DISABLED_PROCESS, /* prctl(PR_SET_THP_DISABLE) is set for this process */
    HOTTEXT_THP_NEVER,            /* transparent huge pages are "never" system-wide */
    HOTTEXT_MDWE,                 /* memory-deny-write-execute forbids making the copy executable */
    HOTTEXT_EXEC_DENIED,          /* mprotect(PROT_EXEC) refused by a policy: EACCES/EPERM (e.g. SELinux execmem) */
    HOTTEXT_MULTITHREADED,        /* other threads exist; remapping text under them is refused */
    HOTTEXT_NO_MARKERS,           /* __hot_start/__hot_end not found (and no range given) */
    HOTTEXT_BAD_RANGE,            /* range empty or not inside an executable mapping of the program */
    HOTTEXT_RANGE_TOO_SMALL,      /* no whole 2 MiB page fits in the range and its mapping */
    HOTTEXT_ALREADY_DONE,         /* the range is already on huge pages (e.g. called twice) */
    HOTTEXT_CAPPED,               /* the cap on huge pages (iTLB entries) is used up by earlier ranges */
    HOTTEXT_NO_HUGE_PAGES,        /* could not get any huge page (fragmentation, empty hugetlb pool) */
    HOTTEXT_SYSCALL_FAILED,       /* an unexpected system call failure (ENOMEM...); see .error and .detail */
    HOTTEXT_STATUS_COUNT_         /* not a status: the number of statuses */
} hottext_status;

/* What backs the range after the call. */
typedef enum hottext_backing {
    HOTTEXT_BACKING_NONE = 0,     /* unchanged: the original 4 KiB file mapping */
    HOTTEXT_BACKING_FILE,         /* the program file itself, PMD-mapped 2 MiB page-cache folios */
    HOTTEXT_BACKING_ANON,         /* anonymous transparent huge pages holding a copy */
    HOTTEXT_BACKING_HUGETLB       /* hugetlbfs pages (MAP_HUGETLB) holding a copy */
} hottext_backing;

/* Fields are only ever added at the end. A caller sets .size to the size it
 * was compiled with (HOTTEXT_RESULT_INIT does), and the library fills in no
 * more than that: a program built against a shorter, older struct keeps
 * working with a newer library, and the library never writes past it. A
 * .size of 0 (a caller that did not set it) gets nothing written. */
typedef struct hottext_result {
    size_t size;             /* set by the caller: sizeof(hottext_result) */
    hottext_status status;
    int error;               /* errno of the system call that failed, 0 if none */
    hottext_backing backing;
    uintptr_t start, end;    /* the 2 MiB-aligned range acted on; 0, 0 if none */
    size_t pages;            /* 2 MiB pages huge in [start, end) as /proc/self/smaps reports (OK, ALREADY_DONE) */
    size_t max_pages;        /* the cap on huge pages that applied (CPUID iTLB or HOTTEXT_MAX_PAGES) */
    char detail[200];        /* what happened and why, for a person */
} hottext_result;

/* A result ready to pass: hottext_result r = HOTTEXT_RESULT_INIT; */
#ifdef __cplusplus
#define HOTTEXT_RESULT_INIT { sizeof(hottext_result), HOTTEXT_OK, 0, HOTTEXT_BACKING_NONE, 0, 0, 0, 0, {0} }
#else
#define HOTTEXT_RESULT_INIT { .size = sizeof(hottext_result) }
#endif

/* The HOTTEXT_VERSION of the library this program runs with, to compare with
 * the HOTTEXT_VERSION of the header it was compiled against. */
HOTTEXT_API int hottext_version(void);

/* Map [__hot_start, __hot_end) of the main executable onto huge pages.
 * Returns a hottext_status. The markers are taken from the program's symbols
 * (linked-in references, else the symbol tables of /proc/self/exe). */
HOTTEXT_API int hottext_hugify_self(void);

/* Map [start, end) (runtime addresses, inside one executable mapping; rounded
 * to 2 MiB pages within that mapping) onto huge pages. res may be NULL; else
 * set res->size first (HOTTEXT_RESULT_INIT). Returns the status. */
HOTTEXT_API int hottext_hugify_range(const void *start, const void *end, hottext_result *res);

/* Copy of the result of the last call in this process, whoever made it (the
 * -lhottext_auto constructor, the preload library, or the program), into the
 * res->size bytes of res (HOTTEXT_RESULT_INIT). */
HOTTEXT_API void hottext_last_result(hottext_result *res);

/* A sentence for a person, e.g. "transparent huge pages are disabled
 * system-wide (never)". Never NULL. */
HOTTEXT_API const char *hottext_status_str(int status);

/* The enum's name without its prefix, e.g. "THP_NEVER". Never NULL. */
HOTTEXT_API const char *hottext_status_name(int status);

/* "none", "file", "anon" or "hugetlb". Never NULL. */
HOTTEXT_API const char *hottext_backing_name(int backing);

/* Where messages go (verbose reports and warnings about bad HOTTEXT_*
 * variables). The default writes "hottext: <msg>\n" to stderr. A NULL fn
 * restores the default. msg has no trailing newline. */
typedef void hottext_output_fn(const char *msg, void *arg);
HOTTEXT_API void hottext_set_output(hottext_output_fn *fn, void *arg);

#ifdef __cplusplus
}
#endif

/* The paper's two-line API: hugify_self() is hottext_hugify_self(). It is a
 * static inline function, not an exported symbol, so the library itself keeps
 * the one hottext_ prefix; define HOTTEXT_NO_SHORT_NAMES to leave it out. */
#ifndef HOTTEXT_NO_SHORT_NAMES
static inline int hugify_self(void) { return hottext_hugify_self(); }
#endif

#endif /* HOTTEXT_H */
