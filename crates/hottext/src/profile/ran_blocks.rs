//! Blocks that must have run: a function's blocks that no sample hit, but that ran whenever a
//! sampled block did, by the function's control flow between its blocks.
//!
//! Samples catch a block in proportion to the time spent in it, so a short block on the hot
//! path (a loop's set-up, the return after it) often draws none: 10 080 samples over 9.8 MiB of
//! the demo's hot code left blocks that ran in a quarter of its executed instructions
//! unsampled. Split out, each run of such a block leaves the hot range and comes back. Two
//! kinds of block ran for sure when a sampled block ran: one that *dominates* it (every path
//! from the function's entry to it passes there) and one that *post-dominates* it (every path
//! from it to the function's exits passes there). The profile records them as `block` lines
//! with 0 samples: ran, inferred, not sampled.
//!
//! The graph comes from the binary's code and its block map: the last instruction of each
//! block (and any jump before it) gives its successors; the map's flags say whether it falls
//! through. A direct jump out of the function is a tail call, an exit; so are returns and ends
//! that cannot fall through (a call that never returns, a trap). Where the graph cannot be
//! seen, the inference never concludes from it: an indirect jump or a jump into the middle of
//! a block may lead anywhere (its block gets every block and the exit as successors), a
//! landing pad is entered by the unwinder (another entry, for dominance; and since any call may
//! unwind to one, a function with landing pads gets no post-dominators), and a function that
//! jumps into a part split off it (a build with basic-block sections) may be entered again
//! from there (no dominators). A call that never comes back (`longjmp`, an exit in a callee)
//! still makes a post-dominator a guess; that and any other wrong inference only costs speed:
//! basic-block sections move code, they never change what it computes.

use iced_x86::{Decoder, DecoderOptions, FlowControl, Instruction};

use super::code::Code;
use super::dominators;
use crate::binary::bb_addr_map::{FLAG_CAN_FALL_THROUGH, FLAG_EH_PAD, FLAG_RETURN, FLAG_TAIL_CALL};
use crate::binary::{Function, PlacedBlock};

/// The blocks of `func` (`blocks`: the block map's blocks inside it, by address) that ran
/// whenever one of the `sampled` blocks (by id) ran, other than those; by address.
/// `is_split_part(addr)`: whether `addr` lies in a part split off `func`.
pub(super) fn must_have_run<'m>(
    code: &Code<'_>,
    func: &Function,
    blocks: &'m [PlacedBlock],
    sampled: &[u32],
    is_split_part: impl Fn(u64) -> bool,
) -> Vec<&'m PlacedBlock> {
    if !code.is_decoded() || blocks.is_empty() {
        return Vec::new();
    }
    let flow = Flow::of(code, func, blocks, is_split_part);
    // By index into `blocks`, looked up once: a function may have thousands of blocks.
    let ids: foldhash::HashSet<u32> = sampled.iter().copied().collect();
    let is_sampled: Vec<bool> = blocks.iter().map(|b| ids.contains(&b.id)).collect();
    let sampled: Vec<usize> = (0..blocks.len()).filter(|&i| is_sampled[i]).collect();
    let mut ran = vec![false; blocks.len()];
    if let Some(idom) = flow.dominators() {
        mark_chains(&idom, &sampled, &mut ran);
    }
    if let Some(ipdom) = flow.post_dominators() {
        mark_chains(&ipdom, &sampled, &mut ran);
    }
    (blocks.iter().zip(ran).enumerate())
        .filter(|&(i, (_, ran))| ran && !is_sampled[i])
        .map(|(_, (b, _))| b)
        .collect()
}

/// Marks in `ran` every block on the chain of immediate dominators above each of `from` (the
/// virtual nodes past the blocks left out).
fn mark_chains(idom: &[Option<usize>], from: &[usize], ran: &mut [bool]) {
    let mut seen = vec![false; idom.len()];
    for &start in from {
        let mut node = start;
        while !seen[node] {
            seen[node] = true;
            if let Some(flag) = ran.get_mut(node) {
                *flag = true;
            }
            match idom[node] {
                Some(up) if up != node => node = up,
                _ => break,
            }
        }
    }
}

/// A function's control flow: nodes `0..n` are its blocks by address, `n` the exit (every
/// return, tail call and end that cannot go on) and `n + 1` the entry (the first block and the
/// landing pads).
struct Flow {
    succs: Vec<Vec<usize>>,
    /// Some block jumps into a part split off the function, from where control may come back
    /// anywhere: dominators would be guesses.
    reentered: bool,
    has_landing_pads: bool,
}

