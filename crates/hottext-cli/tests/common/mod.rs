//! Helpers shared by the integration tests: run the real `hottext`, real compilers and linkers.

#![allow(dead_code)] // each test file uses a different subset

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

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

/// Kills the child when the test is done with it, also when a failed assertion unwinds past it.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// How long a test may spend on recordings that caught too few samples before it gives up.
const RECORDING_BUDGET: Duration = Duration::from_secs(60);

/// Records until a recording has enough samples: `attempt(seconds)` records for that long and
/// says `Err(why)` when it caught too few samples to judge. The first try lasts `first`
/// seconds, each further one twice as long, until tries have taken [`RECORDING_BUDGET`].
///
/// How many samples a recording of given length catches depends on the machine's load (the
/// program gets less CPU time, perf starts later), so tests ask for enough samples, never for
/// a length; a quiet machine needs one try.
pub fn record_until_enough<T>(first: f64, mut attempt: impl FnMut(f64) -> Result<T, String>) -> T {
    let started = Instant::now();
    let mut seconds = first;
    loop {
        match attempt(seconds) {
            Ok(done) => return done,
            Err(why) if started.elapsed() < RECORDING_BUDGET => {
                eprintln!("too few samples in {seconds} s ({why}); recording longer");
                seconds *= 2.0;
            }
            Err(why) => panic!(
                "too few samples even after {:.0} s of recordings, the last {seconds} s long: {why}",
                started.elapsed().as_secs_f64()
            ),
        }
    }
}
