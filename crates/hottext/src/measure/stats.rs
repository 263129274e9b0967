//! The statistics of an A/B comparison: medians, and a distribution-free confidence interval for
//! the median of the per-round B/A ratios.
//!
//! Definitions:
//! - A *round* runs A and B once each; its *ratio* is B's value over A's. Pairing by round
//!   cancels slow drifts of the machine (thermal state, other tenants) that hit both sides.
//! - The *interval* for the median ratio comes from order statistics (the sign-test method): of
//!   n ratios sorted, the k-th smallest and the k-th largest bound the true median with
//!   probability 1 − 2·P(X ≤ k−1), X ~ Binomial(n, ½), whatever the distribution of the
//!   ratios. k is the largest rank that keeps that probability at or above [`CONFIDENCE`].
//! - The *verdict* is "B lower" when the whole interval lies below 1, "B higher" when it lies
//!   above 1, and "no significant difference" when it contains 1; [`Better`] turns lower or
//!   higher into better or worse.
//!
//! A 95 % interval needs at least [`MIN_ROUNDS`] rounds: with 5, even the smallest and the
//! largest ratio cover the median with only 1 − 2/32 = 93.75 %.

use serde::Serialize;

/// The confidence of the intervals.
pub const CONFIDENCE: f64 = 0.95;
/// The fewest rounds that give a [`CONFIDENCE`] interval for a median (see the module docs).
pub const MIN_ROUNDS: usize = 6;

/// Which direction of a metric is an improvement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Better {
    /// Time, cycles, instructions, misses.
    Lower,
    /// IPC, throughput.
    Higher,
    /// Neither: a count that describes the run rather than scores it.
    Neither,
}

/// What a comparison concludes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The interval lies entirely on the better side of 1.
    BBetter,
    /// The interval lies entirely on the worse side of 1.
    BWorse,
    /// B's value is higher, for a metric that is neither better nor worse higher.
    BHigher,
    /// B's value is lower, for a metric that is neither better nor worse lower.
    BLower,
    /// The interval contains 1.
    NoSignificantDifference,
    /// No ratio: A counted zero in a round where B did not.
    Undetermined,
}

impl Verdict {
    /// The verdict as the report's tables print it.
    pub fn describe(self) -> &'static str {
        match self {
            Verdict::BBetter => "B better",
            Verdict::BWorse => "B worse",
            Verdict::BHigher => "B higher",
            Verdict::BLower => "B lower",
            Verdict::NoSignificantDifference => "no significant difference",
            Verdict::Undetermined => "undetermined (A counted 0)",
        }
    }
}

/// The median of the per-round ratios and its interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RatioInterval {
    /// The median of the per-round B/A ratios.
    pub median: f64,
    /// The interval's lower bound.
    pub low: f64,
    /// The interval's upper bound.
    pub high: f64,
    /// The interval's actual coverage (at least [`CONFIDENCE`]; order statistics give steps).
    pub coverage: f64,
    /// 1-based ranks of `low` and `high` among the sorted ratios.
    pub ranks: (usize, usize),
}

impl RatioInterval {
    /// Half the interval's width relative to the median: 0.05 is ±5 %.
    pub(crate) fn relative_half_width(&self) -> f64 {
        if self.median == 0.0 {
            return f64::INFINITY;
        }
        (self.high - self.low) / 2.0 / self.median.abs()
    }
}

/// One metric compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// The median of A's values.
    pub median_a: f64,
    /// The median of B's values.
    pub median_b: f64,
    /// None when a ratio is undefined (A is zero in some round and B is not).
    pub ratio: Option<RatioInterval>,
    /// What the interval says.
    pub verdict: Verdict,
    /// Rounds in which B's value was below A's.
    pub rounds_b_lower: usize,
    /// Rounds in which B's value was above A's.
    pub rounds_b_higher: usize,
}

/// The median; the mean of the middle two for an even count. None for no values or a NaN.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| v.is_nan()) {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    Some(if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    })
}

