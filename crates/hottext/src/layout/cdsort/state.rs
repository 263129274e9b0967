//! CDSort's working state: chains, the edges between them with their jumps, and the model
//! that scores a merge (see the module above for the definitions and steps).

use super::{pack, unpack, CdsortParams};
use crate::graph::FuncId;
use crate::prefetch::{prefetch, DISTANCE as PREFETCH_DISTANCE};

mod build;
#[cfg(test)]
mod merge_tests;

use crate::layout::pair_index::PairIndex;

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
/// offset in bytes from the chain's start, and the function after it in the chain. The three
/// share a cache line because a merge walks the chain and updates the places as it goes.
#[derive(Clone, Copy)]
struct Place {
    chain: u32,
    next_member: FuncId,
    offset: u64,
}

/// A chain: what a gain needs, together so that it costs one cache miss, and its functions as
/// a list linked through `Place::next_member`.
#[derive(Clone, Copy)]
struct Chain {
    size: u64,
    hotness: u64,
    first: FuncId,
    last: FuncId,
    /// Merges done when the chain last changed.
    changed: u32,
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

    /// Starts loading edge `e` and its first jump, to be read soon, unless the edge is dead:
    /// then only its flag is read (a fifth of the keys refreshed on the 1 M-function benchmark
    /// graph, whose two random reads each went to waste).
    pub(super) fn prefetch_edge(&self, e: u32) {
        if !self.is_dead(e) {
            prefetch(&self.edges[e as usize]);
            prefetch(&self.jumps[e as usize]);
        }
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
            let ends = self.edges[e as usize].ends;
            prefetch(&self.functions[ends[0] as usize]);
            prefetch(&self.functions[ends[1] as usize]);
            prefetch(&self.chains[ends[0] as usize]);
            prefetch(&self.chains[ends[1] as usize]);
            let jump = &self.jumps[e as usize];
            prefetch(&self.place[jump.caller.index()]);
            prefetch(&self.place[jump.callee.index()]);
            true
        });
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

    /// Computes the best merge along edge `e` and returns its queue key; none when the merged
    /// chain would be too long (chains only grow, so it never fits later).
    pub(super) fn consider(&mut self, e: u32) -> Option<u64> {
        let (key, a_first) = self.best_merge(e)?;
        self.edges[e as usize].computed_at = self.merges;
        self.first_end_leads.set(e, a_first);
        Some(key)
    }

    /// [`State::consider`] without recording: the key, and whether `ends[0]`'s chain leads.
    fn best_merge(&self, e: u32) -> Option<(u64, bool)> {
        let ends = self.edges[e as usize].ends;
        if self.too_long(ends) {
            return None;
        }
        let [a, b] = ends.map(|c| self.chains[c as usize]);
        let (gain_ab, gain_ba) = self.gains(e, a, b);
        let tie = (gain_ab - gain_ba).abs() <= 1e-9 * gain_ab.abs().max(gain_ba.abs());
        let a_first = if tie {
            a.first < b.first
        } else {
            gain_ab > gain_ba
        };
        Some((pack(if a_first { gain_ab } else { gain_ba }, e), a_first))
    }

    /// Whether the two chains together would have more functions than a chain may. Chains only
    /// grow, so such a pair never merges.
    fn too_long(&self, [a, b]: [u32; 2]) -> bool {
        self.functions[a as usize] + self.functions[b as usize] > self.params.max_chain_functions
    }

    /// The gains of merging the two chains of edge `e`, `a` and `b`, as a·b and as b·a.
    fn gains(&self, e: u32, a: Chain, b: Chain) -> (f64, f64) {
        let edge = &self.edges[e as usize];
        let (mut score_ab, mut score_ba, mut weight) = (0.0, 0.0, 0.0);
        let mut j = e;
        while j != NONE {
            let jump = &self.jumps[j as usize];
            let (caller, callee) = (
                self.place[jump.caller.index()],
                self.place[jump.callee.index()],
            );
            // One end of each jump is in `a`, the other in `b`; the site lies inside its chain.
            let (site, target) = (caller.offset + u64::from(jump.offset), callee.offset);
            let (ab, ba) = if caller.chain == edge.ends[0] {
                (a.size - site + target, b.size - target + site)
            } else {
                (a.size - target + site, b.size - site + target)
            };
            let w = jump.weight as f64;
            score_ab += w * self.locality(ab);
            score_ba += w * self.locality(ba);
            weight += w;
            j = jump.next;
        }
        let frequency = self.params.frequency_weight * self.misses_saved(a, b);
        let scale = a.size.min(b.size) as f64;
        let baseline = weight * self.far_score;
        (
            (score_ab - baseline + frequency) / scale,
            (score_ba - baseline + frequency) / scale,
        )
    }

    /// How likely a jump of `distance` bytes stays within cached code.
    fn locality(&self, distance: u64) -> f64 {
        let d = distance.max(1) as f64;
        if self.params.distance_power == 0.25 {
            // The default, and the hottest arithmetic of the algorithm: two square roots cost
            // a fraction of a general power.
            1.0 / d.sqrt().sqrt()
        } else {
            d.powf(-self.params.distance_power)
        }
    }

    /// Expected i-TLB misses of chains `a` and `b` apart, minus those of the two merged.
    fn misses_saved(&self, a: Chain, b: Chain) -> f64 {
        let misses = |hotness: u64, size: u64| {
            let page = hotness as f64 / size as f64 * self.params.cache_page_bytes as f64;
            if page >= self.total_hotness {
                return 0.0; // one page holds everything: never evicted
            }
            let p = page / self.total_hotness;
            hotness as f64 * power(1.0 - p, self.params.cache_entries)
        };
        misses(a.hotness, a.size) + misses(b.hotness, b.size)
            - misses(a.hotness + b.hotness, a.size + b.size)
    }

    /// Merges the two chains of edge `e` in the order last found best.
    pub(super) fn merge(&mut self, e: u32) {
        let edge = &self.edges[e as usize];
        let [a, b] = edge.ends;
        let (first, second) = if self.first_end_leads.get(e) {
            (a, b)
        } else {
            (b, a)
        };
        // The chain with more edges survives (counting dead ones, a cheap estimate): the
        // other's edges are the ones re-pointed.
        let (into, from) = if self.adj[a as usize].len() >= self.adj[b as usize].len() {
            (a, b)
        } else {
            (b, a)
        };
        let (lead, tail) = (self.chains[first as usize], self.chains[second as usize]);
        self.merges += 1;
        let mut f = tail.first;
        while f != NO_FUNC {
            let place = &mut self.place[f.index()];
            place.offset += lead.size;
            f = place.next_member;
        }
        let mut f = self.chains[from as usize].first;
        while f != NO_FUNC {
            let place = &mut self.place[f.index()];
            place.chain = into;
            f = place.next_member;
        }
        self.place[lead.last.index()].next_member = tail.first;
        self.chains[into as usize] = Chain {
            size: lead.size + tail.size,
            hotness: lead.hotness + tail.hotness,
            first: lead.first,
            last: tail.last,
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

/// `x` to the power `n`, by squaring: what `f64::powi` computes, without its call into the
/// compiler's runtime library, which was a tenth of the cost of a gain.
fn power(mut x: f64, mut n: u32) -> f64 {
    let mut result = 1.0;
    loop {
        if n & 1 == 1 {
            result *= x;
        }
        n >>= 1;
        if n == 0 {
            return result;
        }
        x *= x;
    }
}
