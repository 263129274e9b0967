//! Sharing a whole number of samples among candidates by weight, so that the parts are whole
//! samples too and add up to the total (largest remainders, ties to the earlier candidate).

/// `total` shared in proportion to `weights`; all zero weights share equally.
pub(crate) fn apportion(total: u64, weights: &[u64]) -> Vec<u64> {
    if weights.is_empty() {
        return Vec::new();
    }
    let equal = weights.iter().all(|&w| w == 0);
    let weight = |i: usize| if equal { 1 } else { u128::from(weights[i]) };
    let sum: u128 = (0..weights.len()).map(weight).sum();
    let mut parts: Vec<(u64, u128, usize)> = (0..weights.len())
        .map(|i| {
            let exact = u128::from(total) * weight(i);
            ((exact / sum) as u64, exact % sum, i)
        })
        .collect();
    let given: u64 = parts.iter().map(|p| p.0).sum();
    parts.sort_unstable_by_key(|p| (std::cmp::Reverse(p.1), p.2));
    for p in parts.iter_mut().take((total - given) as usize) {
        p.0 += 1;
    }
    parts.sort_unstable_by_key(|p| p.2);
    parts.into_iter().map(|p| p.0).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_whole_and_add_up() {
        assert_eq!(apportion(100, &[30, 10]), [75, 25]);
        assert_eq!(apportion(10, &[1, 1, 1]), [4, 3, 3]);
        assert_eq!(apportion(9, &[0, 0, 0]), [3, 3, 3]);
        assert_eq!(apportion(5, &[0, 7]), [0, 5]);
        assert_eq!(apportion(0, &[3, 4]), [0, 0]);
        assert!(apportion(4, &[]).is_empty());
        assert_eq!(
            apportion(u64::MAX, &[u64::MAX, u64::MAX])
                .iter()
                .sum::<u64>(),
            u64::MAX
        );
    }
}
