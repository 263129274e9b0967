//! `hottext record` and `hottext profile` end to end: real gcc-built programs, real perf, the
//! real `hottext` binary, each test in its own temporary directory.
//!
//! These tests need gcc and perf, and permission to use perf (root, or
//! kernel.perf_event_paranoid <= 2); they fail with a message naming what is missing.

use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

mod common;

use common::{
    gcc, hottext, perf_record, profile_json, record_until_enough, require_perf, stderr, KillOnDrop,
};

/// `main` calls `hot` in a loop, `hot` calls `leaf`.
const PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifndef VARIANT
#define VARIANT 0
#endif

#ifdef FRAMELESS
/* gcc 12 sets up no frame pointer in a leaf function that uses no stack, even with
 * -fno-omit-frame-pointer: unwinding by frame pointers then skips hot, which hottext repairs. */
__attribute__((noinline)) unsigned long leaf(unsigned long x)
{
	for (int i = 0; i < 300; i++) {
		x = x * 6364136223846793005UL + 1442695040888963407UL;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}
#else
/* The volatile slot gives leaf a stack frame, so the plain tests see what perf sees. */
__attribute__((noinline)) unsigned long leaf(unsigned long x)
{
	volatile unsigned long slot = x;
	for (int i = 0; i < 300; i++)
		slot = slot * 6364136223846793005UL + 1442695040888963407UL;
	return slot;
}
#endif

__attribute__((noinline)) unsigned long hot(unsigned long x)
{
	for (int i = 0; i < 4; i++) {
		x = leaf(x + i);
		for (int j = 0; j < 150; j++) {
			x ^= x >> 7;
			__asm__ volatile("" : "+r"(x));
		}
	}
	return x + VARIANT;
}

/* CPU time, not wall time: on a loaded machine the program gets less of each second, and
 * samples of the software clock come with its CPU time. */
static double cpu_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	double end = cpu_seconds() + (argc > 1 ? atof(argv[1]) : 0.5);
	unsigned long x = 1;
	while (cpu_seconds() < end)
		for (int k = 0; k < 100; k++)
			x = hot(x);
	printf("%lu\n", x);
	return 0;
}
"#;

/// CPU seconds of work in the first recording of a program: ~2500 samples at 4999 Hz.
const WORK_SECONDS: f64 = 0.5;

/// Samples of the program a recording must hold before a test judges it (a tenth of a second
/// of its CPU time at 4999 Hz); fewer, and the test records again, longer.
const ENOUGH_SAMPLES: u64 = 500;

/// Builds `PROGRAM` as `dir/name` with extra gcc flags.
fn build(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    gcc(dir, name, PROGRAM, flags)
}

/// Records `prog` (which works for the seconds it is given) until the recording holds
/// [`ENOUGH_SAMPLES`] of it.
fn record(dir: &Path, prog: &Path) -> PathBuf {
    record_until_enough(WORK_SECONDS, |seconds| {
        let data = perf_record(dir, prog, &[&seconds.to_string()]);
        enough_samples(dir, &data, prog, &[]).map(|()| data)
    })
}

/// `Err` when `data` holds fewer than [`ENOUGH_SAMPLES`] of `binary` (`hottext profile` with
/// more `args` says how many); other failures of `hottext profile` fail the test.
fn enough_samples(dir: &Path, data: &Path, binary: &Path, args: &[&str]) -> Result<(), String> {
    let mut all = vec![
        "profile",
        data.to_str().unwrap(),
        "--binary",
        binary.to_str().unwrap(),
        "-o",
        "enough.profile",
        "--json",
    ];
    all.extend_from_slice(args);
    let out = hottext(&all, dir);
    let err = stderr(&out);
    // The binary was mapped, but no sample fell in it.
    if err.contains("fell in its functions") {
        return Err(err.trim().to_string());
    }
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    match v["samples_in_binary"].as_u64().unwrap() {
        n if n < ENOUGH_SAMPLES => Err(format!("{n} samples of {}", binary.display())),
        _ => Ok(()),
    }
}

