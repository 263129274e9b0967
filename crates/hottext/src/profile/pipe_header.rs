//! The leading records of a pipe-mode stream (`perf record -o - > file`), checked before
//! linux-perf-data reads them. A pipe has no header sections: the events (`HEADER_ATTR`) and
//! feature sections (`HEADER_FEATURE`) come as records before the samples.

use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::path::Path;

use super::perf_bytes::{read_up_to, u64_at, uint_at};
use super::perf_sections::{check_event_desc, ids_within_budget, EVENT_DESC_BIT};
use super::ProfileError;

/// The header size a pipe-mode stream (`perf record -o -`) writes.
pub(super) const PIPE_HEADER_SIZE: u64 = 16;

/// `struct perf_event_header`: type (u32), misc (u16), size (u16).
const RECORD_HEADER_SIZE: usize = 8;
/// perf's own record types that carry a pipe-mode stream's events and feature sections.
const HEADER_ATTR: u32 = 64;
const HEADER_FEATURE: u32 = 80;

/// A pipe-mode stream's leading records, which linux-perf-data reads before any sample: the
/// events (`HEADER_ATTR`) and the feature sections (`HEADER_FEATURE`). A record is at most
/// 64 KiB, but an `EVENT_DESC` feature inside one holds counts the crate allocates for, so it
/// gets the same check as in a file.
pub(super) fn check_pipe_records(
    path: &Path,
    file: &mut File,
    size: u64,
    big_endian: bool,
) -> Result<(), ProfileError> {
    let io_err = |source| ProfileError::Io {
        path: path.into(),
        source,
    };
    let mut at = PIPE_HEADER_SIZE;
    // Each HEADER_ATTR record is an attribute and its sample ids: their bytes bound the ids.
    let mut attr_bytes = 0u64;
    file.seek(SeekFrom::Start(at)).map_err(io_err)?;
    loop {
        let mut header = [0u8; RECORD_HEADER_SIZE];
        match read_up_to(file, &mut header).map_err(io_err)? {
            0 => return Ok(()),
            RECORD_HEADER_SIZE => {}
            _ => {
                return Err(ProfileError::Truncated {
                    path: path.into(),
                    size,
                    expected: Some(at + RECORD_HEADER_SIZE as u64),
                })
            }
        }
        let record_type = uint_at(&header, 0, 4, big_endian) as u32;
        let record_size = uint_at(&header, 6, 2, big_endian);
        if record_type != HEADER_ATTR && record_type != HEADER_FEATURE {
            return Ok(());
        }
        if record_size < RECORD_HEADER_SIZE as u64 {
            return Err(ProfileError::Malformed {
                path: path.into(),
                msg: format!("the record at byte {at} gives its size as {record_size} bytes, less than its own header"),
            });
        }
        let mut body = vec![0u8; record_size as usize - RECORD_HEADER_SIZE]; // at most 64 KiB
        if read_up_to(file, &mut body).map_err(io_err)? < body.len() {
            return Err(ProfileError::Truncated {
                path: path.into(),
                size,
                expected: Some(at + record_size),
            });
        }
        if record_type == HEADER_ATTR {
            attr_bytes += body.len() as u64;
            ids_within_budget(attr_bytes / 8).map_err(|msg| ProfileError::Malformed {
                path: path.into(),
                msg: format!("its events (HEADER_ATTR records, up to the one at byte {at}): {msg}"),
            })?;
        }
        // The reader takes the low 32 bits of the u64 as the feature (found by fuzzing: a
        // feature word of 0x4e5a…_0000000c is its EVENT_DESC).
        if record_type == HEADER_FEATURE && u64_at(&body, 0, big_endian) as u32 == EVENT_DESC_BIT {
            check_event_desc(body.get(8..).unwrap_or_default(), big_endian).map_err(|msg| {
                ProfileError::Malformed {
                    path: path.into(),
                    msg: format!("its event descriptions (EVENT_DESC record at byte {at}): {msg}"),
                }
            })?;
        }
        at += record_size;
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn record(record_type: u32, body: &[u8]) -> Vec<u8> {
        let mut r = record_type.to_le_bytes().to_vec();
        r.extend_from_slice(&0u16.to_le_bytes());
        r.extend_from_slice(&((RECORD_HEADER_SIZE + body.len()) as u16).to_le_bytes());
        r.extend_from_slice(body);
        r
    }

    fn check(records: &[u8]) -> Result<(), ProfileError> {
        let mut bytes = b"PERFILE2".to_vec();
        bytes.extend_from_slice(&PIPE_HEADER_SIZE.to_le_bytes());
        bytes.extend_from_slice(records);
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&bytes).unwrap();
        check_pipe_records(Path::new("p.data"), &mut f, bytes.len() as u64, false)
    }

    /// An EVENT_DESC feature record: one event whose id count is `ids`.
    fn event_desc(ids: u32) -> Vec<u8> {
        let mut body = u64::from(EVENT_DESC_BIT).to_le_bytes().to_vec();
        body.extend_from_slice(&1u32.to_le_bytes()); // events
        body.extend_from_slice(&64u32.to_le_bytes()); // attribute size
        body.extend_from_slice(&[0u8; 64]);
        body.extend_from_slice(&ids.to_le_bytes());
        body.extend_from_slice(&8u32.to_le_bytes());
        body.extend_from_slice(b"cycles\0\0");
        body.extend_from_slice(&7u64.to_le_bytes());
        record(HEADER_FEATURE, &body)
    }

    #[test]
    fn leading_records_within_their_sizes_pass() {
        let mut records = record(HEADER_ATTR, &[0u8; 72]);
        records.extend(event_desc(1));
        records.extend(record(9, &[0u8; 16])); // the first sample ends the check
        assert!(check(&records).is_ok());
        assert!(
            check(&[]).is_ok(),
            "an empty stream is for the reader to refuse"
        );
    }

    #[test]
    fn an_event_desc_count_beyond_its_record_is_malformed() {
        let err = check(&event_desc(u32::MAX)).unwrap_err();
        assert!(
            err.to_string()
                .contains("EVENT_DESC record at byte 16): the 4294967295 ids of event 1 of 1"),
            "{err}"
        );
    }

    #[test]
    fn an_event_desc_named_by_the_low_half_of_its_feature_word_is_checked_too() {
        let mut desc = event_desc(u32::MAX);
        // The feature word's high half set: the reader still reads EVENT_DESC.
        desc[RECORD_HEADER_SIZE + 4..RECORD_HEADER_SIZE + 8]
            .copy_from_slice(&0x4e5a_0000u32.to_le_bytes());
        let err = check(&desc).unwrap_err();
        assert!(
            err.to_string().contains("EVENT_DESC record at byte 16"),
            "{err}"
        );
    }

    #[test]
    fn a_cut_or_undersized_record_is_refused() {
        let attr = record(HEADER_ATTR, &[0u8; 72]);
        assert!(matches!(
            check(&attr[..40]),
            Err(ProfileError::Truncated {
                expected: Some(96),
                ..
            })
        ));
        assert!(matches!(
            check(&attr[..4]),
            Err(ProfileError::Truncated {
                expected: Some(24),
                ..
            })
        ));
        let mut tiny = attr;
        tiny[6..8].copy_from_slice(&4u16.to_le_bytes());
        let err = check(&tiny).unwrap_err();
        assert!(
            err.to_string()
                .contains("record at byte 16 gives its size as 4 bytes"),
            "{err}"
        );
    }
}
