//! perf.data files recorded on other machines (perf 3.2 to 6.16; x86_64, aarch64, armv7, i686;
//! LBR, DWARF, hybrid CPUs, pipe mode, zstd; `tests/fixtures/perf/README.md` says where each
//! comes from), read with `hottext profile --events` and compared with perf's own counts
//! (`tests/fixtures/perf/expected.tsv`, read with `perf report --stats` and `perf evlist`, never
//! with hottext). A file is either read with perf's sample count for every event, or refused
//! with exit status 2 and a message; never a panic or a hang.
//!
//! The recordings are third-party files kept outside the repository, in the steering
//! repository's `shared/fixtures/perf/` (`../shared/fixtures/perf` from the repository's root),
//! or wherever `HOTTEXT_PERF_FIXTURES` says. The tests are `#[ignore]`d so that `make test`
//! does not depend on them; `make test-recordings` runs them, and they fail naming the missing
//! directory or file.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{call_lines, stderr};

/// Longer than any of these small files takes to read, even on a loaded machine: a reader
/// that loops is killed and the test names it.
const TIMEOUT: Duration = Duration::from_secs(60);

const WHERE: &str = "set HOTTEXT_PERF_FIXTURES to the directory that holds them \
     (tests/fixtures/perf/README.md says where each comes from)";

fn fixtures() -> PathBuf {
    let dir = std::env::var_os("HOTTEXT_PERF_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/perf")
        });
    assert!(
        dir.is_dir(),
        "the real recordings are not at {}: {WHERE}",
        dir.display()
    );
    dir
}

/// One row of expected.tsv: an event of a file as perf reads it.
struct Row {
    file: String,
    event: String,
    /// `None` where perf fails on the file's samples.
    samples: Option<u64>,
    sample_type: String,
    branch_filter: String,
}

fn expected() -> Vec<Row> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/perf/expected.tsv");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .skip(1)
        .map(|line| {
            let f: Vec<&str> = line.split('\t').collect();
            assert!(f.len() >= 5, "expected.tsv: short line {line:?}");
            Row {
                file: f[0].into(),
                event: f[1].into(),
                samples: f[2].parse().ok(),
                sample_type: f[3].into(),
                branch_filter: f[4].into(),
            }
        })
        .collect()
}

/// Runs hottext with a deadline; a run past it is killed and fails the test.
fn hottext(args: &[&str], dir: &Path) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hottext"))
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run the hottext binary");
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("hottext {args:?} ran for more than {TIMEOUT:?}: a hang");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// What `--events` says the samples carry, from perf's `sample_type`.
fn carries(sample_type: &str) -> &'static str {
    let has = |bit: &str| sample_type.split('|').any(|b| b == bit);
    if has("BRANCH_STACK") {
        "branch-records"
    } else if has("REGS_USER") && has("STACK_USER") {
        "dwarf-stack"
    } else if has("CALLCHAIN") {
        "fp-stack"
    } else {
        "plain"
    }
}

/// The filter bits of perf's `branch_sample_type`, in `--events`' names, sorted.
fn filter(branch_sample_type: &str) -> Vec<String> {
    let mut names: Vec<String> = branch_sample_type
        .split('|')
        .filter_map(|bit| match bit {
            "ANY" => Some("any"),
            "ANY_CALL" => Some("any_call"),
            "ANY_RETURN" => Some("any_ret"),
            "IND_CALL" => Some("ind_call"),
            "CALL" => Some("call"),
            "IND_JUMP" => Some("ind_jmp"),
            "COND" => Some("cond"),
            "CALL_STACK" => Some("stack"),
            "USER" => Some("u"),
            "KERNEL" => Some("k"),
            _ => None, // HW_INDEX, NO_FLAGS, NO_CYCLES, `-`: the records' shape, not a filter
        })
        .map(String::from)
        .collect();
    names.sort();
    names
}

/// perf's name and ours may differ in the modifiers perf reconstructs (`cycles:uH` for the
/// `cycles:u` the file holds): the event itself must agree.
fn base_name(name: &str) -> &str {
    name.split(':').next().unwrap_or(name)
}

