//! The model that scores a merge: the gain of placing two chains one after the other (see
//! the definitions of the module above).

use super::{pack, Chain, State, NONE};

impl State<'_> {
    /// Computes the best merge along edge `e` and returns its queue key; none when the merged
    /// chain would be too long (chains only grow, so it never fits later).
    pub(in crate::layout::cdsort) fn consider(&mut self, e: u32) -> Option<u64> {
        let (key, a_first) = self.best_merge(e)?;
        self.edges[e as usize].computed_at = self.merges;
        self.first_end_leads.set(e, a_first);
        Some(key)
    }

    /// [`State::consider`] without recording: the key, and whether `ends[0]`'s chain leads.
    pub(super) fn best_merge(&self, e: u32) -> Option<(u64, bool)> {
        let ends = self.edges[e as usize].ends;
        if self.too_long(ends) {
            return None;
        }
        let [a, b] = ends.map(|c| self.chains[c as usize]);
        let (gain_ab, gain_ba) = self.gains(e, a, b);
        let tie = (gain_ab - gain_ba).abs() <= 1e-9 * gain_ab.abs().max(gain_ba.abs());
        let a_first = if tie {
            a.first < b.first
        } else {
            gain_ab > gain_ba
        };
        Some((pack(if a_first { gain_ab } else { gain_ba }, e), a_first))
    }

    /// Whether the two chains together would have more functions than a chain may. Chains only
    /// grow, so such a pair never merges.
    pub(super) fn too_long(&self, [a, b]: [u32; 2]) -> bool {
        self.functions[a as usize] + self.functions[b as usize] > self.params.max_chain_functions
    }

    /// The gains of merging the two chains of edge `e`, `a` and `b`, as a·b and as b·a.
    fn gains(&self, e: u32, a: Chain, b: Chain) -> (f64, f64) {
        let edge = &self.edges[e as usize];
        let (mut score_ab, mut score_ba, mut weight) = (0.0, 0.0, 0.0);
        let mut j = e;
        while j != NONE {
            let jump = &self.jumps[j as usize];
            let (caller, callee) = (
                self.place[jump.caller.index()],
                self.place[jump.callee.index()],
            );
            // One end of each jump is in `a`, the other in `b`; the site lies inside its chain.
            let (ab, ba) = if caller.chain == edge.ends[0] {
                let site = a.offset(caller.position) + u64::from(jump.offset);
                let target = b.offset(callee.position);
                (a.size - site + target, b.size - target + site)
            } else {
                let site = b.offset(caller.position) + u64::from(jump.offset);
                let target = a.offset(callee.position);
                (a.size - target + site, b.size - site + target)
            };
            let w = jump.weight as f64;
            score_ab += w * self.locality(ab);
            score_ba += w * self.locality(ba);
            weight += w;
            j = jump.next;
        }
        let frequency = self.params.frequency_weight * self.misses_saved(a, b);
        let scale = a.size.min(b.size) as f64;
        let baseline = weight * self.far_score;
        (
            (score_ab - baseline + frequency) / scale,
            (score_ba - baseline + frequency) / scale,
        )
    }

    /// How likely a jump of `distance` bytes stays within cached code.
    fn locality(&self, distance: u64) -> f64 {
        let d = distance.max(1) as f64;
        if self.params.distance_power == 0.25 {
            // The default, and the hottest arithmetic of the algorithm: two square roots cost
            // a fraction of a general power.
            1.0 / d.sqrt().sqrt()
        } else {
            d.powf(-self.params.distance_power)
        }
    }

    /// Expected i-TLB misses of chains `a` and `b` apart, minus those of the two merged.
    fn misses_saved(&self, a: Chain, b: Chain) -> f64 {
        let misses = |hotness: u64, size: u64| {
            let page = hotness as f64 / size as f64 * self.params.cache_page_bytes as f64;
            if page >= self.total_hotness {
                return 0.0; // one page holds everything: never evicted
            }
            let p = page / self.total_hotness;
            hotness as f64 * power(1.0 - p, self.params.cache_entries)
        };
        misses(a.hotness, a.size) + misses(b.hotness, b.size)
            - misses(a.hotness + b.hotness, a.size + b.size)
    }
}

/// `x` to the power `n`, by squaring: what `f64::powi` computes, without its call into the
/// compiler's runtime library, which was a tenth of the cost of a gain.
fn power(mut x: f64, mut n: u32) -> f64 {
    let mut result = 1.0;
    loop {
        if n & 1 == 1 {
            result *= x;
        }
        n >>= 1;
        if n == 0 {
            return result;
        }
        x *= x;
    }
}
