/* Fuzz target for the hot-range parser of libhottext_preload.so (src/ranges.c).
 *
 * Each input is read twice, as HOTTEXT_RANGES (up to its first NUL) and as a
 * HOTTEXT_RANGES_FILE (an in-memory file), then normalised; what the parser
 * keeps must be non-empty ranges, at most HX_MAX_RANGES of them, none from a
 * source it refused (one bad entry voids its source), and after normalising
 * sorted and 2 MiB apart. A violation aborts, which the fuzzer reports with
 * the input.
 *
 * Built two ways:
 *   clang -fsanitize=fuzzer,address,undefined        libFuzzer (`make fuzz`)
 *   gcc -fsanitize=address,undefined -DFUZZ_SMOKE    a main that runs the seed
 *       files given as arguments and deterministic mutations of them (the
 *       smoke run of `make test`, tests/run.sh) */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../src/internal.h"

/* The build-id a "# build-id:" line of a seed names, as if it were the program's. */
static const unsigned char build_id[20] = {0xe4, 0xd0, 0x87, 0x90, 0x84, 0xab, 0xe2, 0x9b, 0xb8, 0x35,
                                           0x5b, 0x45, 0x9f, 0xb7, 0xe3, 0x0a, 0xb5, 0x11, 0x88, 0x96};

static void check_kept(const struct hx_ranges *rs)
{
    if (rs->n > HX_MAX_RANGES)
        abort();
    for (size_t i = 0; i < rs->n; i++)
        if (rs->r[i].b <= rs->r[i].a)
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hx_ranges rs;
    memset(&rs, 0, sizeof rs);
    char *env = strndup((const char *)data, size);
    if (!env)
        return 0;
    hottext__ranges_env(&rs, env);
    free(env);
    check_kept(&rs);
    if (rs.bad && rs.n)
        abort(); /* a refused HOTTEXT_RANGES added ranges */
    size_t kept_before = rs.n;
    int bad_before = rs.bad;

    int fd = memfd_create("hottext-fuzz-ranges", 0);
    if (fd < 0)
        abort();
    for (size_t done = 0; done < size;) {
        ssize_t n = write(fd, data + done, size - done);
        if (n <= 0)
            abort();
        done += (size_t)n;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    hottext__ranges_file(&rs, path, build_id, sizeof build_id);
    close(fd);
    check_kept(&rs);
    if (rs.bad != bad_before && rs.n != kept_before)
        abort(); /* a refused file added ranges */

    hottext__ranges_normalise(&rs);
    check_kept(&rs);
    for (size_t i = 1; i < rs.n; i++)
        if (rs.r[i].a < rs.r[i - 1].b || rs.r[i].a - rs.r[i - 1].b < HX_HUGE)
            abort();
    return 0;
}

#ifdef FUZZ_SMOKE
static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint64_t next(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545f4914f6cdd1du;
}

static size_t below(size_t n)
{
    return n ? (size_t)(next() % n) : 0;
}

/* One to four edits: flip a bit, set a byte, insert a token, cut a piece, truncate. */
static size_t mutate(unsigned char *buf, size_t len, size_t cap)
{
    static const char *tokens[] = {"0x", "-", ",", " ", "\t", "\n", "#", "# build-id: ", "ffffffffffffffff",
                                   "10000000000000000", "0x200000", "\0", "e4d0879084abe29b"};
    for (size_t edits = 1 + below(4); edits; edits--) {
        size_t at = below(len + 1);
        switch (below(5)) {
        case 0:
            if (len)
                buf[below(len)] ^= (unsigned char)(1u << below(8));
            break;
        case 1:
            if (len)
                buf[below(len)] = (unsigned char)next();
            break;
        case 2: {
            size_t t = below(sizeof tokens / sizeof *tokens);
            size_t n = *tokens[t] ? strlen(tokens[t]) : 1;
            if (len + n <= cap) {
                memmove(buf + at + n, buf + at, len - at);
                memcpy(buf + at, tokens[t], n);
                len += n;
            }
            break;
        }
        case 3: {
            size_t n = below(32);
            if (at + n > len)
                n = len - at;
            memmove(buf + at, buf + at + n, len - at - n);
            len -= n;
            break;
        }
        default:
            len = at;
        }
    }
    return len;
}

int main(int argc, char **argv)
{
    enum { CAP = 1 << 16, ROUNDS = 20000 };
    static unsigned char seeds[16][CAP], buf[CAP];
    size_t lens[16], nseeds = 0;
    for (int i = 1; i < argc && nseeds < 16; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) {
            perror(argv[i]);
            return 2;
        }
        lens[nseeds] = fread(seeds[nseeds], 1, CAP / 2, f);
        fclose(f);
        LLVMFuzzerTestOneInput(seeds[nseeds], lens[nseeds]);
        nseeds++;
    }
    if (!nseeds) {
        fprintf(stderr, "usage: %s SEED...\n", argv[0]);
        return 2;
    }
    for (int round = 0; round < ROUNDS; round++) {
        size_t s = below(nseeds), len = lens[s];
        memcpy(buf, seeds[s], len);
        len = mutate(buf, len, CAP);
        LLVMFuzzerTestOneInput(buf, len);
    }
    printf("%zu seeds and %d mutations: no failure\n", nseeds, ROUNDS);
    return 0;
}
#endif
