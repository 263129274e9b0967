//! The one call from a fitted profile to the bytes of an output, [`write()`]: `order` and
//! `fetch` both come here. It orders the graph (with one algorithm, or with each of `auto`'s
//! candidates), chooses the functions the linker input lists ([`hot_list`]), plans the padding
//! ([`Padding`]) and writes the format ([`super::FORMATS`]) in memory first, so that a
//! refused name leaves no half-written file behind.

use super::format::{Format, Laid, OrderWriter, Placed, Writer};
use super::hot_list::{hot_list, HotList, HotText, UnsafeNames};
use super::padding::{plan_padding, Padding, PaddingPlan};
use super::{emit, Clusters, EmitError, ScriptPlacement};
use crate::binary::{Binary, StatedAddr};
use crate::graph::fit::Placement;
use crate::graph::{FuncId, Graph};
use crate::layout::auto::{self, Candidate};
use crate::layout::metrics::{measure, place_in_order, Metrics, COMPILED_ALIGNMENT};
use crate::layout::{order, Algorithm, Params};

/// What an order file cannot do, said the same way wherever one is written.
pub const MARKERS_ADVICE: &str = "this format cannot define __hot_start/__hot_end: add --markers hot_markers.o and link that object";

/// How to order the functions.
#[derive(Debug, Clone, Copy)]
pub enum Ordering {
    /// With each of `auto`'s candidates, keeping the layout its model scores best.
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
    /// Alignment and start offset of the hot functions; [`write()`] sets the padding itself.
    pub placement: ScriptPlacement,
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
    /// The cluster file's threshold: the share of its function's block samples a block needs
    /// to stay in the hot part ([`super::DEFAULT_MIN_BLOCK_SHARE`]).
    pub min_block_share: f64,
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
    /// The modelled figures of the listed order: the chosen candidate's, which `auto` measured
    /// already, unless the hot list left functions out (parts GCC split off); `None` without an
    /// order.
    pub fn ordered_metrics(&self, graph: &Graph) -> Option<Metrics> {
        let list = self.hot.as_ref()?;
        let chosen = self.candidates.iter().flatten().find(|c| c.chosen);
        Some(match chosen {
            Some(c) if list.kept == self.order => c.metrics.clone(),
            _ => measure(
                graph,
                &place_in_order(graph, &list.kept, COMPILED_ALIGNMENT),
            ),
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
    let padding = plan_padding(
        request.padding,
        hot_text.bytes + request.placement.hot_offset,
        request.binary.map(Binary::code_bytes),
    );
    let laid = Laid {
        graph,
        list: &list,
        placement: ScriptPlacement {
            pad_to_huge_page: padding.padded,
            ..request.placement
        },
        origin: &origin,
        min_block_share: request.min_block_share,
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

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::graph::GraphBuilder;
    use crate::link::format;

    fn graph() -> Graph {
        let mut b = GraphBuilder::default();
        let main = b.func("main", 64);
        b.add_samples(main, 10);
        let work = b.func("work", 64);
        b.add_samples(work, 90);
        b.add_call(main, work, 90);
        b.finish()
    }

    /// A request for the format `name`, ordered by `auto`, without a binary.
    pub(in crate::link) fn request<'a>(name: &str, params: &'a Params) -> Request<'a> {
        Request {
            format: format(name).unwrap(),
            ordering: Ordering::Auto,
            params,
            placement: ScriptPlacement::default(),
            padding: Padding::Auto,
            unsafe_names: UnsafeNames::Refuse,
            binary: None,
            at: None,
            origin: Origin::Profile("test"),
            max_pages: 8,
            min_block_share: 0.0,
            progress: &|_| {},
        }
    }

    #[test]
    fn every_format_comes_out_of_one_call() {
        let (g, params) = (graph(), Params::default());
        let list = write(&g, &request("list", &params)).unwrap();
        let kept = &list.hot.as_ref().unwrap().kept;
        assert_eq!(kept, &list.order);
        let names: Vec<&str> = kept.iter().map(|&f| g.funcs()[f].name.as_str()).collect();
        assert_eq!(
            String::from_utf8(list.bytes.clone()).unwrap(),
            names.join("\n") + "\n"
        );
        assert_eq!(list.candidates.as_ref().unwrap().len(), 3);
        let markers = list.markers.unwrap();
        // No binary: padded, so that the one page is whole whatever follows.
        assert!(!markers.needed && markers.pad_to_huge_page);
        assert_eq!((list.hot_text.functions, list.hot_text.bytes), (2, 128));
        let script = write(&g, &request("ld-script", &params)).unwrap();
        let script = String::from_utf8(script.bytes).unwrap();
        assert!(
            script.contains("ALIGN(0x200000);\n    __hot_end"),
            "{script}"
        );
        let chosen = list.algorithm.unwrap().name;
        assert!(
            script.contains(&format!(
                "{chosen} order (chosen by --algorithm auto) of test"
            )),
            "{script}"
        );
        assert!(
            write(&g, &request("lld-order", &params))
                .unwrap()
                .markers
                .unwrap()
                .needed
        );

        let edges = write(&g, &request("lld-cgprofile", &params)).unwrap();
        assert!(String::from_utf8(edges.bytes)
            .unwrap()
            .contains("main work 90"));
        assert!(edges.algorithm.is_none() && edges.markers.is_none());
        let err = write(&g, &request("ranges", &params)).unwrap_err();
        assert!(
            matches!(err, EmitError::NeedsBinary { format: "ranges" }),
            "{err}"
        );
    }

    #[test]
    fn one_algorithm_is_named_and_no_profile_lists_nothing() {
        let (g, params) = (graph(), Params::default());
        let c3 = crate::layout::algorithm("c3").unwrap();
        let fixed = Request {
            ordering: Ordering::With(c3),
            ..request("ld-script", &params)
        };
        let written = write(&g, &fixed).unwrap();
        assert!(written.candidates.is_none());
        assert!(written.ordered_metrics(&g).is_some());
        assert!(String::from_utf8(written.bytes)
            .unwrap()
            .contains("c3 order of test"));
        let none = Request {
            origin: Origin::NoProfile,
            ..request("ld-script", &params)
        };
        let empty = Graph::default();
        let written = write(&empty, &none).unwrap();
        assert!(written.algorithm.is_none());
        assert_eq!(written.hot_text, HotText::default());
        let script = String::from_utf8(written.bytes).unwrap();
        assert!(script.contains("NO PROFILE: unoptimised build"), "{script}");
    }
}
