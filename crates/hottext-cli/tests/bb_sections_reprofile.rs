//! The second iteration: the split build profiled again under another load, whose hot block
//! sits in `step.cold` since the first cluster file split it out; the next cluster file keeps
//! it in `step`'s hot part, the `.cold` part never enters the hot range, and the next build
//! computes what the split one did.

mod clang_split;
mod common;

use clang_split::{clang, link, order_to, profile_and_cluster, symbol, PROGRAM, ROUNDS_PER_SECOND};
use common::{perf_record, profile_json, record_until_enough, run, stdout};

/// The ids of the `c` line of `function` in a cluster file.
fn cluster_of(file: &str, function: &str) -> Vec<u32> {
    let mut lines = file.lines();
    lines
        .find(|l| *l == format!("f {function}"))
        .and_then(|_| lines.next()?.strip_prefix("c "))
        .unwrap_or_else(|| panic!("no cluster for {function}:\n{file}"))
        .split(' ')
        .map(|id| id.parse().unwrap())
        .collect()
}

#[test]
fn a_block_that_became_hot_in_the_split_off_part_is_kept_by_the_next_cluster_file() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    clang(dir, "p", PROGRAM, &["-fbasic-block-address-map"]);
    link(dir, &["p.o"], &[], "base");
    let first = profile_and_cluster(dir);
    order_to(dir, "p.profile", "base", "ld-script", "hot.ld", &[]);
    // The split build, with its block map, so that it can be profiled in turn.
    clang(
        dir,
        "p",
        PROGRAM,
        &[
            "-fbasic-block-sections=list=clusters.txt",
            "-fbasic-block-address-map",
        ],
    );
    link(dir, &["p.o"], &["-fuse-ld=bfd", "-Wl,-T,hot.ld"], "split");
    assert!(
        symbol(dir, "split", "step.cold").is_some(),
        "clang split step"
    );

    // The other load runs the branch the first recording never saw: in step.cold now.
    let (profile, cold_ids) = record_until_enough(2.0, |seconds| {
        let rounds = ((seconds * ROUNDS_PER_SECOND) as u64).to_string();
        let data = perf_record(dir, &dir.join("split"), &[&rounds, "other"]);
        profile_json(dir, &data, "split", "split.profile");
        let profile = std::fs::read_to_string(dir.join("split.profile")).unwrap();
        let cold_ids: Vec<u32> = (profile.lines())
            .filter_map(|l| l.strip_prefix("block step.cold "))
            .map(|rest| rest.split(' ').next().unwrap().parse().unwrap())
            .collect();
        if cold_ids.is_empty() {
            return Err("no sampled block in step.cold".to_string());
        }
        Ok((profile, cold_ids))
    });
    let before = cluster_of(&first, "step");
    assert!(
        cold_ids.iter().all(|id| !before.contains(id)),
        "step.cold holds only blocks the first file split out: {cold_ids:?} of {before:?}"
    );
    order_to(
        dir,
        "split.profile",
        "split",
        "clang-bb-sections",
        "clusters2.txt",
        &[],
    );
    let second = std::fs::read_to_string(dir.join("clusters2.txt")).unwrap();
    let after = cluster_of(&second, "step");
    assert!(
        cold_ids.iter().any(|id| after.contains(id)),
        "the blocks that ran in step.cold ({cold_ids:?}) are not kept: {after:?}\n{profile}"
    );
    assert!(!second.contains("f step.cold"), "{second}");

    // The part is never placed in the hot range, whatever call edge reaches it.
    order_to(dir, "split.profile", "split", "ld-script", "hot2.ld", &[]);
    let script = std::fs::read_to_string(dir.join("hot2.ld")).unwrap();
    assert!(!script.contains("step.cold"), "{script}");

    // And the next build keeps them in step's hot part.
    let warned = clang(
        dir,
        "p",
        PROGRAM,
        &["-fbasic-block-sections=list=clusters2.txt"],
    );
    assert!(warned.is_empty(), "clang: {warned}");
    link(dir, &["p.o"], &[], "again");
    assert_eq!(
        stdout(&run("./again", &["3000", "other"], dir)),
        stdout(&run("./split", &["3000", "other"], dir))
    );
}
