//! `hottext fetch --format clang-bb-sections`: the cluster file is the compile step's input, so
//! it is fetched before there is a binary, from a profile published with `store put`, and the
//! build it makes is split.

mod clang_split;
mod common;

use clang_split::{clang, link, profile_and_cluster, symbol, PROGRAM};
use common::{hottext, stderr, store_put};

#[test]
fn fetch_writes_the_cluster_file_before_the_compile_step_without_a_binary() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    clang(dir, "p", PROGRAM, &["-fbasic-block-address-map"]);
    link(dir, &["p.o"], &[], "base");
    let ordered = profile_and_cluster(dir);
    store_put(dir, "p.profile", "svc.meta");
    // The compile step comes first: there is no binary of this build yet.
    std::fs::remove_file(dir.join("base")).unwrap();
    std::fs::remove_file(dir.join("p.o")).unwrap();
    let fetch = |format: &str, out: &str| {
        hottext(
            &[
                "fetch", "--meta", "svc.meta", "--format", format, "-o", out, "--json",
            ],
            dir,
        )
    };
    let fetched = fetch("clang-bb-sections", "fetched.txt");
    assert!(fetched.status.success(), "{}", stderr(&fetched));
    let report: serde_json::Value = serde_json::from_slice(&fetched.stdout).unwrap();
    assert_eq!(report["optimised"], true, "{report:#}");
    let file = std::fs::read_to_string(dir.join("fetched.txt")).unwrap();
    // Fitted by name only, the same build's blocks: the file `order --binary` wrote.
    let body = |f: &str| -> Vec<String> {
        f.lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(body(&file), body(&ordered));

    let warned = clang(
        dir,
        "p",
        PROGRAM,
        &["-fbasic-block-sections=list=fetched.txt"],
    );
    assert!(warned.is_empty(), "clang: {warned}");
    link(dir, &["p.o"], &[], "split");
    assert!(
        symbol(dir, "split", "step.cold").is_some(),
        "clang split step with the fetched file"
    );

    // A linker input is fitted to the binary it orders: without one, fetch says so.
    let refused = fetch("ld-script", "hot.ld");
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("--format ld-script needs --binary BIN"),
        "{}",
        stderr(&refused)
    );
}
