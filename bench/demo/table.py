#!/usr/bin/env python3
"""The demo benchmark's table: simulated misses per million instructions of each configuration
(A = the baseline, B = the configuration; from `hottext ab --simulate --json`) and the timed
requests/s ratio (from `hottext ab --json`) where it ran.

Usage: table.py BUILD_DIR CONFIG... (sim-CONFIG.json and ab-CONFIG.json; the first is simulated)
"""
import json
import os
import sys

build, configs = sys.argv[1], sys.argv[2:]
FIGURES = [("itlb-l1-misses-per-m", "L1 iTLB"), ("itlb-l1-huge-misses-per-m", "L1 iTLB, hot range on 2 MiB pages"),
           ("itlb-l2-misses-per-m", "L2 iTLB"), ("itlb-l2-huge-misses-per-m", "L2 iTLB, 2 MiB pages"),
           ("icache-misses-per-m", "L1i")]


def load(name):
    path = os.path.join(build, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def row(report, key):
    return next((r for r in report["rows"] if r["key"] == key), None)


sim_base = load(f"sim-{configs[0]}.json")
head = "| configuration | instructions B/A | " + " | ".join(
    f"{label} per M instr (B/A)" for _, label in FIGURES) + " | requests/s B/A [95 % interval] |"
print(head)
print("|" + " --- |" * (head.count("|") - 1))
if sim_base:
    cells = [f"{row(sim_base, k)['a']['median']:,.0f}" if row(sim_base, k) else "-" for k, _ in FIGURES]
    print(f"| baseline (GNU ld, no order) | 1 | " + " | ".join(cells) + " | 1 |")
for name in configs:
    sim = load(f"sim-{name}.json")
    if not sim:
        continue
    instr = row(sim, "instructions")["ratio"]
    cells = []
    for key, _ in FIGURES:
        r = row(sim, key)
        if r is None:  # a simulation made before the 2 MiB-page model
            cells.append("-")
            continue
        ratio = r["ratio"]
        if ratio is None:
            cells.append(f"{r['b']['median']:,.0f}")
        elif ratio["min"] == ratio["max"]:
            cells.append(f"{r['b']['median']:,.0f} ({ratio['median']:.2f})")
        else:
            cells.append(f"{r['b']['median']:,.0f} ({ratio['median']:.2f}, "
                         f"{ratio['min']:.2f}-{ratio['max']:.2f} over {len(sim['offsets'])} offsets)")
    timed = load(f"ab-{name}.json")
    rps = "-"
    if timed:
        c = row(timed, "requests/s")["comparison"]
        if c["ratio"]:
            rps = f"{c['ratio']['median']:.3f} [{c['ratio']['low']:.3f}, {c['ratio']['high']:.3f}]"
    print(f"| {name} | {instr['median']:.4f} | " + " | ".join(cells) + f" | {rps} |")
