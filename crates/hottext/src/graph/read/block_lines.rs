//! `block` lines (v4): `block <fn> <id> <offset> <size> <samples>`, the samples of one basic
//! block of a declared function.

use foldhash::HashSet;

use super::{count, field, no_more, number, unescape, Fields};
use crate::graph::{BlockSamples, Func, FuncId};

/// The blocks read so far, and which (function, block) pairs they name.
#[derive(Default)]
pub(super) struct BlockLines {
    pub blocks: Vec<BlockSamples>,
    seen: HashSet<(FuncId, u32)>,
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
        let block_field = field(&mut fields, kind, "a block id")?;
        let block: u32 = block_field
            .parse()
            .map_err(|_| format!("block id '{block_field}' is not a whole number below 2^32"))?;
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

    /// The blocks as a graph keeps them: sorted by function and block id.
    pub fn into_sorted(self) -> Vec<BlockSamples> {
        let mut blocks = self.blocks;
        blocks.sort_unstable_by_key(|b| (b.func, b.block));
        blocks
    }
}
