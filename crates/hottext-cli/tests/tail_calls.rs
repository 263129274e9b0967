//! Tail calls in real recordings: a program built at -O2, where `route` jumps (a sibling call)
//! into one of eight `mid` functions, each calling two leaves of its own. The stack shows
//! `main` below every `mid` and leaf; the edges must come from the code: `route → mid` at the
//! jump and `mid → leaf` at the call, never `main → mid` or `route → leaf`. The same program
//! recorded without stacks gets its edges inferred from the code.
//!
//! Needs gcc, objdump (binutils) and perf with permission to use it, like the profile tests.

use std::path::Path;

use tempfile::TempDir;

mod common;

use common::{
    call_lines, gcc, hottext, json, perf_record_with, profile_json, record_until_enough, run,
    stdout,
};

const PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))
/* Leaves that use no stack: gcc builds them without a frame even with frame pointers on. */
#define LEAF(k, j, n) NOINLINE unsigned long leaf##k##_##j(unsigned long x) \
	{ for (int i = 0; i < n; i++) { x = x * 6364136223846793005UL + k * 2 + j + 1; \
	  __asm__ volatile("" : "+r"(x)); } return x; }
#define MID(k) LEAF(k, 0, 60) LEAF(k, 1, 90) \
	NOINLINE unsigned long mid##k(unsigned long x) \
	{ x = leaf##k##_0(x); x = leaf##k##_1(x); return x + k; }
MID(0) MID(1) MID(2) MID(3) MID(4) MID(5) MID(6) MID(7)

/* A call in tail position: -O2 makes each a jmp. */
NOINLINE unsigned long route(unsigned long x, int k)
{
	switch (k) {
	case 0: return mid0(x); case 1: return mid1(x); case 2: return mid2(x);
	case 3: return mid3(x); case 4: return mid4(x); case 5: return mid5(x);
	case 6: return mid6(x); default: return mid7(x);
	}
}

static double cpu_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	double end = cpu_seconds() + atof(argv[1]);
	unsigned long x = 1;
	while (cpu_seconds() < end)
		for (int i = 0; i < 1000; i++)
			x = route(x, (int)((x >> 7) % 8));
	printf("%lu\n", x);
	return 0;
}
"#;

/// Builds the program and checks that gcc made the sibling calls (else the test proves nothing).
fn build(dir: &Path) -> std::path::PathBuf {
    let prog = gcc(dir, "tail", PROGRAM, &["-O2", "-ffunction-sections"]);
    let asm = stdout(&run(
        "objdump",
        &[
            "-d",
            "--no-show-raw-insn",
            "--disassemble=route",
            prog.to_str().unwrap(),
        ],
        dir,
    ));
    let jumps = asm
        .lines()
        .filter(|l| l.contains("jmp") && l.contains("<mid"))
        .count();
    assert_eq!(jumps, 8, "gcc should jump to every mid from route:\n{asm}");
    prog
}

/// Weight of the edges whose caller and callee match, as a share of all call weight.
fn share(calls: &[(String, String, u64)], caller: &str, callee: &str) -> f64 {
    let total: u64 = calls.iter().map(|c| c.2).sum();
    let part: u64 = calls
        .iter()
        .filter(|c| c.0.starts_with(caller) && c.1.starts_with(callee))
        .map(|c| c.2)
        .sum();
    part as f64 / total.max(1) as f64
}

/// Each `midK → leafK_j` edge, and no leaf under another mid.
fn leaves_are_under_their_own_mid(calls: &[(String, String, u64)]) {
    for (caller, callee, _) in calls.iter().filter(|c| c.1.starts_with("leaf")) {
        let k = &callee["leaf".len()..callee.find('_').unwrap()];
        assert_eq!(caller, &format!("mid{k}"), "{calls:?}");
    }
}

