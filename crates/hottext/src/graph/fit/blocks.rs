//! A profile's basic blocks on another binary: block counts name blocks by id, offset and size
//! in their function, so they are kept only where the binary has the same blocks there; the
//! function's block edges go with them.

use crate::binary::{Binary, StatedAddr};
use crate::graph::{FuncId, Graph, GraphBuilder};

/// Adds to `b` the blocks (and block edges) of each profile function `i` that `fitted[i]` places at the binary's
/// function (its index in [`Binary::functions`]) and its id in `b`, unless `code_changed[i]`
/// or the binary's block map differs from what the profile says of a sampled block. Returns
/// the functions whose blocks were left out, by their profile names.
pub(super) fn fit_blocks(
    profile: &Graph,
    binary: &Binary,
    fitted: &[Option<(usize, FuncId)>],
    code_changed: &[bool],
    b: &mut GraphBuilder,
) -> Vec<String> {
    let map = binary.block_map().ok().flatten();
    let mut dropped = Vec::new();
    for (i, f) in profile.funcs().iter().enumerate() {
        let blocks = profile.blocks_of(FuncId::from_index(i));
        let Some((target, id)) = fitted[i] else {
            continue; // the function is gone, and its blocks with it
        };
        if blocks.is_empty() {
            continue;
        }
        let function = &binary.functions[target];
        let same_blocks = map.is_some_and(|map| {
            blocks.iter().all(|block| {
                let start = StatedAddr(function.start.0.saturating_add(block.offset));
                block.offset + block.size <= function.size
                    && map.block_at(start).is_some_and(|placed| {
                        (placed.start, placed.size, placed.id) == (start, block.size, block.block)
                    })
            })
        });
        if code_changed[i] || !same_blocks {
            dropped.push(f.name.clone());
            continue;
        }
        for block in blocks {
            b.add_block_samples(id, block.block, block.offset, block.size, block.samples);
        }
        for e in profile.block_edges_of(FuncId::from_index(i)) {
            b.add_block_edge(id, e.from, e.to, e.count);
        }
    }
    dropped
}

#[cfg(test)]
mod tests {
    use crate::binary::bb_addr_map::tests::clang;
    use crate::binary::fingerprint::fingerprints;
    use crate::binary::Binary;
    use crate::graph::fit::rematch;
    use crate::graph::Graph;

    #[test]
    fn blocks_stay_where_the_code_and_block_map_are_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let bin = Binary::open(&clang(dir.path(), "p", &[])).unwrap();
        let prints = fingerprints(&bin).unwrap();
        let map = bin.block_map().unwrap().expect("clang wrote a block map");
        let work = &bin.functions[bin.index_by_name()["work"]];
        let main = &bin.functions[bin.index_by_name()["main"]];
        let last = *map.blocks_in(work.start, work.end()).last().unwrap();
        let offset = last.start.0 - work.start.0;
        let hash = |f: &str| format!("{:016x}", prints.get(f).unwrap().hash);
        let (w, m) = (work.size, main.size);
        // `work` renamed but the same code, its last block as the binary has it; `main`'s
        // first block one byte too long; neither carries the build-id.
        let text = format!(
            "# hottext profile v4\n# fn-hash: old_work {}\n# fn-hash: main {}\n\
             fn main {m} 1\nfn old_work {w} 9\n\
             block main 0 0 {} 1\nblock old_work {} {offset} {} 9\n",
            hash("work"),
            hash("main"),
            map.blocks_in(main.start, main.end())[0].size + 1,
            last.id,
            last.size,
        );
        let (fitted, matched) = rematch(&Graph::read(text.as_bytes()).unwrap(), &bin, &prints);
        let kept: Vec<(&str, u32)> = (fitted.blocks().iter())
            .map(|b| (fitted.funcs()[b.func].name.as_str(), b.block))
            .collect();
        assert_eq!(kept, [("work", last.id)]);
        assert_eq!(matched.blocks_dropped, ["main"]);

        // Other code under the same name: its blocks go, whatever the map says.
        let changed = text.replace(&hash("work"), "00000000000000aa");
        let changed = changed.replace("old_work", "work");
        let (fitted, matched) = rematch(&Graph::read(changed.as_bytes()).unwrap(), &bin, &prints);
        assert!(fitted.blocks().is_empty());
        assert_eq!(matched.blocks_dropped, ["main", "work"]);
    }
}
