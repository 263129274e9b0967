/* libhottext_preload.so: for binaries that cannot be relinked.
 *
 *   LD_PRELOAD=libhottext_preload.so ./prog
 *
 * From a constructor, in this order:
 *  1. markers __hot_start/__hot_end in the main executable (exported, or in
 *     its .symtab): hottext_hugify_self(); if the program file cannot be
 *     opened or mapped to look for them, nothing (SYSCALL_FAILED): the
 *     fallbacks are for programs known to have no markers;
 *  2. else the ranges in HOTTEXT_RANGES ("0xSTART-0xEND,0xSTART-0xEND") or in
 *     the file HOTTEXT_RANGES_FILE (one "0xSTART 0xEND" a line, '#' starts a
 *     comment, an optional "# build-id: HEX" line must match the program;
 *     one bad entry voids its source, see ranges.c): link-time addresses of
 *     the executable, moved by its load bias;
 *  3. else, only if HOTTEXT_WHOLE_TEXT=1, the executable's whole text
 *     (the hfsort paper measured that this can be slower: it is opt-in).
 * LD_PRELOAD is inherited by child processes: ranges that do not lie in the
 * executable's text, or a build-id that differs, are refused with a warning
 * instead of being applied to some other program. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

__attribute__((constructor)) static void hottext_preload(void)
{
    if (hottext_hugify_self() != HOTTEXT_NO_MARKERS)
        return;
    struct hx_exe exe;
    if (hottext__exe_info(&exe) < 0)
        return;
    struct hx_ranges rs;
    memset(&rs, 0, sizeof rs);
    const char *env = secure_getenv("HOTTEXT_RANGES"), *file = secure_getenv("HOTTEXT_RANGES_FILE");
    if (env && *env)
        hottext__ranges_env(&rs, env);
    if (file && *file)
        hottext__ranges_file(&rs, file, exe.build_id, exe.build_id_len);
    if (rs.n == 0 && !rs.bad && hottext__env_flag("HOTTEXT_WHOLE_TEXT", 0)) {
        hottext__say("HOTTEXT_WHOLE_TEXT=1: the whole text %#lx-%#lx", (unsigned long)exe.text_lo, (unsigned long)exe.text_hi);
        /* One call per executable mapping: the text may be several segments
         * (a hottext layout starts a new one at the hot section). */
        struct hx_vma v;
        for (uintptr_t at = exe.text_lo; at < exe.text_hi && hottext__vma_find(at, &v) == 0; at = v.end) {
            if (v.perms[2] != 'x')
                continue;
            hottext_result res = HOTTEXT_RESULT_INIT;
            (void)hottext_hugify_range((const void *)at, (const void *)(v.end < exe.text_hi ? v.end : exe.text_hi), &res);
        }
        return;
    }
    hottext__ranges_normalise(&rs);
    size_t outside = 0, first_outside = 0;
    for (size_t i = 0; i < rs.n; i++) {
        uintptr_t a = (uintptr_t)rs.r[i].a + exe.bias, b = (uintptr_t)rs.r[i].b + exe.bias;
        if (a < exe.text_lo || b > exe.text_hi) {
            if (!outside++)
                first_outside = i;
            continue;
        }
        hottext_result res = HOTTEXT_RESULT_INIT;
        (void)hottext_hugify_range((const void *)a, (const void *)b, &res);
    }
    /* One warning for them all: LD_PRELOAD reaches every child of a service,
     * and each would repeat it. */
    if (outside) {
        char more[48] = "";
        if (outside > 1)
            snprintf(more, sizeof more, " and %zu more are", outside - 1);
        hottext__warn("range %#llx-%#llx%s not inside the executable's text %#lx-%#lx (link-time %#lx-%#lx); ignored",
                      (unsigned long long)rs.r[first_outside].a, (unsigned long long)rs.r[first_outside].b,
                      outside > 1 ? more : " is", (unsigned long)exe.text_lo, (unsigned long)exe.text_hi,
                      (unsigned long)(exe.text_lo - exe.bias), (unsigned long)(exe.text_hi - exe.bias));
    }
}
