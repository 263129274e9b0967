//! The inference on code clang 19 compiled: blocks found by the calls they make.

use iced_x86::{Decoder, DecoderOptions, FlowControl};

use super::must_have_run;
use crate::binary::bb_addr_map::tests::clang_source;
use crate::binary::bb_addr_map::FLAG_RETURN;
use crate::binary::{Binary, Function, PlacedBlock};
use crate::profile::code::Code;

/// `work` calls `rare_step` on a branch of its own, then `hot_step` in a loop, then returns.
const PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) long hot_step(long i) { return i * 3 + (i >> 2); }
__attribute__((noinline)) long rare_step(long n) { return n - 7; }
__attribute__((noinline)) long work(long n, int rare) {
  long s = 0;
  if (rare) s = rare_step(n);
  for (long i = 0; i < n; i++) s += hot_step(i);
  return s;
}
int main(int argc, char **argv) {
  printf("%ld\n", work(argc > 1 ? atol(argv[1]) : 1000, argc > 2));
  return 0;
}
"#;

/// The one block of `blocks` that calls the function at `callee`.
fn calling<'b>(code: &Code<'_>, blocks: &'b [PlacedBlock], callee: u64) -> &'b PlacedBlock {
    let calls = |b: &&PlacedBlock| {
        let bytes = code.bytes(b.start.0, b.size as usize);
        Decoder::with_ip(64, bytes, b.start.0, DecoderOptions::NONE)
            .into_iter()
            .any(|i| i.flow_control() == FlowControl::Call && i.near_branch_target() == callee)
    };
    let found: Vec<&PlacedBlock> = blocks.iter().filter(calls).collect();
    assert_eq!(found.len(), 1, "blocks calling {callee:#x}: {found:?}");
    found[0]
}

#[test]
fn the_blocks_around_a_sampled_loop_ran_and_a_branch_beside_it_did_not() {
    let dir = tempfile::tempdir().unwrap();
    let bin = Binary::open(&clang_source(dir.path(), "p", PROGRAM, &[])).unwrap();
    let code = Code::of(&bin);
    let map = bin.block_map().unwrap().expect("clang wrote a block map");
    let by_name = bin.index_by_name();
    let func = |name: &str| -> &Function { &bin.functions[by_name[name]] };
    let work = func("work");
    let blocks = map.blocks_in(work.start, work.end());
    let hot = calling(&code, blocks, func("hot_step").start.0);
    let rare = calling(&code, blocks, func("rare_step").start.0);
    let listing = format!("{blocks:#x?}");

    let ran = must_have_run(&code, work, blocks, &[hot.id], |_| false);
    let ids: Vec<u32> = ran.iter().map(|b| b.id).collect();
    // The entry dominates the loop; the return post-dominates it.
    assert!(
        ran.iter().any(|b| b.start == work.start),
        "entry not inferred: {ids:?} of {listing}"
    );
    assert!(
        ran.iter().any(|b| b.flags & FLAG_RETURN != 0),
        "return not inferred: {ids:?} of {listing}"
    );
    assert!(!ids.contains(&hot.id), "a sampled block is not inferred");
    assert!(
        !ids.contains(&rare.id),
        "the rare branch runs only on some calls, it must stay out: {ids:?} of {listing}"
    );

    // Sampled in the rare branch only, the loop is not inferred: a loop may run no round.
    let ran = must_have_run(&code, work, blocks, &[rare.id], |_| false);
    assert!(ran.iter().all(|b| b.id != hot.id), "{ran:?}");
    assert!(ran.iter().any(|b| b.start == work.start), "{ran:?}");
}
