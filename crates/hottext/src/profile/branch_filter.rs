//! What a branch record is, as far as the recording says: its branch filter may admit calls
//! only (`-j any_call`, `hottext record`'s choice), or perf may have saved each record's type
//! (`-j any,save_type`); otherwise (`-b`, `-j any`) the code at the record's source must tell.

use linux_perf_data::linux_perf_event_reader::BranchSampleFormat;

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

/// What an event's branch filter says of its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BranchFilter {
    /// The filter admits calls only: every record is a call.
    calls_only: bool,
    /// perf saved each record's branch type, in a layout we can read (little-endian).
    types_saved: bool,
    /// The filter admits every taken branch (`-b`, `-j any`): between two consecutive records
    /// the code ran straight through, so the records give fall-throughs too.
    every_branch: bool,
    /// The flags are little-endian bitfields, whose abort bit we can read.
    little_endian: bool,
}

impl BranchFilter {
    pub fn new(filter: BranchSampleFormat, big_endian: bool) -> BranchFilter {
        BranchFilter {
            calls_only: admits_calls_only(filter),
            types_saved: filter.contains(BranchSampleFormat::TYPE_SAVE) && !big_endian,
            every_branch: filter.contains(BranchSampleFormat::ANY),
            little_endian: !big_endian,
        }
    }

    /// Whether the records of a sample are every taken branch, newest first, with nothing
    /// left out between two of them.
    pub fn records_every_branch(&self) -> bool {
        self.every_branch
    }

    /// Whether a record with these flags ends a transaction that aborted (TSX): the code
    /// before it did not run to completion, so no fall-through is read across it. A layout
    /// whose bit cannot be read (big-endian) counts as one.
    pub fn aborted(&self, flags: u64) -> bool {
        !self.little_endian || flags & ABORT_BIT != 0
    }

    /// What the recording says of a branch record with these flags.
    pub fn recorded(&self, flags: u64) -> RecordedBranch {
        if self.calls_only {
            return RecordedBranch::Call;
        }
        if !self.types_saved {
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
}

/// Where a branch entry's flags keep the saved type (`struct perf_branch_entry`, after the
/// mispred, predicted, in_tx and abort bits and 16 bits of cycles), little-endian bitfields.
const BRANCH_TYPE_SHIFT: u32 = 20;
/// The `abort` bit of those flags.
const ABORT_BIT: u64 = 1 << 3;
const BRANCH_TYPE_MASK: u64 = 0xf;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_branch_record_is_what_the_filter_or_its_saved_type_says() {
        use BranchSampleFormat as F;
        assert!(admits_calls_only(F::USER | F::ANY_CALL));
        assert!(admits_calls_only(F::CALL | F::IND_CALL | F::HW_INDEX));
        assert!(!admits_calls_only(F::USER | F::ANY)); // perf record -b
        assert!(!admits_calls_only(F::ANY_CALL | F::ANY_RETURN));
        assert!(!admits_calls_only(F::USER));

        let typed_filter = BranchFilter::new(F::ANY | F::TYPE_SAVE, false);
        // Type bits over mispred/predicted and some cycles, as the kernel writes them.
        let typed = |t: u64| (t << BRANCH_TYPE_SHIFT) | (7 << 4) | 0b10;
        let kinds =
            [0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 12, 15].map(|t| typed_filter.recorded(typed(t)));
        use RecordedBranch::*;
        assert_eq!(
            kinds,
            [Unknown, Jump, Jump, Jump, Call, Call, Return, Other, Call, Return, Other, Unknown]
        );
        let untyped = BranchFilter::new(F::ANY, false);
        assert_eq!(untyped.recorded(typed(4)), Unknown);
        let big_endian = BranchFilter::new(F::ANY | F::TYPE_SAVE, true);
        assert_eq!(big_endian.recorded(typed(4)), Unknown);
        let calls = BranchFilter::new(F::ANY_CALL | F::USER, false);
        assert_eq!(calls.recorded(typed(2)), Call);

        assert!(untyped.records_every_branch());
        assert!(!calls.records_every_branch());
        assert!(!BranchFilter::new(F::USER | F::CALL_STACK, false).records_every_branch());
        assert!(!untyped.aborted(typed(2)));
        assert!(untyped.aborted(typed(2) | 0b1000));
        assert!(big_endian.aborted(0));
    }
}
