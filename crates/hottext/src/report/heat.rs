//! The heat map of one binary's text: its 4 KiB pages coloured by the profile's samples (spread
//! over each function's bytes, as the layout figures are), with the hot range, the pages a
//! running process had on huge pages, and the hottest functions of the hottest pages.

use serde::Serialize;

use crate::binary::{Binary, StatedAddr, HUGE_PAGE};
use crate::demangle::readable_short;
use crate::graph::fit::{fit_for_view, Placement};
use crate::graph::Graph;
use crate::layout::metrics::samples_by_block;

pub(crate) const PAGE: u64 = 4096;
/// Pages whose functions are named (the hottest first): enough to hover over everything that
/// matters, few enough that a million-function profile stays a small file.
const NAMED_PAGES: usize = 4096;
/// Characters of a function's name under the pointer (demangled, shortened).
const NAME_WIDTH: usize = 100;
/// Functions named per page, hottest first.
const NAMES_PER_PAGE: usize = 3;

/// One binary's text, page by page.
#[derive(Debug, Clone, Serialize)]
pub struct HeatMap {
    /// What the map is of (a file name, "before", "after").
    pub title: String,
    /// The stated address of page 0 (2 MiB aligned, so that rows are 2 MiB pages).
    pub base: StatedAddr,
    /// Samples on each page from `base`, rounded up (a page with any sample is at least 1).
    pub pages: Vec<u64>,
    /// Page indices of `[__hot_start, __hot_end)`, when the binary has the markers.
    pub hot_range: Option<(u64, u64)>,
    /// Indices of the 2 MiB rows a process had on huge pages (from `verify --pid`).
    pub huge_rows: Vec<u64>,
    /// For the hottest pages: the page index and its hottest functions with their share of the
    /// page's samples.
    pub names: Vec<(u64, Vec<(String, f64)>)>,
    /// Pages for 99 % of the samples.
    pub pages_99: u64,
    /// Samples in all pages.
    pub samples: u64,
}

/// The heat map of `profile` fitted to `binary` ([`crate::graph::fit`], fingerprinting the
/// code only when a sampled name is missing), so that sizes and addresses are the binary's own.
pub fn heat_map(title: &str, profile: &Graph, binary: &Binary) -> HeatMap {
    let fitted = fit_for_view(profile, binary);
    heat_map_of(title, &fitted.graph, &fitted.placement, binary)
}

/// The heat map of `graph` at the addresses `at` in `binary` (both from [`crate::graph::fit::fit_for_view`]).
pub(crate) fn heat_map_of(title: &str, graph: &Graph, at: &Placement, binary: &Binary) -> HeatMap {
    let text_start = binary
        .functions
        .iter()
        .map(|f| f.start.0)
        .min()
        .unwrap_or(0);
    let text_end = binary
        .functions
        .iter()
        .map(|f| f.end().0)
        .max()
        .unwrap_or(0);
    let base = StatedAddr(text_start - text_start % HUGE_PAGE);
    let count = text_end.saturating_sub(base.0).div_ceil(PAGE) as usize;
    let mut mass = vec![0f64; count];
    for (p, m) in samples_by_block(graph, at, PAGE) {
        if let Some(slot) = mass.get_mut((p - base.0 / PAGE) as usize) {
            *slot = m;
        }
    }
    let pages: Vec<u64> = mass.iter().map(|m| m.ceil() as u64).collect();
    let hot_range = binary.hot_range().map(|(s, e)| {
        let page = |a: StatedAddr| a.0.saturating_sub(base.0) / PAGE;
        (page(s), page(e))
    });
    let samples = graph.funcs().iter().map(|f| f.samples).sum();
    HeatMap {
        title: title.to_string(),
        base,
        names: names(graph, at, base, &pages),
        pages_99: pages_for(&mass, 0.99),
        pages,
        hot_range,
        huge_rows: Vec::new(),
        samples,
    }
}

/// How many of the hottest pages hold `share` of all.
fn pages_for(mass: &[f64], share: f64) -> u64 {
    let mut sorted: Vec<f64> = mass.iter().copied().filter(|&m| m > 0.0).collect();
    sorted.sort_unstable_by(|a, b| b.total_cmp(a));
    // A small tolerance keeps float rounding from asking for one page too many.
    let goal = share * sorted.iter().sum::<f64>() * (1.0 - 1e-12);
    let mut sum = 0.0;
    sorted
        .iter()
        .take_while(|&&m| {
            let before = sum;
            sum += m;
            before < goal
        })
        .count() as u64
}

/// The hottest functions of the [`NAMED_PAGES`] hottest pages.
fn names(
    graph: &Graph,
    at: &Placement,
    StatedAddr(base): StatedAddr,
    pages: &[u64],
) -> Vec<(u64, Vec<(String, f64)>)> {
    let mut hottest: Vec<usize> = (0..pages.len()).filter(|&p| pages[p] > 0).collect();
    hottest.sort_unstable_by(|&a, &b| pages[b].cmp(&pages[a]).then(a.cmp(&b)));
    hottest.truncate(NAMED_PAGES);
    let mut named: foldhash::HashMap<u64, Vec<(f64, usize)>> =
        hottest.iter().map(|&p| (p as u64, Vec::new())).collect();
    for (i, (f, start)) in graph.funcs().iter().zip(at).enumerate() {
        let (Some(StatedAddr(start)), true) = (*start, f.samples > 0) else {
            continue;
        };
        let size = f.size.max(1);
        let per_byte = f.samples as f64 / size as f64;
        let (first, last) = ((start - base) / PAGE, (start + size - 1 - base) / PAGE);
        for p in first..=last {
            if let Some(list) = named.get_mut(&p) {
                let lo = start.max(base + p * PAGE);
                let hi = (start + size).min(base + (p + 1) * PAGE);
                list.push(((hi - lo) as f64 * per_byte, i));
            }
        }
    }
    let mut out: Vec<(u64, Vec<(String, f64)>)> = named
        .into_iter()
        .map(|(p, mut list)| {
            list.sort_by(|a, b| b.0.total_cmp(&a.0));
            let total = pages[p as usize].max(1) as f64;
            let top = list
                .into_iter()
                .take(NAMES_PER_PAGE)
                .map(|(mass, i)| {
                    (
                        readable_short(&graph.funcs()[i].name, NAME_WIDTH),
                        (mass / total).min(1.0),
                    )
                })
                .collect();
            (p, top)
        })
        .collect();
    out.sort_unstable_by_key(|(p, _)| *p);
    out
}

/// Marks the 2 MiB rows of `map` that a process had on huge pages: `stated` addresses of huge
/// 2 MiB pages (runtime addresses less the load bias).
pub fn mark_huge(map: &mut HeatMap, stated: &[StatedAddr]) {
    map.huge_rows = stated
        .iter()
        .filter(|&&a| a >= map.base)
        .map(|&a| (a.0 - map.base.0) / HUGE_PAGE)
        .collect();
}
