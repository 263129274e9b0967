//! The outputs `order` and `fetch` write, listed once in [`FORMATS`]: `--format`'s choices,
//! its help and what each output needs all come from here.
//!
//! A new output is a file of its own in `link/` that defines its `FORMAT` (name, help line and
//! writer), its `mod` line in `link/mod.rs` and one line in [`FORMATS`].

use std::io::{self, Write};

use super::{Clusters, EmitError, Entry, HotList, ScriptPlacement};
use crate::binary::{Binary, StatedAddr};
use crate::graph::fit::Placement;
use crate::graph::Graph;

/// One output of `order` and `fetch`, as `--format` names it.
#[derive(Debug)]
pub struct Format {
    /// The name `--format` takes and reports print.
    pub name: &'static str,
    /// One line for `--help`.
    pub help: &'static str,
    pub(crate) writer: Writer,
}

/// How a format is written, and from what.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Writer {
    /// Lays out an order: the functions of the hot list, in order.
    Order(OrderWriter),
    /// Written from the graph as a binary places it: no order of ours.
    Placed(fn(&Placed, &mut dyn Write) -> Result<PlacedOutput, EmitError>),
}

impl Writer {
    /// An order file's writer: symbols only, the markers object for the markers and the
    /// alignment, and nothing placed one by one (the files name sections or symbols, never
    /// the objects they come from).
    pub(crate) const fn order_file(write: fn(&Laid, &mut dyn Write) -> io::Result<()>) -> Writer {
        Writer::Order(OrderWriter {
            names: Names::Symbols,
            needs_markers_object: true,
            places_individually: false,
            write,
            splits: None,
        })
    }
}

/// A format that lays out an order, and what it can do.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OrderWriter {
    /// The names it can carry.
    pub(crate) names: Names,
    /// Whether the linker also needs [`super::markers_object`] for the markers and the
    /// alignment: order files cannot define symbols or align anything.
    pub(crate) needs_markers_object: bool,
    /// Whether it can align functions ([`super::Alignment`]), shift the range's start and
    /// place namesakes one by one: order files only order sections, and name them without the
    /// object they come from.
    pub(crate) places_individually: bool,
    pub(crate) write: fn(&Laid, &mut dyn Write) -> io::Result<()>,
    /// For a compiler input that splits the functions (clang's cluster file): what it splits,
    /// for the report. Such a format lays out no range, so it has no padding or markers.
    pub(crate) splits: Option<fn(&Laid) -> Clusters>,
}

/// The names a format can carry safely (see `check_symbol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Names {
    /// A plain list: any name without whitespace or control characters.
    Any,
    /// A linker input: symbols of letters, digits, `_`, `.` and `$`.
    Symbols,
}

/// What an order's writer lays out.
pub(crate) struct Laid<'a> {
    /// The graph the list is of, for a format that says more about each function than its
    /// names (its basic blocks).
    pub(crate) graph: &'a Graph,
    /// The functions to place, in order, their names checked for the format.
    pub(crate) list: &'a HotList<'a>,
    /// Where the functions start and whether the range ends on a 2 MiB boundary.
    pub(crate) placement: ScriptPlacement,
    /// What produced the order, for a comment where the format has comments.
    pub(crate) origin: &'a str,
    /// What the cluster file keeps and splits ([`super::clang_bb_sections`]).
    pub(crate) split: super::SplitRule,
}

impl Laid<'_> {
    /// The functions to place, in order.
    pub(crate) fn entries(&self) -> &[Entry<'_>] {
        &self.list.entries
    }
}

/// What a writer of a placed binary's figures reads.
pub(crate) struct Placed<'a> {
    pub(crate) graph: &'a Graph,
    /// The binary the graph was fitted to, and where it places each function.
    pub(crate) binary: Option<(&'a Binary, &'a Placement)>,
    /// The ranges file's cap on 2 MiB pages.
    pub(crate) max_pages: usize,
}

/// What a writer of a placed binary's figures found, besides the bytes.
#[derive(Debug, Default)]
pub(crate) struct PlacedOutput {
    /// The ranges written, for the ranges file.
    pub(crate) ranges: Option<Vec<(StatedAddr, StatedAddr)>>,
    /// Hot 2 MiB pages left out because the text does not hold them whole.
    pub(crate) partial_pages: usize,
}

/// Every format, in the order `--help` lists them. A new format is a file of its own with its
/// `FORMAT`, its `mod` line in `link/mod.rs` and one line here.
pub static FORMATS: &[&Format] = &[
    &super::list::FORMAT,
    &super::ld_script::FORMAT,
    &super::gold_order::FORMAT,
    &super::lld_order::FORMAT,
    &super::ranges::FORMAT,
    &super::call_graph_profile::FORMAT,
    &super::clang_bb_sections::FORMAT,
];

/// The format called `name` (as `--format` spells it).
pub fn format(name: &str) -> Option<&'static Format> {
    FORMATS.iter().copied().find(|f| f.name == name)
}

impl Format {
    /// Whether it lays out an order of ours (every linker input but lld's call edges), rather
    /// than the figures of a binary as it is placed.
    pub fn writes_order(&self) -> bool {
        matches!(self.writer, Writer::Order(_))
    }

    /// Whether it is a compiler input that splits functions rather than a layout of whole ones
    /// (`clang-bb-sections`): it needs block counts to split anything.
    pub fn splits_functions(&self) -> bool {
        matches!(self.writer, Writer::Order(w) if w.splits.is_some())
    }

    /// Whether it can align functions and shift the range's start ([`super::Alignment`],
    /// [`ScriptPlacement::hot_offset`]) and place static namesakes one by one.
    pub fn places_individually(&self) -> bool {
        matches!(self.writer, Writer::Order(w) if w.places_individually)
    }
}

/// Formats are told apart by name: each is one static.
impl PartialEq for Format {
    fn eq(&self, other: &Format) -> bool {
        self.name == other.name
    }
}

impl Eq for Format {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_is_listed_once_and_found_by_its_name() {
        let mut names: Vec<&str> = FORMATS.iter().map(|f| f.name).collect();
        for &name in &names {
            assert_eq!(format(name).unwrap().name, name);
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), FORMATS.len());
        assert!(format("auto").is_none());
    }
}
