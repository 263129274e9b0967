//! Call-Chain Clustering (C3), from "Optimizing Function Placement for Large-Scale Data-Center
//! Applications" (Ottoni and Maher, CGO 2017), section 5.2.
//!
//! What: an order of functions. Why: a function placed right after its most frequent caller is
//! reached by a short forward jump, so the hot call chains share cache lines and pages, and the
//! hot text as a whole needs fewer i-TLB entries.
//!
//! Definitions:
//! - *cluster*: a sequence of functions that will be laid out contiguously.
//! - *most likely predecessor* of `f`: the caller with the heaviest call arc into `f`.
//! - *density* of a cluster: its samples divided by its size in bytes.
//!
//! Steps:
//! 1. Put every function in a cluster of its own.
//! 2. Visit functions from the most sampled to the least. Append the cluster of `f` to the cluster
//!    of its most likely predecessor, unless either cluster is already larger than the merge
//!    threshold (the paper uses the page size: past it, growing a cluster gains nothing).
//! 3. Sort the clusters by decreasing density and concatenate them.

use super::Params;
use crate::graph::{FuncId, Graph};

pub(super) fn order(graph: &Graph, params: &Params) -> Vec<FuncId> {
    let n = graph.funcs.len();

    // Most likely predecessor of each function. Self-calls say nothing about placement and
    // zero-weight arcs are no evidence, so both are skipped. Ties go to the lower caller id,
    // which keeps the output independent of the arc order in the file.
    let mut best: Vec<Option<(u64, FuncId)>> = vec![None; n];
    for c in &graph.calls {
        if c.caller == c.callee || c.weight == 0 {
            continue;
        }
        let slot = &mut best[c.callee as usize];
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
    let mut cluster_of: Vec<FuncId> = (0..n as FuncId).collect();
    let mut members: Vec<Vec<FuncId>> = (0..n as FuncId).map(|f| vec![f]).collect();
    let mut size: Vec<u64> = graph.funcs.iter().map(|f| f.size).collect();
    let mut samples: Vec<u64> = graph.funcs.iter().map(|f| f.samples).collect();

    let mut hottest: Vec<FuncId> = (0..n as FuncId).collect();
    hottest.sort_by_key(|&f| std::cmp::Reverse(graph.funcs[f as usize].samples));

    for &f in &hottest {
        let Some((_, pred)) = best[f as usize] else {
            continue; // never seen called: nothing to be placed next to
        };
        let (into, from) = (cluster_of[pred as usize], cluster_of[f as usize]);
        if into == from {
            continue; // already together (a call cycle)
        }
        if size[into as usize] > params.merge_threshold
            || size[from as usize] > params.merge_threshold
        {
            continue;
        }
        let moved = std::mem::take(&mut members[from as usize]);
        for &m in &moved {
            cluster_of[m as usize] = into;
        }
        members[into as usize].extend(moved);
        size[into as usize] += size[from as usize];
        samples[into as usize] += samples[from as usize];
    }

    let mut clusters: Vec<FuncId> = (0..n as FuncId)
        .filter(|&c| !members[c as usize].is_empty())
        .collect();
    // Decreasing density, compared exactly by cross-multiplication; ties by first function.
    clusters.sort_by(|&a, &b| {
        let (sa, sb) = (samples[a as usize] as u128, samples[b as usize] as u128);
        let (za, zb) = (
            size[a as usize].max(1) as u128,
            size[b as usize].max(1) as u128,
        );
        (sb * za).cmp(&(sa * zb)).then(a.cmp(&b))
    });
    clusters
        .into_iter()
        .flat_map(|c| std::mem::take(&mut members[c as usize]))
        .collect()
}
