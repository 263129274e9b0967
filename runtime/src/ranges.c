/* The hot ranges libhottext_preload.so applies to a program that cannot be
 * relinked (see preload.c): parsed from HOTTEXT_RANGES ("0xSTART-0xEND,...") or
 * from a HOTTEXT_RANGES_FILE (one "0xSTART 0xEND" a line, '#' comments, an
 * optional "# build-id: HEX" line that must match). Both come from the
 * environment of a process that may run as root: every line is bounded, every
 * number checked, anything unreadable is a warning and ignored.
 * runtime/tests/fuzz_ranges.c fuzzes this file. */
#define _GNU_SOURCE
#include <string.h>

#include "internal.h"

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

static void add(struct hx_ranges *rs, uint64_t a, uint64_t b, const char *src)
{
    if (b <= a) {
        hottext__warn("%s: range %#llx-%#llx is empty; ignored", src, (unsigned long long)a, (unsigned long long)b);
        rs->bad++;
    } else if (rs->n == HX_MAX_RANGES) {
        hottext__warn("%s: more than %d ranges; the rest are ignored", src, HX_MAX_RANGES);
        rs->bad++;
    } else {
        rs->r[rs->n].a = a;
        rs->r[rs->n].b = b;
        rs->n++;
    }
}

/* HOTTEXT_RANGES=0xSTART-0xEND[,0xSTART-0xEND...] */
void hottext__ranges_env(struct hx_ranges *rs, const char *v)
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
static int build_id_matches(const char *text, const unsigned char *id, size_t id_len)
{
    size_t i = 0;
    while (*text == ' ' || *text == '\t')
        text++;
    for (; hexval(text[0]) >= 0 && hexval(text[1]) >= 0; text += 2, i++)
        if (!id || i >= id_len || id[i] != (unsigned char)(hexval(text[0]) * 16 + hexval(text[1])))
            return 0;
    return id && i == id_len;
}

void hottext__ranges_file(struct hx_ranges *rs, const char *path, const void *build_id, size_t build_id_len)
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
            if (!build_id_matches(l + 11, build_id, build_id_len)) {
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
void hottext__ranges_normalise(struct hx_ranges *rs)
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
        if (k && (rs->r[i].a < rs->r[k - 1].b || rs->r[i].a - rs->r[k - 1].b < HX_HUGE)) {
            if (rs->r[i].b > rs->r[k - 1].b)
                rs->r[k - 1].b = rs->r[i].b;
        } else {
            rs->r[k++] = rs->r[i];
        }
    }
    rs->n = k;
}

