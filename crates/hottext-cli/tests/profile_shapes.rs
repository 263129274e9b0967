//! `hottext profile` on the shapes of recording real users hand it, made here with real perf and
//! gcc: several events at once, pipe mode (`perf record -o -`), a binary without a build-id at
//! another path. Sample counts are compared with `perf script`'s, never with hottext's own.
//!
//! These tests need gcc and perf, and permission to use perf; they fail naming what is missing.

mod common;
mod program;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{hottext, json, record_until_enough, require_perf, stderr, stdout};
use program::{build, ENOUGH_SAMPLES, WORK_SECONDS};
use tempfile::TempDir;

/// `perf record ARGS -o OUT -- prog seconds` for longer each time until every event has enough
/// samples (by `perf script`); returns the file and perf's count per event, in file order.
fn perf_record(dir: &Path, out: &str, args: &[&str], prog: &Path) -> (PathBuf, Vec<(String, u64)>) {
    require_perf();
    let data = dir.join(out);
    record_until_enough(WORK_SECONDS, |seconds| {
        let seconds = seconds.to_string();
        let pipe = args.contains(&"-");
        let mut cmd = Command::new("perf");
        cmd.args(["record", "-q", "-F", "4999"]).args(args);
        if pipe {
            cmd.stdout(std::fs::File::create(&data).unwrap());
        } else {
            cmd.arg("-o").arg(&data).stdout(Stdio::null());
        }
        let status = cmd.arg("--").arg(prog).arg(&seconds).status().unwrap();
        assert!(status.success(), "perf record {args:?} failed");
        let counts = perf_counts(&data);
        match counts.iter().find(|(_, n)| *n < ENOUGH_SAMPLES) {
            Some((event, n)) => Err(format!("{n} samples of {event}")),
            None => Ok((data.clone(), counts)),
        }
    })
}

/// Samples per event as `perf script` reads them, in order of first appearance.
fn perf_counts(data: &Path) -> Vec<(String, u64)> {
    let out = Command::new("perf")
        .args(["script", "-G", "-F", "event", "-i"])
        .arg(data)
        .output()
        .unwrap();
    assert!(out.status.success(), "perf script: {}", stderr(&out));
    let mut counts: Vec<(String, u64)> = Vec::new();
    for line in stdout(&out).lines() {
        let event = line.trim().trim_end_matches(':').to_string();
        if event.is_empty() {
            continue;
        }
        match counts.iter_mut().find(|(e, _)| *e == event) {
            Some((_, n)) => *n += 1,
            None => counts.push((event, 1)),
        }
    }
    counts
}

fn profile_json(dir: &Path, data: &Path, binary: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "profile",
        data.to_str().unwrap(),
        "--binary",
        binary.to_str().unwrap(),
        "-o",
        "p.profile",
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = hottext(&args, dir);
    assert!(out.status.success(), "{}", stderr(&out));
    json(&out)
}

/// What `hottext profile` (without --json) prints on stderr: the summary and warnings.
fn profile_stderr(dir: &Path, data: &Path, binary: &Path) -> String {
    let args = [
        "profile",
        data.to_str().unwrap(),
        "--binary",
        binary.to_str().unwrap(),
        "-o",
        "p.profile",
    ];
    let out = hottext(&args, dir);
    assert!(out.status.success(), "{}", stderr(&out));
    stderr(&out)
}

