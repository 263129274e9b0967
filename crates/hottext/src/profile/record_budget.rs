//! The memory that reading perf.data's records will take, checked against a budget before
//! linux-perf-data takes it. The crate holds every record it has read until a `FINISHED_ROUND`
//! record tells it that their order is settled (two rounds at most), and it inflates each
//! zstd-compressed record whole into one buffer, which it keeps for the rest of the file. A
//! compressed record of 64 KiB can inflate to 2 GiB (zstd's run-length blocks), so a few of them
//! in a file of a megabyte would ask for more memory than the machine has: an abort, not an
//! error. [`RecordBudget`] follows the same records as they pass the record guard, inflates the
//! compressed ones itself in small chunks (walking the records inside them and keeping none), and
//! refuses the first record that takes the total past [`MEMORY_BUDGET`], naming it. The two zstd
//! decoders (the crate's and this one) cost at most 128 MiB each beside it: zstd refuses a frame
//! whose window is larger (its default `windowLogMax` of 27).

use linux_perf_data::linux_perf_event_reader::RecordType;
use linux_perf_data::UserRecordType;
use zstd_safe::{DCtx, InBuffer, OutBuffer};

/// What linux-perf-data may hold while hottext reads one perf.data file. perf's own rounds are one
/// pass over its ring buffers (512 KiB per CPU by default), so a real recording stays far below.
#[cfg(not(fuzzing))]
pub(crate) const MEMORY_BUDGET: u64 = 1 << 30;
/// Under the fuzzer a quarter of it: `make fuzz` limits a run to 2 GB of RSS, so an allocation
/// this accounting misses shows as a failure with room to spare for AddressSanitizer's own.
#[cfg(fuzzing)]
pub(crate) const MEMORY_BUDGET: u64 = 1 << 28;
/// What one held record costs besides its body: its sort key and entry in the crate's sorter
/// (80 bytes, in a queue that grows by doubling) and the allocator's header of its buffer.
/// Measured: 7 million bare records inflated from compressed ones, read in one round, took
/// 1.13 GB of RSS in all, 160 bytes each.
const RECORD_COST: u64 = 160;
/// A record's header, and the most a record can span (its size is 16 bits): the crate carries an
/// inner record cut at the end of one compressed record over to the next.
const HEADER: usize = 8;
const LARGEST_RECORD: u64 = 1 << 16;
/// The chunks this walk inflates into: small, so that a bomb costs time, not memory.
const INFLATE_CHUNK: usize = 1 << 16;
/// `PERF_RECORD_FINISHED_ROUND`.
const FINISHED_ROUND: u32 = 68;

pub(super) struct RecordBudget {
    big_endian: bool,
    /// Bytes held for the records of the round before this one, and of this one so far.
    held_before: u64,
    held: u64,
    /// The most one compressed record has inflated to so far: the crate keeps a buffer that
    /// size (and up to twice that, as it grew by doubling).
    largest_inflation: u64,
    /// The compressed record being fed, if any.
    compressed: Option<Compressed>,
    /// One zstd stream runs through all the compressed records of a file.
    inflater: Option<DCtx<'static>>,
    chunk: Vec<u8>,
    /// The record inside the compressed stream being walked: the bytes of its header seen so
    /// far, and the bytes of its body still to skip.
    inner_header: [u8; HEADER],
    inner_header_len: usize,
    inner_skip: u64,
}

/// A compressed record: where it starts, its type's name, and what it inflated to so far.
struct Compressed {
    at: u64,
    name: String,
    inflated: u64,
}

impl RecordBudget {
    pub fn new(big_endian: bool) -> Self {
        RecordBudget {
            big_endian,
            held_before: 0,
            held: 0,
            largest_inflation: 0,
            compressed: None,
            inflater: None,
            chunk: Vec::new(),
            inner_header: [0; HEADER],
            inner_header_len: 0,
            inner_skip: 0,
        }
    }

    /// The reader went back to the first record: it reads them all again, from nothing.
    pub(crate) fn restart(&mut self) {
        *self = RecordBudget::new(self.big_endian);
    }

    /// A record outside any compressed one, at byte `at`, whose body (an AUXTRACE record's trace
    /// included) is `body` bytes. A compressed record is announced here and then fed with
    /// [`RecordBudget::inflate`].
    pub fn record(&mut self, record_type: u32, at: u64, body: u64) -> Result<(), String> {
        self.compressed = None;
        match record_type {
            FINISHED_ROUND => {
                self.held_before = self.held;
                self.held = 0;
                Ok(())
            }
            t if is_compressed(t) => {
                self.compressed = Some(Compressed {
                    at,
                    name: record_name(t),
                    inflated: 0,
                });
                Ok(())
            }
            t => {
                self.held = self.held.saturating_add(body).saturating_add(RECORD_COST);
                self.check(|| format!("the {} record at byte {at}", record_name(t)))
            }
        }
    }

