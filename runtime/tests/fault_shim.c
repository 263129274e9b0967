/* Fault injection for the runtime's tests, loaded with LD_PRELOAD.
 *
 * HOTTEXT_FAULT_MREMAP=once|always: an mremap(MREMAP_FIXED) unmaps its
 *     destination and then fails with ENOMEM, as the kernel can when it runs
 *     out of memory late in the move (once: the first such call only).
 * HOTTEXT_FAULT_CALLS="mmap mremap madvise mprotect" (any of them),
 *     HOTTEXT_FAULT_FROM=N and HOTTEXT_FAULT_RUN=K: counting calls of the
 *     syscalls listed, the Nth and every later one fail (K = 0 or unset:
 *     persistent), or only K of them in a row. A failing mremap(MREMAP_FIXED)
 *     unmaps its destination first, as above.
 * HOTTEXT_FAULT_ERRNO=ENOMEM|EACCES|EPERM: the errno of those failures but
 *     mremap's (default ENOMEM: the kernel out of memory; EACCES/EPERM: a
 *     policy such as SELinux refusing).
 * HOTTEXT_FAULT_OPEN=1: open() of /proc/self/exe, or of a test program under
 *     a ".../run/" directory, fails with EACCES, so the program file cannot be
 *     reopened to restore the text. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Whether this call of `name` is to fail under HOTTEXT_FAULT_CALLS/FROM/RUN. */
static int counted_fault(const char *name)
{
    static long calls;
    const char *list = getenv("HOTTEXT_FAULT_CALLS"), *from = getenv("HOTTEXT_FAULT_FROM");
    const char *run = getenv("HOTTEXT_FAULT_RUN");
    size_t n = strlen(name);
    const char *hit = list ? strstr(list, name) : NULL;
    if (!hit || !from || (hit != list && hit[-1] != ' ') || (hit[n] && hit[n] != ' '))
        return 0;
    long nth = ++calls, first = atol(from), len = run ? atol(run) : 0;
    return nth >= first && (len <= 0 || nth < first + len);
}

static int fault_errno(void)
{
    const char *e = getenv("HOTTEXT_FAULT_ERRNO");
    return !e ? ENOMEM : strcmp(e, "EACCES") == 0 ? EACCES : strcmp(e, "EPERM") == 0 ? EPERM : ENOMEM;
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    static void *(*real)(void *, size_t, int, int, int, off_t);
    if (!real)
        real = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
    if (counted_fault("mmap")) {
        errno = fault_errno();
        return MAP_FAILED;
    }
    return real(addr, len, prot, flags, fd, off);
}

int madvise(void *addr, size_t len, int advice)
{
    static int (*real)(void *, size_t, int);
    if (!real)
        real = (int (*)(void *, size_t, int))dlsym(RTLD_NEXT, "madvise");
    if (counted_fault("madvise")) {
        errno = fault_errno();
        return -1;
    }
    return real(addr, len, advice);
}

int mprotect(void *addr, size_t len, int prot)
{
    static int (*real)(void *, size_t, int);
    if (!real)
        real = (int (*)(void *, size_t, int))dlsym(RTLD_NEXT, "mprotect");
    if (counted_fault("mprotect")) {
        errno = fault_errno();
        return -1;
    }
    return real(addr, len, prot);
}

void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
    static void *(*real)(void *, size_t, size_t, int, ...);
    static int fired;
    if (!real)
        real = (void *(*)(void *, size_t, size_t, int, ...))dlsym(RTLD_NEXT, "mremap");
    void *dest = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        dest = va_arg(ap, void *);
        va_end(ap);
    }
    const char *mode = getenv("HOTTEXT_FAULT_MREMAP");
    int fail = counted_fault("mremap") ||
               (dest && mode && (strcmp(mode, "always") == 0 || (strcmp(mode, "once") == 0 && !fired)));
    if (fail) {
        fired = 1;
        if (dest)
            munmap(dest, new_len);
        errno = ENOMEM;
        return MAP_FAILED;
    }
    return dest ? real(old, old_len, new_len, flags, dest) : real(old, old_len, new_len, flags);
}

/* open() and open64() alike: refuse the program file when asked, else call
 * the real one (with its mode when the flags take one). */
static int intercept(const char *name, const char *path, int flags, va_list ap)
{
    if (getenv("HOTTEXT_FAULT_OPEN") && (strcmp(path, "/proc/self/exe") == 0 || strstr(path, "/run/"))) {
        errno = EACCES;
        return -1;
    }
    int (*real)(const char *, int, ...) = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, name);
    mode_t mode = (flags & (O_CREAT | O_TMPFILE)) ? va_arg(ap, mode_t) : 0;
    return real(path, flags, mode);
}

int open(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    int fd = intercept("open", path, flags, ap);
    va_end(ap);
    return fd;
}

int open64(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    int fd = intercept("open64", path, flags, ap);
    va_end(ap);
    return fd;
}