#[test]
#[ignore = "needs the real recordings: make test-recordings"]
fn every_recording_is_read_with_perfs_counts_or_refused() {
    let dir = fixtures();
    let rows = expected();
    let mut files: Vec<&str> = rows.iter().map(|r| r.file.as_str()).collect();
    files.dedup();
    // Every recording in the directory has its expected counts.
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".data") {
            assert!(
                files.contains(&name.as_str()),
                "{name} is not in expected.tsv"
            );
        }
    }
    for file in files {
        assert!(
            dir.join(file).is_file(),
            "{file} is missing from {}: {WHERE}",
            dir.display()
        );
        let rows: Vec<&Row> = rows.iter().filter(|r| r.file == file).collect();
        let out = hottext(&["profile", file, "--events", "--json"], &dir);
        let err = stderr(&out);
        assert!(!err.contains("panicked"), "{file}: {err}");
        if out.status.code() == Some(2) {
            // Refused: only where perf fails on the samples too, with a message naming the file.
            assert!(
                rows.iter().any(|r| r.samples.is_none()),
                "{file}: perf reads it, hottext refused it: {err}"
            );
            assert!(
                err.starts_with(&format!("hottext: {file} ")),
                "{file}: {err}"
            );
            continue;
        }
        assert!(out.status.success(), "{file}: {:?} {err}", out.status);
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let events = doc["events"].as_array().unwrap();
        assert_eq!(events.len(), rows.len(), "{file}: {events:?}");
        for (event, row) in events.iter().zip(&rows) {
            let name = event["name"].as_str().unwrap();
            assert_eq!(base_name(name), base_name(&row.event), "{file}: {event}");
            if let Some(samples) = row.samples {
                assert_eq!(
                    event["samples"], samples,
                    "{file} {name}: perf counts {samples}"
                );
            }
            assert_eq!(event["carries"], carries(&row.sample_type), "{file} {name}");
            let ours: Vec<String> = serde_json::from_value(event["branch_filter"].clone()).unwrap();
            let mut ours = ours;
            ours.sort();
            assert_eq!(ours, filter(&row.branch_filter), "{file} {name}");
        }
    }
}

#[test]
#[ignore = "needs the real recordings: make test-recordings"]
fn a_pipe_with_a_record_of_size_zero_is_refused_with_its_offset() {
    let dir = fixtures();
    let out = hottext(&["profile", "pipe-corrupt-perf3.2.data", "--events"], &dir);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("hottext: pipe-corrupt-perf3.2.data is damaged") && err.contains("byte"),
        "{err}"
    );
}

/// The hybrid recording: `cpu_atom/cycles/Pu` (56 samples by perf) and `cpu_core/cycles/Pu`
/// (6) both carry DWARF stacks, and both are read for the binary's graph.
#[test]
#[ignore = "needs the real recordings: make test-recordings"]
fn both_events_of_a_hybrid_recording_are_used() {
    let dir = fixtures();
    let tmp = tempfile::TempDir::new().unwrap();
    let profile = tmp.path().join("p.profile");
    let out = hottext(
        &[
            "profile",
            "hybrid-dwarf-x86_64-perf6.17.data",
            "--binary",
            "cpu_test.bin",
            "-o",
            profile.to_str().unwrap(),
            "--json",
        ],
        &dir,
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {err}"));
    assert_eq!(
        doc["event"], "cpu_atom/cycles/Pu, cpu_core/cycles/Pu",
        "{doc}"
    );
    assert_eq!(doc["samples"], 62, "{doc}");
    assert_eq!(doc["unused_events"][0]["name"], "dummy:u", "{doc}");
    // expected-edges.tsv, from perf 6.12's own unwinding of the same samples.
    let calls = call_lines(&std::fs::read_to_string(&profile).unwrap());
    assert_eq!(
        calls,
        [
            ("main", "compute_outer_1", 3),
            ("main", "compute_outer_2", 2),
            ("main", "heavy_allocation_work", 38),
        ]
        .map(|(a, b, n)| (a.to_string(), b.to_string(), n))
    );
}

/// `hottext profile DATA --binary BINARY --json` in the fixtures: its figures and call lines.
fn profile(data: &str, binary: &str) -> (serde_json::Value, String) {
    let tmp = tempfile::TempDir::new().unwrap();
    let out_path = tmp.path().join("p.profile");
    let out = hottext(
        &[
            "profile",
            data,
            "--binary",
            binary,
            "-o",
            out_path.to_str().unwrap(),
            "--json",
        ],
        &fixtures(),
    );
    assert!(out.status.success(), "{data}: {}", stderr(&out));
    let doc = serde_json::from_slice(&out.stdout).unwrap();
    (doc, std::fs::read_to_string(&out_path).unwrap())
}

/// The `block-edge` lines of a profile: (function, from, to, count), in file order.
fn block_edge_lines(profile: &str) -> Vec<(String, u32, u32, u64)> {
    (profile.lines())
        .filter_map(|l| l.strip_prefix("block-edge "))
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (
                f[0].to_string(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
                f[3].parse().unwrap(),
            )
        })
        .collect()
}

