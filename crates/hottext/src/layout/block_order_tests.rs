//! ext-TSP block order: hand-written CFGs, one rule a test, then properties of random ones.

use fastrand::Rng;

use super::*;

/// Jumps from `(from, to, count)` triples.
fn jumps(list: &[(usize, usize, u64)]) -> Vec<BlockJump> {
    list.iter()
        .map(|&(from, to, count)| BlockJump { from, to, count })
        .collect()
}

#[test]
fn no_blocks_and_one_block_give_the_trivial_order() {
    assert_eq!(ext_tsp_order(&[], &[]), Vec::<usize>::new());
    assert_eq!(ext_tsp_score(&[], &[], &[]), 0.0);
    assert_eq!(ext_tsp_order(&[10], &[]), [0]);
    let self_loop = jumps(&[(0, 0, 50)]);
    assert_eq!(ext_tsp_order(&[10], &self_loop), [0]);
    // A self-loop is a backward jump over the block itself: 10 bytes of 640.
    let expected = 50.0 * 0.1 * (1.0 - 10.0 / 640.0);
    assert!((ext_tsp_score(&[10], &self_loop, &[0]) - expected).abs() < 1e-9);
}

#[test]
fn the_compilers_order_stays_when_no_jump_says_otherwise() {
    let sizes = [8, 16, 24, 32, 40];
    assert_eq!(ext_tsp_order(&sizes, &[]), [0, 1, 2, 3, 4]);
    // Jumps that the compiler's order already makes fall-throughs.
    let straight = jumps(&[(0, 1, 5), (1, 2, 5), (2, 3, 5), (3, 4, 5)]);
    assert_eq!(ext_tsp_order(&sizes, &straight), [0, 1, 2, 3, 4]);
    // Jumps between some blocks only: the blocks no jump touches keep their order after them.
    let some = jumps(&[(0, 3, 5)]);
    assert_eq!(ext_tsp_order(&sizes, &some), [0, 3, 1, 2, 4]);
}

#[test]
fn the_hot_arm_of_a_diamond_becomes_the_fall_through() {
    // 0 branches to the cold arm 1 or the hot arm 2; both rejoin at 3.
    let sizes = [16, 32, 32, 16];
    let diamond = jumps(&[(0, 1, 1), (0, 2, 100), (1, 3, 1), (2, 3, 100)]);
    let order = ext_tsp_order(&sizes, &diamond);
    assert_eq!(order, [0, 2, 3, 1]);
    assert_eq!(
        ext_tsp_score(&sizes, &diamond, &order),
        200.0 + 0.1 * (1.0 - 48.0 / 1024.0) + 0.1 * (1.0 - 48.0 / 640.0)
    );
}

#[test]
fn the_hot_body_of_a_loop_follows_its_header() {
    // The compiler put the loop's exit (2) between its header (1) and its body (3).
    let sizes = [16, 16, 16, 48];
    let lp = jumps(&[(0, 1, 10), (1, 3, 1000), (3, 1, 990), (1, 2, 10)]);
    let order = ext_tsp_order(&sizes, &lp);
    assert_eq!(order, [0, 1, 3, 2]);
    let original = ext_tsp_score(&sizes, &lp, &[0, 1, 2, 3]);
    assert!(ext_tsp_score(&sizes, &lp, &order) > original + 800.0);
}

#[test]
fn the_entry_stays_first_even_when_the_hottest_jump_enters_it() {
    // 2 -> 0 is the hottest jump: as a fall-through it would put 2 before the entry.
    let sizes = [16, 16, 16];
    let back_to_entry = jumps(&[(2, 0, 1000), (0, 1, 10), (1, 2, 10)]);
    let order = ext_tsp_order(&sizes, &back_to_entry);
    assert_eq!(order[0], 0, "{order:?}");
    // Only a jump into the entry: it can only be a backward jump.
    let only_into_entry = jumps(&[(1, 0, 100)]);
    assert_eq!(ext_tsp_order(&[16, 16], &only_into_entry), [0, 1]);
}

#[test]
fn a_chain_is_split_to_make_two_fall_throughs() {
    // 1 -> 2 and 0 -> 1 merge first into 0·1·2; then 3, reached from 0 and falling into 1,
    // is worth two fall-throughs between 0 and 1 (800) against the one it breaks (500).
    let sizes = [16, 16, 16, 16];
    let split = jumps(&[(1, 2, 1000), (0, 1, 500), (0, 3, 400), (3, 1, 400)]);
    assert_eq!(ext_tsp_order(&sizes, &split), [0, 3, 1, 2]);
}

