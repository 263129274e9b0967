/* Times one hottext_hugify_self() call in a fresh process and prints
 *   backing=file pages=8 ns=1234567 status=OK
 * The hot range (generated code, runtime/tests/gen_hot.sh) is not touched
 * before the call, as at real start-up; a checksum after it checks the text. */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "hottext.h"

typedef uint64_t hot_fn(uint64_t);
extern hot_fn *const hot_table[];
extern const uint64_t hot_count;

int main(void)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int st = hottext_hugify_self();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    hottext_result r = HOTTEXT_RESULT_INIT;
    hottext_last_result(&r);
    uint64_t acc = 0;
    for (uint64_t i = 0; i < hot_count; i++)
        acc += hot_table[i](i);
    long long ns = (long long)(t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
    printf("backing=%s pages=%zu ns=%lld status=%s sum=%llx\n", hottext_backing_name(r.backing), r.pages, ns,
           hottext_status_name(st), (unsigned long long)acc);
    return 0;
}
