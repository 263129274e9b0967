//! The budget as the record guard keeps it: compressed records made with zstd here, read
//! through the guard in chunks of any size.

use std::cell::RefCell;
use std::io::{Cursor, Read};
use std::rc::Rc;

use super::super::record_guard::RecordGuard;
use super::*;

fn record(record_type: u32, body: &[u8]) -> Vec<u8> {
    let mut r = record_type.to_le_bytes().to_vec();
    r.extend_from_slice(&0u16.to_le_bytes());
    r.extend_from_slice(&((HEADER + body.len()) as u16).to_le_bytes());
    r.extend_from_slice(body);
    r
}

/// `inner` compressed into records of `record_type` (COMPRESSED: 81, COMPRESSED2: 83), each
/// at most 60 000 bytes of zstd data, one zstd frame through all of them as perf writes it.
fn compressed(record_type: u32, inner: &[u8]) -> Vec<u8> {
    let mut frame = vec![0u8; zstd_safe::compress_bound(inner.len())];
    let n = zstd_safe::compress(&mut frame[..], inner, 3).unwrap();
    let mut out = Vec::new();
    for piece in frame[..n].chunks(60_000) {
        if record_type == 83 {
            let mut body = (piece.len() as u64).to_le_bytes().to_vec();
            body.extend_from_slice(piece);
            body.resize(body.len().next_multiple_of(8), 0);
            out.extend(record(83, &body));
        } else {
            out.extend(record(81, piece));
        }
    }
    out
}

/// Reads `bytes` (records from byte 8) through the guard in chunks of `chunk` bytes.
fn read_all(bytes: &[u8], chunk: usize) -> Result<usize, String> {
    let verdict = Rc::new(RefCell::new(None));
    let mut guard = RecordGuard::new(
        Cursor::new(bytes.to_vec()),
        8..bytes.len() as u64,
        false,
        Rc::clone(&verdict),
    );
    let mut buf = vec![0u8; chunk];
    let mut total = 0;
    loop {
        match guard.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => total += n,
            Err(e) => return Err(e.to_string()),
        }
    }
}

fn file(records: &[u8]) -> Vec<u8> {
    let mut bytes = vec![0u8; 8];
    bytes.extend_from_slice(records);
    bytes
}

#[test]
fn compressed_records_within_the_budget_pass_in_any_chunks() {
    let mut inner = Vec::new();
    for i in 0..5000u32 {
        inner.extend(record(9, &i.to_le_bytes().repeat(6)));
        if i % 1000 == 999 {
            inner.extend(record(FINISHED_ROUND, &[]));
        }
    }
    for record_type in [81, 83] {
        let mut records = record(9, &[1; 24]);
        records.extend(compressed(record_type, &inner));
        records.extend(record(FINISHED_ROUND, &[]));
        let bytes = file(&records);
        for chunk in [1, 7, 100, 4096, 1 << 20] {
            assert_eq!(
                read_all(&bytes, chunk),
                Ok(bytes.len()),
                "type {record_type}, chunk {chunk}"
            );
        }
    }
}

#[test]
fn an_inflated_record_smaller_than_its_header_is_refused_with_the_compressed_records_offset() {
    let mut inner = record(9, &[1; 24]);
    inner.extend_from_slice(&[9, 0, 0, 0, 0, 0, 4, 0]); // size 4
    let bytes = file(&[record(9, &[1; 24]), compressed(81, &inner)].concat());
    for chunk in [3, 4096] {
        let err = read_all(&bytes, chunk).unwrap_err();
        assert!(
            err.contains(
                "a record inflated from the COMPRESSED record at byte 40 gives its size as 4 bytes"
            ),
            "{err}"
        );
    }
}

#[test]
fn records_held_past_the_budget_are_refused() {
    // 9 million bare records with no FINISHED_ROUND between them: 72 MB inflated, but the
    // reader would hold each with its sorting entry, over a gigabyte.
    let inner = record(9, &[]).repeat(9 << 20);
    let bytes = file(&compressed(81, &inner));
    let err = read_all(&bytes, 1 << 20).unwrap_err();
    assert!(
        err.contains("the COMPRESSED record at byte 8, as it inflates, takes what reading the file holds in memory past hottext's budget of 1024 MiB"),
        "{err}"
    );
}

#[test]
fn compressed_data_that_is_not_zstd_or_longer_than_its_record_is_refused() {
    let bytes = file(&record(81, b"not zstd at all!"));
    let err = read_all(&bytes, 4096).unwrap_err();
    assert!(
        err.contains("the COMPRESSED record at byte 8 does not decompress: "),
        "{err}"
    );
    let mut body = 1000u64.to_le_bytes().to_vec();
    body.extend_from_slice(&[0; 16]);
    let bytes = file(&record(83, &body));
    let err = read_all(&bytes, 4096).unwrap_err();
    assert!(
        err.contains("the COMPRESSED2 record at byte 8 claims 1000 bytes of compressed data, but it is 32 bytes long"),
        "{err}"
    );
}

#[test]
fn records_are_named_as_perf_names_them() {
    assert_eq!(record_name(9), "SAMPLE");
    assert_eq!(record_name(71), "AUXTRACE");
    assert_eq!(record_name(81), "COMPRESSED");
    assert_eq!(record_name(63), "type-63");
}
