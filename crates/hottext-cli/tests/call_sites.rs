//! Call sites in a real recording: `hottext profile` finds where in the caller each call sits.
//!
//! Needs gcc, objdump (binutils) and perf with permission to use it, like the profile tests.

use std::collections::BTreeMap;
use std::path::Path;

use tempfile::TempDir;

mod common;

use common::{gcc, perf_record, profile_json, record_until_enough, run, stdout};

/// `caller` calls `callee` from two places 256 bytes of `nop` apart.
const PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* The volatile slot gives callee a frame, so that perf's stack holds the return address into
 * caller for most samples. */
__attribute__((noinline)) unsigned long callee(unsigned long x)
{
	volatile unsigned long slot = x;
	for (int i = 0; i < 300; i++)
		slot = slot * 6364136223846793005UL + 1442695040888963407UL;
	return slot;
}

__attribute__((noinline)) unsigned long caller(unsigned long x)
{
	x = callee(x);
	__asm__ volatile(".skip 256, 0x90" : "+r"(x));
	return callee(x + 1) + 1;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	double end = now() + atof(argv[1]);
	unsigned long x = 1;
	while (now() < end)
		for (int k = 0; k < 100; k++)
			x = caller(x);
	printf("%lu\n", x);
	return 0;
}
"#;

/// The offsets in `func` of the last byte of each `call` of `target`, from objdump.
fn call_sites_by_objdump(binary: &Path, func: &str, target: &str) -> Vec<u64> {
    let out = run(
        "objdump",
        &[
            "-d",
            &format!("--disassemble={func}"),
            binary.to_str().unwrap(),
        ],
        Path::new("."),
    );
    let text = stdout(&out);
    let hex = |s: &str| u64::from_str_radix(s.trim(), 16).unwrap();
    let start = text
        .lines()
        .find_map(|l| l.strip_suffix(&format!(" <{func}>:")))
        .map(hex)
        .unwrap_or_else(|| panic!("no {func} in:\n{text}"));
    // "  1169:\te8 cb ff ff ff       \tcall   1139 <callee>"
    text.lines()
        .filter(|l| l.contains("\tcall ") && l.ends_with(&format!(" <{target}>")))
        .map(|l| {
            let fields: Vec<&str> = l.split('\t').collect();
            let at = hex(fields[0].trim_end_matches(':'));
            let len = fields[1].split_whitespace().count() as u64;
            at + len - 1 - start
        })
        .collect()
}

/// `site caller callee` lines of a profile: offset → weight.
fn sites(profile: &str, caller: &str, callee: &str) -> BTreeMap<u64, u64> {
    let prefix = format!("site {caller} {callee} ");
    profile
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(|rest| {
            let (offset, weight) = rest.split_once(' ').unwrap();
            (offset.parse().unwrap(), weight.parse().unwrap())
        })
        .collect()
}

#[test]
fn profile_has_the_offsets_of_the_calls_in_the_caller() {
    let dir = TempDir::new().unwrap();
    let prog = gcc(dir.path(), "prog", PROGRAM, &[]);
    let expected = call_sites_by_objdump(&prog, "caller", "callee");
    assert_eq!(expected.len(), 2, "gcc should emit two calls: {expected:?}");
    assert!(expected[1] - expected[0] > 256, "{expected:?}");

    // A few hundred samples of callee leave neither site empty; under load that takes longer.
    let v = record_until_enough(0.5, |seconds| {
        let data = perf_record(dir.path(), &prog, &[&seconds.to_string()]);
        let v = profile_json(dir.path(), &data, "prog", "prog.profile");
        match v["calls_sited"].as_u64() {
            Some(n) if n >= 300 => Ok(v),
            n => Err(format!("{n:?} sited calls")),
        }
    });
    let profile = std::fs::read_to_string(dir.path().join("prog.profile")).unwrap();
    assert!(profile.starts_with("# hottext profile v2\n"), "{profile}");

    // The offsets are exact (the last byte of each call): no other site for the pair.
    let found = sites(&profile, "caller", "callee");
    assert_eq!(
        found.keys().copied().collect::<Vec<_>>(),
        expected,
        "{profile}"
    );
    // Both calls run equally often; how many samples each gets depends on the load, but a
    // few hundred samples leave neither empty. Samples at callee's first instruction (before
    // its frame) recover the caller but not which of its two calls ran, so the sites cover
    // most calls, not all.
    let call: u64 = profile
        .lines()
        .find_map(|l| l.strip_prefix("call caller callee "))
        .unwrap_or_else(|| panic!("no call caller callee in:\n{profile}"))
        .parse()
        .unwrap();
    let sited: u64 = found.values().sum();
    assert!(found.values().all(|&w| w > 0), "{profile}");
    assert!(sited <= call && sited * 2 > call, "{profile}");
    assert!(v["calls_sited"].as_u64().unwrap() >= sited, "{v}");
}
