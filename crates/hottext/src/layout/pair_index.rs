//! The edge between two nodes (Pettis-Hansen's nodes, CDSort's chains), found by the pair: a
//! hash table of edge ids.
//!
//! Why our own table: a merge looks up every edge of the node merged away, and on a 1 M-function
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
use crate::prefetch::{prefetch, DISTANCE as PREFETCH_DISTANCE};

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
    #[inline]
    pub(super) fn prefetch(&self, a: u32, b: u32) {
        prefetch(&self.slots[self.hash(a, b, 0).0]);
    }

    /// Adds edge `e` between nodes `a` and `b`, which have no edge yet.
    #[inline]
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

    /// Removes edge `e` between nodes `a` and `b`.
    #[inline]
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

    /// The edge between nodes `a` and `b`, if any; `ends(id)` tells an edge's two nodes.
    #[inline]
    pub(super) fn find(&self, a: u32, b: u32, ends: impl Fn(u32) -> [u32; 2]) -> Option<u32> {
        self.probe(a, b, |id| {
            let [x, y] = ends(id);
            pair_key(x, y) == pair_key(a, b)
        })
    }

    /// The first edge on the pair's probe whose tag matches, unconfirmed: the edge whose ends
    /// [`PairIndex::find`] most likely reads, which a caller can start loading beforehand.
    #[inline]
    pub(super) fn candidate(&self, a: u32, b: u32) -> Option<u32> {
        self.probe(a, b, |_| true)
    }

    /// Walks the pair's probe to the first edge whose tag matches and that `is_pair` accepts.
    #[inline]
    fn probe(&self, a: u32, b: u32, is_pair: impl Fn(u32) -> bool) -> Option<u32> {
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
                if is_pair(id) {
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

    /// Empties the table, then indexes every edge that `ends` gives ends (the live ones), in
    /// id order: at set-up, and again when a merge finds it crowded with tombstones.
    pub(super) fn fill(&mut self, edges: usize, ends: impl Fn(u32) -> Option<[u32; 2]>) {
        self.slots.fill(EMPTY);
        self.used = 0;
        for e in 0..edges as u32 {
            // Random writes: start the one a few edges ahead so that they overlap.
            let ahead = e as usize + PREFETCH_DISTANCE;
            if let Some([a, b]) = (ahead < edges).then(|| ends(ahead as u32)).flatten() {
                self.prefetch(a, b);
            }
            if let Some([a, b]) = ends(e) {
                self.insert(a, b, e);
            }
        }
    }

    /// Slots live or tombstoned: a merge's test sees rebuilds by it.
    #[cfg(test)]
    pub(super) fn used(&self) -> usize {
        self.used
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
        let mut confirmed = 0;
        for (e, &[a, b]) in ends.iter().enumerate() {
            assert_eq!(look(&index, b, a), Some(e as u32));
            assert_eq!(look(&index, a, b + 1), None);
            // The candidate is the first tag match on the probe: there is one, and it is the
            // edge itself unless another pair's tag matched earlier on the same probe.
            let candidate = index.candidate(b, a);
            assert!(candidate.is_some(), "edge {e}");
            confirmed += usize::from(candidate == Some(e as u32));
        }
        assert!(confirmed >= ends.len() * 99 / 100, "{confirmed}");
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

    /// Re-pointing edges many times (remove, change the ends, insert) leaves tombstones; a
    /// refill from the live edges then finds every live pair, and none of the old ones.
    #[test]
    fn a_refill_after_many_re_pointed_edges_finds_the_live_pairs_only() {
        let mut ends: Vec<[u32; 2]> = (0..64u32)
            .flat_map(|a| (1..=28u32).map(move |k| [a, a + k]))
            .collect();
        let mut index = PairIndex::new(ends.len());
        index.fill(ends.len(), |e| Some(ends[e as usize]));
        let mut old = Vec::new();
        let mut refills = 0;
        for round in 0..20 * ends.len() {
            let e = (round * 7919) % ends.len();
            let [a, b] = ends[e];
            index.remove(a, b, e as u32);
            old.push([a, b]);
            ends[e] = [a, 1000 + round as u32];
            index.insert(a, 1000 + round as u32, e as u32);
            if index.is_crowded() {
                index.fill(ends.len(), |e| Some(ends[e as usize]));
                refills += 1;
            }
        }
        assert!(refills > 0, "never crowded: re-point more edges");
        let look = |index: &PairIndex, [a, b]: [u32; 2]| index.find(b, a, |id| ends[id as usize]);
        for (e, &pair) in ends.iter().enumerate() {
            assert_eq!(look(&index, pair), Some(e as u32), "edge {e}");
        }
        for pair in old {
            let live = ends
                .iter()
                .any(|&[a, b]| pair_key(a, b) == pair_key(pair[0], pair[1]));
            assert_eq!(look(&index, pair).is_some(), live);
        }
        // Edges `fill` is given no ends for are left out.
        index.fill(ends.len(), |e| (e % 2 == 0).then(|| ends[e as usize]));
        for (e, &pair) in ends.iter().enumerate() {
            assert_eq!(look(&index, pair), (e % 2 == 0).then_some(e as u32));
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
