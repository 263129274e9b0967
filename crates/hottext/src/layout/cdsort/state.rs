//! CDSort's working state: chains, the edges between them with their jumps, and merging (see
//! the module above for the definitions and steps; `gain` scores a merge, `build` sets up).

use super::{pack, unpack, CdsortParams};
use crate::graph::FuncId;
use crate::layout::pair_index::PairIndex;
use crate::prefetch::{prefetch, DISTANCE as PREFETCH_DISTANCE};

mod build;
mod gain;
#[cfg(test)]
mod merge_tests;

/// Keys refreshed together (see [`State::refresh`]).
pub(super) const REFRESH_BATCH: usize = 16;

#[derive(Clone, Copy)]
struct Jump {
    caller: FuncId,
    callee: FuncId,
    /// The next jump of the same edge (a linked list, so that joining edges costs O(1)).
    next: u32,
    /// Call site, in bytes from the caller's start: 32 bits, since no linkable function is
    /// 4 GiB long (x86-64 calls reach ±2 GiB), and a million jumps then take 8 MB less.
    offset: u32,
    weight: u64,
}

/// The jumps between two chains, in both directions. Edge `e`'s first jump is `jumps[e]`, so
/// that a gain's first two reads depend on nothing but `e` and can start together. Sixteen
/// bytes: its flags are apart (`State::dead`, `State::first_end_leads`).
struct Edge {
    ends: [u32; 2],
    /// The last jump of the edge's list.
    tail: u32,
    /// Merges done when the gain was last computed.
    computed_at: u32,
}

/// One bit per edge.
struct EdgeBits(Vec<u64>);

impl EdgeBits {
    fn new(edges: usize) -> EdgeBits {
        EdgeBits(vec![0; edges.div_ceil(64)])
    }

    fn get(&self, e: u32) -> bool {
        self.0[e as usize / 64] >> (e % 64) & 1 == 1
    }

    fn set(&mut self, e: u32, value: bool) {
        let word = &mut self.0[e as usize / 64];
        *word = (*word & !(1 << (e % 64))) | u64::from(value) << (e % 64);
    }
}

/// Where a function is: its chain (named by the slot of a function it started as), its
/// position in the chain's coordinates (see [`Chain::start`]), and the function after it in
/// the chain. The three share a cache line because a merge walks a chain and updates the
/// places as it goes.
#[derive(Clone, Copy)]
struct Place {
    chain: u32,
    next_member: FuncId,
    position: u64,
}

/// A chain: what a gain needs, together so that it costs one cache miss, and its functions as
/// a list linked through `Place::next_member` (its last function is in `State::last`).
#[derive(Clone, Copy)]
struct Chain {
    size: u64,
    hotness: u64,
    /// The position of the chain's first byte: a function's offset in the chain is its
    /// position minus this (wrapping). A merge keeps the surviving slot's coordinates, so that
    /// only the functions of the chain merged away are walked, not also those of the chain
    /// placed second: on the 1 M-function benchmark graph, 1.9 M steps instead of 12.5 M,
    /// each a random read that waits for the one before.
    start: u64,
    first: FuncId,
    /// Merges done when the chain last changed.
    changed: u32,
}

impl Chain {
    /// The offset in this chain of a function placed at `position`.
    fn offset(&self, position: u64) -> u64 {
        position.wrapping_sub(self.start)
    }
}

const NONE: u32 = u32::MAX;
/// The end of a chain's list of functions.
const NO_FUNC: FuncId = FuncId(u32::MAX);

pub(super) struct State<'a> {
    params: &'a CdsortParams,
    jumps: Vec<Jump>,
    edges: Vec<Edge>,
    /// Joined into another edge, merged along, or given up (too long to merge).
    dead: EdgeBits,
    /// Whether the chain of `ends[0]` came first in the better order found by the last gain.
    first_end_leads: EdgeBits,
    place: Vec<Place>,
    /// Per slot; stale once the chain is merged into another.
    chains: Vec<Chain>,
    /// Each chain's last function, per slot: only a merge needs it.
    last: Vec<FuncId>,
    /// Functions per chain slot, apart from `Chain`: whether two chains are too long to merge
    /// is asked before anything else is loaded, and this array is an eighth of that one.
    functions: Vec<u32>,
    /// Edge ids per chain slot, some dead: they are dropped when the chain is merged into
    /// another.
    adj: Vec<Vec<u32>>,
    /// The live edges by their two chains.
    pairs: PairIndex,
    /// During a merge: the live edges of the chain merged away and their other chains (kept
    /// for its allocation).
    moving: Vec<(u32, u32)>,
    merges: u32,
    total_hotness: f64,
    /// What a jump scores across the whole hot code: the baseline a merge improves on.
    far_score: f64,
}

