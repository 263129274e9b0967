/* libhottext_preload.so: for binaries that cannot be relinked.
 *
 *   LD_PRELOAD=libhottext_preload.so ./prog
 *
 * From a constructor, in this order:
 *  1. markers __hot_start/__hot_end in the main executable (exported, or in
 *     its .symtab): hottext_hugify_self();
 *  2. else the ranges in HOTTEXT_RANGES ("0xSTART-0xEND,0xSTART-0xEND") or in
 *     the file HOTTEXT_RANGES_FILE (one "0xSTART 0xEND" a line, '#' starts a
 *     comment, an optional "# build-id: HEX" line must match the program):
 *     link-time addresses of the executable, moved by its load bias;
 *  3. else, only if HOTTEXT_WHOLE_TEXT=1, the executable's whole text
 *     (the hfsort paper measured that this can be slower: it is opt-in).
 * LD_PRELOAD is inherited by child processes: ranges that do not lie in the
 * executable's text, or a build-id that differs, are refused with a warning
 * instead of being applied to some other program. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MAX_RANGES 32

struct ranges {
    size_t n;
    struct { uint64_t a, b; } r[MAX_RANGES];
    int bad;
};

static const char *hex(const char *p, uint64_t *v)
{
    while (*p == ' ' || *p == '\t')
        p++;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
        p += 2;
    uint64_t x = 0;
    const char *s = p;
    for (; (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || (*p >= 'A' && *p <= 'F'); p++) {
        if (x >> 60)
            return NULL; /* more than 64 bits */
        x = x * 16 + (uint64_t)(*p <= '9' ? *p - '0' : (*p | 0x20) - 'a' + 10);
    }
    *v = x;
    return p == s ? NULL : p;
}

static void add(struct ranges *rs, uint64_t a, uint64_t b, const char *src)
{
    if (b <= a) {
        hottext__warn("%s: range %#llx-%#llx is empty; ignored", src, (unsigned long long)a, (unsigned long long)b);
        rs->bad++;
    } else if (rs->n == MAX_RANGES) {
        hottext__warn("%s: more than %d ranges; the rest are ignored", src, MAX_RANGES);
        rs->bad++;
    } else {
        rs->r[rs->n].a = a;
        rs->r[rs->n].b = b;
        rs->n++;
    }
}

/* HOTTEXT_RANGES=0xSTART-0xEND[,0xSTART-0xEND...] */
static void parse_env(struct ranges *rs, const char *v)
{
    const char *p = v;
    while (*p) {
        uint64_t a, b;
        const char *q = hex(p, &a);
        if (q && *q == '-')
            q = hex(q + 1, &b);
        else
            q = NULL;
        while (q && (*q == ' ' || *q == '\t'))
            q++;
        if (!q || (*q && *q != ',')) {
            hottext__warn("HOTTEXT_RANGES: cannot read \"%.40s\" (want 0xSTART-0xEND,...); ignored", p);
            rs->bad++;
            q = strchr(p, ',');
            if (!q)
                return;
        } else {
            add(rs, a, b, "HOTTEXT_RANGES");
        }
        p = *q ? q + 1 : q;
    }
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1;
}

/* "# build-id: 0123abcd..." against the running program's NT_GNU_BUILD_ID. */
static int build_id_matches(const char *text, const struct hx_exe *exe)
{
    const unsigned char *id = exe->build_id;
    size_t i = 0;
    while (*text == ' ' || *text == '\t')
        text++;
    for (; hexval(text[0]) >= 0 && hexval(text[1]) >= 0; text += 2, i++)
        if (!id || i >= exe->build_id_len || id[i] != (unsigned char)(hexval(text[0]) * 16 + hexval(text[1])))
            return 0;
    return id && i == exe->build_id_len;
}

