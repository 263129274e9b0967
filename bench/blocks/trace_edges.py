#!/usr/bin/env python3
"""Exact block edges from an instruction trace, for bench/blocks/run.sh's split-edges arms (and,
in BOLT's pre-aggregated format, for its bolt-full-edges arms: see bolt_preaggregated).

    trace_edges.py PROFILE BINARY CALLGRIND_OUT... > PROFILE-v5
    trace_edges.py --bolt BINARY CALLGRIND_OUT... > PRE-AGGREGATED (perf2bolt -pa's input)
    trace_edges.py --bolt-sampled PROFILE BINARY CALLGRIND_OUT... > PRE-AGGREGATED

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
    jumps and calls from them: ({address: count}, {(source, target): count} of the jumps, the
    same of the calls into BINARY). BINARY "???" selects the code valgrind found in no file
    instead."""
    want = binary if binary == "???" else os.path.realpath(binary)
    names = {"ob": {}}
    execs, jumps, calls = defaultdict(int), defaultdict(int), defaultdict(int)
    # after: what the line before said of the next position line: None (an instruction's own
    # cost), ("jump", target, count) or ("call", target, count, callee in BINARY).
    ours, callee_ours, last, after = False, None, 0, None
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
                elif ours and wanted(pos):  # the source of the jump or call on the line before
                    if after[0] == "jump":
                        jumps[(pos, after[1])] += after[2]
                    elif after[3]:  # the call's line: its inclusive cost, not executions
                        calls[(pos, after[1])] += after[2]
                after = None
                continue
            key, _, value = line.rstrip("\n").partition("=")
            if key in ("ob", "cob"):  # one compression table for both
                m = re.match(r"^\((\d+)\)(?: (.*))?$", value)
                if m and m.group(2) is not None:
                    names["ob"][m.group(1)] = m.group(2)
                obj = names["ob"].get(m.group(1)) if m else value
                if obj is None:
                    raise Error(f"{path}: line {number}: {key}=({m.group(1)}) used before it was named")
                is_ours = (obj if want == "???" else os.path.realpath(obj)) == want
                if key == "cob":
                    callee_ours = is_ours
                else:
                    ours = is_ours
            elif key == "calls":  # calls=COUNT TARGET; the callee's object: the cob= before, or ob
                count, target = value.split()[:2]
                callee = ours if callee_ours is None else callee_ours
                after, callee_ours = ("call", position(target, last), int(count), callee), None
            elif key in ("jump", "jcnd"):
                # jump=COUNT TARGET; jcnd=TAKEN/EXECUTED TARGET; the next line is the source.
                count, target = value.split()[:2]
                after = ("jump", position(target, last), int(count.split("/")[0]))
    return execs, jumps, calls


def traces(files, binary, wanted):
    """trace() of each callgrind file, summed (one file per process of a server)."""
    total = (defaultdict(int), defaultdict(int), defaultdict(int))
    for path in files:
        for sums, counts in zip(total, trace(path, binary, wanted)):
            for k, v in counts.items():
                sums[k] += v
    return total


def owner_of(ranges):
    """A function of an address: the name of the (start, end, name) of `ranges` (sorted, not
    overlapping) that holds it, or None."""
    starts = [r[0] for r in ranges]

    def owner(addr):
        i = bisect.bisect_right(starts, addr) - 1
        return ranges[i][2] if i >= 0 and addr < ranges[i][1] else None
    return owner


def block_flow(blocks, ran_addrs, execs, jumps_from):
    """One function's blocks that ran and the transfers between them: (ran block ids,
    {(from id, to id): count} of its jumps and fall-throughs, [(last executed address of a
    block, start of the next, count)] of its fall-throughs). `blocks`: block_map()'s list of the
    function, `ran_addrs`: its executed addresses, sorted."""
    first = {b[0]: b for b in blocks}
    counts, ran, falls_through = defaultdict(int), set(), []
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
                falls_through.append((ran_addrs[hi - 1], nxt[0], through))
    return ran, counts, falls_through


