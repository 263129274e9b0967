//! How good is a layout: how few pages hold the samples, how short the calls are.
//!
//! Call distance follows section 5.2 of the hfsort paper: every call is taken to sit in the
//! middle of its caller, and it jumps to the callee's first byte.

use serde::Serialize;

use crate::graph::{FuncId, Graph};

/// Where each function of a graph starts, in bytes; `None` for functions the layout lacks.
pub type Placement = Vec<Option<u64>>;

/// Functions back to back from address 0 (which stands for the 2 MiB-aligned `__hot_start`).
pub fn place_in_order(graph: &Graph, order: &[FuncId]) -> Placement {
    let mut at = vec![None; graph.funcs.len()];
    let mut next = 0;
    for &f in order {
        at[f as usize] = Some(next);
        next += graph.funcs[f as usize].size;
    }
    at
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Metrics {
    /// Functions with at least one sample, and their total size.
    pub hot_functions: u64,
    pub hot_bytes: u64,
    /// From the first byte of the lowest sampled function to the last byte of the highest.
    pub hot_span_bytes: u64,
    /// Fewest 4 KiB / 2 MiB pages that hold 99 % of the samples.
    pub pages_4k_99: u64,
    pub pages_2m_99: u64,
    /// Share of call weight whose jump is shorter than 64 B, 4 KiB, 2 MiB.
    pub calls_within_64b: f64,
    pub calls_within_4k: f64,
    pub calls_within_2m: f64,
    /// Sum over calls of weight × distance in bytes.
    pub weighted_call_distance: u64,
    /// Call weight left out because the layout lacks caller or callee.
    pub unplaced_call_weight: u64,
}

pub fn measure(graph: &Graph, at: &Placement) -> Metrics {
    let mut hot_functions = 0;
    let mut hot_bytes = 0;
    let (mut lo, mut hi) = (u64::MAX, 0);
    for (f, start) in graph.funcs.iter().zip(at) {
        if let (Some(start), true) = (start, f.samples > 0) {
            hot_functions += 1;
            hot_bytes += f.size;
            lo = lo.min(*start);
            hi = hi.max(start + f.size);
        }
    }

    let (mut total, mut d64, mut d4k, mut d2m, mut distance, mut unplaced) =
        (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    for c in &graph.calls {
        let (Some(caller), Some(callee)) = (at[c.caller as usize], at[c.callee as usize]) else {
            unplaced += c.weight;
            continue;
        };
        let site = caller + graph.funcs[c.caller as usize].size / 2;
        let d = site.abs_diff(callee);
        total += c.weight;
        distance += c.weight * d;
        d64 += if d < 64 { c.weight } else { 0 };
        d4k += if d < 4096 { c.weight } else { 0 };
        d2m += if d < (2 << 20) { c.weight } else { 0 };
    }
    let share = |x: u64| {
        if total == 0 {
            0.0
        } else {
            x as f64 / total as f64
        }
    };

    Metrics {
        hot_functions,
        hot_bytes,
        hot_span_bytes: hi.saturating_sub(lo),
        pages_4k_99: pages_for_99(graph, at, 4096),
        pages_2m_99: pages_for_99(graph, at, 2 << 20),
        calls_within_64b: share(d64),
        calls_within_4k: share(d4k),
        calls_within_2m: share(d2m),
        weighted_call_distance: distance,
        unplaced_call_weight: unplaced,
    }
}

/// Spreads each function's samples evenly over its bytes, then counts the hottest pages needed
/// to reach 99 % of all samples.
fn pages_for_99(graph: &Graph, at: &Placement, page: u64) -> u64 {
    let mut mass: rustc_hash::FxHashMap<u64, f64> = Default::default();
    let mut total = 0.0;
    for (f, start) in graph.funcs.iter().zip(at) {
        let Some(start) = *start else { continue };
        if f.samples == 0 {
            continue;
        }
        let size = f.size.max(1);
        let per_byte = f.samples as f64 / size as f64;
        let end = start + size;
        let mut p = start / page;
        while p * page < end {
            let overlap = end.min((p + 1) * page) - start.max(p * page);
            *mass.entry(p).or_default() += per_byte * overlap as f64;
            p += 1;
        }
        total += f.samples as f64;
    }
    let mut pages: Vec<f64> = mass.into_values().collect();
    pages.sort_by(|a, b| b.total_cmp(a));
    let goal = total * 0.99;
    let mut sum = 0.0;
    for (i, m) in pages.iter().enumerate() {
        sum += m;
        // A small tolerance keeps float rounding from asking for one page too many.
        if sum >= goal * (1.0 - 1e-12) {
            return i as u64 + 1;
        }
    }
    pages.len() as u64
}