    /// Feeds the next compressed bytes of the compressed record announced last: inflates them a
    /// chunk at a time and walks the records inside.
    pub fn inflate(&mut self, data: &[u8]) -> Result<(), String> {
        let Some(compressed) = self.compressed.as_ref() else {
            return Ok(());
        };
        let (at, name) = (compressed.at, compressed.name.clone());
        let mut inflater = self.inflater.take().unwrap_or_else(DCtx::create);
        let mut chunk = std::mem::take(&mut self.chunk);
        chunk.resize(INFLATE_CHUNK, 0);
        let fed = self.inflate_with(&mut inflater, &mut chunk, data, at, &name);
        self.inflater = Some(inflater);
        self.chunk = chunk;
        fed
    }

    fn inflate_with(
        &mut self,
        inflater: &mut DCtx<'static>,
        chunk: &mut [u8],
        data: &[u8],
        at: u64,
        name: &str,
    ) -> Result<(), String> {
        let mut input = InBuffer::around(data);
        loop {
            let mut output = OutBuffer::around(&mut chunk[..]);
            inflater
                .decompress_stream(&mut output, &mut input)
                .map_err(|code| {
                    format!(
                        "the {name} record at byte {at} does not decompress: {}",
                        zstd_safe::get_error_name(code)
                    )
                })?;
            let produced = output.pos();
            self.walk_inner(&chunk[..produced], at, name)?;
            if let Some(c) = self.compressed.as_mut() {
                c.inflated += produced as u64;
                self.largest_inflation = self.largest_inflation.max(c.inflated);
            }
            self.check(|| format!("the {name} record at byte {at}, as it inflates,"))?;
            if input.pos() == data.len() && produced < INFLATE_CHUNK {
                return Ok(());
            }
        }
    }

    /// Walks the records in `bytes`, the next inflated bytes of the compressed record at `at`.
    fn walk_inner(&mut self, mut bytes: &[u8], at: u64, name: &str) -> Result<(), String> {
        while !bytes.is_empty() {
            if self.inner_skip > 0 {
                let skip = self.inner_skip.min(bytes.len() as u64);
                self.inner_skip -= skip;
                bytes = &bytes[skip as usize..];
                continue;
            }
            let take = (HEADER - self.inner_header_len).min(bytes.len());
            self.inner_header[self.inner_header_len..][..take].copy_from_slice(&bytes[..take]);
            self.inner_header_len += take;
            bytes = &bytes[take..];
            if self.inner_header_len < HEADER {
                break;
            }
            self.inner_header_len = 0;
            let size = super::perf_bytes::uint_at(&self.inner_header, 6, 2, self.big_endian);
            if size < HEADER as u64 {
                return Err(format!(
                    "a record inflated from the {name} record at byte {at} gives its size as {size} bytes, less than its own header"
                ));
            }
            self.inner_skip = size - HEADER as u64;
            // Every inflated record is held, FINISHED_ROUND too: the crate ends rounds only at
            // records outside the compressed ones.
            self.held = self.held.saturating_add(self.inner_skip + RECORD_COST);
        }
        Ok(())
    }

    /// Refuses when the records held, with the crate's inflation buffer, pass the budget.
    fn check(&self, what: impl Fn() -> String) -> Result<(), String> {
        let inflation_buffer = 2 * (self.largest_inflation + LARGEST_RECORD);
        let total = (self.held_before + self.held).saturating_add(inflation_buffer);
        if total <= MEMORY_BUDGET {
            return Ok(());
        }
        Err(format!(
            "{} takes what reading the file holds in memory past hottext's budget of {} MiB \
             ({} MiB of records since the last FINISHED_ROUND record and the round before it, \
             {} MiB inflated from one compressed record): a crafted or damaged file",
            what(),
            MEMORY_BUDGET >> 20,
            (self.held_before + self.held) >> 20,
            self.largest_inflation >> 20
        ))
    }
}

pub(super) fn is_compressed(record_type: u32) -> bool {
    let t = UserRecordType::try_from(RecordType(record_type));
    t == Some(UserRecordType::PERF_COMPRESSED) || t == Some(UserRecordType::PERF_COMPRESSED2)
}

/// Whether the record's compressed data starts with its length (`PERF_RECORD_COMPRESSED2`,
/// whose body is padded to 8 bytes) rather than filling the body.
pub(super) fn has_data_size(record_type: u32) -> bool {
    UserRecordType::try_from(RecordType(record_type)) == Some(UserRecordType::PERF_COMPRESSED2)
}

/// perf's name of a record type, without its `PERF_RECORD_` prefix (`SAMPLE`, `AUXTRACE`), or
/// its number.
pub(super) fn record_name(record_type: u32) -> String {
    let t = RecordType(record_type);
    let name = match UserRecordType::try_from(t) {
        Some(user) => format!("{user:?}").trim_matches('"').to_string(),
        None => format!("{t:?}"),
    };
    match name.strip_prefix("PERF_") {
        Some(known) => known.to_string(),
        None if name.contains(' ') => format!("type-{record_type}"),
        None => name,
    }
}

#[cfg(test)]
#[path = "record_budget_tests.rs"]
mod tests;