def by_owner(execs, owner):
    """{function: its executed addresses, sorted}."""
    found = defaultdict(list)
    for addr in sorted(execs):
        found[owner(addr)].append(addr)
    return found


def jumps_by_source(jumps):
    found = defaultdict(list)
    for (src, dst), n in jumps.items():
        found[src].append((dst, n))
    return found


def bolt_preaggregated(binary, files, profile=None):
    """BOLT's pre-aggregated profile (`perf2bolt -pa`) of the trace: what LBR would give it.

    `B SOURCE TARGET COUNT 0` for every jump and every call into BINARY (the source the jump or
    call instruction, no mispredictions: callgrind does not simulate them), `F START END COUNT`
    for every fall-through from a block to the next by address (START the block's last executed
    instruction, END the next block's first: a trace across that one boundary, which BOLT counts
    as the fall-through edge between its blocks there). Addresses in hex as in the file: BOLT
    takes them as offsets from the main binary's load address, which are the file's addresses
    for a PIE (callgrind gives them so for code in a file). Returns are missing (callgrind does
    not record them), and so are fall-throughs in functions without a block map.

    With PROFILE, only the transfers within and between PROFILE's functions (both ends in one
    of them): the functions the split-edges arms get edges for, no more."""
    maps = block_map(binary)
    if profile is not None:
        addr_of = symbols(binary)
        kept = {addr_of.get(l.split()[1]) for l in open(profile) if l.startswith("fn ")}
        maps = {addr: blocks for addr, blocks in maps.items() if addr in kept}
    owner = owner_of(sorted((b[0][0], b[-1][0] + b[-1][2], addr) for addr, b in maps.items() if b))
    inside = (lambda a: owner(a) is not None) if profile is not None else (lambda a: True)
    execs, jumps, calls = traces(files, binary, inside)
    if profile is not None:
        jumps = {k: n for k, n in jumps.items() if inside(k[1])}
        calls = {k: n for k, n in calls.items() if inside(k[1])}
    by_func, jumps_from = by_owner(execs, owner), jumps_by_source(jumps)
    out = [f"B {s:x} {t:x} {n} 0" for (s, t), n in sorted({**jumps, **calls}.items()) if n > 0]
    falls, fall_lines = 0, 0
    for addr, blocks in sorted(maps.items()):
        if by_func.get(addr):
            for start, end, n in block_flow(blocks, by_func[addr], execs, jumps_from)[2]:
                out.append(f"F {start:x} {end:x} {n}")
                falls, fall_lines = falls + n, fall_lines + 1
    sys.stdout.write("\n".join(out) + "\n")
    print(f"trace_edges: BOLT profile: {len(jumps):,} jumps ({sum(jumps.values()):,} taken), "
          f"{len(calls):,} calls ({sum(calls.values()):,}), {fall_lines:,} "
          f"fall-throughs ({falls:,}) in {sum(1 for f in by_func if f is not None):,} functions "
          f"with a block map", file=sys.stderr)
    return 0


def main(argv):
    if len(argv) >= 4 and argv[1] == "--bolt":
        return bolt_preaggregated(argv[2], argv[3:])
    if len(argv) >= 5 and argv[1] == "--bolt-sampled":
        return bolt_preaggregated(argv[3], argv[4:], profile=argv[2])
    if len(argv) < 4 or argv[1].startswith("-"):
        for usage in __doc__.splitlines():
            if usage.strip().startswith("trace_edges.py "):
                print(usage.strip(), file=sys.stderr)
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
    owner = owner_of(sorted((b[0][0], b[-1][0] + b[-1][2], name)
                            for name, (_, b) in funcs.items() if b))
    execs, jumps, _ = traces(files, binary, lambda a: owner(a) is not None)
    by_func, jumps_from = by_owner(execs, owner), jumps_by_source(jumps)

    new_blocks, edges = [], []
    outside = 0
    for name, (faddr, blocks) in sorted(funcs.items()):
        ran_addrs = by_func.get(name, [])
        if not ran_addrs:
            continue
        ran, counts, _ = block_flow(blocks, ran_addrs, execs, jumps_from)
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
