//! The CMake module on a project whose hot code is in its own static libraries, two levels deep
//! (`app` links `core`, `core` links `util`), as leveldb's `db_bench` links `libleveldb.a`:
//! configure and build with the module alone (no profile yet, `ON_MISSING warn`), record with
//! `hottext record`, profile, publish with `hottext store put --meta`, build again, and the
//! libraries' hot functions are in the hot range. Once with the plain `target_link_libraries`
//! signature, once with the keyword one, each with a runtime (which the module once linked with
//! the keyword signature, so that configure failed on a project using the plain one).

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use common::{
    hottext, json, lld_dir, require_perf, run, runtime_lib, stderr, stdout, store_put, write,
    KillOnDrop,
};
use hottext::binary::{Binary, HUGE_PAGE};

/// The leaves, in the second-level library: nearly all the samples fall here.
const UTIL_C: &str = r#"
__attribute__((noinline)) unsigned long util_mix(unsigned long x)
{
	volatile unsigned long slot = x;
	for (int i = 0; i < 200; i++)
		slot = slot * 6364136223846793005UL + 1442695040888963407UL;
	return slot;
}
__attribute__((noinline)) unsigned long util_fold(unsigned long x)
{
	volatile unsigned long slot = x;
	for (int i = 0; i < 100; i++)
		slot ^= slot >> 7;
	return slot;
}
__attribute__((noinline)) unsigned long util_cold(unsigned long x) { return x * 3; }
"#;

const CORE_C: &str = r#"
unsigned long util_mix(unsigned long x);
unsigned long util_fold(unsigned long x);
unsigned long util_cold(unsigned long x);
__attribute__((noinline)) unsigned long core_handle(unsigned long x)
{
	return util_fold(util_mix(x)) + 1;
}
__attribute__((noinline)) unsigned long core_serve(unsigned long x)
{
	for (int i = 0; i < 4; i++)
		x = core_handle(x + i);
	return x;
}
__attribute__((noinline)) unsigned long core_cold(unsigned long x) { return util_cold(x) / 7; }
"#;

/// Runs `core_serve` for argv[1] CPU seconds (CPU time: a busy machine only stretches it).
const MAIN_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef HOTTEXT_STATIC
#include <hottext.h>
#endif
unsigned long core_serve(unsigned long x);
unsigned long core_cold(unsigned long x);
static double cpu_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}
int main(int argc, char **argv)
{
#ifdef HOTTEXT_STATIC
	hugify_self();
#endif
	double end = cpu_seconds() + (argc > 1 ? atof(argv[1]) : 0.5);
	unsigned long x = argc > 2 ? core_cold(argc) : 1;
	while (cpu_seconds() < end)
		for (int k = 0; k < 100; k++)
			x = core_serve(x);
	printf("%lu\n", x);
	return 0;
}
"#;

const HOT: [&str; 4] = ["util_mix", "util_fold", "core_handle", "core_serve"];
const COLD: [&str; 2] = ["util_cold", "core_cold"];

/// The plain signature throughout, the module called before the libraries exist (it finds them
/// at the end of the top-level directory), GNU ld and the constructor runtime.
const PLAIN: &str = r#"cmake_minimum_required(VERSION 3.15)
project(app C)
set(CMAKE_C_FLAGS "-O1")
find_package(hottext CONFIG REQUIRED)
add_executable(app main.c)
hottext_optimize(app META app.meta ON_MISSING warn LINKER bfd RUNTIME auto)
add_subdirectory(util)
add_subdirectory(core)
target_link_libraries(app core)
"#;
const PLAIN_CORE: &str = "add_library(core STATIC core.c)\ntarget_link_libraries(core util)\n";

/// The keyword signature throughout (`util` reaches `app` as `$<LINK_ONLY:util>`), lld and the
/// static runtime called from main.
const KEYWORD: &str = r#"cmake_minimum_required(VERSION 3.15)
project(app C)
set(CMAKE_C_FLAGS "-O1")
find_package(hottext CONFIG REQUIRED)
add_subdirectory(util)
add_subdirectory(core)
add_executable(app main.c)
target_link_libraries(app PRIVATE core)
target_compile_definitions(app PRIVATE HOTTEXT_STATIC)
target_link_options(app PRIVATE -B${LLD_DIR})
hottext_optimize(app META app.meta ON_MISSING warn LINKER lld RUNTIME static)
"#;
const KEYWORD_CORE: &str =
    "add_library(core STATIC core.c)\ntarget_link_libraries(core PRIVATE util)\n";

#[test]
fn plain_signature_libraries_are_laid_out_and_the_auto_runtime_links() {
    configure_profile_rebuild_verify(PLAIN, PLAIN_CORE);
}

#[test]
fn keyword_signature_libraries_are_laid_out_and_the_static_runtime_links() {
    configure_profile_rebuild_verify(KEYWORD, KEYWORD_CORE);
}