/// P(X ≤ j) for X ~ Binomial(n, ½), summed in log space so that large n does not underflow.
pub(crate) fn binomial_half_cdf(n: usize, j: usize) -> f64 {
    let ln_half_n = -(n as f64) * std::f64::consts::LN_2;
    let mut ln_choose = 0.0; // ln C(n, 0)
    let mut total = 0.0;
    for i in 0..=j.min(n) {
        if i > 0 {
            ln_choose += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        total += (ln_choose + ln_half_n).exp();
    }
    total.min(1.0)
}

/// The ranks (k, n+1−k) of the order statistics that bound the median of n values with at
/// least `confidence`, and that interval's exact coverage. None when n is too small.
pub(crate) fn median_ranks(n: usize, confidence: f64) -> Option<(usize, usize, f64)> {
    let tail = (1.0 - confidence) / 2.0;
    let mut best = None;
    // Tolerance for the sum's rounding, far below any step of the binomial distribution.
    const EPS: f64 = 1e-12;
    for k in 1..=n / 2 {
        let p = binomial_half_cdf(n, k - 1);
        if p <= tail + EPS {
            best = Some((k, n + 1 - k, 1.0 - 2.0 * p));
        } else {
            break;
        }
    }
    best
}

/// B/A of each round. Both zero counts as 1 (no change); A zero and B not is undefined (None).
pub(crate) fn paired_ratios(a: &[f64], b: &[f64]) -> Option<Vec<f64>> {
    a.iter()
        .zip(b)
        .map(|(&a, &b)| match (a, b) {
            (a, b) if a == 0.0 && b == 0.0 => Some(1.0),
            (a, _) if a == 0.0 || a.is_nan() || b.is_nan() => None,
            (a, b) => Some(b / a),
        })
        .collect()
}

/// The median of the ratios and its interval; None when there are too few ratios.
pub(crate) fn ratio_interval(ratios: &[f64], confidence: f64) -> Option<RatioInterval> {
    let (lo, hi, coverage) = median_ranks(ratios.len(), confidence)?;
    let mut sorted = ratios.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some(RatioInterval {
        median: median(&sorted)?,
        low: sorted[lo - 1],
        high: sorted[hi - 1],
        coverage,
        ranks: (lo, hi),
    })
}

/// Compares the paired values of A and B (index i of each is round i). None when the two
/// lists differ in length or hold fewer than [`MIN_ROUNDS`] values.
pub fn compare(a: &[f64], b: &[f64], better: Better) -> Option<Comparison> {
    if a.len() != b.len() || a.len() < MIN_ROUNDS {
        return None;
    }
    let ratio = paired_ratios(a, b).and_then(|r| ratio_interval(&r, CONFIDENCE));
    let verdict = match ratio {
        None => Verdict::Undetermined,
        Some(r) if r.high < 1.0 => lower_verdict(better, true),
        Some(r) if r.low > 1.0 => lower_verdict(better, false),
        Some(_) => Verdict::NoSignificantDifference,
    };
    Some(Comparison {
        median_a: median(a)?,
        median_b: median(b)?,
        ratio,
        verdict,
        rounds_b_lower: a.iter().zip(b).filter(|(a, b)| b < a).count(),
        rounds_b_higher: a.iter().zip(b).filter(|(a, b)| b > a).count(),
    })
}

fn lower_verdict(better: Better, b_lower: bool) -> Verdict {
    match (better, b_lower) {
        (Better::Lower, true) | (Better::Higher, false) => Verdict::BBetter,
        (Better::Lower, false) | (Better::Higher, true) => Verdict::BWorse,
        (Better::Neither, true) => Verdict::BLower,
        (Better::Neither, false) => Verdict::BHigher,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn binomial_cdf_by_hand() {
        // n = 6: P(X = 0) = 1/64; n = 10: P(X ≤ 1) = (1 + 10)/1024, P(X ≤ 2) = 56/1024.
        assert!(close(binomial_half_cdf(6, 0), 1.0 / 64.0));
        assert!(close(binomial_half_cdf(10, 1), 11.0 / 1024.0));
        assert!(close(binomial_half_cdf(10, 2), 56.0 / 1024.0));
        assert!(close(binomial_half_cdf(10, 10), 1.0));
        // Large n neither underflows nor overflows: P(X ≤ n/2) is a bit over ½.
        let p = binomial_half_cdf(2000, 1000);
        assert!(p > 0.5 && p < 0.52, "{p}");
    }

    #[test]
    fn five_rounds_cannot_give_a_95_percent_interval() {
        // Even [min, max] covers the median with only 1 − 2/32 = 93.75 %.
        assert_eq!(median_ranks(5, 0.95), None);
        assert_eq!(median_ranks(MIN_ROUNDS - 1, CONFIDENCE), None);
    }

    #[test]
    fn six_rounds_give_min_and_max() {
        let (lo, hi, cov) = median_ranks(6, 0.95).unwrap();
        assert_eq!((lo, hi), (1, 6));
        assert!(close(cov, 1.0 - 2.0 / 64.0));
    }

    #[test]
    fn ten_rounds_drop_one_ratio_at_each_end() {
        // P(X ≤ 1) = 11/1024 ≤ 2.5 % < P(X ≤ 2) = 56/1024.
        let (lo, hi, cov) = median_ranks(10, 0.95).unwrap();
        assert_eq!((lo, hi), (2, 9));
        assert!(close(cov, 1.0 - 22.0 / 1024.0));
    }

    #[test]
    fn twelve_and_twenty_rounds() {
        // n = 12: P(X ≤ 2) = 79/4096. n = 20: P(X ≤ 5) = 21700/1048576, P(X ≤ 6) > 2.5 %.
        let (lo, hi, cov) = median_ranks(12, 0.95).unwrap();
        assert_eq!((lo, hi), (3, 10));
        assert!(close(cov, 1.0 - 158.0 / 4096.0));
        let (lo, hi, cov) = median_ranks(20, 0.95).unwrap();
        assert_eq!((lo, hi), (6, 15));
        assert!(close(cov, 1.0 - 2.0 * 21700.0 / 1048576.0));
    }

    #[test]
    fn ratios_pair_by_round_and_treat_zero() {
        assert_eq!(
            paired_ratios(&[2.0, 4.0, 0.0], &[1.0, 8.0, 0.0]),
            Some(vec![0.5, 2.0, 1.0])
        );
        assert_eq!(paired_ratios(&[0.0], &[1.0]), None);
    }

    #[test]
    fn doubled_work_is_worse_with_an_interval_of_two() {
        let a = [1.0, 1.1, 0.9, 1.0, 1.2, 1.0];
        let b: Vec<f64> = a.iter().map(|x| 2.0 * x).collect();
        let c = compare(&a, &b, Better::Lower).unwrap();
        assert_eq!(c.verdict, Verdict::BWorse);
        let r = c.ratio.unwrap();
        assert!(close(r.median, 2.0) && close(r.low, 2.0) && close(r.high, 2.0));
        assert_eq!((c.rounds_b_lower, c.rounds_b_higher), (0, 6));
        assert!(close(c.median_a, 1.0) && close(c.median_b, 2.0));
    }

    #[test]
    fn higher_is_better_flips_the_verdict() {
        let a = [100.0; 6];
        let b = [110.0, 111.0, 109.0, 112.0, 110.0, 108.0];
        assert_eq!(
            compare(&a, &b, Better::Higher).unwrap().verdict,
            Verdict::BBetter
        );
        assert_eq!(
            compare(&a, &b, Better::Neither).unwrap().verdict,
            Verdict::BHigher
        );
        assert_eq!(
            compare(&b, &a, Better::Lower).unwrap().verdict,
            Verdict::BBetter
        );
    }

    #[test]
    fn an_interval_that_contains_one_is_no_difference() {
        // Ratios 0.9, 1.1, 0.95, 1.05, 1.0, 1.02: [min, max] = [0.9, 1.1] contains 1.
        let a = [1.0; 6];
        let b = [0.9, 1.1, 0.95, 1.05, 1.0, 1.02];
        let c = compare(&a, &b, Better::Lower).unwrap();
        assert_eq!(c.verdict, Verdict::NoSignificantDifference);
        let r = c.ratio.unwrap();
        assert!(close(r.low, 0.9) && close(r.high, 1.1) && close(r.median, 1.01));
        assert!(close(r.relative_half_width(), 0.1 / 1.01));
    }

    #[test]
    fn identical_counts_are_no_difference() {
        // Instructions of a pure layout change: every ratio exactly 1.
        let a = [5e9; 8];
        let c = compare(&a, &a, Better::Lower).unwrap();
        assert_eq!(c.verdict, Verdict::NoSignificantDifference);
        assert_eq!(c.ratio.unwrap().median, 1.0);
    }

    #[test]
    fn a_zero_in_a_has_no_ratio() {
        let a = [0.0, 0.0, 1.0, 0.0, 0.0, 0.0];
        let b = [0.0, 1.0, 1.0, 0.0, 0.0, 0.0];
        let c = compare(&a, &b, Better::Lower).unwrap();
        assert_eq!((c.ratio, c.verdict), (None, Verdict::Undetermined));
    }

    #[test]
    fn too_few_or_unpaired_rounds_are_refused() {
        assert!(compare(&[1.0; 5], &[2.0; 5], Better::Lower).is_none());
        assert!(compare(&[1.0; 6], &[2.0; 7], Better::Lower).is_none());
    }
}
