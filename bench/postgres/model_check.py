#!/usr/bin/env python3
"""Does the layout model behind `hottext order --algorithm auto` rank layouts as cachegrind does?

For every configuration that sim.py simulated, `hottext order --binary CONFIG --json` scores the
binary's real layout with the profile's model (`current`: `calls_within_4k` from the call sites,
`icache_overflow`), and the model's ranking is compared with the simulated misses per million
instructions: Kendall's tau over all pairs of configurations (1: the same order, 0: unrelated),
and the pairs the two put the other way round.

Usage: model_check.py --dir BENCH_DIR --hottext BIN --configs "default c3 ..." --workloads "select tpcb"
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from rank import tau  # noqa: E402

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("--dir", required=True)
p.add_argument("--hottext", required=True)
p.add_argument("--configs", required=True)
p.add_argument("--workloads", required=True)
a = p.parse_args()
out = os.path.join(a.dir, "out")


def modelled(config):
    binary = os.path.join(a.dir, "v", config, "bin", "postgres")
    r = subprocess.run([a.hottext, "order", os.path.join(out, "postgres.profile"), "--binary", binary,
                        "--allow-build-id-mismatch", "--format", "list", "-o", os.devnull, "--json"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"model_check.py: hottext order failed for {config}:\n{r.stderr}")
    current = json.loads(r.stdout)["current"]
    return {"itlb": 1 - current["calls_within_4k"], "icache": current["icache_overflow"]}


def simulated(config, workload):
    path = os.path.join(out, f"sim-{config}-{workload}.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        d = json.load(f)
    i = d["instructions_by_model"]
    return {"itlb": 1e6 * d["itlb-l1-misses"] / i["itlb-l1"],
            "icache": 1e6 * d["icache-misses"] / i["icache"]}


configs = a.configs.split()
model = {c: modelled(c) for c in configs}
print("| configuration | model: calls leaving their 4 KiB page | model: L1i overflow | "
      + " | ".join(f"sim {w}: L1 iTLB, L1i per M instr" for w in a.workloads.split()) + " |")
print("|" + " --- |" * (3 + len(a.workloads.split())))
for c in configs:
    cells = []
    for w in a.workloads.split():
        s = simulated(c, w)
        cells.append(f"{s['itlb']:,.0f}, {s['icache']:,.0f}" if s else "-")
    print(f"| {c} | {model[c]['itlb']:.3f} | {model[c]['icache']:.4f} | " + " | ".join(cells) + " |")
print()
for w in a.workloads.split():
    for figure in ("itlb", "icache"):
        pairs = [(c, model[c][figure], simulated(c, w)[figure]) for c in configs if simulated(c, w)]
        t, flipped = tau(pairs)
        shown = ", ".join(flipped[:12]) + (" ..." if len(flipped) > 12 else "")
        print(f"- {w}, {figure}: Kendall's tau {t:.2f} over {len(pairs)} configurations; "
              f"pairs ranked the other way: {shown or 'none'}")
