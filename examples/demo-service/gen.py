#!/usr/bin/env python3
"""Generate the hottext demo service: a large, front-end-bound C program.

The program answers synthetic requests.  Each request picks a handler with a
Zipf-like distribution; a handler calls a chain of functions several levels
deep, and every function picks one case of a switch from its argument, so the
callees depend on the data.  Functions are spread over tens of megabytes of
text, but each call runs only a short case near the function's entry: the rest
of the function is rare cases plus a never-taken block of padding.  The few
thousand hot functions are thus scattered over the whole text in the default
link order, and fit in a few 2 MiB pages once reordered.

Call graph (all of it decided here, deterministically from --seed):
  - level 0 holds the request handlers, level DEPTH the leaves; a function
    calls only functions of the next level, so there is no recursion;
  - case c of a switch runs with probability 2^-(c+1), the last case with
    2^-(CASES-1), chosen by the trailing zeros of a hash of the argument;
  - the common cases (c < HOT_CASES) call into a small "hot pool" of the next
    level, the rare cases anywhere in it; some leaves are static and only
    called from their own translation unit.

Output in --out: demo.h, main_tables.c, tu_NNN.c (one per unit), hot.txt (every
reachable function with its expected calls per request, hottest first) and
stats.txt (sizes and hot-set figures).  Same arguments, same bytes.
"""

import argparse
import math
import os
import sys

M64 = (1 << 64) - 1

# Shape of the call graph.  The defaults give about 11 calls per request, and
# a hot set of a few thousand functions (see stats.txt).
HANDLER_SHARE = 20   # one function in 20 is a request handler (level 0)
DEPTH = 7            # levels below the handlers
CASES = 6            # switch cases per function
HOT_CASES = 3        # cases 0..2 (7/8 of the calls) call into the hot pool
HOT_POOL = 0.08      # share of each level that the common cases call
ZIPF_S = 1.0         # exponent of the handler popularity
STATIC_SHARE = 0.3   # share of cold leaves made static (unit-local)
# Kinds of non-leaf cases, as cumulative weights out of 100, and their calls.
KINDS = (("compute", 15), ("call", 70), ("call2", 95), ("tail", 100))
CALLS = {"compute": 0, "call": 1, "call2": 2, "tail": 1}

# Padding: the never-taken block of each function is sized so that the text
# reaches --text-mb.  REAL_BYTES is the measured size of a function's real
# code (gcc 12, the Makefile's flags); PAD_SIGMA spreads the sizes
# (log-normal), PAD_MAX bounds them.
REAL_BYTES = 350
PAD_SIGMA = 1.0
PAD_MAX = 64 * 1024


class Rng:
    """splitmix64: small, fast, and the same in every Python version."""

    def __init__(self, seed):
        self.state = seed & M64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & M64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    def below(self, n):
        return self.next() % n

    def uniform(self):
        return (self.next() >> 11) * 2.0 ** -53

    def u32(self):
        return self.next() >> 32

    def odd32(self):
        return self.u32() | 1

    def shuffle(self, xs):
        for i in range(len(xs) - 1, 0, -1):
            j = self.below(i + 1)
            xs[i], xs[j] = xs[j], xs[i]


class Function:
    def __init__(self, ident):
        self.ident = ident
        self.salt = 0
        self.cases = []        # (kind, callees, k1, k2, shift)
        self.pad = 0
        self.cold_key = 0
        self.static = False
        self.called = False
        self.freq = 0.0        # expected calls per request


def case_probability(c):
    return 2.0 ** -(c + 1) if c < CASES - 1 else 2.0 ** -(CASES - 1)


def zipf_alias(n, s):
    """Zipf probabilities and Vose's alias table (threshold, alias) for them."""
    weights = [1.0 / (i + 1) ** s for i in range(n)]
    total = math.fsum(weights)
    probs = [w / total for w in weights]
    scaled = [p * n for p in probs]
    small = [i for i in range(n) if scaled[i] < 1.0]
    large = [i for i in range(n) if scaled[i] >= 1.0]
    threshold, alias = [1.0] * n, list(range(n))
    while small and large:
        s_i, l_i = small.pop(), large.pop()
        threshold[s_i], alias[s_i] = scaled[s_i], l_i
        scaled[l_i] -= 1.0 - scaled[s_i]
        (small if scaled[l_i] < 1.0 else large).append(l_i)
    q = [min(int(t * 2 ** 32), 2 ** 32 - 1) for t in threshold]
    return probs, q, alias


