//! Decoding the body of a `PERF_RECORD_SAMPLE` ourselves.
//!
//! linux-perf-event-reader 0.10 reads the branch stack and throws it away, and it reads
//! `PERF_SAMPLE_READ` group values in the wrong order; branch-record profiles need the branch
//! stack, so we decode the fields we use, in the order of `perf_event.h`, and stop after the
//! branch stack. Borrowing the record's bytes keeps this allocation-free.

use crate::os::proc::Pid;
use linux_perf_data::linux_perf_event_reader::constants::{
    PERF_CONTEXT_MAX, PERF_CONTEXT_USER, PERF_RECORD_MISC_CPUMODE_MASK, PERF_RECORD_MISC_USER,
};
use linux_perf_data::linux_perf_event_reader::{
    BranchSampleFormat, Endianness, PerfEventAttr, SampleFormat,
};

/// Where the fields we read sit in a sample of one event (from its `perf_event_attr`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SampleLayout {
    format: SampleFormat,
    branch_hw_index: bool,
    /// The branch filter admits calls only: every record is a call.
    branch_calls_only: bool,
    /// perf saved each record's branch type (`save_type`), in a layout we can read.
    branch_types_saved: bool,
    big_endian: bool,
}

/// What the recording itself says a branch record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecordedBranch {
    Call,
    Jump,
    Return,
    /// A system call, an interrupt, a transaction abort: never an edge.
    Other,
    /// The filter admits more than calls and no type was saved: the code must tell.
    Unknown,
}

/// Branch filter bits (`perf_event.h`) that admit records other than calls.
const BRANCH_BEYOND_CALLS: BranchSampleFormat = BranchSampleFormat::ANY
    .union(BranchSampleFormat::ANY_RETURN)
    .union(BranchSampleFormat::COND)
    .union(BranchSampleFormat::IND_JUMP);
/// Branch filter bits that admit calls (a call stack's records are calls too).
const BRANCH_CALLS: BranchSampleFormat = BranchSampleFormat::ANY_CALL
    .union(BranchSampleFormat::CALL)
    .union(BranchSampleFormat::IND_CALL)
    .union(BranchSampleFormat::CALL_STACK);
/// Whether a branch filter admits calls and nothing else (`-j any_call`, the default of
/// `hottext record`), so that every record is a call.
fn admits_calls_only(filter: BranchSampleFormat) -> bool {
    filter.intersects(BRANCH_CALLS) && !filter.intersects(BRANCH_BEYOND_CALLS)
}

/// Where a branch entry's flags keep the saved type (`struct perf_branch_entry`, after the
/// mispred, predicted, in_tx and abort bits and 16 bits of cycles), little-endian bitfields.
const BRANCH_TYPE_SHIFT: u32 = 20;
const BRANCH_TYPE_MASK: u64 = 0xf;

/// The fields of one sample that the call graph needs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample<'a> {
    pub pid: Option<Pid>,
    pub ip: Option<u64>,
    pub time: Option<u64>,
    /// The sample was taken in user mode (else kernel, hypervisor or guest).
    pub user_mode: bool,
    pub callchain: Option<U64s<'a>>,
    /// `(from, to)` pairs, newest first.
    pub branches: Option<Branches<'a>>,
}

/// The sample is shorter than its layout says, or uses a field we cannot skip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unreadable;

impl SampleLayout {
    /// `None` when samples carry `PERF_SAMPLE_READ` values: the reader crate drops the
    /// `PERF_FORMAT_LOST` bit that sizes them, so we could not find the fields after them.
    pub fn new(attr: &PerfEventAttr, endian: Endianness) -> Option<SampleLayout> {
        if attr.sample_format.contains(SampleFormat::READ) {
            return None;
        }
        let filter = attr.branch_sample_format;
        let big_endian = endian == Endianness::BigEndian;
        Some(SampleLayout {
            format: attr.sample_format,
            branch_hw_index: filter.contains(BranchSampleFormat::HW_INDEX),
            branch_calls_only: admits_calls_only(filter),
            branch_types_saved: filter.contains(BranchSampleFormat::TYPE_SAVE) && !big_endian,
            big_endian,
        })
    }

