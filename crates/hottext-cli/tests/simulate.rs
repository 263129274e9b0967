//! `ab --simulate` and `stat --simulate` under the real valgrind, on real binaries: one with a
//! function on every 4 KiB page (each call a new page and the same i-cache set), the same code
//! packed by a hottext linker script, linked at several hot-range offsets, and the page-apart
//! functions placed by a linker script in a hot range, for the model of its 2 MiB pages.

mod common;

use std::path::Path;

use common::{hottext, require, row, run, runtime_lib, stderr, write};
use serde_json::Value;

const FUNCTIONS: usize = 100;

/// `main(N)` calls every function N times; with `SERVE` it is a server that does that work
/// each time a file `work` (holding N) appears, answers with `done`, and exits on SIGTERM
/// (removing its `ready`).
fn program() -> String {
    let mut s = String::from(
        "#include <signal.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <unistd.h>\n",
    );
    for i in 0..FUNCTIONS {
        s += &format!(
            "__attribute__((noinline)) unsigned f{i}(unsigned x) {{ return x * {}u ^ (x >> {}); }}\n",
            2 * i + 3,
            i % 13 + 1
        );
    }
    s += "static unsigned work(long n) { unsigned s = 0; for (long r = 0; r < n; r++) {\n";
    for i in 0..FUNCTIONS {
        s += &format!("  s = f{i}(s + (unsigned)r);\n");
    }
    s += "} return s; }\n";
    s += r#"
static volatile sig_atomic_t stop;
static void on_term(int sig) { (void)sig; stop = 1; }
int main(int argc, char **argv) {
    if (argc > 1) { printf("%u\n", work(atol(argv[1]))); return 0; }
    signal(SIGTERM, on_term);
    FILE *ready = fopen("ready", "w"); if (ready) fclose(ready);
    while (!stop) {
        FILE *f = fopen("work", "r");
        if (!f) { usleep(100000); continue; } /* rare polls: little idle work to cancel */
        long n = 0; if (fscanf(f, "%ld", &n) != 1) n = 0; fclose(f); unlink("work");
        unsigned s = work(n);
        FILE *d = fopen("done.tmp", "w"); if (d) { fprintf(d, "%u\n", s); fclose(d); rename("done.tmp", "done"); }
    }
    unlink("ready"); /* the next lifetime is not ready before it says so */
    return 0;
}
"#;
    s
}

/// `spread` (a function per page) and its objects and profile.
fn build_spread(dir: &Path) {
    require("valgrind", &["--version"]);
    write(dir, "p.c", &program());
    compile(dir, &["-falign-functions=4096"], "spread.o");
    run("gcc", &["spread.o", "-o", "spread"], dir);
    let mut profile = String::from("# hottext profile v1\nfn main 200 10\n");
    for i in 0..FUNCTIONS {
        profile += &format!("fn f{i} 16 100\ncall main f{i} 100\n");
    }
    write(dir, "p.profile", &profile);
}

fn compile(dir: &Path, flags: &[&str], out: &str) {
    let mut args = vec!["-O2", "-ffunction-sections", "-c", "p.c", "-o", out];
    args.extend_from_slice(flags);
    run("gcc", &args, dir);
}

/// Links `objects` into `out` with hottext's C3 order of the profile (every function hot) as
/// an ld script, the hot range at `offset` (and padded to whole 2 MiB pages by default).
fn link_ordered(dir: &Path, binary: &str, objects: &str, offset: &str, out: &str) {
    link_ordered_with(dir, binary, objects, offset, out, true);
}

