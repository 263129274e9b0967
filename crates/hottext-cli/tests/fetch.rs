//! `hottext fetch`, the build step, through the real binary and real links: a good profile
//! orders the link and passes `verify`; a corrupt, missing or wrongly named object stops the
//! build naming the hash (or, with --on-missing warn, builds unoptimised and says so); a
//! profile of a changed binary is matched by name and by code, and refused when stale.

mod common;
mod support;

use std::path::Path;
use std::process::Output;

use common::{hottext, run, stderr, stdout};
use hottext::binary::Binary;
use hottext::store::ObjectHash;
use support::build_service;
use support::published::publish;

fn fetch(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "fetch",
        "--meta",
        "svc.meta",
        "--binary",
        "base",
        "--format",
        "ld-script",
        "-o",
        "hot.ld",
    ];
    args.extend_from_slice(extra);
    hottext(&args, dir)
}

/// Links base.o with the script and checks the result runs as before.
fn link_with_script(dir: &Path) -> Output {
    run("gcc", &["base.o", "-Wl,-T,hot.ld", "-o", "ordered"], dir);
    assert_eq!(
        stdout(&run("./ordered", &["100000"], dir)),
        stdout(&run("./base", &["100000"], dir)),
        "the ordered binary computes something else"
    );
    hottext(&["verify", "--binary", "ordered"], dir)
}

#[test]
fn fetched_profile_orders_the_link_and_verify_passes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let hash = publish(d);
    // Issue 33: the meta file names the command that wrote it, not the pipeline.
    let meta = std::fs::read_to_string(d.join("svc.meta")).unwrap();
    assert!(meta.contains("# Written by `hottext store put`"), "{meta}");
    let out = fetch(d, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains(&hash.to_string()), "{}", stdout(&out));
    let script = std::fs::read_to_string(d.join("hot.ld")).unwrap();
    assert!(
        script.contains(&hash.to_string()),
        "the script names its profile"
    );
    let verify = link_with_script(d);
    assert!(
        verify.status.success(),
        "{}{}",
        stdout(&verify),
        stderr(&verify)
    );
    let bin = Binary::open(&d.join("ordered")).unwrap();
    let (start, end) = bin.hot_range().unwrap();
    let a = bin.symbol("handler_a").unwrap();
    assert!(start <= a && a < end, "handler_a is outside the hot range");
    let cold = bin.symbol("cold_path").unwrap();
    assert!(
        cold < start || cold >= end,
        "cold_path is inside the hot range"
    );
}

#[test]
fn gold_order_and_markers_through_fetch() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    publish(d);
    let out = hottext(
        &[
            "fetch",
            "--meta",
            "svc.meta",
            "--binary",
            "base",
            "--format",
            "gold-order",
            "-o",
            "order.txt",
            "--markers",
            "markers.o",
        ],
        d,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    run(
        "gcc",
        &[
            "base.o",
            "markers.o",
            "-fuse-ld=gold",
            "-Wl,--section-ordering-file=order.txt",
            "-o",
            "ordered",
        ],
        d,
    );
    let verify = hottext(&["verify", "--binary", "ordered"], d);
    assert!(
        verify.status.success(),
        "{}{}",
        stdout(&verify),
        stderr(&verify)
    );
}

#[test]
fn corrupt_object_fails_the_build_naming_the_hash() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let hash = publish(d);
    let object = d.join("store/sha256").join(hash.hex());
    let mut bytes = std::fs::read(&object).unwrap();
    bytes[40] ^= 1; // one flipped bit
    std::fs::write(&object, bytes).unwrap();
    let out = fetch(d, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("corrupt") && err.contains(&hash.to_string()),
        "{err}"
    );
    assert!(
        !d.join("hot.ld").exists(),
        "no linker input from a corrupt profile"
    );
}

#[test]
fn missing_object_fails_or_builds_unoptimised_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let hash = publish(d);
    std::fs::remove_file(d.join("store/sha256").join(hash.hex())).unwrap();

    let out = fetch(d, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("has no object {hash}")),
        "{}",
        stderr(&out)
    );

    let out = fetch(d, &["--on-missing", "warn"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("WITHOUT THE HOT-TEXT PROFILE") && err.contains("UNOPTIMISED"),
        "{err}"
    );
    assert!(err.contains(&hash.to_string()), "{err}");
    // The build goes on and the program works, but verify says it is not optimised.
    let verify = link_with_script(d);
    assert_eq!(verify.status.code(), Some(1), "{}", stdout(&verify));
}

