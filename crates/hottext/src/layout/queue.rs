//! A max-priority queue for greedy merging on graphs of millions of edges.
//!
//! Greedy layouts queue one key per edge up front, then push millions of recomputed keys and
//! pop them again. A heap of millions of keys costs a cache miss or two per level on every pop
//! (popping 5 M keys from `std`'s binary heap took 6 to 8 s on our CI machine). So keys live in
//! sorted runs, each taken from its end, which costs nothing per pop: the initial keys are one
//! run (or a few), and pushed keys gather in a small 8-ary heap that stays in cache until it
//! fills and is sorted into a run of its own. A binary heap of the runs' last keys (a few
//! kilobytes, each entry the key and its run) tells which run holds the largest; a pop compares
//! its top with the top of the pushed keys.
//!
//! Runs are never merged: an earlier version merged the two shortest whenever more than twelve
//! were left, and on the 1 M-function benchmark those merges (copies of millions of keys into
//! fresh memory) were a third of the pushes' time. A run emptied by pops lends its buffer to
//! the next run cut.

pub(super) struct MaxQueue<K> {
    /// Each ascending, the largest at the end; the emptied ones are in `spare`.
    runs: Vec<Vec<K>>,
    /// Each non-empty run's last key and index, a binary max-heap.
    by_last: Vec<(K, u32)>,
    /// Indices of emptied runs, whose buffers the next cuts reuse.
    spare: Vec<u32>,
    /// An 8-ary max-heap of the keys pushed since the last run was cut: the children of `i`
    /// are `8i + 1 ..= 8i + 8`.
    heap: Vec<K>,
}

const ARITY: usize = 8;
/// Keys the heap holds before it becomes a run: 256 KiB of `u64` keys, half a core's L2. On the
/// 1 M-function benchmark (timers, three runs each) 4 K keys cost the queue 30 % more time and
/// 16 K 7 % more (more runs: deeper pops of `by_last`); 64 K cost it 5 % less but slowed
/// cdsort's merges by more, the heap then filling the L2.
const HEAP_LIMIT: usize = 1 << 15;

impl<K: Ord + Copy> MaxQueue<K> {
    pub(super) fn new(mut keys: Vec<K>) -> MaxQueue<K> {
        keys.sort_unstable();
        MaxQueue::from_runs(vec![keys])
    }

    /// A queue of keys already in ascending runs.
    pub(super) fn from_runs(runs: Vec<Vec<K>>) -> MaxQueue<K> {
        debug_assert!(runs.iter().all(|r| r.is_sorted()));
        let mut queue = MaxQueue {
            runs: Vec::with_capacity(runs.len()),
            by_last: Vec::new(),
            spare: Vec::new(),
            heap: Vec::with_capacity(HEAP_LIMIT),
        };
        for run in runs.into_iter().filter(|r| !r.is_empty()) {
            queue.runs.push(run);
            queue.add_run(queue.runs.len() as u32 - 1);
        }
        queue
    }

    pub(super) fn pop(&mut self) -> Option<K> {
        match (self.heap.first(), self.by_last.first()) {
            (Some(&pushed), Some(&(run_top, _))) if pushed > run_top => self.pop_heap(),
            (_, Some(_)) => self.pop_run(),
            (Some(_), None) => self.pop_heap(),
            (None, None) => None,
        }
    }

    /// The key [`MaxQueue::pop`] would return.
    pub(super) fn peek(&self) -> Option<K> {
        let run_top = self.by_last.first().map(|&(key, _)| key);
        self.heap.first().copied().max(run_top)
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

    /// Sorts the heap into a run, in the slot of an emptied run if there is one, whose buffer
    /// then holds the next pushed keys.
    fn cut_run(&mut self) {
        let (r, buffer) = match self.spare.pop() {
            Some(r) => (r, std::mem::take(&mut self.runs[r as usize])),
            None => {
                self.runs.push(Vec::new());
                (self.runs.len() as u32 - 1, Vec::with_capacity(HEAP_LIMIT))
            }
        };
        let mut run = std::mem::replace(&mut self.heap, buffer);
        run.sort_unstable();
        self.runs[r as usize] = run;
        self.add_run(r);
    }

    /// Puts run `r`, not empty, into `by_last`.
    fn add_run(&mut self, r: u32) {
        let entry = (self.runs[r as usize][self.runs[r as usize].len() - 1], r);
        let mut i = self.by_last.len();
        self.by_last.push(entry);
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.by_last[parent] >= entry {
                break;
            }
            self.by_last[i] = self.by_last[parent];
            i = parent;
        }
        self.by_last[i] = entry;
    }

    /// Pops the last key of the run whose last key is largest.
    fn pop_run(&mut self) -> Option<K> {
        let (key, r) = *self.by_last.first()?;
        let run = &mut self.runs[r as usize];
        run.pop();
        let root = match run.last() {
            Some(&next) => (next, r),
            None => {
                self.spare.push(r);
                let last = self.by_last.pop()?;
                if self.by_last.is_empty() {
                    return Some(key);
                }
                last
            }
        };
        // Move the root's hole down to where `root` fits.
        let mut i = 0;
        loop {
            let left = 2 * i + 1;
            let Some(&left_entry) = self.by_last.get(left) else {
                break;
            };
            let (child, entry) = match self.by_last.get(left + 1) {
                Some(&right_entry) if right_entry > left_entry => (left + 1, right_entry),
                _ => (left, left_entry),
            };
            if entry <= root {
                break;
            }
            self.by_last[i] = entry;
            i = child;
        }
        self.by_last[i] = root;
        Some(key)
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
    fn matches_a_binary_heap_across_many_runs_and_reuses_emptied_ones() {
        // Enough pushes to cut fifteen runs, with pops between; then every key popped, and as
        // many pushed again, which cuts as many runs into the emptied runs' buffers.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut random = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % 1_000_000
        };
        let initial: Vec<u64> = (0..10_000).map(|_| random()).collect();
        let mut sorted = initial.clone();
        sorted.sort_unstable();
        let mut q = MaxQueue::from_runs(vec![Vec::new(), sorted]);
        let mut reference: std::collections::BinaryHeap<u64> = initial.into_iter().collect();
        let rounds = super::HEAP_LIMIT * 15;
        for round in 0..rounds {
            let key = random();
            q.push(key);
            reference.push(key);
            if round % 3 == 0 {
                assert_eq!(q.peek(), reference.peek().copied());
                assert_eq!(q.pop(), reference.pop());
            }
        }
        assert!(q.runs.len() >= 10, "{} runs: push more", q.runs.len());
        let runs = q.runs.len();
        while let Some(want) = reference.pop() {
            assert_eq!(q.pop(), Some(want));
        }
        assert_eq!((q.pop(), q.peek()), (None, None));
        for _ in 0..rounds / 2 {
            let key = random();
            q.push(key);
            reference.push(key);
        }
        assert_eq!(q.runs.len(), runs, "emptied runs were not reused");
        while let Some(want) = reference.pop() {
            assert_eq!(q.pop(), Some(want));
        }
    }
}
