//! `hottext fetch` inside real builds: the Makefile snippet and the CMake module link an ordered
//! binary and relink when the meta file changes; the snippet's probe holds a static library's code.

mod common;
mod support;

use std::path::Path;
use std::process::Command;

use common::{hottext, run, stderr, stdout};
use hottext::binary::Binary;
use support::published::publish;

#[test]
fn makefile_snippet_links_an_ordered_binary_and_relinks_when_the_meta_changes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    publish(d);
    let snippet = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../integrations/make/hottext.mk");
    let makefile = format!(
        "HOTTEXT_META := svc.meta\ninclude {}\nCFLAGS := -O1 -fno-inline $(HOTTEXT_CFLAGS)\n\
         svc: service.o $(HOTTEXT_DEPS)\n\t$(hottext_link)\n",
        snippet.display()
    );
    std::fs::write(d.join("Makefile"), makefile).unwrap();
    let hottext_bin = format!("HOTTEXT={}", env!("CARGO_BIN_EXE_hottext"));
    let out = run("make", &[&hottext_bin], d);
    // make shows the recipes' stdout, where fetch and then verify report.
    assert!(stdout(&out).contains("hot functions"), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("planned functions in the range, 0 not planned"),
        "{}",
        stdout(&out)
    );
    let verify = hottext(&["verify", "--binary", "svc"], d);
    assert!(
        verify.status.success(),
        "{}{}",
        stdout(&verify),
        stderr(&verify)
    );
    // Up to date until the meta file changes.
    let again = run("make", &[&hottext_bin], d);
    assert!(stdout(&again).contains("up to date"), "{}", stdout(&again));
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let meta = std::fs::read_to_string(d.join("svc.meta")).unwrap();
    std::fs::write(
        d.join("svc.meta"),
        meta.replace("binary-version: unknown", "binary-version: 2"),
    )
    .unwrap();
    let relink = run("make", &[&hottext_bin], d);
    assert!(stdout(&relink).contains("version 2"), "{}", stdout(&relink));
}

#[test]
fn makefile_snippet_fails_a_link_the_runtime_could_not_map_or_warns_as_told() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    publish(d);
    let snippet = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../integrations/make/hottext.mk");
    // Unpadded, the small program's hot range holds no whole 2 MiB page: verify fails on it.
    let makefile = format!(
        "HOTTEXT_META := svc.meta\nHOTTEXT_FETCH_ARGS := --pad-hot-range never\ninclude {}\n\
         CFLAGS := -O1 -fno-inline $(HOTTEXT_CFLAGS)\nsvc: service.o $(HOTTEXT_DEPS)\n\t$(hottext_link)\n",
        snippet.display()
    );
    std::fs::write(d.join("Makefile"), makefile).unwrap();
    let hottext_bin = format!("HOTTEXT={}", env!("CARGO_BIN_EXE_hottext"));
    let failed = Command::new("make")
        .arg(&hottext_bin)
        .current_dir(d)
        .output()
        .unwrap();
    assert!(!failed.status.success(), "{}", stdout(&failed));
    assert!(
        stderr(&failed).contains("it was removed"),
        "{}",
        stderr(&failed)
    );
    assert!(
        !d.join("svc").exists(),
        "the unverified binary was left for the next make"
    );
    // With warn the binary stays, and the build log says why it is not what was planned.
    let warned = run("make", &[&hottext_bin, "HOTTEXT_ON_MISSING=warn"], d);
    assert!(
        stderr(&warned).contains("warning: svc does not hold"),
        "{}",
        stderr(&warned)
    );
    assert!(d.join("svc").exists());
}

#[test]
fn makefile_snippet_probe_holds_a_static_library_named_in_ldlibs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    publish(d);
    let snippet = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../integrations/make/hottext.mk");
    // The service's code is only in libsvc.a, which the link finds through LDLIBS, not $^.
    let makefile = format!(
        "HOTTEXT_META := svc.meta\ninclude {}\nCFLAGS := -O1 -fno-inline $(HOTTEXT_CFLAGS)\n\
         LDFLAGS := -L.\nLDLIBS := -lsvc\n\
         svc: $(HOTTEXT_DEPS) | libsvc.a\n\t$(hottext_link)\n\
         libsvc.a: service.o\n\tar rcs $@ $^\n",
        snippet.display()
    );
    std::fs::write(d.join("Makefile"), makefile).unwrap();
    let hottext_bin = format!("HOTTEXT={}", env!("CARGO_BIN_EXE_hottext"));
    run("make", &[&hottext_bin], d);
    let verify = hottext(&["verify", "--binary", "svc"], d);
    assert!(
        verify.status.success(),
        "{}{}",
        stdout(&verify),
        stderr(&verify)
    );
    let bin = Binary::open(&d.join("svc")).unwrap();
    let (start, end) = bin.hot_range().unwrap();
    let handler = bin.symbol("handler_a").unwrap();
    assert!(
        start <= handler && handler < end,
        "handler_a is outside the hot range"
    );
}

#[test]
fn cmake_module_with_gold_links_the_order_file_and_the_markers() {
    support::need("cmake", "--version");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    publish(d);
    let cmake_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../cmake");
    let lists = format!(
        "cmake_minimum_required(VERSION 3.15)\nproject(svc C)\n\
         set(hottext_DIR {})\nfind_package(hottext CONFIG REQUIRED)\n\
         add_executable(svc service.c)\ntarget_compile_options(svc PRIVATE -O1 -fno-inline)\n\
         hottext_optimize(svc META svc.meta LINKER gold)\n",
        cmake_dir.display()
    );
    std::fs::write(d.join("CMakeLists.txt"), lists).unwrap();
    let exe = format!("-DHOTTEXT_EXECUTABLE={}", env!("CARGO_BIN_EXE_hottext"));
    run("cmake", &["-S", ".", "-B", "build", &exe], d);
    let build = run("cmake", &["--build", "build", "--verbose"], d);
    let log = format!("{}{}", stdout(&build), stderr(&build));
    assert!(
        log.contains("-fuse-ld=gold") && log.contains("--section-ordering-file="),
        "{log}"
    );
    assert!(log.contains("hot_markers.o"), "{log}");
    let verify = hottext(&["verify", "--binary", "build/svc"], d);
    assert!(
        verify.status.success(),
        "{}{}",
        stdout(&verify),
        stderr(&verify)
    );
}
