//! The edges of each node, for the algorithms that merge nodes along edges (Pettis-Hansen and
//! CDSort): a merge re-points the edges of one node at the other and so needs them listed, and
//! finds an edge by the pair of nodes it joins.

/// Ids a block holds: with the link, one 64-byte cache line.
const BLOCK_IDS: usize = 15;
/// No block (and an unused place in a block).
const NONE: u32 = u32::MAX;

/// The ids of the edges at each node, in the order they were added. A node's ids live in
/// linked blocks of [`BLOCK_IDS`], all full but the last, and the blocks of a node merged away
/// ([`EdgeLists::take`]) go to a free list that later additions draw from.
///
/// Why not a `Vec` per node: a merge frees one list and grows another, and on the 1 M-function
/// benchmark graph the allocator's bookkeeping for those million small lists took 5 % of the
/// CPU samples of CDSort's merge loop, and its headers 19 MB. Here a merge loop allocates
/// nothing once set up, as long as it adds no more ids than it took (both algorithms re-point
/// at most the ids of the node merged away).
pub(super) struct EdgeLists {
    blocks: Vec<Block>,
    nodes: Vec<List>,
    /// The first free block, linked through `Block::next`.
    free: u32,
}

#[derive(Clone, Copy)]
#[repr(align(64))]
struct Block {
    ids: [u32; BLOCK_IDS],
    next: u32,
}

#[derive(Clone, Copy)]
struct List {
    first: u32,
    last: u32,
    len: u32,
}

impl EdgeLists {
    /// The lists of `nodes` nodes, given each edge's two ends in edge order. Each node gets the
    /// blocks its edges fill, allocated at once.
    pub(super) fn new(nodes: usize, ends: impl Iterator<Item = [usize; 2]> + Clone) -> EdgeLists {
        let mut lists = EdgeLists {
            blocks: Vec::new(),
            nodes: vec![
                List {
                    first: NONE,
                    last: NONE,
                    len: 0,
                };
                nodes
            ],
            free: NONE,
        };
        let mut degree = vec![0u32; nodes];
        for [a, b] in ends.clone() {
            degree[a] += 1;
            degree[b] += 1;
        }
        let blocks: usize = degree
            .iter()
            .map(|&d| (d as usize).div_ceil(BLOCK_IDS))
            .sum();
        lists.blocks.reserve_exact(blocks);
        for (node, &d) in degree.iter().enumerate() {
            let start = lists.blocks.len() as u32;
            let count = (d as usize).div_ceil(BLOCK_IDS) as u32;
            // A node's blocks are consecutive and linked in order.
            lists.blocks.extend((start..start + count).map(|b| Block {
                ids: [NONE; BLOCK_IDS],
                next: if b + 1 < start + count { b + 1 } else { NONE },
            }));
            if count > 0 {
                lists.nodes[node].first = start;
                lists.nodes[node].last = start;
            }
        }
        for (e, [a, b]) in ends.enumerate() {
            lists.append(a, e as u32);
            lists.append(b, e as u32);
        }
        lists
    }

    /// How many ids `node` has.
    pub(super) fn len(&self, node: usize) -> usize {
        self.nodes[node].len as usize
    }

    /// Appends the ids of `node` to `out` and leaves the node without any.
    pub(super) fn take(&mut self, node: usize, out: &mut Vec<u32>) {
        let list = std::mem::replace(
            &mut self.nodes[node],
            List {
                first: NONE,
                last: NONE,
                len: 0,
            },
        );
        let mut left = list.len as usize;
        let mut b = list.first;
        while b != NONE {
            let block = self.blocks[b as usize];
            let here = left.min(BLOCK_IDS);
            out.extend_from_slice(&block.ids[..here]);
            left -= here;
            // Hand the block back.
            self.blocks[b as usize].next = self.free;
            self.free = b;
            b = block.next;
        }
    }

    /// Adds `id` to the end of `node`'s ids.
    pub(super) fn push(&mut self, node: usize, id: u32) {
        let list = self.nodes[node];
        if list.len as usize % BLOCK_IDS == 0 {
            // The last block is full (or there is none): start one.
            let b = match self.free {
                NONE => {
                    self.blocks.push(Block {
                        ids: [NONE; BLOCK_IDS],
                        next: NONE,
                    });
                    self.blocks.len() as u32 - 1
                }
                free => {
                    self.free = self.blocks[free as usize].next;
                    self.blocks[free as usize].next = NONE;
                    free
                }
            };
            match list.last {
                NONE => self.nodes[node].first = b,
                last => self.blocks[last as usize].next = b,
            }
            self.nodes[node].last = b;
        }
        self.append(node, id);
    }

    /// Writes `id` at the next place of `node`'s last block, which has one.
    fn append(&mut self, node: usize, id: u32) {
        let list = &mut self.nodes[node];
        let at = list.len as usize % BLOCK_IDS;
        // At set-up a node's blocks are consecutive: its last block moves on as each fills.
        if at == 0 && list.len > 0 && self.blocks[list.last as usize].next != NONE {
            list.last = self.blocks[list.last as usize].next;
        }
        self.blocks[list.last as usize].ids[at] = id;
        list.len += 1;
    }
}

/// An unordered pair of nodes as one key: the same whichever end comes first.
pub(super) fn pair_key(a: u32, b: u32) -> u64 {
    (u64::from(a.min(b)) << 32) | u64::from(a.max(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random merges, as the algorithms do them, against a `Vec` per node.
    #[test]
    fn lists_follow_merges_as_vectors_do_and_reuse_their_blocks() {
        let mut random = crate::layout::tests::random_below(3);
        let nodes = 400;
        let ends: Vec<[usize; 2]> = (0..3000).map(|_| [random(nodes), random(nodes)]).collect();
        let mut lists = EdgeLists::new(nodes, ends.iter().copied());
        let mut expected = vec![Vec::new(); nodes];
        for (e, [a, b]) in ends.iter().enumerate() {
            expected[*a].push(e as u32);
            expected[*b].push(e as u32);
        }
        let blocks = lists.blocks.len();
        let mut taken = Vec::new();
        for _ in 0..nodes * 3 {
            let (keep, gone) = (random(nodes), random(nodes));
            if keep == gone {
                continue;
            }
            taken.clear();
            lists.take(gone, &mut taken);
            assert_eq!(taken, std::mem::take(&mut expected[gone]));
            assert_eq!(lists.len(gone), 0);
            // Re-point some of them, as a merge does with those not joined into another.
            for &x in taken.iter().filter(|&&x| x % 3 != 0) {
                lists.push(keep, x);
                expected[keep].push(x);
            }
            for node in [keep, gone] {
                assert_eq!(lists.len(node), expected[node].len());
            }
        }
        for (node, ids) in expected.iter().enumerate() {
            taken.clear();
            lists.take(node, &mut taken);
            assert_eq!(&taken, ids, "node {node}");
        }
        assert_eq!(lists.blocks.len(), blocks, "a merge allocated a block");
    }
}