/// expected-block-edges.tsv's rows for `recording`, in its order (by function and ids).
fn expected_block_edges(recording: &str) -> Vec<(String, u32, u32, u64)> {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/perf/expected-block-edges.tsv");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    (text.lines())
        .filter(|l| !l.starts_with('#'))
        .skip(1)
        .map(|l| l.split('\t').collect::<Vec<&str>>())
        .filter(|f| f[0] == recording)
        .map(|f| {
            (
                f[1].to_string(),
                f[2].parse().unwrap(),
                f[3].parse().unwrap(),
                f[4].parse().unwrap(),
            )
        })
        .collect()
}

/// Branch records of `perf record -b` (every branch, filter `any`): only the calls are edges,
/// with perf's own counts (expected-edges.tsv: `perf script -F brstacksym`, each record's
/// source instruction classified by objdump); jumps within a function and returns are counted.
/// In 966 of the Propeller sample's samples the newest record repeats the next one across
/// code that cannot run straight through (an LBR erratum of its Skylake server): hottext drops
/// them, 115 calls, 148 returns and 703 jumps by derive-block-edges.py's count.
#[test]
#[ignore = "needs the real recordings: make test-recordings"]
fn branch_records_of_every_branch_give_only_the_calls_as_edges() {
    let (doc, text) = profile("lbr-x86_64-perf4.13.data", "lbr-x86_64-perf4.13.bin");
    assert_eq!(
        call_lines(&text),
        [("main".to_string(), "compute_flag".to_string(), 15930 - 115)]
    );
    assert_eq!(
        doc["branches_within_functions"],
        72413 + 15418 - 703,
        "{doc}"
    );
    assert_eq!(doc["branches_returns"], 15658 - 148, "{doc}");
    assert_eq!(doc["branches_unclassified"], 0, "{doc}");
    assert_eq!(doc["branches_repeated_dropped"], 966, "{doc}");

    // No block map: a repeated newest record cannot be judged, and counts as recorded.
    let (doc, text) = profile("lbr-x86_64-perf6.8.data", "lbr-x86_64-perf6.8.bin");
    assert_eq!(
        call_lines(&text),
        [("main", "test_unroll", 25), ("main", "test_vector_loop", 1)].map(|(a, b, n)| (
            a.to_string(),
            b.to_string(),
            n
        ))
    );
    assert_eq!(doc["branches_within_functions"], 1442 + 537 + 22, "{doc}");
    assert_eq!(doc["branches_returns"], 18 + 1, "{doc}");
}

/// The block edges of AutoFDO's Propeller sample, whose binary has a block map (clang's
/// `SHT_LLVM_BB_ADDR_MAP_V0`): the jumps between its blocks and the runs between records, as
/// derive-block-edges.py derives them with perf, objdump and llvm-readobj alone.
#[test]
#[ignore = "needs the real recordings: make test-recordings"]
fn branch_records_give_the_block_edges_perf_and_objdump_give() {
    let recording = "lbr-x86_64-perf4.13.data";
    let (doc, text) = profile(recording, "lbr-x86_64-perf4.13.bin");
    let expected = expected_block_edges(recording);
    assert_eq!(expected.len(), 12, "expected-block-edges.tsv");
    assert_eq!(block_edge_lines(&text), expected, "{text}");
    assert!(text.starts_with("# hottext profile v5\n"), "{text}");
    assert_eq!(
        doc["branches_to_block_edges"], doc["branches_within_functions"],
        "{doc}"
    );
    assert_eq!(doc["fall_throughs"], 114_721, "{doc}");
    assert_eq!(doc["fall_throughs_unused"], 0, "{doc}");
    // Every block an edge names has a block line.
    for (func, from, to, _) in &expected {
        for id in [from, to] {
            let line = format!("block {func} {id} ");
            assert!(text.lines().any(|l| l.starts_with(&line)), "{line}: {text}");
        }
    }
}

/// A `--call-graph dwarf` recording of a static binary (no `.eh_frame_hdr`, which perf 6.1
/// needs): unwound by the binary's `.eh_frame`, with the edges that perfparser's own expected
/// output (elfutils unwinding) gives for the innermost two frames.
#[test]
#[ignore = "needs the real recordings: make test-recordings"]
fn dwarf_stacks_of_a_static_binary_match_perfparser() {
    let calls = call_lines(&profile("dwarf-x86_64-perf4.18.data", "vector_static_gcc.bin").1);
    for (caller, callee, n) in [
        ("main", "__cos_fma", 16),
        ("main", "__sin_fma", 9),
        ("__hypot", "__hypot_finite", 6),
        ("__libc_start_main", "main", 4),
    ] {
        assert!(
            calls.contains(&(caller.to_string(), callee.to_string(), n)),
            "{caller} -> {callee} {n} not in {calls:?}"
        );
    }
}
