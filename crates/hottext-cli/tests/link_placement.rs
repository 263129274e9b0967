//! How the ld script places hot functions beyond their order, linked for real: static
//! namesakes one by one, GCC's split-off cold parts left out, and cache-line starts where they
//! pay.

mod common;

use std::path::Path;

use common::{hottext, json, lld_dir, order_for_base as order, run, stderr, stdout, write};
use hottext::binary::Binary;
use hottext::graph::{FuncId, Graph};
use hottext::layout::metrics::place_as_linked;
use hottext::link::{Alignment, ScriptPlacement};

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
fn a_part_gcc_split_off_as_cold_and_the_c_runtimes_start_up_code_stay_out_of_the_hot_range() {
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
    // A stray sample in the cold part: it still stays out. So does one in Scrt1.o's `_start`,
    // which has no input section of its own that an ld script could move.
    write(
        dir.path(),
        "p.profile",
        "# hottext profile v1\nfn main 60 10\nfn work 16 50\nfn work.cold 45 1\n\
         fn _start 34 1\ncall main work 50\ncall work work.cold 1\n",
    );
    let o = order(dir.path(), "ld-script", "hot.ld", &[]);
    assert!(stderr(&o).contains("work.cold"), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("1 functions of the C runtime's start-up code stay")
            && stderr(&o).contains("_start"),
        "{}",
        stderr(&o)
    );
    let script = std::fs::read_to_string(dir.path().join("hot.ld")).unwrap();
    assert!(!script.contains(".text._start"), "{script}");
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
    align_program_profile(dir.path());
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
    let placement = ScriptPlacement {
        alignment: Alignment::CACHE_LINES,
        ..ScriptPlacement::default()
    };
    assert_placed_as_modelled(dir.path(), &bin, placement);
}

/// [`ALIGN_PROGRAM`] built as `base`, and its p.profile: every function sampled, with the
/// binary's sizes, as `hottext profile` writes them.
fn align_program_profile(dir: &Path) {
    build(dir, &[("p.c", ALIGN_PROGRAM)]);
    let base = Binary::open(&dir.join("base")).unwrap();
    let mut profile = String::from("# hottext profile v1\n");
    for name in ["main", "f1", "f2", "f3", "f4"] {
        let (a, b) = function(&base, name);
        profile += &format!("fn {name} {} 10\n", b - a);
    }
    profile += "call main f1 9\ncall main f2 8\ncall main f3 7\ncall main f4 6\n";
    write(dir, "p.profile", &profile);
}

/// Every hot function of the linked `bin` sits where `auto`'s model of the layout
/// (`place_as_linked` of p.profile, in the linked order) put it, counted from `__hot_start`.
fn assert_placed_as_modelled(dir: &Path, bin: &Binary, placement: ScriptPlacement) {
    let text = std::fs::read_to_string(dir.join("p.profile")).unwrap();
    let graph = Graph::read(text.as_bytes()).unwrap();
    let (start, end) = bin.hot_range().unwrap();
    let mut hot: Vec<_> = bin
        .functions
        .iter()
        .filter(|f| f.start >= start && f.end() <= end)
        .collect();
    hot.sort_by_key(|f| f.start);
    let id = |name: &str| {
        let i = graph.funcs().iter().position(|f| f.name == name);
        FuncId::from_index(i.unwrap_or_else(|| panic!("{name} not in the profile")))
    };
    let order: Vec<FuncId> = hot.iter().map(|f| id(&f.name)).collect();
    let modelled = place_as_linked(&graph, &order, &placement);
    for (f, &i) in hot.iter().zip(&order) {
        let at = modelled[i.index()].unwrap().0;
        assert_eq!(f.start.0 - start.0, at, "{} under {placement:?}", f.name);
    }
}

