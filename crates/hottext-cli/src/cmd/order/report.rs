//! What `hottext order` reports: the JSON document and the table on stderr.

use std::io::Write;
use std::process::ExitCode;

use hottext::binary::{StatedAddr, HUGE_PAGE};
use hottext::demangle::readable;
use hottext::graph::fit::Matched;
use hottext::graph::Graph;
use hottext::layout::auto::Candidate;
use hottext::layout::metrics::{measure, Metrics};
use hottext::layout::placement::PlacementCandidate;
use hottext::layout::Params;
use hottext::link::{Alignment, Clusters, HotText, PaddingPlan, Request, Written};
use hottext::listing::some_of;
use serde::Serialize;

use crate::output::{self, Mode, Report, Stream};

/// The JSON document. `ranges` and `lld-cgprofile` write no order of ours: they have no
/// algorithm, params or ordered figures, and `ranges` has its ranges. `clang-bb-sections`, a
/// compiler input, has none either: it has what it splits.
#[derive(Serialize)]
pub(super) struct Summary<'a> {
    format: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    algorithm: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a Params>,
    #[serde(skip_serializing_if = "Option::is_none")]
    alignment: Option<Alignment>,
    /// Bytes of padding before the first hot function: `--hot-offset`, or what `auto` chose.
    #[serde(skip_serializing_if = "Option::is_none")]
    hot_offset: Option<u64>,
    /// With `--algorithm auto` and an ld script (no `--align-cache-lines` or `--hot-offset`):
    /// every alignment and start padding of the chosen order, modelled, the kept one marked.
    #[serde(skip_serializing_if = "Option::is_none")]
    placements: Option<Vec<PlacementCandidate>>,
    /// The hot functions the linker input lists and their bytes (`link::HotText`): what
    /// `verify --binary` finds in the linked range.
    #[serde(skip_serializing_if = "Option::is_none")]
    hot: Option<HotText>,
    /// With --binary: how the profile's weight matched the binary (names missing, renamed).
    #[serde(skip_serializing_if = "Option::is_none")]
    matched: Option<&'a Matched>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ordered: Option<Metrics>,
    current: Option<Metrics>,
    /// With a linker input: whether the hot range is padded to whole 2 MiB pages, its cost in
    /// bytes and the huge pages the runtime can map with and without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    padding: Option<PaddingPlan>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ranges: Option<Vec<Range>>,
    /// With `--algorithm auto`: every algorithm's modelled layout, the chosen one marked.
    #[serde(skip_serializing_if = "Option::is_none")]
    candidates: Option<Vec<Candidate>>,
    /// With `clang-bb-sections`: what the cluster file splits.
    #[serde(skip_serializing_if = "Option::is_none")]
    clusters: Option<Clusters>,
    /// Hot 2 MiB pages the ranges file leaves out (a warning, not part of the document).
    #[serde(skip)]
    partial_pages: usize,
}

#[derive(Serialize)]
struct Range {
    start: StatedAddr,
    end: StatedAddr,
}

impl<'a> Summary<'a> {
    /// The figures of what `request` wrote for `graph`, which `matched` the binary as told.
    pub(super) fn new(
        request: &Request<'a>,
        graph: &Graph,
        written: &Written,
        matched: Option<&'a Matched>,
    ) -> Summary<'a> {
        // A cluster file is ordered only to list the hot functions: its order means nothing.
        let lays_out = request.format.writes_order() && !request.format.splits_functions();
        Summary {
            format: request.format.name,
            algorithm: written.algorithm.filter(|_| lays_out).map(|a| a.name),
            params: lays_out.then_some(request.params),
            alignment: lays_out.then_some(written.placement.alignment),
            hot_offset: lays_out.then_some(written.placement.hot_offset),
            placements: written.placements.as_ref().map(|p| p.candidates.clone()),
            hot: lays_out.then_some(written.hot_text),
            matched,
            ordered: written.ordered_metrics(graph).filter(|_| lays_out),
            current: request.at.map(|at| measure(graph, at)),
            padding: written.padding,
            ranges: written.ranges.as_ref().map(|ranges| {
                ranges
                    .iter()
                    .map(|&(start, end)| Range { start, end })
                    .collect()
            }),
            candidates: written.candidates.clone().filter(|_| lays_out),
            clusters: written.clusters.clone(),
            partial_pages: written.partial_pages,
        }
    }
}

