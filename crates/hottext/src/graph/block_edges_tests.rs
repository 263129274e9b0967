use crate::graph::merge::merge_weighted;
use crate::graph::{FuncId, Graph, GraphBuilder};

/// A v5 profile in canonical form: edges last, by function name, source and target.
const V5: &str = "# hottext profile v5\n# build-id: ab\n\
    fn hot 64 9\nfn main 32 1\ncall main hot 9\n\
    block hot 0 0 12 1\nblock hot 1 12 28 0\nblock hot 2 40 24 8\nblock main 1 8 4 1\n\
    block-edge hot 0 2 7\nblock-edge hot 2 1 3\nblock-edge hot 2 2 40\n";

fn edges(graph: &Graph, func: FuncId) -> Vec<(u32, u32, u64)> {
    (graph.block_edges_of(func).iter())
        .map(|e| (e.from, e.to, e.count))
        .collect()
}

#[test]
fn a_profile_with_block_edges_is_v5_and_round_trips_byte_identical() {
    let graph = Graph::read(V5.as_bytes()).unwrap();
    assert_eq!(edges(&graph, FuncId(0)), [(0, 2, 7), (2, 1, 3), (2, 2, 40)]);
    assert!(edges(&graph, FuncId(1)).is_empty());
    assert_eq!(graph.total_block_edge_count(), 50);
    let mut out = Vec::new();
    graph.write(&mut out).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), V5);
}

#[test]
fn a_profile_without_block_edges_stays_v4() {
    let v4: String = V5
        .lines()
        .filter(|l| !l.starts_with("block-edge"))
        .fold(String::new(), |text, l| text + l + "\n");
    let mut out = Vec::new();
    Graph::read(v4.as_bytes()).unwrap().write(&mut out).unwrap();
    assert!(String::from_utf8(out)
        .unwrap()
        .starts_with("# hottext profile v4\n"));
}

#[test]
fn the_builder_keeps_only_edges_between_blocks_it_keeps() {
    let mut b = GraphBuilder::default();
    let f = b.func("f", 64);
    b.add_block_samples(f, 0, 0, 16, 3);
    b.add_block_samples(f, 1, 16, 16, 0);
    // Past f's 64 bytes: counted in another build, so its edges go with it.
    b.add_block_samples(f, 2, 60, 16, 5);
    b.add_block_edge(f, 0, 1, 4);
    b.add_block_edge(f, 0, 1, 2);
    b.add_block_edge(f, 1, 1, 9);
    b.add_block_edge(f, 1, 2, 5);
    b.add_block_edge(f, 0, 3, 1); // block 3 was never added
    b.add_block_edge(f, 1, 0, 0); // nothing passed
    let graph = b.finish();
    assert_eq!(edges(&graph, f), [(0, 1, 6), (1, 1, 9)]);
}

#[test]
fn merging_scales_edges_and_drops_those_whose_blocks_are_other_code() {
    let old = Graph::read(V5.as_bytes()).unwrap();
    // The newer profile's block 2 of `hot` lies elsewhere: other code, so the older part's
    // edges touching it are dropped, while its edge 0 -> 1 is summed.
    let new = "# hottext profile v5\nfn hot 64 4\n\
        block hot 0 0 12 2\nblock hot 1 12 28 2\nblock hot 2 40 20 0\n\
        block-edge hot 0 1 10\n";
    let new = Graph::read(new.as_bytes()).unwrap();
    let merged = merge_weighted(&[(&new, 1.0), (&old, 0.5)]);
    let hot = FuncId(0);
    assert_eq!(merged.funcs()[hot].name, "hot");
    assert_eq!(edges(&merged, hot), [(0, 1, 10)]);
    // Without the clash, the older edges count at half weight.
    let merged = merge_weighted(&[(&old, 0.5)]);
    assert_eq!(edges(&merged, hot), [(0, 2, 4), (2, 1, 2), (2, 2, 20)]);
}

#[test]
fn malformed_block_edge_lines_are_errors_naming_the_line() {
    let head = "# hottext profile v5\nfn f 64 9\nblock f 0 0 8 1\nblock f 1 8 8 0\n";
    let cases = [
        (
            "block-edge f 0 2 1",
            "block 2 of 'f' has no 'block' line before this edge",
        ),
        ("block-edge g 0 1 1", "'g' is not declared"),
        (
            "block-edge f 0 1 1\nblock-edge f 0 1 2",
            "the edge from block 0 to block 1 of 'f' is on two lines",
        ),
        ("block-edge f 0 x 1", "block id 'x' is not a whole number"),
        ("block-edge f 0 1", "'block-edge' record lacks a count"),
        ("block-edge f 0 1 1 1", "unexpected field '1'"),
        ("block-edge f 0 1 -1", "count"),
    ];
    for (lines, says) in cases {
        let text = format!("{head}{lines}\n");
        let err = Graph::read(text.as_bytes()).unwrap_err().to_string();
        let line = 4 + lines.lines().count();
        assert!(err.starts_with(&format!("line {line}: ")), "{lines}: {err}");
        assert!(err.contains(says), "{lines}: {err}");
    }
    let v4 = head.replace("v5", "v4") + "block-edge f 0 1 1\n";
    let err = Graph::read(v4.as_bytes()).unwrap_err().to_string();
    assert!(
        err.contains("line 5: 'block-edge' records need a v5 profile"),
        "{err}"
    );
    let max = crate::graph::MAX_COUNT;
    let too_many = format!("{head}block-edge f 0 1 {max}\nblock-edge f 1 0 {max}\n");
    assert!(matches!(
        Graph::read(too_many.as_bytes()),
        Err(crate::graph::GraphError::TooMany {
            what: "block edge counts"
        })
    ));
}
