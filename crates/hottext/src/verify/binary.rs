//! Checks a linked binary for the hot range: both markers, a non-empty range, a 2 MiB-aligned
//! start, functions inside, and a whole 2 MiB page the runtime can map; with the plan, that
//! those are the functions planned ([`super::planned`]).

use serde::Serialize;

use super::planned::{compare_with_plan, PlanReport};
use crate::binary::{Binary, StatedAddr, HOT_END, HOT_START, HUGE_PAGE};
use crate::link::{HotText, Plan};
use crate::listing::some_of;

/// What `hottext verify` found in a binary: the hot range, its alignment, what it holds, and
/// how many of its pages the runtime can map.
#[derive(Debug, Clone, Serialize)]
pub struct HotTextReport {
    /// The binary's path.
    pub binary: String,
    /// `__hot_start`; `None` when the binary lacks the marker.
    pub start: Option<StatedAddr>,
    /// `__hot_end`'s stated address; `None` when the binary lacks the marker.
    pub end: Option<u64>,
    /// Bytes from `__hot_start` to `__hot_end` (0 without both markers).
    pub size: u64,
    /// `__hot_start` is a multiple of 2 MiB, as the layout asks.
    pub start_aligned_2m: bool,
    /// `__hot_start`'s file offset is a multiple of 2 MiB too, so the kernel can map the file
    /// itself with 2 MiB pages; otherwise the runtime copies the text to anonymous huge pages.
    pub file_offset_aligned_2m: bool,
    /// The functions whose first byte lies in the range (symbols at one address are one
    /// function; the markers are not functions) and their sizes: the figures `order` predicts.
    pub hot: HotText,
    /// 2 MiB pages the range touches.
    pub huge_pages: u64,
    /// With a plan: the range against it.
    pub plan: Option<PlanReport>,
    /// Of those, the pages the runtime can map: it rounds the range out to whole 2 MiB pages
    /// where the text segment has room and in where it has not (a page past the text would
    /// replace what follows), as `runtime/src/hugify.c` does.
    pub mappable_huge_pages: u64,
    /// Bytes from the end of the last hot function to `__hot_end`: the padding that makes the
    /// last page whole (`order --pad-hot-range`).
    pub end_padding: u64,
    /// Why the check failed; empty when it passed.
    pub problems: Vec<String>,
    /// What is worth knowing but does not fail the check: hot pages the runtime cannot map
    /// while others it can.
    pub warnings: Vec<String>,
}

