//! Hand-written graphs with the expected order, one rule a test.

use super::c3::ALGORITHM as C3;
use super::cdsort::ALGORITHM as CDSORT;
use super::metrics::{hot_ranges, measure, place_in_order};
use super::pettis_hansen::ALGORITHM as PH;
use super::{order, Algorithm, C3Params, Params};
use crate::binary::{ExecSegment, FileOffset, StatedAddr};
use crate::graph::{ids, Graph, GraphBuilder};

/// A repeatable stream of numbers below the bound each call gives, for random test graphs.
pub(super) fn random_below(mut seed: u64) -> impl FnMut(usize) -> usize {
    move |below| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        (seed >> 33) as usize % below
    }
}

/// Builds a graph from `(name, size, samples)` functions and `(caller, callee, weight)` calls.
pub(super) fn graph(funcs: &[(&str, u64, u64)], calls: &[(&str, &str, u64)]) -> Graph {
    let mut b = GraphBuilder::default();
    for &(name, size, samples) in funcs {
        let id = b.func(name, size);
        b.add_samples(id, samples);
    }
    for &(caller, callee, w) in calls {
        let (a, c) = (b.func(caller, 0), b.func(callee, 0));
        b.add_call(a, c, w);
    }
    b.finish()
}

pub(super) fn names(g: &Graph, algorithm: &Algorithm) -> Vec<String> {
    names_with(g, algorithm, &Params::default())
}

pub(super) fn names_with(g: &Graph, algorithm: &Algorithm, params: &Params) -> Vec<String> {
    order(g, algorithm, params)
        .into_iter()
        .map(|f| g.funcs()[f].name.clone())
        .collect()
}

/// Figure 2 of the hfsort paper.
pub(super) fn figure2() -> Graph {
    graph(
        &[
            ("A", 100, 0),
            ("B", 100, 100),
            ("C", 100, 70),
            ("D", 100, 90),
        ],
        &[
            ("A", "B", 100),
            ("A", "C", 40),
            ("B", "C", 30),
            ("C", "D", 90),
        ],
    )
}

#[test]
fn paper_figure2_c3_order_and_distance() {
    let g = figure2();
    assert_eq!(names(&g, &C3), ["A", "B", "C", "D"]);
    let m = measure(
        &g,
        &place_in_order(&g, &order(&g, &C3, &Params::default()), 1),
    );
    assert_eq!(m.weighted_call_distance, 17_000);
}

#[test]
fn paper_figure2_pettis_hansen_order_and_distance() {
    let g = figure2();
    assert_eq!(names(&g, &PH), ["B", "A", "C", "D"]);
    let m = measure(
        &g,
        &place_in_order(&g, &order(&g, &PH, &Params::default()), 1),
    );
    assert_eq!(m.weighted_call_distance, 26_000);
}

#[test]
fn c3_appends_callee_after_its_heaviest_caller() {
    let g = graph(
        &[("light", 10, 1), ("heavy", 10, 1), ("callee", 10, 50)],
        &[("light", "callee", 5), ("heavy", "callee", 9)],
    );
    assert_eq!(names(&g, &C3)[..2], ["heavy", "callee"]);
}

#[test]
fn c3_does_not_grow_a_cluster_past_the_merge_threshold() {
    // "big" is over the 4 KiB threshold, so its callee stays in a cluster of its own and the
    // denser callee goes first.
    let g = graph(
        &[("big", 5000, 10), ("small", 100, 50)],
        &[("big", "small", 50)],
    );
    assert_eq!(names(&g, &C3), ["small", "big"]);
    let merged = order(&g, &C3, &c3_params(|p| p.merge_threshold = 10_000));
    assert_eq!(merged, ids([0, 1]));
}

/// The default parameters with one C3 threshold changed.
fn c3_params(change: impl FnOnce(&mut C3Params)) -> Params {
    let mut params = Params::default();
    change(&mut params.c3);
    params
}

/// A callee with `callers` callers of 10 calls each, and a denser bystander: the callee joins
/// the first caller (and follows it) only if that caller's 10 calls are at least 10 % of all.
fn callee_with_callers(callers: usize) -> Graph {
    let names: Vec<String> = (0..callers).map(|i| format!("caller{i}")).collect();
    let mut funcs: Vec<(&str, u64, u64)> = vec![("callee", 100, 1), ("bystander", 100, 5)];
    funcs.extend(names.iter().map(|n| (n.as_str(), 100, 10)));
    let calls: Vec<(&str, &str, u64)> = names.iter().map(|n| (n.as_str(), "callee", 10)).collect();
    graph(&funcs, &calls)
}