impl<'a> State<'a> {
    /// Whether edge `e` was joined into another, merged along or given up.
    pub(super) fn is_dead(&self, e: u32) -> bool {
        self.dead.get(e)
    }

    /// Starts loading edge `e`'s flag, its edge and first jump, to be read soon.
    pub(super) fn prefetch_key(&self, e: u32) {
        self.prefetch_dead(e);
        prefetch(&self.edges[e as usize]);
        prefetch(&self.jumps[e as usize]);
    }

    /// Starts loading edge `e`'s flag.
    pub(super) fn prefetch_dead(&self, e: u32) {
        prefetch(&self.dead.0[e as usize / 64]);
    }

    /// Whether a chain of edge `e` changed since its gain was computed.
    pub(super) fn is_stale(&self, e: u32) -> bool {
        let edge = &self.edges[e as usize];
        edge.ends
            .iter()
            .any(|&c| self.chains[c as usize].changed > edge.computed_at)
    }

    /// Drops the keys of dead edges and recomputes the stale ones. Each key's first reads (its
    /// edge and first jump, prefetched as it was popped, then its chains and where that jump's
    /// ends are) are random reads of arrays of hundreds of megabytes on large graphs; started
    /// for the whole batch one level at a time, they overlap instead of waiting one after
    /// another. On the 1 M-function benchmark graph, with the queue's sorted runs, this took a
    /// fifth off cdsort's CPU time.
    pub(super) fn refresh(&mut self, keys: &mut Vec<u64>) {
        // Dead keys go without reading anything more; the others start all their next reads at
        // once, also those of keys that turn out too long to merge (stale too: their chains grew
        // since), because waiting for the lengths first would cost another round of misses.
        keys.retain(|k| {
            let e = unpack(*k).1;
            if self.dead.get(e) {
                return false;
            }
            prefetch(&self.edges[e as usize]);
            prefetch(&self.jumps[e as usize]);
            true
        });
        for k in keys.iter() {
            let e = unpack(*k).1;
            let ends = self.edges[e as usize].ends;
            prefetch(&self.functions[ends[0] as usize]);
            prefetch(&self.functions[ends[1] as usize]);
            prefetch(&self.chains[ends[0] as usize]);
            prefetch(&self.chains[ends[1] as usize]);
            let jump = &self.jumps[e as usize];
            prefetch(&self.place[jump.caller.index()]);
            prefetch(&self.place[jump.callee.index()]);
        }
        keys.retain_mut(|k| {
            let e = unpack(*k).1;
            if !self.is_stale(e) {
                return true;
            }
            match self.consider(e) {
                Some(fresh) => {
                    *k = fresh;
                    true
                }
                None => false,
            }
        });
    }

