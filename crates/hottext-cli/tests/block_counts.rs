//! Block counts from a real recording: a clang 19 program with a block map, recorded by perf,
//! profiled by hottext; the block of the hot loop has samples, the block of the branch that
//! never runs has none (nor is it inferred to have run), the entry block is there (sampled, or
//! inferred with 0 samples), and the profile says v4.

mod common;

use std::path::Path;

use common::*;

/// `work` runs its hot loop, or with a second argument its cold branch (never, here). The
/// global labels mark a byte of each, so the test finds their blocks in the block map.
const PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) long work(long n, int cold) {
  long s = 0;
  if (cold) {
    __asm__ volatile(".globl cold_here\ncold_here: nop");
    for (long i = 0; i < n; i++) s += (i * 7) % 13;
    printf("cold %ld\n", s);
    return s;
  }
#pragma clang loop unroll(disable)
  for (long i = 0; i < n; i++) {
    __asm__ volatile(".globl hot_here\nhot_here: nop");
    s += (i ^ (s >> 3)) % 1000003;
  }
  return s;
}
int main(int argc, char **argv) {
  printf("%ld\n", work(atol(argv[1]), argc > 2));
  return 0;
}
"#;

/// The address of the symbol `name`, by `nm`.
fn symbol(dir: &Path, binary: &str, name: &str) -> u64 {
    let out = stdout(&run("nm", &[binary], dir));
    let line = out
        .lines()
        .find(|l| l.ends_with(&format!(" {name}")))
        .unwrap_or_else(|| panic!("no symbol {name} in {binary}:\n{out}"));
    u64::from_str_radix(line.split(' ').next().unwrap(), 16).unwrap()
}

/// The id of the block of `function` that holds `addr`, by `llvm-readobj --bb-addr-map`.
fn block_holding(dir: &Path, binary: &str, function: &str, addr: u64) -> u32 {
    let listing = stdout(&run("llvm-readobj-19", &["--bb-addr-map", binary], dir));
    let hex = |v: &str| u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap();
    let (mut in_function, mut base, mut id, mut offset) = (false, 0, 0, 0);
    for line in listing.lines() {
        let Some((key, value)) = line.trim().split_once(": ") else {
            continue;
        };
        match key {
            "Name" => in_function = value == function,
            "Base Address" => base = hex(value),
            "ID" => id = value.parse().unwrap(),
            "Offset" => offset = hex(value),
            "Size"
                if in_function && (base + offset..base + offset + hex(value)).contains(&addr) =>
            {
                return id
            }
            _ => {}
        }
    }
    panic!("no block of {function} holds {addr:#x}:\n{listing}")
}

#[test]
fn the_hot_loops_block_has_samples_and_the_cold_branchs_none() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "p.c", PROGRAM);
    run(
        "clang-19",
        &[
            "-O2",
            "-fno-omit-frame-pointer",
            "-ffunction-sections",
            "-fbasic-block-address-map",
            "-fuse-ld=lld",
            "p.c",
            "-o",
            "p",
        ],
        d,
    );
    let hot = block_holding(d, "p", "work", symbol(d, "p", "hot_here"));
    let cold = block_holding(d, "p", "work", symbol(d, "p", "cold_here"));
    assert_ne!(hot, cold);

    let profile = record_until_enough(1.0, |seconds| {
        let iterations = format!("{}", (seconds * 1e8) as u64);
        let data = perf_record(d, &d.join("p"), &[&iterations]);
        let summary = profile_json(d, &data, "p", "p.profile");
        let profile = std::fs::read_to_string(d.join("p.profile")).unwrap();
        let in_blocks = summary["samples_in_blocks"].as_u64().unwrap();
        if in_blocks < 200 {
            return Err(format!("{in_blocks} samples in blocks"));
        }
        assert!(summary["block_map"].as_bool().unwrap(), "{summary:#}");
        let coverage = &summary["block_coverage"];
        assert!(coverage["functions"].as_u64().unwrap() >= 1, "{summary:#}");
        assert!(
            coverage["bytes_run"].as_u64() < coverage["bytes"].as_u64(),
            "{summary:#}"
        );
        Ok(profile)
    });
    assert!(profile.starts_with("# hottext profile v4\n"), "{profile}");
    let samples_of = |block: u32| -> Option<u64> {
        let line = format!("block work {block} ");
        let rest = profile.lines().find_map(|l| l.strip_prefix(&line))?;
        Some(rest.split(' ').nth(2).unwrap().parse().unwrap())
    };
    let hot_samples = samples_of(hot).unwrap_or(0);
    assert!(
        hot_samples > 0,
        "the hot loop's block {hot} has no samples:\n{profile}"
    );
    assert_eq!(
        samples_of(cold),
        None,
        "the cold block {cold} has samples, or was inferred to have run:\n{profile}"
    );
    // `work` is entered once and loops long: its entry block ran, sampled or not; unsampled,
    // it is inferred (it dominates the loop) and written with 0 samples.
    assert!(
        samples_of(0).is_some(),
        "the entry block of work is not in the profile:\n{profile}"
    );

    let top = hottext(
        &["profile", "p.data", "--binary", "p", "-o", "again.profile"],
        d,
    );
    assert!(top.status.success(), "{}", stderr(&top));
    assert!(
        stderr(&top).contains("function(s) with block counts"),
        "{}",
        stderr(&top)
    );
}
