//! The build integrations pass a cluster file for clang's basic-block sections to the compile
//! step: the CMake module (`CLUSTERS`, on the target and the static library it links, which
//! recompile when the file changes) and the make snippet (`HOTTEXT_CLUSTERS`). No profile is
//! needed for that: `ON_MISSING warn` builds without one, as on a first build.

mod common;

use std::path::Path;

use common::{require, run, stderr, stdout, write};

const CLANG: &str = "clang-19";

/// A library function with an error path, called from a main with one too.
const CORE_C: &str = r#"#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) long core_step(long x) {
  if (x < 0) { fprintf(stderr, "negative %ld\n", x); abort(); }
  long s = 0;
  for (long i = 0; i < x; i++) s += i % 7 ? i : -i;
  return s;
}
"#;

const MAIN_C: &str = r#"#include <stdio.h>
long core_step(long x);
int main(int argc, char **argv) {
  if (argc > 3) { puts("usage: app"); return 2; }
  long t = 0;
  for (long i = 0; i < 1000; i++) t += core_step(i);
  printf("%ld\n", t);
  return 0;
}
"#;

/// Keeps each function's entry block only: everything else goes to its `.cold` part.
const CLUSTERS: &str = "v1\nf core_step\nc 0\nf main\nc 0\n";

/// Whether `binary` in `dir` has the symbol `name` (clang's `.cold` parts are untyped locals).
fn has_symbol(dir: &Path, binary: &str, name: &str) -> bool {
    stdout(&run("nm", &[binary], dir))
        .lines()
        .any(|l| l.split_whitespace().nth(2) == Some(name))
}

/// What the program prints built plainly, with `core` from `core_c`.
fn unsplit(dir: &Path, core_c: &str) -> String {
    run(CLANG, &["-O2", "main.c", core_c, "-o", "plain"], dir);
    stdout(&run("./plain", &[], dir))
}

#[test]
fn cmake_passes_the_cluster_file_to_clang_for_the_target_and_its_libraries() {
    require("cmake", &["--version"]);
    require(CLANG, &["--version"]);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "CMakeLists.txt",
        "cmake_minimum_required(VERSION 3.21)\nproject(app C)\nfind_package(hottext REQUIRED)\n\
         add_subdirectory(core)\nadd_executable(app main.c)\ntarget_link_libraries(app core)\n\
         hottext_optimize(app META hottext/app.meta ON_MISSING warn CLUSTERS clusters.txt)\n",
    );
    write(d, "main.c", MAIN_C);
    write(d, "clusters.txt", CLUSTERS);
    std::fs::create_dir(d.join("core")).unwrap();
    write(&d.join("core"), "core.c", CORE_C);
    write(
        &d.join("core"),
        "CMakeLists.txt",
        "add_library(core STATIC core.c)\n",
    );
    let cmake_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../cmake");
    run(
        "cmake",
        &[
            "-S",
            ".",
            "-B",
            "build",
            &format!("-DCMAKE_C_COMPILER={CLANG}"),
            &format!("-Dhottext_DIR={}", cmake_dir.display()),
            &format!("-DHOTTEXT_EXECUTABLE={}", env!("CARGO_BIN_EXE_hottext")),
        ],
        d,
    );
    let first = run("cmake", &["--build", "build", "--verbose"], d);
    let log = format!("{}{}", stdout(&first), stderr(&first));
    let flag = format!("-fbasic-block-sections=list={}/clusters.txt", d.display());
    for source in ["core.c", "main.c"] {
        let compile = log
            .lines()
            .find(|l| l.contains(" -c ") && l.ends_with(source))
            .unwrap_or_else(|| panic!("no compile line of {source} in:\n{log}"));
        assert!(
            compile.contains(&flag),
            "{source} compiled without {flag}: {compile}"
        );
    }
    for cold in ["core_step.cold", "main.cold"] {
        assert!(
            has_symbol(d, "build/app", cold),
            "clang did not split {cold}"
        );
    }
    assert_eq!(stdout(&run("build/app", &[], d)), unsplit(d, "core/core.c"));

    // A new cluster file recompiles the sources it splits: main whole this time.
    write(d, "clusters.txt", "v1\nf core_step\nc 0\n");
    let second = run("cmake", &["--build", "build", "--verbose"], d);
    let log = format!("{}{}", stdout(&second), stderr(&second));
    for source in ["core.c", "main.c"] {
        assert!(
            log.lines()
                .any(|l| l.contains(" -c ") && l.ends_with(source)),
            "{source} was not recompiled after the cluster file changed:\n{log}"
        );
    }
    assert!(
        !has_symbol(d, "build/app", "main.cold"),
        "main is still split"
    );
    assert!(has_symbol(d, "build/app", "core_step.cold"));
}

#[test]
fn the_make_snippet_adds_the_cluster_file_to_clangs_flags_and_gcc_is_told() {
    require("make", &["--version"]);
    require(CLANG, &["--version"]);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let snippet = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../integrations/make/hottext.mk");
    write(
        d,
        "Makefile",
        &format!(
            "HOTTEXT_META := app.meta\nHOTTEXT_ON_MISSING := warn\nHOTTEXT_CLUSTERS := clusters.txt\n\
             include {}\nCFLAGS += -O2 $(HOTTEXT_CFLAGS)\nOBJS := main.o core.o\n\
             $(OBJS): $(HOTTEXT_COMPILE_DEPS)\n\
             app: $(OBJS) $(HOTTEXT_DEPS)\n\t$(hottext_link)\n",
            snippet.display()
        ),
    );
    write(d, "main.c", MAIN_C);
    write(d, "core.c", CORE_C);
    write(d, "clusters.txt", CLUSTERS);
    let hottext = format!("HOTTEXT={}", env!("CARGO_BIN_EXE_hottext"));
    run("make", &[&format!("CC={CLANG}"), &hottext, "app"], d);
    for cold in ["core_step.cold", "main.cold"] {
        assert!(has_symbol(d, "app", cold), "clang did not split {cold}");
    }
    assert_eq!(stdout(&run("./app", &[], d)), unsplit(d, "core.c"));

    // gcc has no basic-block sections: the snippet says so and builds whole functions.
    for o in ["main.o", "core.o", "app"] {
        let _ = std::fs::remove_file(d.join(o));
    }
    let built = run("make", &["CC=gcc", &hottext, "app"], d);
    assert!(
        stderr(&built).contains("HOTTEXT_CLUSTERS is for clang"),
        "{}",
        stderr(&built)
    );
    assert!(!has_symbol(d, "app", "main.cold"));
}
