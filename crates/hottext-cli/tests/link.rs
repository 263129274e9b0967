//! The emitted linker inputs, linked for real with GNU ld, gold and lld: the hot functions land
//! in profile order inside a 2 MiB-aligned `[__hot_start, __hot_end)`, and the program still works.

mod common;

use std::path::Path;

use common::{hottext, lld_dir, order_for_base as order, program_and_profile, run, stderr, stdout};
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
    program_and_profile(PROGRAM, PROFILE)
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
    order(dir.path(), "ld-script", "hot.ld", &[]);
    check(dir.path(), &["-fuse-ld=bfd", "-Wl,-T,hot.ld"]);
}

#[test]
fn lld_with_linker_script() {
    let dir = setup();
    order(dir.path(), "ld-script", "hot.ld", &[]);
    check(
        dir.path(),
        &["-B", lld_dir(), "-fuse-ld=lld", "-Wl,-T,hot.ld"],
    );
}

#[test]
fn lld_with_symbol_ordering_file() {
    let dir = setup();
    order(dir.path(), "lld-order", "order.txt", &[]);
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

/// A hot static function named like a libc export: lld orders it, but warns that it cannot order
/// libc's `advance` too.
const NAMESAKE_PROGRAM: &str = r#"
#include <stdio.h>
__attribute__((noinline)) static int advance(int x) { return x * 3 + 1; }
__attribute__((noinline)) int work(int x) { return advance(x) ^ x; }
int main(int argc, char **argv) {
    (void)argv;
    long s = 0;
    for (int i = 0; i < 1000; i++) s += work(i + argc);
    printf("%ld\n", s);
    return 0;
}
"#;

#[test]
fn the_readmes_lld_line_links_a_libc_namesake_quietly_and_still_orders_it() {
    let dir = program_and_profile(
        NAMESAKE_PROGRAM,
        "# hottext profile v1\nfn main 64 10\nfn work 32 50\nfn advance 16 40\n\
         call main work 50\ncall work advance 40\n",
    );
    let d = dir.path();
    order(d, "lld-order", "order.txt", &[]);
    let quiet = "-Wl,--no-warn-symbol-ordering";
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    assert!(
        readme.contains(&format!("-Wl,--symbol-ordering-file=order.txt {quiet}")),
        "the README's lld line lacks {quiet}"
    );
    let link = |extra: &[&str]| {
        let mut args = vec!["p.o", "markers.o", "-B", lld_dir(), "-fuse-ld=lld"];
        args.extend_from_slice(&["-Wl,--symbol-ordering-file=order.txt", "-o", "out"]);
        args.extend_from_slice(extra);
        run("gcc", &args, d)
    };
    // The case is real: without the flag lld warns.
    assert!(
        stderr(&link(&[])).contains("unable to order shared symbol: advance"),
        "lld no longer warns here; the test's program does not reproduce the case"
    );
    let out = link(&[quiet]);
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    let bin = Binary::open(&d.join("out")).unwrap();
    let (start, end) = bin.hot_range().unwrap();
    let advance = bin.symbol("advance").unwrap();
    assert!(
        start <= advance && advance < end,
        "advance is outside the hot range"
    );
}

#[test]
fn gold_with_section_ordering_file() {
    let dir = setup();
    order(dir.path(), "gold-order", "order.txt", &[]);
    check(
        dir.path(),
        &[
            "markers.o",
            "-fuse-ld=gold",
            "-Wl,--section-ordering-file=order.txt",
        ],
    );
}

#[test]
fn cache_line_alignment_is_refused_for_order_files() {
    let dir = setup();
    let o = hottext(
        &[
            "order",
            "p.profile",
            "--binary",
            "base",
            "--format",
            "lld-order",
            "--align-cache-lines",
        ],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--format ld-script"), "{}", stderr(&o));
}
