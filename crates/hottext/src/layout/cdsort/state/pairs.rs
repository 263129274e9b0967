//! The edge between two chains, found by the pair: a hash table of edge ids.
//!
//! Why our own table: a merge looks up every edge of the smaller chain, and on a 1 M-function
//! graph those lookups are random reads of a table of tens of megabytes. Started a merge's worth
//! at a time ([`PairIndex::prefetch`]) they overlap; a general map offers no way to start them.
//! The alternative without a table, marking the larger chain's neighbours in an array, walked
//! five edges of the larger chain per edge of the smaller one (60 M edge reads on that graph).
//!
//! A slot holds an edge id and, in the bits the ids leave free, a tag of the pair's hash, so
//! that a probe reads the edge (to compare its ends) only when the tag matches. Linear probing;
//! a removed edge leaves a tombstone that a later insert on the same path reuses, and the table
//! is rebuilt from the live edges when used slots pass [`MAX_LOAD`].

use crate::layout::edge_lists::pair_key;
use crate::prefetch::prefetch;

/// An empty slot (no edge has id part zero: ids are stored plus one).
const EMPTY: u32 = 0;
/// A removed edge's slot: all ones, which no id part reaches (see [`PairIndex::new`]).
const TOMB: u32 = u32::MAX;
/// Used slots (live and tombstones) per slot before a rebuild.
const MAX_LOAD: f64 = 0.8;

pub(super) struct PairIndex {
    slots: Vec<u32>,
    /// `log2(slots.len())`.
    bits: u32,
    /// Low bits of a slot that hold the edge id plus one.
    id_bits: u32,
    /// Slots live or tombstoned.
    used: usize,
}

impl PairIndex {
    /// A table for `edges` edges at most.
    pub(super) fn new(edges: usize) -> PairIndex {
        let len = (edges + edges / 2).next_power_of_two().max(16);
        // Id parts run from 1 to `edges`; one more bit than that needs keeps all ones free.
        let id_bits = (u64::BITS - (edges as u64 + 1).leading_zeros()).max(1);
        PairIndex {
            slots: vec![EMPTY; len],
            bits: len.trailing_zeros(),
            id_bits,
            used: 0,
        }
    }

    /// The slot the pair's probe starts at, and the slot value of edge `e` under that pair.
    fn hash(&self, a: u32, b: u32, e: u32) -> (usize, u32) {
        let h = pair_key(a, b).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let start = (h >> (u64::BITS - self.bits)) as usize;
        let tag = (h >> 8) as u32 & ((1u64 << (u32::BITS - self.id_bits)) - 1) as u32;
        let value = (u64::from(tag) << self.id_bits) as u32 | (e + 1);
        (start, value)
    }

    fn id_part(&self, slot: u32) -> u32 {
        slot & ((1u64 << self.id_bits) - 1) as u32
    }

    /// Starts loading the slot where the pair's probe starts.
    pub(super) fn prefetch(&self, a: u32, b: u32) {
        prefetch(&self.slots[self.hash(a, b, 0).0]);
    }

    /// Adds edge `e` between chains `a` and `b`, which have no edge yet.
    pub(super) fn insert(&mut self, a: u32, b: u32, e: u32) {
        let (start, value) = self.hash(a, b, e);
        let mask = self.slots.len() - 1;
        let mut i = start;
        while self.slots[i] != EMPTY && self.slots[i] != TOMB {
            i = (i + 1) & mask;
        }
        if self.slots[i] == EMPTY {
            self.used += 1;
        }
        self.slots[i] = value;
    }

    /// Removes edge `e` between chains `a` and `b`.
    pub(super) fn remove(&mut self, a: u32, b: u32, e: u32) {
        let (mut i, _) = self.hash(a, b, e);
        let mask = self.slots.len() - 1;
        loop {
            let slot = self.slots[i];
            assert_ne!(slot, EMPTY, "edge {e} is not in the pair index");
            if slot != TOMB && self.id_part(slot) == e + 1 {
                self.slots[i] = TOMB;
                return;
            }
            i = (i + 1) & mask;
        }
    }

