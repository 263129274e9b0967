//! Checks of a perf.data file before linux-perf-data parses it. That crate reads the header's
//! sections whole and trusts their counts: a file cut short (copied while perf was writing,
//! `head -c`) would be a bare I/O error, and a crafted count an allocation of hundreds of
//! gigabytes, which aborts the process instead of returning an error. Every size and count it
//! will act on is checked here against the file's size first.

use std::fs::File;
use std::ops::Range;
use std::path::Path;

use super::perf_bytes::{read_up_to, u64_at};
use super::perf_sections::{HeaderSections, Sections};
use super::pipe_header::{check_pipe_records, PIPE_HEADER_SIZE};
use super::ProfileError;

/// `struct perf_file_header`: magic, size, attr_size, attrs, data, event_types, feature bits.
const HEADER_SIZE: usize = 104;
/// Offsets in the header of `attrs.offset` and `data.offset` (each followed by its size), and
/// of the feature bitmap.
const ATTRS_AT: usize = 24;
const DATA_SECTION_AT: usize = 40;
const FEATURE_BITS_AT: usize = 72;
/// Offsets in the header of `attr_size` and of `event_types` (offset, then size).
const ATTR_SIZE_AT: usize = 16;
const EVENT_TYPES_AT: usize = 56;
/// How the file is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    /// `perf record -o FILE`: header, attributes, data, then feature sections.
    File,
    /// `perf record -o -`: a short header, then records only; the events and features come as
    /// records (`HEADER_ATTR`, `HEADER_FEATURE`) before the samples.
    Pipe,
}

/// What [`check_header`] found: the shape, where the records lie (the data section, or all of
/// a pipe-mode stream after its header), and the byte order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Container {
    pub shape: Shape,
    pub records: Range<u64>,
    pub big_endian: bool,
}

/// Refuses, with the reason, a file that is not perf.data, one perf never finished, one cut
/// short, and sections or records whose sizes or counts the file cannot hold.
pub(super) fn check_header(
    path: &Path,
    file: &mut File,
    size: u64,
) -> Result<Container, ProfileError> {
    let not_perf = |msg: &str| ProfileError::NotPerfData {
        path: path.into(),
        msg: msg.into(),
    };
    let mut header = [0u8; HEADER_SIZE];
    let got = read_up_to(file, &mut header).map_err(|source| ProfileError::Io {
        path: path.into(),
        source,
    })?;
    if got < 16 {
        return Err(not_perf("it is shorter than a perf.data header"));
    }
    let big_endian = match &header[..8] {
        b"PERFILE2" => false,
        b"2ELIFREP" => true,
        b"PERFFILE" => {
            return Err(not_perf(
                "it is in perf's version 1 format, from before 2012",
            ))
        }
        _ => return Err(not_perf("it does not start with PERFILE2")),
    };
    let word = |at: usize| u64_at(&header, at, big_endian);
    if word(8) == PIPE_HEADER_SIZE {
        check_pipe_records(path, file, size, big_endian)?;
        return Ok(Container {
            shape: Shape::Pipe,
            records: PIPE_HEADER_SIZE..size,
            big_endian,
        });
    }
    if got < HEADER_SIZE {
        return Err(ProfileError::Truncated {
            path: path.into(),
            size,
            expected: Some(HEADER_SIZE as u64),
        });
    }
    let (data_offset, data_size) = (word(DATA_SECTION_AT), word(DATA_SECTION_AT + 8));
    if data_size == 0 {
        return Err(ProfileError::Unfinished { path: path.into() });
    }
    let data_end = data_offset.saturating_add(data_size);
    let attrs_end = word(ATTRS_AT).saturating_add(word(ATTRS_AT + 8));
    let truncated = |expected| ProfileError::Truncated {
        path: path.into(),
        size,
        expected: Some(expected),
    };
    if size < data_end.max(attrs_end) {
        return Err(truncated(data_end.max(attrs_end)));
    }
    let header_sections = HeaderSections {
        attr_size: word(ATTR_SIZE_AT),
        attrs: word(ATTRS_AT)..attrs_end,
        event_types: word(EVENT_TYPES_AT)
            ..word(EVENT_TYPES_AT).saturating_add(word(EVENT_TYPES_AT + 8)),
        features: [0, 1, 2, 3].map(|i| word(FEATURE_BITS_AT + 8 * i)),
    };
    let mut sections = Sections {
        path,
        file,
        size,
        big_endian,
    };
    sections.check(&header_sections, data_end)?;
    Ok(Container {
        shape: Shape::File,
        records: data_offset..data_end,
        big_endian,
    })
}

#[cfg(test)]
pub(super) mod tests {
    use std::io::{Seek, SeekFrom, Write};

    use super::*;

    pub(in crate::profile) fn header(
        magic: &[u8; 8],
        header_size: u64,
        data_offset: u64,
        data_size: u64,
    ) -> Vec<u8> {
        let mut h = vec![0u8; HEADER_SIZE];
        h[..8].copy_from_slice(magic);
        h[8..16].copy_from_slice(&header_size.to_le_bytes());
        h[16..24].copy_from_slice(&128u64.to_le_bytes()); // attr_size
        h[40..48].copy_from_slice(&data_offset.to_le_bytes());
        h[48..56].copy_from_slice(&data_size.to_le_bytes());
        h
    }

    pub(in crate::profile) fn check(bytes: &[u8]) -> Result<Container, ProfileError> {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        f.seek(SeekFrom::Start(0)).unwrap();
        check_header(Path::new("p.data"), &mut f, bytes.len() as u64)
    }

