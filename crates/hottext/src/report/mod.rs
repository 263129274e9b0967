//! `hottext report`: one self-contained HTML page from what the other verbs wrote, to send
//! around: the text's heat map before and after, the layout figures, the A/B verdicts as a
//! forest plot, the huge pages, and the profile's history. The page loads nothing (its content
//! security policy forbids every request) and opens from disk.

pub(crate) mod heat;
mod html;

use serde::Serialize;

pub use heat::{heat_map, mark_huge, HeatMap};
pub use html::render;

/// Everything the page shows; sections without data are left out.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// The page's heading and `<title>`.
    pub title: String,
    /// The files the page was made from, as the user named them.
    pub sources: Vec<String>,
    /// One heat map per binary, or a binary before and after.
    pub heat_maps: Vec<HeatMap>,
    /// Layout figures (`order --json`): label, the current layout's, the chosen one's.
    pub figures: Vec<(String, String, String)>,
    /// `--algorithm auto`'s candidates: algorithm, modelled score, L1i misses per sample, 4 KiB pages
    /// for 99 %, chosen.
    pub candidates: Vec<(String, f64, f64, u64, bool)>,
    /// The A/B figures of every comparison given.
    pub forest: Vec<ForestRow>,
    /// Each 2 MiB page of a running process's hot range and what backs it (`verify --pid`).
    pub huge_pages: Vec<(u64, String)>,
    /// The profile's history, one row per pipeline commit of the meta file.
    pub history: Vec<HistoryRow>,
}

/// One figure of an A/B comparison: B/A with its interval (or, simulated, its spread over
/// offsets).
#[derive(Debug, Clone, Serialize)]
pub struct ForestRow {
    /// Which comparison: the file it came from.
    pub source: String,
    /// The figure's name.
    pub label: String,
    /// B/A and its interval; `None` when there is no ratio (A was 0, or nothing counted).
    pub ratio: Option<(f64, f64, f64)>,
    /// The verdict as the A/B report words it ("B better").
    pub verdict: String,
    /// Which way is an improvement: `lower` or `higher` (`neither` for a figure that
    /// describes the run rather than scores it).
    pub better: String,
    /// The unit shown after the label.
    pub unit: String,
    /// A's and B's medians.
    pub a: Option<f64>,
    /// B's median.
    pub b: Option<f64>,
    /// Why the figure is in the table but not in the plot; `None` when it is plotted.
    pub left_out: Option<String>,
}

/// One pipeline commit of the meta file.
#[derive(Debug, Clone, Serialize)]
pub struct HistoryRow {
    /// The commit's hash, as `git log` prints it.
    pub commit: String,
    /// The commit's date.
    pub date: String,
    /// The samples of the commit message's first line (the text in its parentheses).
    pub samples: String,
    /// How much of the previous profile matched the binary (and was merged), if there was one.
    pub previous: String,
    /// The commit message's `coverage` line.
    pub coverage: String,
    /// The commit message's drift from the previous profile.
    pub drift: String,
    /// The three top movers, `;`-separated.
    pub movers: String,
}
