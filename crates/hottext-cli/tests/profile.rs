//! `hottext profile` end to end: real gcc-built programs, real perf, the real `hottext` binary,
//! each test in its own temporary directory: the call graph it finds.
//!
//! These tests need gcc and perf, and permission to use perf (root, or
//! kernel.perf_event_paranoid <= 2); they fail with a message naming what is missing.

mod common;
mod program;

use common::{hottext, profile_json, stderr};
use program::{build, call_weight, record, self_samples};
use tempfile::TempDir;

fn profile_has_the_programs_call_graph(pie: bool) {
    let dir = TempDir::new().unwrap();
    let prog = build(dir.path(), "prog", if pie { &[] } else { &["-no-pie"] });
    let data = record(dir.path(), &prog);
    let out = hottext(
        &[
            "profile",
            data.to_str().unwrap(),
            "--binary",
            "prog",
            "-o",
            "prog.profile",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let profile = std::fs::read_to_string(dir.path().join("prog.profile")).unwrap();
    assert!(call_weight(&profile, "main", "hot") > 0);
    assert!(call_weight(&profile, "hot", "leaf") > 0);
    assert!(self_samples(&profile, "leaf") > 0, "{profile}");
    assert!(self_samples(&profile, "hot") > 0, "{profile}");
    assert!(
        profile.contains("# sample-kind: stack\n") && profile.contains("# binary: prog\n"),
        "{profile}"
    );
    assert!(profile.contains("# event: cpu-clock\n"), "{profile}");
    assert!(
        stderr(&out).contains("matched by build-id"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn pie_profile_has_main_hot_leaf_edges() {
    profile_has_the_programs_call_graph(true);
}

#[test]
fn non_pie_profile_has_main_hot_leaf_edges() {
    profile_has_the_programs_call_graph(false);
}

#[test]
fn frameless_leaf_gets_its_real_caller() {
    let dir = TempDir::new().unwrap();
    let prog = build(dir.path(), "prog", &["-DFRAMELESS"]);
    let data = record(dir.path(), &prog);
    let v = profile_json(dir.path(), &data, "prog", "p.txt");
    let profile = std::fs::read_to_string(dir.path().join("p.txt")).unwrap();
    // perf's own stacks give main -> leaf here: hot's frame is skipped.
    assert!(call_weight(&profile, "hot", "leaf") > 0, "{profile}");
    assert!(!profile.contains("call main leaf"), "{profile}");
    // hot calls leaf from one place: the recovered calls are put there.
    assert!(profile.contains("\nsite hot leaf "), "{profile}");
    // Most samples (about 4 in 5) sit in the frameless leaf, and each gets its caller back.
    let (recovered, in_binary) = (
        v["calls_recovered"].as_u64().unwrap(),
        v["samples_in_binary"].as_u64().unwrap(),
    );
    assert!(recovered * 2 > in_binary, "{v}");
}

#[test]
fn profile_json_counts_what_it_read() {
    let dir = TempDir::new().unwrap();
    let prog = build(dir.path(), "prog", &[]);
    let data = record(dir.path(), &prog);
    let v = profile_json(dir.path(), &data, "prog", "p.txt");
    assert_eq!(v["sample_kind"], "stack");
    // main, hot and leaf at least; a sample may also catch the clock reading between rounds.
    assert!(v["functions"].as_u64().unwrap() >= 3, "{v}");
    let profile = std::fs::read_to_string(dir.path().join("p.txt")).unwrap();
    assert!(profile.contains("\nfn main "), "{profile}");
    assert!(self_samples(&profile, "hot") > 0 && self_samples(&profile, "leaf") > 0);
    // Nearly all the samples of this single-binary program are counted in it.
    let (all, in_binary) = (
        v["samples"].as_u64().unwrap(),
        v["samples_in_binary"].as_u64().unwrap(),
    );
    assert!(all >= in_binary && in_binary * 100 >= all * 95, "{v}");
    assert_eq!(v["unreadable_records"], 0);
    assert_eq!(v["matched_by"][0], "build-id");
}
