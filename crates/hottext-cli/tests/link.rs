//! The emitted linker inputs, linked for real with GNU ld, gold and lld: the hot functions land
//! in profile order inside a 2 MiB-aligned `[__hot_start, __hot_end)`, and the program still works.

mod common;

use std::path::Path;
use std::process::Output;

use common::{hottext, lld_dir, program_and_profile, run, stderr, stdout, write};
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

/// Orders `p.profile` for `base` into `out` (and `markers.o`), with `extra` options.
fn order(dir: &Path, format: &str, out: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "order",
        "p.profile",
        "--binary",
        "base",
        // The order under test is C3's (EXPECTED); the linker inputs are what is tested.
        "--algorithm",
        "c3",
        "--format",
        format,
        "-o",
        out,
        "--markers",
        "markers.o",
    ];
    args.extend_from_slice(extra);
    let o = hottext(&args, dir);
    assert!(o.status.success(), "{}", stderr(&o));
    o
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

/// Compiles `files` (name, C source) with -ffunction-sections and links them as `base`.
fn build(dir: &Path, files: &[(&str, &str)]) {
    let mut objects = Vec::new();
    for (name, source) in files {
        write(dir, name, source);
        let object = name.replace(".c", ".o");
        run(
            "gcc",
            &["-O2", "-ffunction-sections", "-c", name, "-o", &object],
            dir,
        );
        objects.push(object);
    }
    let mut args: Vec<&str> = objects.iter().map(String::as_str).collect();
    args.extend_from_slice(&["-o", "base"]);
    run("gcc", &args, dir);
}

/// The stated address range of the function the binary names `name`.
fn function(bin: &Binary, name: &str) -> (u64, u64) {
    let f = bin.functions.iter().find(|f| f.name == name);
    let f = f.unwrap_or_else(|| panic!("{name} not in the binary"));
    (f.start.0, f.end().0)
}

const NAMESAKE: &str = "__attribute__((noinline)) static int g(int x) { return x * N; }\n\
                        int call_N(int x) { return g(x); }\n";