#[test]
fn c3_callee_stays_alone_when_caller_arc_is_under_10_percent() {
    // 11 callers: each arc is 10/110 < 10 %, so the callee keeps its own (least dense) cluster.
    let got = names(&callee_with_callers(11), &C3);
    assert_eq!(got.last().map(String::as_str), Some("callee"), "{got:?}");
}

#[test]
fn c3_callee_joins_caller_whose_arc_carries_exactly_10_percent() {
    let got = names(&callee_with_callers(10), &C3);
    let at = |n: &str| got.iter().position(|g| g == n);
    assert_eq!(at("callee"), at("caller0").map(|i| i + 1), "{got:?}");
    // The share is a parameter: at 11 % the same arc is too weak.
    let stricter = c3_params(|p| p.min_caller_share_percent = 11);
    let got = names_with(&callee_with_callers(10), &C3, &stricter);
    assert_eq!(got.last().map(String::as_str), Some("callee"), "{got:?}");
}

/// A dense caller of a sparse callee, and a bystander whose density lies between theirs and
/// the merged cluster's: where the bystander lands tells whether the merge happened.
fn dense_caller_sparse_callee(callee_size: u64) -> Graph {
    graph(
        &[
            ("caller", 100, 800),
            ("callee", callee_size, 0),
            ("bystander", 100, 150),
        ],
        &[("caller", "callee", 5)],
    )
}

#[test]
fn c3_does_not_merge_when_density_would_drop_more_than_8x() {
    // 800/100 = 8 per byte; merged with 800 cold bytes: 800/900, 9x less dense.
    let g = dense_caller_sparse_callee(800);
    assert_eq!(names(&g, &C3), ["caller", "bystander", "callee"]);
    // With 700 cold bytes the merged density is exactly 8x lower: allowed.
    let g = dense_caller_sparse_callee(700);
    assert_eq!(names(&g, &C3), ["bystander", "caller", "callee"]);
}

#[test]
fn c3_does_not_merge_past_the_maximum_cluster_size() {
    // The merge threshold is lifted so that only the 1 MiB cap applies; the callee is denser,
    // so apart it goes first and merged it follows its caller.
    let lifted = c3_params(|p| p.merge_threshold = u64::MAX);
    let pair = |callee_size: u64| {
        graph(
            &[("caller", 600 << 10, 600), ("callee", callee_size, 1000)],
            &[("caller", "callee", 50)],
        )
    };
    assert_eq!(
        names_with(&pair(500 << 10), &C3, &lifted),
        ["callee", "caller"]
    );
    assert_eq!(
        names_with(&pair(400 << 10), &C3, &lifted),
        ["caller", "callee"]
    );
}

#[test]
fn c3_sorts_clusters_by_density() {
    // Same samples, different sizes, no calls: the smaller function is denser.
    let g = graph(
        &[("wide", 400, 10), ("narrow", 40, 10), ("cold", 10, 0)],
        &[],
    );
    assert_eq!(names(&g, &C3), ["narrow", "wide", "cold"]);
}

#[test]
fn c3_ignores_self_calls_and_zero_weight_arcs() {
    let g = graph(
        &[("f", 10, 10), ("g", 10, 20)],
        &[("f", "f", 1000), ("g", "g", 5), ("f", "g", 0)],
    );
    // No usable arc: each stays alone and density decides.
    assert_eq!(names(&g, &C3), ["g", "f"]);
}

#[test]
fn c3_leaves_a_call_cycle_in_one_cluster() {
    let g = graph(
        &[("a", 10, 5), ("b", 10, 6)],
        &[("a", "b", 10), ("b", "a", 10)],
    );
    let got = names(&g, &C3);
    assert_eq!(got, ["a", "b"]);
}

#[test]
fn pettis_hansen_merges_heaviest_edge_first_ignoring_direction() {
    // x<->y (10 + 10) outweighs x->z (15), so x and y end up adjacent.
    let g = graph(
        &[("x", 10, 1), ("y", 10, 1), ("z", 10, 1)],
        &[("x", "y", 10), ("y", "x", 10), ("x", "z", 15)],
    );
    let got = names(&g, &PH);
    let pos = |n: &str| got.iter().position(|g| g == n).unwrap();
    assert_eq!(pos("x").abs_diff(pos("y")), 1, "{got:?}");
}

