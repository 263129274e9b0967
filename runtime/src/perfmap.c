/* /tmp/perf-PID.map: names for code that lives in anonymous memory.
 *
 * Once the hot text is a copy in anonymous memory, /proc/PID/maps no longer
 * names the program file for that range, and a perf that attaches later sees
 * "//anon" there. perf then reads /tmp/perf-PID.map, one "START SIZE name"
 * line per function (hex, runtime addresses), the format JITs use. We append,
 * since a JIT in the same process may write the same file.
 *
 * /tmp is shared: another user may have put a symlink or a file of their own
 * at that name first, to make a root service write where they choose. So the
 * file is opened without following symlinks and without blocking (a FIFO
 * there would stop the program), and one that is not a regular file of this
 * process's user with a single link is refused, not written.
 *
 * A file the runtime created is removed when the process exits (atexit), so
 * that programs run by the thousand (tests, batch jobs) do not fill /tmp; one
 * that was there already belongs to a JIT and stays. HOTTEXT_PERF_MAP=keep
 * leaves ours too, for a `perf report` after the process has gone. A process
 * killed by a signal runs no atexit handler: its map stays. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

struct writer {
    int fd;
    uintptr_t bias;
    size_t len;
    int failed;
    char buf[4096];
};

static void flush(struct writer *w)
{
    size_t off = 0;
    while (off < w->len && !w->failed) {
        ssize_t n = write(w->fd, w->buf + off, w->len - off);
        if (n <= 0)
            w->failed = 1;
        else
            off += (size_t)n;
    }
    w->len = 0;
}

static void add(void *arg, uint64_t value, uint64_t size, const char *name)
{
    struct writer *w = arg;
    char line[600];
    int n = snprintf(line, sizeof line, "%llx %llx %.500s\n", (unsigned long long)(value + w->bias),
                     (unsigned long long)size, name);
    if (n <= 0 || n >= (int)sizeof line)
        return;
    if (w->len + (size_t)n > sizeof w->buf)
        flush(w);
    memcpy(w->buf + w->len, line, (size_t)n);
    w->len += (size_t)n;
}

/* The map to remove at exit, and the process that created it: a child forked
 * since inherits the handler but not the map. */
static char created_path[64];
static pid_t created_by;

static void remove_created(void)
{
    if (created_by == getpid())
        unlink(created_path);
}

/* Opens the map for appending; *created says whether this call made it. */
static int open_map(const char *path, int *created)
{
    const int flags = O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
    int fd = open(path, flags | O_CREAT | O_EXCL, 0644);
    *created = fd >= 0;
    if (fd < 0 && errno == EEXIST)
        fd = open(path, flags);
    return fd;
}

long hottext__perf_map_write(uintptr_t lo, uintptr_t hi, int keep, char *why, size_t whylen)
{
    struct hx_elf e;
    if (hottext__elf_open_self(&e, why, whylen) < 0)
        return -1;
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
    int created;
    struct writer w = {.fd = open_map(path, &created), .bias = e.bias};
    if (w.fd < 0) {
        snprintf(why, whylen, "cannot open %s (a symlink there is refused)", path);
        hottext__elf_close(&e);
        return -1;
    }
    struct stat st;
    if (fstat(w.fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_nlink != 1) {
        snprintf(why, whylen, "refusing %s: not a regular file of uid %d with one link", path, (int)geteuid());
        close(w.fd);
        hottext__elf_close(&e);
        return -1;
    }
    if (created && !keep && created_by != getpid()) {
        memcpy(created_path, path, sizeof path);
        created_by = getpid();
        atexit(remove_created);
    }
    long n = hottext__elf_each_func(&e, lo - e.bias, hi - e.bias, add, &w);
    flush(&w);
    close(w.fd);
    hottext__elf_close(&e);
    if (n < 0)
        snprintf(why, whylen, "the program has no symbol table (stripped)");
    else if (w.failed)
        snprintf(why, whylen, "writing %s failed", path);
    else
        snprintf(why, whylen, "%s", path);
    return w.failed ? -1 : n;
}