/// [`link_ordered`], with the runtime (`-lhottext_auto`) or without.
fn link_ordered_with(
    dir: &Path,
    binary: &str,
    objects: &str,
    offset: &str,
    out: &str,
    with_runtime: bool,
) {
    let script = format!("{out}.ld");
    let markers = format!("{out}-markers.o");
    let o = hottext(
        &["order", "p.profile", "--binary", binary, "--format"]
            .into_iter()
            .chain(["ld-script", "--hot-offset", offset, "-o", &script])
            .chain(["--markers", &markers])
            .collect::<Vec<_>>(),
        dir,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let link = format!("-Wl,-T,{script}");
    let mut args = vec![objects, &markers, &link, "-o", out];
    // The runtime, whose huge pages the simulation models for a binary that links it.
    let runtime = format!("-L{}", runtime_lib().display());
    if with_runtime {
        args.extend([runtime.as_str(), "-lhottext_auto"]);
    }
    run("gcc", &args, dir);
}

/// `spread`, `base` (the same code packed by the compiler) and `hot-0`, `hot-64`, `hot-128`:
/// base's objects linked in hottext's order at those hot offsets.
fn build(dir: &Path) {
    build_spread(dir);
    compile(dir, &[], "p.o");
    run("gcc", &["p.o", "-o", "base"], dir);
    for offset in ["0", "64", "128"] {
        link_ordered(dir, "base", "p.o", offset, &format!("hot-{offset}"));
    }
}

/// The report of a run that must have succeeded.
fn json(o: &std::process::Output) -> Value {
    assert!(o.status.success(), "{}", stderr(o));
    common::json(o)
}

#[test]
fn a_packed_layout_beats_a_page_per_function_at_every_hot_offset() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let nm = String::from_utf8_lossy(&run("nm", &["hot-64"], dir.path()).stdout).into_owned();
    let address = |name: &str| {
        nm.lines()
            .find(|l| l.ends_with(&format!(" {name}")))
            .and_then(|l| u64::from_str_radix(l.split(' ').next()?, 16).ok())
            .unwrap_or_else(|| panic!("{name} not in hot-64's symbols"))
    };
    let first = (0..FUNCTIONS)
        .map(|i| address(&format!("f{i}")))
        .chain([address("main")])
        .min()
        .unwrap();
    assert_eq!(
        first - address("__hot_start"),
        64,
        "the padding is before the first hot function"
    );

    let report = json(&hottext(
        &[
            "ab",
            "--simulate",
            "--offsets",
            "0,64,128",
            "--json",
            "-a",
            "./spread 300",
            "--baseline-a",
            "./spread 3",
            "-b",
            "./hot-{offset} 300",
            "--baseline-b",
            "./hot-{offset} 3",
        ],
        dir.path(),
    ));
    assert_eq!(report["offsets"], serde_json::json!([0, 64, 128]));
    assert_eq!(report["records"].as_array().unwrap().len(), 6);
    assert_eq!(report["startup_cancelled"], true);
    // The same code runs: exact counts agree at every offset.
    let instructions = row(&report, "instructions");
    for bound in ["min", "max"] {
        let ratio = instructions["ratio"][bound].as_f64().unwrap();
        assert!(
            (ratio - 1.0).abs() < 0.001,
            "instructions B/A {ratio}: {instructions}"
        );
    }
    // A function per page: every call a new page, every function the same L1i set.
    for key in ["itlb-l1-misses-per-m", "icache-misses-per-m"] {
        let r = row(&report, key);
        assert_eq!(r["verdict"], "b-better", "{r}");
        assert!(r["ratio"]["max"].as_f64().unwrap() < 0.1, "{r}");
    }
}

#[test]
fn offsets_without_a_placeholder_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let o = hottext(
        &[
            "ab",
            "--simulate",
            "--offsets",
            "0,64",
            "-a",
            "true",
            "-b",
            "true",
        ],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("{offset}"), "{}", stderr(&o));
    let o = hottext(&["order", "x.profile", "--hot-offset", "100"], dir.path());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn stat_simulates_a_command_net_of_its_baseline() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let full = json(&hottext(
        &["stat", "--simulate", "--json", "--", "./base", "200"],
        dir.path(),
    ));
    let net = json(&hottext(
        &[
            "stat",
            "--simulate",
            "--json",
            "--baseline",
            "./base 100",
            "--",
            "./base",
            "200",
        ],
        dir.path(),
    ));
    let instructions = |v: &Value| {
        v["simulated"]["models"][4]["instructions"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(full["simulated"]["models"].as_array().unwrap().len(), 5);
    assert_eq!(net["simulated"]["startup_cancelled"], true);
    // 100 rounds of the 100 calls, without the start-up the full run includes.
    let per_round = instructions(&net) as f64 / 100.0;
    assert!(
        (300.0..3000.0).contains(&per_round),
        "{per_round} instructions per round"
    );
    assert!(
        instructions(&full) > instructions(&net) + 50_000,
        "start-up was not subtracted"
    );
}

#[test]
fn a_server_is_simulated_under_its_load_net_of_an_idle_lifetime() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let load = "echo 20000 > work.tmp && mv work.tmp work && \
                while [ ! -e done ]; do sleep 0.05; done; rm done";
    let report = json(&hottext(
        &[
            "ab",
            "--simulate",
            "--json",
            "--server-a",
            "rm -f ready; exec ./spread",
            "--server-b",
            "rm -f ready; exec ./hot-0",
            "--ready",
            "test -e ready",
            "--ready-timeout",
            "120",
            "--load",
            load,
        ],
        dir.path(),
    ));
    let instructions = row(&report, "instructions");
    let a = instructions["a"]["median"].as_f64().unwrap();
    // 20000 rounds of 100 calls; the idle polling and start-up cancel out.
    assert!(
        (20000.0 * 300.0..20000.0 * 3000.0).contains(&a),
        "{instructions}"
    );
    assert_eq!(
        instructions["verdict"], "no-significant-difference",
        "{instructions}"
    );
    assert_eq!(row(&report, "itlb-l1-misses-per-m")["verdict"], "b-better");
    // The server's hot range is on a 2 MiB page in the 2 MiB-page run too; that page's misses
    // can only fall.
    let b = &record(&report, "B")["simulated"];
    assert!(
        b["hot_ranges"]
            .as_object()
            .unwrap()
            .keys()
            .any(|e| e.ends_with("/hot-0")),
        "{b}"
    );
    let misses = |key: &str| counts(&report, "B", key)["misses"].as_u64().unwrap();
    assert!(misses("itlb-l1-huge") <= misses("itlb-l1"), "{b}");
}

