//! clang's basic-block sections with hottext's cluster file, compiled and linked for real:
//! the blocks that ran stay in the hot range with their functions, the split-off `.cold` parts
//! land after it, with GNU ld, gold and lld, and the program still computes what it did. A
//! stale cluster file (a changed function, ids it lacks) still builds a correct program.
//!
//! The loop closed end to end: the program compiled with `-fbasic-block-address-map`, recorded
//! by perf on the software clock, profiled by `hottext profile` (v4, with block counts), the
//! cluster file written by `hottext order --format clang-bb-sections`, the program compiled
//! again with it, linked with each linker's input and checked by `hottext verify --binary`.

mod clang_split;
mod common;

use std::path::Path;

use clang_split::{clang, link, order_to, profile_and_cluster, symbol, PROGRAM};
use common::{hottext, run, stderr, stdout, write};
use hottext::binary::{symbol_of, Binary};
use hottext::graph::Graph;
use hottext::link::is_c_runtime_startup;

/// The functions of `profile` that the linker inputs place, by their plain names: not the
/// `.cold` parts, nor the C runtime's start-up code a stray sample may hit (`_start`).
fn hot_functions(dir: &Path, profile: &str) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join(profile)).unwrap();
    let graph = Graph::read(text.as_bytes()).unwrap();
    graph
        .funcs()
        .iter()
        .map(|f| symbol_of(&f.name).to_string())
        .filter(|name| !name.ends_with(".cold") && !is_c_runtime_startup(name))
        .collect()
}
/// The stated range of the function the binary names `name`.
fn function(bin: &Binary, name: &str) -> (u64, u64) {
    let f = bin.functions.iter().find(|f| f.name == name);
    let f = f.unwrap_or_else(|| panic!("{name} not in the binary"));
    (f.start.0, f.end().0)
}

#[test]
fn hot_parts_sit_in_the_hot_range_and_split_parts_after_it_with_every_linker() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    clang(dir, "p", PROGRAM, &["-fbasic-block-address-map"]);
    link(dir, &["p.o"], &[], "base");
    let clusters = profile_and_cluster(dir);
    assert!(clusters.starts_with("v1\n"), "{clusters}");
    assert!(clusters.contains("\nf step\nc 0 "), "{clusters}");
    let hot = hot_functions(dir, "p.profile");

    let warned = clang(
        dir,
        "p",
        PROGRAM,
        &["-fbasic-block-sections=list=clusters.txt"],
    );
    assert!(warned.is_empty(), "clang: {warned}");
    let expected = stdout(&run("./base", &[], dir));

    let lld = format!("-fuse-ld={}/ld.lld", common::lld_dir());
    let linkers: [(&str, &str, Vec<&str>); 4] = [
        (
            "GNU ld",
            "ld-script",
            vec!["-fuse-ld=bfd", "-Wl,-T,hot.input"],
        ),
        (
            "gold",
            "gold-order",
            vec![
                "-fuse-ld=gold",
                "markers.o",
                "-Wl,--section-ordering-file=hot.input",
            ],
        ),
        (
            "lld",
            "lld-order",
            vec![
                &lld,
                "markers.o",
                "-Wl,--symbol-ordering-file=hot.input",
                "-Wl,--no-warn-symbol-ordering",
            ],
        ),
        (
            "lld with the script",
            "ld-script",
            vec![&lld, "-Wl,-T,hot.input"],
        ),
    ];
    for (linker, format, flags) in linkers {
        order_to(
            dir,
            "p.profile",
            "base",
            format,
            "hot.input",
            &["--markers", "markers.o"],
        );
        link(dir, &["p.o"], &flags, "out");
        assert_eq!(
            stdout(&run("./out", &[], dir)),
            expected,
            "{linker}: the split program computes something else"
        );
        let verified = hottext(
            &["verify", "--binary", "out", "--planned", "hot.input"],
            dir,
        );
        assert!(verified.status.success(), "{linker}: {}", stdout(&verified));

        let out = Binary::open(&dir.join("out")).unwrap();
        let (start, end) = out.hot_range().expect("markers");
        // `step`'s error paths never ran: clang split them off.
        assert!(
            symbol(dir, "out", "step.cold").is_some(),
            "clang split step"
        );
        for hot in &hot {
            let (a, b) = function(&out, hot);
            assert!(
                a >= start.0 && b <= end.0,
                "{linker}: {hot} at {a:#x}..{b:#x} is outside the hot range {start:?}..{end:?}"
            );
            if let Some(cold) = symbol(dir, "out", &format!("{hot}.cold")) {
                assert!(
                    cold >= end.0,
                    "{linker}: {hot}.cold at {cold:#x} is not after the hot range's end {end:?}"
                );
                // The script and gold's order file name the split parts: together, right
                // after the range. lld's symbol order places them among the unordered code.
                assert!(
                    format == "lld-order" || cold < end.0 + 4096,
                    "{linker}: {hot}.cold at {cold:#x} is not right after the range's end {end:?}"
                );
            }
        }
    }
}