fn events_json(dir: &Path, data: &Path) -> Vec<serde_json::Value> {
    let out = hottext(
        &["profile", data.to_str().unwrap(), "--events", "--json"],
        dir,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    json(&out)["events"].as_array().unwrap().clone()
}

#[test]
fn two_events_with_stacks_are_both_used() {
    let dir = TempDir::new().unwrap();
    let prog = build(dir.path(), "prog", &[]);
    // A stand-in for a hybrid CPU's cpu_core and cpu_atom events: two events, both with stacks.
    let (data, perf) = perf_record(
        dir.path(),
        "two.data",
        &["-g", "-e", "cpu-clock", "-e", "task-clock"],
        &prog,
    );
    assert_eq!(perf.len(), 2, "{perf:?}");
    let events = events_json(dir.path(), &data);
    for (event, (name, samples)) in events.iter().zip(&perf) {
        assert_eq!(event["name"], name.as_str(), "{events:?}");
        assert_eq!(event["samples"], *samples, "{events:?}");
        assert_eq!(event["carries"], "fp-stack", "{events:?}");
        assert_eq!(event["used"], true, "{events:?}");
    }
    let v = profile_json(dir.path(), &data, &prog, &[]);
    assert_eq!(v["event"], "cpu-clock, task-clock", "{v}");
    assert_eq!(v["samples"], perf[0].1 + perf[1].1, "{v}");
    assert_eq!(v["samples_other_events"], 0, "{v}");
    assert!(v["unused_events"].as_array().unwrap().is_empty(), "{v}");
}

#[test]
fn an_event_without_stacks_is_named_as_unused() {
    let dir = TempDir::new().unwrap();
    let prog = build(dir.path(), "prog", &[]);
    let (data, perf) = perf_record(
        dir.path(),
        "mixed.data",
        &[
            "-e",
            "cpu-clock/call-graph=fp/",
            "-e",
            "task-clock/call-graph=no/",
        ],
        &prog,
    );
    let events = events_json(dir.path(), &data);
    assert_eq!(events[0]["carries"], "fp-stack", "{events:?}");
    assert_eq!(events[1]["carries"], "plain", "{events:?}");
    assert_eq!(events[1]["used"], false, "{events:?}");

    let v = profile_json(dir.path(), &data, &prog, &[]);
    assert_eq!(v["samples"], perf[0].1, "{v}");
    assert_eq!(v["samples_other_events"], perf[1].1, "{v}");
    let unused = &v["unused_events"][0];
    assert_eq!(unused["name"], "task-clock/call-graph=no/", "{v}");
    assert_eq!(unused["samples"], perf[1].1, "{v}");
    // The CLI says so.
    let out = hottext(
        &[
            "profile",
            data.to_str().unwrap(),
            "--binary",
            "prog",
            "-o",
            "p.profile",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let expected = format!(
        "hottext: warning: events not used: task-clock/call-graph=no/ ({} samples: its samples carry no call information)",
        perf[1].1
    );
    assert!(stderr(&out).contains(&expected), "{}", stderr(&out));
}

#[test]
fn a_pipe_mode_recording_is_read() {
    let dir = TempDir::new().unwrap();
    let prog = build(dir.path(), "prog", &[]);
    let (data, perf) = perf_record(dir.path(), "pipe.data", &["-g", "-o", "-"], &prog);
    let header = std::fs::read(&data).unwrap();
    assert_eq!(header[8..16], 16u64.to_le_bytes(), "not a pipe-mode file");
    let events = events_json(dir.path(), &data);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["samples"], perf[0].1, "{events:?}");

    let v = profile_json(dir.path(), &data, &prog, &[]);
    assert_eq!(v["samples"], perf[0].1, "{v}");
    assert!(
        v["samples_in_binary"].as_u64().unwrap() * 2 > perf[0].1,
        "{v}"
    );
    // perf writes no build-id table into a pipe: the mapping is found by its path.
    assert_eq!(v["matched_by"], serde_json::json!(["path"]), "{v}");
    let profile = std::fs::read_to_string(dir.path().join("p.profile")).unwrap();
    assert!(
        program::call_weight(&profile, "hot", "leaf") > 0,
        "{profile}"
    );
}

#[test]
fn a_cut_pipe_mode_recording_is_refused_with_where() {
    let dir = TempDir::new().unwrap();
    let prog = build(dir.path(), "prog", &[]);
    let (data, _) = perf_record(dir.path(), "pipe.data", &["-g", "-o", "-"], &prog);
    let bytes = std::fs::read(&data).unwrap();
    // In its leading records (the events), and in its last record: perf's pipe has no end
    // marker, so only the record cut in two shows it.
    std::fs::write(dir.path().join("head.data"), &bytes[..100]).unwrap();
    std::fs::write(dir.path().join("tail.data"), &bytes[..bytes.len() - 3]).unwrap();
    for (file, needle) in [
        (
            "head.data",
            "hottext: head.data is cut short: it has 100 bytes but its header needs",
        ),
        (
            "tail.data",
            &format!(
                "it ends at byte {}, inside the record at byte",
                bytes.len() - 3
            ),
        ),
    ] {
        let out = hottext(&["profile", file, "--events"], dir.path());
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(needle), "expected '{needle}' in: {err}");
    }
}

/// A program without a build-id, recorded at `dir/rec/prog`; the test then moves things around.
fn no_build_id_recording(dir: &Path) -> (PathBuf, PathBuf) {
    std::fs::create_dir(dir.join("rec")).unwrap();
    let prog = build(&dir.join("rec"), "prog", &["-Wl,--build-id=none"]);
    let (data, _) = perf_record(dir, "p.data", &["-g", "-e", "cpu-clock"], &prog);
    (prog, data)
}

#[test]
fn a_binary_without_build_id_is_found_by_name_and_code() {
    let dir = TempDir::new().unwrap();
    let (recorded, data) = no_build_id_recording(dir.path());
    std::fs::create_dir(dir.path().join("copy")).unwrap();
    let copy = dir.path().join("copy/prog");
    std::fs::copy(&recorded, &copy).unwrap();

    let v = profile_json(dir.path(), &data, &copy, &[]);
    assert_eq!(v["matched_by"], serde_json::json!(["name-and-code"]), "{v}");
    assert!(
        v["samples_in_binary"].as_u64().unwrap() >= ENOUGH_SAMPLES,
        "{v}"
    );
    let said = profile_stderr(dir.path(), &data, &copy);
    assert!(
        said.contains("matched by file name, at another path whose file has the same code"),
        "{said}"
    );

    // The recorded file gone: matched by name only, with a warning saying so.
    std::fs::remove_file(&recorded).unwrap();
    let v = profile_json(dir.path(), &data, &copy, &[]);
    assert_eq!(v["matched_by"], serde_json::json!(["name-only"]), "{v}");
    let said = profile_stderr(dir.path(), &data, &copy);
    assert!(said.contains("matched by file name only"), "{said}");
}

#[test]
fn a_binary_without_build_id_and_other_code_is_refused_unless_allowed() {
    let dir = TempDir::new().unwrap();
    let (_, data) = no_build_id_recording(dir.path());
    std::fs::create_dir(dir.path().join("other")).unwrap();
    // The same name, other code: another constant in `hot`, its functions where they were.
    let other = build(
        &dir.path().join("other"),
        "prog",
        &["-Wl,--build-id=none", "-DVARIANT=1"],
    );
    let out = hottext(
        &[
            "profile",
            data.to_str().unwrap(),
            "--binary",
            "other/prog",
            "-o",
            "p.profile",
        ],
        dir.path(),
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("rec/prog with its name has other code"),
        "{err}"
    );
    assert!(err.contains("--allow-build-id-mismatch"), "{err}");
    let mapped = err.split("mapped files: ").nth(1).unwrap_or_default();
    assert!(
        !mapped.contains("/prog"),
        "the binary is not a mapped file: {err}"
    );

    let v = profile_json(dir.path(), &data, &other, &["--allow-build-id-mismatch"]);
    assert_eq!(
        v["matched_by"],
        serde_json::json!(["mismatch-allowed"]),
        "{v}"
    );

    // Another name: nothing fits, and the message says why.
    std::fs::copy(&other, dir.path().join("other/renamed")).unwrap();
    let out = hottext(
        &[
            "profile",
            data.to_str().unwrap(),
            "--binary",
            "other/renamed",
            "-o",
            "p.profile",
        ],
        dir.path(),
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("it has no build-id, and no mapped file has its path or its name"),
        "{err}"
    );
}