#[test]
fn stack_samples_put_each_leaf_under_the_function_that_jumped_to_its_caller() {
    let dir = TempDir::new().unwrap();
    let prog = build(dir.path());
    let (v, profile) = record_until_enough(1.0, |seconds| {
        let data = perf_record_with(dir.path(), &prog, &["-g"], &[&seconds.to_string()]);
        let v = profile_json(dir.path(), &data, "tail", "tail.profile");
        let profile = std::fs::read_to_string(dir.path().join("tail.profile")).unwrap();
        match v["calls"].as_u64() {
            Some(n) if n >= 1000 => Ok((v, profile)),
            n => Err(format!("{n:?} call weight")),
        }
    });
    let calls = call_lines(&profile);
    // The leaves hold nearly all the time; every leaf sample went through route's jump.
    assert!(share(&calls, "mid", "leaf") > 0.9, "{calls:?}");
    assert_eq!(share(&calls, "route", "leaf"), 0.0, "{calls:?}");
    assert_eq!(share(&calls, "main", "mid"), 0.0, "{calls:?}");
    leaves_are_under_their_own_mid(&calls);
    let tail = v["calls_tail"].as_u64().unwrap() as f64;
    assert!(tail > 0.9 * v["calls"].as_u64().unwrap() as f64, "{v}");
    assert_eq!(v["calls_tail_undecided"].as_u64(), Some(0), "{v}");

    // The doctor reads the share from the profile's headers.
    let doctor = json(&hottext(
        &[
            "doctor",
            "--binary",
            "tail",
            "--profile",
            "tail.profile",
            "--json",
        ],
        dir.path(),
    ));
    let check = doctor["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "call graph")
        .unwrap_or_else(|| panic!("no call graph check: {doctor}"));
    let value = check["value"].as_str().unwrap();
    let percent: f64 = value
        .split_once("; ")
        .and_then(|(_, rest)| rest.split('%').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no share in {value}"));
    assert!(percent > 90.0, "{value}");
}

#[test]
fn samples_without_stacks_get_edges_inferred_from_the_calls() {
    let dir = TempDir::new().unwrap();
    let prog = build(dir.path());
    let (v, profile) = record_until_enough(1.0, |seconds| {
        let data = perf_record_with(dir.path(), &prog, &[], &[&seconds.to_string()]);
        let v = profile_json(dir.path(), &data, "tail", "tail.profile");
        let profile = std::fs::read_to_string(dir.path().join("tail.profile")).unwrap();
        match v["samples_in_binary"].as_u64() {
            Some(n) if n >= 1000 => Ok((v, profile)),
            n => Err(format!("{n:?} samples")),
        }
    });
    assert_eq!(v["sample_kind"], "plain", "{v}");
    assert!(
        profile.contains("\n# edges: inferred from the code\n"),
        "{profile}"
    );
    let calls = call_lines(&profile);
    // Each leaf has one caller in the code: all of its samples are that edge's weight.
    assert!(share(&calls, "mid", "leaf") > 0.9, "{calls:?}");
    leaves_are_under_their_own_mid(&calls);
    assert!(share(&calls, "route", "mid") > 0.0, "{calls:?}");
    assert_eq!(v["calls_inferred"], v["calls"], "{v}");
}

/// Four `mid` functions that `route` jumps to, each spinning a while and then calling one
/// frameless leaf they share: a sample in the leaf shows `main` below it, and the code shows
/// four chains. `mid3` is picked three times as often as each other.
const SHARED_LEAF: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))
NOINLINE unsigned long shared(unsigned long x)
{
	for (int i = 0; i < 200; i++) { x = x * 6364136223846793005UL + 1; __asm__ volatile("" : "+r"(x)); }
	return x;
}
#define MID(k) NOINLINE unsigned long mid##k(unsigned long x) \
	{ for (int i = 0; i < 100; i++) { x ^= x >> 3; __asm__ volatile("" : "+r"(x)); } \
	  return shared(x) + k + 1; }
MID(0) MID(1) MID(2) MID(3)

NOINLINE unsigned long route(unsigned long x, int k)
{
	switch (k) {
	case 0: return mid0(x); case 1: return mid1(x); case 2: return mid2(x);
	default: return mid3(x);
	}
}

static double cpu_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	double end = cpu_seconds() + atof(argv[1]);
	unsigned long x = 1;
	int k = 0;
	while (cpu_seconds() < end)
		for (int i = 0; i < 1000; i++, k = (k + 1) % 6)
			x = route(x, k < 3 ? k : 3);
	printf("%lu\n", x);
	return 0;
}
"#;

#[test]
fn a_leaf_shared_by_functions_reached_through_one_jump_is_shared_by_their_samples() {
    let dir = TempDir::new().unwrap();
    let prog = gcc(
        dir.path(),
        "shared",
        SHARED_LEAF,
        &["-O2", "-ffunction-sections"],
    );
    let data = record_until_enough(1.0, |seconds| {
        let data = perf_record_with(dir.path(), &prog, &["-g"], &[&seconds.to_string()]);
        let v = profile_json(dir.path(), &data, "shared", "shared.profile");
        match v["calls_tail_shared"].as_u64() {
            Some(n) if n >= 1000 => Ok(data),
            n => Err(format!("{n:?} shared samples")),
        }
    });
    let shared = call_lines(&std::fs::read_to_string(dir.path().join("shared.profile")).unwrap());
    let weight = |caller: &str| {
        shared
            .iter()
            .find(|c| c.0 == caller && c.1 == "shared")
            .map_or(0, |c| c.2)
    };
    // Every mid calls the leaf; mid3 runs three times as often as each other one.
    for k in 0..3 {
        assert!(weight(&format!("mid{k}")) > 0, "{shared:?}");
        assert!(
            weight("mid3") > 2 * weight(&format!("mid{k}")),
            "{shared:?}"
        );
    }
    assert_eq!(share(&shared, "route", "shared"), 0.0, "{shared:?}");
    assert_eq!(share(&shared, "main", "shared"), 0.0, "{shared:?}");

    // Asked not to share, the leaf's samples give no edge and are counted.
    let out = hottext(
        &[
            "profile",
            data.to_str().unwrap(),
            "--binary",
            "shared",
            "-o",
            "strict.profile",
            "--json",
            "--drop-ambiguous-callers",
        ],
        dir.path(),
    );
    let v = json(&out);
    assert_eq!(v["calls_tail_shared"].as_u64(), Some(0), "{v}");
    assert!(v["calls_tail_undecided"].as_u64().unwrap() >= 1000, "{v}");
    let strict = call_lines(&std::fs::read_to_string(dir.path().join("strict.profile")).unwrap());
    assert_eq!(share(&strict, "mid", "shared"), 0.0, "{strict:?}");
}
