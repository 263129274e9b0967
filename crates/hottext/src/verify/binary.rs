//! Checks a linked binary for the hot range: both markers, a non-empty range, a 2 MiB-aligned
//! start, and functions inside.

use serde::Serialize;

use crate::binary::{Binary, StatedAddr, HOT_END, HOT_START, HUGE_PAGE};
use crate::link::HotText;

#[derive(Debug, Clone, Serialize)]
pub struct HotTextReport {
    pub binary: String,
    pub start: Option<StatedAddr>,
    pub end: Option<u64>,
    pub size: u64,
    pub start_aligned_2m: bool,
    /// `__hot_start`'s file offset is a multiple of 2 MiB too, so the kernel can map the file
    /// itself with 2 MiB pages; otherwise the runtime copies the text to anonymous huge pages.
    pub file_offset_aligned_2m: bool,
    /// The functions whose first byte lies in the range (symbols at one address are one
    /// function; the markers are not functions) and their sizes: the figures `order` predicts.
    pub hot: HotText,
    /// 2 MiB pages the range touches.
    pub huge_pages: u64,
    /// Why the check failed; empty when it passed.
    pub problems: Vec<String>,
}

impl HotTextReport {
    pub fn passed(&self) -> bool {
        self.problems.is_empty()
    }
}

pub fn check_binary(binary: &Binary) -> HotTextReport {
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
        problems,
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
    if e > s {
        report.huge_pages = (e - 1) / HUGE_PAGE - s / HUGE_PAGE + 1;
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
    report
}
