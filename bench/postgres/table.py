#!/usr/bin/env python3
"""The markdown table of bench/postgres/run.sh, from its `hottext ab --json` reports."""
import argparse
import json
import os

p = argparse.ArgumentParser()
p.add_argument("--out-dir", required=True)
p.add_argument("--configs", required=True)
p.add_argument("--workloads", required=True)
p.add_argument("--machine", required=True)
p.add_argument("--runs", required=True)
p.add_argument("--duration", required=True)
p.add_argument("--scale", required=True)
p.add_argument("--build-seconds", default="?")
p.add_argument("--total-seconds", default="?")
p.add_argument("--note", default="")
a = p.parse_args()

WHAT = {
    "default": "default build",
    "control": "relinked, same linker (GNU ld), no order",
    "ph": "Pettis-Hansen (ld script)",
    "c3": "C3 (ld script)",
    "c3-huge": "C3 + `-lhottext_auto` (huge pages at start)",
    "whole-huge": "default build, whole text on huge pages (LD_PRELOAD, HOTTEXT_WHOLE_TEXT=1)",
    "bolt-fn": "BOLT 19 `-reorder-functions=cdsort` (perf2bolt -nl)",
    "bolt-full": "BOLT 19 cdsort + ext-tsp blocks + split (docs' flags) + `-hugify`",
    "cdsort": "hottext `--algorithm cdsort` (ld script)",
    "cdsort-lines": "hottext cdsort, `--align-cache-lines`",
    "cdsort-align32": "hottext cdsort, 64 B aligned where it costs at most 32 B (BOLT's rule)",
    "bolt-none": "BOLT 19 `-reorder-functions=none` (code rewritten, not reordered)",
    "bolt-none-noalign": "BOLT 19 `-reorder-functions=none`, functions not aligned",
    "bolt-none-nopasses": "BOLT 19 `-reorder-functions=none`, no code-deleting passes",
    "bolt-keepnops": "BOLT 19 `-reorder-functions=cdsort -keep-nops`",
    "lld-control": "relinked with lld 19, no order",
    "lld-cdsort": "lld 19 `--call-graph-profile-sort=cdsort` on our profile's call edges",
    "lld-hfsort": "lld 19 `--call-graph-profile-sort=hfsort` on our profile's call edges",
    "c3-align64": "C3 (ld script), every hot function 64 B aligned",
}
NAMES = {"select": "select-only (-S)", "tpcb": "tpcb-like"}
CLIENTS = 2


def huge(c):
    try:
        with open(os.path.join(a.out_dir, f"huge-{c}.txt")) as f:
            kv = dict(line.strip().split(None, 1) for line in f if line.strip())
        return "{} / {}".format(
            kv.get("AnonHugePages:", "?").replace(" kB", ""),
            kv.get("FilePmdMapped:", "?").replace(" kB", ""),
        )
    except OSError:
        return "?"


def ratio_cell(row):
    if row is None:
        return "–"
    ri = row["comparison"].get("ratio")
    return f"{ri['median']:.3f} [{ri['low']:.3f}, {ri['high']:.3f}]" if ri else "–"


def find(report, key):
    return next((x for x in report["rows"] if x["key"] == key), None)


print(f"## PostgreSQL 15 under pgbench (bench/postgres/run.sh)\n")
if a.note:
    print(f"**{a.note}**\n")
print(f"Machine: {a.machine}.")
print(
    f"`make bench-postgres` (= `bash bench/postgres/run.sh`, RUNS={a.runs} DURATION={a.duration} "
    f"SCALE={a.scale}); build {a.build_seconds} s, whole run {a.total_seconds} s.\n"
)
measured = any(os.path.exists(os.path.join(a.out_dir, f"ab-{c}-{w}.json"))
               for c in a.configs.split() for w in a.workloads.split())