class Program:
    def __init__(self, n, seed, text_mb, units):
        self.rng = Rng(seed)
        self.units = units
        self.width = max(5, len(str(n - 1)))
        ids = list(range(n))
        self.rng.shuffle(ids)
        n_handlers = max(2, n // HANDLER_SHARE)
        sizes = [n_handlers] + [(n - n_handlers) // DEPTH] * DEPTH
        sizes[-1] += n - sum(sizes)
        self.levels, start = [], 0
        for size in sizes:
            self.levels.append([Function(i) for i in ids[start:start + size]])
            start += size
        self.funcs = sorted((f for lv in self.levels for f in lv), key=lambda f: f.ident)
        self.request_salt = self.rng.next()
        self.mark_statics()
        self.build_calls()
        self.size_padding(text_mb * 1024 * 1024)
        self.compute_frequencies()

    def name(self, f):
        return "f_%0*d" % (self.width, f.ident)

    def unit_of(self, f):
        return f.ident * self.units // len(self.funcs)

    def mark_statics(self):
        leaves = self.levels[-1]
        pool = max(1, int(len(leaves) * HOT_POOL))
        self.local_leaves = [[] for _ in range(self.units)]
        for f in leaves[pool:]:
            if self.rng.uniform() < STATIC_SHARE:
                f.static = True
                self.local_leaves[self.unit_of(f)].append(f)

    def build_calls(self):
        rng = self.rng
        for depth, level in enumerate(self.levels):
            below = self.levels[depth + 1] if depth < DEPTH else []
            pool = max(1, int(len(below) * HOT_POOL))
            public = [g for g in below if not g.static]
            for f in level:
                f.salt = rng.u32()
                for c in range(CASES):
                    kind = "compute"
                    if below:
                        roll = rng.below(100)
                        kind = next(k for k, w in KINDS if roll < w)
                    callees = []
                    for _ in range(CALLS[kind]):
                        if c < HOT_CASES:
                            g = below[rng.below(pool)]
                        else:
                            local = self.local_leaves[self.unit_of(f)] if depth == DEPTH - 1 else []
                            if local and rng.uniform() < STATIC_SHARE:
                                g = local[rng.below(len(local))]
                            else:
                                g = public[rng.below(len(public))]
                        g.called = True
                        callees.append(g)
                    f.cases.append((kind, callees, rng.u32(), rng.odd32(), 1 + rng.below(63)))
                f.cold_key = rng.u32()
        for f in self.levels[-1]:
            if f.static and not f.called:
                f.static = False   # an uncalled static would be a warning

    def size_padding(self, text_bytes):
        mean = max(0, text_bytes // len(self.funcs) - REAL_BYTES)
        for f in self.funcs:
            # Box-Muller, then a log-normal factor with mean 1.
            u1, u2 = 1.0 - self.rng.uniform(), self.rng.uniform()
            z = math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)
            factor = math.exp(PAD_SIGMA * z - PAD_SIGMA ** 2 / 2.0)
            f.pad = min(PAD_MAX, int(mean * factor) // 16 * 16)

    def compute_frequencies(self):
        self.handler_probs, self.alias_q, self.alias = zipf_alias(len(self.levels[0]), ZIPF_S)
        for f, p in zip(self.levels[0], self.handler_probs):
            f.freq = p
        for level in self.levels:
            for f in level:
                for c, (_, callees, _, _, _) in enumerate(f.cases):
                    for g in callees:
                        g.freq += f.freq * case_probability(c)

    # ---- emission -------------------------------------------------------

    def emit_case(self, f, c, case):
        kind, callees, k1, k2, shift = case
        label = "\tcase %d:\n" % c if c < CASES - 1 else "\tdefault:\n"
        names = [self.name(g) for g in callees]
        if kind == "compute":
            body = ("\t\tr = (y ^ 0x%08xU) * 0x%08xU;\n\t\tr ^= r >> %d;\n"
                    % (k1, k2, shift))
        elif kind == "call":
            body = ("\t\tr = %s(y + 0x%08xU);\n\t\tr = demo_rotl(r, %d) ^ 0x%08xU;\n"
                    % (names[0], k1, shift, k2))
        elif kind == "call2":
            body = ("\t\tr = %s(y ^ 0x%08xU);\n\t\tr += %s(r * 0x%08xU + y);\n"
                    % (names[0], k1, names[1], k2))
        else:
            return label + "\t\treturn %s(y - 0x%08xU);\n" % (names[0], k1)
        return label + body + "\t\tbreak;\n"

    def emit_function(self, f):
        out = ["%sDEMO_FN uint64_t %s(uint64_t x)\n{\n" % ("static " if f.static else "", self.name(f)),
               "\tuint64_t y = demo_mix(x ^ 0x%08xU);\n\tuint64_t r;\n\n" % f.salt,
               "\tswitch (demo_pick(y)) {\n"]
        out += [self.emit_case(f, c, case) for c, case in enumerate(f.cases)]
        out.append("\t}\n")
        if f.pad:
            out.append("\tif (__builtin_expect(r == 0x%08xU, 0))\n\t\tDEMO_PAD(%d);\n"
                       % (f.cold_key, f.pad))
        out.append("\treturn r ^ y;\n}\n")
        return "".join(out)

    def header(self, what):
        return "/* %s of the hottext demo service, generated by gen.py: do not edit. */\n" % what

    def emit_unit(self, u, funcs):
        called = sorted({g.ident for f in funcs for case in f.cases for g in case[1]})
        out = [self.header("Unit %d" % u), '#include "demo.h"\n\n']
        for i in called:
            g = self.funcs[i]
            out.append("%suint64_t %s(uint64_t x);\n" % ("static " if g.static else "", self.name(g)))
        for f in funcs:
            out.append("\n" + self.emit_function(f))
        return "".join(out)

    def emit_main(self):
        handlers = self.levels[0]
        out = [self.header("Request dispatch"), '#include "demo.h"\n\n']
        out += ["uint64_t %s(uint64_t x);\n" % self.name(f) for f in handlers]
        out.append("\nconst uint64_t demo_request_salt = 0x%016xULL;\n" % self.request_salt)
        out.append("const demo_handler demo_handlers[DEMO_HANDLERS] = {\n")
        out += ["\t%s,\n" % self.name(f) for f in handlers]
        out.append("};\n\n/* Zipf handler choice: Vose's alias table. */\n")
        out.append("const uint32_t demo_alias_threshold[DEMO_HANDLERS] = {\n")
        out += ["\t%du,\n" % q for q in self.alias_q]
        out.append("};\n\nconst uint16_t demo_alias_other[DEMO_HANDLERS] = {\n")
        out += ["\t%d,\n" % a for a in self.alias]
        out.append("};\n")
        return "".join(out)

    def emit_header(self):
        return self.header("Common header") + HEADER % {
            "handlers": len(self.levels[0]), "cases": CASES}

    def emit_hot(self):
        reached = sorted((f for f in self.funcs if f.freq > 0), key=lambda f: (-f.freq, f.ident))
        out = ["# hottext demo: expected calls per request, hottest first\n"]
        out += ["%s %.6e\n" % (self.name(f), f.freq) for f in reached]
        return "".join(out)

    def emit_stats(self):
        freqs = sorted((f.freq for f in self.funcs), reverse=True)
        total = math.fsum(freqs)
        lines = ["functions %d" % len(self.funcs),
                 "handlers %d" % len(self.levels[0]),
                 "levels %d" % len(self.levels),
                 "units %d" % self.units,
                 "static %d" % sum(f.static for f in self.funcs),
                 "padding_bytes %d" % sum(f.pad for f in self.funcs),
                 "reachable %d" % sum(1 for v in freqs if v > 0),
                 "calls_per_request %.3f" % total]
        acc, i = 0.0, 0
        for share in (0.5, 0.8, 0.9, 0.95, 0.99):
            while acc < share * total:
                acc += freqs[i]
                i += 1
            lines.append("hot_set_%d %d" % (round(share * 100), i))
        return "\n".join(lines) + "\n"

    def write(self, out_dir):
        os.makedirs(out_dir, exist_ok=True)
        files = {"demo.h": self.emit_header(), "main_tables.c": self.emit_main(),
                 "hot.txt": self.emit_hot(), "stats.txt": self.emit_stats()}
        units = [[] for _ in range(self.units)]
        for f in self.funcs:
            units[self.unit_of(f)].append(f)
        for u, funcs in enumerate(units):
            files["tu_%03d.c" % u] = self.emit_unit(u, funcs)
        for name, text in files.items():
            with open(os.path.join(out_dir, name), "w", encoding="ascii") as fh:
                fh.write(text)


HEADER = r"""#ifndef DEMO_H
#define DEMO_H

#include <stdint.h>

#define DEMO_HANDLERS %(handlers)d
#define DEMO_CASES %(cases)d

/* Every generated function is a real, separate call: no inlining, no clones. */
#define DEMO_FN __attribute__((noinline, noclone))

/* Never-executed bulk of a function (NOPs, harmless if ever run). */
#define DEMO_PAD(bytes) __asm__ volatile(".fill " #bytes ", 1, 0x90")

typedef uint64_t (*demo_handler)(uint64_t);

extern const uint64_t demo_request_salt;
extern const demo_handler demo_handlers[DEMO_HANDLERS];
extern const uint32_t demo_alias_threshold[DEMO_HANDLERS];
extern const uint16_t demo_alias_other[DEMO_HANDLERS];

static inline uint64_t demo_mix(uint64_t v)
{
	v ^= v >> 31;
	v *= 0x9e3779b97f4a7c15ULL;
	v ^= v >> 29;
	return v;
}

static inline uint64_t demo_rotl(uint64_t v, unsigned s)
{
	return (v << s) | (v >> (64 - s));
}

/* Case c with probability 2^-(c+1); the last case takes the rest. */
static inline unsigned demo_pick(uint64_t y)
{
	return (unsigned)__builtin_ctzll((y >> 40) | (1ULL << (DEMO_CASES - 1)));
}

#endif
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--functions", type=int, default=40000, help="number of functions (default 40000)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the call graph (default 1)")
    ap.add_argument("--text-mb", type=float, default=64, help="approximate text size in MiB (default 64)")
    ap.add_argument("--units", type=int, default=64, help="translation units (default 64)")
    args = ap.parse_args()
    if args.functions < 100 or args.units < 1 or args.text_mb < 0:
        ap.error("need --functions >= 100, --units >= 1, --text-mb >= 0")
    if args.functions // HANDLER_SHARE > 65535:
        ap.error("too many functions: handler indices are 16-bit")
    prog = Program(args.functions, args.seed, args.text_mb, args.units)
    prog.write(args.out)
    sys.stderr.write(prog.emit_stats())


if __name__ == "__main__":
    main()
