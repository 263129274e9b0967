//! Cache-Directed Sort (CDSort), the function layout of LLVM's `CodeLayout.cpp` (S. Pupyrev; used
//! by lld's `--call-graph-profile-sort=cdsort` and BOLT's `-reorder-functions=cdsort`), described
//! with the layout work of "Optimizing Function Layout for Mobile Applications" (Hoag, Lee,
//! Mestre, Pupyrev, LCTES 2023).
//!
//! What: an order of functions. Why: C3 places a callee after its heaviest caller and never
//! asks where in the caller the call sits or what a merge does to the pages the hot code needs.
//! CDSort scores every candidate merge with a model of both: a call is cheap when it jumps a short
//! way (i-cache), and hot code is cheap when it is packed densely (i-TLB).
//!
//! Definitions:
//! - *chain*: a sequence of functions laid out contiguously; at first one chain per function.
//! - *jump*: a call from a call site (a byte offset in the caller) to the callee's first byte,
//!   with a weight. With the profile's call sites each site is a jump; call weight without a site
//!   (profiles that predate sites) is one jump from the middle of the caller, the estimate lld
//!   uses when it lacks offsets. Self-calls and zero weights are skipped: they say nothing about
//!   placement.
//! - *hotness* of a function: the largest of its samples, its incoming and its outgoing jump
//!   weight, as LLVM adjusts counts: a function seen only on stacks (no self samples) still runs.
//! - *distance score* of a jump: `weight × distance^-distance_power`, distance in bytes from the
//!   call site to the callee (at least 1): the likelihood that both still share cached lines
//!   falls smoothly with distance.
//! - *frequency score* of a chain: its expected i-TLB misses, `hotness × (1 − p)^cache_entries`,
//!   where `p` is the share of all hotness that lands on one `cache_page_bytes` page of the
//!   chain: a dense chain's pages stay cached, a sparse one's are evicted between visits.
//! - *gain* of merging chains X and Y in one order: the distance score of the jumps between them
//!   (minus what those jumps score from one end of the hot code to the other), plus
//!   `frequency_weight` × the misses saved, divided by the smaller chain's size so that short
//!   chains merge first.
//!
//! Steps:
//! 1. Put every function in a chain of its own.
//! 2. For every pair of chains joined by jumps, compute the gain of X·Y and of Y·X and keep the
//!    better; pairs whose merged chain would exceed `max_chain_functions` are not considered
//!    (the limit keeps the work per merge bounded on huge graphs).
//! 3. Merge the pair with the largest positive gain and repeat until no pair gains.
//! 4. Sort the chains by decreasing density (hotness per byte) and concatenate them.
//!
//! One difference from LLVM, for speed: after a merge LLVM recomputes at once the gain of every
//! pair the new chain is part of; here a pair's gain is recomputed when the pair reaches the top
//! of the queue with a value older than its chains ("lazy greedy"). On a 1 M-function graph that
//! does a tenth of the work; the two differ only when a merge raises a neighbour's gain, which
//! then waits in the queue at its old value.
//!
//! Ties, so that the same graph always gives the same order: gains are ranked as `f32`, and equal
//! ones go to the lower edge id (edges are numbered by the ids of the functions they first
//! joined); when X·Y and Y·X gain the same, the chain with the lower first function leads;
//! equally dense chains are laid out by their first functions.

use serde::Serialize;

use super::queue::{prefetch, MaxQueue};
use crate::graph::{FuncId, Graph};

/// CDSort's model, with LLVM's defaults (tuned there on large front-end-bound binaries).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CdsortParams {
    /// Entries of the modelled i-TLB: a page is a hit while fewer than this many other pages
    /// were touched since (LLVM: 16).
    pub cache_entries: u32,
    /// Bytes one entry covers in that model (LLVM: 2048).
    pub cache_page_bytes: u64,
    /// No chain grows past this many functions: bounds the cost of a merge, which is linear
    /// in the chain's calls (LLVM: 128).
    pub max_chain_functions: u32,
    /// How fast a call's locality falls with its distance (LLVM: 0.25).
    pub distance_power: f64,
    /// Weight of the i-TLB (frequency) term against the distance term (LLVM: 0.25).
    pub frequency_weight: f64,
}

