//! The one way from an order, or a placed binary, to the bytes a linker or the runtime reads:
//! `order` and `fetch` both write through [`write`], in memory first, so that a refused name
//! leaves no half-written file behind.

use super::call_graph_profile::write_call_graph_profile;
use super::hot_list::{hot_list, HotList, UnsafeNames};
use super::padding::{plan_padding, Padding, PaddingPlan};
use super::ranges::write_ranges;
use super::{emit, EmitError, Format, ScriptPlacement};
use crate::binary::{Binary, ExecSegment, StatedAddr};
use crate::graph::fit::Placement;
use crate::graph::{FuncId, Graph};
use crate::layout::metrics::hot_ranges;

/// What an order file cannot do, said the same way wherever one is written.
pub const MARKERS_ADVICE: &str = "this format cannot define __hot_start/__hot_end: add --markers hot_markers.o and link that object";

/// What to write.
pub enum Target<'a> {
    /// A linker input laying out `order` ([`Format`]); `origin` says where the order came from.
    Linker {
        format: Format,
        order: &'a [FuncId],
        placement: ScriptPlacement,
        origin: &'a str,
        unsafe_names: UnsafeNames,
        /// The binary the graph was fitted to, if any: which of its functions have parts
        /// split off ([`super::hot_list`]).
        binary: Option<&'a Binary>,
        /// Whether to end the range on a 2 MiB boundary ([`super::padding`]), judged with
        /// `text_bytes`, the code of the binary the order is for (`None` without one).
        padding: Padding,
        text_bytes: Option<u64>,
    },
    /// The runtime's ranges file: the hottest 2 MiB pages of the binary as it is placed (`at`)
    /// that its executable segments (`text`) hold whole, at most `max_pages`, for the build
    /// `build_id`.
    Ranges {
        at: &'a Placement,
        text: &'a [ExecSegment],
        build_id: Option<&'a str>,
        max_pages: usize,
    },
    /// The call edges for lld to order by itself, among the functions `at` places (all of
    /// them without a placement).
    CallGraphProfile { at: Option<&'a Placement> },
}

/// What [`write`] produced.
#[derive(Debug)]
pub struct Written<'g> {
    pub bytes: Vec<u8>,
    /// With a linker target: the functions listed and those left out.
    pub hot: Option<HotList<'g>>,
    /// With the ranges target: the ranges written, and the hot pages left out because the
    /// text does not hold them whole.
    pub ranges: Vec<(StatedAddr, StatedAddr)>,
    pub partial_pages: usize,
    /// The linker also needs the markers object ([`super::markers_object`]).
    pub needs_markers: bool,
    /// With a linker target: whether the range is padded to whole 2 MiB pages (the markers
    /// object must be built to match), what that costs and gains.
    pub padding: Option<PaddingPlan>,
}

/// Writes `target` for `graph`.
pub fn write<'g>(graph: &'g Graph, target: Target<'_>) -> Result<Written<'g>, EmitError> {
    let mut written = Written {
        bytes: Vec::new(),
        hot: None,
        ranges: Vec::new(),
        partial_pages: 0,
        needs_markers: false,
        padding: None,
    };
    match target {
        Target::Linker {
            format,
            order,
            placement,
            origin,
            unsafe_names,
            binary,
            padding,
            text_bytes,
        } => {
            let list = hot_list(graph, order, format, unsafe_names, binary)?;
            let hot_bytes = list.hot_text(graph).bytes + placement.hot_offset;
            let plan = plan_padding(padding, hot_bytes, text_bytes);
            let placement = ScriptPlacement {
                pad_to_huge_page: plan.padded,
                ..placement
            };
            emit(format, &list.entries, placement, origin, &mut written.bytes)?;
            written.needs_markers = format.needs_markers_object();
            written.padding = Some(plan);
            written.hot = Some(list);
        }
        Target::Ranges {
            at,
            text,
            build_id,
            max_pages,
        } => {
            let hot = hot_ranges(graph, at, text, max_pages);
            (written.ranges, written.partial_pages) = (hot.ranges, hot.partial_pages);
            write_ranges(build_id, &written.ranges, &mut written.bytes)?;
        }
        Target::CallGraphProfile { at } => {
            let keep = |f: FuncId| at.is_none_or(|at| at[f.index()].is_some());
            write_call_graph_profile(graph, keep, &mut written.bytes)?;
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{ids, GraphBuilder};

    fn graph() -> Graph {
        let mut b = GraphBuilder::default();
        let main = b.func("main", 64);
        b.add_samples(main, 10);
        let work = b.func("work", 64);
        b.add_samples(work, 90);
        b.add_call(main, work, 90);
        b.finish()
    }

    #[test]
    fn every_target_comes_out_of_one_entry_point() {
        let g = graph();
        let order = ids([1, 0]);
        let linker = |format| Target::Linker {
            format,
            order: &order,
            placement: ScriptPlacement::default(),
            origin: "test",
            unsafe_names: UnsafeNames::Refuse,
            binary: None,
            padding: Padding::Auto,
            text_bytes: Some(1 << 20),
        };
        let list = write(&g, linker(Format::List)).unwrap();
        assert_eq!(String::from_utf8(list.bytes).unwrap(), "work\nmain\n");
        assert!(!list.needs_markers);
        assert_eq!(list.hot.unwrap().kept, order);
        // 128 B of hot code in 1 MiB of text: padded, so the one page is whole.
        assert!(list.padding.unwrap().padded);
        let script = write(&g, linker(Format::LdScript)).unwrap();
        assert!(String::from_utf8(script.bytes)
            .unwrap()
            .contains("ALIGN(0x200000);\n    __hot_end"));
        assert!(
            write(&g, linker(Format::SymbolOrder))
                .unwrap()
                .needs_markers
        );

        let at: Placement = vec![Some(StatedAddr(0x40_0000)), Some(StatedAddr(0x60_0000))];
        let text = [ExecSegment {
            start: StatedAddr(0x1000),
            mem_size: 0x80_0000,
            offset: crate::binary::FileOffset(0x1000),
            file_size: 0x80_0000,
        }];
        let ranges = Target::Ranges {
            at: &at,
            text: &text,
            build_id: Some("ab"),
            max_pages: 8,
        };
        let written = write(&g, ranges).unwrap();
        assert!(String::from_utf8(written.bytes)
            .unwrap()
            .starts_with("# build-id: ab\n0x400000 "));
        assert!(!written.ranges.is_empty());

        let edges = write(&g, Target::CallGraphProfile { at: None }).unwrap();
        assert!(String::from_utf8(edges.bytes)
            .unwrap()
            .contains("main work 90"));
    }
}
