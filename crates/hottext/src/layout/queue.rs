//! A max-priority queue for greedy merging on graphs of millions of edges.
//!
//! Greedy layouts queue one key per edge up front, then push millions of recomputed keys and
//! pop them again. A heap of millions of keys costs a cache miss or two per level on every pop
//! (popping 5 M keys from `std`'s binary heap took 6 to 8 s on our CI machine). So keys live in
//! sorted runs, each taken from its end, which costs nothing per pop: the initial keys are one
//! run, and pushed keys gather in a small 8-ary heap that stays in cache until it fills and is
//! sorted into a run of its own. A pop compares the ends of the runs (few: two runs merge when
//! there are too many) and the top of the heap.

pub(super) struct MaxQueue<K> {
    /// Each ascending, the largest at the end; none empty.
    runs: Vec<Vec<K>>,
    /// An 8-ary max-heap of the keys pushed since the last run was cut: the children of `i`
    /// are `8i + 1 ..= 8i + 8`.
    heap: Vec<K>,
}

const ARITY: usize = 8;
/// Keys the heap holds before it becomes a run: 256 KiB of `u64` keys, within a core's L2.
const HEAP_LIMIT: usize = 1 << 15;
/// Runs kept before the two shortest merge: a pop compares this many ends at most.
const MAX_RUNS: usize = 12;

/// Where the largest key is.
enum Top {
    Heap,
    Run(usize),
}

impl<K: Ord + Copy> MaxQueue<K> {
    pub(super) fn new(mut keys: Vec<K>) -> MaxQueue<K> {
        keys.sort_unstable();
        MaxQueue::from_runs(vec![keys])
    }

    /// A queue of keys already in ascending runs (at most `MAX_RUNS`).
    pub(super) fn from_runs(mut runs: Vec<Vec<K>>) -> MaxQueue<K> {
        debug_assert!(runs.len() <= MAX_RUNS && runs.iter().all(|r| r.is_sorted()));
        runs.retain(|r| !r.is_empty());
        MaxQueue {
            runs,
            heap: Vec::new(),
        }
    }

    pub(super) fn pop(&mut self) -> Option<K> {
        match self.top()? {
            Top::Heap => self.pop_heap(),
            Top::Run(r) => {
                let key = self.runs[r].pop();
                if self.runs[r].is_empty() {
                    self.runs.swap_remove(r);
                }
                key
            }
        }
    }

    /// The key [`MaxQueue::pop`] would return.
    pub(super) fn peek(&self) -> Option<K> {
        match self.top()? {
            Top::Heap => self.heap.first().copied(),
            Top::Run(r) => self.runs[r].last().copied(),
        }
    }

    fn top(&self) -> Option<Top> {
        let mut best: Option<(K, Top)> = self.heap.first().map(|&k| (k, Top::Heap));
        for (r, run) in self.runs.iter().enumerate() {
            if let Some(&k) = run.last() {
                if best.as_ref().is_none_or(|(b, _)| k > *b) {
                    best = Some((k, Top::Run(r)));
                }
            }
        }
        best.map(|(_, top)| top)
    }

    /// Sorts the heap into a run, merging the two shortest runs when there are too many.
    fn cut_run(&mut self) {
        let mut run = std::mem::take(&mut self.heap);
        run.sort_unstable();
        self.runs.push(run);
        if self.runs.len() > MAX_RUNS {
            self.runs
                .sort_unstable_by_key(|r| std::cmp::Reverse(r.len()));
            let (a, b) = (
                self.runs.pop().unwrap_or_default(),
                self.runs.pop().unwrap_or_default(),
            );
            self.runs.push(merge(a, b));
        }
    }

    pub(super) fn push(&mut self, key: K) {
        let mut i = self.heap.len();
        self.heap.push(key);
        while i > 0 {
            let parent = (i - 1) / ARITY;
            if self.heap[parent] >= key {
                break;
            }
            self.heap[i] = self.heap[parent];
            i = parent;
        }
        self.heap[i] = key;
        if self.heap.len() >= HEAP_LIMIT {
            self.cut_run();
        }
    }

    fn pop_heap(&mut self) -> Option<K> {
        let last = self.heap.pop()?;
        let Some(&top) = self.heap.first() else {
            return Some(last);
        };
        // Move the hole from the root down to where `last` fits.
        let mut i = 0;
        loop {
            let first_child = ARITY * i + 1;
            let children = first_child..(first_child + ARITY).min(self.heap.len());
            let Some(child) = children.max_by_key(|&c| self.heap[c]) else {
                break;
            };
            if self.heap[child] <= last {
                break;
            }
            self.heap[i] = self.heap[child];
            i = child;
        }
        self.heap[i] = last;
        Some(top)
    }
}

/// Two ascending runs as one.
fn merge<K: Ord + Copy>(a: Vec<K>, b: Vec<K>) -> Vec<K> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i] <= b[j] {
            out.push(a[i]);
            i += 1;
        } else {
            out.push(b[j]);
            j += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

impl<K: Ord + Copy> Extend<K> for MaxQueue<K> {
    fn extend<T: IntoIterator<Item = K>>(&mut self, keys: T) {
        for key in keys {
            self.push(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::MaxQueue;

    #[test]
    fn pops_initial_and_pushed_keys_largest_first() {
        let mut q = MaxQueue::new(vec![5, 1, 9, 3]);
        q.extend([7, 2, 9, 11]);
        // Enough pushes to fill more than one level of the heap.
        q.extend((20..60).rev());
        let mut got = Vec::new();
        while let Some(k) = q.pop() {
            got.push(k);
            if k == 9 {
                q.push(4); // a push between pops lands in order
            }
        }
        let mut want: Vec<u64> = [5, 1, 9, 3, 7, 2, 9, 11, 4, 4]
            .into_iter()
            .chain(20..60)
            .collect();
        want.sort_unstable_by(|a, b| b.cmp(a));
        assert_eq!(got, want);
    }

    #[test]
    fn matches_a_binary_heap_across_runs_and_merges() {
        // Enough pushes to cut more runs than are kept, so that runs merge, with pops between.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut random = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % 1_000_000
        };
        let initial: Vec<u64> = (0..10_000).map(|_| random()).collect();
        let mut q = MaxQueue::new(initial.clone());
        let mut reference: std::collections::BinaryHeap<u64> = initial.into_iter().collect();
        for round in 0..(super::HEAP_LIMIT * (super::MAX_RUNS + 3)) {
            let key = random();
            q.push(key);
            reference.push(key);
            if round % 3 == 0 {
                assert_eq!(q.peek(), reference.peek().copied());
                assert_eq!(q.pop(), reference.pop());
            }
        }
        assert!(q.runs.len() <= super::MAX_RUNS);
        while let Some(want) = reference.pop() {
            assert_eq!(q.pop(), Some(want));
        }
        assert_eq!(q.pop(), None);
    }
}