impl Default for CdsortParams {
    fn default() -> Self {
        CdsortParams {
            cache_entries: 16,
            cache_page_bytes: 2048,
            max_chain_functions: 128,
            distance_power: 0.25,
            frequency_weight: 0.25,
        }
    }
}

pub(super) fn order(graph: &Graph, params: &CdsortParams) -> Vec<FuncId> {
    let mut state = State::new(graph, params);
    let initial: Vec<u64> = (0..state.edges.len() as u32)
        .filter_map(|e| state.consider(e))
        .collect();
    let mut queue = MaxQueue::new(initial);
    // A recomputed key that is still the largest is taken at once rather than pushed and
    // popped again: the same order of merges (on the 1 M-function benchmark graph 266 000 of the
    // 8.1 M recomputed keys, about 8 % of the time).
    let mut next = None;
    while let Some(key) = next.take().or_else(|| queue.pop()) {
        let (gain, e) = unpack(key);
        if let Some(top) = queue.peek() {
            // The next key's edge is a random read of a large array: start it now, so that
            // it overlaps this key's work (a fifth of the loop's time on 1 M functions).
            prefetch(&state.edges[unpack(top).1 as usize]);
        }
        if state.edges[e as usize].dead {
            continue; // joined into another edge, or merged along, since it was queued
        }
        if state.is_stale(e) {
            if let Some(fresh) = state.consider(e) {
                if queue.peek().is_none_or(|top| fresh >= top) {
                    next = Some(fresh);
                } else {
                    queue.push(fresh);
                }
            }
            continue;
        }
        if gain <= 0.0 {
            break; // the best pair loses: no merge gains any more
        }
        state.merge(e);
    }
    state.into_order()
}

struct Jump {
    caller: FuncId,
    callee: FuncId,
    /// The next jump of the same edge (a linked list, so that joining edges costs O(1)).
    next: u32,
    /// Call site, in bytes from the caller's start.
    offset: u64,
    weight: u64,
}

/// The jumps between two chains, in both directions.
struct Edge {
    ends: [u32; 2],
    head: u32,
    tail: u32,
    /// Merges done when the gain was last computed, and the better order found then.
    computed_at: u32,
    first_end_leads: bool,
    dead: bool,
}

/// Where a function is: its chain (named by the slot of a function it started as) and its
/// offset in bytes from the chain's start.
#[derive(Clone, Copy)]
struct Place {
    chain: u32,
    offset: u64,
}

/// A chain: what a gain needs, together so that it costs one cache miss, and its functions as
/// a list linked through `State::next_member`.
#[derive(Clone, Copy)]
struct Chain {
    size: u64,
    hotness: u64,
    functions: u32,
    first: FuncId,
    last: FuncId,
    /// Merges done when the chain last changed.
    changed: u32,
}

const NONE: u32 = u32::MAX;

struct State<'a> {
    params: &'a CdsortParams,
    jumps: Vec<Jump>,
    edges: Vec<Edge>,
    place: Vec<Place>,
    next_member: Vec<FuncId>,
    /// Per slot; stale once the chain is merged into another.
    chains: Vec<Chain>,
    /// Edge ids per chain slot, some dead: they are dropped when the chain takes part in a merge.
    adj: Vec<Vec<u32>>,
    /// Per chain slot, during a merge: the surviving chain's edge to that chain, else `NONE`.
    /// An array rather than a map of chain pairs: a merge looks up every edge of both chains,
    /// and on a 1 M-function graph a map's probes were a fifth of CDSort's time (cache misses).
    edge_to: Vec<u32>,
    merges: u32,
    total_hotness: f64,
    /// What a jump scores across the whole hot code: the baseline a merge improves on.
    far_score: f64,
}

