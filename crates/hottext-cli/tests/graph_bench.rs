//! Guards bench/graph (issue 32's ground truth): on a small program run under the real
//! callgrind and recorded with the real perf, the converter finds the exact graph (a tail jump
//! recorded as a call), and compare.py finds hottext's graph of the same program close to it
//! and a wrong graph far from it.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{hottext, perf_record, require, run, stderr, stdout, write};

/// Leaves with frames (a stack array) that loop, `mid_one` and `mid_two` calling them, and
/// `pick` tail-jumping into one of the mids. `main(N)` runs N rounds of the same mix, so any N
/// gives the same normalised graph: callgrind runs a short N, perf a long one.
const PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#define NI __attribute__((noinline, noclone))
static volatile unsigned long sink;
NI unsigned long leaf_short(unsigned long x) {
    volatile unsigned long keep[2];
    for (int i = 0; i < 40; i++) x = x * 6364136223846793005UL + 1;
    keep[0] = x; return keep[0] ^ (x >> 7);
}
NI unsigned long leaf_long(unsigned long x) {
    volatile unsigned long keep[2];
    for (int i = 0; i < 120; i++) x = x * 2862933555777941757UL + 3;
    keep[1] = x; return keep[1] ^ (x >> 9);
}
NI unsigned long mid_one(unsigned long x) { x = leaf_short(x); x = leaf_long(x + 1); sink = x; return x * 3; }
NI unsigned long mid_two(unsigned long x) { x = leaf_short(x); x = leaf_short(x ^ 5); sink = x; return x * 5; }
NI unsigned long pick(unsigned long x, int one) { if (one) return mid_one(x); return mid_two(x + 7); }
int main(int argc, char **argv) {
    unsigned long n = argc > 1 ? strtoul(argv[1], 0, 10) : 1000, s = 0;
    for (unsigned long i = 0; i < n; i++) s += pick(s + i, i % 3 == 0);
    printf("%lu\n", s);
    return 0;
}
"#;

fn bench_graph(script: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../bench/graph")
        .join(script)
}

/// `python3 bench/graph/SCRIPT args` in dir; its stdout, or the test fails with its stderr.
fn python(dir: &Path, script: &str, args: &[&Path]) -> String {
    let out = Command::new("python3")
        .arg(bench_graph(script))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("cannot run python3");
    assert!(out.status.success(), "{script} failed:\n{}", stderr(&out));
    stdout(&out)
}

/// compare.py's figures as (name, value) pairs.
fn figures(dir: &Path, truth: &Path, profile: &Path) -> Vec<(String, f64)> {
    let text = python(dir, "compare.py", &[truth, profile]);
    let words: Vec<&str> = text.split_whitespace().collect();
    words
        .chunks(2)
        .map(|p| {
            (
                p[0].to_string(),
                p[1].parse().expect("a figure is a number"),
            )
        })
        .collect()
}

fn figure(figures: &[(String, f64)], name: &str) -> f64 {
    figures
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("compare.py printed no {name}: {figures:?}"))
        .1
}