#[test]
fn a_stale_cluster_file_still_builds_the_same_program() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    // The source changed since the file was written: step has more blocks, the ids moved, and
    // the file names ids neither version has and a function that is gone.
    let changed = PROGRAM.replace(
        "if (s == 12345)",
        "if (x == 4321) { s -= 7; } else if (x == 77) { s += 5; }\n  if (s == 12345)",
    );
    write(
        dir,
        "stale.txt",
        "v1\nf step\nc 0 3 9 41 977\nf run\nc 0 5 6\nf gone\nc 0 1\n",
    );
    clang(dir, "whole", &changed, &[]);
    link(dir, &["whole.o"], &[], "whole");
    let warned = clang(
        dir,
        "split",
        &changed,
        &["-fbasic-block-sections=list=stale.txt"],
    );
    assert!(warned.is_empty(), "clang said: {warned}");
    link(dir, &["split.o"], &[], "split");
    assert!(
        symbol(dir, "split", "step.cold").is_some(),
        "clang applied none of the stale file: the test would show nothing"
    );
    for rounds in ["3000", "4322"] {
        assert_eq!(
            stdout(&run("./split", &[rounds], dir)),
            stdout(&run("./whole", &[rounds], dir)),
            "a stale cluster file changed what the program computes"
        );
    }
}

/// Block edges (profile v5) reach the binary: given edges that chain `step`'s sampled blocks
/// in the reverse of the compiler's order, the cluster file lists them so (ext-TSP makes each
/// edge a fall-through), clang lays the hot part out in that order, and the program computes
/// what it did. The edges are written here: no CPU of this machine records branches
/// (`tests/real_recordings.rs` reads them from a real LBR recording).
#[test]
fn block_edges_reorder_the_hot_part_as_clang_builds_it() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    clang(dir, "p", PROGRAM, &["-fbasic-block-address-map"]);
    link(dir, &["p.o"], &[], "base");
    profile_and_cluster(dir);
    let profile = std::fs::read_to_string(dir.join("p.profile")).unwrap();
    let graph = Graph::read(profile.as_bytes()).unwrap();
    let step = graph.funcs().iter().position(|f| f.name == "step").unwrap();
    let mut blocks: Vec<(u64, u32)> = (graph.blocks().iter())
        .filter(|b| b.func.index() == step && b.block != 0)
        .map(|b| (b.offset, b.block))
        .collect();
    blocks.sort_unstable();
    assert!(blocks.len() >= 2, "{profile}");
    let reversed: Vec<u32> = blocks.iter().rev().map(|&(_, id)| id).collect();
    let has_entry = graph
        .blocks()
        .iter()
        .any(|b| b.func.index() == step && b.block == 0);
    let chain: Vec<u32> = has_entry
        .then_some(0)
        .into_iter()
        .chain(reversed.iter().copied())
        .collect();
    let mut v5 = profile.replacen("# hottext profile v4\n", "# hottext profile v5\n", 1);
    for pair in chain.windows(2) {
        v5 += &format!("block-edge step {} {} 1000\n", pair[0], pair[1]);
    }
    write(dir, "p5.profile", &v5);
    order_to(
        dir,
        "p5.profile",
        "base",
        "clang-bb-sections",
        "edges.txt",
        &[],
    );
    let clusters = std::fs::read_to_string(dir.join("edges.txt")).unwrap();
    let ids: Vec<String> = std::iter::once(0)
        .chain(reversed)
        .map(|id| id.to_string())
        .collect();
    let line = format!("\nf step\nc {}\n", ids.join(" "));
    assert!(clusters.contains(&line), "{line:?} not in {clusters}");

    let warned = clang(
        dir,
        "p",
        PROGRAM,
        &[
            "-fbasic-block-sections=list=edges.txt",
            "-fbasic-block-address-map",
        ],
    );
    assert!(warned.is_empty(), "clang: {warned}");
    link(dir, &["p.o"], &[], "split");
    assert_eq!(
        stdout(&run("./split", &[], dir)),
        stdout(&run("./base", &[], dir))
    );
    // The hot part's blocks, by address, are the cluster's (clang keeps the ids).
    let bin = Binary::open(&dir.join("split")).unwrap();
    let map = bin
        .block_map()
        .unwrap()
        .expect("the split build keeps its block map");
    let (start, end) = function(&bin, "step");
    let laid: Vec<String> = (map
        .blocks_in(
            hottext::binary::StatedAddr(start),
            hottext::binary::StatedAddr(end),
        )
        .iter())
    .map(|b| b.id.to_string())
    .collect();
    assert_eq!(laid, ids, "{clusters}");
}

#[test]
fn a_cluster_file_without_block_counts_or_with_a_bad_share_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    write(dir, "p.profile", "# hottext profile v1\nfn step 64 50\n");
    let refused = |extra: &[&str], expected: &str| {
        let mut args = vec!["order", "p.profile", "--format", "clang-bb-sections"];
        args.extend_from_slice(extra);
        let o = hottext(&args, dir);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(expected), "{}", stderr(&o));
        assert!(
            stdout(&o).is_empty(),
            "a cluster file was written: {}",
            stdout(&o)
        );
    };
    refused(&[], "p.profile has no block counts");
    refused(
        &["--min-block-share", "2"],
        "--min-block-share 2: give a share",
    );
}
