//! lld's `--call-graph-ordering-file`: the profile's call edges, for lld to order with its own
//! algorithm (`--call-graph-profile-sort=cdsort`, lld 19's default, or `hfsort`).
//!
//! This hands the ordering to the linker, so it is the way to compare lld's orders with ours on
//! the same profile. It gives no `__hot_start`/`__hot_end` markers and no 2 MiB alignment: lld
//! places the ordered sections where its own rules put them, so a binary linked this way is
//! a layout to measure, not one the huge-page runtime can map.
//!
//! One line a call edge, `caller callee weight`, with plain linker symbol names (a local's
//! `;file.c` suffix dropped: lld looks names up in every object's symbol table). Lines are
//! sorted by decreasing weight, then by names, so the same profile gives the same file.

use std::io::{self, Write};

use super::format::{Format, Placed, PlacedOutput, Writer};
use super::EmitError;
use crate::binary::symbol_of;
use crate::graph::{FuncId, Graph};

/// `--format lld-cgprofile`.
pub(crate) static FORMAT: Format = Format {
    name: "lld-cgprofile",
    help: "The call edges for lld's own ordering, -Wl,--call-graph-ordering-file=FILE with --call-graph-profile-sort=cdsort or hfsort: no markers, for comparing lld's orders (order only)",
    writer: Writer::Placed(write_placed),
};

/// The call edges among the functions the binary places (all of them without a binary).
fn write_placed(placed: &Placed, out: &mut dyn Write) -> Result<PlacedOutput, EmitError> {
    let at = placed.binary.map(|(_, at)| at);
    let keep = |f: FuncId| at.is_none_or(|at| at[f.index()].is_some());
    write_call_graph_profile(placed.graph, keep, out)?;
    Ok(PlacedOutput::default())
}

/// Writes the call edges between functions that `keep` accepts. Self-calls and zero weights are
/// left out: lld ignores the first and the second carries no evidence.
fn write_call_graph_profile(
    graph: &Graph,
    keep: impl Fn(FuncId) -> bool,
    out: &mut dyn Write,
) -> io::Result<()> {
    let name = |f: FuncId| symbol_of(&graph.funcs()[f].name);
    let mut edges: Vec<_> = graph
        .calls()
        .iter()
        .filter(|c| c.caller != c.callee && c.weight > 0 && keep(c.caller) && keep(c.callee))
        .collect();
    edges.sort_by(|a, b| {
        b.weight
            .cmp(&a.weight)
            .then_with(|| name(a.caller).cmp(name(b.caller)))
            .then_with(|| name(a.callee).cmp(name(b.callee)))
    });
    for c in edges {
        let (caller, callee) = (name(c.caller), name(c.callee));
        for n in [caller, callee] {
            // lld splits the line at white space: such a name would shift the fields.
            if n.is_empty() || n.chars().any(|ch| ch.is_whitespace() || ch.is_control()) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("function name {n:?} cannot be written to a call-graph ordering file (empty, white space or control characters)"),
                ));
            }
        }
        writeln!(out, "{caller} {callee} {}", c.weight)?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_heaviest_first_without_self_calls_zero_weights_or_dropped_functions() {
        let text = "# hottext profile v1\nfn a;x.c 10 1\nfn b 10 1\nfn c 10 1\nfn gone 10 1\n\
                    call a;x.c b 5\ncall b c 9\ncall b b 50\ncall c a;x.c 0\ncall a;x.c gone 7\n";
        let graph = Graph::read(text.as_bytes()).unwrap();
        let gone = FuncId::from_index(graph.funcs().iter().position(|f| f.name == "gone").unwrap());
        let mut out = Vec::new();
        write_call_graph_profile(&graph, |f| f != gone, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "b c 9\na b 5\n");
    }

    #[test]
    fn a_name_lld_would_split_is_refused() {
        let mut b = crate::graph::GraphBuilder::default();
        let (x, y) = (b.func("x y", 10), b.func("z", 10));
        b.add_call(x, y, 3);
        let mut out = Vec::new();
        let err = write_call_graph_profile(&b.finish(), |_| true, &mut out).unwrap_err();
        assert!(err.to_string().contains("\"x y\""), "{err}");
        assert!(out.is_empty());
    }
}
