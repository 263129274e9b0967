//! Rust as a first-class input (issue 33): a generated Cargo workspace of three crates, built
//! with 16 codegen units, recorded, profiled, ordered and relinked by the recipes of
//! docs/build.md's Cargo section: the ld script under rustc's default linker (rust-lld) and
//! under GNU ld, the lld symbol-ordering file with the markers object, and the runtime. Each
//! relinked binary must hold every function the linker input planned (`verify --planned`),
//! among them the two kinds the ld script once left out on ripgrep: a local namesake of one
//! codegen unit in an `.rlib` (`scramble`, an `#[inline]` function each unit copies) and a
//! `#[cold]` function in `.text.unlikely.<symbol>` (`rare`).
//!
//! Needs cargo, perf and GNU ld; builds offline (no registry).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{
    hottext, json, record_until_enough, require, require_perf, runtime_lib, stderr, stdout, write,
};

const WORKSPACE: &str = r#"[workspace]
members = ["app", "alpha", "beta"]
resolver = "2"

[profile.release]
codegen-units = 16
"#;

const ALPHA: &str = r#"//! Hashing steps; each module is a codegen unit of its own.

/// `#[inline]` gives each codegen unit that calls it a copy of its own, a local symbol of the
/// same name in each; the double recursion keeps LLVM from inlining it away.
#[inline]
pub fn scramble(x: u64, depth: u32) -> u64 {
    if depth == 0 {
        return x.wrapping_mul(0x9e3779b97f4a7c15).rotate_left(17);
    }
    scramble(x ^ 0x5555, depth - 1).wrapping_add(scramble(x.rotate_left(9), depth - 1))
}

pub mod m1 {
    #[inline(never)]
    pub fn mix(x: u64) -> u64 {
        super::scramble(x, 6) ^ 0x9e37
    }
}

pub mod m2 {
    #[inline(never)]
    pub fn mix2(x: u64) -> u64 {
        super::scramble(x ^ 0xabc, 5).wrapping_add(3)
    }
}

/// Taken often enough to be sampled; rustc puts it in `.text.unlikely.<symbol>`.
#[cold]
#[inline(never)]
pub fn rare(x: u64) -> u64 {
    (0..400u64).fold(x, |a, i| a.rotate_left(3) ^ i.wrapping_mul(a | 1))
}
"#;

const BETA: &str = r#"/// The hot path crosses from the binary into beta and on into alpha.
#[inline(never)]
pub fn step(x: u64) -> u64 {
    let y = alpha::m1::mix(x);
    let z = if y % 8 == 0 { alpha::rare(y) } else { alpha::m2::mix2(y) };
    z ^ alpha::scramble(z, 4)
}
"#;

const APP: &str = r#"use std::time::{Duration, Instant};

/// `app check` prints a checksum; `app SECONDS` works that long.
fn main() {
    let arg = std::env::args().nth(1).unwrap_or_default();
    let mut x = 1u64;
    if arg == "check" {
        for _ in 0..100_000 {
            x = beta::step(x);
        }
        println!("{x}");
        return;
    }
    let seconds: f64 = arg.parse().expect("give SECONDS or check");
    let until = Instant::now() + Duration::from_secs_f64(seconds);
    while Instant::now() < until {
        for _ in 0..10_000 {
            x = beta::step(x);
        }
    }
    println!("{x}");
}
"#;

fn manifest(name: &str, deps: &[&str]) -> String {
    let mut text = format!(
        "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n"
    );
    for d in deps {
        text.push_str(&format!("{d} = {{ path = \"../{d}\" }}\n"));
    }
    text
}

/// Writes the workspace into `dir`.
fn workspace(dir: &Path) {
    write(dir, "Cargo.toml", WORKSPACE);
    for (name, deps, file, source) in [
        ("alpha", &[][..], "lib.rs", ALPHA),
        ("beta", &["alpha"][..], "lib.rs", BETA),
        ("app", &["alpha", "beta"][..], "main.rs", APP),
    ] {
        let src = dir.join(name).join("src");
        std::fs::create_dir_all(&src).unwrap();
        write(&dir.join(name), "Cargo.toml", &manifest(name, deps));
        write(&src, file, source);
    }
}

