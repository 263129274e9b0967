//! How good is a layout: how few pages hold the samples, how short the calls are.
//!
//! Call distance follows section 5.2 of the hfsort paper: every call is taken to sit in the
//! middle of its caller, and it jumps to the callee's first byte.

use serde::Serialize;

use crate::binary::HUGE_PAGE;
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
        d2m += if d < HUGE_PAGE { c.weight } else { 0 };
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
        pages_2m_99: pages_for_99(graph, at, HUGE_PAGE),
        calls_within_64b: share(d64),
        calls_within_4k: share(d4k),
        calls_within_2m: share(d2m),
        weighted_call_distance: distance,
        unplaced_call_weight: unplaced,
    }
}

/// How many pages of `page` bytes hold 99 % of the samples.
fn pages_for_99(graph: &Graph, at: &Placement, page: u64) -> u64 {
    hottest_pages(graph, at, page, 0.99).len() as u64
}

/// The fewest pages of `page` bytes that hold `share` of the samples, hottest first, as page
/// numbers (address / page). Each function's samples are spread evenly over its bytes.
pub fn hottest_pages(graph: &Graph, at: &Placement, page: u64, share: f64) -> Vec<u64> {
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
    let mut pages: Vec<(u64, f64)> = mass.into_iter().collect();
    // Hottest first; ties by address so the answer does not depend on hash order.
    pages.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let goal = total * share;
    let mut sum = 0.0;
    let mut out = Vec::new();
    for (p, m) in pages {
        // A small tolerance keeps float rounding from asking for one page too many.
        if sum >= goal * (1.0 - 1e-12) {
            break;
        }
        sum += m;
        out.push(p);
    }
    out
}

/// The hottest 2 MiB pages of a placed binary as address ranges, at most `max_pages` of them,
/// adjacent pages merged, in address order: what a loader without markers can map.
pub fn hot_ranges(graph: &Graph, at: &Placement, max_pages: usize) -> Vec<(u64, u64)> {
    let mut pages = hottest_pages(graph, at, HUGE_PAGE, 0.99);
    pages.truncate(max_pages);
    pages.sort_unstable();
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for p in pages {
        match ranges.last_mut() {
            Some(last) if last.1 == p * HUGE_PAGE => last.1 += HUGE_PAGE,
            _ => ranges.push((p * HUGE_PAGE, (p + 1) * HUGE_PAGE)),
        }
    }
    ranges
}
