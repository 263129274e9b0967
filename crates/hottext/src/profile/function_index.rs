//! The binary's functions by address, for the millions of look-ups that turn sample addresses
//! into functions.

use crate::binary::Function;

/// Function bounds in flat arrays with a page index over them: `Binary::function_at`
/// binary-searches the 80-byte `Function` structs, a cache miss per step on a big binary; here
/// one look-up in the page index leaves a search among a few functions.
pub(super) struct FunctionIndex {
    pub starts: Vec<u64>,
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
    /// Over `functions`, sorted by start as `Binary::functions` is.
    pub fn new(functions: &[Function]) -> FunctionIndex {
        let starts: Vec<u64> = functions.iter().map(|f| f.start.0).collect();
        let ends = functions.iter().map(|f| f.end().0).collect();
        let base = starts.first().copied().unwrap_or(0);
        let span = starts
            .last()
            .map_or(0, |&last| last - base)
            .saturating_add(1);
        let mut shift = INDEX_PAGE_SHIFT;
        while span >> shift > INDEX_MAX_PAGES {
            shift += 1;
        }
        Self::with_pages(starts, ends, shift)
    }

    fn with_pages(starts: Vec<u64>, ends: Vec<u64>, shift: u32) -> FunctionIndex {
        let base = starts.first().copied().unwrap_or(0);
        let span = starts
            .last()
            .map_or(0, |&last| last - base)
            .saturating_add(1);
        let first = (0..(span >> shift) + 2)
            .map(|p| starts.partition_point(|&s| s < base.saturating_add(p << shift)) as u32)
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
    pub fn at(&self, addr: u64) -> Option<u32> {
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
    pub(crate) fn starting_at(&self, addr: u64) -> Option<u32> {
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
