//! The greedy merge of [`super`]: chains of blocks, the jumps between them, the best merge of
//! each joined pair, and merging.

use std::cell::Cell;
use std::collections::{BTreeMap, BinaryHeap};

use super::{jump_score, BlockJump, SPLIT_THRESHOLD};

mod plan;

use plan::{Candidate, Kind, Layout, Plan};

/// Gains at most this are no gain: float sums of the same jumps in another order differ by
/// far less, and a real gain is at least a count of 1 times a weight of 0.1/1024.
const EPSILON: f64 = 1e-9;

#[derive(Default)]
struct Chain {
    blocks: Vec<usize>,
    bytes: u64,
    count: u64,
    /// The jumps between two blocks of the chain (no self-loops: they never change).
    inner: Vec<usize>,
    /// The chains joined to this one, each with the edge (into `Chains::edges`) of the jumps
    /// between them; ordered, so that gains are computed in the same order on every run.
    neighbours: BTreeMap<usize, usize>,
    /// Merges this chain took part in: a queued candidate of an older version is stale.
    version: u32,
}

/// The jumps between two chains, and the best gain last found for merging them.
struct Edge {
    /// Jump ids, both ways.
    jumps: Vec<usize>,
    /// Whether the gain was above [`EPSILON`], so that a candidate of it is queued (maybe under
    /// the names of chains merged since, which [`Chains::merge_all`] maps to their chains now).
    queued: bool,
    /// The two chains and their versions when the gain was found.
    found_for: ([usize; 2], [u32; 2]),
}

/// Where a block is, together: scoring a jump reads all of it for both ends.
#[derive(Clone, Copy)]
struct Place {
    chain: usize,
    /// Its index in the chain.
    index: usize,
    /// Its first byte, from the chain's start.
    offset: u64,
    size: u64,
}

pub(super) struct Chains<'a> {
    jumps: &'a [BlockJump],
    /// Per block.
    place: Vec<Place>,
    /// Per chain name (its lowest block); a chain merged into another is left empty.
    chains: Vec<Chain>,
    edges: Vec<Edge>,
    queue: BinaryHeap<Candidate>,
    /// Jump scores evaluated so far, against the budget of [`Chains::merge_all`].
    work: Cell<u64>,
}

