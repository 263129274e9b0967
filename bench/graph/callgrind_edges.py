#!/usr/bin/env python3
"""Convert a callgrind.out written with --separate-callers=1 into the benchmark's edge format.

    callgrind_edges.py CALLGRIND_OUT BINARY [--event FORMULA] > truth.edges

FORMULA is an event (default Ir, instructions) or a sum of events with integer factors, e.g.
`Ir+10*I1mr+10*D1mr+10*D1mw+100*ILmr+100*DLmr+100*DLmw` (callgrind --cache-sim=yes's events; the
cycle estimate kcachegrind shows), to weigh the truth by estimated time rather than instructions.

Output (sorted, one record a line):

    self <function> <cost>              the function's own cost (FORMULA of its events)
    call <caller> <callee> <cost>       the callee's own cost while its immediate caller was <caller>

Only functions of BINARY's object (callgrind's `ob=`) are written, and only edges whose two ends
are both in it.  This is the quantity hottext's stack graph estimates: a sample weighs the edge
from the frame below the innermost to the innermost.  With --separate-callers=1 callgrind keeps
one context per (function, immediate caller), named `callee'caller`, and a context's cost lines
are the callee's self cost in it; a `calls=` line and the cost line after it are a call's
inclusive cost, which is left out.  How callgrind treats jumps (tail calls): see README.md.

The file's name compression (`fn=(12) name`, later `fn=(12)`), subposition compression (`+3`,
`-2`, `*`) and any `positions:` list are handled; a line that fits none of the format's shapes is
an error naming its number.
"""

import os
import re
import sys
from collections import defaultdict

NAME_KEYS = ("ob", "fl", "fi", "fe", "fn", "cob", "cfi", "cfl", "cfn")
COST_LINE = re.compile(r"^[0-9+\-*x]")


class FormatError(Exception):
    pass


def split_context(context):
    """`callee'caller` (with --separate-recs=1 there are no `'N` recursion levels) -> (callee,
    caller or None).  A trailing all-digit part is a recursion level, not a caller."""
    parts = context.split("'")
    callee, rest = parts[0], [p for p in parts[1:] if not p.isdigit()]
    return callee, (rest[0] if rest else None)


def factors(formula):
    """`Ir+10*I1mr` -> {"Ir": 1, "I1mr": 10}."""
    out = {}
    for term in formula.split("+"):
        factor, _, name = term.strip().rpartition("*")
        if not name or (factor and not factor.isdigit()):
            raise FormatError(f"--event {formula!r}: a term is not EVENT or N*EVENT: {term!r}")
        out[name] = out.get(name, 0) + (int(factor) if factor else 1)
    return out


def parse(path, formula):
    """The self cost of every (object, context), summed over its cost lines."""
    names = {key: {} for key in ("ob", "fl", "fn")}  # compression tables: ob, file and fn ids
    wanted = factors(formula)
    positions, weights = 1, None
    obj, context = None, None
    skip_next_cost = False
    costs = defaultdict(int)
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            if COST_LINE.match(line):
                if weights is None:
                    raise FormatError(f"line {number}: a cost line before the 'events:' line")
                fields = line.split()
                if skip_next_cost:  # the inclusive cost of the call named just before
                    skip_next_cost = False
                    continue
                if context is None:
                    raise FormatError(f"line {number}: a cost line outside any fn= block")
                # Trailing zero costs may be left out of a line.
                costs[(obj, context)] += sum(w * int(v) for w, v in zip(weights, fields[positions:]))
                continue
            key, _, value = line.partition("=")
            if key in NAME_KEYS:
                table = names["fn" if key.endswith("fn") else "ob" if key.endswith("ob") else "fl"]
                m = re.match(r"^\((\d+)\)(?: (.*))?$", value)
                if m:
                    if m.group(2) is not None:
                        table[m.group(1)] = m.group(2)
                    elif m.group(1) not in table:
                        raise FormatError(f"line {number}: {key}=({m.group(1)}) used before it was named")
                    value = table[m.group(1)]
                if key == "ob":
                    obj = value
                elif key == "fn":
                    context = value
                continue
            if key in ("calls", "jump", "jcnd"):
                # calls=: the next cost line is the call's inclusive cost; jump=/jcnd=: the next
                # line is the jump's source position (with --collect-jumps), no self cost either.
                skip_next_cost = True
                continue
            head, _, rest = line.partition(":")
            if head == "positions":
                positions = len(rest.split())
            elif head == "events":
                events = rest.split()
                missing = sorted(set(wanted) - set(events))
                if missing:
                    raise FormatError(f"line {number}: event {', '.join(missing)} not among {events}")
                weights = [wanted.get(e, 0) for e in events]
            elif key == line and head == line:
                raise FormatError(f"line {number}: not a callgrind line: {line[:80]!r}")
    return costs


def edges(costs, binary):
    """The binary's self costs and caller->callee edges, from the (object, context) costs."""
    want = os.path.realpath(binary)
    ours = {ctx for (obj, ctx) in costs if obj and os.path.realpath(obj) == want}
    if not ours:
        objects = sorted({obj for (obj, _) in costs if obj})
        raise FormatError(f"no function of {binary} in the file (objects: {', '.join(objects)})")
    own = {split_context(ctx)[0] for ctx in ours}
    selfs, calls, dropped = defaultdict(int), defaultdict(int), defaultdict(int)
    for (obj, ctx), cost in costs.items():
        if ctx not in ours or cost == 0:
            continue
        callee, caller = split_context(ctx)
        if not is_symbol(callee):
            dropped[callee] += cost
            continue
        if caller is not None and not is_symbol(caller):
            caller = None
        selfs[callee] += cost
        if caller in own:
            calls[(caller, callee)] += cost
    total = sum(selfs.values()) + sum(dropped.values())
    for name, cost in sorted(dropped.items()):
        print(f"callgrind_edges: left out {name}: {cost} {cost / total:.4%} of the binary's cost", file=sys.stderr)
    return selfs, calls


def is_symbol(name):
    """Valgrind's own names are not the binary's symbols: "(below main)" stands for whatever runs
    below main (libc's start code and the binary's _start alike, so its edges would be invented),
    and a hex address is code without a symbol (PLT stubs)."""
    return not (name.startswith("(") or name.startswith("0x"))


def escape(name):
    """hottext's profile escape (DESIGN.md): whitespace, control characters and % as %XX."""
    return "".join(f"%{ord(c):02X}" if c.isspace() or ord(c) < 32 or c in "%\x7f" else c for c in name)


def main(argv):
    args = argv[1:]
    formula = "Ir"
    if "--event" in args:
        i = args.index("--event")
        formula = args[i + 1] if i + 1 < len(args) else ""
        del args[i:i + 2]
    if len(args) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    try:
        selfs, calls = edges(parse(args[0], formula), args[1])
    except (OSError, FormatError) as e:
        print(f"callgrind_edges: {args[0]}: {e}", file=sys.stderr)
        return 2
    out = [f"self {escape(name)} {cost}" for name, cost in sorted(selfs.items())]
    out += [f"call {escape(a)} {escape(b)} {cost}" for (a, b), cost in sorted(calls.items())]
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
