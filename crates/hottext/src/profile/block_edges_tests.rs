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

/// [`PROGRAM`] compiled by clang 19 with a block map, and the directory that holds it.
fn compiled() -> (tempfile::TempDir, Binary) {
    let dir = tempfile::tempdir().unwrap();
    let bin = Binary::open(&clang_source(dir.path(), "p", PROGRAM, &[])).unwrap();
    (dir, bin)
}

/// Whether `block` ends in a return or a jump, after which control cannot fall through.
fn stops(code: &Code<'_>, block: &PlacedBlock) -> bool {
    let bytes = code.bytes(block.start.0, block.size as usize);
    let decoder = Decoder::with_ip(64, bytes, block.start.0, DecoderOptions::NONE);
    let last = decoder.into_iter().last();
    last.is_some_and(|i| {
        matches!(
            i.flow_control(),
            FlowControl::Return | FlowControl::UnconditionalBranch | FlowControl::IndirectBranch
        )
    })
}

/// Reads `tally` against `bin` as a recording of every taken branch would be read.
fn read(bin: &Binary, tally: Tally) -> (Graph, Stats) {
    let mut stats = Stats {
        sample_kind: SampleKind::Branch,
        ..Stats::default()
    };
    let counts = resolve(
        bin,
        Code::of(bin),
        SampleKind::Branch,
        false,
        tally,
        &mut stats,
    );
    (graph(bin, &counts, SampleKind::Branch, &stats), stats)
}

/// The function named `name` in `graph`.
fn id(graph: &Graph, name: &str) -> FuncId {
    let i = graph.funcs().iter().position(|f| f.name == name);
    FuncId::from_index(i.unwrap_or_else(|| panic!("{name} not in the profile")))
}

fn edges(graph: &Graph, f: FuncId) -> Vec<(u32, u32, u64)> {
    (graph.block_edges_of(f).iter())
        .map(|e| (e.from, e.to, e.count))
        .collect()
}

#[test]
fn jumps_and_runs_between_records_become_edges_between_blocks() {
    let (_dir, bin) = compiled();
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
    let stops = |b: &PlacedBlock| stops(&code, b);
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

    let (graph, stats) = read(&bin, tally);
    assert_eq!(stats.branches_within_functions, 6);
    assert_eq!(stats.branches_to_block_edges, 5);
    assert_eq!((stats.fall_throughs, stats.fall_throughs_unused), (3, 3));

    let f = id(&graph, "work");
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

/// A sample's newest record that repeats the next one is a real branch where the code from its
/// target back to its source can run straight through (a loop of blocks that fall into each
/// other), and a copy the CPU wrote where it cannot (a call repeated: its callee must have
/// returned in between, a branch the records would show).
#[test]
fn a_repeated_newest_record_counts_only_where_its_code_can_run_again_unbroken() {
    let (_dir, bin) = compiled();
    let code = Code::of(&bin);
    let map = bin.block_map().unwrap().expect("clang wrote a block map");
    let by_name = bin.index_by_name();
    let (work, main) = (
        &bin.functions[by_name["work"]],
        &bin.functions[by_name["main"]],
    );
    let blocks = map.blocks_in(work.start, work.end());
    let listing = format!("{blocks:#x?}");
    // A backward conditional jump whose loop falls through from its head to the jump.
    let back_edge = blocks.iter().enumerate().find_map(|(k, source)| {
        let bytes = code.bytes(source.start.0, source.size as usize);
        let last = Decoder::with_ip(64, bytes, source.start.0, DecoderOptions::NONE)
            .into_iter()
            .last()?;
        let j = blocks
            .iter()
            .position(|b| b.start.0 == last.near_branch_target())?;
        let unbroken = j <= k && blocks[j..k].iter().all(|b| !stops(&code, b));
        (last.flow_control() == FlowControl::ConditionalBranch && unbroken)
            .then(|| (last.ip(), &blocks[j..=k]))
    });
    let (jump_at, lp) = back_edge.unwrap_or_else(|| panic!("no loop in work: {listing}"));
    let call_at = {
        let bytes = code.bytes(main.start.0, main.size as usize);
        let decoder = Decoder::with_ip(64, bytes, main.start.0, DecoderOptions::NONE);
        let mut calls = decoder.into_iter().filter(|i| {
            i.flow_control() == FlowControl::Call && i.near_branch_target() == work.start.0
        });
        calls
            .next()
            .unwrap_or_else(|| panic!("main does not call work"))
            .ip()
    };

    let mut tally = Tally::default();
    for _ in 0..4 {
        (tally.branches.repeated_tops).add((jump_at, lp[0].start.0));
    }
    (tally.branches.repeated_tops).add((call_at, work.start.0));
    let (graph, stats) = read(&bin, tally);
    assert_eq!(stats.branches_repeated_dropped, 1);
    assert_eq!(stats.branches_to_block_edges, 4);
    assert_eq!(stats.fall_throughs, 4);
    assert!(
        graph.calls().is_empty(),
        "the repeated call was a copy: {:?}",
        graph.calls()
    );
    let f = id(&graph, "work");
    let mut expected: Vec<(u32, u32, u64)> = lp.windows(2).map(|p| (p[0].id, p[1].id, 4)).collect();
    expected.push((lp[lp.len() - 1].id, lp[0].id, 4));
    expected.sort_unstable();
    assert_eq!(edges(&graph, f), expected, "{listing}");
}