    #[test]
    fn cut_data_section_is_truncated() {
        let mut bytes = header(b"PERFILE2", 104, 104, 1000);
        bytes.resize(600, 0);
        assert!(matches!(
            check(&bytes),
            Err(ProfileError::Truncated {
                size: 600,
                expected: Some(1104),
                ..
            })
        ));
    }

    #[test]
    fn cut_header_is_truncated() {
        let bytes = header(b"PERFILE2", 104, 104, 1000);
        assert!(matches!(
            check(&bytes[..50]),
            Err(ProfileError::Truncated { size: 50, .. })
        ));
    }

    #[test]
    fn zero_data_size_means_perf_was_killed() {
        let bytes = header(b"PERFILE2", 104, 104, 0);
        assert!(matches!(
            check(&bytes),
            Err(ProfileError::Unfinished { .. })
        ));
    }

    #[test]
    fn other_files_are_named() {
        assert!(matches!(
            check(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\0"),
            Err(ProfileError::NotPerfData { .. })
        ));
        assert!(matches!(
            check(b"PERF"),
            Err(ProfileError::NotPerfData { .. })
        ));
    }

    #[test]
    fn whole_header_passes() {
        let mut bytes = header(b"PERFILE2", 104, 104, 8);
        bytes.resize(112, 0);
        assert!(check(&bytes).is_ok());
    }

    #[test]
    fn attribute_size_outside_perfs_is_malformed() {
        let mut bytes = header(b"PERFILE2", 104, 104, 8);
        bytes.resize(112, 0);
        for attr_size in [0u64, 8, 1 << 20] {
            bytes[16..24].copy_from_slice(&attr_size.to_le_bytes());
            let err = check(&bytes).unwrap_err();
            assert!(
                err.to_string()
                    .contains(&format!("gives {attr_size} bytes per event attribute")),
                "{err}"
            );
        }
    }

    #[test]
    fn event_types_past_the_end_are_truncated() {
        // No EVENT_DESC, so linux-perf-data would size its table from `event_types`.
        let mut bytes = header(b"PERFILE2", 104, 104, 8);
        bytes.resize(112, 0);
        bytes[56..64].copy_from_slice(&104u64.to_le_bytes());
        bytes[64..72].copy_from_slice(&989_000_000_000u64.to_le_bytes());
        assert!(matches!(
            check(&bytes),
            Err(ProfileError::Truncated { expected: Some(e), .. }) if e == 104 + 989_000_000_000
        ));
        // A whole entry (attribute, then its ids' {offset, size}) whose ids lie past the end.
        let mut entry = vec![0u8; 128];
        entry.extend_from_slice(&0u64.to_le_bytes());
        entry.extend_from_slice(&(1u64 << 40).to_le_bytes());
        bytes[64..72].copy_from_slice(&(entry.len() as u64).to_le_bytes());
        bytes.truncate(104);
        bytes.extend_from_slice(&entry);
        let data_at = bytes.len() as u64;
        bytes[40..48].copy_from_slice(&data_at.to_le_bytes());
        bytes.resize(bytes.len() + 8, 0);
        assert!(matches!(
            check(&bytes),
            Err(ProfileError::Truncated { expected: Some(e), .. }) if e == 1 << 40
        ));
    }

    #[test]
    fn event_desc_counts_beyond_the_section_are_malformed() {
        // nr, attr_size, then one event: attribute, nr_ids, name length, name, ids.
        let desc = |events: u32, ids: u32, name: u32| {
            let mut d = Vec::new();
            d.extend_from_slice(&events.to_le_bytes());
            d.extend_from_slice(&128u32.to_le_bytes());
            d.extend_from_slice(&[0u8; 128]);
            d.extend_from_slice(&ids.to_le_bytes());
            d.extend_from_slice(&name.to_le_bytes());
            d.extend_from_slice(b"cpu-clock\0\0\0\0\0\0\0");
            d.extend_from_slice(&7u64.to_le_bytes());
            d
        };
        let file = |section: Vec<u8>| {
            let mut bytes = header(b"PERFILE2", 104, 104, 8);
            bytes[72..80].copy_from_slice(&(1u64 << 12).to_le_bytes());
            bytes.resize(112, 0);
            bytes.extend_from_slice(&128u64.to_le_bytes());
            bytes.extend_from_slice(&(section.len() as u64).to_le_bytes());
            bytes.extend_from_slice(&section);
            bytes
        };
        assert!(check(&file(desc(1, 1, 16))).is_ok());
        for (section, needle) in [
            (
                desc(1, u32::MAX - 15, 16),
                "the 4294967280 ids of event 1 of 1",
            ),
            (desc(1, 1, u32::MAX), "the name of event 1 of 1"),
            (
                desc(u32::MAX, 1, 16),
                "the attribute of event 2 of 4294967295",
            ),
        ] {
            let err = check(&file(section)).unwrap_err();
            assert!(err.to_string().contains(needle), "{err}");
        }
    }

    #[test]
    fn feature_section_past_the_end_is_truncated() {
        // One feature (bit 2, build-ids) whose section claims 4 GiB.
        let mut bytes = header(b"PERFILE2", 104, 104, 8);
        bytes[72] = 1 << 2;
        bytes.resize(112, 0);
        bytes.extend_from_slice(&128u64.to_le_bytes());
        bytes.extend_from_slice(&(4u64 << 30).to_le_bytes());
        let err = check(&bytes).unwrap_err();
        assert!(
            matches!(err, ProfileError::Truncated { expected: Some(e), .. } if e == 128 + (4 << 30)),
            "{err}"
        );
        // And a feature table that is missing altogether.
        assert!(matches!(
            check(&bytes[..112]),
            Err(ProfileError::Truncated {
                expected: Some(128),
                ..
            })
        ));
    }
}