    /// The edge between chains `a` and `b`, if any; `ends(id)` tells an edge's two chains.
    pub(super) fn find(&self, a: u32, b: u32, ends: impl Fn(u32) -> [u32; 2]) -> Option<u32> {
        let (mut i, wanted) = self.hash(a, b, 0);
        let tag_of = |slot: u32| slot >> self.id_bits;
        let mask = self.slots.len() - 1;
        loop {
            let slot = self.slots[i];
            if slot == EMPTY {
                return None;
            }
            if slot != TOMB && tag_of(slot) == tag_of(wanted) {
                let id = self.id_part(slot) - 1;
                let [x, y] = ends(id);
                if pair_key(x, y) == pair_key(a, b) {
                    return Some(id);
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// Whether the table should be rebuilt before the next insert. Below the limit one insert
    /// still leaves empty slots, which end every probe.
    pub(super) fn is_crowded(&self) -> bool {
        self.used as f64 > MAX_LOAD * self.slots.len() as f64
    }

    /// Empties the table, to insert the live edges again.
    pub(super) fn clear(&mut self) {
        self.slots.fill(EMPTY);
        self.used = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_what_was_inserted_under_either_order_of_the_pair_and_nothing_removed() {
        let ends: Vec<[u32; 2]> = (0..1000u32).map(|e| [e, e * 7 + 1]).collect();
        let mut index = PairIndex::new(ends.len());
        for (e, &[a, b]) in ends.iter().enumerate() {
            index.insert(a, b, e as u32);
        }
        let look = |index: &PairIndex, a, b| index.find(a, b, |id| ends[id as usize]);
        for (e, &[a, b]) in ends.iter().enumerate() {
            assert_eq!(look(&index, b, a), Some(e as u32));
            assert_eq!(look(&index, a, b + 1), None);
        }
        for (e, &[a, b]) in ends.iter().enumerate().step_by(2) {
            index.remove(a, b, e as u32);
        }
        for (e, &[a, b]) in ends.iter().enumerate() {
            let kept = e % 2 == 1;
            assert_eq!(look(&index, a, b), kept.then_some(e as u32), "edge {e}");
        }
        // Tombstones are reused: inserting the removed edges again uses no new slot.
        let used = index.used;
        for (e, &[a, b]) in ends.iter().enumerate().step_by(2) {
            index.insert(a, b, e as u32);
        }
        assert_eq!(index.used, used);
        assert!(ends
            .iter()
            .enumerate()
            .all(|(e, &[a, b])| look(&index, a, b) == Some(e as u32)));
    }

    /// Merges along a random graph's edges until no pair fits, checking after every merge that
    /// the index holds exactly the live edges under their current chains: with chains of any
    /// length, and with short ones, where merges give up edges past the limit.
    #[test]
    fn the_index_follows_every_merge_and_rebuild() {
        for max_chain_functions in [1800, 8] {
            merge_and_check_the_index(max_chain_functions);
        }
    }

    fn merge_and_check_the_index(max_chain_functions: u32) {
        use crate::layout::cdsort::{state::State, CdsortParams};
        // A random tree and a few more calls: sparse, so that most merges re-point edges
        // rather than join them, and the re-pointed edges fill the table with tombstones. Some
        // 2 700 edges start a table of 4 096 slots two-thirds full, so it is rebuilt on the way.
        let n = 1800;
        let names: Vec<String> = (0..n).map(|i| format!("f{i}")).collect();
        let funcs: Vec<(&str, u64, u64)> = names.iter().map(|f| (f.as_str(), 64, 1)).collect();
        let mut random = crate::layout::tests::random_below(7);
        let mut calls: Vec<(&str, &str, u64)> = (1..n)
            .map(|i| (names[random(i)].as_str(), names[i].as_str(), 1))
            .collect();
        for _ in 0..n / 2 {
            calls.push((names[random(n)].as_str(), names[random(n)].as_str(), 1));
        }
        let graph = crate::layout::tests::graph(&funcs, &calls);
        let params = CdsortParams {
            max_chain_functions,
            ..CdsortParams::default()
        };
        let mut state = State::new(&graph, &params);
        let (mut merges, mut rebuilt) = (0, false);
        while let Some(e) = (0..state.edges.len() as u32)
            .find(|&e| !state.is_dead(e) && state.consider(e).is_some())
        {
            let used = state.pairs.used;
            state.merge(e);
            merges += 1;
            rebuilt |= state.pairs.used < used;
            let mut pairs = std::collections::HashSet::new();
            for (id, edge) in state.edges.iter().enumerate() {
                let [a, b] = edge.ends;
                let found = state.pairs.find(a, b, |x| state.edges[x as usize].ends);
                if state.is_dead(id as u32) {
                    assert_ne!(
                        found,
                        Some(id as u32),
                        "dead edge {id} after merge {merges}"
                    );
                    continue;
                }
                assert_eq!(found, Some(id as u32), "edge {id} after merge {merges}");
                assert!(
                    pairs.insert(pair_key(a, b)),
                    "two live edges join {a} and {b}"
                );
                for c in [a, b] {
                    let first = state.chains[c as usize].first;
                    assert_eq!(
                        state.place[first.index()].chain,
                        c,
                        "edge {id} ends at dead chain {c}"
                    );
                }
            }
        }
        if max_chain_functions as usize >= n {
            assert_eq!(merges, n - 1, "one chain at the end");
            assert!(
                rebuilt,
                "the table was never rebuilt: make the graph denser"
            );
        } else {
            assert!(merges < n - 1, "the limit never stopped a merge");
        }
    }

    #[test]
    fn a_slot_value_never_reads_as_empty_or_removed() {
        for edges in [1usize, 2, 3, 255, 256, 1 << 20] {
            let index = PairIndex::new(edges);
            for e in [0, edges as u32 - 1] {
                for pair in [(0, 1), (u32::MAX - 1, 5), (e, e + 1)] {
                    let (_, value) = index.hash(pair.0, pair.1, e);
                    assert_ne!(index.id_part(value), 0);
                    assert_ne!(value, TOMB);
                    assert_eq!(index.id_part(value), e + 1);
                }
            }
        }
    }
}