#[test]
fn pettis_hansen_orders_weights_past_32_bits_as_their_scaled_down_copy() {
    // Scaling every weight keeps every comparison the algorithm makes; past 32 bits its queue
    // keys need the wide form, whose order must be the narrow one's.
    let names: Vec<String> = (0..300).map(|i| format!("f{i}")).collect();
    let funcs: Vec<(&str, u64, u64)> = names.iter().map(|n| (n.as_str(), 64, 1)).collect();
    let mut random = random_below(7);
    let arcs: Vec<(usize, usize, u64)> = (0..1500)
        .map(|_| (random(300), random(300), 1 + random(40) as u64))
        .collect();
    let with_scale = |scale: u64| {
        let calls: Vec<(&str, &str, u64)> = arcs
            .iter()
            .map(|&(a, b, w)| (names[a].as_str(), names[b].as_str(), w * scale))
            .collect();
        graph(&funcs, &calls)
    };
    let narrow = with_scale(1);
    let wide = with_scale(1 << 31);
    let total = |g: &Graph| g.calls().iter().map(|c| c.weight).sum::<u64>();
    assert!(total(&narrow) < u64::from(u32::MAX) && total(&wide) > u64::from(u32::MAX));
    assert_eq!(
        order(&wide, &PH, &Params::default()),
        order(&narrow, &PH, &Params::default())
    );
}

#[test]
fn orders_are_deterministic_and_complete() {
    let g = figure2();
    for algorithm in [&C3, &PH, &CDSORT] {
        let a = order(&g, algorithm, &Params::default());
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, ids([0, 1, 2, 3]));
        assert_eq!(a, order(&g, algorithm, &Params::default()));
    }
}

#[test]
fn metrics_count_pages_and_call_shares() {
    let g = figure2();
    let m = measure(&g, &place_in_order(&g, &ids([0, 1, 2, 3]), 1));
    assert_eq!(m.sampled_functions, 3);
    assert_eq!(m.sampled_bytes, 300);
    assert_eq!(m.sampled_span_bytes, 300); // B starts at 100, D ends at 400
    assert_eq!(m.pages_4k_99, 1);
    assert_eq!(m.pages_2m_99, 1);
    // A->C jumps 150 bytes; every other call jumps 50.
    assert!((m.calls_within_64b - 220.0 / 260.0).abs() < 1e-9);
    assert_eq!(m.calls_within_4k, 1.0);
}

#[test]
fn metrics_count_pages_across_a_boundary() {
    // Two hot functions 8 KiB apart need two 4 KiB pages but one 2 MiB page.
    let g = graph(&[("a", 64, 50), ("pad", 8192, 0), ("b", 64, 50)], &[]);
    let m = measure(&g, &place_in_order(&g, &ids([0, 1, 2]), 1));
    assert_eq!((m.pages_4k_99, m.pages_2m_99), (2, 1));
}

#[test]
fn icache_overflow_counts_hot_lines_beyond_a_sets_ways() {
    // Nine equally hot 64 B functions: back to back they use nine sets; 4 KiB apart they all
    // land in one set of the 8-way L1i, which misses one line's worth of their fetches: at least
    // one function's samples (a line is fetched at least as often as its hottest byte runs),
    // less than two.
    let mut funcs: Vec<(String, u64, u64)> = (0..9).map(|i| (format!("f{i}"), 64, 10)).collect();
    funcs.push(("pad".into(), 4096 - 64, 0));
    let named: Vec<(&str, u64, u64)> = funcs.iter().map(|(n, s, w)| (n.as_str(), *s, *w)).collect();
    let g = graph(&named, &[]);
    let packed = measure(
        &g,
        &place_in_order(&g, &ids([0, 1, 2, 3, 4, 5, 6, 7, 8]), 1),
    );
    assert_eq!(packed.icache_overflow, 0.0);
    let mut at = vec![None; g.funcs().len()];
    for (i, slot) in at.iter_mut().take(9).enumerate() {
        *slot = Some(StatedAddr(i as u64 * 4096));
    }
    let spread = measure(&g, &at);
    assert!(
        spread.icache_overflow >= 10.0 / 90.0 && spread.icache_overflow < 20.0 / 90.0,
        "{}",
        spread.icache_overflow
    );
}

