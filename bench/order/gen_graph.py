#!/usr/bin/env python3
"""Writes a synthetic hottext profile: N functions, about E call arcs, skewed, deterministic.

Sizes are 16 B to 8 KiB; samples follow a Zipf-like law (a few functions take most of the time,
as in real services); each function calls about E/N others, mostly nearby ids (the clustered
structure of real call graphs) and some anywhere. Lines come in the canonical order that
`hottext profile` writes (sorted by name), so reading costs what it costs on a real profile.
"""
import argparse
import random
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--functions", type=int, default=1_000_000)
    p.add_argument("--edges", type=int, default=5_000_000)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    rng = random.Random(args.seed)
    n = args.functions
    mean_degree = args.edges / n
    out = sys.stdout
    out.write("# hottext profile v1\n# generator: bench/order/gen_graph.py\n")
    names = [f"fn_{i:07d}" for i in range(n)]
    out.writelines(
        f"fn {names[i]} {16 << rng.randrange(10)} {int(1e6 / (1 + i) ** 1.1) if rng.random() < 0.5 else 0}\n"
        for i in range(n)
    )
    # Out-degrees: exponential around the mean, then topped up to exactly --edges.
    degrees = [min(int(rng.expovariate(1 / mean_degree) + 0.5), n - 1) for _ in range(n)]
    for _ in range(args.edges - sum(degrees)):
        i = rng.randrange(n)
        degrees[i] = min(degrees[i] + 1, n - 1)
    batch = []
    for caller, degree in enumerate(degrees):
        callees = set()
        while len(callees) < degree:
            far = rng.random() < 0.1
            callee = rng.randrange(n) if far else (caller + int(rng.gauss(0, 50))) % n
            if callee != caller:
                callees.add(callee)
        for callee in sorted(callees):
            weight = 1 + int(1e5 / (1 + caller) / (1 + abs(callee - caller)))
            batch.append(f"call {names[caller]} {names[callee]} {weight}\n")
        if len(batch) >= 100_000:
            out.writelines(batch)
            batch.clear()
    out.writelines(batch)


if __name__ == "__main__":
    main()