#[test]
fn auto_reports_each_placement_and_links_the_one_it_chose_where_its_model_put_it() {
    let dir = tempfile::tempdir().unwrap();
    align_program_profile(dir.path());
    let args = [
        "order",
        "p.profile",
        "--binary",
        "base",
        "--format",
        "ld-script",
    ];
    let o = hottext(
        &[&args[..], &["-o", "hot.ld", "--json"]].concat(),
        dir.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let doc = json(&o);
    let placements = doc["placements"].as_array().unwrap();
    assert_eq!(placements.len(), 8, "{doc}");
    let chosen: Vec<_> = placements.iter().filter(|p| p["chosen"] == true).collect();
    assert_eq!(chosen.len(), 1, "{doc}");
    assert_eq!(chosen[0]["alignment"], doc["alignment"], "{doc}");
    assert_eq!(chosen[0]["start_padding"], doc["hot_offset"], "{doc}");
    assert_eq!(
        chosen[0]["icache_overflow"],
        doc["ordered"]["icache_overflow"]
    );
    // Five small functions fill no set: nothing pays, and the script is the one a fixed
    // placement writes.
    assert_eq!(doc["alignment"]["rule"], "as-compiled", "{doc}");
    assert_eq!(doc["hot_offset"], 0, "{doc}");
    let algorithm = doc["algorithm"].as_str().unwrap();
    let fixed = ["--algorithm", algorithm, "-o", "fixed.ld"];
    let o = hottext(&[&args[..], &fixed].concat(), dir.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let script = |name| std::fs::read_to_string(dir.path().join(name)).unwrap();
    let body = |s: String| s.lines().skip(2).collect::<Vec<_>>().join("\n");
    assert_eq!(body(script("hot.ld")), body(script("fixed.ld")));

    run("gcc", &["p.o", "-Wl,-T,hot.ld", "-o", "out"], dir.path());
    let bin = Binary::open(&dir.path().join("out")).unwrap();
    assert_placed_as_modelled(dir.path(), &bin, ScriptPlacement::default());
    // A padding that moves functions within their lines is linked where the model puts it.
    let padded = [
        "--algorithm",
        algorithm,
        "--hot-offset",
        "32",
        "-o",
        "pad.ld",
    ];
    let o = hottext(&[&args[..], &padded].concat(), dir.path());
    assert!(o.status.success(), "{}", stderr(&o));
    run("gcc", &["p.o", "-Wl,-T,pad.ld", "-o", "pad"], dir.path());
    let bin = Binary::open(&dir.path().join("pad")).unwrap();
    let placement = ScriptPlacement {
        hot_offset: 32,
        ..ScriptPlacement::default()
    };
    assert_placed_as_modelled(dir.path(), &bin, placement);
    // A shift keeps `auto`'s placement on top of it: the same choice a whole line on, and the
    // functions linked where the model puts them.
    let o = hottext(
        &[
            &args[..],
            &["--hot-offset", "64", "-o", "shifted.ld", "--json"],
        ]
        .concat(),
        dir.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let shifted = json(&o);
    assert!(!shifted["placements"].is_null(), "{shifted}");
    assert_eq!(shifted["hot_offset"], 64, "{shifted}");
    assert_eq!(shifted["alignment"], doc["alignment"], "{shifted}");
    run(
        "gcc",
        &["p.o", "-Wl,-T,shifted.ld", "-o", "shifted"],
        dir.path(),
    );
    let bin = Binary::open(&dir.path().join("shifted")).unwrap();
    let placement = ScriptPlacement {
        hot_offset: 64,
        ..ScriptPlacement::default()
    };
    assert_placed_as_modelled(dir.path(), &bin, placement);
}

#[test]
fn gnu_ld_aligns_hot_functions_to_cache_lines_where_that_pays() {
    check_cache_line_rule(&["-fuse-ld=bfd"]);
}

#[test]
fn lld_aligns_hot_functions_to_cache_lines_where_that_pays() {
    check_cache_line_rule(&["-B", lld_dir(), "-fuse-ld=lld"]);
}
