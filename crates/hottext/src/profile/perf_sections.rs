//! The parts of a perf.data file that linux-perf-data reads whole before the first record: the
//! feature sections, and the descriptions of the events with their lists of sample ids. The crate
//! allocates for each what its size or count says, so each is checked here first: against the
//! file's size one by one (a section past the end), and all together (sections that overlap, so
//! that a file of 20 MB would be read 256 times over), and against the memory budget.

use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::ops::Range;
use std::path::Path;

use super::perf_bytes::{read_up_to, u64_at, uint_at};
use super::record_budget::MEMORY_BUDGET;
use super::ProfileError;

/// A feature section's `{offset, size}` in the table after the data section.
const FEATURE_ENTRY_SIZE: usize = 16;
/// `perf_event_attr` is at least `PERF_ATTR_SIZE_VER0` bytes; perf has grown it to 136 so far,
/// and the limit leaves it room to grow while refusing nonsense. An attribute of at least 64
/// bytes also bounds the crate's parsed copy of each (about 200 bytes) by the bytes it came from.
const ATTR_SIZE: std::ops::RangeInclusive<u64> = 64..=4096;
/// The feature bits of `HEADER_EVENT_DESC` (the events, their names and sample ids) and of
/// simpleperf's meta information (which sends the crate to the ids in the attribute section).
pub(super) const EVENT_DESC_BIT: u32 = 12;
const SIMPLEPERF_META_INFO_BIT: u32 = 128;
/// An `{offset, size}` pair: where an event's list of sample ids lies.
const ID_LIST_ENTRY: u64 = 16;
/// What one sample id costs the reader: 8 bytes in its event's list, and an entry in its map
/// from id to event (16 bytes and a control byte, in a table at most 7/8 full that doubles).
const ID_COST: u64 = 48;

/// What the file's header says of the sections: the size of an event attribute, where the
/// attributes and the (old) event types lie, and the feature bits.
pub(super) struct HeaderSections {
    pub attr_size: u64,
    pub attrs: Range<u64>,
    pub event_types: Range<u64>,
    pub features: [u64; 4],
}

impl HeaderSections {
    fn has(&self, bit: u32) -> bool {
        self.features[(bit / 64) as usize] >> (bit % 64) & 1 == 1
    }

    /// Where feature `bit`'s entry is in the table: one entry per set bit, in bit order.
    fn table_index(&self, bit: u32) -> usize {
        let (word, bit) = ((bit / 64) as usize, bit % 64);
        let before: u32 = self.features[..word].iter().map(|w| w.count_ones()).sum();
        (before + (self.features[word] & ((1u64 << bit) - 1)).count_ones()) as usize
    }
}

/// The file being checked.
pub(super) struct Sections<'a> {
    pub path: &'a Path,
    pub file: &'a mut File,
    pub size: u64,
    pub big_endian: bool,
}

