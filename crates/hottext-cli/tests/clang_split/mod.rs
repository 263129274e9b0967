//! A small C program compiled with clang 19's basic-block sections, recorded and profiled for
//! real, and its cluster file: what the tests of the cluster file start from.

#![allow(dead_code)] // each test file uses a different subset

use std::path::Path;

use crate::common::{
    hottext, perf_record, profile_json, record_until_enough, require, run, stderr, stdout, write,
};

pub const CLANG: &str = "clang-19";

/// A hot loop in a static function with error paths that never run, called from a global one;
/// a second argument (another load) runs a branch of the loop that is cold without it.
pub const PROGRAM: &str = r#"#include <stdio.h>
#include <stdlib.h>
static int rare_seen, other_load;
__attribute__((noinline)) static long step(long x) {
  if (x < 0) { fprintf(stderr, "negative %ld\n", x); abort(); }
  long s = 0;
  for (long i = 0; i < x; i++) {
    if (other_load && (i & 3) == 1) { s ^= i * 2654435761u; s = (s << 1) | (s >> 63); }
    else if (i % 1000 == 999) s ^= i; else s += i * 3;
  }
  if (s == 12345) { puts("rare"); rare_seen++; }
  return s;
}
__attribute__((noinline)) long run(long n) {
  if (n == -7) { puts("never"); return 3; }
  long t = 0;
  for (long i = 0; i < n; i++) t += step(i % 5000);
  return t;
}
int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 3000;
  other_load = argc > 2;
  printf("%ld %d\n", run(n), rare_seen);
  return 0;
}
"#;

/// Iterations of `run` per second of recording, about, on a busy machine.
pub const ROUNDS_PER_SECOND: f64 = 200_000.0;

/// Compiles `source` (written as `name`.c) to `name`.o with clang -O2 -ffunction-sections and
/// `flags`; returns clang's stderr.
pub fn clang(dir: &Path, name: &str, source: &str, flags: &[&str]) -> String {
    require(CLANG, &["--version"]);
    write(dir, &format!("{name}.c"), source);
    let (c, o) = (format!("{name}.c"), format!("{name}.o"));
    let mut args = vec!["-O2", "-ffunction-sections", "-fno-pie", "-c", &c, "-o", &o];
    args.extend_from_slice(flags);
    stderr(&run(CLANG, &args, dir))
}

/// Links `objects` with clang as `out`, without PIE (sampled addresses are then the stated ones).
pub fn link(dir: &Path, objects: &[&str], flags: &[&str], out: &str) {
    let mut args = vec!["-no-pie", "-o", out];
    args.extend_from_slice(objects);
    args.extend_from_slice(flags);
    run(CLANG, &args, dir);
}

/// Records `base` (the software clock, with stacks) until `step` has block counts in at least
/// three blocks, profiles it with `hottext profile` (v4, with blocks) and writes the cluster
/// file with `hottext order --format clang-bb-sections`; returns the cluster file.
pub fn profile_and_cluster(dir: &Path) -> String {
    record_until_enough(2.0, |seconds| {
        let rounds = ((seconds * ROUNDS_PER_SECOND) as u64).to_string();
        let data = perf_record(dir, &dir.join("base"), &[&rounds]);
        let summary = profile_json(dir, &data, "base", "p.profile");
        assert!(summary["block_map"].as_bool().unwrap(), "{summary:#}");
        let profile = std::fs::read_to_string(dir.join("p.profile")).unwrap();
        let step_blocks = profile
            .lines()
            .filter(|l| l.starts_with("block step "))
            .count();
        if step_blocks < 3 {
            return Err(format!("{step_blocks} sampled blocks in step"));
        }
        assert!(profile.starts_with("# hottext profile v4\n"), "{profile}");
        Ok(())
    });
    let o = order_to(
        dir,
        "p.profile",
        "base",
        "clang-bb-sections",
        "clusters.txt",
        &["--json"],
    );
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let split = &report["clusters"];
    assert!(
        split["functions"].as_u64() > Some(0)
            && split["hot_bytes_after"].as_u64() < split["hot_bytes_before"].as_u64(),
        "the never-run error paths leave the hot bytes: {report:#}"
    );
    assert!(report.get("padding").is_none(), "{report:#}");
    std::fs::read_to_string(dir.join("clusters.txt")).unwrap()
}

/// `hottext order PROFILE --binary BINARY --format FORMAT -o OUT EXTRA…` in `dir`, which must
/// succeed; its output (stdout has the JSON document with `--json`).
pub fn order_to(
    dir: &Path,
    profile: &str,
    binary: &str,
    format: &str,
    out: &str,
    extra: &[&str],
) -> std::process::Output {
    let mut args = vec![
        "order", profile, "--binary", binary, "--format", format, "-o", out,
    ];
    args.extend_from_slice(extra);
    let o = hottext(&args, dir);
    assert!(
        o.status.success(),
        "order --format {format}: {}",
        stderr(&o)
    );
    o
}

/// The stated address of the symbol `name` in `binary`, by nm: clang's `.cold` symbols are
/// untyped, which hottext's function list leaves out.
pub fn symbol(dir: &Path, binary: &str, name: &str) -> Option<u64> {
    stdout(&run("nm", &[binary], dir)).lines().find_map(|l| {
        let mut fields = l.split_whitespace();
        let (addr, _, sym) = (fields.next()?, fields.next()?, fields.next()?);
        (sym == name).then(|| u64::from_str_radix(addr, 16).unwrap())
    })
}
