//! `block` lines (v4): `block <fn> <id> <offset> <size> <samples>`, the samples of one basic
//! block of a declared function; and `block-edge` lines (v5): `block-edge <fn> <from> <to>
//! <count>`, the transfers between two blocks of it that earlier `block` lines declare.

use foldhash::HashSet;

use super::{count, field, no_more, number, unescape, Fields};
use crate::graph::{BlockEdge, BlockSamples, Func, FuncId};

/// The blocks and block edges read so far, and which (function, block) pairs and (function,
/// from, to) triples they name.
#[derive(Default)]
pub(super) struct BlockLines {
    pub blocks: Vec<BlockSamples>,
    seen: HashSet<(FuncId, u32)>,
    pub edges: Vec<BlockEdge>,
    seen_edges: HashSet<(FuncId, u32, u32)>,
}

impl BlockLines {
    /// Reads one line's fields after its kind; `func` finds a declared function by name.
    pub fn block(
        &mut self,
        version: u32,
        mut fields: Fields<'_>,
        funcs: &[Func],
        func: impl Fn(&str) -> Result<FuncId, String>,
    ) -> Result<(), String> {
        let kind = "block";
        let name = &*unescape(version, field(&mut fields, kind, "a function name")?)?;
        let id = func(name)?;
        let block = block_id(field(&mut fields, kind, "a block id")?)?;
        let offset = number(field(&mut fields, kind, "an offset")?, "offset")?;
        let size = number(field(&mut fields, kind, "a size")?, "size")?;
        let samples = count(field(&mut fields, kind, "a sample count")?, "sample count")?;
        no_more(fields)?;
        let func_size = funcs[id.index()].size;
        if offset.checked_add(size).is_none_or(|end| end > func_size) {
            return Err(format!(
                "block {block} of '{name}' ({size} bytes from offset {offset}) lies outside the function's {func_size} bytes"
            ));
        }
        if !self.seen.insert((id, block)) {
            return Err(format!("block {block} of '{name}' is on two lines"));
        }
        self.blocks.push(BlockSamples {
            func: id,
            block,
            offset,
            size,
            samples,
        });
        Ok(())
    }

    /// Reads a `block-edge` line's fields after its kind; `func` finds a declared function.
    pub fn block_edge(
        &mut self,
        version: u32,
        mut fields: Fields<'_>,
        func: impl Fn(&str) -> Result<FuncId, String>,
    ) -> Result<(), String> {
        let kind = "block-edge";
        let name = &*unescape(version, field(&mut fields, kind, "a function name")?)?;
        let id = func(name)?;
        let from = block_id(field(&mut fields, kind, "a source block id")?)?;
        let to = block_id(field(&mut fields, kind, "a target block id")?)?;
        let count = count(field(&mut fields, kind, "a count")?, "count")?;
        no_more(fields)?;
        for block in [from, to] {
            if !self.seen.contains(&(id, block)) {
                return Err(format!(
                    "block {block} of '{name}' has no 'block' line before this edge: an edge joins two blocks the profile lists"
                ));
            }
        }
        if !self.seen_edges.insert((id, from, to)) {
            return Err(format!(
                "the edge from block {from} to block {to} of '{name}' is on two lines"
            ));
        }
        self.edges.push(BlockEdge {
            func: id,
            from,
            to,
            count,
        });
        Ok(())
    }

    /// The blocks and edges as a graph keeps them: sorted by function and block ids.
    pub fn into_sorted(self) -> (Vec<BlockSamples>, Vec<BlockEdge>) {
        let (mut blocks, mut edges) = (self.blocks, self.edges);
        blocks.sort_unstable_by_key(|b| (b.func, b.block));
        edges.sort_unstable_by_key(|e| (e.func, e.from, e.to));
        (blocks, edges)
    }
}

/// A block id: a whole number below 2^32.
fn block_id(field: &str) -> Result<u32, String> {
    field
        .parse()
        .map_err(|_| format!("block id '{field}' is not a whole number below 2^32"))
}