#[test]
fn icache_overflow_of_a_huge_function_takes_no_time() {
    // A profile may claim any size: 1 TB is 16 G lines, which the model must not visit.
    let g = graph(&[("huge", 1 << 40, 90), ("small", 64, 10)], &[]);
    let started = std::time::Instant::now();
    let at = place_in_order(&g, &ids([0, 1]), 1);
    let overflow = super::cache_sets::set_conflicts(&g, &at, crate::caches::L1I).share();
    // Visiting its lines would take minutes; a loaded machine running the tests in parallel
    // may stretch the real work (well under a millisecond) many times over.
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    // `huge`'s samples decay from its entry: its head and `small` fit the sets, and what
    // misses is the sliver of samples on its 2^34 other lines.
    assert!(overflow > 0.0 && overflow < 0.01, "{overflow}");
}

#[test]
fn call_sites_place_a_call_where_it_is_not_in_the_middle() {
    // `a` (8 KiB) calls `b`, which follows it, from byte 8180: counted from the middle of `a`
    // the call would jump 4 KiB; from its real site it jumps 12 bytes.
    let profile = "# hottext profile v2\nfn a 8192 10\nfn b 64 10\ncall a b 10\nsite a b 8180 10\n";
    let g = crate::graph::Graph::read(profile.as_bytes()).unwrap();
    let m = measure(&g, &place_in_order(&g, &ids([0, 1]), 1));
    assert_eq!(m.calls_within_64b, 1.0);
    assert_eq!(m.weighted_call_distance, 10 * 12);
}

#[test]
fn pettis_hansen_long_chain_absorbs_reversed_pieces_in_order() {
    // A path a-b-c-d-e with falling weights grows one chain by both ends and through
    // reversals; every neighbour pair of the path must stay adjacent.
    let g = graph(
        &[
            ("a", 10, 1),
            ("b", 10, 1),
            ("c", 10, 1),
            ("d", 10, 1),
            ("e", 10, 1),
        ],
        &[
            ("c", "d", 50),
            ("b", "c", 40),
            ("d", "e", 30),
            ("a", "b", 20),
        ],
    );
    let got = names(&g, &PH);
    let forward = ["a", "b", "c", "d", "e"];
    let backward = ["e", "d", "c", "b", "a"];
    assert!(got == forward || got == backward, "{got:?}");
}

#[test]
fn hot_ranges_pick_the_hottest_huge_pages_and_merge_neighbours() {
    const MB2: u64 = 2 << 20;
    let g = graph(
        &[("a", 64, 60), ("b", 64, 30), ("c", 64, 10), ("cold", 64, 0)],
        &[],
    );
    // a in page 5, b in page 6 (adjacent), c in page 9, cold in page 1.
    let at = [5 * MB2, 6 * MB2 + 100, 9 * MB2, MB2].map(|a| Some(StatedAddr(a)));
    let text = |start: u64, end: u64| ExecSegment {
        start: StatedAddr(start),
        mem_size: end - start,
        offset: FileOffset(start),
        file_size: end - start,
    };
    let pages = |text: &[ExecSegment], max| -> (Vec<(u64, u64)>, usize) {
        let hot = hot_ranges(&g, &at.to_vec(), text, max);
        let ranges = hot.ranges.iter().map(|(s, e)| (s.0 / MB2, e.0 / MB2));
        (ranges.collect(), hot.partial_pages)
    };
    let all = [text(0x1000, 20 * MB2)];
    assert_eq!(pages(&all, 8), (vec![(5, 7), (9, 10)], 0));
    // Capped at one page: only the hottest.
    assert_eq!(pages(&all, 1), (vec![(5, 6)], 0));
    // The text ends inside page 9 and starts inside page 5: only page 6 is whole.
    let short = [text(5 * MB2 + 0x1000, 9 * MB2 + 0x8000)];
    assert_eq!(pages(&short, 8), (vec![(6, 7)], 2));
    // Ranges come hottest first (a runtime that keeps its first 32 keeps the hottest): with c
    // the hottest, page 9 leads.
    let g = graph(
        &[("a", 64, 30), ("b", 64, 20), ("c", 64, 50), ("cold", 64, 0)],
        &[],
    );
    let hot = hot_ranges(&g, &at.to_vec(), &all, 8);
    let ranges: Vec<(u64, u64)> = hot
        .ranges
        .iter()
        .map(|(s, e)| (s.0 / MB2, e.0 / MB2))
        .collect();
    assert_eq!(ranges, [(9, 10), (5, 7)]);
}
