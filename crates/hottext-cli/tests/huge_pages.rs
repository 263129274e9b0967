//! Hot text on huge pages in a running program, end to end (issue 33): a program with about
//! 200 KiB of hot code, recorded, profiled, ordered with the default options, linked with GNU
//! ld, gold and lld and the runtime, runs with every page of its hot range huge
//! (`verify --pid`); without the padding `order` adds by default the runtime refuses the range,
//! and `verify` and `doctor` say why. An unrelinked program gets its hot pages from a ranges
//! file and the preload library.

mod common;
mod program;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use common::{hottext, json, lld_dir, record_until_enough, run, runtime_lib, stderr, KillOnDrop};
use hottext::binary::Binary;
use program::enough_samples;

/// Hot functions of about 1.3 KiB each: 150 make about 200 KiB of hot code.
const HOT_FUNCTIONS: usize = 150;

/// `hotN` (called in a loop) and `coldN` (never called) functions of straight-line code, and a
/// `main` that works for `argv[1]` CPU seconds, prints a line, and with `argv[2]` = `wait`
/// stays alive for `verify --pid`.
fn generated_program() -> String {
    let mut c = String::from(
        "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <time.h>\n#include <unistd.h>\n\
         #define S(k) x = x * (2 * (k) + 1) + (x >> ((k) % 13 + 1)); __asm__ volatile(\"\" : \"+r\"(x));\n\
         #define S8(k) S(k) S(k + 1) S(k + 2) S(k + 3) S(k + 4) S(k + 5) S(k + 6) S(k + 7)\n\
         #define BODY S8(1) S8(9) S8(17) S8(25) S8(33) S8(41) S8(49) S8(57) S8(65) S8(73)\n",
    );
    let function = |name: String| {
        format!("__attribute__((noinline)) unsigned long {name}(unsigned long x) {{ BODY return x; }}\n")
    };
    let hot: Vec<String> = (0..HOT_FUNCTIONS).map(|i| format!("hot{i}")).collect();
    let cold: Vec<String> = (0..20).map(|i| format!("cold{i}")).collect();
    for name in hot.iter().chain(&cold) {
        c += &function(name.clone());
    }
    c += &format!(
        "static unsigned long (*const hot[])(unsigned long) = {{{}}};\n\
         static unsigned long (*const cold[])(unsigned long) = {{{}}};\n",
        hot.join(","),
        cold.join(",")
    );
    c += r#"
static double cpu(void) { struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char **argv)
{
    double end = cpu() + (argc > 1 ? atof(argv[1]) : 0.5);
    unsigned long x = 1;
    do
        for (unsigned i = 0; i < sizeof hot / sizeof *hot; i++)
            x = hot[i](x);
    while (cpu() < end);
    if (argc > 3)
        for (unsigned i = 0; i < sizeof cold / sizeof *cold; i++)
            x = cold[i](x);
    printf("%lu\n", x & 1);
    fflush(stdout);
    if (argc > 2 && !strcmp(argv[2], "wait"))
        for (;;)
            pause();
    return 0;
}
"#;
    c
}

/// The program compiled with -ffunction-sections to `p.o` and frame pointers, linked plain as
/// `base`, recorded and profiled as `p.profile`: built once for every test.
fn recorded() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        common::write(d, "p.c", &generated_program());
        let compile = [
            "-O2",
            "-fno-omit-frame-pointer",
            "-ffunction-sections",
            "-c",
            "p.c",
            "-o",
            "p.o",
        ];
        run("gcc", &compile, d);
        run("gcc", &["p.o", "-o", "base"], d);
        let base = d.join("base");
        record_until_enough(1.0, |seconds| {
            let data = common::perf_record(d, &base, &[&seconds.to_string()]);
            enough_samples(d, &data, &base, &[])
        });
        std::fs::rename(d.join("enough.profile"), d.join("p.profile")).unwrap();
        dir
    })
    .path()
}

/// A fresh directory holding the recorded program's object, base binary and profile.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for file in ["p.o", "base", "p.profile"] {
        std::fs::copy(recorded().join(file), dir.path().join(file)).unwrap();
    }
    dir
}

