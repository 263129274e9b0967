//! The perf.data container, through linux-perf-data: header checks that turn a cut-off or
//! unfinished file into a clear error, the build-id table, the sampled event, and a record
//! stream that says how far it got when it fails.

use std::cell::Cell;
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use linux_perf_data::linux_perf_event_reader::{
    HardwareEventId, PerfEventType, SoftwareCounterType,
};
use linux_perf_data::{
    AttributeDescription, Endianness, PerfFile, PerfFileReader, PerfFileRecord, PerfRecordIter,
};
use rustc_hash::FxHashMap;

use super::ProfileError;

/// Big enough for perf's sequential reads, small enough to stay in cache.
const READ_BUFFER: usize = 1 << 20;
/// `struct perf_file_header`: magic, size, attr_size, attrs, data, event_types, feature bits.
const HEADER_SIZE: usize = 104;
/// Offsets in the header of `attrs.offset` and `data.offset` (each followed by its size), and
/// of the feature bitmap.
const ATTRS_AT: usize = 24;
const DATA_SECTION_AT: usize = 40;
const FEATURE_BITS_AT: usize = 72;
/// A feature section's `{offset, size}` in the table after the data section.
const FEATURE_ENTRY_SIZE: usize = 16;
/// The header size a pipe-mode stream (`perf record -o -`) writes.
const PIPE_HEADER_SIZE: u64 = 16;

pub(crate) struct PerfData {
    path: PathBuf,
    /// File size in bytes.
    pub size: u64,
    file: PerfFile,
    records: PerfRecordIter<BufReader<Counted<File>>>,
    position: Rc<Cell<u64>>,
    records_read: u64,
}

impl PerfData {
    pub fn open(path: &Path) -> Result<PerfData, ProfileError> {
        let io_err = |source| ProfileError::Io {
            path: path.into(),
            source,
        };
        let mut file = File::open(path).map_err(io_err)?;
        let size = file.metadata().map_err(io_err)?.len();
        check_header(path, &mut file, size)?;
        file.seek(SeekFrom::Start(0)).map_err(io_err)?;

        let position = Rc::new(Cell::new(0));
        let counted = Counted {
            inner: file,
            position: Rc::clone(&position),
        };
        let reader = BufReader::with_capacity(READ_BUFFER, counted);
        let PerfFileReader {
            perf_file,
            record_iter,
        } = PerfFileReader::parse_file(reader).map_err(|e| match e {
            // The header was whole, so this is a cut in the feature sections after the data.
            linux_perf_data::Error::IoError(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                ProfileError::Truncated {
                    path: path.into(),
                    size,
                    expected: None,
                }
            }
            e => ProfileError::Malformed {
                path: path.into(),
                msg: e.to_string(),
            },
        })?;
        Ok(PerfData {
            path: path.into(),
            size,
            file: perf_file,
            records: record_iter,
            position,
            records_read: 0,
        })
    }

    pub fn bytes_read(&self) -> u64 {
        self.position.get().min(self.size)
    }

    pub fn attributes(&self) -> &[AttributeDescription] {
        self.file.event_attributes()
    }

    pub fn endian(&self) -> Endianness {
        self.file.endian()
    }

    /// perf's table of build-ids of the files that had samples, by path. Empty when perf
    /// recorded none (`perf record -B`, or a pipe).
    pub fn build_ids(&self) -> Result<FxHashMap<Vec<u8>, Vec<u8>>, ProfileError> {
        let table = self.file.build_ids().map_err(|e| ProfileError::Malformed {
            path: self.path.clone(),
            msg: format!("build-id table: {e}"),
        })?;
        Ok(table.into_values().map(|d| (d.path, d.build_id)).collect())
    }

    /// The next record, in time order.
    pub fn next(&mut self) -> Result<Option<PerfFileRecord<'_>>, ProfileError> {
        let offset = self.bytes_read();
        match self.records.next_record(&mut self.file) {
            Ok(Some(record)) => {
                self.records_read += 1;
                Ok(Some(record))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(ProfileError::Damaged {
                path: self.path.clone(),
                records_read: self.records_read,
                offset,
                msg: e.to_string(),
            }),
        }
    }
}

