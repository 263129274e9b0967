//! Follows the records of perf.data as linux-perf-data reads them, to refuse an `AUXTRACE`
//! record whose trace claims more bytes than the file has. The crate sizes its buffer for the
//! trace from the record's own `size` field before reading it: a crafted size would be an
//! allocation of terabytes, which aborts the process instead of returning an error. Every other
//! record is at most 64 KiB (its header's size is 16 bits).
//!
//! It also keeps the memory budget of [`super::record_budget`]: it tells the budget of every
//! record and feeds it the bytes of compressed ones, before the crate has them whole.
//!
//! It also refuses a stream that ends inside a record: in pipe mode the crate takes any end of
//! the stream for its end, so a pipe-mode file cut short would pass for a complete one.
//!
//! The guard sits under the crate's buffered reader and sees the file in the chunks it is read
//! in; it keeps the position of the next record header, reading each header as it passes.

use std::cell::RefCell;
use std::io::{self, Read, Seek, SeekFrom};
use std::ops::Range;
use std::rc::Rc;

use super::record_budget::{has_data_size, is_compressed, record_name, RecordBudget};

/// `struct perf_event_header`, and the size field that opens the body of an `AUXTRACE` record
/// (its trace's) and of a `COMPRESSED2` record (its data's).
const HEADER: usize = 8;
const WITH_SIZE_FIELD: usize = 16;
/// `PERF_RECORD_AUXTRACE`.
const AUXTRACE: u32 = 71;

/// Why the guard stopped the reading, for the error the caller reports.
pub(super) type StopReason = Rc<RefCell<Option<String>>>;

pub(super) struct RecordGuard<R> {
    inner: R,
    /// Where the records lie in the file (the data section, or a pipe-mode stream after its
    /// header).
    records: Range<u64>,
    big_endian: bool,
    /// Position of the inner reader.
    position: u64,
    /// Where the next record starts, and the bytes of it seen so far.
    next: u64,
    seen: [u8; WITH_SIZE_FIELD],
    seen_len: usize,
    /// Where the last record whose header was read starts.
    last_start: u64,
    /// The record stream was left (a seek elsewhere): nothing is checked until it is entered at
    /// its start again.
    lost: bool,
    verdict: StopReason,
    budget: RecordBudget,
    /// The bytes of the compressed record that the budget has still to see.
    compressed: Option<Range<u64>>,
}

impl<R> RecordGuard<R> {
    pub fn new(inner: R, records: Range<u64>, big_endian: bool, verdict: StopReason) -> Self {
        RecordGuard {
            inner,
            next: records.start,
            last_start: records.start,
            records,
            big_endian,
            position: 0,
            seen: [0; WITH_SIZE_FIELD],
            seen_len: 0,
            lost: false,
            verdict,
            budget: RecordBudget::new(big_endian),
            compressed: None,
        }
    }

    /// Walks the record headers in `chunk`, read at `start`, and feeds the bytes of compressed
    /// records to the budget.
    fn follow(&mut self, chunk: &[u8], start: u64) -> Result<(), String> {
        let end = start + chunk.len() as u64;
        while !self.lost && self.feed_compressed(chunk, start)? && self.next < self.records.end {
            let want = self.next + self.seen_len as u64;
            if want < start {
                self.lost = true; // bytes were skipped: the guard cannot follow
                break;
            }
            if want >= end {
                break;
            }
            let at = (want - start) as usize;
            let need = if self.seen_len < HEADER {
                HEADER
            } else {
                WITH_SIZE_FIELD
            };
            let take = (need - self.seen_len).min(chunk.len() - at);
            self.seen[self.seen_len..self.seen_len + take].copy_from_slice(&chunk[at..at + take]);
            self.seen_len += take;
            if self.seen_len < need {
                break; // the rest comes with the next chunk
            }
            self.last_start = self.next;
            let record_type = self.uint(0, 4) as u32;
            let size = self.uint(6, 2);
            if size < HEADER as u64 {
                self.lost = true; // the crate reports it
                break;
            }
            let sized = record_type == AUXTRACE || has_data_size(record_type);
            if sized && self.seen_len < WITH_SIZE_FIELD {
                if size < WITH_SIZE_FIELD as u64 {
                    return Err(format!(
                        "the {} record at byte {} is {size} bytes, too short for the size field it starts with",
                        record_name(record_type),
                        self.next
                    ));
                }
                continue; // read the size field first
            }
            let (mut extent, mut body) = (size, size - HEADER as u64);
            let mut compressed = self.next + HEADER as u64..self.next + size;
            if record_type == AUXTRACE {
                let trace = self.uint(HEADER, 8);
                extent = size.saturating_add(trace);
                body = body.saturating_add(trace);
                if self.next.saturating_add(extent) > self.records.end {
                    return Err(format!(
                        "the AUXTRACE record at byte {} claims {trace} bytes of trace, but the records end at byte {}",
                        self.next, self.records.end
                    ));
                }
            } else if has_data_size(record_type) {
                let data = self.uint(HEADER, 8);
                if data > size - WITH_SIZE_FIELD as u64 {
                    return Err(format!(
                        "the {} record at byte {} claims {data} bytes of compressed data, but it is {size} bytes long",
                        record_name(record_type),
                        self.next
                    ));
                }
                compressed =
                    self.next + WITH_SIZE_FIELD as u64..self.next + WITH_SIZE_FIELD as u64 + data;
            }
            self.budget.record(record_type, self.next, body)?;
            if is_compressed(record_type) {
                self.compressed = Some(compressed);
            }
            self.next += extent;
            self.seen_len = 0;
        }
        Ok(())
    }

