//! Issue 33: what a person reads first. A C++ program recorded with real perf: `profile` says
//! where its process's CPU went (its own code, libc, the kernel) and lists its hottest
//! functions demangled with `--top`, while the profile keeps the mangled names; `doctor`
//! turns the share into the most a layout can gain.

mod common;

use common::{hottext, json, perf_record, require, stderr, stdout};

/// Time in its own code (`work::spin`), in libc (`memcpy` of 64 KiB) and in the kernel
/// (`getppid`), for about `argv[1]` seconds.
const PROGRAM: &str = r#"
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <unistd.h>
namespace work {
__attribute__((noinline)) unsigned long spin(long n) {
    unsigned long s = 0;
    for (long i = 0; i < n; i++) s += (unsigned long)i * i ^ (s >> 3);
    return s;
}
__attribute__((noinline)) unsigned long copy(long n) {
    static char a[1 << 16], b[1 << 16];
    unsigned long s = 0;
    for (long i = 0; i < n; i++) { a[i & 1023] = (char)i; memcpy(b, a, sizeof a); s += b[i & 1023]; }
    return s;
}
__attribute__((noinline)) long ask(long n) { long s = 0; for (long i = 0; i < n; i++) s += getppid(); return s; }
}
int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 0.5;
    volatile unsigned long sink = 0;
    time_t end = time(0) + 1 + (time_t)seconds; // at least `seconds`, whatever the clock's phase
    while (time(0) < end) sink += work::spin(2000000) + work::copy(300) + work::ask(20000);
    return (int)(sink & 1) * 0;
}
"#;

#[test]
fn profile_says_where_the_cpu_went_and_names_cpp_functions_readably() {
    require("g++", &["--version"]);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("w.cpp"), PROGRAM).unwrap();
    common::run(
        "g++",
        &["-O1", "-fno-omit-frame-pointer", "-o", "w", "w.cpp"],
        d,
    );
    let data = perf_record(d, &d.join("w"), &["1"]);
    let data = data.to_str().unwrap();
    let args = [
        "profile",
        data,
        "--binary",
        "w",
        "-o",
        "w.profile",
        "--top",
        "3",
    ];
    let out = hottext(&args, d);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("w itself: the most a layout of w can speed up"),
        "{err}"
    );
    assert!(err.contains("libc.so"), "no libc share:\n{err}");
    assert!(err.contains("work::spin(long)"), "not demangled:\n{err}");
    let profile = std::fs::read_to_string(d.join("w.profile")).unwrap();
    assert!(profile.contains("fn _ZN4work4spinEl "), "{profile}");
    assert!(profile.contains("# cpu-samples: "), "{profile}");

    let out = hottext(&[&args[..], &["--json"]].concat(), d);
    let doc = json(&out);
    let cpu = &doc["cpu"];
    let process = cpu["process_samples"].as_u64().unwrap();
    let own = cpu["binary_samples"].as_u64().unwrap();
    let elsewhere: u64 = (cpu["elsewhere"].as_array().unwrap().iter())
        .map(|p| p["samples"].as_u64().unwrap())
        .sum();
    assert!(own > 0 && elsewhere > 0, "{cpu}");
    assert_eq!(
        own + elsewhere,
        process,
        "every sample is placed once: {cpu}"
    );
    let top = doc["top"].as_array().unwrap();
    assert!(!top.is_empty() && top.len() <= 3, "{doc}");
    assert!(
        top.iter().any(|f| f["name"] == "_ZN4work4spinEl"),
        "JSON keeps the mangled name: {doc}"
    );

    let out = hottext(&["doctor", "--binary", "w", "--profile", "w.profile"], d);
    let report = stdout(&out);
    let line = (report.lines())
        .find(|l| l.contains("CPU in its own code"))
        .unwrap_or_else(|| panic!("no own-code check:\n{report}"));
    assert!(
        line.contains("at most") && line.contains("libc.so"),
        "{line}"
    );
}
