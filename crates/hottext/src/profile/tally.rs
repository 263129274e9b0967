//! Counting address pairs, millions of them: appended to a batch, which a helper thread sorts
//! and merges into the counts while the next batch fills. Sequential writes and sorting cost
//! less than a hash map's cache miss per sample, the sorting runs beside the reading of
//! perf.data, and memory stays bounded by the distinct pairs plus a few batches.

use std::sync::mpsc::{sync_channel, SyncSender};
use std::thread::JoinHandle;

/// Pairs per batch: 4 MiB, which sorts within the CPU caches.
const BATCH: usize = 1 << 18;
/// Full batches waiting for the helper thread; the reader waits beyond that.
const QUEUED_BATCHES: usize = 2;

type Pair = (u64, u64);
type Counted = Vec<(Pair, u64)>;

/// The helper thread: where to send full batches, and its counts when it is done.
struct Helper {
    batches: SyncSender<Vec<Pair>>,
    done: JoinHandle<Counted>,
}

pub(super) struct PairCounts {
    batch: Vec<Pair>,
    batch_size: usize,
    /// Started at the first full batch.
    helper: Option<Helper>,
    /// Counts merged here when no helper thread could be started.
    counted: Counted,
}

impl Default for PairCounts {
    fn default() -> Self {
        PairCounts::with_batch(BATCH)
    }
}

impl PairCounts {
    fn with_batch(batch_size: usize) -> PairCounts {
        PairCounts {
            batch: Vec::new(),
            batch_size,
            helper: None,
            counted: Vec::new(),
        }
    }

    pub fn add(&mut self, pair: (u64, u64)) {
        self.batch.push(pair);
        if self.batch.len() >= self.batch_size {
            let full = std::mem::replace(&mut self.batch, Vec::with_capacity(self.batch_size));
            self.hand_over(full);
        }
    }

    /// Each distinct pair with its count, sorted by pair.
    pub(crate) fn into_sorted(mut self) -> Counted {
        let last = std::mem::take(&mut self.batch);
        let mut counted = std::mem::take(&mut self.counted);
        if let Some(Helper { batches, done }) = self.helper.take() {
            drop(batches); // the helper finishes once the queue is empty
            counted = merge(
                counted,
                done.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            );
        }
        merge(counted, runs(last))
    }

    fn hand_over(&mut self, full: Vec<Pair>) {
        if self.helper.is_none() {
            let (sender, receiver) = sync_channel::<Vec<Pair>>(QUEUED_BATCHES);
            let spawned = std::thread::Builder::new()
                .name("hottext-tally".into())
                .spawn(move || {
                    let mut counted = Counted::new();
                    for batch in receiver {
                        counted = merge(counted, runs(batch));
                    }
                    counted
                });
            if let Ok(done) = spawned {
                self.helper = Some(Helper {
                    batches: sender,
                    done,
                });
            }
        }
        let unsent = match &self.helper {
            Some(helper) => helper.batches.send(full).err().map(|e| e.0),
            None => Some(full),
        };
        // No helper, or it died (its panic resurfaces in `into_sorted`): count here.
        if let Some(batch) = unsent {
            self.counted = merge(std::mem::take(&mut self.counted), runs(batch));
        }
    }
}

/// Sorts a batch and counts each pair's run.
fn runs(mut batch: Vec<Pair>) -> Counted {
    batch.sort_unstable();
    let mut runs: Counted = Vec::new();
    for pair in batch {
        match runs.last_mut() {
            Some((last, n)) if *last == pair => *n += 1,
            _ => runs.push((pair, 1)),
        }
    }
    runs
}

/// Merges two sorted count lists, adding the counts of a pair found in both.
fn merge(a: Counted, b: Counted) -> Counted {
    if a.is_empty() {
        return b;
    }
    let mut merged = Vec::with_capacity(a.len().max(b.len()));
    let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
    loop {
        let next = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) if x.0 == y.0 => {
                let n = y.1;
                b.next();
                a.next().map(|(pair, m)| (pair, m + n))
            }
            (Some(x), Some(y)) if x.0 < y.0 => a.next(),
            (Some(_), None) => a.next(),
            _ => b.next(),
        };
        match next {
            Some(entry) => merged.push(entry),
            None => return merged,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_across_batches_like_a_map() {
        let pairs: Vec<Pair> = (0..1000u64)
            .map(|i| ((i * 7919) % 13, (i * 104729) % 5))
            .collect();
        let mut expected = std::collections::BTreeMap::new();
        for &p in &pairs {
            *expected.entry(p).or_insert(0u64) += 1;
        }
        for batch in [1, 3, 64, 5000] {
            let mut c = PairCounts::with_batch(batch);
            pairs.iter().for_each(|&p| c.add(p));
            let got = c.into_sorted();
            assert_eq!(
                got,
                expected.clone().into_iter().collect::<Vec<_>>(),
                "batch {batch}"
            );
        }
        assert!(PairCounts::default().into_sorted().is_empty());
    }
}
