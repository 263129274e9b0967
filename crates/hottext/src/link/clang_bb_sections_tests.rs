use super::*;
use crate::graph::{Graph, GraphBuilder};
use crate::layout::Params;
use crate::link::write::tests::request;
use crate::link::{write, EmitError, Request};

/// Writes the cluster file of `graph` with this threshold, and what it splits.
fn clusters(graph: &Graph, min_block_share: f64) -> (String, Clusters) {
    let params = Params::default();
    let request = Request {
        min_block_share,
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
    for (block, offset, samples) in [(0, 0, 400), (5, 10, 1), (2, 20, 300), (7, 40, 299)] {
        b.add_block_samples(f, block, offset, 10, samples);
    }
    let g = b.finish();
    // By default every block a sample hit stays, in the order of their offsets.
    let (file, summary) = clusters(&g, 0.0);
    assert_eq!(body(&file), ["f f", "c 0 5 2 7"]);
    assert_eq!((summary.blocks_kept, summary.sampled_blocks_split), (4, 0));
    // 1 of 1000 samples is exactly a share of 0.001: kept.
    let (file, _) = clusters(&g, 0.001);
    assert_eq!(body(&file), ["f f", "c 0 5 2 7"]);
    // A share of 1 %: the block hit once goes.
    let (file, summary) = clusters(&g, 0.01);
    assert_eq!(body(&file), ["f f", "c 0 2 7"]);
    assert_eq!((summary.blocks_kept, summary.sampled_blocks_split), (3, 1));
    assert_eq!(
        (summary.hot_bytes_before, summary.hot_bytes_after),
        (100, 30)
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
fn blocks_past_the_functions_end_are_from_another_build() {
    let mut b = GraphBuilder::default();
    let changed = b.func("changed", 32);
    b.add_block_samples(changed, 0, 0, 16, 3);
    b.add_block_samples(changed, 4, 28, 16, 3);
    let g = b.finish();
    let (file, summary) = clusters(&g, 0.0);
    assert!(body(&file).is_empty(), "{file}");
    assert_eq!(summary.stale, ["changed"]);
    assert_eq!(summary.hot_bytes_after, 32);
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
