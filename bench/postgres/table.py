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
    "control": "relinked, same linker (GNU ld), no order",
    "ph": "Pettis-Hansen (ld script)",
    "c3": "C3 (ld script)",
    "c3-huge": "C3 + `-lhottext_auto` (huge pages at start)",
    "whole-huge": "default build, whole text on huge pages (LD_PRELOAD, HOTTEXT_WHOLE_TEXT=1)",
    "bolt-fn": "BOLT 19 `-reorder-functions=cdsort` (perf2bolt -nl)",
    "bolt-full": "BOLT 19 cdsort + ext-tsp blocks + split + `-hugify`",
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


print(f"## PostgreSQL 15 under pgbench (bench/postgres/run.sh)\n")
if a.note:
    print(f"**{a.note}**\n")
print(f"Machine: {a.machine}.")
print(
    f"`make bench-postgres` (= `bash bench/postgres/run.sh`, RUNS={a.runs} DURATION={a.duration} "
    f"SCALE={a.scale}); build {a.build_seconds} s, whole run {a.total_seconds} s. "
    f"Each row is one `hottext ab` of the default build (A) against the configuration (B), "
    f"{a.runs} interleaved rounds after one warm-up round, server pinned to one CPU, load: "
    f"`pgbench -n [-S] -c {CLIENTS} -j {CLIENTS} -T {a.duration}` on the other CPU over a Unix "
    "socket. tps: medians and the B/A ratio with its 95 % interval (sign-test order statistics). "
    f"Latency: pgbench's average latency of a closed loop of {CLIENTS} clients is "
    f"{CLIENTS}/tps, so its B/A ratio and interval are the reciprocals of the tps ones. "
    "Huge pages: AnonHugePages / FilePmdMapped (kB) of the postmaster after a short load.\n"
)
print("| configuration | workload | tps A | tps B | tps B/A [95 %] | latency B/A [95 %] | verdict | huge pages kB |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
notes = []
for c in a.configs.split():
    for w in a.workloads.split():
        path = os.path.join(a.out_dir, f"ab-{c}-{w}.json")
        try:
            with open(path) as f:
                r = json.load(f)
        except (OSError, ValueError):
            print(f"| {WHAT.get(c, c)} | {NAMES.get(w, w)} | – | – | – | – | not run | {huge(c)} |")
            continue
        row = next(x for x in r["rows"] if x["key"] == "tps" or x["label"] == "tps")
        cmp_ = row["comparison"]
        ri = cmp_.get("ratio")
        if ri:
            tps = f"{ri['median']:.3f} [{ri['low']:.3f}, {ri['high']:.3f}]"
            lat = f"{1 / ri['median']:.3f} [{1 / ri['high']:.3f}, {1 / ri['low']:.3f}]"
        else:
            tps = lat = "–"
        print(
            f"| {WHAT.get(c, c)} | {NAMES.get(w, w)} | {cmp_['median_a']:.0f} | "
            f"{cmp_['median_b']:.0f} | {tps} | {lat} | {cmp_['verdict']} | {huge(c)} |"
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