    /// Merges the two chains of edge `e` in the order last found best.
    pub(super) fn merge(&mut self, e: u32) {
        let [a, b] = self.edges[e as usize].ends;
        // The first reads of a merge depend on nothing but the two chains, yet the branches
        // between them would issue them one after another: start them together.
        prefetch(&self.first_end_leads.0[e as usize / 64]);
        for c in [a, b] {
            prefetch(&self.adj[c as usize]);
            prefetch(&self.last[c as usize]);
            prefetch(&self.place[self.chains[c as usize].first.index()]);
        }
        self.pairs.prefetch(a, b);
        let (first, second) = if self.first_end_leads.get(e) {
            (a, b)
        } else {
            (b, a)
        };
        prefetch(&self.place[self.last[first as usize].index()]);
        // The chain with more edges survives (counting dead ones, a cheap estimate): the
        // other's edges are the ones re-pointed.
        let (into, from) = if self.adj[a as usize].len() >= self.adj[b as usize].len() {
            (a, b)
        } else {
            (b, a)
        };
        // The edges the walk below reads first, which its look-ahead does not cover.
        for &x in self.adj[from as usize].iter().take(PREFETCH_DISTANCE) {
            prefetch(&self.edges[x as usize]);
            prefetch(&self.dead.0[x as usize / 64]);
        }
        let (lead, tail) = (self.chains[first as usize], self.chains[second as usize]);
        self.merges += 1;
        // The merged chain keeps `into`'s coordinates: `from`'s functions move to them.
        let start = if into == first {
            lead.start
        } else {
            tail.start.wrapping_sub(lead.size)
        };
        let from_start = if from == first {
            start
        } else {
            start.wrapping_add(lead.size)
        };
        let shift = from_start.wrapping_sub(self.chains[from as usize].start);
        let mut f = self.chains[from as usize].first;
        while f != NO_FUNC {
            let place = &mut self.place[f.index()];
            place.chain = into;
            place.position = place.position.wrapping_add(shift);
            f = place.next_member;
        }
        self.place[self.last[first as usize].index()].next_member = tail.first;
        self.last[into as usize] = self.last[second as usize];
        self.chains[into as usize] = Chain {
            size: lead.size + tail.size,
            hotness: lead.hotness + tail.hotness,
            start,
            first: lead.first,
            changed: self.merges,
        };

        self.functions[into as usize] += self.functions[from as usize];

        // The edge between the two is now inside the chain. Each other edge of `from` joins
        // into's edge to the same neighbour, or is re-pointed at `into`; or it dies when the
        // two would be too long to merge, which they stay (a seventh of the edges re-pointed
        // on the 1 M-function benchmark graph, which then cost no look-up here nor later).
        self.dead.set(e, true);
        self.pairs.remove(a, b, e);
        // Two passes, so that the random reads of each overlap: the first walks from's edges,
        // prefetching the edge a few places ahead and the pairs' slots it will look up; the
        // second looks them up.
        let from_edges = std::mem::take(&mut self.adj[from as usize]);
        let mut moving = std::mem::take(&mut self.moving);
        for (i, &x) in from_edges.iter().enumerate() {
            if let Some(&ahead) = from_edges.get(i + PREFETCH_DISTANCE) {
                prefetch(&self.edges[ahead as usize]);
                prefetch(&self.dead.0[ahead as usize / 64]);
            }
            if self.dead.get(x) {
                continue;
            }
            let neighbour = self.neighbour(x, from);
            // Whether `into` and the neighbour are too long to merge is asked in the second
            // pass: waiting here for the neighbour's length would stall the walk on each edge.
            self.pairs.prefetch(from, neighbour);
            self.pairs.prefetch(into, neighbour);
            prefetch(&self.functions[neighbour as usize]);
            moving.push((x, neighbour));
        }
        // The edge each moved edge may join: its ends are read to confirm the pair.
        for &(_, neighbour) in &moving {
            if let Some(onto) = self.pairs.candidate(into, neighbour) {
                prefetch(&self.edges[onto as usize]);
            }
        }
        let mut edges = std::mem::take(&mut self.adj[into as usize]);
        for &(x, neighbour) in &moving {
            // Checked before each insert, since one merge may re-point most edges; the edges
            // not re-pointed yet go back in under their old pair, which is still right.
            if self.pairs.is_crowded() {
                self.fill_pairs();
            }
            self.pairs.remove(from, neighbour, x);
            if self.too_long([into, neighbour]) {
                self.dead.set(x, true);
                continue;
            }
            match self
                .pairs
                .find(into, neighbour, |id| self.edges[id as usize].ends)
            {
                Some(onto) => self.join_edges(onto, x),
                None => {
                    self.edges[x as usize].ends = [into, neighbour];
                    self.pairs.insert(into, neighbour, x);
                    edges.push(x);
                }
            }
        }
        moving.clear();
        self.moving = moving;
        self.adj[into as usize] = edges;
    }

    /// The other end of edge `x`, one end of which is chain `c`.
    fn neighbour(&self, x: u32, c: u32) -> u32 {
        let [a, b] = self.edges[x as usize].ends;
        if a == c {
            b
        } else {
            a
        }
    }

    /// Moves the jumps of edge `x` to edge `onto`; `x` dies.
    fn join_edges(&mut self, onto: u32, x: u32) {
        let onto_tail = self.edges[onto as usize].tail;
        self.jumps[onto_tail as usize].next = x;
        self.edges[onto as usize].tail = self.edges[x as usize].tail;
        self.dead.set(x, true);
    }

    /// Chains by decreasing density (exact, by cross-multiplication), ties by first function.
    pub(super) fn into_order(self) -> Vec<FuncId> {
        let mut live: Vec<Chain> = (0..self.chains.len())
            .filter(|&c| self.place[(self.chains[c].first).index()].chain == c as u32)
            .map(|c| self.chains[c])
            .collect();
        live.sort_unstable_by(|x, y| {
            (y.hotness as u128 * x.size as u128)
                .cmp(&(x.hotness as u128 * y.size as u128))
                .then(x.first.cmp(&y.first))
        });
        let mut order = Vec::with_capacity(self.place.len());
        for chain in live {
            let mut f = chain.first;
            while f != NO_FUNC {
                order.push(f);
                f = self.place[f.index()].next_member;
            }
        }
        order
    }
}
