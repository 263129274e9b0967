//! Block edges read from branch records on code clang 19 compiled, with the records made from
//! the binary's own jumps and blocks (no LBR here; `tests/real_recordings.rs` reads a real one).

use iced_x86::{Decoder, DecoderOptions, FlowControl};

use crate::binary::bb_addr_map::tests::clang_source;
use crate::binary::{Binary, PlacedBlock};
use crate::graph::{FuncId, Graph};
use crate::profile::code::Code;
use crate::profile::resolve::{graph, resolve, Tally};
use crate::profile::{SampleKind, Stats};

/// `work` loops over a branch; `other` is another function, for runs that leave `work`.
const PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) long other(long n) { return n * 7 + 1; }
__attribute__((noinline)) long work(long n) {
  long s = 0;
  for (long i = 0; i < n; i++) {
    if (i % 3 == 0) s += i * i; else s ^= i;
  }
  return s;
}
int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000;
  printf("%ld %ld\n", work(n), other(n));
  return 0;
}
"#;

/// The first conditional jump of `blocks` whose target starts a block of them: (its address,
/// its source block, its target block).
fn conditional_jump<'b>(
    code: &Code<'_>,
    blocks: &'b [PlacedBlock],
) -> (u64, &'b PlacedBlock, &'b PlacedBlock) {
    for source in blocks {
        let bytes = code.bytes(source.start.0, source.size as usize);
        for i in Decoder::with_ip(64, bytes, source.start.0, DecoderOptions::NONE) {
            if i.flow_control() != FlowControl::ConditionalBranch {
                continue;
            }
            let to = i.near_branch_target();
            if let Some(target) = blocks.iter().find(|b| b.start.0 == to) {
                return (i.ip(), source, target);
            }
        }
    }
    panic!("no conditional jump between blocks in {blocks:#x?}");
}

/// The flow of the last instruction of `block`.
fn last_flow(code: &Code<'_>, block: &PlacedBlock) -> FlowControl {
    let bytes = code.bytes(block.start.0, block.size as usize);
    let decoder = Decoder::with_ip(64, bytes, block.start.0, DecoderOptions::NONE);
    decoder
        .into_iter()
        .last()
        .map_or(FlowControl::Next, |i| i.flow_control())
}

fn edges(graph: &Graph, f: FuncId) -> Vec<(u32, u32, u64)> {
    (graph.block_edges_of(f).iter())
        .map(|e| (e.from, e.to, e.count))
        .collect()
}

#[test]
fn jumps_and_runs_between_records_become_edges_between_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let bin = Binary::open(&clang_source(dir.path(), "p", PROGRAM, &[])).unwrap();
    let code = Code::of(&bin);
    let map = bin.block_map().unwrap().expect("clang wrote a block map");
    let by_name = bin.index_by_name();
    let (work, other) = (
        &bin.functions[by_name["work"]],
        &bin.functions[by_name["other"]],
    );
    let blocks = map.blocks_in(work.start, work.end());
    assert!(blocks.len() >= 4, "{blocks:#x?}");
    let listing = format!("{blocks:#x?}");
    let (jump_at, source, target) = conditional_jump(&code, blocks);

    let mut tally = Tally::default();
    // A jump from a block to a block's start, 5 times (the code tells what the record is).
    for _ in 0..5 {
        tally.branches.by_kind[2].add((jump_at, target.start.0));
    }
    // A jump into the middle of a block: within the function, no block edge.
    tally.branches.by_kind[2].add((jump_at, target.start.0 + 1));
    // A run over three blocks that fall into each other, 3 times: two fall-throughs.
    let ends = |b: &PlacedBlock| last_flow(&code, b);
    let stops = |b: &PlacedBlock| {
        matches!(
            ends(b),
            FlowControl::Return | FlowControl::UnconditionalBranch | FlowControl::IndirectBranch
        )
    };
    let first = (0..blocks.len() - 2)
        .find(|&i| !stops(&blocks[i]) && !stops(&blocks[i + 1]) && blocks[i].size > 0)
        .unwrap_or_else(|| panic!("no three blocks in a row fall through: {listing}"));
    let run = &blocks[first..first + 3];
    for _ in 0..3 {
        (tally.branches.fall_throughs).add((run[0].start.0, run[2].start.0 + 1));
    }
    // Runs that leave the function, go backwards, or pass a block ending in a jump or a
    // return (a record is missing) say nothing of blocks.
    (tally.branches.fall_throughs).add((work.start.0, other.start.0));
    (tally.branches.fall_throughs).add((blocks[2].start.0, blocks[0].start.0));
    let stop = (blocks.iter().position(stops))
        .filter(|&i| i + 1 < blocks.len())
        .unwrap_or_else(|| panic!("no block but the last ends in a jump: {listing}"));
    (tally.branches.fall_throughs).add((blocks[stop].start.0, blocks[stop + 1].start.0));

    let mut stats = Stats {
        sample_kind: SampleKind::Branch,
        ..Stats::default()
    };
    let counts = resolve(&bin, code, SampleKind::Branch, false, tally, &mut stats);
    let graph = graph(&bin, &counts, SampleKind::Branch, &stats);
    assert_eq!(stats.branches_within_functions, 6);
    assert_eq!(stats.branches_to_block_edges, 5);
    assert_eq!((stats.fall_throughs, stats.fall_throughs_unused), (3, 3));

    let f = graph
        .funcs()
        .iter()
        .position(|f| f.name == "work")
        .map(FuncId::from_index)
        .unwrap();
    let mut expected = vec![
        (run[0].id, run[1].id, 3),
        (run[1].id, run[2].id, 3),
        (source.id, target.id, 5),
    ];
    expected.sort_unstable();
    // The jump may join the same blocks as a fall-through: then their counts add up.
    expected.dedup_by(|b, a| {
        let same = (a.0, a.1) == (b.0, b.1);
        if same {
            a.2 += b.2;
        }
        same
    });
    assert_eq!(edges(&graph, f), expected, "{listing}");
    // Every block an edge names ran: it has a block line, with 0 samples (none was sampled).
    for (from, to, _) in edges(&graph, f) {
        for id in [from, to] {
            let block = graph.blocks_of(f).iter().find(|b| b.block == id);
            assert_eq!(block.map(|b| b.samples), Some(0), "block {id}: {listing}");
        }
    }
    // The profile says so in v5, and reads back the same.
    let mut text = Vec::new();
    graph.write(&mut text).unwrap();
    assert!(text.starts_with(b"# hottext profile v5\n"));
    assert_eq!(Graph::read(&text[..]).unwrap(), graph);
}