/// Runs cargo in `dir` as docs/build.md's recipe does (`RUSTFLAGS` with frame pointers for
/// every build, so that no dependency is rebuilt between them), offline, with the workspace's
/// own target directory whatever the outer `cargo test` set, and copies the binary to `dir/as`.
fn cargo(dir: &Path, args: &[&str], binary: &str) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(&cargo)
        .args(args)
        .current_dir(dir)
        .env("CARGO_NET_OFFLINE", "true")
        .env("RUSTFLAGS", "-C force-frame-pointers=yes")
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .output()
        .unwrap_or_else(|e| panic!("this test needs cargo ({cargo}): {e}"));
    assert!(
        out.status.success(),
        "cargo {args:?} failed:\n{}",
        stderr(&out)
    );
    let to = dir.join(binary);
    common::copy_program(&dir.join("target/release/app"), &to);
    to
}

/// `cargo rustc` of the binary crate with `flags` for its link only, as docs/build.md says.
fn relink(dir: &Path, flags: &[&str], binary: &str) -> PathBuf {
    let mut args = vec!["rustc", "--release", "-p", "app", "--bin", "app", "--"];
    args.extend_from_slice(flags);
    cargo(dir, &args, binary)
}

fn run(dir: &Path, program: &Path, arg: &str, env: &[(&str, &str)]) -> Output {
    let out = Command::new(program)
        .arg(arg)
        .envs(env.iter().copied())
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        program.display(),
        stderr(&out)
    );
    out
}

/// Records the probe until its profile has samples in `rare` and in two or more codegen units'
/// copies of `scramble`, then orders it for the ld script and the lld order file.
fn profile_and_order(dir: &Path) {
    record_until_enough(2.0, |seconds| {
        let o = hottext(
            &[
                "record",
                "-o",
                "rec.data",
                "--",
                "./app.probe",
                &seconds.to_string(),
            ],
            dir,
        );
        assert!(o.status.success(), "{}", stderr(&o));
        let o = hottext(
            &[
                "profile",
                "rec.data",
                "--binary",
                "app.probe",
                "-o",
                "p.profile",
            ],
            dir,
        );
        assert!(o.status.success(), "{}", stderr(&o));
        let profile = std::fs::read_to_string(dir.join("p.profile")).unwrap();
        let sampled = |needle: &str| {
            profile
                .lines()
                .filter(|l| l.starts_with("fn ") && l.contains(needle))
                .filter(|l| !l.ends_with(" 0"))
                .count()
        };
        let copies = sampled("8scramble17h");
        let qualified = sampled("-cgu.");
        if sampled("4rare17h") == 0 || copies < 2 || qualified < 2 {
            return Err(format!(
                "rare sampled: {}, scramble copies sampled: {copies}, of them qualified by codegen unit: {qualified}",
                sampled("4rare17h")
            ));
        }
        Ok(())
    });
    for args in [
        &["--format", "ld-script", "-o", "hot.ld"][..],
        &[
            "--format",
            "lld-order",
            "-o",
            "hot.order",
            "--markers",
            "hot_markers.o",
        ][..],
    ] {
        let mut all = vec!["order", "p.profile", "--binary", "app.probe"];
        all.extend_from_slice(args);
        let o = hottext(&all, dir);
        assert!(o.status.success(), "{}", stderr(&o));
    }
}

/// `verify --binary BIN --planned FILE` passes and counts every planned function in the range.
fn verify_planned(dir: &Path, binary: &Path, planned: &str) {
    let bin = binary.to_str().unwrap();
    let o = hottext(
        &["verify", "--binary", bin, "--planned", planned, "--json"],
        dir,
    );
    let report = json(&o);
    assert!(
        o.status.success(),
        "{bin} with {planned}: {report:#}\n{}",
        stderr(&o)
    );
    let plan = &report["plan"];
    assert_eq!(plan["missing"].as_array().unwrap().len(), 0, "{report:#}");
    assert!(plan["planned"].as_u64().unwrap() >= 5, "{report:#}");
    assert_eq!(plan["placed"], plan["planned"], "{bin}: {report:#}");
}

