#!/usr/bin/env python3
"""Exact block edges from an instruction trace, for bench/blocks/run.sh's split-edges arms.

    trace_edges.py PROFILE BINARY CALLGRIND_OUT... > PROFILE-v5

Stands in for branch records (LBR, AMD's BRS), which a machine without a PMU cannot record:
callgrind run with `--dump-instr=yes --collect-jumps=yes` on BINARY (the binary PROFILE was
recorded from, under the same kind of load) counts every instruction's executions and every
jump's source, target and count. Against BINARY's block map (`llvm-readobj-19 --bb-addr-map`,
the block ids of the map), for each function PROFILE has a `fn` line for:

- a *jump* edge: a `jump=`/`jcnd=` record from a byte of one block to the first byte of a block
  of the same function (the same block too: a loop of one block);
- a *fall-through* edge: a block that can fall through (the map's CanFallThrough: its last
  instruction is no return or unconditional jump) passes to the next block by address as often
  as its last executed instruction ran minus the jumps taken from it (for a conditional jump,
  executed - taken), at most as often as the next block ran;
- a block that ran (any of its instructions executed) and has no `block` line gets one, with 0
  samples, as `hottext profile` writes blocks that ran unsampled.

Output: PROFILE with those `block` lines, then the `block-edge` lines, its first line saying
v5; totals on stderr. Several callgrind files (one per process of a server) are summed.

What this overstates: the counts are exact, every transfer of the traced run. A sampled LBR
recording sees only the last 32 branches before each sample, so its edges are a sample of these
(rare edges missing, counts noisy), and the run traced is not the run recorded. Only the
profile's functions get edges and blocks: a function that drew no sample (not in PROFILE) gets
none, as with branch records, whose functions come from the same samples.
"""

import bisect
import os
import re
import subprocess
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "graph"))
from callgrind_edges import escape  # noqa: E402  (hottext's name escape, one home)

class Error(Exception):
    pass


def symbols(binary):
    """{hottext name: address} of the binary's functions: `name`, and `name;file.c` for a local
    function whose name several share (the file is the STT_FILE symbol before it)."""
    out = subprocess.run(["readelf", "-sW", binary], capture_output=True, text=True, check=True).stdout
    in_symtab, current_file = False, ""
    by_name = defaultdict(list)  # name -> [(address, file, bind)]
    for line in out.splitlines():
        if line.startswith("Symbol table"):
            in_symtab = "'.symtab'" in line
            continue
        f = line.split()
        if not in_symtab or len(f) < 8 or not f[0].endswith(":"):
            continue
        kind, bind, name = f[3], f[4], f[7]
        if kind == "FILE":
            current_file = name
        elif kind == "FUNC" and f[6] != "UND":
            by_name[name].append((int(f[1], 16), current_file, bind))
    names = {}
    for name, defs in by_name.items():
        for addr, file, bind in defs:
            if len({a for a, _, _ in defs}) > 1 and bind == "LOCAL":
                names[f"{escape(name)};{file}"] = addr
            names.setdefault(escape(name), addr)
    return names


def block_map(binary):
    """{function address: [(start address, id, size, can fall through)] by address}."""
    out = subprocess.run(["llvm-readobj-19", "--bb-addr-map", binary], capture_output=True,
                         text=True, check=True).stdout
    funcs, func, base, block = {}, None, None, {}
    for line in out.splitlines():
        key, _, value = line.strip().partition(": ")
        if key == "At":
            func = funcs.setdefault(int(value, 16), [])
        elif key == "Base Address":
            base = int(value, 16)
        elif key == "ID":
            block = {"id": int(value)}
        elif key == "Offset":
            block["start"] = base + int(value, 16)
        elif key == "Size":
            block["size"] = int(value, 16)
        elif key == "CanFallThrough":
            func.append((block["start"], block["id"], block["size"], value == "Yes"))
    for blocks in funcs.values():
        blocks.sort()
    return funcs


def position(field, last):
    """A callgrind instruction position: absolute (0x…), relative (+n, -n) or the same (*)."""
    if field == "*":
        return last
    if field[0] in "+-":
        return last + int(field)
    return int(field, 16)


def trace(path, binary, wanted):
    """The executions of each instruction of BINARY whose address `wanted` accepts, and the
    jumps from them: ({address: count}, {(source, target): count}). BINARY "???" selects the
    code valgrind found in no file instead."""
    want = binary if binary == "???" else os.path.realpath(binary)
    names = {"ob": {}}
    execs, jumps = defaultdict(int), defaultdict(int)
    ours, last, after = False, 0, None  # after: "call" or (target, count) of the line before
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        for number, line in enumerate(f, 1):
            if not line.strip() or line.startswith("#"):
                continue
            if line[0] in "0123456789+-*":
                fields = line.split()
                last = pos = position(fields[0], last)
                if after is None:  # an instruction's own cost: Ir first
                    if ours and len(fields) > 2 and wanted(pos):
                        execs[pos] += int(fields[2])
                elif after != "call":  # the source of the jump on the line before
                    target, count = after
                    if ours and wanted(pos):
                        jumps[(pos, target)] += count
                after = None
                continue
            key, _, value = line.rstrip("\n").partition("=")
            if key in ("ob", "cob"):  # one compression table for both
                m = re.match(r"^\((\d+)\)(?: (.*))?$", value)
                if m and m.group(2) is not None:
                    names["ob"][m.group(1)] = m.group(2)
                if key == "cob":
                    continue
                obj = names["ob"].get(m.group(1)) if m else value
                if obj is None:
                    raise Error(f"{path}: line {number}: ob=({m.group(1)}) used before it was named")
                ours = (obj if want == "???" else os.path.realpath(obj)) == want
            elif key == "calls":  # the next line is the call's inclusive cost: not executions
                after = "call"
            elif key in ("jump", "jcnd"):
                # jump=COUNT TARGET; jcnd=TAKEN/EXECUTED TARGET; the next line is the source.
                count, target = value.split()[:2]
                after = (position(target, last), int(count.split("/")[0]))
    return execs, jumps