#[test]
fn two_static_functions_of_one_name_are_placed_individually() {
    let dir = tempfile::tempdir().unwrap();
    let main = "#include <stdio.h>\nint call_3(int); int call_5(int);\n\
                int main(void) { long s = 0; for (int i = 0; i < 100; i++) s += call_3(i) + call_5(i);\n\
                printf(\"%ld\\n\", s); return 0; }\n";
    build(
        dir.path(),
        &[
            ("a.c", &NAMESAKE.replace('N', "3")),
            ("b.c", &NAMESAKE.replace('N', "5")),
            ("m.c", main),
        ],
    );
    // Only a.c's g is hot; the binary names the two `g;a.c` and `g;b.c`.
    write(
        dir.path(),
        "p.profile",
        "# hottext profile v1\nfn call_3 8 5\nfn g;a.c 8 50\ncall call_3 g;a.c 40\n",
    );
    order(dir.path(), "ld-script", "hot.ld", &[]);
    run(
        "gcc",
        &["a.o", "b.o", "m.o", "-Wl,-T,hot.ld", "-o", "out"],
        dir.path(),
    );
    assert_eq!(
        stdout(&run("./out", &[], dir.path())),
        stdout(&run("./base", &[], dir.path()))
    );

    let bin = Binary::open(&dir.path().join("out")).unwrap();
    let (start, end) = bin.hot_range().unwrap();
    let inside = |name: &str| {
        let (a, b) = function(&bin, name);
        a >= start.0 && b <= end.0
    };
    assert!(
        inside("g;a.c") && inside("call_3"),
        "a.c's g is not in the hot range"
    );
    assert!(
        !inside("g;b.c"),
        "b.c's g was pulled into the hot range by its name"
    );
    // verify counts what the range holds: the two listed functions, not b.c's namesake.
    let verified = common::json(&hottext(
        &["verify", "--binary", "out", "--json"],
        dir.path(),
    ));
    assert_eq!(verified["hot"]["functions"], 2, "{verified}");
    let planned = hottext(
        &["verify", "--binary", "out", "--planned", "hot.ld", "--json"],
        dir.path(),
    );
    let plan = &common::json(&planned)["plan"];
    assert_eq!(
        (&plan["planned"], &plan["placed"]),
        (&2.into(), &2.into()),
        "{plan}"
    );
    // Linked with every namesake (as an order file would), the range holds one the script did
    // not plan: a warning that names it, not a failure.
    let script = std::fs::read_to_string(dir.path().join("hot.ld")).unwrap();
    let every_g: String = script
        .lines()
        .map(|l| {
            if l.contains("[a].o(") {
                "    *(.text.g)"
            } else {
                l
            }
        })
        .map(|l| format!("{l}\n"))
        .collect();
    write(dir.path(), "all.ld", &every_g);
    run(
        "gcc",
        &["a.o", "b.o", "m.o", "-Wl,-T,all.ld", "-o", "all"],
        dir.path(),
    );
    let o = hottext(
        &["verify", "--binary", "all", "--planned", "hot.ld"],
        dir.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("not planned: g;a.c, g;b.c")
            || stderr(&o).contains("not planned: g;b.c, g;a.c"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_part_gcc_split_off_as_cold_stays_out_of_the_hot_range() {
    let dir = tempfile::tempdir().unwrap();
    let program = "#include <stdio.h>\n#include <stdlib.h>\n\
        __attribute__((cold, noinline)) void complain(int x) { fprintf(stderr, \"bad %d\\n\", x); }\n\
        __attribute__((noinline)) int work(int x) {\n\
            if (x == 12345678) { complain(x); complain(x + 1); printf(\"more %d\\n\", x); abort(); }\n\
            return x * 2; }\n\
        int main(int argc, char **argv) { (void)argv; long s = 0;\n\
            for (int i = 0; i < 1000; i++) s += work(i + argc); printf(\"%ld\\n\", s); return 0; }\n";
    build(dir.path(), &[("c.c", program)]);
    let bin = Binary::open(&dir.path().join("base")).unwrap();
    assert!(
        bin.functions.iter().any(|f| f.name == "work.cold"),
        "gcc did not split work.cold off; the test's program needs another cold path"
    );
    // A stray sample in the cold part: it still stays out.
    write(
        dir.path(),
        "p.profile",
        "# hottext profile v1\nfn main 60 10\nfn work 16 50\nfn work.cold 45 1\n\
         call main work 50\ncall work work.cold 1\n",
    );
    let o = order(dir.path(), "ld-script", "hot.ld", &[]);
    assert!(stderr(&o).contains("work.cold"), "{}", stderr(&o));
    let script = std::fs::read_to_string(dir.path().join("hot.ld")).unwrap();
    // work's `.text.unlikely.work` is the split part's section; main's would be main itself.
    assert!(
        !script.contains("cold") && !script.contains(".text.unlikely.work"),
        "{script}"
    );
    assert!(script.contains(".text.unlikely.main"), "{script}");
    run("gcc", &["c.o", "-Wl,-T,hot.ld", "-o", "out"], dir.path());
    let verified = hottext(
        &["verify", "--binary", "out", "--planned", "hot.ld"],
        dir.path(),
    );
    assert!(verified.status.success(), "{}", stderr(&verified));
    let bin = Binary::open(&dir.path().join("out")).unwrap();
    let (start, end) = bin.hot_range().unwrap();
    let (work, _) = function(&bin, "work");
    let (cold, _) = function(&bin, "work.cold");
    assert!(work >= start.0 && work < end.0, "work is not hot");
    assert!(
        cold < start.0 || cold >= end.0,
        "work.cold is in the hot range"
    );
}

/// Four functions of 30-40 bytes: packed at 16 B, some of them straddle a line they need not.
const ALIGN_PROGRAM: &str = "#include <stdio.h>\n\
    #define F(n, k) __attribute__((noinline)) int n(int x) \\\n\
        { volatile int v = x; v = v * k + 3; v ^= v >> 3; v += k; return v; }\n\
    F(f1, 3) F(f2, 5) F(f3, 7) F(f4, 11)\n\
    int main(void) { long s = 0; for (int i = 0; i < 100; i++) s += f1(i) + f2(i) + f3(i) + f4(i);\n\
        printf(\"%ld\\n\", s); return 0; }\n";

/// With --align-cache-lines a hot function starts on a 64 B line exactly when that saves a line
/// for at most 32 bytes of padding: checked on every function of the linked hot range.
fn check_cache_line_rule(linker: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), &[("p.c", ALIGN_PROGRAM)]);
    let base = Binary::open(&dir.path().join("base")).unwrap();
    // The profile's sizes are the binary's, as `hottext profile` writes them.
    let mut profile = String::from("# hottext profile v1\n");
    for name in ["main", "f1", "f2", "f3", "f4"] {
        let (a, b) = function(&base, name);
        profile += &format!("fn {name} {} 10\n", b - a);
    }
    profile += "call main f1 9\ncall main f2 8\ncall main f3 7\ncall main f4 6\n";
    write(dir.path(), "p.profile", &profile);
    order(dir.path(), "ld-script", "hot.ld", &["--align-cache-lines"]);
    let mut args = vec!["p.o", "-Wl,-T,hot.ld", "-o", "out"];
    args.extend_from_slice(linker);
    run("gcc", &args, dir.path());
    assert_eq!(
        stdout(&run("./out", &[], dir.path())),
        stdout(&run("./base", &[], dir.path()))
    );

    let bin = Binary::open(&dir.path().join("out")).unwrap();
    let (start, end) = bin.hot_range().unwrap();
    let hot: Vec<_> = bin
        .functions
        .iter()
        .filter(|f| f.start >= start && f.end() <= end)
        .collect();
    assert_eq!(hot.len(), 5, "{hot:?}");
    let (mut previous_end, mut aligned) = (start.0, 0);
    for f in hot {
        let (at, s) = (f.start.0, f.size);
        // Where it would have started without the rule: after the previous one, at 16 B.
        let natural = previous_end.next_multiple_of(16);
        let pays =
            natural % 64 + s > s.div_ceil(64) * 64 && natural.next_multiple_of(64) - natural <= 32;
        assert_eq!(
            at,
            if pays {
                natural.next_multiple_of(64)
            } else {
                natural
            },
            "{}",
            f.name
        );
        aligned += usize::from(pays && natural % 64 != 0);
        previous_end = f.end().0;
    }
    assert!(
        aligned > 0,
        "no function needed aligning: the test program no longer tests the rule"
    );
}

#[test]
fn gnu_ld_aligns_hot_functions_to_cache_lines_where_that_pays() {
    check_cache_line_rule(&["-fuse-ld=bfd"]);
}

#[test]
fn lld_aligns_hot_functions_to_cache_lines_where_that_pays() {
    check_cache_line_rule(&["-B", lld_dir(), "-fuse-ld=lld"]);
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
