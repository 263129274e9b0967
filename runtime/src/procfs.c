/* Reading /proc/self and /sys with read(2) into stack buffers.
 *
 * No stdio: fopen() allocates, and we run at start-up, possibly from a
 * constructor before the program has set anything up. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

int hottext__lines_open(struct hx_lines *r, const char *path)
{
    r->pos = r->len = 0;
    r->skipping = 0;
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    return r->fd < 0 ? -1 : 0;
}

void hottext__lines_close(struct hx_lines *r)
{
    if (r->fd >= 0)
        close(r->fd);
    r->fd = -1;
}

char *hottext__lines_next(struct hx_lines *r)
{
    for (;;) {
        char *start = r->buf + r->pos;
        char *nl = memchr(start, '\n', r->len - r->pos);
        if (nl) {
            *nl = '\0';
            r->pos = (size_t)(nl - r->buf) + 1;
            if (r->skipping) { /* tail of a line we already returned truncated */
                r->skipping = 0;
                continue;
            }
            return start;
        }
        /* No full line buffered: keep the partial line, read more. */
        memmove(r->buf, start, r->len - r->pos);
        r->len -= r->pos;
        r->pos = 0;
        if (r->len == sizeof r->buf - 1) { /* over-long line: return it cut */
            r->buf[r->len] = '\0';
            r->len = 0;
            int was_skipping = r->skipping;
            r->skipping = 1;
            if (was_skipping)
                continue;
            return r->buf;
        }
        ssize_t n;
        do
            n = read(r->fd, r->buf + r->len, sizeof r->buf - 1 - r->len);
        while (n < 0 && errno == EINTR);
        if (n <= 0) { /* end (or error): last line without a newline */
            if (r->len == 0 || r->skipping)
                return NULL;
            r->buf[r->len] = '\0';
            r->pos = r->len = 0;
            r->skipping = 1; /* so that the next call ends */
            return r->buf;
        }
        r->len += (size_t)n;
    }
}

static const char *parse_hex(const char *p, unsigned long long *v)
{
    unsigned long long x = 0;
    const char *s = p;
    for (;; p++) {
        int d;
        if (*p >= '0' && *p <= '9')
            d = *p - '0';
        else if (*p >= 'a' && *p <= 'f')
            d = *p - 'a' + 10;
        else if (*p >= 'A' && *p <= 'F')
            d = *p - 'A' + 10;
        else
            break;
        x = x * 16 + (unsigned)d;
    }
    *v = x;
    return p == s ? NULL : p;
}

static const char *parse_dec(const char *p, unsigned long long *v)
{
    unsigned long long x = 0;
    const char *s = p;
    for (; *p >= '0' && *p <= '9'; p++)
        x = x * 10 + (unsigned)(*p - '0');
    *v = x;
    return p == s ? NULL : p;
}

/* One line of /proc/self/maps:
 * "start-end perms offset major:minor inode      path" */
static int parse_maps_line(const char *l, struct hx_vma *v)
{
    unsigned long long a, b, off, maj, min, ino;
    const char *p = parse_hex(l, &a);
    if (!p || *p != '-' || !(p = parse_hex(p + 1, &b)) || *p != ' ')
        return -1;
    p++;
    if (strlen(p) < 5)
        return -1;
    memcpy(v->perms, p, 4);
    v->perms[4] = '\0';
    p += 4;
    if (*p != ' ' || !(p = parse_hex(p + 1, &off)) || *p != ' ' || !(p = parse_hex(p + 1, &maj)) ||
        *p != ':' || !(p = parse_hex(p + 1, &min)) || *p != ' ' || !(p = parse_dec(p + 1, &ino)))
        return -1;
    while (*p == ' ')
        p++;
    v->start = (uintptr_t)a;
    v->end = (uintptr_t)b;
    v->offset = off;
    v->dev_major = (unsigned)maj;
    v->dev_minor = (unsigned)min;
    v->inode = (unsigned long)ino;
    size_t n = strlen(p);
    v->path_truncated = n >= sizeof v->path;
    if (v->path_truncated)
        n = sizeof v->path - 1;
    memcpy(v->path, p, n);
    v->path[n] = '\0';
    return 0;
}

int hottext__vma_find(uintptr_t addr, struct hx_vma *out)
{
    struct hx_lines r;
    if (hottext__lines_open(&r, "/proc/self/maps") < 0)
        return -1;
    char *l;
    int found = 0;
    while ((l = hottext__lines_next(&r))) {
        if (parse_maps_line(l, out) == 0 && out->start <= addr && addr < out->end) {
            found = 1;
            break;
        }
    }
    hottext__lines_close(&r);
    if (!found)
        errno = ENOENT;
    return found ? 0 : -1;
}

