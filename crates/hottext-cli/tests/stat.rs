//! `hottext stat` through the real binary, with and without a hardware PMU.

mod common;

use std::process::Command;

use common::{f, hottext, json, stderr, stdout};

/// Whether perf can count instructions here, asked of perf directly.
fn perf_counts_instructions() -> bool {
    let out = Command::new("perf")
        .args(["stat", "-x,", "-e", "instructions", "true"])
        .output()
        .expect("this test needs perf (apt-get install linux-perf)");
    out.status.success() && !String::from_utf8_lossy(&out.stderr).contains("<not supported>")
}

#[test]
fn stat_true_reports_task_clock_and_names_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let out = hottext(&["stat", "--json", "--", "true"], dir.path());
    assert!(out.status.success(), "{}", stderr(&out));
    let report = json(&out);
    let figure = |key: &str| {
        report["figures"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["key"] == key)
            .unwrap_or_else(|| panic!("no figure {key}"))
            .clone()
    };
    assert!(f(&figure("task-clock")["value"]) > 0.0);
    assert_eq!(figure("task-clock")["event"], "task-clock");
    assert!(f(&figure("wall-time")["value"]) > 0.0);
    let pmu = perf_counts_instructions();
    assert_eq!(report["hardware_pmu"], pmu);
    let missing: Vec<&str> = report["events"]["missing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["counter"].as_str().unwrap())
        .collect();
    if pmu {
        assert!(f(&figure("instructions")["value"]) > 0.0);
        assert!(!missing.contains(&"instructions"));
    } else {
        assert!(figure("instructions")["value"].is_null());
        assert!(missing.contains(&"instructions") && missing.contains(&"cycles"));
    }

    let out = hottext(&["stat", "--", "true"], dir.path());
    assert!(out.status.success());
    let err = stderr(&out);
    assert!(err.contains("task-clock"), "{err}");
    if !pmu {
        assert!(
            err.contains("no hardware PMU: instructions/cycles/iTLB not available"),
            "{err}"
        );
        assert!(err.contains("instructions <not supported>"), "{err}");
    }
}

#[test]
fn stat_passes_output_through_and_reports_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let out = hottext(
        &[
            "stat",
            "--",
            "sh",
            "-c",
            "echo to-stdout; echo to-stderr >&2; exit 3",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out), "to-stdout\n");
    assert!(stderr(&out).contains("to-stderr"));
    assert!(
        stderr(&out).contains("FAILED with exit status 3"),
        "{}",
        stderr(&out)
    );

    // With --json, stdout is the JSON alone.
    let out = hottext(&["stat", "--json", "--", "echo", "hi"], dir.path());
    assert!(out.status.success());
    assert_eq!(json(&out)["exit_code"], 0);
    assert!(stderr(&out).contains("hi"));
}