/// One side's record (at the first offset).
fn record<'a>(report: &'a Value, side: &str) -> &'a Value {
    report["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["side"] == side)
        .unwrap_or_else(|| panic!("no record of side {side}: {report}"))
}

/// One side's counts of model `key` (at the first offset).
fn counts<'a>(report: &'a Value, side: &str, key: &str) -> &'a Value {
    let record = record(report, side);
    record["simulated"]["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["key"] == key)
        .unwrap_or_else(|| panic!("no model {key} in {record}"))
}

fn per_million(counts: &Value) -> f64 {
    counts["misses"].as_f64().unwrap() * 1e6 / counts["instructions"].as_f64().unwrap()
}

/// Issue 33: the model of the hot range on 2 MiB pages shows what the runtime's huge pages add.
/// A and B are one layout, a function a page in the hot range, so on 4 KiB pages both miss the
/// L1 iTLB at every call; only B links the runtime, whose whole 2 MiB page takes one entry.
#[test]
fn the_hot_range_on_2_mib_pages_takes_its_misses_off_the_itlb() {
    let dir = tempfile::tempdir().unwrap();
    build_spread(dir.path());
    link_ordered(dir.path(), "spread", "spread.o", "0", "hot-spread");
    link_ordered_with(dir.path(), "spread", "spread.o", "0", "hot-4k", false);
    let report = json(&hottext(
        &[
            "ab",
            "--simulate",
            "--json",
            "-a",
            "./hot-4k 300",
            "--baseline-a",
            "./hot-4k 3",
            "-b",
            "./hot-spread 300",
            "--baseline-b",
            "./hot-spread 3",
        ],
        dir.path(),
    ));
    let hot_ranges = |side: &str| record(&report, side)["simulated"]["hot_ranges"].clone();
    // A has the hot range but not the runtime: its text stays on 4 KiB pages, so there is no
    // 2 MiB-page run and its figures are the 4 KiB ones.
    assert_eq!(hot_ranges("A"), serde_json::json!({}), "{report}");
    for level in ["itlb-l1", "itlb-l2"] {
        let huge = format!("{level}-huge");
        assert_eq!(
            counts(&report, "A", level)["misses"],
            counts(&report, "A", &huge)["misses"],
            "{report}"
        );
    }
    // B's one executable has its hot range on a whole 2 MiB page.
    let b_ranges = hot_ranges("B");
    let b_ranges = b_ranges.as_object().unwrap();
    assert_eq!(b_ranges.len(), 1, "{b_ranges:?}");
    let (executable, pages) = b_ranges.iter().next().unwrap();
    assert!(executable.ends_with("/hot-spread"), "{executable}");
    assert!(pages.as_u64().unwrap() >= 1, "{pages}");
    // On 4 KiB pages B misses as A does (a page a call); on 2 MiB pages almost never.
    let small = per_million(counts(&report, "B", "itlb-l1"));
    let huge = per_million(counts(&report, "B", "itlb-l1-huge"));
    assert!(
        small > 1000.0,
        "B's L1 iTLB misses per M on 4 KiB pages: {small}"
    );
    assert!(
        huge < small / 20.0,
        "on 2 MiB pages {huge}, on 4 KiB {small}"
    );
    let huge_row = row(&report, "itlb-l1-huge-misses-per-m");
    assert_eq!(huge_row["verdict"], "b-better", "{huge_row}");
    let small_row = row(&report, "itlb-l1-misses-per-m");
    assert!(
        small_row["ratio"]["min"].as_f64().unwrap() > 0.5,
        "the 4 KiB figure is the layout's, not the huge pages': {small_row}"
    );
}
