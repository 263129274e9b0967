//! The user-space executable mappings that perf's MMAP and MMAP2 records describe.

use linux_perf_data::linux_perf_event_reader::constants::{
    PERF_RECORD_MISC_CPUMODE_MASK, PERF_RECORD_MISC_KERNEL, PERF_RECORD_MISC_MMAP_BUILD_ID,
};
use linux_perf_data::linux_perf_event_reader::{
    EventRecord, Mmap2FileId, RawEventRecord, RecordType,
};

use crate::os::proc::Pid;

/// Offset of the build-id length byte in a MMAP2 body (after pid, tid, addr, len, pgoff).
const MMAP2_BUILD_ID_LEN_AT: usize = 32;
/// The longest build-id a MMAP2 record can carry (linux-perf-event-reader asserts on more).
const MMAP2_BUILD_ID_MAX: u8 = 20;
/// PROT_EXEC in a MMAP2 record's protection.
const PROT_EXEC: u32 = 4;

/// An executable mapping of a file into a user process.
pub(super) struct Mapping {
    pub pid: Pid,
    pub start: u64,
    pub len: u64,
    pub pgoff: u64,
    pub path: Vec<u8>,
    /// The build-id the record carries (MMAP2 with `PERF_RECORD_MISC_MMAP_BUILD_ID`).
    pub build_id: Option<Vec<u8>>,
}

/// The record's mapping: `Ok(None)` for the kernel's and for mappings that are not executable,
/// `Err(())` for a record too short or inconsistent to read.
pub(super) fn executable_mapping(record: &RawEventRecord) -> Result<Option<Mapping>, ()> {
    if record.misc & PERF_RECORD_MISC_CPUMODE_MASK == PERF_RECORD_MISC_KERNEL {
        return Ok(None); // the kernel and its modules
    }
    if record.record_type == RecordType::MMAP2 && record.misc & PERF_RECORD_MISC_MMAP_BUILD_ID != 0
    {
        let len = record.data.as_slice().get(MMAP2_BUILD_ID_LEN_AT).copied();
        if len.is_none_or(|n| n > MMAP2_BUILD_ID_MAX) {
            return Err(());
        }
    }
    let (executable, mapping) = match record.parse() {
        Ok(EventRecord::Mmap(m)) => (
            m.is_executable,
            Mapping {
                pid: m.pid,
                start: m.address,
                len: m.length,
                pgoff: m.page_offset,
                path: m.path.as_slice().into_owned(),
                build_id: None,
            },
        ),
        Ok(EventRecord::Mmap2(m)) => (
            m.protection & PROT_EXEC != 0,
            Mapping {
                pid: m.pid,
                start: m.address,
                len: m.length,
                pgoff: m.page_offset,
                path: m.path.as_slice().into_owned(),
                build_id: match m.file_id {
                    Mmap2FileId::BuildId(id) => Some(id),
                    Mmap2FileId::InodeAndVersion(_) => None,
                },
            },
        ),
        _ => return Err(()),
    };
    Ok(executable.then_some(mapping))
}
