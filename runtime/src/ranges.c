/* The hot ranges libhottext_preload.so applies to a program that cannot be
 * relinked (see preload.c): parsed from HOTTEXT_RANGES ("0xSTART-0xEND,...") or
 * from a HOTTEXT_RANGES_FILE (one "0xSTART 0xEND" a line, '#' comments, an
 * optional "# build-id: HEX" line that must match), the format of
 * crates/hottext/src/link/ranges.rs.
 *
 * Both come from the environment of a process that may be a service run as
 * root, and this code runs before its main(): it must never hang it, flood its
 * stderr or allocate. So the file is read only if it is a regular file (never
 * a FIFO that would block or a device such as /dev/zero or /dev/urandom that
 * never ends; it is not even opened otherwise, since opening some devices acts,
 * e.g. a watchdog), of at most HX_RANGES_FILE_MAX bytes, into a static buffer.
 * One bad entry voids its whole source, as `hottext verify --ranges` refuses
 * such a file: applying the rest of a damaged or foreign file would be a guess,
 * and stopping at the first bad line is what keeps the warnings to one.
 * runtime/tests/fuzz_ranges.c fuzzes this file. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

/* The blanks that may separate fields: what Rust's split_whitespace() takes
 * in ASCII, so that a file verify reads (CRLF line ends included) reads here. */
static int blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static const char *skip_blanks(const char *p)
{
    while (blank(*p))
        p++;
    return p;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1;
}

/* An address as the Rust reader takes it: blanks, optional "0x", hex digits
 * worth at most 64 bits. The end of the digits, or NULL. */
static const char *hex(const char *p, uint64_t *v)
{
    p = skip_blanks(p);
    if (p[0] == '0' && p[1] == 'x')
        p += 2;
    uint64_t x = 0;
    const char *s = p;
    for (; hexval(*p) >= 0; p++) {
        if (x >> 60)
            return NULL; /* more than 64 bits */
        x = x * 16 + (uint64_t)hexval(*p);
    }
    *v = x;
    return p == s ? NULL : p;
}

/* Up to 40 bytes of text for a warning, bytes outside printable ASCII as '?':
 * a junk file must not send escape sequences to the service's terminal or log. */
struct shown {
    char s[41];
};

static struct shown show(const char *text)
{
    struct shown out;
    size_t i = 0;
    for (; i < sizeof out.s - 1 && text[i]; i++)
        out.s[i] = text[i] >= 0x20 && text[i] < 0x7f ? text[i] : '?';
    out.s[i] = '\0';
    return out;
}

/* Keeps [a, b) if there is room; the caller says once how many were dropped. */
static int add(struct hx_ranges *rs, uint64_t a, uint64_t b)
{
    if (rs->n == HX_MAX_RANGES)
        return -1;
    rs->r[rs->n].a = a;
    rs->r[rs->n].b = b;
    rs->n++;
    return 0;
}

static void say_dropped(const char *src, size_t dropped)
{
    if (dropped) {
        hottext__warn("%s: %zu ranges after the first %d are ignored", src, dropped, HX_MAX_RANGES);
        /* not counted in rs->bad: the ranges kept are still applied */
    }
}

/* HOTTEXT_RANGES=0xSTART-0xEND[,0xSTART-0xEND...] */
void hottext__ranges_env(struct hx_ranges *rs, const char *v)
{
    size_t first = rs->n, dropped = 0;
    for (const char *p = v; *p;) {
        uint64_t a = 0, b = 0;
        const char *q = hex(p, &a);
        q = q && *q == '-' ? hex(q + 1, &b) : NULL;
        if (q)
            q = skip_blanks(q);
        if (!q || (*q && *q != ',') || b <= a) {
            hottext__warn("HOTTEXT_RANGES: cannot use \"%s\" (want 0xSTART-0xEND,..., start below end); "
                          "HOTTEXT_RANGES ignored", show(p).s);
            rs->bad++;
            rs->n = first;
            return;
        }
        if (add(rs, a, b) < 0)
            dropped++;
        p = *q ? q + 1 : q;
    }
    say_dropped("HOTTEXT_RANGES", dropped);
}

/* "# build-id: 0123abcd..." against the running program's NT_GNU_BUILD_ID. */
static int build_id_matches(const char *text, const unsigned char *id, size_t id_len)
{
    size_t i = 0;
    text = skip_blanks(text);
    for (; hexval(text[0]) >= 0 && hexval(text[1]) >= 0; text += 2, i++)
        if (!id || i >= id_len || id[i] != (unsigned char)(hexval(text[0]) * 16 + hexval(text[1])))
            return 0;
    return id && i == id_len && *skip_blanks(text) == '\0';
}

static const char *file_kind(mode_t mode)
{
    return S_ISFIFO(mode) ? "a FIFO" : S_ISCHR(mode) ? "a character device" : S_ISBLK(mode) ? "a block device"
         : S_ISDIR(mode) ? "a directory" : S_ISSOCK(mode) ? "a socket" : "not a regular file";
}