#[test]
fn callgrind_truth_and_hottext_graph_compare() {
    require("valgrind", &["--version"]);
    require("python3", &["--version"]);
    require("objdump", &["--version"]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(dir, "p.c", PROGRAM);
    let flags = [
        "-O2",
        "-fno-omit-frame-pointer",
        "-mno-omit-leaf-frame-pointer",
    ];
    run("gcc", &[&flags[..], &["-o", "p", "p.c"]].concat(), dir);
    let asm = stdout(&run("objdump", &["-d", "--no-show-raw-insn", "p"], dir));
    assert!(
        asm.lines()
            .any(|l| l.contains("jmp") && l.contains("<mid_one>")),
        "gcc made no tail jump into mid_one; the test needs one:\n{asm}"
    );

    let callgrind = [
        "--tool=callgrind",
        "--separate-callers=1",
        "--separate-recs=2",
        "--callgrind-out-file=cg.out",
        "./p",
        "30000",
    ];
    run("valgrind", &callgrind, dir);
    let truth_text = python(
        dir,
        "callgrind_edges.py",
        &[&dir.join("cg.out"), &dir.join("p")],
    );
    let truth = write(dir, "truth.edges", &truth_text);
    // The tail jump is a call in the truth, and the mids' callees are theirs, not pick's caller's.
    let has = |a: &str, b: &str| {
        truth_text
            .lines()
            .any(|l| l.starts_with(&format!("call {a} {b} ")))
    };
    assert!(
        has("pick", "mid_one") && has("pick", "mid_two"),
        "{truth_text}"
    );
    assert!(
        has("mid_one", "leaf_long") && has("mid_two", "leaf_short"),
        "{truth_text}"
    );
    assert!(
        !has("main", "mid_one") && !has("main", "leaf_long"),
        "{truth_text}"
    );

    let data = perf_record(dir, &dir.join("p"), &["3000000"]);
    let profiled = hottext(
        &[
            "profile",
            data.to_str().unwrap(),
            "--binary",
            "p",
            "-o",
            "p.profile",
        ],
        dir,
    );
    assert!(profiled.status.success(), "{}", stderr(&profiled));
    let got = figures(dir, &truth, &dir.join("p.profile"));
    // The mids' own cost (all pick -> mid weighs) is a few percent; the leaves' edges, which
    // frame pointers show, are the rest.
    assert!(figure(&got, "overlap") >= 0.8, "{got:?}");
    assert!(figure(&got, "self") >= 0.9, "{got:?}");

    // A graph with every edge reversed shares no edge with the truth, though its self costs do.
    let reversed: String = truth_text
        .lines()
        .map(|l| match l.split(' ').collect::<Vec<_>>()[..] {
            ["call", a, b, w] => format!("call {b} {a} {w}\n"),
            _ => format!("{l}\n"),
        })
        .collect();
    let wrong = figures(dir, &truth, &write(dir, "reversed.edges", &reversed));
    assert_eq!(figure(&wrong, "overlap"), 0.0, "{wrong:?}");
    assert_eq!(figure(&wrong, "recall50"), 0.0, "{wrong:?}");
    assert_eq!(figure(&wrong, "self"), 1.0, "{wrong:?}");
}

/// `walk` recurses into itself three levels deep below `top`; `even` and `odd` recurse into each
/// other. Every call does the same loop, so the edges' shares are known.
const RECURSIVE: &str = r#"
#include <stdlib.h>
#define NI __attribute__((noinline, noclone))
static volatile long sink;
static long work(long d) { long s = 0; for (int i = 0; i < 200; i++) s += i * d; sink = s; return s; }
NI long walk(long d) { long s = work(d); if (d > 0) s += walk(d - 1); return s; }
NI long odd(long d);
NI long even(long d) { long s = work(d); if (d > 0) s += odd(d - 1); return s; }
NI long odd(long d) { long s = work(d); if (d > 0) s += even(d - 1); return s; }
NI long top(long n) { long s = 0; for (long i = 0; i < n; i++) s += walk(3) + even(4); return s; }
int main(int argc, char **argv) { return (int)top(argc > 1 ? atol(argv[1]) : 1000) & 1; }
"#;

/// An edge's cost in callgrind_edges.py's output (0 when absent).
fn edge_cost(edges: &str, caller: &str, callee: &str) -> f64 {
    let prefix = format!("call {caller} {callee} ");
    edges
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map_or(0.0, |w| w.parse().expect("an edge's cost is a number"))
}

/// The converter gives a recursion's cost to its immediate caller (callgrind names the context by
/// the nearest other function), and sums several files (one per process of a server).
#[test]
fn callgrind_truth_keeps_recursion_and_sums_files() {
    require("valgrind", &["--version"]);
    require("python3", &["--version"]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(dir, "r.c", RECURSIVE);
    let flags = [
        "-O1",
        "-fno-omit-frame-pointer",
        "-fno-optimize-sibling-calls",
    ];
    run("gcc", &[&flags[..], &["-o", "r", "r.c"]].concat(), dir);
    for out in ["cg.1", "cg.2"] {
        let file = format!("--callgrind-out-file={out}");
        let callgrind = [
            "--tool=callgrind",
            "--separate-callers=1",
            "--separate-recs=2",
            &file,
            "./r",
            "2000",
        ];
        run("valgrind", &callgrind, dir);
    }
    let (one, two) = (dir.join("cg.1"), dir.join("cg.2"));
    let once = python(dir, "callgrind_edges.py", &[&one, &dir.join("r")]);
    // walk runs 4 times a round, once called by top and 3 times by itself; even 3 times, once
    // by top and twice by odd; odd twice, by even.
    let ratio =
        |a: (&str, &str), b: (&str, &str)| edge_cost(&once, a.0, a.1) / edge_cost(&once, b.0, b.1);
    let walk = ratio(("walk", "walk"), ("top", "walk"));
    assert!(
        (2.7..3.3).contains(&walk),
        "walk -> walk / top -> walk = {walk}:\n{once}"
    );
    let even = ratio(("odd", "even"), ("top", "even"));
    assert!(
        (1.8..2.2).contains(&even),
        "odd -> even / top -> even = {even}:\n{once}"
    );
    assert!(
        edge_cost(&once, "even", "odd") > 0.0 && edge_cost(&once, "odd", "odd") == 0.0,
        "{once}"
    );

    let both = python(dir, "callgrind_edges.py", &[&one, &two, &dir.join("r")]);
    for (a, b) in [("top", "walk"), ("walk", "walk"), ("odd", "even")] {
        assert_eq!(
            edge_cost(&both, a, b),
            2.0 * edge_cost(&once, a, b),
            "{a} -> {b}:\n{both}"
        );
    }
}

/// compare.py reads a profile with basic-block lines (a binary with address maps), and counts
/// hottext's `name;file.c` (a local function whose name several share) as the truth's `name`,
/// which callgrind gives without debug information; a name the truth has whole stays whole.
#[test]
fn compare_folds_file_qualified_names_and_skips_blocks() {
    require("python3", &["--version"]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let truth = write(
        dir,
        "truth.edges",
        "self heap_getattr 20\nself nocachegetattr 60\nself scan;a.c 20\n\
         call SysCacheGetAttr heap_getattr 20\ncall heap_getattr nocachegetattr 60\n\
         call main scan;a.c 20\n",
    );
    let profile = write(
        dir,
        "p.profile",
        "# hottext profile v4\nfn heap_getattr;syscache.c 190 2\nfn nocachegetattr 300 6\n\
         fn scan;a.c 40 2\ncall SysCacheGetAttr heap_getattr;syscache.c 2\n\
         call heap_getattr;syscache.c nocachegetattr 6\ncall main scan;a.c 2\n\
         block nocachegetattr 0 0 19 4\n",
    );
    let got = figures(dir, &truth, &profile);
    assert_eq!(figure(&got, "overlap"), 1.0, "{got:?}");
    assert_eq!(figure(&got, "self"), 1.0, "{got:?}");
}

/// bolt_edges.py splits each callee's self samples (perf2bolt -nl's profile) over its callers by
/// BOLT's call weights (llvm-bolt --dump-cg), in whole samples that add up; it cuts BOLT's `/N`
/// and `(*N)` off local names, and leaves out weightless calls and nodes BOLT does not print (no
/// samples). The text is as llvm-bolt 19 writes it (bolt-19 is not a test prerequisite).
#[test]
fn bolt_call_graph_splits_self_samples_by_call_weights() {
    require("python3", &["--version"]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let dot = write(
        dir,
        "cg.dot",
        "digraph g {\n\
         f0 [label=\"route\\nsamples=9000\\nsize=66\"];\n\
         f1 [label=\"mid_a\\nsamples=2000\\nsize=90\"];\n\
         f2 [label=\"leaf/1(*2)\\nsamples=7000\\nsize=74\"];\n\
         f0 -> f1 [label=\"normWgt=0.000,weight=2000,callOffset=4000.0\"];\n\
         f0 -> f2 [label=\"normWgt=0.000,weight=1000,callOffset=9000.0\"];\n\
         f1 -> f2 [label=\"normWgt=0.000,weight=2000,callOffset=8000.0\"];\n\
         f1 -> f7 [label=\"normWgt=0.000,weight=0,callOffset=0.0\"];\n\
         f7 -> f1 [label=\"normWgt=0.000,weight=0,callOffset=0.0\"];\n\
         }\n",
    );
    let fdata = write(
        dir,
        "p.fdata",
        "no_lbr cpu-clock:u:\n1 route 0 3\n1 mid_a 4 5\n1 leaf/a.c/1 0 6\n1 leaf/a.c/1 9 1\n",
    );
    let edges = python(dir, "bolt_edges.py", &[&dot, &fdata]);
    assert_eq!(
        edges,
        "self leaf 7\nself mid_a 5\nself route 3\n\
         call mid_a leaf 5\ncall route leaf 2\ncall route mid_a 5\n",
    );
}