/* "Name:   1234 kB" -> 1234 if the line starts with name. */
static int field_kb(const char *l, const char *name, long *v)
{
    size_t n = strlen(name);
    if (strncmp(l, name, n) != 0)
        return 0;
    const char *p = l + n;
    while (*p == ' ' || *p == '\t')
        p++;
    unsigned long long x;
    if (!parse_dec(p, &x))
        return 0;
    *v = (long)x;
    return 1;
}

int hottext__smaps_read(uintptr_t vma_start, struct hx_smaps *out)
{
    struct hx_lines r;
    memset(out, 0, sizeof *out);
    if (hottext__lines_open(&r, "/proc/self/smaps") < 0)
        return -1;
    char *l;
    int in = 0, found = 0;
    long shared_h = 0, private_h = 0;
    while ((l = hottext__lines_next(&r))) {
        struct hx_vma v;
        /* Header lines start with a hex address followed by '-'; field lines
         * start with a capitalised name. */
        if (((l[0] >= '0' && l[0] <= '9') || (l[0] >= 'a' && l[0] <= 'f')) && parse_maps_line(l, &v) == 0) {
            if (in)
                break;
            in = v.start == vma_start;
            found |= in;
            continue;
        }
        if (!in)
            continue;
        (void)(field_kb(l, "Rss:", &out->rss) || field_kb(l, "Anonymous:", &out->anonymous) ||
               field_kb(l, "AnonHugePages:", &out->anon_huge) || field_kb(l, "FilePmdMapped:", &out->file_pmd) ||
               field_kb(l, "Shared_Hugetlb:", &shared_h) || field_kb(l, "Private_Hugetlb:", &private_h));
    }
    hottext__lines_close(&r);
    out->hugetlb = shared_h + private_h;
    if (!found)
        errno = ENOENT;
    return found ? 0 : -1;
}

long hottext__threads(void)
{
    struct hx_lines r;
    if (hottext__lines_open(&r, "/proc/self/status") < 0)
        return -1;
    char *l;
    long n = -1;
    while ((l = hottext__lines_next(&r))) {
        if (field_kb(l, "Threads:", &n))
            break;
    }
    hottext__lines_close(&r);
    return n;
}

long hottext__read_long_file(const char *path)
{
    struct hx_lines r;
    if (hottext__lines_open(&r, path) < 0)
        return -1;
    char *l = hottext__lines_next(&r);
    unsigned long long v = 0;
    long res = l && parse_dec(l, &v) ? (long)v : -1;
    hottext__lines_close(&r);
    return res;
}

/* The bracketed word of a THP sysfs file, e.g. "always [madvise] never". */
static int bracketed(const char *path, char *word, size_t n)
{
    struct hx_lines r;
    if (hottext__lines_open(&r, path) < 0)
        return -1;
    char *l = hottext__lines_next(&r), *a = l ? strchr(l, '[') : NULL, *b = a ? strchr(a, ']') : NULL;
    int ok = a && b && (size_t)(b - a - 1) < n;
    if (ok) {
        memcpy(word, a + 1, (size_t)(b - a - 1));
        word[b - a - 1] = '\0';
    }
    hottext__lines_close(&r);
    return ok ? 0 : -1;
}

enum hx_thp_mode hottext__thp_mode(char *why, size_t whylen)
{
    char g[32], s[32];
    const char *global = "/sys/kernel/mm/transparent_hugepage/enabled";
    const char *size2m = "/sys/kernel/mm/transparent_hugepage/hugepages-2048kB/enabled";
    if (bracketed(global, g, sizeof g) < 0) {
        snprintf(why, whylen, "cannot read %s", global);
        return HX_THP_UNKNOWN;
    }
    /* Since Linux 6.8 each THP size has its own switch; "inherit" defers to
     * the global one. Older kernels have no such file. */
    const char *eff = g;
    if (bracketed(size2m, s, sizeof s) == 0 && strcmp(s, "inherit") != 0)
        eff = s;
    snprintf(why, whylen, "%s: [%s]%s%s", global, g, eff == s ? ", 2048kB: " : "", eff == s ? s : "");
    if (!strcmp(eff, "never"))
        return HX_THP_NEVER;
    if (!strcmp(eff, "always"))
        return HX_THP_ALWAYS;
    if (!strcmp(eff, "madvise"))
        return HX_THP_MADVISE;
    return HX_THP_UNKNOWN;
}
