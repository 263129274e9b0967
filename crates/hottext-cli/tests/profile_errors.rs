//! `hottext profile` on bad input: truncated, corrupt or crafted perf.data, another program's
//! recording, a stripped binary, another build. Exit status 2 and a message, never a panic.

mod common;
mod program;

use std::path::Path;

use common::{hottext, stderr};
use program::{build, record};
use tempfile::TempDir;

/// Runs `hottext profile` and expects it to fail with exit status 2 and `needle` in the message.
fn profile_fails(dir: &Path, args: &[&str], needle: &str) -> String {
    let mut all = vec!["profile"];
    all.extend_from_slice(args);
    let out = hottext(&all, dir);
    let err = stderr(&out);
    assert_eq!(
        out.status.code(),
        Some(2),
        "expected exit 2, got {:?}; stderr: {err}",
        out.status
    );
    assert!(err.starts_with("hottext: "), "{err}");
    assert!(err.contains(needle), "expected '{needle}' in: {err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn truncated_perf_data_is_an_error() {
    let dir = TempDir::new().unwrap();
    let prog = build(dir.path(), "prog", &[]);
    let data = record(dir.path(), &prog);
    let bytes = std::fs::read(&data).unwrap();
    // As `head -c` would cut it: in the middle of the data section, and in the header.
    std::fs::write(dir.path().join("half.data"), &bytes[..bytes.len() / 2]).unwrap();
    std::fs::write(dir.path().join("tiny.data"), &bytes[..60]).unwrap();
    profile_fails(
        dir.path(),
        &["half.data", "--binary", "prog"],
        "half.data is cut short",
    );
    profile_fails(
        dir.path(),
        &["tiny.data", "--binary", "prog"],
        "tiny.data is cut short",
    );
}

#[test]
fn corrupt_record_is_an_error_not_a_panic() {
    let dir = TempDir::new().unwrap();
    let prog = build(dir.path(), "prog", &[]);
    let data = record(dir.path(), &prog);
    let mut bytes = std::fs::read(&data).unwrap();
    // The first record's size (u16 at offset 6 of its header) becomes 0.
    let data_offset = u64::from_le_bytes(bytes[40..48].try_into().unwrap()) as usize;
    bytes[data_offset + 6..data_offset + 8].copy_from_slice(&[0, 0]);
    std::fs::write(dir.path().join("bad.data"), &bytes).unwrap();
    profile_fails(
        dir.path(),
        &["bad.data", "--binary", "prog"],
        "bad.data is damaged after 0 records",
    );
}

/// Issue 11: a count in a feature section, set so that linux-perf-data would allocate 34 GB
/// (an abort), is an error that names it.
#[test]
fn crafted_event_desc_count_is_an_error_not_an_abort() {
    let dir = TempDir::new().unwrap();
    let prog = build(dir.path(), "prog", &[]);
    let data = record(dir.path(), &prog);
    let mut bytes = std::fs::read(&data).unwrap();
    let word = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let features = word(&bytes, 72);
    assert!(features >> 12 & 1 == 1, "perf wrote no EVENT_DESC section");
    // The feature table follows the data section, one {offset, size} per set bit.
    let table = (word(&bytes, 40) + word(&bytes, 48)) as usize;
    let index = (features & 0xfff).count_ones() as usize;
    let section = word(&bytes, table + 16 * index) as usize;
    let attr_size = u32::from_le_bytes(bytes[section + 4..section + 8].try_into().unwrap());
    let nr_ids = section + 8 + attr_size as usize;
    bytes[nr_ids..nr_ids + 4].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    std::fs::write(dir.path().join("crafted.data"), &bytes).unwrap();
    profile_fails(
        dir.path(),
        &["crafted.data", "--binary", "prog"],
        "crafted.data is malformed: its event descriptions (EVENT_DESC): the 4294967280 ids of event 1",
    );
}

#[test]
fn perf_data_of_another_program_is_an_error() {
    let dir = TempDir::new().unwrap();
    let prog = build(dir.path(), "prog", &[]);
    let other = build(dir.path(), "other", &["-DVARIANT=7"]);
    let data = record(dir.path(), &other);
    let err = profile_fails(
        dir.path(),
        &[data.to_str().unwrap(), "--binary", prog.to_str().unwrap()],
        "no sample in",
    );
    assert!(
        err.contains("recorded from another program?") && err.contains("other"),
        "{err}"
    );
}

#[test]
fn stripped_binary_is_an_error() {
    let dir = TempDir::new().unwrap();
    let prog = build(dir.path(), "prog", &[]);
    let data = record(dir.path(), &prog);
    let stripped = build(dir.path(), "stripped", &["-s"]);
    profile_fails(
        dir.path(),
        &[
            data.to_str().unwrap(),
            "--binary",
            stripped.to_str().unwrap(),
        ],
        "no function symbols",
    );
}

#[test]
fn build_id_mismatch_is_an_error_unless_allowed() {
    let dir = TempDir::new().unwrap();
    let recorded = dir.path().join("recorded");
    std::fs::create_dir(&recorded).unwrap();
    let prog = build(&recorded, "prog", &[]);
    let data = record(dir.path(), &prog);
    // A rebuild of the same program with another constant: same name, another build-id.
    let rebuilt = build(dir.path(), "prog", &["-DVARIANT=1"]);
    let args = [
        data.to_str().unwrap(),
        "--binary",
        rebuilt.to_str().unwrap(),
    ];
    let err = profile_fails(dir.path(), &args, "build-id mismatch");
    assert!(err.contains("--allow-build-id-mismatch"), "{err}");

    let out = hottext(
        &[
            "profile",
            args[0],
            args[1],
            args[2],
            "-o",
            "p.txt",
            "--allow-build-id-mismatch",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("used anyway"), "{}", stderr(&out));
}

#[test]
fn missing_perf_data_is_an_error() {
    let dir = TempDir::new().unwrap();
    let prog = build(dir.path(), "prog", &[]);
    profile_fails(
        dir.path(),
        &["nowhere.data", "--binary", prog.to_str().unwrap()],
        "cannot read nowhere.data",
    );
}

#[test]
fn a_file_that_is_not_perf_data_is_an_error() {
    let dir = TempDir::new().unwrap();
    build(dir.path(), "prog", &[]);
    profile_fails(
        dir.path(),
        &["prog", "--binary", "prog"],
        "not a perf.data file",
    );
}
