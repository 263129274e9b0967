//! The program the profile and record tests profile: `main` calls `hot` in a loop, `hot` calls
//! `leaf`; built with gcc, recorded with perf until the recording is big enough to judge.

#![allow(dead_code)] // each test file uses a different subset

use std::path::{Path, PathBuf};

use crate::common::{gcc, hottext, perf_record_with, record_until_enough, stderr};

/// `main` calls `hot` in a loop, `hot` calls `leaf`.
pub const PROGRAM: &str = r#"
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
pub const WORK_SECONDS: f64 = 0.5;

/// Samples of the program a recording must hold before a test judges it (a tenth of a second
/// of its CPU time at 4999 Hz); fewer, and the test records again, longer.
pub const ENOUGH_SAMPLES: u64 = 500;

/// Builds `PROGRAM` as `dir/name` with extra gcc flags.
pub fn build(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    gcc(dir, name, PROGRAM, flags)
}

/// Records `prog` (which works for the seconds it is given) until the recording holds
/// [`ENOUGH_SAMPLES`] of it.
pub fn record(dir: &Path, prog: &Path) -> PathBuf {
    record_stacks(dir, prog, "fp")
}

/// [`record`], with perf unwinding stacks by `call_graph` (`fp` or `dwarf`).
pub fn record_stacks(dir: &Path, prog: &Path, call_graph: &str) -> PathBuf {
    record_until_enough(WORK_SECONDS, |seconds| {
        let how = ["--call-graph", call_graph];
        let data = perf_record_with(dir, prog, &how, &[&seconds.to_string()]);
        enough_samples(dir, &data, prog, &[]).map(|()| data)
    })
}

/// `Err` when `data` holds fewer than [`ENOUGH_SAMPLES`] of `binary` (`hottext profile` with
/// more `args` says how many); other failures of `hottext profile` fail the test.
pub fn enough_samples(dir: &Path, data: &Path, binary: &Path, args: &[&str]) -> Result<(), String> {
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

/// Weight of `call caller callee`.
pub fn call_weight(profile: &str, caller: &str, callee: &str) -> u64 {
    let prefix = format!("call {caller} {callee} ");
    profile
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no '{prefix}' edge in:\n{profile}"))
        .parse()
        .unwrap()
}

/// Self samples of `fn name`.
pub fn self_samples(profile: &str, name: &str) -> u64 {
    let prefix = format!("fn {name} ");
    let line = profile
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no fn {name} in:\n{profile}"));
    let fields: Vec<u64> = line.split(' ').map(|f| f.parse().unwrap()).collect();
    assert!(fields[0] > 0, "fn {name} has no size");
    fields[1]
}
