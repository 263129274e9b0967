//! Turning the tallied address pairs into functions and call edges, once per distinct pair and
//! in address order, so that the symbol and code look-ups stay near each other.

use foldhash::HashMap;

use super::frames::{Caller, Frames};
use super::tally::PairCounts;
use super::{SampleKind, Stats};
use crate::binary::{Binary, StatedAddr};
use crate::graph::{Graph, GraphBuilder};

/// In a tallied pair: the frame below is not in the binary (or there is none).
pub(super) const NO_CALLER: u64 = u64::MAX;
/// In a tallied pair: the address is in the binary's mappings but outside its code.
pub(super) const UNRESOLVED: u64 = u64::MAX - 1;

/// Samples by stated address pairs in the binary.
#[derive(Default)]
pub(super) struct Tally {
    /// (innermost frame, return address or a marker) of stack samples.
    pub stack_tops: PairCounts,
    /// (call site, target) of branch record entries.
    pub branch_calls: PairCounts,
}

/// Samples, calls and call sites by function (indices into `Binary::functions`).
pub(super) struct Counts {
    pub self_samples: Vec<u64>,
    pub calls: HashMap<(u32, u32), u64>,
    /// (caller, callee, offset of a byte of the call in the caller): part of the calls' weight.
    /// As many entries as distinct tallied pairs at most, so bounded as the tally is.
    pub sites: HashMap<(u32, u32, u64), u64>,
}

impl Counts {
    /// `n` calls of `callee` by `caller`, from the call instruction holding `site` if known.
    fn add_call(
        &mut self,
        caller: u32,
        callee: u32,
        site: Option<u64>,
        n: u64,
        index: &FunctionIndex,
        stats: &mut Stats,
    ) {
        *self.calls.entry((caller, callee)).or_default() += n;
        stats.calls += n;
        if let Some(site) = site {
            let offset = site - index.starts[caller as usize];
            *self.sites.entry((caller, callee, offset)).or_default() += n;
            stats.calls_sited += n;
        }
    }
}

pub(super) fn resolve(
    binary: &Binary,
    mut frames: Frames,
    tally: Tally,
    stats: &mut Stats,
) -> Counts {
    let index = FunctionIndex::new(binary);
    let mut counts = Counts {
        self_samples: vec![0; binary.functions.len()],
        calls: HashMap::default(),
        sites: HashMap::default(),
    };

    for ((ip, ret), n) in tally.stack_tops.into_sorted() {
        let Some(callee) = index.at(ip) else {
            stats.samples_unresolved += n;
            continue;
        };
        counts.self_samples[callee as usize] += n;
        // The caller, and the last byte of its call instruction when the stack tells it.
        let (caller, site) = match ret {
            NO_CALLER => continue,
            UNRESOLVED => (None, None),
            ret => {
                let func = &binary.functions[callee as usize];
                match frames.caller(callee as usize, func, StatedAddr(ip), StatedAddr(ret)) {
                    Caller::AsUnwound => (index.at(ret - 1), Some(ret - 1)),
                    // The return address is in the caller's caller: the site is the caller's
                    // one direct call of the callee, if it has just one.
                    Caller::Recovered(start) => match index.starting_at(start.0) {
                        Some(caller) => {
                            stats.calls_recovered += n;
                            let site = frames.only_direct_call(
                                caller as usize,
                                &binary.functions[caller as usize],
                                func.start,
                            );
                            (Some(caller), site.map(|s| s.0))
                        }
                        None => {
                            stats.calls_caller_unknown += n;
                            continue;
                        }
                    },
                    Caller::Unknown => {
                        stats.calls_caller_unknown += n;
                        continue;
                    }
                }
            }
        };
        match caller {
            Some(caller) => counts.add_call(caller, callee, site, n, &index, stats),
            None => stats.calls_unresolved += n,
        }
    }

    // A branch record's source is the call instruction's first byte.
    for ((from, to), n) in tally.branch_calls.into_sorted() {
        match (index.at(from), index.at(to)) {
            (Some(caller), Some(callee)) => {
                counts.add_call(caller, callee, Some(from), n, &index, stats)
            }
            _ => stats.calls_unresolved += n,
        }
    }
    counts
}