impl Sections<'_> {
    /// Checks the feature table at `table_at` (right after the data section), the sections it
    /// points at, and the event descriptions the crate will read.
    pub fn check(&mut self, header: &HeaderSections, table_at: u64) -> Result<(), ProfileError> {
        let table = self.feature_table(header, table_at)?;
        let attr_size = header.attr_size;
        if !ATTR_SIZE.contains(&attr_size) {
            return Err(self.malformed(format!(
                "its header gives {attr_size} bytes per event attribute; perf writes {} to {}",
                ATTR_SIZE.start(),
                ATTR_SIZE.end()
            )));
        }
        // The crate takes the events from EVENT_DESC, else from `event_types`, else (simpleperf)
        // from the attributes with their ids, else from the attributes alone: check the one it
        // will read.
        if header.has(EVENT_DESC_BIT) {
            let entry = &table[header.table_index(EVENT_DESC_BIT) * FEATURE_ENTRY_SIZE..];
            let (at, len) = (self.u64(entry, 0), self.u64(entry, 8));
            let section = self.read(at, len)?; // within the file and the budget: checked above
            check_event_desc(&section, self.big_endian).map_err(|msg| {
                self.malformed(format!("its event descriptions (EVENT_DESC): {msg}"))
            })?;
        } else if !header.event_types.is_empty() {
            let list = attr_size + ID_LIST_ENTRY;
            self.check_id_lists("event_types", header.event_types.clone(), list, attr_size)?;
        } else if header.has(SIMPLEPERF_META_INFO_BIT) {
            // simpleperf counts the ids' {offset, size} in its attribute size.
            let ids_at = attr_size - ID_LIST_ENTRY;
            self.check_id_lists("attributes", header.attrs.clone(), attr_size, ids_at)?;
        }
        Ok(())
    }

    /// Reads the feature table and checks that every section lies within the file, and that
    /// all of them together fit in it and in the budget.
    fn feature_table(
        &mut self,
        header: &HeaderSections,
        table_at: u64,
    ) -> Result<Vec<u8>, ProfileError> {
        let count: u32 = header.features.iter().map(|w| w.count_ones()).sum();
        let table = self.read(table_at, u64::from(count) * FEATURE_ENTRY_SIZE as u64)?;
        let mut total = 0u64;
        for entry in table.chunks_exact(FEATURE_ENTRY_SIZE) {
            let (at, len) = (self.u64(entry, 0), self.u64(entry, 8));
            if at.saturating_add(len) > self.size {
                return Err(self.truncated(at.saturating_add(len)));
            }
            total += len; // each is at most the file's size: no overflow in 256 of them
        }
        self.within_file_and_budget(total, &format!("its {count} feature sections"))?;
        Ok(table)
    }

    /// Checks the `{offset, size}` of each event's sample ids in `section` (entries of `entry`
    /// bytes, the pair at `ids_at` in each): within the file, and all together too.
    fn check_id_lists(
        &mut self,
        name: &str,
        section: Range<u64>,
        entry: u64,
        ids_at: u64,
    ) -> Result<(), ProfileError> {
        if section.end > self.size {
            return Err(self.truncated(section.end));
        }
        let entries = (section.end - section.start) / entry;
        let mut total = 0u64;
        for i in 0..entries {
            let pair = self.read(section.start + i * entry + ids_at, ID_LIST_ENTRY)?;
            let (at, len) = (self.u64(&pair, 0), self.u64(&pair, 8));
            if at.saturating_add(len) > self.size {
                return Err(self.truncated(at.saturating_add(len)));
            }
            total = total.saturating_add(len);
        }
        let what = format!("the sample id lists of its {entries} events ({name})");
        self.within_file_and_budget(total, &what)?;
        ids_within_budget(total / 8).map_err(|msg| self.malformed(format!("{what}: {msg}")))
    }

    /// Refuses parts that claim, together, more bytes than the file has (so they overlap, and
    /// the crate would read the same bytes many times over) or than the budget allows.
    fn within_file_and_budget(&self, total: u64, what: &str) -> Result<(), ProfileError> {
        if total > self.size {
            return Err(self.malformed(format!(
                "{what} claim {total} bytes in all, more than the {} bytes of the whole file: they overlap",
                self.size
            )));
        }
        if total > MEMORY_BUDGET {
            return Err(self.malformed(format!(
                "{what} claim {total} bytes in all, past hottext's budget of {} MiB for reading perf.data",
                MEMORY_BUDGET >> 20
            )));
        }
        Ok(())
    }

    /// `len` bytes at `at`, which the caller knows to lie within the file (and the budget).
    fn read(&mut self, at: u64, len: u64) -> Result<Vec<u8>, ProfileError> {
        let mut bytes = vec![0u8; len as usize];
        let io_err = |source| ProfileError::Io {
            path: self.path.into(),
            source,
        };
        self.file.seek(SeekFrom::Start(at)).map_err(io_err)?;
        if read_up_to(self.file, &mut bytes).map_err(io_err)? < bytes.len() {
            return Err(self.truncated(at + len));
        }
        Ok(bytes)
    }

    fn u64(&self, bytes: &[u8], at: usize) -> u64 {
        u64_at(bytes, at, self.big_endian)
    }

    fn truncated(&self, expected: u64) -> ProfileError {
        ProfileError::Truncated {
            path: self.path.into(),
            size: self.size,
            expected: Some(expected),
        }
    }

    fn malformed(&self, msg: String) -> ProfileError {
        ProfileError::Malformed {
            path: self.path.into(),
            msg,
        }
    }
}

/// Walks `HEADER_EVENT_DESC`: `nr` and `attr_size`, then per event the attribute, `nr_ids`,
/// a length-prefixed name and `nr_ids` ids. Says which count the section cannot hold.
pub(super) fn check_event_desc(section: &[u8], big_endian: bool) -> Result<(), String> {
    let mut rest = section;
    let mut take = |n: u64, what: &dyn Fn() -> String| -> Result<&[u8], String> {
        if n > rest.len() as u64 {
            return Err(format!(
                "{}: {n} bytes, but only {} are left in the section",
                what(),
                rest.len()
            ));
        }
        let (head, tail) = rest.split_at(n as usize);
        rest = tail;
        Ok(head)
    };
    let u32_of = |b: &[u8]| uint_at(b, 0, 4, big_endian);
    let events = u32_of(take(4, &|| "the number of events".into())?);
    let attr_size = u32_of(take(4, &|| "the attribute size".into())?);
    if !ATTR_SIZE.contains(&attr_size) {
        return Err(format!(
            "it gives {attr_size} bytes per event attribute; perf writes {} to {}",
            ATTR_SIZE.start(),
            ATTR_SIZE.end()
        ));
    }
    let mut all_ids = 0;
    for i in 0..events {
        let event = || format!("event {} of {events}", i + 1);
        take(attr_size, &|| format!("the attribute of {}", event()))?;
        let ids = u32_of(take(4, &|| format!("the id count of {}", event()))?);
        let name = u32_of(take(4, &|| format!("the name length of {}", event()))?);
        take(name, &|| format!("the name of {}", event()))?;
        take(ids * 8, &|| format!("the {ids} ids of {}", event()))?;
        all_ids += ids;
    }
    ids_within_budget(all_ids)
}