/// Runs `hottext profile` and expects it to fail with exit status 2 and `needle` in the message.
fn profile_fails(dir: &Path, args: &[&str], needle: &str) -> String {
    let mut all = vec!["profile"];
    all.extend_from_slice(args);
    let out = hottext(&all, dir);
    let err = stderr(&out);
    assert_eq!(
        out.status.code(),
        Some(2),
        "expected exit 2, got {:?}; stderr: {err}",
        out.status
    );
    assert!(err.starts_with("hottext: "), "{err}");
    assert!(err.contains(needle), "expected '{needle}' in: {err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

/// Weight of `call caller callee`, self samples of `fn name`.
fn call_weight(profile: &str, caller: &str, callee: &str) -> u64 {
    let prefix = format!("call {caller} {callee} ");
    profile
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no '{prefix}' edge in:\n{profile}"))
        .parse()
        .unwrap()
}

fn self_samples(profile: &str, name: &str) -> u64 {
    let prefix = format!("fn {name} ");
    let line = profile
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no fn {name} in:\n{profile}"));
    let fields: Vec<u64> = line.split(' ').map(|f| f.parse().unwrap()).collect();
    assert!(fields[0] > 0, "fn {name} has no size");
    fields[1]
}

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

#[test]
fn truncated_perf_data_is_an_error() {
    let dir = TempDir::new().unwrap();
    let prog = build(dir.path(), "prog", &[]);
    let data = record(dir.path(), &prog);
    let bytes = std::fs::read(&data).unwrap();
    // As `head -c` would cut it: in the middle of the data section, and in the header.
    std::fs::write(dir.path().join("half.data"), &bytes[..bytes.len() / 2]).unwrap();
    std::fs::write(dir.path().join("tiny.data"), &bytes[..60]).unwrap();
    profile_fails(
        dir.path(),
        &["half.data", "--binary", "prog"],
        "half.data is cut short",
    );
    profile_fails(
        dir.path(),
        &["tiny.data", "--binary", "prog"],
        "tiny.data is cut short",
    );
}

#[test]
fn corrupt_record_is_an_error_not_a_panic() {
    let dir = TempDir::new().unwrap();
    let prog = build(dir.path(), "prog", &[]);
    let data = record(dir.path(), &prog);
    let mut bytes = std::fs::read(&data).unwrap();
    // The first record's size (u16 at offset 6 of its header) becomes 0.
    let data_offset = u64::from_le_bytes(bytes[40..48].try_into().unwrap()) as usize;
    bytes[data_offset + 6..data_offset + 8].copy_from_slice(&[0, 0]);
    std::fs::write(dir.path().join("bad.data"), &bytes).unwrap();
    profile_fails(
        dir.path(),
        &["bad.data", "--binary", "prog"],
        "bad.data is damaged after 0 records",
    );
}

/// Issue 11: a count in a feature section, set so that linux-perf-data would allocate 34 GB
/// (an abort), is an error that names it.
#[test]
fn crafted_event_desc_count_is_an_error_not_an_abort() {
    let dir = TempDir::new().unwrap();
    let prog = build(dir.path(), "prog", &[]);
    let data = record(dir.path(), &prog);
    let mut bytes = std::fs::read(&data).unwrap();
    let word = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let features = word(&bytes, 72);
    assert!(features >> 12 & 1 == 1, "perf wrote no EVENT_DESC section");
    // The feature table follows the data section, one {offset, size} per set bit.
    let table = (word(&bytes, 40) + word(&bytes, 48)) as usize;
    let index = (features & 0xfff).count_ones() as usize;
    let section = word(&bytes, table + 16 * index) as usize;
    let attr_size = u32::from_le_bytes(bytes[section + 4..section + 8].try_into().unwrap());
    let nr_ids = section + 8 + attr_size as usize;
    bytes[nr_ids..nr_ids + 4].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    std::fs::write(dir.path().join("crafted.data"), &bytes).unwrap();
    profile_fails(
        dir.path(),
        &["crafted.data", "--binary", "prog"],
        "crafted.data is malformed: its event descriptions (EVENT_DESC): the 4294967280 ids of event 1",
    );
}

#[test]
fn perf_data_of_another_program_is_an_error() {
    let dir = TempDir::new().unwrap();
    let prog = build(dir.path(), "prog", &[]);
    let other = build(dir.path(), "other", &["-DVARIANT=7"]);
    let data = record(dir.path(), &other);
    let err = profile_fails(
        dir.path(),
        &[data.to_str().unwrap(), "--binary", prog.to_str().unwrap()],
        "no sample in",
    );
    assert!(
        err.contains("recorded from another program?") && err.contains("other"),
        "{err}"
    );
}

#[test]
fn stripped_binary_is_an_error() {
    let dir = TempDir::new().unwrap();
    let prog = build(dir.path(), "prog", &[]);
    let data = record(dir.path(), &prog);
    let stripped = build(dir.path(), "stripped", &["-s"]);
    profile_fails(
        dir.path(),
        &[
            data.to_str().unwrap(),
            "--binary",
            stripped.to_str().unwrap(),
        ],
        "no function symbols",
    );
}

#[test]
fn build_id_mismatch_is_an_error_unless_allowed() {
    let dir = TempDir::new().unwrap();
    let recorded = dir.path().join("recorded");
    std::fs::create_dir(&recorded).unwrap();
    let prog = build(&recorded, "prog", &[]);
    let data = record(dir.path(), &prog);
    // A rebuild of the same program with another constant: same name, another build-id.
    let rebuilt = build(dir.path(), "prog", &["-DVARIANT=1"]);
    let args = [
        data.to_str().unwrap(),
        "--binary",
        rebuilt.to_str().unwrap(),
    ];
    let err = profile_fails(dir.path(), &args, "build-id mismatch");
    assert!(err.contains("--allow-build-id-mismatch"), "{err}");

    let out = hottext(
        &[
            "profile",
            args[0],
            args[1],
            args[2],
            "-o",
            "p.txt",
            "--allow-build-id-mismatch",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("used anyway"), "{}", stderr(&out));
}

#[test]
fn missing_perf_data_is_an_error() {
    let dir = TempDir::new().unwrap();
    let prog = build(dir.path(), "prog", &[]);
    profile_fails(
        dir.path(),
        &["nowhere.data", "--binary", prog.to_str().unwrap()],
        "cannot read nowhere.data",
    );
}

#[test]
fn a_file_that_is_not_perf_data_is_an_error() {
    let dir = TempDir::new().unwrap();
    build(dir.path(), "prog", &[]);
    profile_fails(
        dir.path(),
        &["prog", "--binary", "prog"],
        "not a perf.data file",
    );
}

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
