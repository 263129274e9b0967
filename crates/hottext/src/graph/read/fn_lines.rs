//! `fn` lines, read a batch at a time. Each declares a name that must be new, and on a large
//! profile the name index's slot that says so is rarely in cache: a batch starts all its
//! slots' reads before checking any, so that they overlap instead of waiting one after another.

use super::{raw_fields, Reader};
use crate::graph::GraphError;

/// Lines per batch: enough reads in flight, few enough that the batch stays in cache.
const BATCH: usize = 32;

/// Consecutive `fn` lines not read yet, as the file has them.
#[derive(Default)]
pub(super) struct FnLines {
    bytes: Vec<u8>,
    /// Where each line ends in `bytes`.
    ends: Vec<usize>,
    /// The line number of the first.
    first_line: usize,
}

impl FnLines {
    /// Adds line `lineno`; true when the batch is full.
    pub(super) fn push(&mut self, raw: &[u8], lineno: usize) -> bool {
        if self.ends.is_empty() {
            self.first_line = lineno;
        }
        self.bytes.extend_from_slice(raw);
        self.ends.push(self.bytes.len());
        self.ends.len() >= BATCH
    }

    fn lines(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(&self.ends)
            .map(|(start, &end)| &self.bytes[start..end])
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }
}

impl Reader {
    /// Reads the batch's lines in order (the first error ends it, with its line number), and
    /// empties it.
    pub(super) fn read_fn_lines(&mut self, batch: &mut FnLines) -> Result<(), GraphError> {
        for name in batch.lines().filter_map(|raw| raw_fields(raw).nth(1)) {
            self.ids.prefetch_slot(self.ids.hash(name));
        }
        for (i, raw) in batch.lines().enumerate() {
            self.raw_line(raw, batch.first_line + i)?;
        }
        batch.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::FnLines;

    #[test]
    fn a_batch_gives_back_its_lines_whole_and_says_when_it_is_full() {
        let mut batch = FnLines::default();
        assert_eq!(batch.lines().count(), 0);
        let lines: Vec<String> = (0..super::BATCH)
            .map(|i| format!("fn f{i} {i} 0\n"))
            .collect();
        for (i, line) in lines.iter().enumerate() {
            let full = batch.push(line.as_bytes(), 10 + i);
            assert_eq!(full, i + 1 == super::BATCH);
        }
        assert_eq!(batch.first_line, 10);
        let back: Vec<&[u8]> = batch.lines().collect();
        assert_eq!(back, lines.iter().map(|l| l.as_bytes()).collect::<Vec<_>>());
        batch.clear();
        batch.push(b"fn last 1 1", 99);
        assert_eq!(batch.lines().collect::<Vec<_>>(), [&b"fn last 1 1"[..]]);
        assert_eq!(batch.first_line, 99);
    }
}
