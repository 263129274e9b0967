//! Finds functions by name without storing each name a second time: a table of ids that
//! compares against `funcs[id].name`. On a 1 M-function profile a second copy of every name
//! cost more in allocations and cache misses than the look-ups themselves.
//!
//! Why our own table: reading a large profile's call lines is mostly these look-ups, each a
//! chain of cache misses (the slot, the function, its name's bytes). A reader that knows the
//! names of the lines ahead starts those reads early, one level at a time
//! ([`NameIndex::prefetch_slot`], [`NameIndex::prefetch_func`]), which a general map cannot
//! offer. (Starting the name's read too, a third level, measured no faster.) A slot holds the
//! id and the hash's top 32 bits, so that a probe reads a function only when those match, and
//! the table grows without hashing any name again.

use std::hash::BuildHasher;

use super::{Func, FuncId};
use crate::prefetch::prefetch;

/// Indexed names per slot at most: probes stay short.
const MAX_LOAD: usize = 2;

#[derive(Default)]
pub(super) struct NameIndex {
    /// Zero when empty, else the hash's top 32 bits over the id plus one.
    slots: Vec<u64>,
    /// `log2(slots.len())`, at most 32: the top bits of the hash pick a probe's first slot.
    bits: u32,
    used: usize,
    hasher: foldhash::fast::FixedState,
}

impl NameIndex {
    /// The hash every method takes, of the name's bytes.
    pub(super) fn hash(&self, name: &[u8]) -> u64 {
        self.hasher.hash_one(name)
    }

    fn start(&self, hash: u64) -> usize {
        if self.bits == 0 {
            0
        } else {
            (hash >> (u64::BITS - self.bits)) as usize
        }
    }

    fn tag(hash: u64) -> u64 {
        hash >> 32 << 32
    }

    /// The ids in the probe of `hash` whose tag matches, in probe order.
    fn candidates(&self, hash: u64) -> impl Iterator<Item = FuncId> + '_ {
        let mask = self.slots.len().wrapping_sub(1);
        let mut i = self.start(hash);
        let tag = Self::tag(hash);
        std::iter::from_fn(move || loop {
            let slot = *self.slots.get(i)?;
            if slot == 0 {
                return None;
            }
            i = (i + 1) & mask;
            if Self::tag(slot) == tag {
                return Some(FuncId((slot as u32) - 1));
            }
        })
    }

    pub(super) fn get(&self, funcs: &[Func], name: &str) -> Option<FuncId> {
        self.candidates(self.hash(name.as_bytes()))
            .find(|id| funcs[id.index()].name == name)
    }

    /// Starts loading the slot a look-up of `hash` reads first.
    pub(super) fn prefetch_slot(&self, hash: u64) {
        if let Some(slot) = self.slots.get(self.start(hash)) {
            prefetch(slot);
        }
    }

    /// Starts loading the function a look-up of `hash` compares first (its slot should be
    /// loaded by now: see [`NameIndex::prefetch_slot`]).
    pub(super) fn prefetch_func(&self, funcs: &[Func], hash: u64) {
        if let Some(func) = self
            .candidates(hash)
            .next()
            .and_then(|id| funcs.get(id.index()))
        {
            prefetch(func);
        }
    }

    /// Indexes `funcs[id]`, whose name must not be indexed yet.
    pub(super) fn insert(&mut self, funcs: &[Func], id: FuncId) {
        if (self.used + 1) * MAX_LOAD > self.slots.len() {
            self.grow();
        }
        let hash = self.hash(funcs[id.index()].name.as_bytes());
        self.put(Self::tag(hash) | (u64::from(id.0) + 1));
        self.used += 1;
    }

    fn put(&mut self, slot: u64) {
        let mask = self.slots.len() - 1;
        let mut i = self.start(slot);
        while self.slots[i] != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = slot;
    }

    /// Doubles the table, placing each slot by its tag, which holds the hash's top bits.
    fn grow(&mut self) {
        let old = std::mem::take(&mut self.slots);
        self.bits = (self.bits + 1).max(4);
        assert!(self.bits <= 32, "more than 2^31 names");
        self.slots = vec![0; 1 << self.bits];
        for slot in old.into_iter().filter(|&s| s != 0) {
            self.put(slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn func(name: &str) -> Func {
        Func {
            name: name.to_string(),
            size: 1,
            samples: 0,
            aliases: vec![],
        }
    }

    /// Through many growths, every indexed name is found under its own id, and names never
    /// indexed are not.
    #[test]
    fn finds_every_indexed_name_through_growth_and_no_other() {
        let funcs: Vec<Func> = (0..20_000).map(|i| func(&format!("f{i}"))).collect();
        let mut index = NameIndex::default();
        for i in 0..funcs.len() {
            if i % 3 != 0 {
                index.insert(&funcs, FuncId::from_index(i));
            }
        }
        for (i, f) in funcs.iter().enumerate() {
            let found = index.get(&funcs, &f.name);
            assert_eq!(
                found,
                (i % 3 != 0).then_some(FuncId::from_index(i)),
                "{}",
                f.name
            );
            let hash = index.hash(f.name.as_bytes());
            index.prefetch_slot(hash);
            index.prefetch_func(&funcs, hash);
        }
        assert_eq!(index.get(&funcs, "f20000"), None);
        assert_eq!(index.get(&funcs, ""), None);
        assert!(index.slots.len() >= 2 * index.used);
    }

    #[test]
    fn an_empty_index_finds_nothing_and_prefetches_safely() {
        let index = NameIndex::default();
        assert_eq!(index.get(&[], "main"), None);
        index.prefetch_slot(index.hash(b"main"));
        index.prefetch_func(&[], index.hash(b"main"));
    }
}