# A simulation-only run (MEASURE=0) has no measured table.
if measured:
    print(
        f"### Measured: `hottext ab`, default build (A) against each configuration (B)\n\n"
        f"Each row is one `hottext ab`: {a.runs} interleaved rounds after one warm-up round, a fresh "
        f"server each run pinned to one CPU, load (`load.sh`): pg_prewarm, then "
        f"`pgbench -n [-S] -c {CLIENTS} -j {CLIENTS} -T {a.duration}` on the other CPU over a Unix "
        "socket. Medians of A and B, and B/A as the median of the per-round ratios with its 95 % "
        "interval (sign-test order statistics); the verdict is on tps. latency: pgbench's measured "
        "average (`-P`); p99: the 99th percentile of its per-transaction log. iTLB walks per million "
        "instructions and IPC come from the PMU; \"no PMU\" where the machine has none (see the "
        "simulation below). Huge pages: AnonHugePages / FilePmdMapped (kB) of the postmaster "
        "after a short load.\n"
    )
    print("| configuration | workload | tps A | tps B | tps B/A [95 %] | latency B/A | p99 B/A | "
          "iTLB walks/M instr B/A | IPC B/A | verdict | huge pages kB |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    notes = []
    for c in a.configs.split():
        for w in a.workloads.split():
            path = os.path.join(a.out_dir, f"ab-{c}-{w}.json")
            try:
                with open(path) as f:
                    r = json.load(f)
            except (OSError, ValueError):
                print(f"| {WHAT.get(c, c)} | {NAMES.get(w, w)} | – | – | – | – | – | – | – | not run | {huge(c)} |")
                continue
            pmu = r.get("hardware_pmu", False)
            tps = find(r, "tps")
            counter = (lambda k: ratio_cell(find(r, k))) if pmu else (lambda k: "no PMU")
            print(
                f"| {WHAT.get(c, c)} | {NAMES.get(w, w)} | {tps['comparison']['median_a']:.0f} | "
                f"{tps['comparison']['median_b']:.0f} | {ratio_cell(tps)} | "
                f"{ratio_cell(find(r, 'latency-ms'))} | {ratio_cell(find(r, 'p99-ms'))} | "
                f"{counter('itlb-walks-per-m-instr')} | {counter('ipc')} | "
                f"{tps['comparison']['verdict']} | {huge(c)} |"
            )
            for wmsg in r.get("warnings", []):
                notes.append(f"{c}/{w}: {wmsg}")
    first = os.path.join(a.out_dir, f"ab-{a.configs.split()[0]}-{a.workloads.split()[0]}.json")
    try:
        with open(first) as f:
            r = json.load(f)
        print("\nExact server commands of the first row (A, B): `{}`, `{}`; the others differ only "
              "in B's binary directory (and the preload environment for whole-huge); every report "
              "is `hottext ab --json` in `$BENCH_DIR/out/ab-CONFIG-WORKLOAD.json`.".format(r["a"], r["b"]))
    except (OSError, ValueError, KeyError):
        pass
    if notes:
        print("\nWarnings from `hottext ab`:\n")
        for n in notes:
            print(f"- {n}")

# ---- simulation ----
sims = {}
for c in ["default"] + a.configs.split():
    for w in a.workloads.split():
        try:
            with open(os.path.join(a.out_dir, f"sim-{c}-{w}.json")) as f:
                sims[(c, w)] = json.load(f)
        except (OSError, ValueError):
            pass
if sims:
    tx = " and ".join(sorted({f"{v['transactions']} ({NAMES.get(v['workload'], v['workload'])})" for v in sims.values()}))
    spread = max(
        100 * (max(v["instructions_by_model"].values()) / min(v["instructions_by_model"].values()) - 1)
        for v in sims.values()
    )
    print(
        "\n### Simulated: instruction TLB and i-cache under cachegrind (`sim.py`)\n\n"
        f"One client, {tx} transactions, the difference of two backends of the same server "
        "(see sim.py); exact instruction counts of the backend process (user space, libc "
        "included). iTLB L1: 64 entries, fully associative; iTLB L2: 512 entries, 8-way (a miss "
        "is a page walk); both 4 KiB pages, LRU; i-cache: 32 KiB, 8-way, 64 B lines. Misses per "
        "million instructions (i-cache: per thousand), and relative to the default build. One "
        f"run per model, so no interval; the instruction counts of a row's three runs differ by at "
        f"most {spread:.1f} % (tpcb-like touches random rows). c3-huge and whole-huge are not simulated (one page size only); with part "
        "of the text on 2 MiB pages their misses are expected to be lower than those of their layout "
        "(c3, default).\n"
    )
    print("| configuration | workload | instructions/tx | iTLB L1 misses/M instr | vs default | "
          "iTLB L2 misses (walks)/M instr | vs default | i-cache MPKI | vs default |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")

    def per_m(s, model):
        scale = 1e3 if model == "icache" else 1e6
        # A difference of two runs: a few misses below zero is start-up noise, shown as 0.
        return max(0.0, scale * s[f"{model}-misses"] / s["instructions_by_model"][model])

    # Instructions per transaction: the i-cache run's (the three runs differ by `spread`).
    for (c, w), s in sims.items():
        base = sims.get(("default", w))
        cells = []
        for model in ("itlb-l1", "itlb-l2", "icache"):
            v = per_m(s, model)
            b = per_m(base, model) if base else None
            cells.append(f"{v:.2f}" if model == "icache" else f"{v:.1f}")
            cells.append(f"{v / b:.2f}×" if b else "–")
        print(f"| {WHAT.get(c, c)} | {NAMES.get(w, w)} | {s['instructions_by_model']['icache'] / s['transactions']:,.0f} | "
              + " | ".join(cells) + " |")