impl<'a> State<'a> {
    fn new(graph: &Graph, params: &'a CdsortParams) -> State<'a> {
        let n = graph.funcs.len();
        let size: Vec<u64> = graph.funcs.iter().map(|f| f.size.max(1)).collect();
        let mut jumps = jumps(graph);

        let mut hotness: Vec<u64> = graph.funcs.iter().map(|f| f.samples).collect();
        let (mut incoming, mut outgoing) = (vec![0u64; n], vec![0u64; n]);
        for j in &jumps {
            outgoing[j.caller as usize] += j.weight;
            incoming[j.callee as usize] += j.weight;
        }
        for f in 0..n {
            hotness[f] = hotness[f].max(incoming[f]).max(outgoing[f]);
        }
        let total_hotness: u64 = hotness.iter().sum();
        let hot_bytes: u64 = (0..n).filter(|&f| hotness[f] > 0).map(|f| size[f]).sum();

        // One edge per pair of functions, its jumps linked in sorted order.
        let pair = |j: &Jump| (j.caller.min(j.callee), j.caller.max(j.callee));
        jumps.sort_unstable_by_key(|j| (pair(j), j.caller, j.offset, j.weight));
        let mut edges: Vec<Edge> = Vec::new();
        let mut adj: Vec<Vec<u32>> = vec![Vec::new(); n];
        for i in 0..jumps.len() {
            if i > 0 && pair(&jumps[i - 1]) == pair(&jumps[i]) {
                jumps[i - 1].next = i as u32;
                if let Some(edge) = edges.last_mut() {
                    edge.tail = i as u32;
                }
                continue;
            }
            let (a, b) = pair(&jumps[i]);
            let e = edges.len() as u32;
            edges.push(Edge {
                ends: [a, b],
                head: i as u32,
                tail: i as u32,
                computed_at: 0,
                first_end_leads: true,
                dead: false,
            });
            adj[a as usize].push(e);
            adj[b as usize].push(e);
        }

        State {
            params,
            jumps,
            edges,
            place: (0..n as u32)
                .map(|f| Place {
                    chain: f,
                    offset: 0,
                })
                .collect(),
            next_member: vec![NONE; n],
            chains: (0..n)
                .map(|f| Chain {
                    size: size[f],
                    hotness: hotness[f],
                    functions: 1,
                    first: f as FuncId,
                    last: f as FuncId,
                    changed: 0,
                })
                .collect(),
            adj,
            edge_to: vec![NONE; n],
            merges: 0,
            total_hotness: total_hotness as f64,
            far_score: (hot_bytes.max(1) as f64).powf(-params.distance_power),
        }
    }

    /// Whether a chain of edge `e` changed since its gain was computed.
    fn is_stale(&self, e: u32) -> bool {
        let edge = &self.edges[e as usize];
        edge.ends
            .iter()
            .any(|&c| self.chains[c as usize].changed > edge.computed_at)
    }

    /// Computes the best merge along edge `e` and returns its queue key; none when the merged
    /// chain would be too long (chains only grow, so it never fits later).
    fn consider(&mut self, e: u32) -> Option<u64> {
        let [a, b] = self.edges[e as usize].ends.map(|c| self.chains[c as usize]);
        if a.functions + b.functions > self.params.max_chain_functions {
            return None;
        }
        let (gain_ab, gain_ba) = self.gains(e, a, b);
        let tie = (gain_ab - gain_ba).abs() <= 1e-9 * gain_ab.abs().max(gain_ba.abs());
        let a_first = if tie {
            a.first < b.first
        } else {
            gain_ab > gain_ba
        };
        let edge = &mut self.edges[e as usize];
        edge.computed_at = self.merges;
        edge.first_end_leads = a_first;
        Some(pack(if a_first { gain_ab } else { gain_ba }, e))
    }

    /// The gains of merging the two chains of edge `e`, `a` and `b`, as a·b and as b·a.
    fn gains(&self, e: u32, a: Chain, b: Chain) -> (f64, f64) {
        let edge = &self.edges[e as usize];
        let (mut score_ab, mut score_ba, mut weight) = (0.0, 0.0, 0.0);
        let mut j = edge.head;
        while j != NONE {
            let jump = &self.jumps[j as usize];
            let (caller, callee) = (
                self.place[jump.caller as usize],
                self.place[jump.callee as usize],
            );
            // One end of each jump is in `a`, the other in `b`; the site lies inside its chain.
            let (site, target) = (caller.offset + jump.offset, callee.offset);
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
        (distance.max(1) as f64).powf(-self.params.distance_power)
    }

    /// Expected i-TLB misses of chains `a` and `b` apart, minus those of the two merged.
    fn misses_saved(&self, a: Chain, b: Chain) -> f64 {
        let misses = |hotness: u64, size: u64| {
            let page = hotness as f64 / size as f64 * self.params.cache_page_bytes as f64;
            if page >= self.total_hotness {
                return 0.0; // one page holds everything: never evicted
            }
            let p = page / self.total_hotness;
            hotness as f64 * (1.0 - p).powi(self.params.cache_entries as i32)
        };
        misses(a.hotness, a.size) + misses(b.hotness, b.size)
            - misses(a.hotness + b.hotness, a.size + b.size)
    }

    /// Merges the two chains of edge `e` in the order last found best.
    fn merge(&mut self, e: u32) {
        let edge = &self.edges[e as usize];
        let [a, b] = edge.ends;
        let (first, second) = if edge.first_end_leads { (a, b) } else { (b, a) };
        // The chain with more edges survives, so re-pointing edges costs the smaller side.
        let (into, from) = if self.adj[a as usize].len() >= self.adj[b as usize].len() {
            (a, b)
        } else {
            (b, a)
        };
        let (lead, tail) = (self.chains[first as usize], self.chains[second as usize]);
        self.merges += 1;
        let mut f = tail.first;
        while f != NONE {
            self.place[f as usize].offset += lead.size;
            f = self.next_member[f as usize];
        }
        let mut f = self.chains[from as usize].first;
        while f != NONE {
            self.place[f as usize].chain = into;
            f = self.next_member[f as usize];
        }
        self.next_member[lead.last as usize] = tail.first;
        self.chains[into as usize] = Chain {
            size: lead.size + tail.size,
            hotness: lead.hotness + tail.hotness,
            functions: lead.functions + tail.functions,
            first: lead.first,
            last: tail.last,
            changed: self.merges,
        };

        // The edge between the two is now inside the chain. Each other edge of `from` joins
        // into's edge to the same neighbour, or is re-pointed at `into`.
        self.edges[e as usize].dead = true;
        let mut edges = std::mem::take(&mut self.adj[into as usize]);
        edges.retain(|&x| !self.edges[x as usize].dead);
        for &x in &edges {
            let neighbour = self.neighbour(x, into);
            self.edge_to[neighbour as usize] = x;
        }
        for x in std::mem::take(&mut self.adj[from as usize]) {
            if self.edges[x as usize].dead {
                continue;
            }
            let neighbour = self.neighbour(x, from);
            match self.edge_to[neighbour as usize] {
                NONE => {
                    self.edges[x as usize].ends = [into, neighbour];
                    edges.push(x);
                }
                onto => self.join_edges(onto, x),
            }
        }
        for &x in &edges {
            let neighbour = self.neighbour(x, into);
            self.edge_to[neighbour as usize] = NONE;
        }
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
        let (head, tail) = (self.edges[x as usize].head, self.edges[x as usize].tail);
        let onto_tail = self.edges[onto as usize].tail;
        self.jumps[onto_tail as usize].next = head;
        self.edges[onto as usize].tail = tail;
        self.edges[x as usize].dead = true;
    }

    /// Chains by decreasing density (exact, by cross-multiplication), ties by first function.
    fn into_order(self) -> Vec<FuncId> {
        let mut live: Vec<Chain> = (0..self.chains.len())
            .filter(|&c| self.place[self.chains[c].first as usize].chain == c as u32)
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
            while f != NONE {
                order.push(f);
                f = self.next_member[f as usize];
            }
        }
        order
    }
}

/// A queue key: the gain as an `f32` mapped to an unsigned integer of the same order, then the
/// edge, lower ids ranking higher.
fn pack(gain: f64, e: u32) -> u64 {
    let bits = (gain as f32).to_bits();
    let ordered = if bits >> 31 == 1 {
        !bits
    } else {
        bits | 1 << 31
    };
    (u64::from(ordered) << 32) | u64::from(!e)
}

fn unpack(key: u64) -> (f32, u32) {
    let ordered = (key >> 32) as u32;
    let bits = if ordered >> 31 == 1 {
        ordered & !(1 << 31)
    } else {
        !ordered
    };
    (f32::from_bits(bits), !(key as u32))
}

/// The graph's jumps that say something about placement: self-calls and zero weights do not.
fn jumps(graph: &Graph) -> Vec<Jump> {
    graph
        .jumps()
        .into_iter()
        .filter(|j| j.caller != j.callee && j.weight > 0)
        .map(|j| Jump {
            caller: j.caller,
            callee: j.callee,
            next: NONE,
            offset: j.offset,
            weight: j.weight,
        })
        .collect()
}
