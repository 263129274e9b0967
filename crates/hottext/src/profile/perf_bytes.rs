//! Reading a perf.data file's bytes: integers in the file's byte order, and whole reads. Shared
//! by the header, its feature sections and the pipe-mode header, which read the same way.

use std::fs::File;
use std::io::{self, Read};

/// The 8-byte unsigned integer at `at`, in the file's byte order; 0 when the bytes are not
/// all there.
pub(super) fn u64_at(bytes: &[u8], at: usize, big_endian: bool) -> u64 {
    uint_at(bytes, at, 8, big_endian)
}

/// The unsigned integer of `width` bytes (at most 8) at `at`, in the file's byte order; 0 when
/// the bytes are not all there.
pub(super) fn uint_at(bytes: &[u8], at: usize, width: usize, big_endian: bool) -> u64 {
    let Some(b) = bytes.get(at..at + width) else {
        return 0;
    };
    let push = |value: u64, &byte: &u8| value << 8 | u64::from(byte);
    if big_endian {
        b.iter().fold(0, push)
    } else {
        b.iter().rev().fold(0, push)
    }
}

/// Reads until `buf` is full or the file ends (a short read is not the end), and says how
/// many bytes came.
pub(super) fn read_up_to(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read(&mut buf[got..])? {
            0 => break,
            n => got += n,
        }
    }
    Ok(got)
}
