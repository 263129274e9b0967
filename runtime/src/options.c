/* HOTTEXT_* environment variables and the output function.
 *
 * Options are read once, on first use. A bad value is a warning (always
 * printed: the operator set the variable and should hear that it was not
 * understood) and the default is used; it is never fatal. Everything else is
 * printed only with HOTTEXT_VERBOSE=1. secure_getenv: a set-user-ID program
 * linked with -lhottext_auto must not read a file an ordinary user names. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static hottext_output_fn *out_fn;
static void *out_arg;

void hottext_set_output(hottext_output_fn *fn, void *arg)
{
    out_fn = fn;
    out_arg = fn ? arg : NULL;
}

static void emit(const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (out_fn) {
        out_fn(msg, out_arg);
        return;
    }
    /* write(2), not stdio: stdio may allocate, and stderr may not be set up
     * when we run from a constructor. One write per line keeps lines whole. */
    char line[sizeof msg + 16];
    int n = snprintf(line, sizeof line, "hottext: %s\n", msg);
    if (n > (int)sizeof line - 1)
        n = (int)sizeof line - 1;
    if (n > 0) {
        ssize_t r = write(2, line, (size_t)n);
        (void)r; /* nowhere to report a failed report */
    }
}

void hottext__warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    emit(fmt, ap);
    va_end(ap);
}

void hottext__say(const char *fmt, ...)
{
    if (!hottext__options()->verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    emit(fmt, ap);
    va_end(ap);
}

void hottext__detail(hottext_result *res, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->detail, sizeof res->detail, fmt, ap);
    va_end(ap);
}

int hottext__env_flag(const char *name, int dflt)
{
    const char *v = secure_getenv(name);
    if (!v || !*v)
        return dflt;
    if (!strcmp(v, "1") || !strcmp(v, "yes") || !strcmp(v, "on") || !strcmp(v, "true"))
        return 1;
    if (!strcmp(v, "0") || !strcmp(v, "no") || !strcmp(v, "off") || !strcmp(v, "false"))
        return 0;
    hottext__warn("%s=\"%.40s\" is not 0 or 1; using %d", name, v, dflt);
    return dflt;
}

static long env_count(const char *name)
{
    const char *v = secure_getenv(name);
    if (!v || !*v)
        return 0;
    long n = 0;
    const char *p = v;
    for (; *p >= '0' && *p <= '9' && n < 1000000; p++)
        n = n * 10 + (*p - '0');
    if (*p || n <= 0 || n >= 1000000) {
        hottext__warn("%s=\"%.40s\" is not a whole number of pages (1..999999); ignored", name, v);
        return 0;
    }
    return n;
}

static enum hx_backing_choice env_backing(void)
{
    const char *v = secure_getenv("HOTTEXT_BACKING");
    if (!v || !*v || !strcmp(v, "auto"))
        return HX_AUTO;
    if (!strcmp(v, "file"))
        return HX_FILE;
    if (!strcmp(v, "anon"))
        return HX_ANON;
    if (!strcmp(v, "hugetlb"))
        return HX_HUGETLB;
    hottext__warn("HOTTEXT_BACKING=\"%.40s\" is not auto, file, anon or hugetlb; using auto", v);
    return HX_AUTO;
}

static enum hx_perf_map env_perf_map(void)
{
    const char *v = secure_getenv("HOTTEXT_PERF_MAP");
    if (v && !strcmp(v, "keep"))
        return HX_MAP_KEEP;
    if (v && *v && strcmp(v, "0") && strcmp(v, "1")) {
        hottext__warn("HOTTEXT_PERF_MAP=\"%.40s\" is not 0, 1 or keep; using 1", v);
        return HX_MAP_ON;
    }
    return hottext__env_flag("HOTTEXT_PERF_MAP", 1) ? HX_MAP_ON : HX_MAP_OFF;
}

const struct hx_options *hottext__options(void)
{
    static struct hx_options opt;
    static int loaded;
    if (!loaded) {
        loaded = 1; /* set first: the parsers below warn, and warn() asks for options */
        opt.verbose = 0;
        opt.verbose = hottext__env_flag("HOTTEXT_VERBOSE", 0);
        opt.enabled = hottext__env_flag("HOTTEXT_HUGIFY", 1);
        opt.max_pages = env_count("HOTTEXT_MAX_PAGES");
        opt.backing = env_backing();
        opt.perf_map = env_perf_map();
    }
    return &opt;
}

/* errno names for messages. Not strerror(): with a locale set it may load a
 * message catalog, which allocates. */
const char *hottext__errname(int e)
{
    switch (e) {
    case 0: return "no error";
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case EINTR: return "EINTR";
    case EIO: return "EIO";
    case EBADF: return "EBADF";
    case EAGAIN: return "EAGAIN";
    case ENOMEM: return "ENOMEM";
    case EACCES: return "EACCES";
    case EFAULT: return "EFAULT";
    case EBUSY: return "EBUSY";
    case EEXIST: return "EEXIST";
    case ENODEV: return "ENODEV";
    case EINVAL: return "EINVAL";
    case EMFILE: return "EMFILE";
    case ENOSPC: return "ENOSPC";
    case ENOSYS: return "ENOSYS";
    case EOVERFLOW: return "EOVERFLOW";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    default: return "errno (see result.error)";
    }
}
