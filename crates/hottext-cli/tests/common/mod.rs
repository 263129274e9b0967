//! Helpers shared by the integration tests: run the real `hottext`, real compilers and linkers.

#![allow(dead_code)] // each test file uses a different subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn hottext(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hottext"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("cannot run the hottext binary")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs a tool that the test needs; a missing tool fails the test and names what to install.
pub fn run(program: &str, args: &[&str], dir: &Path) -> Output {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!("this test needs `{program}` ({e}); `bash .ci/run` installs it")
        });
    assert!(
        out.status.success(),
        "{program} {args:?} failed:\n{}",
        stderr(&out)
    );
    out
}

/// The lld that Debian's lld-19 package installs, as a `-B` directory for gcc's `-fuse-ld=lld`.
pub fn lld_dir() -> &'static str {
    let dir = "/usr/lib/llvm-19/bin";
    assert!(
        Path::new(dir).join("ld.lld").exists(),
        "this test needs lld 19 at {dir}/ld.lld: apt-get install lld-19 (`bash .ci/run` does)"
    );
    dir
}

pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("cannot write test file");
    path
}
