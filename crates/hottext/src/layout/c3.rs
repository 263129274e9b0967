//! Call-Chain Clustering (C3), from "Optimizing Function Placement for Large-Scale Data-Center
//! Applications" (Ottoni and Maher, CGO 2017), section 5.2, with the safeguards of the paper's own
//! hfsort tool (as kept in BOLT's `HFSort.cpp`) and of lld's `ELF/CallGraphSort.cpp`.
//!
//! What: an order of functions. Why: a function placed right after its most frequent caller is
//! reached by a short forward jump, so the hot call chains share cache lines and pages, and the
//! hot text as a whole needs fewer i-TLB entries.
//!
//! Definitions:
//! - *cluster*: a sequence of functions that will be laid out contiguously.
//! - *incoming weight* of `f`: the weight of all calls into `f` from other functions.
//! - *most likely predecessor* of `f`: the caller with the heaviest call arc into `f`.
//! - *density* of a cluster: its samples divided by its size in bytes.
//!
//! Steps:
//! 1. Put every function in a cluster of its own.
//! 2. Visit functions from the most sampled to the least. Append the cluster of `f` to the cluster
//!    of its most likely predecessor, unless
//!    - that arc carries less than `min_caller_share_percent` of `f`'s incoming weight: `f` is
//!      reached from many places, so no single caller is a good neighbour;
//!    - either cluster is already larger than `merge_threshold` (the paper uses the page size:
//!      past it, growing a cluster gains nothing), or the merged one would exceed
//!      `max_cluster_size`;
//!    - the merged cluster would be more than `max_density_degradation` times less dense than
//!      the predecessor's: a few hot bytes would be spread over a long, mostly cold range.
//! 3. Sort the clusters by decreasing density and concatenate them.
//!
//! hfsort measures the arc's share against the callee's samples and lld against all incoming
//! weight including self-calls; we use the incoming weight from other functions, since
//! self-calls are placed by definition. Both tools skip merges that degrade density more than
//! 8x and cap clusters at 1 MiB; the share rule is "at least 10 %" as in hfsort.

use serde::Serialize;

use super::Algorithm;
use crate::graph::{FuncId, Graph};

/// C3's thresholds, each with the paper's, hfsort's or lld's default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct C3Params {
    /// Stop growing a cluster once it is larger than this many bytes. The paper uses the page
    /// size (4 KiB): a larger cluster no longer fits a page, so merging gains nothing.
    pub merge_threshold: u64,
    /// A callee joins its heaviest caller only if that arc carries at least this many percent
    /// of the callee's incoming weight; a rarer arc says little about where it runs (hfsort, lld: 10).
    pub min_caller_share_percent: u64,
    /// No merge that leaves the caller's cluster more than this many times less dense
    /// (hfsort, lld: 8).
    pub max_density_degradation: u64,
    /// No merged cluster larger than this many bytes (lld, hfsort in BOLT: 1 MiB).
    pub max_cluster_size: u64,
}

impl Default for C3Params {
    fn default() -> Self {
        C3Params {
            merge_threshold: 4096,
            min_caller_share_percent: 10,
            max_density_degradation: 8,
            max_cluster_size: 1 << 20,
        }
    }
}

pub(super) const ALGORITHM: Algorithm = Algorithm {
    name: "c3",
    help: "Call-chain clustering (hfsort)",
    tried_by_auto: true,
    order: |graph, params| order(graph, &params.c3),
};

pub(super) fn order(graph: &Graph, params: &C3Params) -> Vec<FuncId> {
    let n = graph.funcs().len();

    // Most likely predecessor and incoming weight of each function. Self-calls say nothing
    // about placement and zero-weight arcs are no evidence, so both are skipped. Ties go to the
    // lower caller id, which keeps the output independent of the arc order in the file.
    let mut best: Vec<Option<(u64, FuncId)>> = vec![None; n];
    let mut incoming = vec![0u64; n];
    for c in graph.calls() {
        if c.caller == c.callee || c.weight == 0 {
            continue;
        }
        incoming[c.callee.index()] += c.weight;
        let slot = &mut best[c.callee.index()];
        let better = match *slot {
            None => true,
            Some((w, caller)) => c.weight > w || (c.weight == w && c.caller < caller),
        };
        if better {
            *slot = Some((c.weight, c.caller));
        }
    }

    // cluster_of[f] is the cluster (named by its first function) holding f; members are kept
    // only for live clusters.
    let mut cluster_of: Vec<FuncId> = (0..n).map(FuncId::from_index).collect();
    let mut members: Vec<Vec<FuncId>> = (0..n).map(FuncId::from_index).map(|f| vec![f]).collect();
    let mut size: Vec<u64> = graph.funcs().iter().map(|f| f.size).collect();
    let mut samples: Vec<u64> = graph.funcs().iter().map(|f| f.samples).collect();

    let mut hottest: Vec<FuncId> = (0..n).map(FuncId::from_index).collect();
    hottest.sort_by_key(|&f| std::cmp::Reverse(graph.funcs()[f].samples));

    for &f in &hottest {
        let Some((weight, pred)) = best[f.index()] else {
            continue; // never seen called: nothing to be placed next to
        };
        let share = weight as u128 * 100;
        if share < params.min_caller_share_percent as u128 * incoming[f.index()] as u128 {
            continue;
        }
        let (into, from) = (cluster_of[pred.index()], cluster_of[f.index()]);
        if into == from {
            continue; // already together (a call cycle)
        }
        let (into_size, from_size) = (size[into.index()], size[from.index()]);
        if into_size > params.merge_threshold
            || from_size > params.merge_threshold
            || into_size + from_size > params.max_cluster_size
        {
            continue;
        }
        // Density before (s/z) against after (S/Z), exactly: s/z > d * S/Z  <=>  s*Z > d*S*z.
        let (s, z) = (samples[into.index()] as u128, into_size.max(1) as u128);
        let merged_samples = s + samples[from.index()] as u128;
        let merged_size = (into_size + from_size).max(1) as u128;
        if s * merged_size > params.max_density_degradation as u128 * merged_samples * z {
            continue;
        }
        let moved = std::mem::take(&mut members[from.index()]);
        for &m in &moved {
            cluster_of[m.index()] = into;
        }
        members[into.index()].extend(moved);
        size[into.index()] += size[from.index()];
        samples[into.index()] += samples[from.index()];
    }

    let mut clusters: Vec<FuncId> = (0..n)
        .map(FuncId::from_index)
        .filter(|&c| !members[c.index()].is_empty())
        .collect();
    // Decreasing density, compared exactly by cross-multiplication; ties by first function.
    clusters.sort_by(|&a, &b| {
        let (sa, sb) = (samples[a.index()] as u128, samples[b.index()] as u128);
        let (za, zb) = (
            size[a.index()].max(1) as u128,
            size[b.index()].max(1) as u128,
        );
        (sb * za).cmp(&(sa * zb)).then(a.cmp(&b))
    });
    clusters
        .into_iter()
        .flat_map(|c| std::mem::take(&mut members[c.index()]))
        .collect()
}
