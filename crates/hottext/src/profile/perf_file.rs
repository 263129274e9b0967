//! The perf.data container, through linux-perf-data once [`check_header`] passed: the build-id
//! table, the sampled events, and a record stream that says how far it got when it fails.
//! Files written by `perf record -o FILE` and pipe-mode streams saved by `perf record -o - > FILE`
//! are both read.

use std::cell::Cell;
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use foldhash::HashMap;
use linux_perf_data::linux_perf_event_reader::{
    HardwareEventId, PerfEventType, RawEventRecord, SoftwareCounterType,
};
use linux_perf_data::{
    AttributeDescription, Endianness, PerfFile, PerfFileReader, PerfFileRecord, PerfRecordIter,
};

use super::perf_header::{check_header, Shape};
use super::record_guard::{RecordGuard, StopReason};
use super::ProfileError;

/// Records between two progress reports: often enough for a smooth bar, rare enough to cost
/// nothing.
const PROGRESS_EVERY: u64 = 1 << 16;
/// Big enough for perf's sequential reads, small enough to stay in cache.
const READ_BUFFER: usize = 1 << 20;
pub(crate) struct PerfData {
    path: PathBuf,
    /// File size in bytes.
    pub size: u64,
    file: PerfFile,
    records: PerfRecordIter<BufReader<Counted<RecordGuard<File>>>>,
    position: Rc<Cell<u64>>,
    /// Set when the guard stopped the reading, with the reason.
    guard_verdict: StopReason,
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
        let container = check_header(path, &mut file, size)?;
        file.seek(SeekFrom::Start(0)).map_err(io_err)?;

        let position = Rc::new(Cell::new(0));
        let guard_verdict = StopReason::default();
        let guard = RecordGuard::new(
            file,
            container.records,
            container.big_endian,
            Rc::clone(&guard_verdict),
        );
        let counted = Counted {
            inner: guard,
            position: Rc::clone(&position),
        };
        let reader = BufReader::with_capacity(READ_BUFFER, counted);
        let PerfFileReader {
            perf_file,
            record_iter,
        } = match container.shape {
            Shape::File => PerfFileReader::parse_file(reader),
            Shape::Pipe => PerfFileReader::parse_pipe(reader),
        }
        .map_err(|e| match e {
            _ if guard_verdict.borrow().is_some() => ProfileError::Malformed {
                path: path.into(),
                msg: guard_verdict.borrow().clone().unwrap_or_default(),
            },
            // The header was whole, so this is a cut in the feature sections after the data,
            // or in a pipe-mode stream's leading records.
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
            guard_verdict,
            records_read: 0,
        })
    }

    pub(crate) fn bytes_read(&self) -> u64 {
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
    pub(crate) fn build_ids(&self) -> Result<HashMap<Vec<u8>, Vec<u8>>, ProfileError> {
        let table = self.file.build_ids().map_err(|e| ProfileError::Malformed {
            path: self.path.clone(),
            msg: format!("build-id table: {e}"),
        })?;
        Ok(table.into_values().map(|d| (d.path, d.build_id)).collect())
    }

    /// Calls `each` with every event record (attribute index, record), in time order, and
    /// `progress` now and then with (bytes read, file size); returns how many records it read.
    pub(crate) fn for_each_event(
        &mut self,
        progress: &mut dyn FnMut(u64, u64),
        mut each: impl FnMut(usize, &RawEventRecord),
    ) -> Result<u64, ProfileError> {
        let mut records = 0u64;
        loop {
            if records % PROGRESS_EVERY == 0 {
                progress(self.bytes_read(), self.size);
            }
            let Some(record) = self.next()? else { break };
            records += 1;
            if let PerfFileRecord::EventRecord { attr_index, record } = record {
                each(attr_index, &record);
            }
        }
        progress(self.size, self.size);
        Ok(records)
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
                // The guard's reason, when it stopped the reading, names the record.
                msg: (self.guard_verdict.borrow().clone()).unwrap_or_else(|| e.to_string()),
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