fn configure_profile_rebuild_verify(lists: &str, core_lists: &str) {
    require_perf();
    common::require("cmake", &["--version"]);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "CMakeLists.txt", lists);
    write(d, "main.c", MAIN_C);
    for (sub, source, sub_lists) in [
        ("util", UTIL_C, "add_library(util STATIC util.c)\n"),
        ("core", CORE_C, core_lists),
    ] {
        std::fs::create_dir(d.join(sub)).unwrap();
        write(&d.join(sub), &format!("{sub}.c"), source);
        write(&d.join(sub), "CMakeLists.txt", sub_lists);
    }

    let cmake_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../cmake");
    let lib = runtime_lib();
    let configure = run(
        "cmake",
        &[
            "-S",
            ".",
            "-B",
            "build",
            &format!("-Dhottext_DIR={}", cmake_dir.display()),
            &format!("-DHOTTEXT_EXECUTABLE={}", env!("CARGO_BIN_EXE_hottext")),
            &format!(
                "-DHOTTEXT_RUNTIME_LIBRARY={}",
                lib.join("libhottext.a").display()
            ),
            &format!(
                "-DHOTTEXT_RUNTIME_AUTO_LIBRARY={}",
                lib.join("libhottext_auto.a").display()
            ),
            &format!(
                "-DHOTTEXT_INCLUDE_DIR={}",
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../../runtime/include")
                    .display()
            ),
            &format!("-DLLD_DIR={}", lld_dir()),
        ],
        d,
    );
    assert!(
        stdout(&configure).contains("-fno-omit-frame-pointer also on core, util"),
        "configure does not say it compiles both libraries with the flags:\n{}",
        stdout(&configure)
    );

    // No meta file yet: ON_MISSING warn builds unoptimised, with the flags on every library.
    let first = run("cmake", &["--build", "build", "--verbose"], d);
    let log = format!("{}{}", stdout(&first), stderr(&first));
    for source in ["util.c", "core.c", "main.c"] {
        let compile = log
            .lines()
            .find(|l| l.contains(" -c ") && l.ends_with(source))
            .unwrap_or_else(|| panic!("no compile line of {source} in:\n{log}"));
        assert!(
            compile.contains("-ffunction-sections") && compile.contains("-fno-omit-frame-pointer"),
            "{source} compiled without the flags: {compile}"
        );
    }
    assert!(
        log.contains("BUILDING WITHOUT THE HOT-TEXT PROFILE"),
        "{log}"
    );

    let record = hottext(&["record", "-o", "perf.data", "--", "build/app", "1"], d);
    assert!(record.status.success(), "{}", stderr(&record));
    let profile = hottext(
        &[
            "profile",
            "perf.data",
            "--binary",
            "build/app",
            "-o",
            "app.profile",
        ],
        d,
    );
    assert!(profile.status.success(), "{}", stderr(&profile));
    let text = std::fs::read_to_string(d.join("app.profile")).unwrap();
    for name in HOT {
        assert!(
            text.contains(&format!("\nfn {name} ")),
            "the recording missed {name}:\n{text}"
        );
    }
    store_put(d, "app.profile", "app.meta");

    // The meta file changed: the module alone relinks with the profile.
    let second = run("cmake", &["--build", "build"], d);
    let log = format!("{}{}", stdout(&second), stderr(&second));
    assert!(log.contains("0 functions gone"), "{log}");
    // The launcher verified the link against the plan.
    assert!(
        log.contains("planned functions in the range, 0 not planned"),
        "{log}"
    );
    let verify = hottext(&["verify", "--binary", "build/app", "--json"], d);
    assert!(
        verify.status.success(),
        "{}{}",
        stdout(&verify),
        stderr(&verify)
    );
    let bin = Binary::open(&d.join("build/app")).unwrap();
    let (start, end) = bin.hot_range().expect("no __hot_start/__hot_end");
    let inside = |name: &str| {
        let at = bin
            .symbol(name)
            .unwrap_or_else(|| panic!("{name} is not in the binary"));
        start <= at && at < end
    };
    for name in HOT {
        assert!(inside(name), "{name} is outside the hot range");
    }
    for name in COLD {
        assert!(!inside(name), "{name}, never run, is inside the hot range");
    }

    check_runtime(d, &json(&verify));
}

/// Runs the relinked program with the runtime's report on and checks its pages with
/// `verify --pid`.
fn check_runtime(d: &Path, verified: &serde_json::Value) {
    let mut child = Command::new(d.join("build/app"))
        .arg("60")
        .env("HOTTEXT_VERBOSE", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut said)
        .unwrap();
    let process = KillOnDrop(child);
    let pid = process.0.id().to_string();
    let pages = hottext(&["verify", "--pid", &pid, "--json"], d);
    let report = json(&pages);
    let size = verified["size"].as_u64().unwrap();
    // The range is padded to a whole 2 MiB page (order's --pad-hot-range auto), so the runtime,
    // linked and run, maps it.
    assert!(size >= HUGE_PAGE, "{verified:#}");
    assert!(pages.status.success(), "{report:#}\n{said}");
    assert!(report["huge_pages"].as_u64().unwrap() >= 1, "{report:#}");
}
