use super::*;
use crate::graph::{Graph, GraphBuilder};
use crate::layout::Params;
use crate::link::write::tests::request;
use crate::link::{write, EmitError, Request};

/// Writes the cluster file of `graph` with this threshold, and what it splits.
fn clusters(graph: &Graph, min_block_share: f64) -> (String, Clusters) {
    clusters_with(
        graph,
        SplitRule {
            min_block_share,
            ..SplitRule::default()
        },
    )
}

/// Writes the cluster file of `graph` with this rule, and what it splits.
fn clusters_with(graph: &Graph, split: SplitRule) -> (String, Clusters) {
    let params = Params::default();
    let request = Request {
        split,
        ..request(FORMAT.name, &params)
    };
    let written = write(graph, &request).unwrap();
    assert!(written.padding.is_none() && written.markers.is_none());
    let summary = written.clusters.unwrap();
    (String::from_utf8(written.bytes).unwrap(), summary)
}

/// The `f`/`c` lines of a cluster file, without the header.
fn body(file: &str) -> Vec<&str> {
    assert!(file.starts_with("v1\n"), "{file}");
    file.lines()
        .filter(|l| !l.starts_with(['v', '#']))
        .collect()
}

#[test]
fn blocks_under_the_share_are_split_out_and_the_rest_kept_in_layout_order() {
    let mut b = GraphBuilder::default();
    let f = b.func("f", 100);
    b.add_samples(f, 1000);
    // Block 9 ran unsampled (inferred: 0 samples); block 4 never ran (no line).
    let blocks = [
        (0, 0, 400),
        (5, 10, 1),
        (2, 20, 300),
        (7, 40, 299),
        (9, 60, 0),
    ];
    for (block, offset, samples) in blocks {
        b.add_block_samples(f, block, offset, 10, samples);
    }
    let g = b.finish();
    // By default every block that ran stays, in the order of their offsets.
    let (file, summary) = clusters(&g, 0.0);
    assert_eq!(body(&file), ["f f", "c 0 5 2 7 9"]);
    assert_eq!((summary.blocks_kept, summary.sampled_blocks_split), (5, 0));
    // 1 of 1000 samples is exactly a share of 0.001: kept.
    let (file, _) = clusters(&g, 0.001);
    assert_eq!(body(&file), ["f f", "c 0 5 2 7 9"]);
    // A share of 1 %: the block hit once goes, the inferred one stays.
    let (file, summary) = clusters(&g, 0.01);
    assert_eq!(body(&file), ["f f", "c 0 2 7 9"]);
    assert_eq!((summary.blocks_kept, summary.sampled_blocks_split), (4, 1));
    assert_eq!(
        (summary.hot_bytes_before, summary.hot_bytes_after),
        (100, 40)
    );
}

#[test]
fn the_entry_block_comes_first_even_unsampled_and_never_twice() {
    let mut b = GraphBuilder::default();
    let f = b.func("f", 64);
    b.add_block_samples(f, 3, 30, 8, 10);
    b.add_block_samples(f, 1, 10, 8, 10);
    let g = b.func("g", 64);
    b.add_block_samples(g, 2, 30, 8, 10);
    b.add_block_samples(g, 0, 0, 8, 10);
    let graph = b.finish();
    let (file, summary) = clusters(&graph, 0.0);
    // Functions in the order's order; the blocks after the entry by offset.
    assert_eq!(body(&file), ["f f", "c 0 1 3", "f g", "c 0 2"]);
    assert_eq!(summary.functions, 2);
    assert_eq!(summary.blocks_kept, 5);
    // An entry block stays whatever its share, counted kept; only a sampled one has bytes.
    let (file, summary) = clusters(&graph, 0.9);
    assert_eq!(body(&file), ["f f", "c 0", "f g", "c 0"]);
    assert_eq!((summary.blocks_kept, summary.sampled_blocks_split), (2, 3));
    assert_eq!(summary.hot_bytes_after, 8);
}

#[test]
fn functions_without_blocks_stay_whole_and_unlisted() {
    let mut b = GraphBuilder::default();
    let whole = b.func("whole", 50);
    b.add_samples(whole, 5);
    let split = b.func("split", 80);
    b.add_block_samples(split, 0, 0, 16, 5);
    let g = b.finish();
    let (file, summary) = clusters(&g, 0.0);
    assert_eq!(body(&file), ["f split", "c 0"]);
    assert_eq!(summary.without_blocks, 1);
    assert_eq!(
        (summary.hot_bytes_before, summary.hot_bytes_after),
        (130, 66)
    );
}

#[test]
fn aliases_share_the_f_line_and_static_namesakes_are_left_whole() {
    let mut b = GraphBuilder::default();
    let ctor = b.func("_ZN1AC2Ev", 40);
    b.alias(ctor, "_ZN1AC1Ev");
    b.add_block_samples(ctor, 0, 0, 8, 3);
    for name in ["g;a.c", "g;b.c"] {
        let g = b.func(name, 40);
        b.add_block_samples(g, 0, 0, 8, 3);
    }
    let graph = b.finish();
    let (file, summary) = clusters(&graph, 0.0);
    // clang stops on a function named on two `f` lines: neither `g` is listed.
    assert_eq!(body(&file), ["f _ZN1AC2Ev _ZN1AC1Ev", "c 0"]);
    assert_eq!(summary.namesakes, ["g;a.c", "g;b.c"]);
}

