//! CDSort: hand-written graphs with the expected order, one rule a test.

use super::cdsort::ALGORITHM as CDSORT;
use super::tests::{figure2, graph, names, names_with};
use super::Params;
use crate::graph::{Graph, GraphBuilder};

/// The default parameters with one CDSort parameter changed.
fn cdsort_params(change: impl FnOnce(&mut super::CdsortParams)) -> Params {
    let mut params = Params::default();
    change(&mut params.cdsort);
    params
}

/// A hot 1000-byte `main` calling `leaf` `calls` times, from the given (offset, weight) sites.
/// Apart, `main` is denser and goes first; merged, the order follows the call distance.
fn main_and_leaf(leaf_size: u64, calls: u64, sites: &[(u64, u64)]) -> Graph {
    let mut b = GraphBuilder::default();
    let main = b.func("main", 1000);
    b.add_samples(main, 100_000);
    let leaf = b.func("leaf", leaf_size);
    b.add_call(main, leaf, calls);
    for &(offset, weight) in sites {
        b.add_site(main, leaf, offset, weight);
    }
    b.finish()
}

#[test]
fn cdsort_merges_caller_and_callee_when_call_site_is_near_the_end() {
    let g = main_and_leaf(16, 10, &[(990, 10)]);
    assert_eq!(names(&g, &CDSORT), ["main", "leaf"]);
}

#[test]
fn cdsort_puts_callee_before_caller_when_call_site_is_near_the_start() {
    // From offset 10 the leaf is 26 bytes back if it comes first, 990 ahead if it follows.
    let g = main_and_leaf(16, 10, &[(10, 10)]);
    assert_eq!(names(&g, &CDSORT), ["leaf", "main"]);
}

#[test]
fn cdsort_counts_call_weight_without_a_site_from_the_middle_of_the_caller() {
    // No sites (an old profile): the call sits at byte 500, 500 bytes from a leaf that follows,
    // 900 from one of 400 bytes that comes first.
    let g = main_and_leaf(400, 10, &[]);
    assert_eq!(names(&g, &CDSORT), ["main", "leaf"]);
    // One call of ten seen at offset 10: the nine others still count from the middle.
    let g = main_and_leaf(400, 10, &[(10, 1)]);
    assert_eq!(names(&g, &CDSORT), ["main", "leaf"]);
    // All ten seen there: the leaf goes first.
    let g = main_and_leaf(400, 10, &[(10, 10)]);
    assert_eq!(names(&g, &CDSORT), ["leaf", "main"]);
}

#[test]
fn cdsort_keeps_a_hot_function_out_of_a_cold_chain_that_would_cost_tlb_misses() {
    // `hot` calls `cold` (1 MiB) once. Merging brings the call close, but spreads a million
    // samples over a megabyte: the frequency term forbids it, so `hot` stays first.
    let g = graph(
        &[
            ("hot", 64, 1_000_000),
            ("cold", 1 << 20, 0),
            ("middling", 64, 100),
        ],
        &[("hot", "cold", 1)],
    );
    assert_eq!(names(&g, &CDSORT), ["hot", "middling", "cold"]);
    // Without the term the distance gain wins, and the sparse pair falls behind `middling`.
    let distance_only = cdsort_params(|p| p.frequency_weight = 0.0);
    assert_eq!(
        names_with(&g, &CDSORT, &distance_only),
        ["middling", "hot", "cold"]
    );
}

/// A path a -> b -> c where c is small: the b-c merge gains most per byte and comes first.
fn path() -> Graph {
    graph(
        &[("a", 100, 10), ("b", 100, 10), ("c", 10, 500)],
        &[("a", "b", 100), ("b", "c", 50)],
    )
}

#[test]
fn cdsort_merges_short_chains_first_and_stops_at_the_chain_size_limit() {
    assert_eq!(names(&path(), &CDSORT), ["a", "b", "c"]);
    // Two functions at most: [b, c] forms first, so a stays alone and, less dense, goes last.
    let two = cdsort_params(|p| p.max_chain_functions = 2);
    assert_eq!(names_with(&path(), &CDSORT, &two), ["b", "c", "a"]);
}

#[test]
fn cdsort_fills_a_chain_to_the_size_limit_after_giving_up_pairs_past_it() {
    // Three functions at most. [c, d] forms first, then [a, b]: b -> c then joins two chains
    // of two, past the limit, and is given up, while b -> e still fits: [a, b] takes e. (`a`
    // calls two more, so that its chain is the one kept and b's calls are the ones moved.)
    let g = graph(
        &[
            ("a", 100, 10),
            ("b", 100, 10),
            ("c", 100, 10),
            ("d", 100, 10),
            ("e", 100, 1),
            ("f", 100, 1),
            ("g", 100, 1),
        ],
        &[
            ("a", "b", 900),
            ("c", "d", 1000),
            ("b", "c", 800),
            ("b", "e", 10),
            ("a", "f", 1),
            ("a", "g", 1),
        ],
    );
    let three = cdsort_params(|p| p.max_chain_functions = 3);
    let got = names_with(&g, &CDSORT, &three);
    let at = |n: &str| got.iter().position(|g| g == n).unwrap();
    assert_eq!(at("a").abs_diff(at("b")), 1, "{got:?}");
    assert_eq!(at("c").abs_diff(at("d")), 1, "{got:?}");
    assert_eq!(at("b").abs_diff(at("e")), 1, "{got:?}");
}

#[test]
fn cdsort_counts_call_weight_as_hotness_of_functions_without_samples() {
    // `a` and `b` have no samples of their own but 50 calls between them: hotter per byte than
    // `z`. Merging is switched off so that only the density sort decides.
    let g = graph(
        &[("z", 100, 5), ("a", 100, 0), ("b", 100, 0)],
        &[("a", "b", 50)],
    );
    let alone = cdsort_params(|p| p.max_chain_functions = 1);
    assert_eq!(names_with(&g, &CDSORT, &alone), ["a", "b", "z"]);
}

#[test]
fn cdsort_ignores_self_calls_and_zero_weight_arcs() {
    let g = graph(
        &[("f", 10, 10), ("g", 10, 20)],
        &[("f", "f", 1000), ("g", "g", 5), ("f", "g", 0)],
    );
    assert_eq!(names(&g, &CDSORT), ["g", "f"]);
}

#[test]
fn cdsort_orders_paper_figure2() {
    // A calls B (100) and C (40), B calls C (30), C calls D (90), every call from the middle.
    let got = names(&figure2(), &CDSORT);
    assert_eq!(got, ["A", "B", "C", "D"]);
}