/// `hottext order p.profile --binary base --format FORMAT -o OUT --markers markers.o --json`
/// with `extra`; returns its JSON document.
fn order(dir: &Path, format: &str, out: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "order",
        "p.profile",
        "--binary",
        "base",
        "--format",
        format,
        "-o",
        out,
    ];
    args.extend_from_slice(&["--markers", "markers.o", "--json"]);
    args.extend_from_slice(extra);
    let o = hottext(&args, dir);
    assert!(o.status.success(), "{}", stderr(&o));
    json(&o)
}

/// Starts `./PROG 0 wait` with `env` and waits for its line: the runtime has run by then, from
/// a constructor.
fn start(dir: &Path, prog: &str, env: &[(&str, &str)]) -> KillOnDrop {
    let mut child = Command::new(dir.join(prog))
        .args(["0", "wait"])
        .envs(env.iter().copied())
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {prog}: {e}"));
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(!line.is_empty(), "{prog} printed nothing: did it start?");
    KillOnDrop(child)
}

/// `verify --pid` with `extra` passes: every page of the hot range is huge, and there is one.
fn assert_all_huge(dir: &Path, pid: u32, extra: &[&str]) {
    let pid = pid.to_string();
    let mut args = vec!["verify", "--pid", pid.as_str(), "--json"];
    args.extend_from_slice(extra);
    let o = hottext(&args, dir);
    let report = json(&o);
    assert!(
        o.status.success(),
        "verify --pid failed: {report:#}\n{}",
        stderr(&o)
    );
    let pages = report["pages"].as_array().unwrap().len();
    assert!(pages >= 1, "{report:#}");
    assert_eq!(report["huge_pages"], pages, "{report:#}");
}

/// Orders with the defaults for `format`, links with `link` and the runtime, runs, verifies.
fn small_hot_text_is_on_huge_pages(format: &str, link: &[&str]) {
    let dir = workspace();
    let d = dir.path();
    let out = format!("{format}.out");
    let summary = order(d, format, &out, &[]);
    let hot_bytes = summary["hot"]["bytes"].as_u64().unwrap();
    assert!(
        (150 << 10..2 << 20).contains(&hot_bytes),
        "the hot text should be about 200 KiB: {summary:#}"
    );
    // The case of the issue: without padding the runtime could map nothing.
    assert_eq!(summary["padding"]["padded"], true, "{summary:#}");
    assert_eq!(summary["padding"]["huge_pages_unpadded"], 0, "{summary:#}");

    let lib = runtime_lib().display().to_string();
    let mut args = vec!["p.o"];
    args.extend_from_slice(link);
    args.extend_from_slice(&["-L", &lib, "-lhottext_auto", "-o", "out"]);
    run("gcc", &args, d);
    let verified = hottext(&["verify", "--binary", "out"], d);
    assert!(verified.status.success(), "{}", stderr(&verified));
    let child = start(d, "out", &[]);
    assert_all_huge(d, child.0.id(), &[]);
}

#[test]
fn small_hot_text_is_on_a_huge_page_with_gnu_ld() {
    small_hot_text_is_on_huge_pages("ld-script", &["-fuse-ld=bfd", "-Wl,-T,ld-script.out"]);
}

#[test]
fn small_hot_text_is_on_a_huge_page_with_gold() {
    let order = "-Wl,--section-ordering-file=gold-order.out";
    small_hot_text_is_on_huge_pages("gold-order", &["markers.o", "-fuse-ld=gold", order]);
}

#[test]
fn small_hot_text_is_on_a_huge_page_with_lld() {
    let order = "-Wl,--symbol-ordering-file=lld-order.out";
    let link = [
        "markers.o",
        "-B",
        lld_dir(),
        "-fuse-ld=lld",
        order,
        "-Wl,--no-warn-symbol-ordering",
    ];
    small_hot_text_is_on_huge_pages("lld-order", &link);
}

