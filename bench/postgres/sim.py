#!/usr/bin/env python3
"""Simulated instruction-TLB and i-cache misses of each PostgreSQL configuration.

For machines without a hardware PMU (these VMs): the server runs under valgrind's cachegrind,
whose first-level instruction cache is configured as the structure to model (cachegrind
accepts any power-of-two geometry, so a 4 KiB "line" makes it a TLB of 4 KiB pages):

  itlb-l1   64 entries, fully associative, 4 KiB pages (the L1 iTLB of AMD Zen 2-4)
  itlb-l2   512 entries, 8-way, 4 KiB pages (their L2 iTLB; a miss there is a page walk)
  icache    32 KiB, 8-way, 64-byte lines (the L1 instruction cache)

Instruction counts under valgrind are exact, so instructions per transaction are the check
that a configuration changes only the layout. Each figure is the difference between two
backends of the same server, one running SHORT transactions and one SHORT + TX, so start-up,
connection set-up and the counts a backend inherits from the postmaster at fork cancel out.
Every run starts from a copy of the cluster, so all see the same tables. The model has one
page size: configurations that differ from another only by huge pages
(c3-huge, whole-huge) are not simulated; with part of the text on 2 MiB pages their misses
are expected to be lower than those of their layout (c3, default).

Writes $OUT/sim-CONFIG-WORKLOAD.json. Usage (run.sh calls it):
  sim.py --dir BENCH_DIR --configs "default c3 ..." --workloads "select tpcb" --cpu N --user U
"""
import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import time

MODELS = {
    "itlb-l1": "--I1=262144,64,4096",
    "itlb-l2": "--I1=2097152,8,4096",
    "icache": "--I1=32768,8,64",
}
SHORT = 200

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("--dir", required=True)
p.add_argument("--configs", required=True)
p.add_argument("--workloads", required=True)
p.add_argument("--cpu", type=int, required=True)
p.add_argument("--load-cpu", type=int, default=0)
p.add_argument("--user", required=True)
p.add_argument("--tx", type=int, default=2000,
               help="measured select-only transactions (default 2000); tpcb-like runs a fifth "
                    "as many, since each takes about 7 times the instructions")
a = p.parse_args()

inst = os.path.join(a.dir, "inst")
sock = os.path.join(a.dir, "sock")
out = os.path.join(a.dir, "out")
pgbench = os.path.join(inst, "bin", "pgbench")
psql = os.path.join(inst, "bin", "psql")


def fail(msg):
    print(f"sim.py: {msg}", file=sys.stderr)
    sys.exit(1)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r.stdout


def summary(path):
    """The events and totals of one cachegrind.out file."""
    events = totals = None
    with open(path) as f:
        for line in f:
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith("summary:"):
                totals = [int(x) for x in line.split()[1:]]
    if not events or not totals:
        fail(f"{path}: no events/summary line (cachegrind stopped early?)")
    return dict(zip(events, totals))


def files(cg_dir):
    return set(glob.glob(os.path.join(cg_dir, "cg.*")))


def backend_of(cg_dir, before):
    """The cachegrind file of the client backend that did the last client's work: of the new
    files that ran a query, the one with the most instructions (pgbench opens a second,
    short connection of its own; autovacuum workers and other helpers write files too).
    Backends write the file when they exit, just after the client disconnects, so wait until
    no new file has appeared for a second."""
    found, quiet = {}, 0
    for _ in range(300):
        time.sleep(0.1)
        new = False
        for f in files(cg_dir) - before - set(found):
            with open(f) as fh:
                text = fh.read()
            if "\nsummary:" in text:
                found[f] = summary(f) if "fn=exec_simple_query" in text else None
                new = True
        quiet = 0 if new else quiet + 1
        clients = [c for c in found.values() if c]
        if clients and quiet >= 10:
            return max(clients, key=lambda c: c["Ir"])
    fail(f"no client backend wrote its cachegrind file in {cg_dir} within 30 s")


def pgbench_run(mode, tx):
    flags = ["-S"] if mode == "select" else []
    run(["taskset", "-c", str(a.load_cpu), pgbench, "-n", *flags, "-c", "1", "-t", str(tx),
         "-h", sock, "-U", "postgres", "postgres"])


def measure(config, mode, model, tx):
    cg_dir = os.path.join(out, f"cg-{config}-{mode}-{model}")
    subprocess.run(["rm", "-rf", cg_dir], check=True)
    os.makedirs(cg_dir)
    subprocess.run(["chown", f"{a.user}:", cg_dir], check=True)
    binary = os.path.join(a.dir, "v", config, "bin", "postgres")
    # Every simulated run starts from a copy of the same cluster: the measured runs before
    # leave the tables bloated by a different amount, which changed select-only's instructions
    # per transaction by up to 10 % between configurations.
    data = os.path.join(a.dir, "sim-data")
    subprocess.run(["rm", "-rf", data], check=True)
    subprocess.run(["cp", "-a", os.path.join(a.dir, "data"), data], check=True)
    cmd = ["taskset", "-c", str(a.cpu), "setpriv", f"--reuid={a.user}", f"--regid={a.user}",
           "--clear-groups", "--", "valgrind", "--tool=cachegrind", "--cache-sim=yes",
           MODELS[model], f"--cachegrind-out-file={cg_dir}/cg.%p",
           binary, "-D", data]
    with open(os.path.join(cg_dir, "server.log"), "w") as log:
        server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        for _ in range(600):
            if subprocess.run([os.path.join(inst, "bin", "pg_isready"), "-q", "-h", sock]).returncode == 0:
                break
            if server.poll() is not None:
                fail(f"{config} under valgrind exited; see {cg_dir}/server.log")
            time.sleep(0.1)
        else:
            fail(f"{config} under valgrind did not answer in 60 s; see {cg_dir}/server.log")
        before = files(cg_dir)
        run([psql, "-qAt", "-h", sock, "-U", "postgres", "postgres", "-f",
             os.path.join(os.path.dirname(os.path.abspath(__file__)), "prewarm.sql")])
        backend_of(cg_dir, before)  # its file written, so that it is not taken for pgbench's
        counts = []
        for n in (SHORT, SHORT + tx):
            before = files(cg_dir)
            pgbench_run(mode, n)
            counts.append(backend_of(cg_dir, before))
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGINT)  # fast shutdown
            server.wait(timeout=120)
    short, long = counts
    return {k: long[k] - short[k] for k in ("Ir", "I1mr")}


for config in a.configs.split():
    for mode in a.workloads.split():
        tx = a.tx if mode == "select" else max(a.tx // 5, 1)
        result = {"config": config, "workload": mode, "transactions": tx,
                  "models": {m: MODELS[m] for m in MODELS}}
        for model in MODELS:
            t = time.time()
            d = measure(config, mode, model, tx)
            if d["Ir"] <= 0:
                fail(f"{config}/{mode}/{model}: the longer run counted no more instructions")
            result.setdefault("instructions_by_model", {})[model] = d["Ir"]
            result[f"{model}-misses"] = d["I1mr"]
            print(f"  sim {config} {mode} {model}: {d['Ir'] / tx:,.0f} instructions/tx, "
                  f"{1e6 * d['I1mr'] / d['Ir']:.1f} misses per M instructions "
                  f"({time.time() - t:.0f} s)", flush=True)
        with open(os.path.join(out, f"sim-{config}-{mode}.json"), "w") as f:
            json.dump(result, f, indent=1)
