#!/usr/bin/env python3
"""The share of a split binary's executed instructions that ran in its `.cold` parts.

    cold_share.py BINARY CALLGRIND_OUT...

CALLGRIND_OUT: `HOTTEXT_HUGIFY=0 valgrind --tool=callgrind --dump-instr=yes` of BINARY
(several are summed).
An instruction counts as cold when its address lies in the `nm -n` range of a `NAME.cold`
symbol (up to the next symbol): valgrind does not name those untyped symbols itself, so its
own function names would file the instructions under other functions. The share is of every
instruction the process ran (the file's `totals:`, libraries and start-up included).

Code that valgrind finds in no file (`ob=???`) counts as the binary's, moved by its load
address: the binary's hot range linked by hottext's ld script is such code to valgrind 3.19
(with or without the runtime's huge pages), its addresses those of the run, where the
binary's own are the file's. The load address is the one most of that code's functions agree
on (callgrind still names them) against `nm`.
"""

import bisect
import re
import subprocess
import sys
from collections import Counter

from trace_edges import trace


def load_bias(path, address_of):
    """The load address of the binary's code under `ob=???` in PATH: the most common
    difference between a function's first address there and its symbol's."""
    diffs, names, anonymous, want_first = Counter(), {}, False, None
    with open(path) as f:
        for line in f:
            if line.startswith(("ob=", "cob=")):
                m = re.match(r"^c?ob=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
                if m and m.group(2) is not None:
                    names[m.group(1)] = m.group(2)
                if line.startswith("ob="):
                    anonymous = (names.get(m.group(1)) if m else line[3:].strip()) == "???"
            elif anonymous and line.startswith("fn="):
                name = line.rstrip("\n").split(" ", 1)[-1]
                want_first = address_of.get(name)
            elif want_first is not None and line.startswith("0x"):
                diffs[int(line.split()[0], 16) - want_first] += 1
                want_first = None
    return diffs.most_common(1)[0][0] if diffs else 0


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    binary, files = argv[1], argv[2:]
    out = subprocess.run(["nm", "-n", binary], capture_output=True, text=True, check=True).stdout
    syms = [(int(f[0], 16), f[2]) for f in (line.split() for line in out.splitlines()) if len(f) == 3]
    address_of = {name: addr for addr, name in syms}
    addrs = [a for a, _ in syms]
    total = cold = 0
    for path in files:
        with open(path) as f:
            total += sum(int(line.split()[1]) for line in f if line.startswith("totals:"))
        bias = load_bias(path, address_of)
        execs, _ = trace(path, binary, lambda a: True)
        anonymous, _ = trace(path, "???", lambda a: True)  # at load addresses
        for addr, n in list(execs.items()) + [(a - bias, n) for a, n in anonymous.items()]:
            i = bisect.bisect_right(addrs, addr) - 1
            if i >= 0 and syms[i][1].endswith(".cold"):
                cold += n
    print(f"{binary}: {cold:,} of {total:,} instructions ({cold / max(total, 1):.1%}) in .cold parts")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