static void parse_file(struct ranges *rs, const char *path, const struct hx_exe *exe)
{
    struct hx_lines r;
    if (hottext__lines_open(&r, path) < 0) {
        hottext__warn("HOTTEXT_RANGES_FILE=%.200s: cannot open it; ignored", path);
        rs->bad++;
        return;
    }
    char *l;
    size_t lineno = 0, first = rs->n;
    while ((l = hottext__lines_next(&r))) {
        lineno++;
        while (*l == ' ' || *l == '\t')
            l++;
        if (!strncmp(l, "# build-id:", 11)) {
            if (!build_id_matches(l + 11, exe)) {
                hottext__warn("%.200s:%zu: build-id differs from the running program's; file ignored", path, lineno);
                rs->bad++;
                rs->n = first;
                break;
            }
            continue;
        }
        if (*l == '#' || *l == '\0')
            continue;
        uint64_t a, b;
        const char *q = hex(l, &a);
        if (q && (*q == ' ' || *q == '\t'))
            q = hex(q, &b);
        else
            q = NULL;
        while (q && (*q == ' ' || *q == '\t'))
            q++;
        if (!q || (*q && *q != '#')) {
            hottext__warn("%.200s:%zu: cannot read \"%.40s\" (want 0xSTART 0xEND); line ignored", path, lineno, l);
            rs->bad++;
            continue;
        }
        add(rs, a, b, path);
    }
    hottext__lines_close(&r);
}

/* Sort by start and merge ranges less than 2 MiB apart: after rounding they
 * would share a huge page, and the second would find it done. */
static void normalise(struct ranges *rs)
{
    for (size_t i = 1; i < rs->n; i++)
        for (size_t j = i; j > 0 && rs->r[j].a < rs->r[j - 1].a; j--) {
            uint64_t ta = rs->r[j].a, tb = rs->r[j].b;
            rs->r[j] = rs->r[j - 1];
            rs->r[j - 1].a = ta;
            rs->r[j - 1].b = tb;
        }
    size_t k = 0;
    for (size_t i = 0; i < rs->n; i++) {
        if (k && rs->r[i].a < rs->r[k - 1].b + HX_HUGE) {
            if (rs->r[i].b > rs->r[k - 1].b)
                rs->r[k - 1].b = rs->r[i].b;
        } else {
            rs->r[k++] = rs->r[i];
        }
    }
    rs->n = k;
}

__attribute__((constructor)) static void hottext_preload(void)
{
    if (hottext_hugify_self() != HOTTEXT_NO_MARKERS)
        return;
    struct hx_exe exe;
    if (hottext__exe_info(&exe) < 0)
        return;
    struct ranges rs;
    memset(&rs, 0, sizeof rs);
    const char *env = secure_getenv("HOTTEXT_RANGES"), *file = secure_getenv("HOTTEXT_RANGES_FILE");
    if (env && *env)
        parse_env(&rs, env);
    if (file && *file)
        parse_file(&rs, file, &exe);
    if (rs.n == 0 && !rs.bad && hottext__env_flag("HOTTEXT_WHOLE_TEXT", 0)) {
        hottext__say("HOTTEXT_WHOLE_TEXT=1: the whole text %#lx-%#lx", (unsigned long)exe.text_lo, (unsigned long)exe.text_hi);
        /* One call per executable mapping: the text may be several segments
         * (a hottext layout starts a new one at the hot section). */
        struct hx_vma v;
        for (uintptr_t at = exe.text_lo; at < exe.text_hi && hottext__vma_find(at, &v) == 0; at = v.end) {
            if (v.perms[2] != 'x')
                continue;
            hottext_result res;
            (void)hottext_hugify_range((const void *)at, (const void *)(v.end < exe.text_hi ? v.end : exe.text_hi), &res);
        }
        return;
    }
    normalise(&rs);
    for (size_t i = 0; i < rs.n; i++) {
        uintptr_t a = (uintptr_t)rs.r[i].a + exe.bias, b = (uintptr_t)rs.r[i].b + exe.bias;
        if (a < exe.text_lo || b > exe.text_hi) {
            hottext__warn("range %#llx-%#llx is not inside the executable's text %#lx-%#lx (link-time %#lx-%#lx); ignored",
                          (unsigned long long)rs.r[i].a, (unsigned long long)rs.r[i].b, (unsigned long)exe.text_lo,
                          (unsigned long)exe.text_hi, (unsigned long)(exe.text_lo - exe.bias),
                          (unsigned long)(exe.text_hi - exe.bias));
            continue;
        }
        hottext_result res;
        (void)hottext_hugify_range((const void *)a, (const void *)b, &res);
    }
}
