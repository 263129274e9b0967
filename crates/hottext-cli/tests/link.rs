//! The emitted linker inputs, linked for real with GNU ld, gold and lld: the hot functions land
//! in profile order inside a 2 MiB-aligned `[__hot_start, __hot_end)`, and the program still works.

mod common;

use std::path::Path;

use common::{hottext, lld_dir, run, stderr, stdout, write};
use hottext::binary::Binary;

const PROGRAM: &str = r#"
#include <stdio.h>
__attribute__((noinline)) int cold1(int x) { return x * 7; }
__attribute__((noinline)) int hot_leaf(int x) { return x + 1; }
__attribute__((noinline)) static int helper(int x) { return x * 3; }
__attribute__((noinline)) int hot_mid(int x) { return hot_leaf(x) + helper(x); }
__attribute__((noinline)) int cold2(int x) { return x * 9; }
int main(int argc, char **argv) {
    (void)argv;
    long s = 0;
    for (int i = 0; i < 1000; i++) s += hot_mid(i);
    if (argc > 5) s += cold1(s) + cold2(s);
    printf("%ld\n", s);
    return 0;
}
"#;

/// hot_mid is hottest and called by main; C3 puts main, hot_mid, then its callees.
const PROFILE: &str = "# hottext profile v1\n\
    fn main 84 10\nfn hot_mid 20 50\nfn hot_leaf 4 40\nfn helper 4 5\n\
    call main hot_mid 50\ncall hot_mid hot_leaf 40\ncall hot_mid helper 5\n";
const EXPECTED: [&str; 4] = ["main", "hot_mid", "hot_leaf", "helper"];

fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "p.c", PROGRAM);
    write(dir.path(), "p.profile", PROFILE);
    run(
        "gcc",
        &["-O2", "-ffunction-sections", "-c", "p.c", "-o", "p.o"],
        dir.path(),
    );
    run("gcc", &["p.o", "-o", "base"], dir.path());
    dir
}

fn order(dir: &Path, format: &str, out: &str) {
    let o = hottext(
        &[
            "order",
            "p.profile",
            "--binary",
            "base",
            "--format",
            format,
            "-o",
            out,
            "--markers",
            "markers.o",
        ],
        dir,
    );
    assert!(o.status.success(), "{}", stderr(&o));
}

/// Links, runs, verifies, and checks the hot functions' addresses follow the order.
fn check(dir: &Path, link_args: &[&str]) {
    let mut args = vec!["p.o"];
    args.extend_from_slice(link_args);
    args.extend_from_slice(&["-o", "out"]);
    run("gcc", &args, dir);
    assert_eq!(
        stdout(&run("./out", &[], dir)),
        stdout(&run("./base", &[], dir))
    );

    let verify = hottext(&["verify", "--binary", "out"], dir);
    assert!(
        verify.status.success(),
        "verify failed: {}{}",
        stdout(&verify),
        stderr(&verify)
    );

    let bin = Binary::open(&dir.join("out")).unwrap();
    let (start, end) = bin.hot_range().unwrap();
    let addrs: Vec<u64> = EXPECTED.iter().map(|n| bin.symbol(n).unwrap().0).collect();
    assert_eq!(addrs[0], start.0, "main should open the hot range");
    assert!(
        addrs.windows(2).all(|w| w[0] < w[1]),
        "not in profile order: {addrs:x?}"
    );
    assert!(addrs[3] < end.0);
    for cold in ["cold1", "cold2"] {
        let a = bin.symbol(cold).unwrap().0;
        assert!(a < start.0 || a >= end.0, "{cold} is inside the hot range");
    }
}

#[test]
fn gnu_ld_with_linker_script() {
    let dir = setup();
    order(dir.path(), "ld-script", "hot.ld");
    check(dir.path(), &["-fuse-ld=bfd", "-Wl,-T,hot.ld"]);
}

#[test]
fn lld_with_linker_script() {
    let dir = setup();
    order(dir.path(), "ld-script", "hot.ld");
    check(
        dir.path(),
        &["-B", lld_dir(), "-fuse-ld=lld", "-Wl,-T,hot.ld"],
    );
}

#[test]
fn lld_with_symbol_ordering_file() {
    let dir = setup();
    order(dir.path(), "lld-order", "order.txt");
    check(
        dir.path(),
        &[
            "markers.o",
            "-B",
            lld_dir(),
            "-fuse-ld=lld",
            "-Wl,--symbol-ordering-file=order.txt",
        ],
    );
}

#[test]
fn gold_with_section_ordering_file() {
    let dir = setup();
    order(dir.path(), "gold-order", "order.txt");
    check(
        dir.path(),
        &[
            "markers.o",
            "-fuse-ld=gold",
            "-Wl,--section-ordering-file=order.txt",
        ],
    );
}