impl HotTextReport {
    /// Whether the check found no problem.
    pub fn passed(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Checks `binary`'s hot range, and that it holds the functions of `plan` when given: a planned
/// function missing from the range fails the check; a function the plan does not name is a
/// warning (order files cannot keep static namesakes out).
pub fn check_binary(binary: &Binary, plan: Option<&Plan>) -> HotTextReport {
    let (start, end) = (binary.symbol(HOT_START), binary.symbol(HOT_END));
    let mut problems = Vec::new();
    for (name, addr) in [(HOT_START, start), (HOT_END, end)] {
        if addr.is_none() {
            problems.push(format!(
                "marker {name} is missing: the binary was not linked with hottext's layout"
            ));
        }
    }
    let mut report = HotTextReport {
        binary: binary.path.display().to_string(),
        start,
        end: end.map(|a| a.0),
        size: 0,
        start_aligned_2m: false,
        file_offset_aligned_2m: false,
        hot: HotText::default(),
        huge_pages: 0,
        plan: None,
        mappable_huge_pages: 0,
        end_padding: 0,
        problems,
        warnings: Vec::new(),
    };
    let (Some(StatedAddr(s)), Some(StatedAddr(e))) = (start, end) else {
        return report;
    };
    report.size = e.saturating_sub(s);
    report.start_aligned_2m = s % HUGE_PAGE == 0;
    report.file_offset_aligned_2m = binary
        .offset_for_stated(StatedAddr(s))
        .is_some_and(|o| o.0 % HUGE_PAGE == 0);
    report.hot = HotText::of_sizes(
        binary
            .functions
            .iter()
            .filter(|f| f.start.0 >= s && f.start.0 < e)
            .map(|f| f.size),
    );
    if let Some(last_end) = binary
        .functions
        .iter()
        .filter(|f| f.start.0 >= s && f.start.0 < e)
        .map(|f| f.end().0)
        .max()
    {
        report.end_padding = e.saturating_sub(last_end);
    }
    if e > s {
        report.huge_pages = (e - 1) / HUGE_PAGE - s / HUGE_PAGE + 1;
        report.mappable_huge_pages = mappable_pages(binary, s, e);
    }
    let remedy = "hottext order (and fetch) pad the range to whole 2 MiB pages by default (--pad-hot-range auto): write the linker input again and relink";
    if e > s && report.start_aligned_2m && report.mappable_huge_pages == 0 {
        report.problems.push(format!(
            "no whole 2 MiB page of the hot range lies in the text: the range ends at {e:#x}, too little text follows it to fill its page, and the runtime refuses it (RANGE_TOO_SMALL), so it gets no huge page; {remedy}"
        ));
    } else if report.mappable_huge_pages < report.huge_pages && report.start_aligned_2m {
        report.warnings.push(format!(
            "the runtime can map {} of the hot range's {} 2 MiB pages: too little text follows the range to fill its last page, which stays on 4 KiB pages; {remedy}",
            report.mappable_huge_pages, report.huge_pages
        ));
    }
    if e <= s {
        report.problems.push(format!(
            "the hot range is empty ({HOT_START} {s:#x}, {HOT_END} {e:#x})"
        ));
    }
    if !report.start_aligned_2m {
        report
            .problems
            .push(format!("{HOT_START} {s:#x} is not 2 MiB aligned"));
    }
    if report.hot.functions == 0 {
        report
            .problems
            .push("no function lies inside the hot range".to_string());
    }
    if let Some(plan) = plan {
        let checked = compare_with_plan(binary, (StatedAddr(s), StatedAddr(e)), plan);
        if !checked.missing.is_empty() {
            report.problems.push(format!(
                "{} of the {} planned functions are not in the hot range: {}{}",
                checked.planned - checked.placed,
                checked.planned,
                some_of(&checked.missing),
                MISSING_ADVICE
            ));
        }
        if !checked.unplanned.is_empty() {
            report.warnings.push(format!(
                "{} functions in the hot range were not planned: {} (an order file places every static namesake of a planned function; the ld script places them one by one)",
                checked.unplanned.len(),
                some_of(&checked.unplanned)
            ));
        }
        report.plan = Some(checked);
    }
    report
}

/// What to do about planned functions the linker left out.
const MISSING_ADVICE: &str = "; check that the objects were compiled with -ffunction-sections (rustc does it by default), that the linker input is the one order or fetch wrote for this build, and that the link used it";

/// The whole 2 MiB pages of `binary`'s hot range the runtime can map, as `[start, end)`; none
/// without both markers or without such a page. The simulation puts these on 2 MiB pages.
pub(crate) fn mappable_hot_pages(binary: &Binary) -> Option<(StatedAddr, StatedAddr)> {
    let (StatedAddr(s), StatedAddr(e)) = binary.hot_range()?;
    let (a, b) = mappable_span(binary, s, e)?;
    (b > a).then_some((StatedAddr(a), StatedAddr(b)))
}

/// How many 2 MiB pages of `[s, e)` the runtime can map.
fn mappable_pages(binary: &Binary, s: u64, e: u64) -> u64 {
    mappable_span(binary, s, e).map_or(0, |(a, b)| b.saturating_sub(a) / HUGE_PAGE)
}

/// The 2 MiB pages of `[s, e)` the runtime can map, as addresses `[a, b)` (`b <= a`: none):
/// rounded out where the executable segment that holds `s` has room, in where it has not (its
/// mapping is the segment in 4 KiB pages).
fn mappable_span(binary: &Binary, s: u64, e: u64) -> Option<(u64, u64)> {
    const SMALL_PAGE: u64 = 4096;
    let segment = binary
        .exec_segments
        .iter()
        .find(|g| g.start.0 <= s && s < g.start.0.saturating_add(g.mem_size))?;
    let map_start = segment.start.0 / SMALL_PAGE * SMALL_PAGE;
    let map_end = (segment.start.0 + segment.mem_size).next_multiple_of(SMALL_PAGE);
    let mut a = s / HUGE_PAGE * HUGE_PAGE;
    if a < map_start {
        a += HUGE_PAGE;
    }
    let b = e
        .next_multiple_of(HUGE_PAGE)
        .min(map_end / HUGE_PAGE * HUGE_PAGE);
    Some((a, b))
}