/* The file's bytes, NUL-terminated. Static: no malloc in the runtime, and a
 * constructor may run on a small stack. Only the preload constructor reads a
 * ranges file, once, before the program can start threads. */
static char file_text[HX_RANGES_FILE_MAX + 2];

/* Reads path whole into file_text: its length, or -1 after one warning. */
static long read_small_file(const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0) {
        hottext__warn("HOTTEXT_RANGES_FILE=%.200s: cannot open it (%s); ignored", path, hottext__errname(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        hottext__warn("HOTTEXT_RANGES_FILE=%.200s is %s, not a regular file; ignored", path, file_kind(st.st_mode));
        return -1;
    }
    if (st.st_size > HX_RANGES_FILE_MAX) {
        hottext__warn("HOTTEXT_RANGES_FILE=%.200s is %lld bytes, more than a ranges file holds (%d KiB); ignored", path,
                      (long long)st.st_size, HX_RANGES_FILE_MAX / 1024);
        return -1;
    }
    /* O_NONBLOCK and the second check: the path may have been replaced by a
     * FIFO or a device since the stat. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        hottext__warn("HOTTEXT_RANGES_FILE=%.200s: cannot open it as a regular file (%s); ignored", path,
                      fd < 0 ? hottext__errname(errno) : file_kind(st.st_mode));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    /* One byte more than allowed: a file that grew since the stat is refused,
     * not cut (a cut line could still parse, as another address). */
    size_t len = 0;
    while (len <= HX_RANGES_FILE_MAX) {
        ssize_t n = read(fd, file_text + len, HX_RANGES_FILE_MAX + 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            hottext__warn("HOTTEXT_RANGES_FILE=%.200s: cannot read it (%s); ignored", path, hottext__errname(errno));
            close(fd);
            return -1;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    if (len > HX_RANGES_FILE_MAX) {
        hottext__warn("HOTTEXT_RANGES_FILE=%.200s holds more than a ranges file holds (%d KiB); ignored", path,
                      HX_RANGES_FILE_MAX / 1024);
        return -1;
    }
    file_text[len] = '\0';
    return (long)len;
}

enum line_kind { LINE_NOTHING, LINE_RANGE, LINE_NUL, LINE_UNREADABLE, LINE_EMPTY, LINE_OTHER_BUILD };

/* One line (NUL-terminated, len bytes before the NUL): what it is, with
 * [*a, *b) for a range. */
static enum line_kind file_line(const char *l, size_t len, const void *build_id, size_t build_id_len, uint64_t *a,
                                uint64_t *b)
{
    if (memchr(l, '\0', len))
        return LINE_NUL;
    l = skip_blanks(l);
    if (!strncmp(l, "# build-id:", 11))
        return build_id_matches(l + 11, build_id, build_id_len) ? LINE_NOTHING : LINE_OTHER_BUILD;
    if (*l == '#' || *l == '\0')
        return LINE_NOTHING;
    const char *q = hex(l, a);
    q = q && blank(*q) ? hex(q, b) : NULL;
    if (q)
        q = skip_blanks(q);
    if (!q || (*q && *q != '#'))
        return LINE_UNREADABLE;
    return *b > *a ? LINE_RANGE : LINE_EMPTY;
}

static void warn_line(const char *path, size_t lineno, enum line_kind kind, const char *line)
{
    struct shown shown = show(skip_blanks(line));
    switch (kind) {
    case LINE_NUL:
        hottext__warn("%.200s:%zu: a NUL byte in \"%s\"; ranges file ignored", path, lineno, shown.s);
        break;
    case LINE_EMPTY:
        hottext__warn("%.200s:%zu: \"%s\" is empty (start not below end); ranges file ignored", path, lineno, shown.s);
        break;
    case LINE_OTHER_BUILD:
        hottext__warn("%.200s:%zu: build-id differs from the running program's; ranges file ignored", path, lineno);
        break;
    default:
        hottext__warn("%.200s:%zu: cannot read \"%s\" (want 0xSTART 0xEND); ranges file ignored", path, lineno, shown.s);
    }
}

void hottext__ranges_file(struct hx_ranges *rs, const char *path, const void *build_id, size_t build_id_len)
{
    long len = read_small_file(path);
    if (len < 0) {
        rs->bad++;
        return;
    }
    size_t first = rs->n, dropped = 0, lineno = 0;
    char *end = file_text + len;
    for (char *l = file_text; l < end; l++) {
        char *nl = memchr(l, '\n', (size_t)(end - l));
        size_t n = nl ? (size_t)(nl - l) : (size_t)(end - l);
        l[n] = '\0'; /* the newline, or the NUL after the last line */
        lineno++;
        uint64_t a = 0, b = 0;
        enum line_kind kind = file_line(l, n, build_id, build_id_len, &a, &b);
        if (kind == LINE_RANGE && add(rs, a, b) < 0)
            dropped++;
        else if (kind != LINE_NOTHING && kind != LINE_RANGE) {
            warn_line(path, lineno, kind, l);
            rs->bad++;
            rs->n = first;
            return;
        }
        l += n;
    }
    say_dropped(path, dropped);
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