#[test]
fn missing_meta_file_is_a_missing_profile() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    build_service(d, "base", &[]);
    let out = fetch(d, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("no meta file"), "{}", stderr(&out));
    let out = fetch(d, &["--on-missing", "warn"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn wrong_hash_in_the_meta_file_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let hash = publish(d);
    let meta = std::fs::read_to_string(d.join("svc.meta")).unwrap();

    // A hash of nothing in the store.
    let other = ObjectHash::of(b"some other profile");
    std::fs::write(d.join("svc.meta"), meta.replace(&hash.hex(), &other.hex())).unwrap();
    let out = fetch(d, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&other.to_string()),
        "{}",
        stderr(&out)
    );

    // The hash of another profile in the store: its size and build-id give it away.
    let another = "# hottext profile v1\nfn main 64 1\n";
    std::fs::write(d.join("another.profile"), another).unwrap();
    let put = hottext(&["store", "put", "another.profile", "--store", "store"], d);
    assert!(put.status.success(), "{}", stderr(&put));
    let swapped = ObjectHash::of(another.as_bytes());
    std::fs::write(
        d.join("svc.meta"),
        meta.replace(&hash.hex(), &swapped.hex()),
    )
    .unwrap();
    let out = fetch(d, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("wrong object") && err.contains(&swapped.to_string()),
        "{err}"
    );

    // A malformed hash: an input error naming the line.
    std::fs::write(
        d.join("svc.meta"),
        meta.replace(&hash.hex(), &hash.hex()[..60]),
    )
    .unwrap();
    let out = fetch(d, &["--on-missing", "warn"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("line 3"), "{}", stderr(&out));
}

#[test]
fn renamed_functions_are_matched_by_their_code() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    publish(d);
    // The next version renames two handlers and adds a function before them: their code is
    // the same, but the displacements of their calls to the leaves changed.
    let old_call = call_displacement(&d.join("base"), "handler_a");
    build_service(
        d,
        "base",
        &[
            "-DHANDLER_A=handle_alpha",
            "-DHANDLER_B=handle_beta",
            "-DEXTRA",
        ],
    );
    assert_ne!(
        old_call,
        call_displacement(&d.join("base"), "handle_alpha"),
        "nothing moved"
    );
    let out = fetch(d, &["--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let renamed: Vec<(String, String)> = serde_json::from_value(json["renamed"].clone()).unwrap();
    assert!(
        renamed.contains(&("handler_a".into(), "handle_alpha".into()))
            && renamed.contains(&("handler_b".into(), "handle_beta".into())),
        "{renamed:?}"
    );
    // 50 of the profile's 107 samples are on the renamed handlers.
    let by_code = json["matched_by_code_fraction"].as_f64().unwrap();
    assert!((by_code - 50.0 / 107.0).abs() < 1e-4, "{json}");
    assert_eq!(json["matched_fraction"].as_f64().unwrap(), 1.0);
    let script = std::fs::read_to_string(d.join("hot.ld")).unwrap();
    assert!(script.contains(".text.handle_alpha"), "{script}");
    let verify = link_with_script(d);
    assert!(verify.status.success(), "{}", stdout(&verify));

    // `order --binary` fits the profile of the old build the same way, once allowed to (it
    // once dropped the renamed handlers).
    let out = hottext(
        &[
            "order",
            "svc.profile",
            "--binary",
            "base",
            "--allow-build-id-mismatch",
            "--format",
            "ld-script",
            "-o",
            "order.ld",
            "--json",
        ],
        d,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let renamed: Vec<(String, String)> =
        serde_json::from_value(json["matched"]["renamed"].clone()).unwrap();
    assert!(
        renamed.contains(&("handler_a".into(), "handle_alpha".into())),
        "{json}"
    );
    let ordered = std::fs::read_to_string(d.join("order.ld")).unwrap();
    for handler in ["handle_alpha", "handle_beta", "handler_c"] {
        assert!(ordered.contains(&format!(".text.{handler}")), "{ordered}");
    }
}

/// The rel32 of the first `call` in `func`.
fn call_displacement(binary: &Path, func: &str) -> i32 {
    let out = run(
        "objdump",
        &[
            "-d",
            &format!("--disassemble={func}"),
            binary.to_str().unwrap(),
        ],
        Path::new("."),
    );
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.contains("\tcall "))
        .unwrap_or_else(|| panic!("no call in {func}:\n{text}"));
    let bytes: Vec<u8> = line
        .split('\t')
        .nth(1)
        .unwrap()
        .split_whitespace()
        .map(|b| u8::from_str_radix(b, 16).unwrap())
        .collect();
    i32::from_le_bytes([bytes[1], bytes[2], bytes[3], bytes[4]])
}

#[test]
fn stale_profile_is_refused_below_the_threshold() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    publish(d);
    // Renamed and changed: handler_a and handler_b now call other leaves, so neither their
    // names nor their code match; 57 of the 107 samples are still matched.
    let mut changed = support::SERVICE_C.replace("leaf0(x) ^ leaf1(x)", "leaf3(x) ^ leaf2(x)");
    changed = changed.replace(
        "return leaf4(x) + leaf5(x) + leaf6(x);",
        "return leaf6(x) * leaf5(x);",
    );
    std::fs::write(d.join("changed.c"), changed).unwrap();
    run(
        "gcc",
        &[
            "-O1",
            "-ffunction-sections",
            "-fno-inline",
            "-DHANDLER_A=handle_alpha",
            "-DHANDLER_B=handle_beta",
            "changed.c",
            "-o",
            "base",
        ],
        d,
    );
    let out = fetch(d, &["--min-matched", "0.6"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("stale") && err.contains("53.3%"), "{err}");
    assert!(err.contains("handler_a"), "names what is gone: {err}");
    // At a lower threshold the remaining functions are ordered.
    let out = fetch(d, &["--min-matched", "0.5"]);
    assert!(out.status.success(), "{}", stderr(&out));
}
