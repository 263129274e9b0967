//! `hottext record` end to end: a command it starts, a running process it pins and gives back.
//!
//! These tests need gcc and perf, and permission to use perf.

mod common;
mod program;

use std::process::Command;

use common::{
    hottext, perf_records_every_branch, record_until_enough, require_perf, stderr, KillOnDrop,
};
use program::{build, call_weight, enough_samples, WORK_SECONDS};
use tempfile::TempDir;

#[test]
fn record_runs_a_command_and_says_how() {
    require_perf();
    let dir = TempDir::new().unwrap();
    let prog = build(dir.path(), "prog", &[]);
    record_until_enough(WORK_SECONDS, |seconds| {
        let out = hottext(
            &[
                "record",
                "-o",
                "rec.data",
                "--",
                "./prog",
                &seconds.to_string(),
            ],
            dir.path(),
        );
        let err = stderr(&out);
        assert!(out.status.success(), "{err}");
        assert!(
            err.contains("recording call stacks") || err.contains("recording branch records"),
            "{err}"
        );
        assert!(err.contains("$ perf record -o rec.data"), "{err}");
        assert!(err.contains("perf's own cost"), "{err}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).lines().count(),
            1,
            "the program's own output"
        );
        enough_samples(dir.path(), &dir.path().join("rec.data"), &prog, &[])
    });

    let out = hottext(
        &[
            "profile",
            "rec.data",
            "--binary",
            "prog",
            "-o",
            "prog.profile",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let profile = std::fs::read_to_string(dir.path().join("prog.profile")).unwrap();
    assert!(call_weight(&profile, "hot", "leaf") > 0, "{profile}");
}

/// Issue 33: the program's stderr passes through as it is; only perf's own lines are labelled.
#[test]
fn record_leaves_the_programs_stderr_unlabelled() {
    require_perf();
    let dir = TempDir::new().unwrap();
    build(dir.path(), "prog", &[]);
    let script = "echo 'a line of the program' >&2; ./prog 0.2";
    let out = hottext(
        &["record", "-o", "own.data", "--", "sh", "-c", script],
        dir.path(),
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.lines().any(|l| l == "a line of the program"),
        "the program's line is missing or changed:\n{err}"
    );
    assert!(!err.contains("hottext: perf: a line"), "{err}");
    assert!(err.contains("hottext: wrote own.data"), "{err}");
}

#[test]
fn record_runs_a_command_pinned_to_the_cpu_it_samples() {
    require_perf();
    let dir = TempDir::new().unwrap();
    let prog = build(dir.path(), "prog", &[]);
    let cpu = hottext::os::cpus::own().unwrap().iter().last().unwrap();
    let cpu_arg = cpu.to_string();
    record_until_enough(WORK_SECONDS, |seconds| {
        // The command says where it may run, then works.
        let script = format!("taskset -cp $$ && ./prog {seconds}");
        let args = ["record", "--cpu", &cpu_arg, "-o", "pinned.data", "--"];
        let out = hottext(&[&args[..], &["sh", "-c", &script]].concat(), dir.path());
        let err = stderr(&out);
        assert!(out.status.success(), "{err}");
        assert!(
            err.contains(&format!("CPU-wide events on CPU {cpu} ")),
            "{err}"
        );
        assert!(err.contains(&format!("-- taskset -c {cpu} sh -c")), "{err}");
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            said.contains(&format!("current affinity list: {cpu}\n")),
            "the command was not pinned: {said}"
        );
        enough_samples(dir.path(), &dir.path().join("pinned.data"), &prog, &[])
    });
}

#[test]
fn record_pins_a_running_process_and_gives_its_affinity_back() {
    require_perf();
    let dir = TempDir::new().unwrap();
    let prog = build(dir.path(), "prog", &[]);
    // It works until the test is done with it: an hour of CPU time is never reached.
    let child = KillOnDrop(
        Command::new(&prog)
            .arg("3600")
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = child.0.id().to_string();
    let allowed = || {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        status
            .lines()
            .find(|l| l.starts_with("Cpus_allowed_list:"))
            .unwrap()
            .to_string()
    };
    let before = allowed();
    record_until_enough(WORK_SECONDS, |seconds| {
        let out = hottext(
            &[
                "record",
                "--pid",
                &pid,
                "--duration",
                &seconds.to_string(),
                "--cpu",
                "0",
                "-o",
                "pid.data",
                "--json",
            ],
            dir.path(),
        );
        let err = stderr(&out);
        assert!(out.status.success(), "{err}");
        assert_eq!(allowed(), before, "affinity not restored");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["scope"], "cpus 0", "{v}");
        assert!(
            v["perf_command"].as_str().unwrap().contains("-a -C 0"),
            "{v}"
        );
        enough_samples(
            dir.path(),
            &dir.path().join("pid.data"),
            &prog,
            &["--pid", &pid],
        )
    });
    drop(child);

    let out = hottext(
        &[
            "profile", "pid.data", "--binary", "prog", "--pid", &pid, "-o", "p.txt",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let profile = std::fs::read_to_string(dir.path().join("p.txt")).unwrap();
    assert!(call_weight(&profile, "hot", "leaf") > 0, "{profile}");
}

#[test]
fn a_duration_too_short_for_perf_or_a_zero_frequency_is_an_input_error() {
    let dir = tempfile::tempdir().unwrap();
    for (args, says) in [
        (
            ["--duration", "1e-10"],
            "--duration 0.0000000001 is not a recording length: give at least 0.1 seconds",
        ),
        (
            ["--frequency", "0"],
            "--frequency 0 samples a second records nothing",
        ),
    ] {
        let out = hottext(
            &["record", args[0], args[1], "-o", "x.data", "--", "true"],
            dir.path(),
        );
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
        assert!(!dir.path().join("x.data").exists(), "{args:?}: perf ran");
    }
}

/// `--sampling every-branch` records `-j any,u` where perf can, and where it cannot (a VM
/// without a PMU, as CI's) stops before starting anything, with exit status 2 and a message
/// that says what block edges need. Which case applies is asked of perf itself.
#[test]
fn every_branch_is_recorded_where_perf_can_and_refused_plainly_where_it_cannot() {
    require_perf();
    let dir = TempDir::new().unwrap();
    let perf_can = perf_records_every_branch();
    let out = hottext(
        &[
            "record",
            "--sampling",
            "every-branch",
            "-o",
            "rec.data",
            "--",
            "true",
        ],
        dir.path(),
    );
    let err = stderr(&out);
    if perf_can {
        assert!(out.status.success(), "{err}");
        assert!(err.contains("-j any,u"), "{err}");
        assert!(
            err.contains("recording branch records of every taken branch"),
            "{err}"
        );
    } else {
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains("no branch records of every branch (perf record -j any fails)"),
            "{err}"
        );
        assert!(!dir.path().join("rec.data").exists(), "nothing is recorded");
    }
}
