/* How long a random read of main memory takes on this machine, alone and with others in
 * flight: the two figures that bound the ordering loops (bench/RESULTS.md, "`hottext order` at
 * scale"). Follows K independent random cycles through a 512 MiB array on huge pages, one
 * cache line a step, for K = 1, 2, 4 ... 32; prints nanoseconds per read.
 *   cc -O2 -Wall -Wextra -Werror -o /tmp/mem_latency bench/order/mem_latency.c && /tmp/mem_latency
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#define LINE_WORDS 8 /* 64-byte lines of 8-byte words */

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t next_random(uint64_t *state) {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

int main(void) {
    const size_t bytes = (size_t)512 << 20, lines = bytes / 64;
    uint64_t *memory = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint32_t *order = malloc(lines * sizeof *order);
    if (memory == MAP_FAILED || order == NULL) {
        perror("mem_latency: allocating 512 MiB");
        return 1;
    }
    madvise(memory, bytes, MADV_HUGEPAGE); /* as hottext's own allocator does */
    /* One random cycle through every line, so that no step is predictable. */
    uint64_t state = 0x2545f4914f6cdd1dULL;
    for (size_t i = 0; i < lines; i++)
        order[i] = (uint32_t)i;
    for (size_t i = lines - 1; i > 0; i--) {
        size_t j = next_random(&state) % (i + 1);
        uint32_t swap = order[i];
        order[i] = order[j];
        order[j] = swap;
    }
    for (size_t i = 0; i < lines; i++)
        memory[(size_t)order[i] * LINE_WORDS] = (uint64_t)order[(i + 1) % lines] * LINE_WORDS;
    for (size_t k = 1; k <= 32; k *= 2) {
        uint64_t at[32];
        for (size_t c = 0; c < k; c++)
            at[c] = (uint64_t)order[lines / k * c] * LINE_WORDS;
        const size_t steps = 4000000 / k;
        double start = seconds();
        for (size_t s = 0; s < steps; s++)
            for (size_t c = 0; c < k; c++)
                at[c] = memory[at[c]];
        double elapsed = seconds() - start;
        uint64_t sink = 0;
        for (size_t c = 0; c < k; c++)
            sink ^= at[c];
        printf("%2zu reads in flight: %6.1f ns per read%s\n", k, elapsed * 1e9 / (double)(steps * k),
               sink == UINT64_MAX ? " " : "");
    }
    free(order);
    munmap(memory, bytes);
    return 0;
}
