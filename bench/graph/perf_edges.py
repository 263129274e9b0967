#!/usr/bin/env python3
"""perf's own view of a recording's samples, in the benchmark's edge format.

    perf_edges.py PERF_DATA BINARY > perf.edges

Runs `perf script -F ip,sym,dso` (perf symbolises and, for --call-graph dwarf, unwinds) and
writes, like callgrind_edges.py:

    self <function> <samples>           samples whose innermost frame is in <function>
    call <caller> <callee> <samples>    samples whose innermost frame is in <callee> and the
                                        next one in <caller>

only for frames in BINARY (perf's dso path).  This is the same definition as hottext's stack
graph, without hottext's frame repair: where the two differ, hottext's reading of the samples
differs from perf's.  Kernel frames (a sample taken in a system call, when the event counts the
kernel too) are passed over to the first user frame.  Samples whose innermost user frame is
outside BINARY or has no symbol are counted on stderr.
"""

import os
import re
import subprocess
import sys
from collections import Counter

FRAME = re.compile(r"^\s*([0-9a-f]+)\s+(.*?)\s+\((.*)\)$")


def escape(name):
    """hottext's profile escape (DESIGN.md): whitespace, control characters and % as %XX."""
    return "".join(f"%{ord(c):02X}" if c.isspace() or ord(c) < 32 or c in "%\x7f" else c for c in name)


def samples(lines):
    """Each sample as its list of (symbol, dso) frames, innermost first.  perf script writes a
    callchain's frames on lines that start with a tab and ends it with a blank line; a sample
    without a callchain is one line that starts with spaces."""
    frames = []
    for line in lines:
        if not line.strip():
            if frames:
                yield frames
            frames = []
            continue
        m = FRAME.match(line.rstrip("\n"))
        if not m:
            raise SystemExit(f"perf_edges: not a perf script frame: {line.strip()[:80]!r}")
        frames.append((m.group(2), m.group(3)))
        if not line.startswith("\t"):  # a line of its own: no callchain
            yield frames
            frames = []
    if frames:
        yield frames


def main(argv):
    if len(argv) != 3:
        print("usage: perf_edges.py PERF_DATA BINARY", file=sys.stderr)
        return 2
    data, binary = argv[1], os.path.realpath(argv[2])
    perf = subprocess.Popen(["perf", "script", "-i", data, "-F", "ip,sym,dso"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            errors="surrogateescape")
    selfs, calls, skipped = Counter(), Counter(), Counter()
    ours = {}  # dso path -> whether it is BINARY
    for frames in samples(perf.stdout):
        user = [(sym, dso) for sym, dso in frames if not dso.startswith("[kernel")]
        if not user:
            skipped["kernel only"] += 1
            continue
        in_binary = []
        for sym, dso in user[:2]:
            if dso not in ours:
                ours[dso] = os.path.realpath(dso) == binary
            in_binary.append(ours[dso] and sym != "[unknown]")
        if not in_binary[0]:
            skipped["innermost frame not in the binary"] += 1
            continue
        callee = escape(user[0][0])
        selfs[callee] += 1
        if len(user) > 1 and in_binary[1]:
            calls[(escape(user[1][0]), callee)] += 1
    if perf.wait() != 0:
        print(f"perf_edges: perf script -i {data} failed with status {perf.returncode}", file=sys.stderr)
        return 2
    for reason, n in sorted(skipped.items()):
        print(f"perf_edges: {n} samples: {reason}", file=sys.stderr)
    out = [f"self {name} {n}" for name, n in sorted(selfs.items())]
    out += [f"call {a} {b} {n}" for (a, b), n in sorted(calls.items())]
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