/// A name for an event: perf's own, else one made from its type.
pub(crate) fn event_name(desc: &AttributeDescription) -> String {
    if let Some(name) = desc.name() {
        return name.to_string();
    }
    match desc.attr.type_ {
        PerfEventType::Software(SoftwareCounterType::CpuClock) => "cpu-clock".into(),
        PerfEventType::Software(SoftwareCounterType::TaskClock) => "task-clock".into(),
        PerfEventType::Hardware(HardwareEventId::CpuCycles, _) => "cycles".into(),
        other => format!("{other:?}"),
    }
}

/// Catches what linux-perf-data would report as a bare I/O error: a file cut short (copied
/// while perf was writing, `head -c`), one perf never finished, and a pipe-mode stream.
fn check_header(path: &Path, file: &mut File, size: u64) -> Result<(), ProfileError> {
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
        return Err(ProfileError::PipeMode { path: path.into() });
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
    // linux-perf-data reads each feature section whole: a section past the end of the file
    // would be a huge allocation rather than an error, so check the table after the data.
    let sections: u32 = (FEATURE_BITS_AT..HEADER_SIZE)
        .step_by(8)
        .map(|at| word(at).count_ones())
        .sum();
    let mut table = vec![0u8; sections as usize * FEATURE_ENTRY_SIZE];
    let io_err = |source| ProfileError::Io {
        path: path.into(),
        source,
    };
    file.seek(SeekFrom::Start(data_end)).map_err(io_err)?;
    if read_up_to(file, &mut table).map_err(io_err)? < table.len() {
        return Err(truncated(data_end + table.len() as u64));
    }
    for entry in table.chunks_exact(FEATURE_ENTRY_SIZE) {
        let end = u64_at(entry, 0, big_endian).saturating_add(u64_at(entry, 8, big_endian));
        if end > size {
            return Err(truncated(end));
        }
    }
    Ok(())
}

fn u64_at(bytes: &[u8], at: usize, big_endian: bool) -> u64 {
    let b: [u8; 8] = bytes
        .get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .unwrap_or_default();
    if big_endian {
        u64::from_be_bytes(b)
    } else {
        u64::from_le_bytes(b)
    }
}

fn read_up_to(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read(&mut buf[got..])? {
            0 => break,
            n => got += n,
        }
    }
    Ok(got)
}

/// Counts the bytes pulled from the file, for the progress bar.
struct Counted<R> {
    inner: R,
    position: Rc<Cell<u64>>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.position.set(self.position.get() + n as u64);
        Ok(n)
    }
}

impl<R: Seek> Seek for Counted<R> {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        let at = self.inner.seek(pos)?;
        self.position.set(at);
        Ok(at)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn header(magic: &[u8; 8], header_size: u64, data_offset: u64, data_size: u64) -> Vec<u8> {
        let mut h = vec![0u8; HEADER_SIZE];
        h[..8].copy_from_slice(magic);
        h[8..16].copy_from_slice(&header_size.to_le_bytes());
        h[40..48].copy_from_slice(&data_offset.to_le_bytes());
        h[48..56].copy_from_slice(&data_size.to_le_bytes());
        h
    }

    fn check(bytes: &[u8]) -> Result<(), ProfileError> {
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
    fn other_files_and_pipe_streams_are_named() {
        assert!(matches!(
            check(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\0"),
            Err(ProfileError::NotPerfData { .. })
        ));
        assert!(matches!(
            check(b"PERF"),
            Err(ProfileError::NotPerfData { .. })
        ));
        let pipe = header(b"PERFILE2", 16, 0, 0);
        assert!(matches!(
            check(&pipe[..16]),
            Err(ProfileError::PipeMode { .. })
        ));
    }

    #[test]
    fn whole_header_passes() {
        let mut bytes = header(b"PERFILE2", 104, 104, 8);
        bytes.resize(112, 0);
        assert!(check(&bytes).is_ok());
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
