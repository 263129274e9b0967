#!/usr/bin/env python3
"""Compare a call graph with the exact one.

    compare.py TRUTH PROFILE [--worst N] [--json]

TRUTH and PROFILE are each either a hottext profile (`fn <name> <size> <self>`, `call <caller>
<callee> <weight>`, `alias <name> <other>`; v3's %XX escapes undone) or this benchmark's edge
file (`self <name> <cost>`, `call <caller> <callee> <cost>`: callgrind_edges.py, perf_edges.py).
Both are restricted to edges between functions of the binary (the converters write no others;
a hottext profile holds only the binary's functions) and normalised to sum 1.

Figures:
  overlap   weighted overlap  sum over edges of min(p_e, q_e): 1 = same graph, 0 = disjoint
  recall50  the share of TRUTH's 50 heaviest edges that PROFILE has at all (any weight)
  top50     the share of TRUTH's 50 heaviest edges among PROFILE's 50 heaviest
  self      the same overlap over the functions' self costs (a sanity figure: the hot set)
  callers   caller attribution alone: for each callee, the overlap of its callers' shares
            (p(caller | callee) against q(caller | callee)), averaged with PROFILE's weight of
            the callee's edges.  It leaves out how much cost the callee has, which differs
            between an instruction count (callgrind) and time samples (perf) even for a perfect
            reader; overlap and self include it
  floor     the overlap a perfect reader would reach with as many samples as PROFILE's edges
            hold (their weight summed, when it is a count): a draw of that many edges from
            TRUTH (fixed seed, at most 2 000 000 draws) against TRUTH.  Sampling noise alone
            keeps overlap below it
  self_floor  the same for the self figure, with as many draws as PROFILE's self weight
Ties in "heaviest" are broken by caller, then callee name, so the figures are deterministic.
A profile's `name;file.c` (a local function whose name several share) counts as TRUTH's `name`
where TRUTH has only that (callgrind merges them without debug information).
With --worst N, the N edges with the largest |p_e - q_e| follow, to see where they differ.
"""

import json
import random
import re
import sys
from collections import defaultdict

TOP = 50
# The floor's draws are capped: a reading may be another exact graph (an instruction count in the
# billions); past a few million samples the floor is within a hair of 1 anyway.
FLOOR_MAX_DRAWS = 2_000_000


def unescape(name):
    return re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), name)


def read_graph(path):
    """(self costs, edge weights, alias -> name) of one file, either format."""
    selfs, calls, aliases = defaultdict(float), defaultdict(float), {}
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        for number, line in enumerate(f, 1):
            fields = line.split()
            # A profile's call sites and basic-block counts refine its graph; they are not edges.
            if not fields or fields[0].startswith("#") or fields[0] in ("site", "block"):
                continue
            try:
                kind = fields[0]
                if kind == "fn" and len(fields) == 4:
                    selfs[unescape(fields[1])] += float(fields[3])
                elif kind == "self" and len(fields) == 3:
                    selfs[unescape(fields[1])] += float(fields[2])
                elif kind == "call" and len(fields) == 4:
                    calls[(unescape(fields[1]), unescape(fields[2]))] += float(fields[3])
                elif kind == "alias" and len(fields) == 3:
                    aliases[unescape(fields[2])] = unescape(fields[1])
                else:
                    raise ValueError(kind)
            except ValueError:
                raise SystemExit(f"compare: {path}:{number}: not a profile or edge line: {line.strip()[:80]!r}")
    return selfs, calls, aliases


def renamed(weights, aliases, edge):
    """The weights with every alias replaced by its profile name (callgrind may name a function
    by another symbol at the same address than hottext does)."""
    out = defaultdict(float)
    for key, w in weights.items():
        if edge:
            key = (aliases.get(key[0], key[0]), aliases.get(key[1], key[1]))
        else:
            key = aliases.get(key, key)
        out[key] += w
    return out


def file_names_folded(weights, known, edge):
    """The weights with hottext's name of a local function, `name;file.c` (given when several
    local functions share a name), replaced by `name` where `known` (the truth's names) has
    `name` and not `name;file.c`: callgrind tells such functions apart only by their source
    file, which a binary without debug information does not name, so it merges them."""
    def fold(name):
        base, sep, _ = name.partition(";")
        return base if sep and name not in known and base in known else name

    out = defaultdict(float)
    for key, w in weights.items():
        out[(fold(key[0]), fold(key[1])) if edge else fold(key)] += w
    return out