impl Flow {
    fn of(
        code: &Code<'_>,
        func: &Function,
        blocks: &[PlacedBlock],
        is_split_part: impl Fn(u64) -> bool,
    ) -> Flow {
        let n = blocks.len();
        let (exit, entry) = (n, n + 1);
        let mut flow = Flow {
            succs: vec![Vec::new(); n + 2],
            reentered: false,
            has_landing_pads: false,
        };
        let block_at = |addr: u64| blocks.binary_search_by_key(&addr, |b| b.start.0).ok();
        let (start, end) = (func.start.0, func.end().0);
        for (i, block) in blocks.iter().enumerate() {
            let mut succs = Vec::new();
            let mut unknown = false;
            let bytes = code.bytes(block.start.0, block.size as usize);
            let mut decoder = Decoder::with_ip(64, bytes, block.start.0, DecoderOptions::NONE);
            let mut insn = Instruction::default();
            let mut last = FlowControl::Exception;
            while decoder.can_decode() {
                decoder.decode_out(&mut insn);
                last = insn.flow_control();
                if insn.is_invalid() {
                    unknown = true;
                }
                if !matches!(
                    last,
                    FlowControl::UnconditionalBranch | FlowControl::ConditionalBranch
                ) {
                    continue;
                }
                let target = insn.near_branch_target();
                if (start..end).contains(&target) {
                    match block_at(target) {
                        Some(j) => succs.push(j),
                        None => unknown = true,
                    }
                } else {
                    flow.reentered |= is_split_part(target);
                    succs.push(exit);
                }
            }
            // Bytes missing from the file: the block's end is not known.
            unknown |= bytes.len() as u64 != block.size;
            unknown |= last == FlowControl::IndirectBranch;
            let falls_through = falls_through(last, block.flags);
            // Between a block and the next one there may be padding (the nops that align a
            // loop's head): falling through runs over it.
            let next = blocks.get(i + 1);
            match (falls_through, next) {
                (true, Some(_)) => succs.push(i + 1),
                // Past the described code, or no way on (a call that never returns, a trap).
                (true, None) | (false, _) if !matches!(last, FlowControl::UnconditionalBranch) => {
                    succs.push(exit)
                }
                _ => {}
            }
            if block.flags & (FLAG_RETURN | FLAG_TAIL_CALL) != 0 {
                succs.push(exit);
            }
            if unknown {
                succs = (0..=n).collect();
            }
            if block.flags & FLAG_EH_PAD != 0 {
                flow.has_landing_pads = true;
                flow.succs[entry].push(i);
            }
            succs.sort_unstable();
            succs.dedup();
            flow.succs[i] = succs;
        }
        if blocks[0].start == func.start {
            flow.succs[entry].insert(0, 0);
        } else {
            // No block at the function's entry: nothing dominates from there.
            flow.reentered = true;
        }
        flow
    }

    /// Each block's immediate dominator (the entry node above the first block), or `None` when
    /// the function may be entered where the graph does not show.
    fn dominators(&self) -> Option<Vec<Option<usize>>> {
        let entry = self.succs.len() - 1;
        (!self.reentered).then(|| dominators::immediate(&self.succs, entry))
    }

    /// Each block's immediate post-dominator (the exit node below the last ones), or `None`
    /// when a call may unwind to a landing pad, a path the graph does not show.
    fn post_dominators(&self) -> Option<Vec<Option<usize>>> {
        if self.has_landing_pads {
            return None;
        }
        let n = self.succs.len() - 2;
        let mut preds = vec![Vec::new(); self.succs.len()];
        // The entry node's edges stay out: it is no block's successor.
        for (from, to) in self.succs.iter().enumerate().take(n) {
            for &t in to {
                preds[t].push(from);
            }
        }
        Some(dominators::immediate(&preds, n))
    }
}

/// Whether control can run on from a block whose last instruction has the flow `last` into
/// the next block: not after a return or a jump (a jump through a pointer included); after a
/// conditional jump, yes; after anything else (a call, which may never return) as the block
/// map's flags (`flags`) say.
pub(super) fn falls_through(last: FlowControl, flags: u8) -> bool {
    match last {
        FlowControl::Return | FlowControl::UnconditionalBranch | FlowControl::IndirectBranch => {
            false
        }
        FlowControl::ConditionalBranch => true,
        _ => flags & FLAG_CAN_FALL_THROUGH != 0,
    }
}

#[cfg(test)]
#[path = "ran_blocks_tests.rs"]
mod tests;
