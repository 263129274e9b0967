#!/usr/bin/env python3
"""BOLT 19's call graph of a sample-only recording, in the benchmark's edge format.

    bolt_edges.py CG_DOT FDATA > bolt.edges

FDATA is `perf2bolt -nl`'s profile of a recording without call chains (`no_lbr` lines: `1
<function> <offset> <samples>`), CG_DOT the call graph `llvm-bolt -data=FDATA
-reorder-functions=cdsort --dump-cg=CG_DOT` builds from it to order functions (BOLT needs the
binary linked with --emit-relocs to reorder, so to build this graph at all).  BOLT weighs an edge
`caller -> callee` by the count it infers for the block holding the direct call, from the samples
around it: a number of calls, not the callee's self cost that the truth and hottext's graph
measure.  To compare the same quantity, each callee's self samples (from FDATA) are split over
its callers in proportion to BOLT's weights:

    self <function> <samples>
    call <caller> <callee> <samples * weight / sum of the callee's weights>

(rounded to whole samples that add up to the callee's, so that compare.py's floor counts them),
so the figures measure BOLT's caller attribution on the same hot set as hottext's reading.  A
callee whose callers all weigh 0 (calls BOLT found in blocks without samples) gets no edge.
BOLT names a local function `name/N` (or `name/file/N` in FDATA), and adds `(*N)` in CG_DOT
when N symbols name a function; all are cut to `name`, as callgrind names it without debug
information.
"""

import re
import sys
from collections import defaultdict

from perf_edges import escape

NODE = re.compile(r'^(\w+) \[label="(.*?)\\nsamples=')
ALIASES = re.compile(r"\(\*\d+\)$")
EDGE = re.compile(r'^(\w+) -> (\w+) \[label="[^"]*?\bweight=([0-9.]+)')


def plain(name):
    """BOLT's name of a function without the `/N` or `/file/N` it gives local symbols and the
    `(*N)` it adds in CG_DOT where N symbols name the function."""
    return ALIASES.sub("", name).split("/", 1)[0]


def self_samples(path):
    selfs = defaultdict(int)
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        for number, line in enumerate(f, 1):
            fields = line.split()
            if number == 1 and fields and fields[0] == "no_lbr":
                continue
            if len(fields) != 4 or fields[0] != "1" or not fields[3].isdigit():
                raise SystemExit(f"bolt_edges: {path}:{number}: not a no_lbr sample line "
                                 f"(perf2bolt -nl): {line.strip()[:80]!r}")
            selfs[plain(fields[1])] += int(fields[3])
    return selfs


def call_weights(path):
    """BOLT's edges as {(caller, callee): weight}."""
    names, weights, unnamed = {}, defaultdict(float), 0
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        for number, line in enumerate(f, 1):
            if m := NODE.match(line):
                names[m.group(1)] = plain(m.group(2))
            elif m := EDGE.match(line):
                # BOLT prints only the nodes with samples, and every edge: an edge to or from a
                # node without samples carries no self cost to split.
                if m.group(1) in names and m.group(2) in names:
                    weights[(names[m.group(1)], names[m.group(2)])] += float(m.group(3))
                elif float(m.group(3)) > 0:
                    unnamed += 1
            elif line.strip() not in ("digraph g {", "}", ""):
                raise SystemExit(f"bolt_edges: {path}:{number}: not a node or edge of llvm-bolt "
                                 f"--dump-cg: {line.strip()[:80]!r}")
    if unnamed:
        print(f"bolt_edges: {unnamed} edges of some weight with an end without samples, left out", file=sys.stderr)
    return weights


def split(samples, weights):
    """samples (an int) in whole parts proportional to weights {caller: weight}, largest
    remainders first, so that the parts add up to samples."""
    total = sum(weights.values())
    exact = {caller: samples * w / total for caller, w in weights.items()}
    parts = {caller: int(x) for caller, x in exact.items()}
    by_remainder = sorted(exact, key=lambda caller: (parts[caller] - exact[caller], caller))
    for caller in by_remainder[:samples - sum(parts.values())]:
        parts[caller] += 1
    return parts


def main(argv):
    if len(argv) != 3:
        print("usage: bolt_edges.py CG_DOT FDATA", file=sys.stderr)
        return 2
    weights, selfs = call_weights(argv[1]), self_samples(argv[2])
    callers = defaultdict(dict)  # callee -> {caller: BOLT's weight}
    for (caller, callee), w in weights.items():
        if w > 0:
            callers[callee][caller] = w
    out = [f"self {escape(name)} {n}" for name, n in sorted(selfs.items())]
    for callee, its in sorted(callers.items()):
        for caller, n in sorted(split(selfs.get(callee, 0), its).items()):
            if n:
                out.append(f"call {escape(caller)} {escape(callee)} {n}")
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
