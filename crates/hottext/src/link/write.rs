//! The one call from a fitted profile to the bytes of an output, [`write()`]: `order` and
//! `fetch` both come here. It orders the graph (with one algorithm, or with each of `auto`'s
//! candidates), chooses the functions the linker input lists ([`hot_list`]), with `auto` and
//! an ld script also how they are placed ([`choose_placement`]), plans the padding
//! ([`Padding`]) and writes the format ([`super::FORMATS`]) in memory first, so that a
//! refused name leaves no half-written file behind.

use super::format::{Format, Laid, OrderWriter, Placed, Writer};
use super::hot_list::{hot_list, HotList, HotText, UnsafeNames};
use super::padding::{plan_padding, Padding, PaddingPlan};
use super::{emit, Clusters, EmitError, ScriptPlacement, SplitRule};
use crate::binary::{Binary, StatedAddr};
use crate::graph::fit::Placement;
use crate::graph::{FuncId, Graph};
use crate::layout::auto::{self, Candidate};
use crate::layout::metrics::{measure, place_as_linked, Metrics};
use crate::layout::placement::{choose_placement, PlacementChoice};
use crate::layout::{order, Algorithm, Params};

/// What an order file cannot do, said the same way wherever one is written.
pub const MARKERS_ADVICE: &str = "this format cannot define __hot_start/__hot_end: add --markers hot_markers.o and link that object";

/// How to order the functions.
#[derive(Debug, Clone, Copy)]
pub enum Ordering {
    /// With each of `auto`'s candidates, keeping the layout its model scores best; in an ld
    /// script also placed as its cache-set model says pays, unless [`Request::placement`]
    /// fixes the placement.
    Auto,
    /// With this algorithm.
    With(&'static Algorithm),
}

/// What the order is of, for the comment of the formats that have one.
#[derive(Debug, Clone, Copy)]
pub enum Origin<'a> {
    /// A profile, described by this text (its path; the store object and the meta file).
    Profile(&'a str),
    /// No profile: a build that goes on without one (`fetch --on-missing warn`) lists no
    /// function, and nothing is ordered.
    NoProfile,
}

/// What to write, and how.
pub struct Request<'a> {
    /// The output.
    pub format: &'static Format,
    /// How to order, for a format that writes an order ([`Format::writes_order`]).
    pub ordering: Ordering,
    /// The algorithms' thresholds.
    pub params: &'a Params,
    /// Alignment and start padding of the hot functions, as the user fixed them
    /// (`--align-cache-lines`); [`write()`] sets the padding of the range's end itself. `None`:
    /// with [`Ordering::Auto`] and a format that places functions one by one, the placement
    /// `auto`'s cache-set model picks ([`choose_placement`]); else as compiled.
    pub placement: Option<ScriptPlacement>,
    /// Bytes before the first hot function on top of the placement (`--hot-offset`): a shift of
    /// the whole range, for measuring set-conflict luck. The model's choice is the same at every
    /// multiple of 64 (whole lines only rename the sets), so `auto` chooses on top of it.
    pub hot_offset: u64,
    /// Whether to end the range on a 2 MiB boundary ([`Padding`]), judged with the
    /// code of `binary` (always padded by `auto` without one).
    pub padding: Padding,
    /// What to do with a name the format cannot carry safely.
    pub unsafe_names: UnsafeNames,
    /// The binary the graph was fitted to, if any: which of its functions have parts split
    /// off (`hot_list`), its code's size, its build.
    pub binary: Option<&'a Binary>,
    /// Where `binary` places the graph's functions, for the formats written from a binary as
    /// it is (`ranges` needs it; `lld-cgprofile` keeps only the edges among placed functions).
    pub at: Option<&'a Placement>,
    /// What the order is of.
    pub origin: Origin<'a>,
    /// The ranges file's cap on 2 MiB pages, hottest first.
    pub max_pages: usize,
    /// What the cluster file keeps and splits.
    pub split: SplitRule,
    /// Hears each algorithm's name before it runs.
    pub progress: &'a (dyn Fn(&str) + Sync),
}

/// Whether the linker needs the markers object ([`super::markers_object`]), and how to build it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Markers {
    /// The format cannot define `__hot_start`/`__hot_end` itself ([`MARKERS_ADVICE`]).
    pub needed: bool,
    /// The range is padded to whole 2 MiB pages: the end section must be aligned to match.
    pub pad_to_huge_page: bool,
}

/// What [`write()`] produced.
#[derive(Debug, Default)]
pub struct Written<'g> {
    /// The output's bytes.
    pub bytes: Vec<u8>,
    /// The algorithm whose order was written; `None` for a format that writes no order, or
    /// without a profile.
    pub algorithm: Option<&'static Algorithm>,
    /// With [`Ordering::Auto`]: every candidate's modelled layout, the chosen one marked.
    pub candidates: Option<Vec<Candidate>>,
    /// The order the algorithm gave, before the hot list left anything out.
    pub order: Vec<FuncId>,
    /// How the listed functions are placed: as asked, or as `auto` chose (without the 2 MiB
    /// padding, which is in `padding`).
    pub placement: ScriptPlacement,
    /// When `auto` placed the order: every placement's modelled figures, the kept one marked.
    pub placements: Option<PlacementChoice>,
    /// With an order's format: the functions listed and those left out.
    pub hot: Option<HotList<'g>>,
    /// The hot functions listed and their bytes (none without an order).
    pub hot_text: HotText,
    /// With an order's format: whether the range is padded to whole 2 MiB pages, what that
    /// costs and gains.
    pub padding: Option<PaddingPlan>,
    /// With an order's format: what the markers object must be.
    pub markers: Option<Markers>,
    /// With the ranges file: the ranges written.
    pub ranges: Option<Vec<(StatedAddr, StatedAddr)>>,
    /// With the ranges file: hot 2 MiB pages left out because the text does not hold them
    /// whole.
    pub partial_pages: usize,
    /// With a compiler input that splits functions (`clang-bb-sections`): what it splits.
    pub clusters: Option<Clusters>,
}

