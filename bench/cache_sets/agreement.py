#!/usr/bin/env python3
"""The cache-set model's L1i figure beside the simulated one, for bench/cache_sets/run.sh.

Per placement: the model's `icache_overflow` of the order as `hottext order` placed it
(`ordered`, at offset 0; whole-line offsets do not change it), the same model on the linked
binary's real addresses (`current` of `order --binary`, as run F read it), and cachegrind's L1i misses per
million instructions at every hot-range offset (`ab --simulate --offsets`): median, min-max.
Kendall's tau over all pairs of placements (model against simulated median; 1: same order) as
bench/postgres/model_check.py reports run F, and issue 36's check: the placement `auto` chose is
not worse than any other by more than the spread over offsets (the larger of the two spreads).

Usage: agreement.py BUILD_DIR HOTTEXT CONFIG...   (CONFIG: compiled+P or lines+P, P the padding)
"""
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from rank import tau  # noqa: E402

if len(sys.argv) < 4:
    sys.exit(__doc__)
build, hottext, configs = sys.argv[1], sys.argv[2], sys.argv[3:]


def load(name):
    with open(os.path.join(build, name)) as f:
        return json.load(f)


def modelled(config):
    first = sorted(f for f in os.listdir(build) if f.startswith(f"order-{config}-at-"))[0]
    return load(first)["ordered"]["icache_overflow"]


def on_binary(config):
    """The model on the binary linked at offset 0: where the linker really put each function."""
    r = subprocess.run([hottext, "order", os.path.join(build, "demo.profile"), "--binary",
                        os.path.join(build, f"{config}-at-0"), "--allow-build-id-mismatch",
                        "--format", "list", "-o", os.path.join(build, "list.tmp"), "--json"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"agreement.py: hottext order failed for {config}:\n{r.stderr}")
    return json.loads(r.stdout)["current"]["icache_overflow"]


def simulated(config):
    """L1i misses per million instructions of side B at each offset."""
    per_offset = {}
    for r in load(f"sim-{config}.json")["records"]:
        if r["side"].lower() != "b":
            continue
        m = next(m for m in r["simulated"]["models"] if m["key"] == "icache")
        per_offset[r["offset"]] = 1e6 * m["misses"] / max(m["instructions"], 1)
    return per_offset


auto = load("auto.json")
rule = "lines" if auto["alignment"]["rule"] == "cache-lines" else "compiled"
chosen = f"{rule}+{auto.get('hot_offset', 0)}"
print(f"auto chose {auto['algorithm']}, placed {chosen}; its modelled placements:")
for p in auto.get("placements", []):
    name = ("lines" if p["alignment"]["rule"] == "cache-lines" else "compiled") + f"+{p['start_padding']}"
    print(f"  {name:<12} L1i overflow {100 * p['icache_overflow']:.3f} %"
          f"  calls leaving page {100 * p['score']:.2f} %{'  (chosen)' if p['chosen'] else ''}")
print()
rows = {}
print("| placement | model: L1i overflow | model on the linked binary | "
      "sim: L1i per M instr, median (min-max over offsets) |")
print("| --- | --- | --- | --- |")
for c in configs:
    sim = simulated(c)
    values = sorted(sim.values())
    rows[c] = (modelled(c), statistics.median(values), values[0], values[-1])
    m, med, lo, hi = rows[c]
    mark = " (auto)" if c == chosen else ""
    print(f"| {c}{mark} | {100 * m:.3f} % | {100 * on_binary(c):.3f} % | "
          f"{med:,.0f} ({lo:,.0f}-{hi:,.0f}) |")
print()
t, flipped = tau([(c, rows[c][0], rows[c][1]) for c in configs])
print(f"- Kendall's tau, model against simulated median, over {len(configs)} placements: {t:.2f}; "
      f"pairs ranked the other way: {', '.join(flipped) or 'none'}")
if chosen in rows:
    _, med, lo, hi = rows[chosen]
    worse = [c for c in configs if c != chosen
             and med - rows[c][1] > max(hi - lo, rows[c][3] - rows[c][2])]
    print(f"- auto's placement {chosen}: simulated median {med:,.0f}, spread {hi - lo:,.0f}; "
          f"placements better by more than the spread: {', '.join(worse) or 'none'} "
          f"(target {'met' if not worse else 'NOT met'})")
else:
    print(f"- auto's placement {chosen} is not among the placements simulated: add it to CONFIGS")
