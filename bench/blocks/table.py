#!/usr/bin/env python3
"""bench/blocks/run.sh's table for one target: each arm's simulated misses (min / median / max
over the hot-range offsets where the arm has them), against full BOLT, with its executable and
hot-range bytes and, where it was timed, its throughput against the default build.

Reads DIR/sim-A--B.json (`hottext ab --simulate --json`: arm A is side a, arm B side b),
DIR/ab-ARM.json (timed) and the binaries DIR/ARM.
"""
import argparse
import glob
import json
import os
import subprocess

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("--dir", required=True)
p.add_argument("--target", required=True)
p.add_argument("--arms", required=True)
p.add_argument("--offsets", required=True)
a = p.parse_args()

WHAT = {
    "default": "default build (GNU ld)",
    "auto": "hottext order (auto)",
    "cdsort": "hottext order --algorithm cdsort",
    "split": "hottext order + split (clang-bb-sections)",
    "split-edges": "order + split, exact block edges (ext-tsp)",
    "split-edges-original": "order + split, exact block edges (original order)",
    "bolt-fn": "BOLT 19 function order (cdsort)",
    "bolt-full": "full BOLT 19 (ext-tsp, split, cdsort)",
    "bolt-full-edges": "full BOLT 19, exact edges (the same trace)",
    "bolt-full-edges-sampled": "full BOLT 19, exact edges of the profile's functions only",
    "lld-cdsort": "lld 19 CDSort on our call edges",
}
FIGURES = [("itlb-l1-misses-per-m", "L1 iTLB"), ("itlb-l2-misses-per-m", "L2 iTLB"),
           ("icache-misses-per-m", "L1i")]


def side_figures(arm):
    """The arm's rows from the first report that simulated it: {key: {median, min, max}}."""
    for path in sorted(glob.glob(os.path.join(a.dir, "sim-*--*.json"))):
        left, right = os.path.basename(path)[4:-5].split("--")
        if arm not in (left, right):
            continue
        with open(path) as f:
            report = json.load(f)
        side = "a" if arm == left else "b"
        rows = {r["key"]: r[side] for r in report["rows"]}
        rows["offsets"] = len(report["offsets"])
        return rows
    return None


def elf_bytes(binary):
    """Bytes of the executable sections (a BOLTed binary's include the original text it keeps,
    .bolt.org.text, where the functions it did not move still run) and of the hot range
    (__hot_start to __hot_end), or None."""
    text = 0
    out = subprocess.run(["readelf", "-SW", binary], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        f = line.replace("[ ", "[").split()
        if len(f) > 7 and f[0].startswith("[") and "X" in f[7]:
            text += int(f[5], 16)
    syms = {}
    out = subprocess.run(["nm", binary], capture_output=True, text=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[2] in ("__hot_start", "__hot_end"):
            syms[f[2]] = int(f[0], 16)
    hot = syms["__hot_end"] - syms["__hot_start"] if len(syms) == 2 else None
    return text, hot


def cell(v, digits):
    if v["min"] == v["max"]:
        return f"{v['median']:,.{digits}f}"
    return f"{v['median']:,.{digits}f} ({v['min']:,.{digits}f}–{v['max']:,.{digits}f})"


arms = [x for x in a.arms.split() if os.path.exists(os.path.join(a.dir, x))]
figs = {x: side_figures(x) for x in arms}
bolt = figs.get("bolt-full")
compiler = open(os.path.join(a.dir, "compiler.txt")).read().split("\n")
print(f"{a.target}, built by {compiler[0].strip()} ({' '.join(compiler[1:]).strip()}); offsets of "
      f"hottext's arms: {a.offsets} B.\n")
# A simulation-only run (MEASURE=0) has no timed column.
timed_any = any(os.path.exists(os.path.join(a.dir, f"ab-{x}.json")) for x in arms)
print("| arm | instructions / unit | L1 iTLB misses / M instr | L2 iTLB | L1i | L1 iTLB vs full BOLT | "
      "L1i vs full BOLT | text bytes | hot range bytes |"
      + (" timed B/A vs default [95 %] |" if timed_any else ""))
print("| --- |" + " --- |" * (9 if timed_any else 8))
for arm in arms:
    f = figs[arm]
    text, hot = elf_bytes(os.path.join(a.dir, arm))
    timed = "–"
    path = os.path.join(a.dir, f"ab-{arm}.json")
    if os.path.exists(path):
        with open(path) as fh:
            r = json.load(fh)["rows"][0]["comparison"].get("ratio")
        if r:
            timed = f"{r['median']:.3f} [{r['low']:.3f}, {r['high']:.3f}]"
    if f is None:
        print(f"| {WHAT.get(arm, arm)} | not simulated | | | | | | {text:,} | {hot or '–'} |"
              + (f" {timed} |" if timed_any else ""))
        continue
    per_unit = next(v for k, v in f.items() if k.startswith("instructions-per-"))
    vs = []
    for key in ("itlb-l1-misses-per-m", "icache-misses-per-m"):
        if bolt and bolt[key]["median"]:
            b = bolt[key]["median"]
            v = f[key]
            vs.append(f"{v['median'] / b:.2f}×" + ("" if v["min"] == v["max"] else
                                                   f" ({v['min'] / b:.2f}–{v['max'] / b:.2f})"))
        else:
            vs.append("–")
    print(f"| {WHAT.get(arm, arm)} | {per_unit['median']:,.0f} | "
          + " | ".join(cell(f[k], 1) for k, _ in FIGURES)
          + f" | {vs[0]} | {vs[1]} | {text:,} | {f'{hot:,}' if hot else '–'} |"
          + (f" {timed} |" if timed_any else ""))
skipped = os.path.join(a.dir, "split-skipped.txt")
if os.path.exists(skipped):
    print(f"\n{open(skipped).read().strip()}")
