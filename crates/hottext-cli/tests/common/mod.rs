//! Helpers shared by the integration tests: run the real `hottext`, real compilers and linkers.

#![allow(dead_code)] // each test file uses a different subset

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::sync::OnceLock;
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

/// A fresh directory with `p.c` (`program`) compiled with `-ffunction-sections` to `p.o` and
/// linked plain as `base`, and `profile` as `p.profile`: what the linker-input tests start from.
pub fn program_and_profile(program: &str, profile: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "p.c", program);
    write(dir.path(), "p.profile", profile);
    run(
        "gcc",
        &["-O2", "-ffunction-sections", "-c", "p.c", "-o", "p.o"],
        dir.path(),
    );
    run("gcc", &["p.o", "-o", "base"], dir.path());
    dir
}

/// Runs `hottext profile DATA --binary BINARY -o OUT --json` in `dir`, expects it to succeed,
/// and returns its JSON document.
pub fn profile_json(dir: &Path, data: &Path, binary: &str, out: &str) -> serde_json::Value {
    let o = hottext(
        &[
            "profile",
            data.to_str().unwrap(),
            "--binary",
            binary,
            "-o",
            out,
            "--json",
        ],
        dir,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
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

/// Fails the test, naming the tool, when `tool args` does not run.
pub fn require(tool: &str, args: &[&str]) {
    let ok = Command::new(tool)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "these tests need `{tool}`, which is not installed or does not run"
    );
}

/// Fails the test when perf is missing or may not profile as this user.
pub fn require_perf() {
    require("perf", &["--version"]);
    let paranoid: i32 = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .expect("cannot read /proc/sys/kernel/perf_event_paranoid: is this Linux?")
        .trim()
        .parse()
        .expect("perf_event_paranoid is not a number");
    // /proc/self belongs to the process's effective user.
    let root = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap()) == 0;
    assert!(
        root || paranoid <= 2,
        "kernel.perf_event_paranoid is {paranoid}: perf may not profile as this user; run as root or set it to 2"
    );
}

/// Copies a program a test runs afterwards, by `cp` in a child process. A copy this process
/// wrote itself would hold a write descriptor for a moment, which a child that another test
/// thread forks at that moment inherits until its exec; running the copy then fails with
/// ETXTBSY ("Text file busy", seen once in CI).
pub fn copy_program(from: &Path, to: &Path) {
    let status = Command::new("cp").arg(from).arg(to).status();
    assert!(
        status.is_ok_and(|s| s.success()),
        "cp {} {} failed",
        from.display(),
        to.display()
    );
}

/// Whether perf itself records branch records of every taken branch here (`-j any`): on a
/// CPU whose PMU has them, not in a VM without one (as CI's).
pub fn perf_records_every_branch() -> bool {
    let dir = tempfile::tempdir().unwrap();
    std::process::Command::new("perf")
        .args([
            "record",
            "-q",
            "-e",
            "cycles:u",
            "-j",
            "any,u",
            "-o",
            "probe.data",
        ])
        .args(["--", "true"])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Compiles the C `source` as `dir/name` with frame pointers and extra gcc flags.
pub fn gcc(dir: &Path, name: &str, source: &str, flags: &[&str]) -> PathBuf {
    require("gcc", &["--version"]);
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let out = dir.join(name);
    let status = Command::new("gcc")
        .args(["-O1", "-fno-omit-frame-pointer"])
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .status()
        .unwrap();
    assert!(status.success(), "gcc failed for {name}");
    out
}

/// Records `prog args` with plain perf: stack samples on the software clock, at 4999 Hz.
pub fn perf_record(dir: &Path, prog: &Path, args: &[&str]) -> PathBuf {
    perf_record_with(dir, prog, &["-g"], args)
}

/// Records `prog args` on the software clock at 4999 Hz, with `how` (`-g`,
/// `--call-graph dwarf`, or nothing for samples without stacks).
pub fn perf_record_with(dir: &Path, prog: &Path, how: &[&str], args: &[&str]) -> PathBuf {
    require_perf();
    let data = dir.join(format!(
        "{}.data",
        prog.file_name().unwrap().to_string_lossy()
    ));
    let out = Command::new("perf")
        .args(["record", "-q"])
        .args(how)
        .args(["-e", "cpu-clock", "-F", "4999", "-o"])
        .arg(&data)
        .arg("--")
        .arg(prog)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "perf record failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    data
}

/// Tests that measure time: running two at once on a 2-CPU machine would only add noise.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// The JSON document a `--json` run printed.
pub fn json(out: &Output) -> serde_json::Value {
    serde_json::from_str(&stdout(out))
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}\n{}", stdout(out), stderr(out)))
}

