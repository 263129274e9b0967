/* The zero-code-change variant: linking with -lhottext_auto runs
 * hottext_hugify_self() from a constructor, before main.
 *
 * This file becomes hottext_auto.o, which the linker script
 * libhottext_auto.a names together with libhottext.a. One flag, for static
 * and dynamic programs, with --as-needed too (where a constructor-only shared
 * library would be dropped from DT_NEEDED and never run). */
#include "hottext.h"

/* Priority 101, the earliest a program may use: run before the program's own
 * constructors, some of which may start threads, after which we must refuse. */
__attribute__((constructor(101))) static void hottext_auto(void)
{
    (void)hottext_hugify_self();
}
