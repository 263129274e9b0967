//! Programs built without frame pointers: perf's `--call-graph dwarf` recordings give the call
//! graph (one CFI unwinding step per sample), and `hottext record` chooses them.
//!
//! These tests need gcc and perf, and permission to use perf; they fail with a message naming
//! what is missing.

mod common;
mod program;

use common::{hottext, profile_json, record_until_enough, stderr};
use program::{build, call_weight, enough_samples, record_stacks, self_samples, WORK_SECONDS};
use tempfile::TempDir;

/// gcc -O2 without frame pointers anywhere, as distributions build most programs.
const NO_FRAME_POINTERS: &[&str] = &["-O2", "-fomit-frame-pointer"];

/// The program's calls: `main` calls `hot`, `hot` calls `leaf`.
const REAL_CALLS: [(&str, &str); 2] = [("main", "hot"), ("hot", "leaf")];

/// The share of the profile's call weight on the program's real calls.
fn real_call_share(profile: &str) -> f64 {
    let total: u64 = profile
        .lines()
        .filter_map(|l| l.strip_prefix("call "))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    let real: u64 = REAL_CALLS
        .iter()
        .map(|&(caller, callee)| call_weight(profile, caller, callee))
        .sum();
    real as f64 / total.max(1) as f64
}

#[test]
fn dwarf_recording_of_a_program_without_frame_pointers_has_its_calls() {
    let dir = TempDir::new().unwrap();
    let prog = build(dir.path(), "prog", NO_FRAME_POINTERS);
    let data = record_stacks(dir.path(), &prog, "dwarf");
    let v = profile_json(dir.path(), &data, "prog", "p.txt");
    let profile = std::fs::read_to_string(dir.path().join("p.txt")).unwrap();
    assert!(profile.contains("# sample-kind: dwarf\n"), "{profile}");
    assert_eq!(v["sample_kind"], "dwarf");
    let share = real_call_share(&profile);
    assert!(
        share > 0.98,
        "{share} of the call weight on real calls:\n{profile}"
    );
    // Nearly every sample in hot or leaf gives an edge: CFI holds at every instruction, so no
    // sample loses its caller at a function's entry or exit.
    let in_callees = self_samples(&profile, "hot") + self_samples(&profile, "leaf");
    let calls = v["calls"].as_u64().unwrap();
    assert!(calls * 100 >= in_callees * 98, "{v}\n{profile}");
    // ... and none needed the frame-pointer repair, which would be wrong here.
    assert_eq!(v["calls_recovered"], 0, "{v}");
    assert_eq!(v["stacks_too_short"], 0, "{v}");
    assert_eq!(v["unreadable_records"], 0, "{v}");
}

#[test]
fn frame_pointer_recording_of_the_same_program_misses_them() {
    // Why DWARF is needed: perf's frame-pointer chain through %rbp, which this code uses as a
    // plain register, rarely finds a caller in the binary.
    let dir = TempDir::new().unwrap();
    let prog = build(dir.path(), "prog", NO_FRAME_POINTERS);
    let data = record_stacks(dir.path(), &prog, "fp");
    let v = profile_json(dir.path(), &data, "prog", "p.txt");
    let (calls, in_binary) = (
        v["calls"].as_u64().unwrap(),
        v["samples_in_binary"].as_u64().unwrap(),
    );
    assert!(calls * 10 < in_binary, "{v}");
}

#[test]
fn record_unwinds_a_program_without_frame_pointers_by_dwarf() {
    let dir = TempDir::new().unwrap();
    let prog = build(dir.path(), "prog", NO_FRAME_POINTERS);
    record_until_enough(WORK_SECONDS, |seconds| {
        let secs = seconds.to_string();
        let args = ["record", "--json", "--per-process", "-o", "rec.data"];
        let out = hottext(&[&args[..], &["--", "./prog", &secs]].concat(), dir.path());
        let err = stderr(&out);
        assert!(out.status.success(), "{err}");
        assert!(err.contains("call stacks by DWARF unwinding"), "{err}");
        let share = err
            .split("% of the program's calling functions")
            .next()
            .and_then(|before| before.rsplit(' ').next())
            .and_then(|n| n.parse::<u32>().ok());
        assert!(share.is_some_and(|s| s < 50), "{err}");
        // The program's own output comes first; the JSON document is the rest.
        let stdout = String::from_utf8_lossy(&out.stdout);
        let summary: serde_json::Value =
            serde_json::from_str(&stdout[stdout.find('{').unwrap_or(0)..]).unwrap();
        assert_eq!(summary["sampling"], "dwarf", "{summary}");
        let command = summary["perf_command"].as_str().unwrap();
        assert!(command.contains(" --call-graph dwarf "), "{command}");
        enough_samples(dir.path(), &dir.path().join("rec.data"), &prog, &[])
    });
    let data = dir.path().join("rec.data");
    profile_json(dir.path(), &data, "prog", "p.txt");
    let profile = std::fs::read_to_string(dir.path().join("p.txt")).unwrap();
    assert!(real_call_share(&profile) > 0.98, "{profile}");
}