/// The row of a report (`ab`, `stat`) with this key.
pub fn row<'a>(report: &'a serde_json::Value, key: &str) -> &'a serde_json::Value {
    report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == key)
        .unwrap_or_else(|| panic!("no row {key} in {report:#}"))
}

/// A JSON number.
pub fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// `hottext ab --json ARGS` in `dir`.
pub fn ab(dir: &Path, args: &[&str]) -> Output {
    let mut all = vec!["ab", "--json"];
    all.extend_from_slice(args);
    hottext(&all, dir)
}

/// A small demo service: 2000 generated functions over 4 MiB of text.
pub const DEMO: [&str; 3] = ["FUNCTIONS=2000", "TEXT_MB=4", "UNITS=4"];

/// `make ARGS` in examples/demo-service for the small [`DEMO`], with its objects in `build`.
pub fn demo_make(build: &Path, args: &[&str]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/demo-service");
    let build_arg = format!("BUILD={}", build.display());
    let mut all = vec!["--no-print-directory", build_arg.as_str()];
    all.extend(DEMO);
    all.extend(args);
    run("make", &all, &dir);
}

/// The small demo service linked without an order as `build`/demo; returns its path.
pub fn demo(build: &Path) -> String {
    let out = build.join("demo");
    demo_make(build, &["-j2", "link", &format!("OUT={}", out.display())]);
    out.display().to_string()
}

/// `call` lines of a profile: (caller, callee, weight), in the profile's order.
pub fn call_lines(profile: &str) -> Vec<(String, String, u64)> {
    profile
        .lines()
        .filter_map(|l| l.strip_prefix("call "))
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[0].to_string(), f[1].to_string(), f[2].parse().unwrap())
        })
        .collect()
}

/// `hottext store put PROFILE --store store --meta META` in `dir`: publishes a profile to the
/// local store `dir/store` and names it in a meta file, as a build's fetch expects to find it.
pub fn store_put(dir: &Path, profile: &str, meta: &str) {
    let put = hottext(
        &["store", "put", profile, "--store", "store", "--meta", meta],
        dir,
    );
    assert!(put.status.success(), "{}", stderr(&put));
}

/// A port nobody listens on now (the kernel's choice; free again once the listener drops).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Orders `p.profile` for `base` by C3 into `out` (and `markers.o`), with `extra` options.
pub fn order_for_base(dir: &Path, format: &str, out: &str, extra: &[&str]) -> Output {
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

/// The runtime, built once per test binary into a directory of its own (not the source tree's
/// runtime/build, which a fresh clone lacks): `libhottext_auto.a` and
/// `libhottext_preload.so` are there.
pub fn runtime_lib() -> &'static Path {
    static LIB: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &LIB.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let runtime = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../runtime");
        let build = format!("B={}", dir.path().display());
        run(
            "make",
            &[
                "--no-print-directory",
                "-C",
                runtime.to_str().unwrap(),
                &build,
            ],
            dir.path(),
        );
        let lib = dir.path().join("lib");
        (dir, lib)
    })
    .1
}

/// Processes whose command line mentions `marker`, other than this test's.
pub fn processes_mentioning(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
            })
            .unwrap_or(true);
        if cmdline.contains(marker) && !zombie {
            found.push(format!("{pid}: {cmdline}"));
        }
    }
    found
}
