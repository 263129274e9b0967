//! perf.data crafted to make its reader allocate without bound (issue 34): each file is a real
//! recording with a few bytes changed, and `hottext profile` must refuse it (exit status 2, the
//! part named) under a 4 GB address-space limit, where an allocation of the sizes it claims
//! would abort the process.

mod common;
mod program;

use std::path::Path;
use std::process::Command;

use common::{perf_record, stderr};
use program::build;
use tempfile::TempDir;

/// `struct perf_file_header`'s fields used here: attribute size, attribute section, data
/// section, event types, and the feature bits.
const ATTR_SIZE_AT: usize = 16;
const ATTRS_AT: usize = 24;
const DATA_AT: usize = 40;
const EVENT_TYPES_AT: usize = 56;
const FEATURES_AT: usize = 72;
const EVENT_DESC_BIT: usize = 12;
const AUXTRACE: u32 = 71;
const COMPRESSED: u32 = 81;

fn word(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}

fn put(bytes: &mut [u8], at: usize, value: u64) {
    bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

/// A real recording of the test program, as `perf record -o FILE` writes it.
fn recording(dir: &Path) -> Vec<u8> {
    let prog = build(dir, "prog", &[]);
    std::fs::read(perf_record(dir, &prog, &["0.1"])).unwrap()
}

/// Where the feature table starts (after the data section), and how many entries it has.
fn feature_table(bytes: &[u8]) -> (usize, usize) {
    let at = (word(bytes, DATA_AT) + word(bytes, DATA_AT + 8)) as usize;
    let count = (0..4)
        .map(|i| word(bytes, FEATURES_AT + 8 * i).count_ones())
        .sum::<u32>();
    (at, count as usize)
}

/// Appends `records` to the data section, moving the feature sections after them.
fn append_records(bytes: &mut Vec<u8>, records: &[u8]) {
    let (table, count) = feature_table(bytes);
    bytes.splice(table..table, records.iter().copied());
    let grown = records.len() as u64;
    for at in std::iter::once(DATA_AT + 8).chain((0..count).map(|i| table + records.len() + 16 * i))
    {
        let value = word(bytes, at) + grown;
        put(bytes, at, value);
    }
}

/// A zstd frame of `size` bytes that inflates to about 32 768 times that: run-length blocks of
/// 128 KiB of the byte 8 (records of type 0x08080808, 2056 bytes each).
fn zstd_bomb(size: usize) -> Vec<u8> {
    const RLE_BLOCK: u32 = 1 << 1;
    const BLOCK_SIZE: u32 = 128 << 10;
    // Magic; no content size, no checksum; a 128 KiB window (exponent 7).
    let mut frame = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, 7 << 3];
    let blocks = (size - frame.len()) / 4;
    for i in 0..blocks {
        let last = u32::from(i + 1 == blocks);
        let header = last | RLE_BLOCK | BLOCK_SIZE << 3;
        frame.extend_from_slice(&header.to_le_bytes()[..3]);
        frame.push(8);
    }
    frame
}

fn record(record_type: u32, body: &[u8]) -> Vec<u8> {
    let mut r = record_type.to_le_bytes().to_vec();
    r.extend_from_slice(&0u16.to_le_bytes());
    r.extend_from_slice(&u16::try_from(8 + body.len()).unwrap().to_le_bytes());
    r.extend_from_slice(body);
    r
}

/// `hottext profile FILE` under a 4 GB address-space limit (and 120 s at most): it must exit 2
/// with `needle` in its message.
fn refused(dir: &Path, bytes: &[u8], needle: &str) {
    std::fs::write(dir.join("crafted.data"), bytes).unwrap();
    let out = Command::new("sh")
        .args(["-c", "ulimit -v 4000000 && exec timeout 120 \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_hottext"))
        .args(["profile", "crafted.data", "--binary", "prog", "-o", "p.txt"])
        .current_dir(dir)
        .output()
        .expect("cannot run sh (for ulimit) and timeout");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{:?}: {err}", out.status);
    assert!(err.contains(needle), "expected '{needle}' in: {err}");
}

#[test]
fn an_auxtrace_record_claiming_a_terabyte_is_refused_with_its_offset() {
    let dir = TempDir::new().unwrap();
    let mut bytes = recording(dir.path());
    let first = word(&bytes, DATA_AT) as usize;
    let size = u16::from_le_bytes([bytes[first + 6], bytes[first + 7]]);
    assert!(
        size >= 16,
        "the first record is too short to become AUXTRACE"
    );
    bytes[first..first + 4].copy_from_slice(&AUXTRACE.to_le_bytes());
    put(&mut bytes, first + 8, 1 << 40);
    refused(
        dir.path(),
        &bytes,
        &format!("the AUXTRACE record at byte {first} claims 1099511627776 bytes of trace"),
    );
}

#[test]
fn compressed_records_that_inflate_to_gigabytes_are_refused_with_their_offset() {
    // Three records of 64 KiB, each inflating to 2 GiB: 6 GiB for a file of 200 KB.
    let dir = TempDir::new().unwrap();
    let mut bytes = recording(dir.path());
    let (at, _) = feature_table(&bytes);
    let bomb = record(COMPRESSED, &zstd_bomb(65_000)).repeat(3);
    append_records(&mut bytes, &bomb);
    refused(
        dir.path(),
        &bytes,
        &format!("the COMPRESSED record at byte {at}, as it inflates, takes what reading the file holds in memory past hottext's budget"),
    );
}