/// The profile: the functions with samples or calls, their calls, and the headers.
pub(super) fn graph(binary: &Binary, counts: &Counts, kind: SampleKind, stats: &Stats) -> Graph {
    let mut b = GraphBuilder::default();
    let mut ids = vec![None; binary.functions.len()];
    let mut id_of = |b: &mut GraphBuilder, f: u32| {
        *ids[f as usize].get_or_insert_with(|| {
            let func = &binary.functions[f as usize];
            let id = b.func(&func.name, func.size);
            for alias in &func.aliases {
                b.alias(id, alias);
            }
            id
        })
    };
    for (f, &n) in counts.self_samples.iter().enumerate() {
        if n > 0 {
            let id = id_of(&mut b, f as u32);
            b.add_samples(id, n);
        }
    }
    let mut calls: Vec<_> = counts.calls.iter().map(|(&k, &w)| (k, w)).collect();
    calls.sort_unstable();
    for ((caller, callee), weight) in calls {
        let (caller, callee) = (id_of(&mut b, caller), id_of(&mut b, callee));
        b.add_call(caller, callee, weight);
    }
    // Every site's pair has a call, declared above.
    for (&(caller, callee, offset), &weight) in &counts.sites {
        let (caller, callee) = (id_of(&mut b, caller), id_of(&mut b, callee));
        b.add_site(caller, callee, offset, weight);
    }
    if let Some(id) = binary.build_id_hex() {
        b.header("build-id", id);
    }
    let name = binary.path.file_name().unwrap_or(binary.path.as_os_str());
    b.header("binary", name.to_string_lossy());
    b.header("sample-kind", kind);
    b.header("samples", stats.samples_in_binary);
    b.header("event", &stats.event);
    b.finish()
}

/// Function bounds in flat arrays with a page index over them: `Binary::function_at`
/// binary-searches the 80-byte `Function` structs, a cache miss per step on a big binary; here
/// one look-up in the page index leaves a search among a few functions.
struct FunctionIndex {
    starts: Vec<u64>,
    ends: Vec<u64>,
    /// `first[p]`: how many functions start before page `p` (of `1 << shift` bytes from `base`).
    first: Vec<u32>,
    base: u64,
    shift: u32,
}

/// 4 KiB pages, unless the text is so large that the page index would pass this many entries.
const INDEX_PAGE_SHIFT: u32 = 12;
const INDEX_MAX_PAGES: u64 = 1 << 20;

impl FunctionIndex {
    fn new(binary: &Binary) -> FunctionIndex {
        let starts: Vec<u64> = binary.functions.iter().map(|f| f.start.0).collect();
        let ends = binary.functions.iter().map(|f| f.end().0).collect();
        let base = starts.first().copied().unwrap_or(0);
        let span = starts.last().map_or(0, |&last| last - base) + 1;
        let mut shift = INDEX_PAGE_SHIFT;
        while span >> shift > INDEX_MAX_PAGES {
            shift += 1;
        }
        Self::with_pages(starts, ends, shift)
    }

    fn with_pages(starts: Vec<u64>, ends: Vec<u64>, shift: u32) -> FunctionIndex {
        let base = starts.first().copied().unwrap_or(0);
        let span = starts.last().map_or(0, |&last| last - base) + 1;
        let first = (0..(span >> shift) + 2)
            .map(|p| starts.partition_point(|&s| s < base + (p << shift)) as u32)
            .collect();
        FunctionIndex {
            starts,
            ends,
            first,
            base,
            shift,
        }
    }

    /// The function whose bytes contain `addr`.
    fn at(&self, addr: u64) -> Option<u32> {
        let page = (addr.checked_sub(self.base)? >> self.shift) as usize;
        // The functions that start in this page, and the last one before it (it may reach in).
        let (lo, hi) = match self.first.get(page..page + 2) {
            Some(&[lo, hi]) => (lo.saturating_sub(1) as usize, hi as usize),
            _ => (self.starts.len().saturating_sub(1), self.starts.len()),
        };
        let i = lo
            + self
                .starts
                .get(lo..hi)?
                .partition_point(|&s| s <= addr)
                .checked_sub(1)?;
        (addr < self.ends[i]).then_some(i as u32)
    }

    /// The function that starts exactly at `addr`.
    fn starting_at(&self, addr: u64) -> Option<u32> {
        let i = self.at(addr)?;
        (self.starts[i as usize] == addr).then_some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_index_finds_the_same_function_as_a_plain_search() {
        // Small and large functions, gaps, one spanning pages, several in one page.
        let funcs = [
            (0x1000, 0x10),
            (0x1010, 0x30),
            (0x1100, 0x2400),
            (0x3600, 0x8),
            (0x3700, 0x100),
            (0x9000, 0x4),
        ];
        for shift in [4, 8, 12] {
            let idx = FunctionIndex::with_pages(
                funcs.iter().map(|f| f.0).collect(),
                funcs.iter().map(|f| f.0 + f.1).collect(),
                shift,
            );
            for addr in 0xf00..0x9100 {
                let plain = funcs
                    .iter()
                    .position(|&(s, n)| addr >= s && addr < s + n)
                    .map(|i| i as u32);
                assert_eq!(idx.at(addr), plain, "addr {addr:#x} shift {shift}");
            }
            assert_eq!(idx.starting_at(0x3600), Some(3));
            assert_eq!(idx.starting_at(0x3604), None);
        }
    }
}