    /// What the recording says of a branch record with these flags.
    pub fn recorded_branch(&self, flags: u64) -> RecordedBranch {
        if self.branch_calls_only {
            return RecordedBranch::Call;
        }
        if !self.branch_types_saved {
            return RecordedBranch::Unknown;
        }
        // PERF_BR_* of perf_event.h.
        match (flags >> BRANCH_TYPE_SHIFT) & BRANCH_TYPE_MASK {
            1..=3 => RecordedBranch::Jump,
            4 | 5 | 9 => RecordedBranch::Call,
            6 | 10 => RecordedBranch::Return,
            7 | 8 | 11..=14 => RecordedBranch::Other,
            _ => RecordedBranch::Unknown,
        }
    }

    pub fn has_callchain(&self) -> bool {
        self.format.contains(SampleFormat::CALLCHAIN)
    }

    pub fn has_branch_stack(&self) -> bool {
        self.format.contains(SampleFormat::BRANCH_STACK)
    }

    pub fn has_pid(&self) -> bool {
        self.format.contains(SampleFormat::TID)
    }

    /// The first u64 of a record body in the file's byte order (LOST_SAMPLES holds one).
    pub fn first_u64(&self, body: &[u8]) -> Option<u64> {
        body.get(..8).map(|b| word(b, self.big_endian))
    }

    pub fn decode<'a>(&self, misc: u16, body: &'a [u8]) -> Result<Sample<'a>, Unreadable> {
        let f = self.format;
        let mut cur = Cursor {
            data: body,
            big_endian: self.big_endian,
        };
        let mut sample = Sample {
            pid: None,
            ip: None,
            time: None,
            user_mode: misc & PERF_RECORD_MISC_CPUMODE_MASK == PERF_RECORD_MISC_USER,
            callchain: None,
            branches: None,
        };
        cur.skip_if(f.contains(SampleFormat::IDENTIFIER), 8)?;
        if f.contains(SampleFormat::IP) {
            sample.ip = Some(cur.u64()?);
        }
        if f.contains(SampleFormat::TID) {
            sample.pid = Some(cur.u32()? as Pid);
            cur.skip(4)?; // tid
        }
        if f.contains(SampleFormat::TIME) {
            sample.time = Some(cur.u64()?);
        }
        cur.skip_if(f.contains(SampleFormat::ADDR), 8)?;
        cur.skip_if(f.contains(SampleFormat::ID), 8)?;
        cur.skip_if(f.contains(SampleFormat::STREAM_ID), 8)?;
        cur.skip_if(f.contains(SampleFormat::CPU), 8)?;
        cur.skip_if(f.contains(SampleFormat::PERIOD), 8)?;
        if f.contains(SampleFormat::CALLCHAIN) {
            let nr = cur.u64()?;
            sample.callchain = Some(U64s {
                bytes: cur.take_words(nr, 1)?,
                big_endian: self.big_endian,
            });
        }
        if f.contains(SampleFormat::RAW) {
            let size = cur.u32()?;
            cur.skip(size as usize)?;
        }
        if f.contains(SampleFormat::BRANCH_STACK) {
            let nr = cur.u64()?;
            cur.skip_if(self.branch_hw_index, 8)?;
            let bytes = cur.take_words(nr, 3)?;
            sample.branches = Some(Branches {
                entries: U64s {
                    bytes,
                    big_endian: self.big_endian,
                },
            });
        }
        Ok(sample)
    }
}

impl Sample<'_> {
    /// The innermost two user-space frames: where the sample hit, and the return address into
    /// its caller. Kernel frames and the `PERF_CONTEXT_*` markers are skipped; a sample taken in
    /// the kernel starts at the user address the kernel will return to.
    pub fn top_user_frames(&self) -> [Option<u64>; 2] {
        let mut top = [None, None];
        let Some(chain) = self.callchain else {
            if self.user_mode {
                top[0] = self.ip;
            }
            return top;
        };
        // A chain without markers is all in the sample's own mode.
        let mut in_user = self.user_mode;
        let mut found = 0;
        for addr in chain.iter() {
            if addr >= PERF_CONTEXT_MAX {
                in_user = addr == PERF_CONTEXT_USER;
            } else if in_user {
                top[found] = Some(addr);
                found += 1;
                if found == top.len() {
                    break;
                }
            }
        }
        top
    }
}

/// A run of u64 values in the record's byte order, read in place.
#[derive(Debug, Clone, Copy)]
pub(crate) struct U64s<'a> {
    bytes: &'a [u8],
    big_endian: bool,
}

impl<'a> U64s<'a> {
    pub fn iter(self) -> impl Iterator<Item = u64> + 'a {
        let big = self.big_endian;
        self.bytes.chunks_exact(8).map(move |c| word(c, big))
    }
}