def main(argv):
    if len(argv) < 4:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    profile, binary, files = argv[1], argv[2], argv[3:]
    lines = open(profile).read().splitlines()
    if not lines or not re.match(r"^# hottext profile v[1-5]$", lines[0]):
        raise Error(f"{profile}: line 1 is not a hottext profile header")
    fn_sizes = {l.split()[1]: int(l.split()[2]) for l in lines if l.startswith("fn ")}
    have = {(l.split()[1], int(l.split()[2])) for l in lines if l.startswith("block ")}
    if any(l.startswith("block-edge ") for l in lines):
        raise Error(f"{profile} has block-edge lines already")

    addr_of, maps = symbols(binary), block_map(binary)
    funcs = {}  # name -> (address, blocks)
    for name in fn_sizes:
        addr = addr_of.get(name)
        if addr is not None and addr in maps:
            funcs[name] = (addr, maps[addr])
    print(f"trace_edges: {len(funcs)} of the profile's {len(fn_sizes)} functions have a block map",
          file=sys.stderr)
    ranges = sorted((b[0][0], b[-1][0] + b[-1][2], name) for name, (_, b) in funcs.items() if b)
    starts = [r[0] for r in ranges]

    def owner(addr):
        i = bisect.bisect_right(starts, addr) - 1
        return ranges[i][2] if i >= 0 and addr < ranges[i][1] else None

    execs, jumps = defaultdict(int), defaultdict(int)
    for path in files:
        e, j = trace(path, binary, lambda a: owner(a) is not None)
        for k, v in e.items():
            execs[k] += v
        for k, v in j.items():
            jumps[k] += v
    by_func = defaultdict(list)  # name -> sorted executed addresses
    for addr in sorted(execs):
        by_func[owner(addr)].append(addr)
    jumps_from = defaultdict(list)
    for (src, dst), n in jumps.items():
        jumps_from[src].append((dst, n))

    new_blocks, edges = [], []
    outside = 0
    for name, (faddr, blocks) in sorted(funcs.items()):
        ran_addrs = by_func.get(name, [])
        if not ran_addrs:
            continue
        first = {b[0]: b for b in blocks}
        counts = defaultdict(int)
        ran = set()
        for i, (start, bid, size, falls) in enumerate(blocks):
            lo = bisect.bisect_left(ran_addrs, start)
            hi = bisect.bisect_left(ran_addrs, start + size)
            if lo == hi:
                continue
            ran.add(bid)
            taken_last = 0
            for addr in ran_addrs[lo:hi]:
                for dst, n in jumps_from.get(addr, ()):
                    if dst in first:
                        counts[(bid, first[dst][1])] += n
                    if addr == ran_addrs[hi - 1]:
                        taken_last += n
            if falls and i + 1 < len(blocks):
                nxt = blocks[i + 1]
                through = min(execs[ran_addrs[hi - 1]] - taken_last, execs.get(nxt[0], 0))
                if through > 0:
                    counts[(bid, nxt[1])] += through
        size_of = fn_sizes[name]
        fits = set()
        for start, bid, size, _ in blocks:
            if bid not in ran:
                continue
            if start - faddr + size > size_of or start < faddr:
                outside += 1  # past the fn line's size: the reader would refuse it
                continue
            fits.add(bid)
            if (name, bid) not in have:
                new_blocks.append((name, bid, start - faddr, size))
        for (a, b), n in sorted(counts.items()):
            if a in fits and b in fits:
                edges.append((name, a, b, n))

    blocks_out = [l for l in lines if l.startswith("block ")]
    blocks_out += [f"block {n} {i} {o} {s} 0" for n, i, o, s in new_blocks]
    blocks_out.sort(key=lambda l: (l.split()[1], int(l.split()[2])))
    out = ["# hottext profile v5"] + [l for l in lines[1:] if not l.startswith("block ")]
    out += blocks_out + [f"block-edge {n} {a} {b} {c}" for n, a, b, c in edges]
    sys.stdout.write("\n".join(out) + "\n")
    print(f"trace_edges: {len(edges)} block edges ({sum(e[3] for e in edges):,} transfers) in "
          f"{len({e[0] for e in edges})} functions; {len(new_blocks)} blocks added to the "
          f"{len(have)} the profile had; {outside} blocks past their fn line's size left out",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except (OSError, Error, subprocess.CalledProcessError) as e:
        print(f"trace_edges: {e}", file=sys.stderr)
        sys.exit(2)
