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
//! of the queue with a value older than its chains ("lazy greedy"), together with the next
//! [`REFRESH_BATCH`] keys (whose reads then overlap). On a 1 M-function graph that does a tenth
//! of the work; the two differ only when a merge raises a neighbour's gain, which then waits in
//! the queue at its old value unless it was in a refreshed batch.
//!
//! Ties, so that the same graph always gives the same order: gains are ranked as `f32`, and equal
//! ones go to the lower edge id (edges are numbered by the ids of the functions they first
//! joined); when X·Y and Y·X gain the same, the chain with the lower first function leads;
//! equally dense chains are laid out by their first functions.

use serde::Serialize;

mod state;

use state::{State, REFRESH_BATCH};

use super::queue::MaxQueue;
use super::Algorithm;
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

pub(super) const ALGORITHM: Algorithm = Algorithm {
    name: "cdsort",
    help: "Cache-directed sort (LLVM's CDSort), with the profile's call sites",
    tried_by_auto: true,
    order: |graph, params| order(graph, &params.cdsort),
};

pub(super) fn order(graph: &Graph, params: &CdsortParams) -> Vec<FuncId> {
    let mut state = State::new(graph, params);
    let mut queue = MaxQueue::from_runs(state.first_keys());
    let mut batch = Vec::with_capacity(REFRESH_BATCH);
    while let Some(key) = queue.pop() {
        let (gain, e) = unpack(key);
        if let Some(top) = queue.peek() {
            // The next key's flag and edge are random reads of large arrays: start them now,
            // so that they overlap this key's work (waiting for the flag first cost more than
            // the edges loaded in vain for dead keys).
            state.prefetch_key(unpack(top).1);
        }
        if state.is_dead(e) {
            continue; // joined into another edge, merged along or given up since it was queued
        }
        if state.is_stale(e) {
            // Recompute it with the keys queued after it, whose recomputation comes next too
            // (nine in ten pops find a stale key), and queue them again.
            batch.clear();
            batch.push(key);
            while batch.len() < REFRESH_BATCH {
                match queue.pop() {
                    Some(k) => {
                        state.prefetch_dead(unpack(k).1);
                        batch.push(k);
                    }
                    None => break,
                }
            }
            state.refresh(&mut batch);
            queue.extend(batch.iter().copied());
            continue;
        }
        if gain <= 0.0 {
            break; // the best pair loses: no merge gains any more
        }
        state.merge(e);
    }
    state.into_order()
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