    /// Feeds the budget the bytes in `chunk` (read at `start`) of the compressed record the
    /// headers led to; true once it has them all (or there is none), false when the rest comes
    /// with the next chunk.
    fn feed_compressed(&mut self, chunk: &[u8], start: u64) -> Result<bool, String> {
        let Some(pending) = self.compressed.clone() else {
            return Ok(true);
        };
        let end = start + chunk.len() as u64;
        if pending.start < start {
            self.lost = true; // bytes were skipped: the guard cannot follow
            return Ok(false);
        }
        let upto = pending.end.min(end);
        if pending.start < upto {
            let slice = &chunk[(pending.start - start) as usize..(upto - start) as usize];
            self.budget.inflate(slice)?;
        }
        if upto == pending.end {
            self.compressed = None;
            return Ok(true);
        }
        self.compressed = Some(upto.max(pending.start)..pending.end);
        Ok(false)
    }

    fn uint(&self, at: usize, width: usize) -> u64 {
        let bytes = &self.seen[at..at + width];
        let push = |value: u64, &byte: &u8| value << 8 | u64::from(byte);
        if self.big_endian {
            bytes.iter().fold(0, push)
        } else {
            bytes.iter().rev().fold(0, push)
        }
    }
}

impl<R: Read> Read for RecordGuard<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(why) = self.verdict.borrow().as_ref() {
            return Err(io::Error::new(io::ErrorKind::InvalidData, why.clone()));
        }
        let n = self.inner.read(buf)?;
        let inside_a_record = self.seen_len > 0 || self.next > self.position;
        if n == 0 && !buf.is_empty() && !self.lost && inside_a_record {
            let record = if self.seen_len > 0 {
                self.next
            } else {
                self.last_start
            };
            let why = format!(
                "it ends at byte {}, inside the record at byte {record}: was it copied before perf finished writing it?",
                self.position
            );
            *self.verdict.borrow_mut() = Some(why.clone());
            return Err(io::Error::new(io::ErrorKind::InvalidData, why));
        }
        let start = self.position;
        self.position += n as u64;
        if let Err(why) = self.follow(&buf[..n], start) {
            *self.verdict.borrow_mut() = Some(why.clone());
            return Err(io::Error::new(io::ErrorKind::InvalidData, why));
        }
        Ok(n)
    }
}

impl<R: Seek> Seek for RecordGuard<R> {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.position = self.inner.seek(pos)?;
        if self.position == self.records.start {
            self.next = self.records.start;
            self.seen_len = 0;
            self.lost = false;
            self.budget.restart();
            self.compressed = None;
        } else if self.position != self.next + self.seen_len as u64 {
            self.lost = true;
        }
        Ok(self.position)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;

    fn record(record_type: u32, body: &[u8]) -> Vec<u8> {
        let mut r = record_type.to_le_bytes().to_vec();
        r.extend_from_slice(&0u16.to_le_bytes());
        r.extend_from_slice(&((HEADER + body.len()) as u16).to_le_bytes());
        r.extend_from_slice(body);
        r
    }

    /// Reads `bytes` (records from byte 4) through the guard in chunks of `chunk` bytes.
    fn read_all(bytes: &[u8], chunk: usize) -> Result<usize, String> {
        let verdict = StopReason::default();
        let mut guard = RecordGuard::new(
            Cursor::new(bytes.to_vec()),
            4..bytes.len() as u64,
            false,
            Rc::clone(&verdict),
        );
        let mut buf = vec![0u8; chunk];
        let mut total = 0;
        loop {
            match guard.read(&mut buf) {
                Ok(0) => return Ok(total),
                Ok(n) => total += n,
                Err(e) => {
                    assert_eq!(verdict.borrow().as_deref(), Some(e.to_string().as_str()));
                    return Err(e.to_string());
                }
            }
        }
    }

    fn auxtrace(trace: u64) -> Vec<u8> {
        let mut body = trace.to_le_bytes().to_vec();
        body.extend_from_slice(&[0u8; 32]);
        record(AUXTRACE, &body)
    }

    #[test]
    fn a_trace_within_the_file_passes_in_any_chunks() {
        let mut bytes = vec![0u8; 4];
        bytes.extend(record(9, &[1; 24]));
        bytes.extend(auxtrace(100));
        bytes.extend(vec![7u8; 100]);
        bytes.extend(record(68, &[])); // FINISHED_ROUND: a bare header
        bytes.extend(record(9, &[2; 8]));
        for chunk in [1, 3, 7, 16, 64, 4096] {
            assert_eq!(read_all(&bytes, chunk), Ok(bytes.len()), "chunk {chunk}");
        }
    }

    #[test]
    fn a_stream_that_ends_inside_a_record_is_refused() {
        let mut bytes = vec![0u8; 4];
        bytes.extend(record(9, &[1; 24]));
        bytes.extend(record(9, &[2; 24]));
        for cut in [bytes.len() - 1, bytes.len() - 30] {
            for chunk in [1, 7, 4096] {
                let err = read_all(&bytes[..cut], chunk).unwrap_err();
                assert!(
                    err.contains(&format!(
                        "it ends at byte {cut}, inside the record at byte 36"
                    )),
                    "{err}"
                );
            }
        }
    }

    #[test]
    fn a_trace_past_the_end_is_refused_with_its_offset() {
        let mut bytes = vec![0u8; 4];
        bytes.extend(record(9, &[1; 24]));
        bytes.extend(auxtrace(1 << 40));
        for chunk in [1, 5, 4096] {
            let err = read_all(&bytes, chunk).unwrap_err();
            assert!(
                err.contains("AUXTRACE record at byte 36 claims 1099511627776 bytes"),
                "{err}"
            );
        }
    }
}