#[test]
fn a_chain_longer_than_the_split_threshold_is_split_where_a_jump_meets_the_other() {
    // A straight line of 200 blocks merges first (1000 a fall-through); then block 200, which
    // 100 jumps to and which jumps to 101, gains only inside the line: appended, both jumps
    // are too far to score. The line is past SPLIT_THRESHOLD, so only the points where those
    // jumps meet it are tried.
    let n = 201;
    let sizes = vec![16; n];
    let mut list: Vec<(usize, usize, u64)> = (0..199).map(|b| (b, b + 1, 1000)).collect();
    list.extend([(100, 200, 600), (200, 101, 600)]);
    const { assert!(199 > SPLIT_THRESHOLD) };
    let order = ext_tsp_order(&sizes, &jumps(&list));
    let expected: Vec<usize> = (0..=100).chain([200]).chain(101..200).collect();
    assert_eq!(order, expected);
}

#[test]
fn denser_chains_come_first_after_the_entrys() {
    // Two pairs no jump joins to the entry: the one with more count per byte goes first.
    let sizes = [16, 16, 16, 16, 16];
    let pairs = jumps(&[(1, 2, 5), (3, 4, 50)]);
    assert_eq!(ext_tsp_order(&sizes, &pairs), [0, 3, 4, 1, 2]);
}

#[test]
fn zero_counts_and_ends_out_of_range_are_ignored() {
    let sizes = [16, 16, 16];
    let good = jumps(&[(0, 2, 10)]);
    let mut bad = good.clone();
    bad.extend(jumps(&[
        (0, 1, 0),
        (1, 99, 1000),
        (99, 1, 1000),
        (usize::MAX, 0, 5),
    ]));
    assert_eq!(ext_tsp_order(&sizes, &bad), ext_tsp_order(&sizes, &good));
    assert_eq!(ext_tsp_order(&sizes, &good), [0, 2, 1]);
    assert_eq!(
        ext_tsp_score(&sizes, &bad, &[0, 2, 1]),
        ext_tsp_score(&sizes, &good, &[0, 2, 1])
    );
    // An order that is no permutation scores what it places, and does not panic.
    assert_eq!(ext_tsp_score(&sizes, &good, &[0, 7, 0, 2]), 10.0);
    assert_eq!(ext_tsp_score(&sizes, &good, &[2]), 0.0);
}

#[test]
fn blocks_of_zero_bytes_count_as_one_and_huge_sizes_do_not_overflow() {
    // Were block 1 empty, 0 -> 2 would be a fall-through across it in the compiler's order.
    let sizes = [16, 0, 16];
    let skip = jumps(&[(0, 2, 10)]);
    assert!(ext_tsp_score(&sizes, &skip, &[0, 1, 2]) < 10.0);
    assert_eq!(ext_tsp_order(&sizes, &skip), [0, 2, 1]);
    // Sizes no block has: summed, they would overflow (a panic in a debug build).
    let huge = [u64::MAX, u64::MAX, 16, u64::MAX];
    let around = jumps(&[(0, 2, 10), (2, 1, 10), (3, 0, 5), (1, 3, 7)]);
    let order = ext_tsp_order(&huge, &around);
    assert_eq!(order[0], 0);
    assert!(ext_tsp_score(&huge, &around, &order) >= 10.0);
}

/// A function of `n` blocks shaped like compiled code: mostly fall-throughs to the next block,
/// half the blocks with a branch to a block up to 32 away either way (loops, if-arms), a few
/// far; counts spread over four orders of magnitude. `shuffled` renumbers all blocks but the
/// entry, so that the compiler's order is a poor one.
fn random_function(rng: &mut Rng, n: usize, shuffled: bool) -> (Vec<u64>, Vec<BlockJump>) {
    let sizes = (0..n).map(|_| 4 + below(rng, 60) as u64).collect();
    let mut label: Vec<usize> = (0..n).collect();
    if shuffled {
        for i in (2..n).rev() {
            let j = 1 + below(rng, i);
            label.swap(i, j);
        }
    }
    let mut list = Vec::new();
    let count = |rng: &mut Rng| (1u64 << below(rng, 14)) + below(rng, 100) as u64;
    for b in 0..n {
        if b + 1 < n && below(rng, 5) != 0 {
            list.push(BlockJump {
                from: label[b],
                to: label[b + 1],
                count: count(rng),
            });
        }
        if below(rng, 2) == 0 {
            let near = (b + below(rng, 65)).saturating_sub(32).min(n - 1);
            let to = if below(rng, 10) == 0 {
                below(rng, n)
            } else {
                near
            };
            list.push(BlockJump {
                from: label[b],
                to: label[to],
                count: count(rng),
            });
        }
    }
    (sizes, list)
}

