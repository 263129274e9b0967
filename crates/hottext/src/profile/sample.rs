//! Decoding the body of a `PERF_RECORD_SAMPLE` ourselves.
//!
//! linux-perf-event-reader 0.10 reads the branch stack and throws it away, and it reads
//! `PERF_SAMPLE_READ` group values in the wrong order; branch-record profiles need the branch
//! stack, so we decode the fields we use, in the order of `perf_event.h`, and stop after the
//! user registers and stack (`--call-graph dwarf`). Borrowing the record's bytes keeps this
//! allocation-free.

use super::branch_filter::BranchFilter;
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
    /// What the branch filter and saved types tell of each branch record.
    pub branches: BranchFilter,
    /// Which user registers a sample carries (`attr.sample_regs_user`), one u64 each in bit order.
    regs_user_mask: u64,
    /// perf's numbers of the user registers, for the binary's architecture (if we unwind it).
    reg_numbers: Option<RegNumbers>,
    big_endian: bool,
}

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
    /// The user registers at the sample (`PERF_SAMPLE_REGS_USER`); none for a kernel thread.
    pub regs_user: Option<UserRegs<'a>>,
    /// The copy of the user stack from the stack pointer up (`PERF_SAMPLE_STACK_USER`), cut to
    /// the bytes the kernel could copy.
    pub stack_user: Option<&'a [u8]>,
    /// The event copies user stacks (`--call-graph dwarf`), so its chain has no user frames.
    pub user_stack_copied: bool,
}

/// The sample is shorter than its layout says, or uses a field we cannot skip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unreadable;

impl SampleLayout {
    /// `None` when samples carry `PERF_SAMPLE_READ` values: the reader crate drops the
    /// `PERF_FORMAT_LOST` bit that sizes them, so we could not find the fields after them.
    pub fn new(
        attr: &PerfEventAttr,
        endian: Endianness,
        reg_numbers: Option<RegNumbers>,
    ) -> Option<SampleLayout> {
        if attr.sample_format.contains(SampleFormat::READ) {
            return None;
        }
        let filter = attr.branch_sample_format;
        let big_endian = endian == Endianness::BigEndian;
        Some(SampleLayout {
            format: attr.sample_format,
            branch_hw_index: filter.contains(BranchSampleFormat::HW_INDEX),
            branches: BranchFilter::new(filter, big_endian),
            regs_user_mask: attr.sample_regs_user,
            reg_numbers,
            big_endian,
        })
    }

    /// Samples carry the user registers and stack for unwinding by CFI (`--call-graph dwarf`).
    pub(crate) fn has_user_stack(&self) -> bool {
        self.format
            .contains(SampleFormat::REGS_USER | SampleFormat::STACK_USER)
    }

    pub(crate) fn has_pid(&self) -> bool {
        self.format.contains(SampleFormat::TID)
    }

    /// The first u64 of a record body in the file's byte order (LOST_SAMPLES holds one).
    pub(crate) fn first_u64(&self, body: &[u8]) -> Option<u64> {
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
            regs_user: None,
            stack_user: None,
            user_stack_copied: self.has_user_stack(),
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
        if f.contains(SampleFormat::REGS_USER) {
            // abi 0 (PERF_SAMPLE_REGS_ABI_NONE): no user context, and no values follow.
            if cur.u64()? != 0 {
                let count = u64::from(self.regs_user_mask.count_ones());
                sample.regs_user = Some(UserRegs {
                    mask: self.regs_user_mask,
                    numbers: self.reg_numbers,
                    values: U64s {
                        bytes: cur.take_words(count, 1)?,
                        big_endian: self.big_endian,
                    },
                });
            }
        }
        if f.contains(SampleFormat::STACK_USER) {
            let size = cur.u64()?;
            if size > 0 {
                let bytes = cur.take(usize::try_from(size).map_err(|_| Unreadable)?)?;
                // dyn_size: how much of the copy the kernel could fill (never more than size).
                let filled =
                    usize::try_from(cur.u64()?).map_or(bytes.len(), |n| n.min(bytes.len()));
                sample.stack_user = Some(&bytes[..filled]);
            }
        }
        Ok(sample)
    }
}

impl Sample<'_> {
    /// The innermost two user-space frames: where the sample hit, and the return address into
    /// its caller. Kernel frames and the `PERF_CONTEXT_*` markers are skipped; a sample taken in
    /// the kernel starts at the user address the kernel will return to.
    pub(crate) fn top_user_frames(&self) -> [Option<u64>; 2] {
        let mut top = [None, None];
        if self.user_stack_copied {
            // `--call-graph dwarf`: the chain holds the kernel's frames only; the user frames
            // are for us to unwind from these registers, starting at their instruction pointer.
            top[0] = self.regs_user.and_then(|r| r.get(r.numbers?.ip));
            return top;
        }
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

/// The user registers of one sample, by perf's register numbers for the architecture.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UserRegs<'a> {
    mask: u64,
    pub numbers: Option<RegNumbers>,
    values: U64s<'a>,
}

/// perf's numbers of the registers an unwinder needs (`arch/*/include/uapi/asm/perf_regs.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RegNumbers {
    pub ip: u32,
    pub sp: u32,
    /// Frame pointer: %rbp, x29.
    pub fp: u32,
    /// Link register (aarch64 x30); x86-64 keeps the return address on the stack.
    pub lr: Option<u32>,
}

impl RegNumbers {
    /// The numbers for code of `arch`; `None` where we do not unwind.
    pub fn of(arch: object::Architecture) -> Option<RegNumbers> {
        match arch {
            object::Architecture::X86_64 => Some(RegNumbers {
                ip: 8,
                sp: 7,
                fp: 6,
                lr: None,
            }),
            object::Architecture::Aarch64 => Some(RegNumbers {
                ip: 32,
                sp: 31,
                fp: 29,
                lr: Some(30),
            }),
            _ => None,
        }
    }
}

impl<'a> UserRegs<'a> {
    /// Registers as a sample would carry them: `bytes` holds one little-endian u64 per bit of
    /// `mask`, in bit order.
    #[cfg(test)]
    pub(crate) fn from_bytes(
        mask: u64,
        numbers: Option<RegNumbers>,
        bytes: &'a [u8],
    ) -> UserRegs<'a> {
        UserRegs {
            mask,
            numbers,
            values: U64s {
                bytes,
                big_endian: false,
            },
        }
    }

    /// Register `n`, if the sample carries it: its value is the one after every lower
    /// register the mask holds.
    pub fn get(&self, n: u32) -> Option<u64> {
        let bit = 1u64.checked_shl(n)?;
        if self.mask & bit == 0 {
            return None;
        }
        let index = (self.mask & (bit - 1)).count_ones() as usize;
        self.values.iter().nth(index)
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
#[path = "sample_tests.rs"]
mod tests;