#[test]
fn a_compressed_recording_is_read_whole_within_the_budget() {
    // The check inflates every compressed record beside the reader: a real `perf record -z`
    // must pass it, and give the same samples as perf counts.
    let dir = TempDir::new().unwrap();
    let prog = build(dir.path(), "prog", &[]);
    let data = common::perf_record_with(dir.path(), &prog, &["-g", "-z"], &["0.1"]);
    let json = common::profile_json(dir.path(), &data, "prog", "p.txt");
    let samples = json["samples"].as_u64().unwrap();
    assert!(samples > 0, "{json}");
    let report = Command::new("perf")
        .args(["report", "--stats", "-i"])
        .arg(&data)
        .output()
        .unwrap();
    let stats = String::from_utf8_lossy(&report.stdout);
    let perf_samples = stats
        .lines()
        .find_map(|l| l.trim().strip_prefix("SAMPLE events:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok());
    assert_eq!(perf_samples, Some(samples), "perf report --stats: {stats}");
}

#[test]
fn a_compressed_bomb_in_a_pipe_mode_stream_is_refused_too() {
    // `perf record -o - > file`: the records run to the end of the file, so the bomb is simply
    // appended.
    let dir = TempDir::new().unwrap();
    let prog = build(dir.path(), "prog", &[]);
    common::require_perf();
    let out = Command::new("perf")
        .args([
            "record",
            "-q",
            "-g",
            "-e",
            "cpu-clock",
            "-F",
            "4999",
            "-o",
            "-",
            "--",
        ])
        .arg(&prog)
        .arg("0.1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "perf record -o - failed: {}",
        stderr(&out)
    );
    let mut bytes = out.stdout;
    let at = bytes.len();
    bytes.extend(record(COMPRESSED, &zstd_bomb(65_000)).repeat(3));
    refused(
        dir.path(),
        &bytes,
        &format!("the COMPRESSED record at byte {at}, as it inflates,"),
    );
}

#[test]
fn feature_sections_that_overlap_are_refused() {
    // All 256 feature bits set: the real sections keep their entries, every other entry is
    // the whole 20 MB file, which the reader would copy 256 times over.
    let dir = TempDir::new().unwrap();
    let mut bytes = recording(dir.path());
    let (table, count) = feature_table(&bytes);
    let entries: Vec<[u8; 16]> = (0..count)
        .map(|i| bytes[table + 16 * i..][..16].try_into().unwrap())
        .collect();
    let bits: Vec<u64> = (0..4).map(|i| word(&bytes, FEATURES_AT + 8 * i)).collect();
    let size = 20u64 << 20;
    let mut real = entries.iter();
    let mut new_table = Vec::new();
    for bit in 0..256 {
        if bits[bit / 64] >> (bit % 64) & 1 == 1 {
            new_table.extend_from_slice(real.next().unwrap());
        } else {
            new_table.extend_from_slice(&0u64.to_le_bytes());
            new_table.extend_from_slice(&size.to_le_bytes());
        }
    }
    // The new table is longer: the real sections follow it now.
    let shift = (new_table.len() - 16 * count) as u64;
    for entry in new_table.chunks_exact_mut(16) {
        if word(entry, 8) != size {
            put(entry, 0, word(entry, 0) + shift);
        }
    }
    bytes.splice(table..table + 16 * count, new_table);
    for i in 0..4 {
        put(&mut bytes, FEATURES_AT + 8 * i, u64::MAX);
    }
    bytes.resize(size as usize, 0);
    refused(dir.path(), &bytes, "its 256 feature sections claim");
}

#[test]
fn event_id_lists_pointing_at_the_whole_file_are_refused() {
    // Without EVENT_DESC the reader takes the events from `event_types`: 2 MB of entries, each
    // the real attribute and a list of ids that is the whole file (~20 GB of ids in all).
    let dir = TempDir::new().unwrap();
    let mut bytes = recording(dir.path());
    assert!(
        word(&bytes, FEATURES_AT) >> EVENT_DESC_BIT & 1 == 1,
        "perf wrote no EVENT_DESC"
    );
    let features = word(&bytes, FEATURES_AT) & !(1 << EVENT_DESC_BIT);
    put(&mut bytes, FEATURES_AT, features);
    let attr_size = word(&bytes, ATTR_SIZE_AT) as usize;
    let attr_at = word(&bytes, ATTRS_AT) as usize;
    let attr = bytes[attr_at..attr_at + attr_size].to_vec();
    let entry = attr_size + 16;
    let entries = (2 << 20) / entry;
    let at = bytes.len();
    let size = (at + entries * entry) as u64;
    for _ in 0..entries {
        bytes.extend_from_slice(&attr);
        bytes.extend_from_slice(&0u64.to_le_bytes());
        bytes.extend_from_slice(&size.to_le_bytes());
    }
    put(&mut bytes, EVENT_TYPES_AT, at as u64);
    put(&mut bytes, EVENT_TYPES_AT + 8, (entries * entry) as u64);
    refused(
        dir.path(),
        &bytes,
        &format!("the sample id lists of its {entries} events (event_types) claim"),
    );
}
