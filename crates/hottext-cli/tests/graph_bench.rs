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
        "--separate-recs=1",
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