/// An interpreter's dispatch loop (computed goto, as PostgreSQL's `ExecInterpExpr`):
/// `handlers` handlers of 4 blocks in a line, each ending in a jump to the first block of
/// `fan_out` handlers picked at random.
fn interpreter(rng: &mut Rng, handlers: usize, fan_out: usize) -> (Vec<u64>, Vec<BlockJump>) {
    let sizes = (0..handlers * 4)
        .map(|_| 4 + below(rng, 60) as u64)
        .collect();
    let mut list = Vec::new();
    for h in 0..handlers {
        for b in h * 4..h * 4 + 3 {
            list.push(BlockJump {
                from: b,
                to: b + 1,
                count: 1000,
            });
        }
        for _ in 0..fan_out {
            let to = below(rng, handlers) * 4;
            list.push(BlockJump {
                from: h * 4 + 3,
                to,
                count: 1 + below(rng, 1000) as u64,
            });
        }
    }
    (sizes, list)
}

fn assert_is_a_permutation_with_the_entry_first(order: &[usize], n: usize) {
    let mut seen = order.to_vec();
    seen.sort_unstable();
    assert_eq!(seen, (0..n).collect::<Vec<_>>());
    assert_eq!(order[0], 0);
}

#[test]
fn random_functions_never_score_below_the_compilers_order_and_mostly_above() {
    let mut rng = Rng::with_seed(0x9e37_79b9_7f4a_7c15);
    let mut improved = 0;
    let runs = 300;
    for run in 0..runs {
        let n = 1 + below(&mut rng, 60);
        let (sizes, list) = random_function(&mut rng, n, run % 2 == 0);
        let order = ext_tsp_order(&sizes, &list);
        assert_is_a_permutation_with_the_entry_first(&order, n);
        let original: Vec<usize> = (0..n).collect();
        let (ours, theirs) = (
            ext_tsp_score(&sizes, &list, &order),
            ext_tsp_score(&sizes, &list, &original),
        );
        assert!(ours >= theirs, "run {run}: {ours} < {theirs}");
        // Same input, same order.
        assert_eq!(ext_tsp_order(&sizes, &list), order, "run {run}");
        improved += usize::from(ours > theirs);
    }
    // The compiler's order is kept only where the greedy merge does not beat it: that should
    // be rare, or the merge is not doing its work.
    assert!(improved > runs * 3 / 4, "improved {improved} of {runs}");
}

#[test]
fn a_function_of_5000_blocks_is_ordered_and_beats_a_shuffled_order() {
    let mut rng = Rng::with_seed(42);
    let n = 5000;
    let (sizes, list) = random_function(&mut rng, n, true);
    let order = ext_tsp_order(&sizes, &list);
    assert_is_a_permutation_with_the_entry_first(&order, n);
    let original: Vec<usize> = (0..n).collect();
    let (ours, theirs) = (
        ext_tsp_score(&sizes, &list, &order),
        ext_tsp_score(&sizes, &list, &original),
    );
    assert!(ours > 2.0 * theirs, "{ours} against {theirs}");
}

#[test]
fn a_spent_budget_stops_merging_but_never_loses_to_the_compilers_order() {
    let mut rng = Rng::with_seed(7);
    for (run, shuffled) in [false, true, false, true].into_iter().enumerate() {
        let n = 400;
        let (sizes, list) = random_function(&mut rng, n, shuffled);
        let original: Vec<usize> = (0..n).collect();
        let theirs = ext_tsp_score(&sizes, &list, &original);
        let mut scores = Vec::new();
        // No merge at all, a few hundred, and all of them.
        for budget in [0, 20_000, WORK_BUDGET] {
            let order = order_within(&sizes, &list, budget);
            assert_is_a_permutation_with_the_entry_first(&order, n);
            let ours = ext_tsp_score(&sizes, &list, &order);
            assert!(
                ours >= theirs,
                "run {run}, budget {budget}: {ours} < {theirs}"
            );
            scores.push(ours);
        }
        // A larger budget merges more, and that pays on these functions.
        assert!(
            scores[0] < scores[1] && scores[1] < scores[2],
            "run {run}: {scores:?}"
        );
    }
}

#[test]
fn an_interpreters_dispatch_jumps_are_brought_closer() {
    // 300 handlers dispatching to 50 each: 16 000 jumps between 1 200 blocks.
    let (sizes, list) = interpreter(&mut Rng::with_seed(7), 300, 50);
    let order = ext_tsp_order(&sizes, &list);
    assert_is_a_permutation_with_the_entry_first(&order, sizes.len());
    let original: Vec<usize> = (0..sizes.len()).collect();
    let (ours, theirs) = (
        ext_tsp_score(&sizes, &list, &order),
        ext_tsp_score(&sizes, &list, &original),
    );
    // The handlers' own fall-throughs score the same in both; the dispatch jumps do better.
    assert!(ours > 1.2 * theirs, "{ours} against {theirs}");
}

/// A number below `n` (0 when `n` is 0), from a seeded generator: a failure reproduces.
fn below(rng: &mut Rng, n: usize) -> usize {
    rng.usize(..n.max(1))
}
