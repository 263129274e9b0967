/* The real program the runtime tests run.
 *
 * Its hot range is several MiB of generated functions (gen_hot.sh). It
 * computes a checksum by calling every function and hashing every byte of the
 * range, lets hottext act (or not: mode "none"), computes it again and prints
 * both on stdout, so stdout must be identical with and without hottext. On
 * stderr it prints the library's result and what /proc/self/smaps says about
 * the range:
 *   result status=OK backing=file pages=3 detail=...
 *   smaps huge_kb=6144 anon_huge_kb=0 file_pmd_kb=6144 hugetlb_kb=0
 *
 * Build flags: -DHOTPROG_API   the program calls the API itself (by mode)
 *              -DHOTPROG_LINKED hottext is linked in, main does not call it
 *              (neither)        hottext may come from LD_PRELOAD (dlsym)
 * Modes: none self twice thread thpoff mdwe output perf SECONDS
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "hottext.h"

typedef uint64_t hot_fn(uint64_t);
extern hot_fn *const hot_table[];
extern const uint64_t hot_count;
extern uint64_t hot_kernel(uint64_t iterations, uint64_t seed);
extern char __hot_start[] __attribute__((weak));
extern char __hot_end[] __attribute__((weak));

static uintptr_t lo, hi; /* the range we hash and inspect */

static void find_range(void)
{
    if (__hot_start && __hot_end) {
        lo = (uintptr_t)__hot_start;
        hi = (uintptr_t)__hot_end;
        return;
    }
    lo = UINTPTR_MAX;
    for (uint64_t i = 0; i < hot_count; i++) {
        uintptr_t p = (uintptr_t)hot_table[i];
        lo = p < lo ? p : lo;
        hi = p > hi ? p : hi;
    }
}

static uint64_t checksum(void)
{
    uint64_t acc = 1469598103934665603ull;
    for (uint64_t i = 0; i < hot_count; i++)
        acc = acc * 31 + hot_table[i](i ^ 0x5bd1e995);
    for (const unsigned char *p = (const unsigned char *)lo; p < (const unsigned char *)hi; p++)
        acc = (acc ^ *p) * 1099511628211ull;
    return acc ^ hot_kernel(1000, 7);
}

static void report_smaps(void)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[1024];
    long anon = 0, pmd = 0, htlb = 0, v;
    int in = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long s, e;
        char c;
        if (sscanf(line, "%lx-%lx %c", &s, &e, &c) == 3 && strchr(line, '-') < strchr(line, ' '))
            in = s < hi && lo < e;
        else if (in && sscanf(line, "AnonHugePages: %ld", &v) == 1)
            anon += v;
        else if (in && sscanf(line, "FilePmdMapped: %ld", &v) == 1)
            pmd += v;
        else if (in && (sscanf(line, "Private_Hugetlb: %ld", &v) == 1 || sscanf(line, "Shared_Hugetlb: %ld", &v) == 1))
            htlb += v;
    }
    if (f)
        fclose(f);
    fprintf(stderr, "smaps huge_kb=%ld anon_huge_kb=%ld file_pmd_kb=%ld hugetlb_kb=%ld\n", anon + pmd + htlb, anon, pmd, htlb);
}

#ifdef HOTPROG_API
/* Count allocations during the call: the library promises none. glibc lets a
 * program replace malloc; these forward to glibc's own. */
