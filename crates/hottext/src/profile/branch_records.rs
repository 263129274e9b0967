//! Branch records turned into what they show: calls and tail calls between functions
//! ([`Counts::add`]), and jumps and fall-throughs between the blocks of one function
//! ([`block_edges`]). Read before the inference of blocks that ran, which starts from them.

use super::block_edges::{self, Runs};
use super::callers::Hop;
use super::code::{Branch, Code};
use super::function_index::FunctionIndex;
use super::resolve::Counts;
use super::tally::PairCounts;
use super::Stats;
use crate::binary::{Binary, BlockMap};

/// What a recording says a branch record is: its branch filter admits only calls, or perf
/// saved each record's type; else the code at its source tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Recorded {
    Call = 0,
    Jump = 1,
    Unknown = 2,
}

/// The branch records of a recording, as address pairs in the binary.
#[derive(Default)]
pub(super) struct BranchTally {
    /// (source, target) of branch records, by what the recording says the source is.
    pub by_kind: [PairCounts; 3],
    /// (start, end) of the code that ran straight through between two consecutive records of
    /// a sample, where the records are every taken branch.
    pub fall_throughs: PairCounts,
    /// (source, target) of a sample's newest record where the next one is the same branch:
    /// a real branch, or a copy the CPU wrote (see [`block_edges`]).
    pub repeated_tops: PairCounts,
}

/// Counts the records of `tally` into `counts`, against the binary's functions (`index`),
/// its block map, if any, and its code.
pub(super) fn read(
    binary: &Binary,
    map: Option<&BlockMap>,
    code: &Code<'_>,
    index: &FunctionIndex,
    tally: BranchTally,
    counts: &mut Counts,
    stats: &mut Stats,
) {
    let records = Records { binary, map, index };
    let [calls, jumps, unknown] = tally.by_kind;
    let recorded = [
        (Recorded::Call, calls),
        (Recorded::Jump, jumps),
        (Recorded::Unknown, unknown),
    ];
    for (recorded, pairs) in recorded {
        for ((from, to), n) in pairs.into_sorted() {
            let branch = match recorded {
                Recorded::Call => Some(Branch::Call),
                Recorded::Jump => Some(Branch::Jump),
                Recorded::Unknown => code.branch_at(from),
            };
            records.branch(branch, (from, to), n, counts, stats);
        }
    }
    let runs = map.map(|map| Runs {
        binary,
        map,
        code,
        index,
    });
    for (record, n) in tally.repeated_tops.into_sorted() {
        // Without a block map nothing tells a copy from a branch: it counts as recorded.
        if (runs.as_ref()).is_none_or(|runs| runs.repeated_top(record, n, counts, stats)) {
            records.branch(code.branch_at(record.0), record, n, counts, stats);
        }
    }
    if let Some(runs) = &runs {
        for (run, n) in tally.fall_throughs.into_sorted() {
            runs.fall_through(run, n, counts, stats);
        }
    }
}

/// What a branch record is read against: the binary, its block map and its functions.
struct Records<'a> {
    binary: &'a Binary,
    map: Option<&'a BlockMap>,
    index: &'a FunctionIndex,
}

impl Records<'_> {
    /// One branch record, `n` times: a call is an edge from its source; a jump is one when
    /// it enters another function at its entry (a tail call), and a block edge when it stays
    /// in its function between blocks of the map; the rest are counted.
    fn branch(
        &self,
        branch: Option<Branch>,
        (from, to): (u64, u64),
        n: u64,
        counts: &mut Counts,
        stats: &mut Stats,
    ) {
        let index = self.index;
        let (Some(caller), Some(callee)) = (index.at(from), index.at(to)) else {
            stats.calls_unresolved += n;
            return;
        };
        let hop = |tail| Hop {
            caller,
            callee,
            site: Some(from),
            tail,
        };
        match branch {
            Some(Branch::Call) => counts.add(hop(false), n, false, index, stats),
            Some(Branch::Jump) if caller == callee => {
                stats.branches_within_functions += n;
                let func = &self.binary.functions[caller as usize];
                if (self.map)
                    .is_some_and(|map| block_edges::jump(map, func, caller, from, to, n, counts))
                {
                    stats.branches_to_block_edges += n;
                }
            }
            Some(Branch::Jump) if index.starting_at(to).is_some() => {
                counts.add(hop(true), n, true, index, stats)
            }
            Some(Branch::Return) => stats.branches_returns += n,
            Some(Branch::Jump | Branch::Other) => stats.branches_other += n,
            None => stats.branches_unclassified += n,
        }
    }
}