/// Refuses more sample ids than the reader can index within the budget (a real recording has
/// one per event and CPU, or per event and thread: thousands).
pub(super) fn ids_within_budget(ids: u64) -> Result<(), String> {
    if ids.saturating_mul(ID_COST) <= MEMORY_BUDGET {
        return Ok(());
    }
    Err(format!(
        "{ids} sample ids would take {} MiB to index, past hottext's budget of {} MiB for reading perf.data",
        ids.saturating_mul(ID_COST) >> 20,
        MEMORY_BUDGET >> 20
    ))
}

#[cfg(test)]
mod tests {
    use super::super::perf_header::tests::{check, header};

    /// A file whose feature bits are `bits` (the first word), each section `{at, len}`.
    fn with_features(bits: u64, sections: &[(u64, u64)], file_size: usize) -> Vec<u8> {
        let mut bytes = header(b"PERFILE2", 104, 104, 8);
        bytes[72..80].copy_from_slice(&bits.to_le_bytes());
        bytes.resize(112, 0);
        for (at, len) in sections {
            bytes.extend_from_slice(&at.to_le_bytes());
            bytes.extend_from_slice(&len.to_le_bytes());
        }
        bytes.resize(file_size, 0);
        bytes
    }

    #[test]
    fn overlapping_feature_sections_are_malformed() {
        // Three sections (bits 2 to 4) each within the file, but each the whole of it.
        let bytes = with_features(0b11100, &[(0, 4096), (0, 4096), (0, 4096)], 4096);
        let err = check(&bytes).unwrap_err().to_string();
        assert!(
            err.contains("its 3 feature sections claim 12288 bytes in all, more than the 4096 bytes of the whole file: they overlap"),
            "{err}"
        );
        // Side by side they pass.
        let bytes = with_features(0b11100, &[(200, 100), (300, 100), (400, 100)], 4096);
        assert!(check(&bytes).is_ok());
    }

    #[test]
    fn event_id_lists_that_overlap_are_malformed() {
        // Old-style `event_types`: 40 entries (attribute, then {offset, size} of its ids), each
        // list the whole file.
        let entries = 40u64;
        let mut bytes = header(b"PERFILE2", 104, 104, 8);
        bytes.resize(112, 0);
        let at = bytes.len() as u64;
        let size = at + entries * 144;
        for _ in 0..entries {
            bytes.extend_from_slice(&[0u8; 128]);
            bytes.extend_from_slice(&0u64.to_le_bytes());
            bytes.extend_from_slice(&size.to_le_bytes());
        }
        bytes[56..64].copy_from_slice(&at.to_le_bytes());
        bytes[64..72].copy_from_slice(&(entries * 144).to_le_bytes());
        let err = check(&bytes).unwrap_err().to_string();
        assert!(
            err.contains("the sample id lists of its 40 events (event_types) claim"),
            "{err}"
        );
        assert!(err.contains("they overlap"), "{err}");
    }

    #[test]
    fn more_sample_ids_than_the_budget_indexes_are_refused() {
        assert!(super::ids_within_budget(100_000).is_ok());
        let err = super::ids_within_budget(30_000_000).unwrap_err();
        assert!(
            err.contains("30000000 sample ids would take 1373 MiB to index"),
            "{err}"
        );
    }

    #[test]
    fn an_event_desc_with_tiny_attributes_is_malformed() {
        // With 0-byte attributes an event costs the section 8 bytes and the reader ~200.
        let mut section = 1000u32.to_le_bytes().to_vec();
        section.extend_from_slice(&0u32.to_le_bytes());
        section.resize(8 + 8 * 1000, 0);
        let mut bytes = with_features(1 << 12, &[(128, section.len() as u64)], 128);
        bytes.extend_from_slice(&section);
        let err = check(&bytes).unwrap_err().to_string();
        assert!(
            err.contains("EVENT_DESC): it gives 0 bytes per event attribute"),
            "{err}"
        );
    }
}
