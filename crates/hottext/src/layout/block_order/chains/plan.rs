//! How two chains become one: the ways to merge them ([`Kind`], [`Plan`]), a plan queued with
//! its gain ([`Candidate`]), and where a plan puts each block ([`Layout`]).

use std::cmp::Ordering;

use super::{jump_score, Chains, Place};

/// Where X's parts and Y go in a merge (X split at `Plan::split` into X1 and X2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// X1·X2·Y: X unsplit, then Y.
    XY,
    X1YX2,
    YX2X1,
    X2X1Y,
}

/// One way to merge chain `y` into chain `x` (chains by name).
#[derive(Debug, Clone, Copy)]
pub(super) struct Plan {
    pub(super) x: usize,
    pub(super) y: usize,
    /// X1 is X's blocks before this index, X2 the rest.
    pub(super) split: usize,
    pub(super) kind: Kind,
}

/// A plan with its gain, queued while the two chains are as they were (`versions`).
pub(super) struct Candidate {
    pub(super) gain: f64,
    pub(super) plan: Plan,
    pub(super) versions: [u32; 2],
}

impl Candidate {
    fn pair(&self) -> (usize, usize) {
        (self.plan.x.min(self.plan.y), self.plan.x.max(self.plan.y))
    }
}

/// The heap's order: the larger gain, then the pair with the lower names.
impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> Ordering {
        self.gain
            .total_cmp(&other.gain)
            .then_with(|| other.pair().cmp(&self.pair()))
            .then_with(|| other.versions.cmp(&self.versions))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Candidate {}

/// Where a plan puts each block of its two chains: the start of X1, of X2 and of Y in the
/// merged chain.
pub(super) struct Layout {
    pub(super) plan: Plan,
    /// X1's bytes: X2's blocks move back by this much.
    x1_bytes: u64,
    starts: [u64; 3],
}

impl Layout {
    pub(super) fn new(state: &Chains, plan: Plan) -> Layout {
        let x = &state.chains[plan.x];
        let x1 = match x.blocks.get(plan.split) {
            Some(&b) => state.place[b].offset,
            None => x.bytes,
        };
        let (x2, y) = (x.bytes - x1, state.chains[plan.y].bytes);
        let starts = match plan.kind {
            Kind::XY => [0, x1, x1 + x2],
            Kind::X1YX2 => [0, x1 + y, x1],
            Kind::YX2X1 => [y + x2, y, 0],
            Kind::X2X1Y => [x2, 0, x1 + x2],
        };
        Layout {
            plan,
            x1_bytes: x1,
            starts,
        }
    }

    /// The first byte in the merged chain of the block at `place`.
    fn start(&self, place: Place) -> u64 {
        let [x1, x2, y] = self.starts;
        if place.chain == self.plan.y {
            y + place.offset
        } else if place.index < self.plan.split {
            x1 + place.offset
        } else {
            x2 + place.offset - self.x1_bytes
        }
    }

    /// What jump `id` scores in the merged chain.
    pub(super) fn score(&self, state: &Chains, id: usize) -> f64 {
        let j = &state.jumps[id];
        let (from, to) = (state.place[j.from], state.place[j.to]);
        jump_score(self.start(from) + from.size, self.start(to), j.count)
    }

    /// The merged chain's blocks, first to last.
    pub(super) fn blocks(&self, state: &Chains) -> Vec<usize> {
        let (x, y) = (
            &state.chains[self.plan.x].blocks,
            &state.chains[self.plan.y].blocks,
        );
        let (x1, x2) = x.split_at(self.plan.split);
        let parts: [&[usize]; 3] = match self.plan.kind {
            Kind::XY => [x1, x2, y],
            Kind::X1YX2 => [x1, y, x2],
            Kind::YX2X1 => [y, x2, x1],
            Kind::X2X1Y => [x2, x1, y],
        };
        parts.concat()
    }
}
