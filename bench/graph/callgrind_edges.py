#!/usr/bin/env python3
"""Convert a callgrind.out written with --separate-callers=1 --separate-recs=2 into the benchmark's
edge format.

    callgrind_edges.py CALLGRIND_OUT... BINARY [--event FORMULA] > truth.edges

Several files (one per process, from --trace-children=yes and an out file with %p) are summed:
the truth of a server whose work is spread over the processes it forks.

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
inclusive cost, which is left out, except to tell the immediate caller of a recursion (below,
`immediate_callers`).  How callgrind treats jumps (tail calls): see README.md.

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
    """`callee'caller` or `callee'N'caller` -> (callee, caller or None, recursion level N, 1
    when absent)."""
    parts = context.split("'")
    level = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 1
    rest = [p for p in parts[1:] if not p.isdigit()]
    return parts[0], (rest[0] if rest else None), level


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
    """The self cost of every (object, context), summed over its cost lines, and the inclusive
    cost of the calls into each context of recursion level 2 or more, by calling function."""
    names = {key: {} for key in ("ob", "fl", "fn")}  # compression tables: ob, file and fn ids
    wanted = factors(formula)
    positions, weights = 1, None
    obj, context, called = None, None, None
    skip_next_cost = False
    call_into = None  # the context a calls= line names, when its callers are wanted
    costs = defaultdict(int)
    recursive_calls = defaultdict(lambda: defaultdict(int))
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
                    if call_into is not None and context is not None:
                        caller = split_context(context)[0]
                        recursive_calls[call_into][caller] += sum(
                            w * int(v) for w, v in zip(weights, fields[positions:]))
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
                    context, called = value, None
                elif key == "cfn":
                    called = value
                continue
            if key in ("calls", "jump", "jcnd"):
                # calls=: the next cost line is the call's inclusive cost; jump=/jcnd=: the next
                # line is the jump's source position (with --collect-jumps), no self cost either.
                skip_next_cost = True
                recursive = key == "calls" and called is not None and split_context(called)[2] > 1
                call_into = called if recursive else None
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
    return costs, recursive_calls


def edges(costs, recursive_calls, binary):
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
        callee, caller, level = split_context(ctx)
        if not is_symbol(callee):
            dropped[callee] += cost
            continue
        selfs[callee] += cost
        for caller, share in immediate_callers(callee, caller, level, recursive_calls.get(ctx)):
            if caller in own and is_symbol(caller):
                calls[(caller, callee)] += cost * share
    total = sum(selfs.values()) + sum(dropped.values())
    for name, cost in sorted(dropped.items()):
        print(f"callgrind_edges: left out {name}: {cost} {cost / total:.4%} of the binary's cost", file=sys.stderr)
    return selfs, {edge: round(cost) for edge, cost in calls.items()}


def immediate_callers(callee, caller, level, calls_in):
    """[(immediate caller, share of the context's cost)].  callgrind names a context by the
    nearest caller that is another function: `f'top` is f called by top, and with
    --separate-recs=2 `f'2'top` is f's recursion below that, whose immediate caller is f itself
    (f calling f) or, in a mutual recursion (f -> g -> f, where the context is `f'2'g`), the
    named function.  The calls into the context tell which: their inclusive costs by calling
    function split the context's cost when it has both (an approximation, the only place)."""
    if level == 1 or not calls_in:
        return [(caller, 1.0)]
    total = sum(calls_in.values())
    if total == 0:
        return [(caller, 1.0)]
    return [(name, cost / total) for name, cost in sorted(calls_in.items())]


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
    if len(args) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    *files, binary = args
    costs, recursive_calls = defaultdict(int), defaultdict(lambda: defaultdict(int))
    for path in files:
        try:
            file_costs, file_calls = parse(path, formula)
        except (OSError, FormatError) as e:
            print(f"callgrind_edges: {path}: {e}", file=sys.stderr)
            return 2
        for key, cost in file_costs.items():
            costs[key] += cost
        for context, callers in file_calls.items():
            for caller, cost in callers.items():
                recursive_calls[context][caller] += cost
    try:
        selfs, calls = edges(costs, recursive_calls, binary)
    except FormatError as e:
        print(f"callgrind_edges: {', '.join(files)}: {e}", file=sys.stderr)
        return 2
    out = [f"self {escape(name)} {cost}" for name, cost in sorted(selfs.items())]
    out += [f"call {escape(a)} {escape(b)} {cost}" for (a, b), cost in sorted(calls.items())]
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