/// docs/output.md's stream table rows of this verb: the stream its report declares.
pub(crate) const STREAMS: &[(&str, Stream)] = &[("order", <Summary as Report>::STREAM)];

impl Report for Summary<'_> {
    /// The order itself may be on stdout, so the figures go to stderr.
    const STREAM: Stream = Stream::Stderr;

    fn print(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        print_summary(self, out)
    }

    fn finish(&self, _mode: Mode) -> anyhow::Result<ExitCode> {
        if let Some(clusters) = &self.clusters {
            warn_left_whole(clusters);
        }
        if self.partial_pages > 0 {
            // The runtime maps no page that reaches past the text: these cannot be had
            // without relinking.
            output::warn(format!(
                "{} of the 2 MiB pages that hold the hot code are not whole pages of the binary's text and are left out (the runtime could not map them); relinking with a hottext layout gathers the hot code into whole pages (`hottext order --format ld-script`, padded by default)",
                self.partial_pages
            ));
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// A table row: its label and how to show a layout's figure.
type Row = (&'static str, fn(&Metrics) -> String);

fn print_summary(s: &Summary, err: &mut dyn Write) -> anyhow::Result<()> {
    if let Some(ranges) = &s.ranges {
        let pages: u64 = ranges
            .iter()
            .map(|r| (r.end.0 - r.start.0) / HUGE_PAGE)
            .sum();
        writeln!(
            err,
            "hottext: {pages} hot 2 MiB pages in {} ranges",
            ranges.len()
        )?;
    }
    if let Some(clusters) = &s.clusters {
        print_clusters(err, clusters)?;
    }
    let algorithm = s.algorithm.unwrap_or("?");
    if let (Some(hot), Some(ordered)) = (&s.hot, &s.ordered) {
        writeln!(
            err,
            "hottext: {} hot functions, {}, ordered with {algorithm}: {} with samples of their own, {} that only call them",
            hot.functions,
            output::bytes(hot.bytes),
            ordered.sampled_functions,
            hot.functions.saturating_sub(ordered.sampled_functions)
        )?;
    }
    if let Some(padding) = &s.padding {
        print_padding(err, padding)?;
    }
    let rows: [Row; 9] = [
        ("sampled functions", |m| m.sampled_functions.to_string()),
        ("sampled bytes", |m| output::bytes(m.sampled_bytes)),
        ("sampled span", |m| output::bytes(m.sampled_span_bytes)),
        ("4 KiB pages for 99% of samples", |m| {
            m.pages_4k_99.to_string()
        }),
        ("2 MiB pages for 99% of samples", |m| {
            m.pages_2m_99.to_string()
        }),
        ("call weight within 64 B", |m| {
            format!("{:.1}%", 100.0 * m.calls_within_64b)
        }),
        ("call weight on its 4 KiB page", |m| {
            format!("{:.1}%", 100.0 * m.calls_within_4k)
        }),
        ("call weight within 2 MiB", |m| {
            format!("{:.1}%", 100.0 * m.calls_within_2m)
        }),
        ("weighted call distance", |m| {
            m.weighted_call_distance.to_string()
        }),
    ];
    if let Some(candidates) = &s.candidates {
        print_candidates(err, candidates)?;
    }
    if let Some(placements) = &s.placements {
        print_placements(err, placements)?;
    }
    let Some(ordered) = &s.ordered else {
        return Ok(());
    };
    match &s.current {
        Some(cur) => {
            writeln!(err, "  {:<32} {:>14} {:>14}", "", "current", algorithm)?;
            for (label, f) in rows {
                writeln!(err, "  {label:<32} {:>14} {:>14}", f(cur), f(ordered))?;
            }
        }
        None => {
            for (label, f) in rows {
                writeln!(err, "  {label:<32} {:>14}", f(ordered))?;
            }
        }
    }
    Ok(())
}

/// What padding the hot range to whole 2 MiB pages costs and gains.
fn print_padding(err: &mut dyn Write, p: &PaddingPlan) -> std::io::Result<()> {
    let pages = p.huge_pages_padded;
    match (p.padded, p.huge_pages_unpadded) {
        (true, unpadded) => writeln!(
            err,
            "hottext: hot range padded to whole 2 MiB pages: costs {} of file size; huge pages the runtime can map: {pages} (without padding: {})",
            output::bytes(p.bytes),
            unpadded.map_or("as many as the text after the range fills".into(), |n| n.to_string())
        ),
        (false, Some(n)) if n < pages => writeln!(
            err,
            "hottext: hot range not padded (--pad-hot-range never): huge pages the runtime can map: {n} of the range's {pages}; padding would map them all"
        ),
        (false, None) => writeln!(
            err,
            "hottext: hot range not padded (--pad-hot-range never): its last 2 MiB page is mapped only if the text after it fills that page"
        ),
        (false, Some(n)) => writeln!(
            err,
            "hottext: hot range not padded: the text after it fills its last 2 MiB page; huge pages the runtime can map: {n}"
        ),
    }
}

/// `--algorithm auto`'s table: each algorithm's modelled figures, the chosen one marked.
fn print_candidates(err: &mut dyn Write, candidates: &[Candidate]) -> std::io::Result<()> {
    writeln!(
        err,
        "  --algorithm auto (modelled):  {:>18} {:>14} {:>16}",
        "calls leaving page", "L1i misses", "4 KiB pages 99%"
    )?;
    for c in candidates {
        let mark = if c.chosen { "chosen" } else { "" };
        writeln!(
            err,
            "  {:>8} {:<20} {:>18} {:>14} {:>16}",
            mark,
            c.algorithm,
            format!("{:.1}%", 100.0 * c.score),
            // Modelled misses per sample (`icache_overflow`): they compare layouts.
            format!("{:.4}", c.metrics.icache_overflow),
            c.metrics.pages_4k_99
        )?;
    }
    Ok(())
}

/// `auto`'s placements of the chosen order: each alignment and start padding's modelled figures.
fn print_placements(err: &mut dyn Write, placements: &[PlacementCandidate]) -> std::io::Result<()> {
    writeln!(
        err,
        "  placement (modelled):         {:>18} {:>14}",
        "calls leaving page", "L1i misses"
    )?;
    for c in placements {
        let mark = if c.chosen { "chosen" } else { "" };
        let alignment = match c.alignment {
            Alignment::AsCompiled => "as compiled",
            Alignment::CacheLines { .. } => "cache lines",
        };
        writeln!(
            err,
            "  {:>8} {:<20} {:>18} {:>14}",
            mark,
            format!("{alignment} +{} B", c.start_padding),
            format!("{:.1}%", 100.0 * c.score),
            format!("{:.4}", c.icache_overflow),
        )?;
    }
    Ok(())
}

/// What the cluster file splits, for a person.
fn print_clusters(err: &mut dyn Write, c: &Clusters) -> std::io::Result<()> {
    let share = if c.hot_bytes_before == 0 {
        0.0
    } else {
        100.0 * c.hot_bytes_after as f64 / c.hot_bytes_before as f64
    };
    writeln!(
        err,
        "hottext: cluster file for {} functions: {} blocks kept in the hot parts, {} sampled blocks under --min-block-share split out with every block that never ran; {} hot functions without block counts and {} under --min-split-samples stay whole",
        c.functions, c.blocks_kept, c.sampled_blocks_split, c.without_blocks, c.sparse
    )?;
    writeln!(
        err,
        "hottext: hot code {} before, about {} after splitting ({share:.0} %; from the profile's block sizes, before the jumps clang adds)",
        output::bytes(c.hot_bytes_before),
        output::bytes(c.hot_bytes_after),
    )
}

/// The functions that have block counts but stay whole, and why.
fn warn_left_whole(c: &Clusters) {
    let names = |list: &[String]| -> String {
        let readable: Vec<_> = list.iter().map(|n| readable(n)).collect();
        some_of(&readable)
    };
    if !c.namesakes.is_empty() {
        output::warn(format!(
            "{} static functions share their name with another hot function and stay whole (clang's file names a function by its plain name, and stops on a name listed twice): {}",
            c.namesakes.len(),
            names(&c.namesakes)
        ));
    }
}