/// The branch stack of one sample: `{from, to, flags}` entries.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Branches<'a> {
    entries: U64s<'a>,
}

impl<'a> Branches<'a> {
    /// `(from, to, flags)` of each entry.
    pub fn iter(self) -> impl Iterator<Item = (u64, u64, u64)> + 'a {
        let big = self.entries.big_endian;
        self.entries.bytes.chunks_exact(24).map(move |e| {
            (
                word(&e[..8], big),
                word(&e[8..16], big),
                word(&e[16..], big),
            )
        })
    }
}

fn word(bytes: &[u8], big_endian: bool) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[..8]);
    if big_endian {
        u64::from_be_bytes(b)
    } else {
        u64::from_le_bytes(b)
    }
}

struct Cursor<'a> {
    data: &'a [u8],
    big_endian: bool,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Unreadable> {
        if n > self.data.len() {
            return Err(Unreadable);
        }
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        Ok(head)
    }

    /// `count` records of `words` u64s each, with the count taken from the (untrusted) record.
    fn take_words(&mut self, count: u64, words: usize) -> Result<&'a [u8], Unreadable> {
        let n = usize::try_from(count)
            .ok()
            .and_then(|c| c.checked_mul(8 * words))
            .ok_or(Unreadable)?;
        self.take(n)
    }

    fn skip(&mut self, n: usize) -> Result<(), Unreadable> {
        self.take(n).map(|_| ())
    }

    fn skip_if(&mut self, present: bool, n: usize) -> Result<(), Unreadable> {
        if present {
            self.skip(n)?;
        }
        Ok(())
    }

    fn u64(&mut self) -> Result<u64, Unreadable> {
        let big = self.big_endian;
        self.take(8).map(|b| word(b, big))
    }

    fn u32(&mut self) -> Result<u32, Unreadable> {
        let b = self.take(4)?;
        let b = [b[0], b[1], b[2], b[3]];
        Ok(if self.big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    }
}

#[cfg(test)]
mod tests {
    use linux_perf_data::linux_perf_event_reader::constants::{
        PERF_CONTEXT_KERNEL, PERF_RECORD_MISC_KERNEL,
    };

    use super::*;

    fn layout(format: SampleFormat, hw_index: bool) -> SampleLayout {
        SampleLayout {
            format,
            branch_hw_index: hw_index,
            branch_calls_only: false,
            branch_types_saved: true,
            big_endian: false,
        }
    }