#[test]
fn an_unpadded_small_range_is_refused_and_verify_and_doctor_say_why() {
    let dir = workspace();
    let d = dir.path();
    let summary = order(d, "ld-script", "hot.ld", &["--pad-hot-range", "never"]);
    assert_eq!(summary["padding"]["padded"], false, "{summary:#}");
    let lib = runtime_lib().display().to_string();
    run(
        "gcc",
        &[
            "p.o",
            "-Wl,-T,hot.ld",
            "-L",
            &lib,
            "-lhottext_auto",
            "-o",
            "out",
        ],
        d,
    );

    let verified = hottext(&["verify", "--binary", "out"], d);
    assert_eq!(
        verified.status.code(),
        Some(1),
        "{}",
        common::stdout(&verified)
    );
    let why = stderr(&verified);
    assert!(
        why.contains("RANGE_TOO_SMALL") && why.contains("--pad-hot-range"),
        "{why}"
    );

    // doctor tells a binary with the runtime and a too small range from one without it.
    let checks = |binary: &str| {
        let o = hottext(&["doctor", "--binary", binary, "--json"], d);
        json(&o)["checks"].as_array().unwrap().clone()
    };
    let check = |checks: &[serde_json::Value], name: &str| {
        checks
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no check {name}: {checks:#?}"))
            .clone()
    };
    let linked = checks("out");
    assert_eq!(check(&linked, "runtime")["status"], "pass");
    let whole = check(&linked, "whole 2 MiB pages");
    assert_eq!(whole["status"], "warn", "{whole:#}");
    assert!(
        whole["value"].as_str().unwrap().contains("RANGE_TOO_SMALL"),
        "{whole:#}"
    );
    let plain = checks("base");
    let runtime = check(&plain, "runtime");
    assert!(
        runtime["remedy"]
            .as_str()
            .unwrap()
            .contains("-lhottext_auto"),
        "{runtime:#}"
    );
}

/// Three MiB of code in an assembler object, as a large program's cold text.
fn filler(dir: &Path, name: &str) -> String {
    let source = format!(
        ".text\n.globl {name}\n.type {name},@function\n{name}:\n.fill 0x300000,1,0x90\nret\n\
         .size {name},.-{name}\n.section .note.GNU-stack,\"\",@progbits\n"
    );
    common::write(dir, &format!("{name}.s"), &source);
    let object = format!("{name}.o");
    run("gcc", &["-c", &format!("{name}.s"), "-o", &object], dir);
    object
}

#[test]
fn ranges_from_order_put_an_unrelinked_program_on_huge_pages_under_the_preload_library() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    common::write(d, "p.c", &generated_program());
    run(
        "gcc",
        &["-O2", "-fno-omit-frame-pointer", "-c", "p.c", "-o", "p.o"],
        d,
    );
    // The hot code between 3 MiB of cold code on either side: a whole 2 MiB page of the
    // text holds it, as in a large program.
    let (before, after) = (filler(d, "cold_before"), filler(d, "cold_after"));
    run("gcc", &[&before, "p.o", &after, "-o", "wide"], d);
    let wide = d.join("wide");
    record_until_enough(1.0, |seconds| {
        let data = common::perf_record(d, &wide, &[&seconds.to_string()]);
        enough_samples(d, &data, &wide, &[])
    });
    let o = hottext(
        &[
            "order",
            "enough.profile",
            "--binary",
            "wide",
            "--format",
            "ranges",
            "-o",
            "wide.ranges",
            "--json",
        ],
        d,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let ranges = json(&o)["ranges"].as_array().unwrap().clone();
    assert!(!ranges.is_empty(), "no ranges: {}", stderr(&o));
    // Stated addresses the preload library accepts: whole pages, none below the text.
    for r in &ranges {
        let (start, end) = (r["start"].as_u64().unwrap(), r["end"].as_u64().unwrap());
        assert!(
            start > 0 && start % (2 << 20) == 0 && end % (2 << 20) == 0,
            "{ranges:?}"
        );
    }
    let hot = Binary::open(&wide).unwrap().symbol("hot0").unwrap().0;
    let covered = |r: &serde_json::Value| {
        (r["start"].as_u64().unwrap()..r["end"].as_u64().unwrap()).contains(&hot)
    };
    assert!(
        ranges.iter().any(covered),
        "hot0 at {hot:#x} is in none of {ranges:?}"
    );

    let preload = runtime_lib().join("libhottext_preload.so");
    let env = [
        ("LD_PRELOAD", preload.to_str().unwrap()),
        ("HOTTEXT_RANGES_FILE", "wide.ranges"),
    ];
    let child = start(d, "wide", &env);
    assert_all_huge(d, child.0.id(), &["--ranges", "wide.ranges"]);
}
