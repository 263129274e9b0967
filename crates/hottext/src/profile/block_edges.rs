//! Block edges from branch records (LBR, AMD's BRS, a synthesised trace): where a recording
//! has them, they say how control moved between the blocks of a hot function, which an
//! ext-TSP order of its hot part needs and samples cannot give.
//!
//! Two kinds, both within one function, both between blocks of the binary's block map:
//! - a *jump*: a record of a jump from a byte of one block to the first byte of another (or
//!   the same: a loop of one block). A jump into the middle of a block is not a block edge:
//!   the map does not describe that code as the compiler laid it out.
//! - a *fall-through*: with a filter that records every taken branch (`-b`, `-j any`), the
//!   code between two consecutive records of a sample ran straight through, from the older
//!   record's target to the newer one's source. Each block of that run passed control to the
//!   next one in address order (the padding between two blocks does not matter). A run that
//!   leaves its function, runs backwards, lies outside the block map or passes the end of a
//!   block that cannot fall through (a jump or a return; a record is missing) says nothing of
//!   blocks and is counted as unused.
//!
//! Some CPUs (Skylake servers among them; AutoFDO's reader knows the erratum) repeat the
//! newest record of a sample: the two newest records are the same branch, and the run between
//! them crosses code that cannot run straight through. Such a newest record is read as a
//! branch, with its run, only where that run is possible; else it is dropped
//! ([`Runs::repeated_top`]).
//!
//! The blocks at both ends of an edge ran: they are counted with 0 samples when no sample hit
//! them, so that the profile's `block` lines declare every block an edge names.

use iced_x86::{Decoder, DecoderOptions};

use super::code::Code;
use super::function_index::FunctionIndex;
use super::ran_blocks::falls_through;
use super::resolve::Counts;
use super::Stats;
use crate::binary::{Binary, BlockMap, Function, PlacedBlock, StatedAddr};

/// `n` records of a jump from `from` to `to`, both in function `f` (an index into the
/// binary's functions); says whether it was a block edge.
pub(super) fn jump(
    map: &BlockMap,
    func: &Function,
    f: u32,
    from: u64,
    to: u64,
    n: u64,
    counts: &mut Counts,
) -> bool {
    let (Some(source), Some(target)) = (inside(map, func, from), inside(map, func, to)) else {
        return false;
    };
    if target.start.0 != to {
        return false;
    }
    add_edge(func, f, source, target, n, counts);
    true
}

/// What runs of code between records are read against.
pub(super) struct Runs<'a> {
    pub binary: &'a Binary,
    pub map: &'a BlockMap,
    pub code: &'a Code<'a>,
    pub index: &'a FunctionIndex,
}

impl Runs<'_> {
    /// `n` runs of code from `start` to `end` between two records of every taken branch;
    /// counts them as used or unused in `stats`.
    pub fn fall_through(
        &self,
        (start, end): (u64, u64),
        n: u64,
        counts: &mut Counts,
        stats: &mut Stats,
    ) {
        match self.blocks(start, end) {
            Some((f, run)) => {
                self.add(f, run, n, counts);
                stats.fall_throughs += n;
            }
            None => stats.fall_throughs_unused += n,
        }
    }

    /// Whether the newest record of `n` samples, a copy of the record after it (`from` to
    /// `to`), was a real branch: the code from its target back to its source can run straight
    /// through. Then the run is counted; else the record is dropped, and counted so.
    pub fn repeated_top(
        &self,
        (from, to): (u64, u64),
        n: u64,
        counts: &mut Counts,
        stats: &mut Stats,
    ) -> bool {
        let Some((f, run)) = self.blocks(to, from) else {
            stats.branches_repeated_dropped += n;
            return false;
        };
        self.add(f, run, n, counts);
        stats.fall_throughs += n;
        true
    }

    /// The function and blocks a run from `start` to `end` passed through, if it is one.
    fn blocks(&self, start: u64, end: u64) -> Option<(u32, &[PlacedBlock])> {
        let f = self.index.at(start)?;
        if start > end || self.index.at(end) != Some(f) {
            return None;
        }
        let func = &self.binary.functions[f as usize];
        let first = inside(self.map, func, start)?;
        let last = inside(self.map, func, end)?;
        let run = self.map.blocks_in(first.start, last.end());
        let (_, passed) = run.split_last()?;
        passed
            .iter()
            .all(|b| self.can_fall_through(b))
            .then_some((f, run))
    }

    /// Whether control can run on from `block` into the next one (by its last instruction,
    /// or by the map's flags where the code cannot be read: not x86-64).
    fn can_fall_through(&self, block: &PlacedBlock) -> bool {
        let bytes = self.code.bytes(block.start.0, block.size as usize);
        let decoded = (bytes.len() as u64 == block.size).then(|| {
            Decoder::with_ip(64, bytes, block.start.0, DecoderOptions::NONE)
                .into_iter()
                .last()
        });
        match decoded {
            Some(Some(last)) if last.is_invalid() => false,
            Some(Some(last)) => falls_through(last.flow_control(), block.flags),
            // An empty block: nothing in it stops the run.
            Some(None) => true,
            None => falls_through(iced_x86::FlowControl::Next, block.flags),
        }
    }

    fn add(&self, f: u32, run: &[PlacedBlock], n: u64, counts: &mut Counts) {
        let func = &self.binary.functions[f as usize];
        for pair in run.windows(2) {
            add_edge(func, f, &pair[0], &pair[1], n, counts);
        }
        if let [only] = run {
            mark_ran(func, f, only, counts);
        }
    }
}

/// The block of the map that holds `addr`, if it lies within `func`.
fn inside<'m>(map: &'m BlockMap, func: &Function, addr: u64) -> Option<&'m PlacedBlock> {
    let block = map.block_at(StatedAddr(addr))?;
    (block.start >= func.start && block.end() <= func.end()).then_some(block)
}

fn add_edge(
    func: &Function,
    f: u32,
    from: &PlacedBlock,
    to: &PlacedBlock,
    n: u64,
    counts: &mut Counts,
) {
    mark_ran(func, f, from, counts);
    mark_ran(func, f, to, counts);
    *counts.block_edges.entry((f, from.id, to.id)).or_default() += n;
}

/// Counts `block` of function `f` as run, with no sample of its own if it has none.
fn mark_ran(func: &Function, f: u32, block: &PlacedBlock, counts: &mut Counts) {
    let offset = block.start.0 - func.start.0;
    counts
        .blocks
        .entry((f, block.id))
        .or_insert((offset, block.size, 0));
}

#[cfg(test)]
#[path = "block_edges_tests.rs"]
mod tests;
