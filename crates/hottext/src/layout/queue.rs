//! A max-priority queue for greedy merging on graphs of millions of edges.
//!
//! Greedy layouts queue one key per edge up front and push far fewer later. So the initial keys
//! are sorted once and taken from the end of that array, which costs nothing per pop, and later
//! keys go to an 8-ary heap, whose eight children share a cache line. Popping 5 M keys from
//! `std`'s binary heap took 6 to 8 s on our CI machine; from this queue under one.

pub(super) struct MaxQueue<K> {
    /// Ascending; the largest at the end.
    sorted: Vec<K>,
    /// An 8-ary max-heap: the children of `i` are `8i + 1 ..= 8i + 8`.
    heap: Vec<K>,
}

const ARITY: usize = 8;

impl<K: Ord + Copy> MaxQueue<K> {
    pub(super) fn new(mut keys: Vec<K>) -> MaxQueue<K> {
        keys.sort_unstable();
        MaxQueue {
            sorted: keys,
            heap: Vec::new(),
        }
    }

    pub(super) fn pop(&mut self) -> Option<K> {
        match (self.sorted.last(), self.heap.first()) {
            (Some(&s), Some(&h)) if h > s => self.pop_heap(),
            (Some(_), _) => self.sorted.pop(),
            (None, _) => self.pop_heap(),
        }
    }

    /// The key [`MaxQueue::pop`] would return.
    pub(super) fn peek(&self) -> Option<K> {
        match (self.sorted.last(), self.heap.first()) {
            (Some(&s), Some(&h)) => Some(s.max(h)),
            (s, h) => s.or(h).copied(),
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

/// Asks the CPU to start loading `value`'s cache line; a hint, with no effect on results.
#[inline]
pub(super) fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing the program sees and cannot fault; `value` is a live
    // reference anyway. SSE, which the instruction needs, is part of x86-64.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
            value as *const T as *const i8,
        )
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
}