impl<'a> Chains<'a> {
    /// One chain per block, and the edges of `jumps`, whose ends are in range. `sizes` are at
    /// least 1.
    pub(super) fn new(sizes: &[u64], jumps: &'a [BlockJump]) -> Chains<'a> {
        let n = sizes.len();
        let (mut incoming, mut outgoing) = (vec![0u64; n], vec![0u64; n]);
        for j in jumps {
            outgoing[j.from] = outgoing[j.from].saturating_add(j.count);
            incoming[j.to] = incoming[j.to].saturating_add(j.count);
        }
        let chains = (0..n)
            .map(|b| Chain {
                blocks: vec![b],
                bytes: sizes[b],
                count: incoming[b].max(outgoing[b]),
                ..Chain::default()
            })
            .collect();
        let mut state = Chains {
            jumps,
            place: (0..n)
                .map(|b| Place {
                    chain: b,
                    index: 0,
                    offset: 0,
                    size: sizes[b],
                })
                .collect(),
            chains,
            edges: Vec::new(),
            queue: BinaryHeap::new(),
            work: Cell::new(0),
        };
        for (id, j) in jumps.iter().enumerate().filter(|(_, j)| j.from != j.to) {
            match state.chains[j.from].neighbours.get(&j.to) {
                Some(&e) => state.edges[e].jumps.push(id),
                None => {
                    let e = state.edges.len();
                    state.edges.push(Edge {
                        jumps: vec![id],
                        queued: false,
                        found_for: ([0; 2], [u32::MAX; 2]),
                    });
                    state.chains[j.from].neighbours.insert(j.to, e);
                    state.chains[j.to].neighbours.insert(j.from, e);
                }
            }
        }
        for c in 0..n {
            let neighbours: Vec<usize> = state.chains[c].neighbours.keys().copied().collect();
            for other in neighbours.into_iter().filter(|&o| o > c) {
                state.queue_best_merge(c, other);
            }
        }
        state
    }

    /// Merges the best pair until no merge gains or `budget` jump scores were evaluated. A
    /// candidate whose chains changed since its gain was found is found again when it reaches
    /// the top (see "Lazy gains" in the module above).
    pub(super) fn merge_all(mut self, budget: u64) -> Self {
        while let Some(candidate) = self.queue.pop() {
            if self.work.get() > budget {
                break;
            }
            let Plan { x, y, .. } = candidate.plan;
            if candidate.versions == [self.chains[x].version, self.chains[y].version] {
                self.merge(candidate.plan);
                continue;
            }
            // Chains are named by their lowest block: these are the chains holding x and y now.
            let (a, b) = (self.place[x].chain, self.place[y].chain);
            let (a, b) = (a.min(b), a.max(b));
            if a == b {
                continue; // merged together since
            }
            let versions = [self.chains[a].version, self.chains[b].version];
            if self.edges[self.chains[a].neighbours[&b]].found_for != ([a, b], versions) {
                self.queue_best_merge(a, b);
            }
        }
        self
    }

    /// The entry's chain, then the others by decreasing density (exact, by
    /// cross-multiplication), equally dense ones by their lowest block.
    pub(super) fn into_order(self) -> Vec<usize> {
        let mut live: Vec<&Chain> = self
            .chains
            .iter()
            .filter(|c| !c.blocks.is_empty())
            .collect();
        live[1..].sort_by(|a, b| {
            (u128::from(b.count) * u128::from(a.bytes))
                .cmp(&(u128::from(a.count) * u128::from(b.bytes)))
        });
        live.iter().flat_map(|c| c.blocks.iter().copied()).collect()
    }

    /// Finds the best merge of chains `a` and `b` and queues it if it gains.
    fn queue_best_merge(&mut self, a: usize, b: usize) {
        let (a, b) = (a.min(b), a.max(b));
        let mut best: Option<(f64, Plan)> = None;
        let mut consider = |gain: f64, plan: Plan| {
            if best.is_none_or(|(g, _)| gain > g) {
                best = Some((gain, plan));
            }
        };
        // Y·X is X·Y with the roles swapped; the entry's chain may only come first.
        for (x, y) in [(a, b), (b, a)].into_iter().filter(|&(_, y)| y != 0) {
            let plan = Plan {
                x,
                y,
                split: self.chains[x].blocks.len(),
                kind: Kind::XY,
            };
            let layout = Layout::new(self, plan);
            consider(self.change(&layout, self.between(x, y), |_| 0.0), plan);
        }
        for (x, y) in [(a, b), (b, a)] {
            self.consider_splits(x, y, &mut consider);
        }
        let versions = [self.chains[a].version, self.chains[b].version];
        let best = best.filter(|&(gain, _)| gain > EPSILON);
        let e = self.chains[a].neighbours[&b];
        self.edges[e].queued = best.is_some();
        self.edges[e].found_for = ([a, b], versions);
        if let Some((gain, plan)) = best {
            let versions = [self.chains[plan.x].version, self.chains[plan.y].version];
            self.queue.push(Candidate {
                gain,
                plan,
                versions,
            });
        }
    }

    /// What `jumps` (between chains, or crossing a split point) score in `layout`, less what
    /// they score now (`now`: nothing for jumps between chains, which are apart).
    fn change(&self, layout: &Layout, jumps: &[usize], now: impl Fn(usize) -> f64) -> f64 {
        self.work.set(self.work.get() + jumps.len() as u64);
        jumps
            .iter()
            .enumerate()
            .map(|(i, &id)| layout.score(self, id) - now(i))
            .sum()
    }

    /// The jumps between chains `x` and `y`, both ways.
    fn between(&self, x: usize, y: usize) -> &[usize] {
        &self.edges[self.chains[x].neighbours[&y]].jumps
    }

    /// Offers `consider` the gain of each merge that splits X at one of its split points.
    /// Splitting moves X's own jumps too, but only those that cross the split point: each
    /// part moves as a whole. So each point looks only at the jumps that cross it (on compiled
    /// code most jumps are short, and this is a fraction of X's jumps).
    fn consider_splits(&self, x: usize, y: usize, consider: &mut impl FnMut(f64, Plan)) {
        let kinds: &[Kind] = match (x, y) {
            (0, _) => &[Kind::X1YX2],
            (_, 0) => &[Kind::YX2X1],
            _ => &[Kind::X1YX2, Kind::YX2X1, Kind::X2X1Y],
        };
        let points = self.split_points(x, y);
        if points.is_empty() {
            return;
        }
        // The jumps crossing each point, with what they score now, as one flat list with
        // `first[i]` the start of point i's part.
        let inner = &self.chains[x].inner;
        let reach: Vec<std::ops::Range<usize>> = inner
            .iter()
            .map(|&id| {
                let j = &self.jumps[id];
                let (i, k) = (self.place[j.from].index, self.place[j.to].index);
                let crossed = |p: &usize| *p <= i.min(k);
                let through = |p: &usize| *p <= i.max(k);
                points.partition_point(crossed)..points.partition_point(through)
            })
            .collect();
        let mut first = vec![0usize; points.len() + 1];
        for r in &reach {
            for p in r.clone() {
                first[p + 1] += 1;
            }
        }
        for p in 0..points.len() {
            first[p + 1] += first[p];
        }
        let total = first[points.len()];
        let (mut crossing, mut scores_now) = (vec![0; total], vec![0.0; total]);
        let mut filled = first.clone();
        for (&id, r) in inner.iter().zip(&reach) {
            let score = self.score_in_place(id);
            for p in r.clone() {
                (crossing[filled[p]], scores_now[filled[p]]) = (id, score);
                filled[p] += 1;
            }
        }
        let between = self.between(x, y);
        for (p, &split) in points.iter().enumerate() {
            let (moved, now) = (&crossing[first[p]..first[p + 1]], &scores_now[first[p]..]);
            for &kind in kinds {
                let plan = Plan { x, y, split, kind };
                let layout = Layout::new(self, plan);
                let gain = self.change(&layout, between, |_| 0.0)
                    + self.change(&layout, moved, |i| now[i]);
                consider(gain, plan);
            }
        }
    }

    /// What jump `id`, inside a chain, scores there now.
    fn score_in_place(&self, id: usize) -> f64 {
        let j = &self.jumps[id];
        let (from, to) = (self.place[j.from], self.place[j.to]);
        jump_score(from.offset + from.size, to.offset, j.count)
    }

    /// Where X is tried split when merged with Y: everywhere in a short chain; in a long one,
    /// after a block that jumps to Y's first block, or before one that Y's last block jumps to.
    fn split_points(&self, x: usize, y: usize) -> Vec<usize> {
        let len = self.chains[x].blocks.len();
        if len <= SPLIT_THRESHOLD {
            return (1..len).collect();
        }
        let (first, last) = (
            self.chains[y].blocks[0],
            *self.chains[y].blocks.last().unwrap(),
        );
        let mut points: Vec<usize> = self
            .between(x, y)
            .iter()
            .filter_map(|&id| {
                let j = &self.jumps[id];
                let (from, to) = (self.place[j.from], self.place[j.to]);
                match (from.chain == x, to.chain == x) {
                    (true, false) if j.to == first => Some(from.index + 1),
                    (false, true) if j.from == last => Some(to.index),
                    _ => None,
                }
            })
            .filter(|&p| 0 < p && p < len)
            .collect();
        points.sort_unstable();
        points.dedup();
        points
    }

    /// Carries out `plan`: the merged chain keeps the lower name.
    fn merge(&mut self, plan: Plan) {
        let layout = Layout::new(self, plan);
        let blocks = layout.blocks(self);
        let (into, from) = (plan.x.min(plan.y), plan.x.max(plan.y));
        let moved = std::mem::take(&mut self.chains[from]);
        let between = self.chains[into].neighbours.remove(&from).unwrap();
        let chain = &mut self.chains[into];
        chain.inner.extend(moved.inner);
        chain.inner.append(&mut self.edges[between].jumps);
        chain.bytes = chain.bytes.saturating_add(moved.bytes);
        chain.count = chain.count.saturating_add(moved.count);
        chain.version += 1;
        self.chains[from].version = moved.version + 1;
        for (&n, &e) in moved.neighbours.iter().filter(|(&n, _)| n != into) {
            self.chains[n].neighbours.remove(&from);
            match self.chains[into].neighbours.get(&n) {
                Some(&kept) => {
                    let joined = std::mem::take(&mut self.edges[e].jumps);
                    self.edges[kept].jumps.extend(joined);
                    // A candidate of either edge stands for the joined one.
                    self.edges[kept].queued |= self.edges[e].queued;
                }
                None => {
                    self.chains[into].neighbours.insert(n, e);
                    self.chains[n].neighbours.insert(into, e);
                }
            }
        }
        let mut at = 0;
        for (i, &b) in blocks.iter().enumerate() {
            let place = &mut self.place[b];
            (place.chain, place.index, place.offset) = (into, i, at);
            at += place.size;
        }
        self.chains[into].blocks = blocks;
        // Pairs with a queued candidate are found again when it reaches the top; the others
        // (no gain when last found) now, or they would never be looked at again.
        let unqueued: Vec<usize> = self.chains[into]
            .neighbours
            .iter()
            .filter(|&(_, &e)| !self.edges[e].queued)
            .map(|(&n, _)| n)
            .collect();
        for n in unqueued {
            self.queue_best_merge(into, n);
        }
    }
}
