/* Internal interfaces of the hottext runtime. Non-static names carry the
 * prefix hottext__ (two underscores) so that the one public prefix stays ours
 * and nothing clashes with the program we are linked into; -fvisibility=hidden
 * keeps them out of dynamic symbol tables. */
#ifndef HOTTEXT_INTERNAL_H
#define HOTTEXT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "hottext.h"

#define HX_HUGE ((uintptr_t)2 << 20) /* the huge page size we map: 2 MiB (x86-64, arm64 with 4 KiB pages) */
#define HX_KB_PER_HUGE 2048L

/* ---- options.c: HOTTEXT_* variables and the output function ---- */
enum hx_backing_choice { HX_AUTO, HX_FILE, HX_ANON, HX_HUGETLB };
/* HOTTEXT_PERF_MAP: none, a map removed when the process exits, or one kept for a later report. */
enum hx_perf_map { HX_MAP_OFF, HX_MAP_ON, HX_MAP_KEEP };

struct hx_options {
    int enabled;           /* HOTTEXT_HUGIFY, default 1 */
    int verbose;           /* HOTTEXT_VERBOSE, default 0 */
    long max_pages;        /* HOTTEXT_MAX_PAGES, 0 = not set */
    enum hx_backing_choice backing; /* HOTTEXT_BACKING, default auto */
    enum hx_perf_map perf_map; /* HOTTEXT_PERF_MAP, default on */
};

const struct hx_options *hottext__options(void);
/* Parse a 0/1 style flag variable; warns and returns dflt on a bad value. */
int hottext__env_flag(const char *name, int dflt);
void hottext__say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));  /* only when verbose */
void hottext__warn(const char *fmt, ...) __attribute__((format(printf, 1, 2))); /* always */
const char *hottext__errname(int e); /* "ENOMEM": no strerror, which may allocate */
/* snprintf into res->detail. */
void hottext__detail(hottext_result *res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- procfs.c: /proc and /sys without stdio or malloc ---- */
struct hx_lines {          /* a line reader over a file descriptor */
    int fd;
    size_t pos, len;
    int skipping;          /* dropping the rest of an over-long line */
    char buf[4096 + 512];
};
int hottext__lines_open(struct hx_lines *r, const char *path);
char *hottext__lines_next(struct hx_lines *r); /* NUL-terminated line without '\n', NULL at end */
void hottext__lines_close(struct hx_lines *r);

struct hx_vma {
    uintptr_t start, end;
    unsigned long long offset;
    unsigned dev_major, dev_minor;
    unsigned long inode;
    char perms[5];
    char path[512];        /* "" for anonymous memory */
    int path_truncated;
};
/* The mapping that holds addr: 0, or -1 with errno (ENOENT: no mapping). */
int hottext__vma_find(uintptr_t addr, struct hx_vma *out);

struct hx_smaps {          /* kB, from the block of one mapping in /proc/self/smaps */
    long rss, anonymous, anon_huge, file_pmd, hugetlb;
};
int hottext__smaps_read(uintptr_t vma_start, struct hx_smaps *out);

long hottext__threads(void);          /* Threads: of /proc/self/status, -1 if unknown */
enum hx_thp_mode { HX_THP_UNKNOWN, HX_THP_ALWAYS, HX_THP_MADVISE, HX_THP_NEVER };
enum hx_thp_mode hottext__thp_mode(char *why, size_t whylen);
long hottext__read_long_file(const char *path); /* first integer in a small file, -1 if none */

/* ---- cpuid.c ---- */
struct hx_itlb { unsigned l1_2m, l2_2m; const char *source; };
void hottext__itlb_2m(struct hx_itlb *out); /* 0 entries where unknown */

/* ---- elf.c: the running executable's ELF file ---- */
struct hx_elf {
    const unsigned char *map;
    size_t size;
    uintptr_t bias;        /* runtime address = link-time address + bias */
};
/* Map /proc/self/exe read-only and check that it is the running program.
 * -1 with why and errno: ENOEXEC when the file is not the running program's
 * ELF file (nothing to find in it), else the errno of the call that failed. */
int hottext__elf_open_self(struct hx_elf *e, char *why, size_t whylen);
void hottext__elf_close(struct hx_elf *e);
/* Link-time value of a defined symbol, from .symtab, else .dynsym. 0 if found. */
int hottext__elf_lookup(const struct hx_elf *e, const char *name, uint64_t *value);
typedef void hx_func_cb(void *arg, uint64_t value, uint64_t size, const char *name);
/* Call cb for each defined STT_FUNC overlapping [lo, hi) (link-time), from
 * .symtab, else .dynsym. Returns the number of calls, -1 if no symbol table. */
long hottext__elf_each_func(const struct hx_elf *e, uint64_t lo, uint64_t hi, hx_func_cb *cb, void *arg);

/* Facts about the main program from the loader (no file access). */
struct hx_exe {
    uintptr_t bias;
    uintptr_t text_lo, text_hi; /* runtime bounds of its executable PT_LOAD segments */
    const void *build_id;       /* NT_GNU_BUILD_ID bytes in memory, NULL if none */
    size_t build_id_len;
};
int hottext__exe_info(struct hx_exe *out);

/* ---- ranges.c ---- */
#define HX_MAX_RANGES 32
/* A ranges file is a few lines (hottext order writes one per hot 2 MiB page);
 * anything longer is refused unread, so that a wrong path cannot stall or
 * flood a program's start. */
#define HX_RANGES_FILE_MAX (64 * 1024)
struct hx_ranges {
    size_t n;
    struct { uint64_t a, b; } r[HX_MAX_RANGES];
    int bad; /* sources refused (HOTTEXT_RANGES or the file), each with one warning */
};
/* Each adds the ranges of its source, or none when one entry is bad. */
void hottext__ranges_env(struct hx_ranges *rs, const char *value);
/* build_id: the running program's NT_GNU_BUILD_ID (NULL if none) */
void hottext__ranges_file(struct hx_ranges *rs, const char *path, const void *build_id, size_t build_id_len);
/* Sorts by start and merges ranges less than 2 MiB apart. */
void hottext__ranges_normalise(struct hx_ranges *rs);

/* ---- perfmap.c ---- */
/* Append /tmp/perf-PID.map lines for the functions in [lo, hi) (runtime); a file it created is
 * removed at exit unless `keep`. */
long hottext__perf_map_write(uintptr_t lo, uintptr_t hi, int keep, char *why, size_t whylen);

/* ---- remap.c: the three ways to put [a, b) on huge pages ---- */
/* Each returns the number of huge pages now backing [a, b) (> 0, the text was
 * swapped), or 0 with res->status/error/detail saying why: the text as it
 * was or restored, except when a failed swap could not be undone (the detail
 * says "left it unmapped", and hottext__mapped is false). */
size_t hottext__remap_file(uintptr_t a, uintptr_t b, const struct hx_vma *vma, int swap_partial,
                           hottext_result *res);
size_t hottext__remap_copy(uintptr_t a, uintptr_t b, int hugetlb, const struct hx_vma *vma,
                           hottext_result *res);
/* Whether every page of [a, a + len) is mapped, without allocating. */
int hottext__mapped(uintptr_t a, size_t len);

#endif