#[test]
fn names_clang_could_misread_are_refused_before_the_file() {
    let mut b = GraphBuilder::default();
    let bad = b.func("f\nc 0 0", 32);
    b.add_block_samples(bad, 0, 0, 16, 3);
    let g = b.finish();
    let err = write(&g, &request(FORMAT.name, &Params::default())).unwrap_err();
    assert!(matches!(err, EmitError::UnsafeName { .. }), "{err}");
    let mut b = GraphBuilder::default();
    let aliased = b.func("f", 32);
    b.alias(aliased, "a b");
    b.add_block_samples(aliased, 0, 0, 16, 3);
    let g = b.finish();
    let err = write(&g, &request(FORMAT.name, &Params::default())).unwrap_err();
    assert!(err.to_string().contains("\"a b\""), "{err}");
}

#[test]
fn blocks_that_ran_in_the_split_off_part_come_back_into_the_hot_part() {
    // A profile of a split build: `f`'s block 4 ran in `f.cold`, where the last cluster file
    // had sent it; block 6 there never ran.
    let mut b = GraphBuilder::default();
    let f = b.func("f", 40);
    b.add_samples(f, 90);
    b.add_block_samples(f, 0, 0, 16, 50);
    b.add_block_samples(f, 2, 16, 24, 40);
    let cold = b.func("f.cold", 30);
    b.add_samples(cold, 10);
    b.add_block_samples(cold, 4, 0, 12, 10);
    b.add_call(f, cold, 10);
    let g = b.finish();
    let (file, summary) = clusters(&g, 0.0);
    // After the hot part's blocks, in their order; the part itself is never listed.
    assert_eq!(body(&file), ["f f", "c 0 2 4"]);
    assert_eq!(summary.functions, 1);
    assert_eq!((summary.blocks_kept, summary.hot_bytes_after), (3, 52));
    // Under the share, it is split out again.
    let (file, summary) = clusters(&g, 0.2);
    assert_eq!(body(&file), ["f f", "c 0 2"]);
    assert_eq!(summary.sampled_blocks_split, 1);
}

#[test]
fn functions_with_fewer_block_samples_than_the_rule_stay_whole() {
    let mut b = GraphBuilder::default();
    let sparse = b.func("sparse", 64);
    b.add_block_samples(sparse, 2, 16, 8, 1);
    b.add_block_samples(sparse, 3, 24, 8, 0);
    let dense = b.func("dense", 64);
    b.add_block_samples(dense, 0, 0, 8, 1);
    b.add_block_samples(dense, 5, 40, 8, 1);
    let graph = b.finish();
    let (file, summary) = clusters(&graph, 0.0);
    assert_eq!(body(&file), ["f sparse", "c 0 2 3", "f dense", "c 0 5"]);
    assert_eq!(summary.sparse, 0);
    let rule = SplitRule {
        min_function_samples: 2,
        ..SplitRule::default()
    };
    let (file, summary) = clusters_with(&graph, rule);
    assert_eq!(body(&file), ["f dense", "c 0 5"]);
    assert_eq!((summary.functions, summary.sparse), (1, 1));
    assert_eq!(summary.hot_bytes_after, 64 + 16);
}

/// `f`'s blocks by offset 0 (entry), 1, 2, 3, each 16 bytes; branch records show the entry
/// jumping to block 2 most of the time, and block 2 going on to block 1 and back.
fn with_block_edges() -> Graph {
    let mut b = GraphBuilder::default();
    let f = b.func("f", 64);
    b.add_samples(f, 100);
    for (block, samples) in [(0, 10), (1, 40), (2, 49), (3, 1)] {
        b.add_block_samples(f, block, block as u64 * 16, 16, samples);
    }
    for (from, to, count) in [(0, 2, 90), (0, 1, 10), (2, 1, 90), (1, 3, 10), (1, 0, 5)] {
        b.add_block_edge(f, from, to, count);
    }
    b.finish()
}

#[test]
fn block_edges_order_the_kept_blocks_so_that_hot_transfers_fall_through() {
    let graph = with_block_edges();
    let (file, _) = clusters(&graph, 0.0);
    assert_eq!(body(&file), ["f f", "c 0 2 1 3"]);
    let original = SplitRule {
        block_order: BlockOrder::Original,
        ..SplitRule::default()
    };
    let (file, _) = clusters_with(&graph, original);
    assert_eq!(body(&file), ["f f", "c 0 1 2 3"]);
}

#[test]
fn a_block_with_few_samples_but_much_flow_stays_under_a_share() {
    // Block 3 drew 1 of 100 samples, but 10 of 205 transfers enter it: under a share of 3 %
    // of the samples, over 3 % of the flow.
    let (file, summary) = clusters(&with_block_edges(), 0.03);
    assert_eq!(body(&file), ["f f", "c 0 2 1 3"]);
    assert_eq!(summary.sampled_blocks_split, 0);
    // Over both, it goes.
    let (file, summary) = clusters(&with_block_edges(), 0.06);
    assert_eq!(body(&file), ["f f", "c 0 2 1"]);
    assert_eq!(summary.sampled_blocks_split, 1);
}

#[test]
fn block_edges_count_toward_splitting_a_function_without_samples_in_its_blocks() {
    // Every block ran (branch records passed through them), none was sampled.
    let mut b = GraphBuilder::default();
    let f = b.func("f", 48);
    for block in 0..3 {
        b.add_block_samples(f, block, block as u64 * 16, 16, 0);
    }
    b.add_block_edge(f, 0, 2, 7);
    let graph = b.finish();
    let (file, summary) = clusters(&graph, 0.0);
    assert_eq!(body(&file), ["f f", "c 0 2 1"]);
    assert_eq!(summary.sparse, 0);
    let rule = SplitRule {
        min_function_samples: 8,
        ..SplitRule::default()
    };
    let (_, summary) = clusters_with(&graph, rule);
    assert_eq!(summary.sparse, 1);
}