impl Written<'_> {
    /// The modelled figures of the listed order as placed: what `auto` measured already (the
    /// kept placement's, or the chosen candidate's when it placed nothing and the hot list left
    /// nothing out), else measured now; `None` without an order.
    pub fn ordered_metrics(&self, graph: &Graph) -> Option<Metrics> {
        let list = self.hot.as_ref()?;
        if let Some(placed) = &self.placements {
            return Some(placed.metrics.clone());
        }
        let chosen = self.candidates.iter().flatten().find(|c| c.chosen);
        Some(match chosen {
            Some(c) if list.kept == self.order && self.placement == ScriptPlacement::default() => {
                c.metrics.clone()
            }
            _ => measure(graph, &place_as_linked(graph, &list.kept, &self.placement)),
        })
    }
}

/// Writes `request.format` for `graph`, ordering it first when the format lays out an order.
pub fn write<'g>(graph: &'g Graph, request: &Request) -> Result<Written<'g>, EmitError> {
    match &request.format.writer {
        Writer::Order(writer) => write_order(graph, request, writer),
        Writer::Placed(write_placed) => {
            let placed = Placed {
                graph,
                binary: request.binary.zip(request.at),
                max_pages: request.max_pages,
            };
            let mut bytes = Vec::new();
            let found = write_placed(&placed, &mut bytes)?;
            Ok(Written {
                bytes,
                ranges: found.ranges,
                partial_pages: found.partial_pages,
                ..Written::default()
            })
        }
    }
}

/// Orders `graph` and lays the order out with `writer`.
fn write_order<'g>(
    graph: &'g Graph,
    request: &Request,
    writer: &OrderWriter,
) -> Result<Written<'g>, EmitError> {
    let (order, algorithm, candidates) = match (request.origin, request.ordering) {
        (Origin::NoProfile, _) => (Vec::new(), None, None),
        (Origin::Profile(_), Ordering::Auto) => {
            let choice = auto::choose(graph, request.params, request.progress);
            (
                choice.order,
                Some(choice.algorithm),
                Some(choice.candidates),
            )
        }
        (Origin::Profile(_), Ordering::With(algorithm)) => (
            order(graph, algorithm, request.params),
            Some(algorithm),
            None,
        ),
    };
    let origin = match (request.origin, algorithm) {
        (Origin::Profile(source), Some(algorithm)) => {
            let chosen_by = match request.ordering {
                Ordering::Auto => " (chosen by --algorithm auto)",
                Ordering::With(_) => "",
            };
            format!("{} order{chosen_by} of {source}", algorithm.name)
        }
        _ => "NO PROFILE: unoptimised build".to_string(),
    };
    let list = hot_list(
        graph,
        &order,
        writer.names,
        request.unsafe_names,
        request.binary,
    )?;
    let hot_text = list.hot_text(graph);
    let (placement, placements) = place(graph, request, writer, &list.kept);
    let padding = plan_padding(
        request.padding,
        hot_text.bytes + placement.hot_offset,
        request.binary.map(Binary::code_bytes),
    );
    let laid = Laid {
        graph,
        list: &list,
        placement: ScriptPlacement {
            pad_to_huge_page: padding.padded,
            ..placement
        },
        origin: &origin,
        split: request.split,
    };
    let mut bytes = Vec::new();
    emit(writer, &laid, &mut bytes)?;
    let clusters = writer.splits.map(|splits| splits(&laid));
    // A compiler input lays out no range of its own: nothing to pad or mark.
    let lays_out_range = clusters.is_none();
    Ok(Written {
        bytes,
        algorithm,
        candidates,
        order,
        placement,
        placements,
        hot: Some(list),
        hot_text,
        padding: lays_out_range.then_some(padding),
        markers: lays_out_range.then_some(Markers {
            needed: writer.needs_markers_object,
            pad_to_huge_page: padding.padded,
        }),
        clusters,
        ..Written::default()
    })
}

/// How the script places `kept`: as [`Request::placement`] fixes it, or with [`Ordering::Auto`]
/// and a format that places functions one by one, as the cache-set model chooses (with every
/// placement's figures); as compiled otherwise; shifted by [`Request::hot_offset`].
fn place(
    graph: &Graph,
    request: &Request,
    writer: &OrderWriter,
    kept: &[FuncId],
) -> (ScriptPlacement, Option<PlacementChoice>) {
    let shifted = |placement: ScriptPlacement| ScriptPlacement {
        hot_offset: placement.hot_offset + request.hot_offset,
        ..placement
    };
    match (request.placement, request.ordering) {
        (Some(fixed), _) => (shifted(fixed), None),
        (None, Ordering::Auto) if writer.places_individually && !kept.is_empty() => {
            let choice = choose_placement(graph, kept, shifted(ScriptPlacement::default()));
            (choice.placement, Some(choice))
        }
        (None, _) => (shifted(ScriptPlacement::default()), None),
    }
}

#[cfg(test)]
#[path = "write_tests.rs"]
pub(super) mod tests;