def normalised(weights):
    total = sum(weights.values())
    return {k: w / total for k, w in weights.items() if w > 0} if total > 0 else {}


def overlap(p, q):
    return sum(min(w, q.get(k, 0.0)) for k, w in p.items())


def caller_attribution(p, q):
    """Sum over callees b of q's weight of b times the overlap of p(. | b) and q(. | b)."""
    p_in, q_in = defaultdict(float), defaultdict(float)
    for (_, b), w in p.items():
        p_in[b] += w
    for (_, b), w in q.items():
        q_in[b] += w
    return float(sum(min(w / q_in[b], p.get((a, b), 0.0) / p_in[b]) * q_in[b]
               for (a, b), w in q.items() if p_in.get(b, 0.0) > 0))


def sampling_floor(p, samples):
    """Overlap with p of the empirical distribution of `samples` draws from p (seed 1): edges
    or functions alike."""
    if samples <= 0:
        return 0.0
    edges = sorted(p)
    drawn = defaultdict(float)
    draws = min(samples, FLOOR_MAX_DRAWS)
    for e in random.Random(1).choices(edges, weights=[p[e] for e in edges], k=draws):
        drawn[e] += 1.0
    return overlap(p, normalised(drawn))


def heaviest(weights, n):
    return [k for k, _ in sorted(weights.items(), key=lambda kw: (-kw[1], kw[0]))[:n]]


def figures(truth_path, profile_path):
    t_self, t_calls, t_alias = read_graph(truth_path)
    p_self, p_calls, p_alias = read_graph(profile_path)
    aliases = {**t_alias, **p_alias}
    t_self, t_calls = renamed(t_self, aliases, False), renamed(t_calls, aliases, True)
    p_self, p_calls = renamed(p_self, aliases, False), renamed(p_calls, aliases, True)
    known = set(t_self) | {name for edge in t_calls for name in edge}
    p_self, p_calls = file_names_folded(p_self, known, False), file_names_folded(p_calls, known, True)
    p, q = normalised(t_calls), normalised(p_calls)
    samples, self_samples = sum(p_calls.values()), sum(p_self.values())
    top_truth = heaviest(p, TOP)
    top_profile = set(heaviest(q, TOP))
    n = len(top_truth)
    return {
        "overlap": overlap(p, q),
        "recall50": sum(1 for e in top_truth if e in q) / n if n else 0.0,
        "top50": sum(1 for e in top_truth if e in top_profile) / n if n else 0.0,
        "self": overlap(normalised(t_self), normalised(p_self)),
        "callers": caller_attribution(p, q),
        "floor": sampling_floor(p, int(samples)) if samples == int(samples) else 0.0,
        "self_floor": (sampling_floor(normalised(t_self), int(self_samples))
                       if self_samples == int(self_samples) else 0.0),
        "truth_edges": len(p),
        "profile_edges": len(q),
    }, p, q


def main(argv):
    args = argv[1:]
    worst, as_json = 0, False
    if "--worst" in args:
        i = args.index("--worst")
        worst = int(args[i + 1])
        del args[i:i + 2]
    if "--json" in args:
        args.remove("--json")
        as_json = True
    if len(args) != 2:
        print("usage: compare.py TRUTH PROFILE [--worst N] [--json]", file=sys.stderr)
        return 2
    try:
        result, p, q = figures(args[0], args[1])
    except OSError as e:
        print(f"compare: {e}", file=sys.stderr)
        return 2
    if not p:
        print(f"compare: no edges in {args[0]}", file=sys.stderr)
        return 2
    if not q:  # a sample-only reading: its hot set is still worth its self figure
        print(f"compare: no edges in {args[1]}: the edge figures are 0", file=sys.stderr)
    if as_json:
        print(json.dumps(result, sort_keys=True))
    else:
        print(" ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in result.items()))
    diffs = sorted(set(p) | set(q), key=lambda e: (-abs(p.get(e, 0) - q.get(e, 0)), e))
    for a, b in diffs[:worst]:
        print(f"  {a} -> {b}: truth {p.get((a, b), 0):.4f} profile {q.get((a, b), 0):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