    fn bytes(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    const USER: u16 = PERF_RECORD_MISC_USER;

    #[test]
    fn reads_pid_and_callchain_of_a_perf_record_g_sample() {
        // perf record -g: IP|TID|TIME|CALLCHAIN|PERIOD
        let f = SampleFormat::IP
            | SampleFormat::TID
            | SampleFormat::TIME
            | SampleFormat::CALLCHAIN
            | SampleFormat::PERIOD;
        let pid_tid = 42u64 | (43 << 32);
        let body = bytes(&[
            0x1010,
            pid_tid,
            777,
            5000,
            3,
            PERF_CONTEXT_USER,
            0x1010,
            0x2020,
        ]);
        let s = layout(f, false).decode(USER, &body).unwrap();
        assert_eq!((s.pid, s.ip, s.time), (Some(42), Some(0x1010), Some(777)));
        assert_eq!(
            s.callchain.unwrap().iter().collect::<Vec<_>>(),
            [PERF_CONTEXT_USER, 0x1010, 0x2020]
        );
        assert_eq!(s.top_user_frames(), [Some(0x1010), Some(0x2020)]);
    }

    #[test]
    fn kernel_frames_are_skipped_to_the_user_part() {
        let f = SampleFormat::IP | SampleFormat::CALLCHAIN;
        let body = bytes(&[
            0xffff_ffff_8100_0000,
            5,
            PERF_CONTEXT_KERNEL,
            0xffff_ffff_8100_0000,
            PERF_CONTEXT_USER,
            0x4000,
            0x5000,
        ]);
        let s = layout(f, false)
            .decode(PERF_RECORD_MISC_KERNEL, &body)
            .unwrap();
        assert!(!s.user_mode);
        assert_eq!(s.top_user_frames(), [Some(0x4000), Some(0x5000)]);
    }

    #[test]
    fn kernel_only_sample_has_no_user_frames() {
        let f = SampleFormat::IP | SampleFormat::CALLCHAIN;
        let body = bytes(&[
            0xffff_ffff_8100_0000,
            2,
            PERF_CONTEXT_KERNEL,
            0xffff_ffff_8100_0000,
        ]);
        let s = layout(f, false)
            .decode(PERF_RECORD_MISC_KERNEL, &body)
            .unwrap();
        assert_eq!(s.top_user_frames(), [None, None]);
    }

    #[test]
    fn sample_without_callchain_uses_its_ip() {
        let body = bytes(&[0x4000]);
        let s = layout(SampleFormat::IP, false).decode(USER, &body).unwrap();
        assert_eq!(s.top_user_frames(), [Some(0x4000), None]);
    }

    #[test]
    fn decodes_branch_stack_after_raw_data_with_hw_index() {
        // perf record -j any_call with a raw payload in front, as the kernel lays it out.
        let f = SampleFormat::IP | SampleFormat::RAW | SampleFormat::BRANCH_STACK;
        let mut body = bytes(&[0x4000]);
        body.extend_from_slice(&4u32.to_le_bytes());
        body.extend_from_slice(&[0xaa; 4]);
        body.extend(bytes(&[
            2, 99, /* hw_idx */
            0x1100, 0x2000, 0, 0x2100, 0x3000, 0,
        ]));
        let s = layout(f, true).decode(USER, &body).unwrap();
        assert_eq!(
            s.branches.unwrap().iter().collect::<Vec<_>>(),
            [(0x1100, 0x2000, 0), (0x2100, 0x3000, 0)]
        );
    }

    #[test]
    fn branch_stack_without_hw_index() {
        let f = SampleFormat::TID | SampleFormat::BRANCH_STACK;
        let body = bytes(&[7, 1, 0x1100, 0x2000, 0x3]);
        let s = layout(f, false).decode(USER, &body).unwrap();
        assert_eq!(s.pid, Some(7));
        assert_eq!(
            s.branches.unwrap().iter().collect::<Vec<_>>(),
            [(0x1100, 0x2000, 0x3)]
        );
    }

    #[test]
    fn a_branch_record_is_what_the_filter_or_its_saved_type_says() {
        use BranchSampleFormat as F;
        assert!(admits_calls_only(F::USER | F::ANY_CALL));
        assert!(admits_calls_only(F::CALL | F::IND_CALL | F::HW_INDEX));
        assert!(!admits_calls_only(F::USER | F::ANY)); // perf record -b
        assert!(!admits_calls_only(F::ANY_CALL | F::ANY_RETURN));
        assert!(!admits_calls_only(F::USER));

        let mut l = layout(SampleFormat::BRANCH_STACK, false);
        // Type bits over mispred/predicted and some cycles, as the kernel writes them.
        let typed = |t: u64| (t << BRANCH_TYPE_SHIFT) | (7 << 4) | 0b10;
        let kinds = [0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 12, 15].map(|t| l.recorded_branch(typed(t)));
        use RecordedBranch::*;
        assert_eq!(
            kinds,
            [Unknown, Jump, Jump, Jump, Call, Call, Return, Other, Call, Return, Other, Unknown]
        );
        l.branch_types_saved = false;
        assert_eq!(l.recorded_branch(typed(4)), Unknown);
        l.branch_calls_only = true;
        assert_eq!(l.recorded_branch(typed(2)), Call);
    }

    #[test]
    fn big_endian_records_are_read_in_their_byte_order() {
        let mut l = layout(SampleFormat::IP | SampleFormat::CALLCHAIN, false);
        l.big_endian = true;
        let body: Vec<u8> = [0x4000u64, 1, 0x4000]
            .iter()
            .flat_map(|w| w.to_be_bytes())
            .collect();
        let s = l.decode(USER, &body).unwrap();
        assert_eq!(s.top_user_frames(), [Some(0x4000), None]);
    }

    #[test]
    fn short_or_lying_records_are_unreadable_not_a_panic() {
        let f = SampleFormat::IP | SampleFormat::CALLCHAIN;
        let l = layout(f, false);
        assert_eq!(l.decode(USER, &[1, 2, 3]).unwrap_err(), Unreadable);
        assert_eq!(
            l.decode(USER, &bytes(&[0x4000, 3, 1])).unwrap_err(),
            Unreadable
        );
        assert_eq!(
            l.decode(USER, &bytes(&[0x4000, u64::MAX])).unwrap_err(),
            Unreadable
        );
        let b = layout(SampleFormat::BRANCH_STACK, false);
        assert_eq!(
            b.decode(USER, &bytes(&[u64::MAX / 8])).unwrap_err(),
            Unreadable
        );
    }
}
