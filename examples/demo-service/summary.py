#!/usr/bin/env python3
"""The table `make demo` ends with, built from the JSON the hottext verbs wrote during the demo.

    summary.py BUILD_DIR LINKER...

Reads BUILD/order.json (`hottext order --json`), BUILD/ab-LINKER.json and BUILD/ab-huge.json
(`hottext ab --json`) and BUILD/verify-huge.json (`hottext verify --pid --json`). A file that is
missing is a step that did not run; its row says so rather than the table failing.
"""

import json
import sys
from pathlib import Path

# Rows every run has; the table shows wall time of these, and below it every other row the
# machine measured (instructions, cycles, iTLB and i-cache figures where there is a PMU).
SOFTWARE_ROWS = {"wall-time", "task-clock", "user-time", "system-time", "context-switches",
                 "page-faults", "server-cpu-time"}
LINK_INPUT = {
    "bfd": "GNU ld, linker script",
    "gold": "gold, section order + markers",
    "lld": "lld, symbol order + markers",
}


def load(path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def ratio(row):
    """'1.073 [1.047, 1.140] B better' for one row of an ab report."""
    c = row["comparison"]
    r = c["ratio"]
    verdict = {"b-better": "B better", "b-worse": "B worse"}.get(c["verdict"], "no sig. difference")
    return f"{r['median']:.3f} [{r['low']:.3f}, {r['high']:.3f}] {verdict}"


def ab_rows(report):
    """The headline row, the wall-time row, and the rows only a PMU gives, by label."""
    rows = {row["key"]: row for row in report["rows"]}
    headline = report.get("headline")
    pmu = {r["label"]: r for k, r in rows.items() if k not in SOFTWARE_ROWS and k != headline}
    return rows.get(headline), rows.get("wall-time"), pmu


def table(header, rows):
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()
    print(line(header))
    print(line(["-" * w for w in widths]))
    for r in rows:
        print(line(r))


def main():
    build, linkers = Path(sys.argv[1]), sys.argv[2:]
    steps = [(f"{l} ({LINK_INPUT.get(l, l)})", build / f"ab-{l}.json") for l in linkers]
    steps.append(("bfd + huge pages (-lhottext_auto)", build / "ab-huge.json"))

    print("\n== summary: baseline (A) against hottext (B), B/A with its 95 % interval")
    print("   (B/A is the median of the per-round ratios, so it can sit below 1 while B's median is higher)")
    rows, extra, pmu_missing = [], [], False
    for name, path in steps:
        report = load(path)
        if report is None:
            rows.append([name, "not run", "", "", ""])
            continue
        rps, wall, pmu = ab_rows(report)
        same = "same" if not report.get("same_outputs") or all(report["same_outputs"].values()) else "DIFFERS"
        rows.append([
            name,
            f"{rps['comparison']['median_a']:,.0f} -> {rps['comparison']['median_b']:,.0f}" if rps else "-",
            ratio(rps) if rps else "-",
            ratio(wall) if wall else "-",
            same,
        ])
        extra += [f"{name}: {label} {ratio(row)}" for label, row in pmu.items()]
        pmu_missing |= not report.get("hardware_pmu", False)
    table(["step", "requests/s A -> B", "requests/s B/A", "wall time B/A", "checksum"], rows)
    for line in extra:
        print("  " + line)
    sim = load(build / "sim-bfd.json")
    if sim:
        print("\n== simulated (cachegrind: exact instructions, misses per million instructions), "
              "bfd; B with the runtime, whose huge pages the 2 MiB-page rows model")
        rows = [[r["label"], f"{r['a']['median']:,.0f}", f"{r['b']['median']:,.0f}",
                 f"{r['ratio']['median']:.3f}" if r.get("ratio") else "-",
                 r["verdict"].replace("b-", "B ").replace("-", " ")] for r in sim["rows"]]
        table(["figure", "baseline", "hottext", "B/A", "verdict"], rows)
    if pmu_missing:
        where = "simulated above" if sim else "not measured"
        print(f"  (no hardware PMU here: instructions, cycles and iTLB/i-cache misses were {where})")

    order = load(build / "order.json")
    if order and order.get("ordered"):
        algorithm = order.get("algorithm", "?")
        print(f"\n== layout of the profiled binary: current -> {algorithm} (hottext order, chosen by --algorithm auto)")
        new, cur = order["ordered"], order.get("current") or {}
        figures = [
            ("4 KiB pages for 99 % of samples", "pages_4k_99", "{:,}"),
            ("2 MiB pages for 99 % of samples", "pages_2m_99", "{:,}"),
            ("call weight within 64 B", "calls_within_64b", "{:.1%}"),
            ("call weight on its 4 KiB page", "calls_within_4k", "{:.1%}"),
            ("weighted call distance", "weighted_call_distance", "{:.3g}"),
        ]
        rows = []
        for label, key, fmt in figures:
            if key in new:
                before = fmt.format(cur[key]) if key in cur else "-"
                rows.append([label, before, fmt.format(new[key])])
        table(["figure", "current", algorithm], rows)
        hot = order.get("hot")
        if hot:
            print(f"  hot range: {hot['functions']:,} functions, {hot['bytes'] / 2**20:.1f} MiB of code "
                  f"(those with samples and those that only call them; verify --binary counts the same)")

    verify = load(build / "verify-huge.json")
    if verify is not None:
        pages = verify.get("pages", [])
        huge = sum(1 for p in pages if p.get("backing") != "small")
        print(f"\n== huge pages: {huge} of {len(pages)} 2 MiB pages of the hot range on huge pages "
              f"(hottext verify --pid)")


if __name__ == "__main__":
    main()