#[test]
fn a_cargo_workspace_is_relinked_with_every_planned_function_in_the_hot_range() {
    require_perf();
    require("cargo", &["--version"]);
    require("ld.bfd", &["--version"]);
    let tmp = tempfile::TempDir::new().unwrap();
    let dir = tmp.path();
    workspace(dir);
    let probe = cargo(dir, &["build", "--release"], "app.probe");
    let expected = stdout(&run(dir, &probe, "check", &[]));
    profile_and_order(dir);

    let script = std::fs::read_to_string(dir.join("hot.ld")).unwrap();
    // The two kinds of function the script once left out are in it, matched as rustc names them.
    assert!(
        script.contains(".rcgu.o(.text._ZN5alpha8scramble17h"),
        "{script}"
    );
    assert!(
        script.contains(".text.unlikely._ZN5alpha4rare17h"),
        "{script}"
    );

    let hot_ld = dir.join("hot.ld");
    let hot_ld = format!("-Wl,-T,{}", hot_ld.display());
    let with_rust_lld = relink(dir, &["-C", &format!("link-arg={hot_ld}")], "app.rust-lld");
    let with_gnu_ld = relink(
        dir,
        &[
            "-C",
            "linker-features=-lld",
            "-C",
            &format!("link-arg={hot_ld}"),
        ],
        "app.gnu-ld",
    );
    let markers = dir.join("hot_markers.o");
    let order = dir.join("hot.order");
    let with_order = relink(
        dir,
        &[
            "-C",
            &format!("link-arg={}", markers.display()),
            // rustc links with --gc-sections: nothing refers to the markers' sections.
            "-C",
            "link-arg=-Wl,--undefined=__hot_start,--undefined=__hot_end",
            "-C",
            &format!("link-arg=-Wl,--symbol-ordering-file={}", order.display()),
            "-C",
            "link-arg=-Wl,--no-warn-symbol-ordering",
        ],
        "app.lld-order",
    );
    let runtime = runtime_lib();
    let with_runtime = relink(
        dir,
        &[
            "-C",
            &format!("link-arg={hot_ld}"),
            "-L",
            &format!("native={}", runtime.display()),
            "-C",
            "link-arg=-lhottext_auto",
        ],
        "app.runtime",
    );

    // GNU ld is what linked the second: it leaves no "Linker: LLD" note in .comment.
    let linked_by = |bin: &Path| {
        let o = Command::new("readelf")
            .args(["-p", ".comment"])
            .arg(bin)
            .output()
            .unwrap();
        stdout(&o).contains("Linker: LLD")
    };
    assert!(
        linked_by(&with_rust_lld),
        "rust-lld is rustc's default linker here"
    );
    assert!(
        !linked_by(&with_gnu_ld),
        "-C linker-features=-lld links with GNU ld"
    );

    for (bin, planned) in [
        (&with_rust_lld, "hot.ld"),
        (&with_gnu_ld, "hot.ld"),
        (&with_order, "hot.order"),
        (&with_runtime, "hot.ld"),
    ] {
        assert_eq!(
            stdout(&run(dir, bin, "check", &[])),
            expected,
            "{}",
            bin.display()
        );
        verify_planned(dir, bin, planned);
    }
    doctor_speaks_cargo(dir);

    // The runtime's constructor ran before main and said what it did.
    let o = run(dir, &with_runtime, "check", &[("HOTTEXT_VERBOSE", "1")]);
    assert!(stderr(&o).contains("hottext"), "{}", stderr(&o));
}

/// `doctor` on the Rust probe gives the Cargo form of its build advice, stripped or not.
fn doctor_speaks_cargo(dir: &Path) {
    let check_of = |binary: &str, check: &str| {
        let o = hottext(&["doctor", "--binary", binary, "--json"], dir);
        let report = json(&o);
        report["checks"]
            .as_array()
            .unwrap_or_else(|| panic!("no checks: {report:#}\n{}", stderr(&o)))
            .iter()
            .find(|c| c["name"] == check)
            .unwrap_or_else(|| panic!("no check {check:?}: {report:#}"))
            .clone()
    };
    let markers = check_of("app.probe", "hot-text markers");
    assert!(
        markers["remedy"]
            .as_str()
            .unwrap()
            .contains("Cargo: cargo rustc"),
        "{markers:#}"
    );
    assert_eq!(check_of("app.probe", "function sections")["status"], "pass");
    common::run("strip", &["-o", "app.stripped", "app.probe"], dir);
    let symbols = check_of("app.stripped", "symbols");
    assert!(
        symbols["remedy"]
            .as_str()
            .unwrap()
            .contains("strip = false"),
        "{symbols:#}"
    );
}