extern void *__libc_malloc(size_t), *__libc_calloc(size_t, size_t), *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
static volatile long mallocs;
void *malloc(size_t n) { mallocs++; return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { mallocs++; return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { mallocs++; return __libc_realloc(p, n); }
void free(void *p) { __libc_free(p); }

static void print_result(const char *tag, const hottext_result *r)
{
    fprintf(stderr, "%s status=%s backing=%s pages=%zu max_pages=%zu error=%d mallocs=%ld pid=%d detail=%s\n", tag,
            hottext_status_name(r->status), hottext_backing_name(r->backing), r->pages, r->max_pages, r->error,
            mallocs, (int)getpid(), r->detail);
}

/* The result's size field: a caller's shorter struct (an older header) gets
 * no byte written past its end, a size of 0 gets nothing; the library is the
 * version of the header. */
static void check_abi(const hottext_result *full)
{
    unsigned char buf[sizeof(hottext_result) + 16];
    hottext_result *older = (hottext_result *)buf;
    size_t cut = offsetof(hottext_result, detail);
    memset(buf, 0xAA, sizeof buf);
    older->size = cut;
    hottext_last_result(older);
    int intact = older->status == full->status && older->pages == full->pages;
    for (size_t i = cut; i < sizeof buf; i++)
        intact &= buf[i] == 0xAA;
    memset(buf, 0xAA, sizeof buf);
    older->size = 0;
    hottext_last_result(older);
    int untouched = 1;
    for (size_t i = sizeof older->size; i < sizeof buf; i++)
        untouched &= buf[i] == 0xAA;
    fprintf(stderr, "abi version=%s short=%s zero=%s\n", hottext_version() == HOTTEXT_VERSION ? "ok" : "differs",
            intact ? "intact" : "overwritten", untouched ? "untouched" : "overwritten");
}

static void custom_output(const char *msg, void *arg)
{
    fprintf(stderr, "%s%s\n", (const char *)arg, msg);
}

static void *idle_thread(void *arg)
{
    (void)arg;
    pause();
    return NULL;
}
#endif

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "none";
    find_range();
    uint64_t before = checksum();
    printf("checksum %016llx\n", (unsigned long long)before);
    fflush(stdout);

#ifdef HOTPROG_API
    hottext_result r = HOTTEXT_RESULT_INIT;
    if (!strcmp(mode, "thread")) {
        pthread_t t;
        pthread_create(&t, NULL, idle_thread, NULL);
    } else if (!strcmp(mode, "thpoff")) {
        prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
    } else if (!strcmp(mode, "output")) {
        hottext_set_output(custom_output, "custom output: ");
    } else if (!strcmp(mode, "mdwe")) {
        if (prctl(65 /* PR_SET_MDWE */, 1 /* PR_MDWE_REFUSE_EXEC_GAIN */, 0, 0, 0) != 0)
            perror("prctl(PR_SET_MDWE)");
    }
    if (!strcmp(mode, "none")) {
        fprintf(stderr, "result status=NOT_CALLED\n");
    } else {
        if (!strcmp(mode, "twice")) {
            mallocs = 0;
            hugify_self(); /* the paper's two-line API */
            hottext_last_result(&r);
            print_result("first", &r);
        }
        mallocs = 0;
        hottext_hugify_self();
        hottext_last_result(&r);
        print_result("result", &r);
        if (!strcmp(mode, "abi"))
            check_abi(&r);
    }
#else
    void (*last)(hottext_result *) = NULL;
    const char *(*name)(int) = NULL, *(*backing)(int) = NULL;
#ifdef HOTPROG_LINKED
    last = hottext_last_result;
    name = hottext_status_name;
    backing = hottext_backing_name;
#else
    last = (void (*)(hottext_result *))dlsym(RTLD_DEFAULT, "hottext_last_result");
    name = (const char *(*)(int))dlsym(RTLD_DEFAULT, "hottext_status_name");
    backing = (const char *(*)(int))dlsym(RTLD_DEFAULT, "hottext_backing_name");
#endif
    if (last && name && backing) {
        hottext_result r = HOTTEXT_RESULT_INIT;
        last(&r);
        fprintf(stderr, "result status=%s backing=%s pages=%zu max_pages=%zu error=%d detail=%s\n", name(r.status),
                backing(r.backing), r.pages, r.max_pages, r.error, r.detail);
    } else {
        fprintf(stderr, "result status=ABSENT (no hottext in this process)\n");
    }
#endif
    report_smaps();

    if (!strcmp(mode, "perf")) {
        /* For perf: announce, then spend the time in hot_kernel, which lies
         * in the middle of the hot range. */
        double secs = argc > 2 ? atof(argv[2]) : 2;
        fprintf(stderr, "ready pid=%d\n", (int)getpid());
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        uint64_t x = 1;
        do {
            x = hot_kernel(20000000, x);
            clock_gettime(CLOCK_MONOTONIC, &t);
        } while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
        fprintf(stderr, "spin %llx\n", (unsigned long long)x);
    }

    uint64_t after = checksum();
    printf("checksum %016llx\n", (unsigned long long)after);
    if (after != before) {
        printf("CHECKSUM MISMATCH\n");
        return 3;
    }
    return 0;
}
