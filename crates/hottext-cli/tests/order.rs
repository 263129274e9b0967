//! `hottext order` and `hottext verify` through the real binary: the paper's example, bad input.

mod common;

use common::{hottext, run, stderr, stdout, write};

/// Figure 2 of the hfsort paper as a profile.
const FIGURE2: &str = "# hottext profile v1\n\
    fn A 100 0\nfn B 100 100\nfn C 100 70\nfn D 100 90\n\
    call A B 100\ncall A C 40\ncall B C 30\ncall C D 90\n";

fn figure2_run(algorithm: &str) -> (String, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "fig2.profile", FIGURE2);
    let list = hottext(
        &[
            "order",
            "fig2.profile",
            "--algorithm",
            algorithm,
            "--format",
            "list",
        ],
        dir.path(),
    );
    assert!(list.status.success(), "{}", stderr(&list));
    let json = hottext(
        &[
            "order",
            "fig2.profile",
            "--algorithm",
            algorithm,
            "--json",
            "-o",
            "order.txt",
        ],
        dir.path(),
    );
    assert!(json.status.success(), "{}", stderr(&json));
    (stdout(&list), serde_json::from_str(&stdout(&json)).unwrap())
}

#[test]
fn paper_figure2_c3() {
    let (list, json) = figure2_run("c3");
    assert_eq!(list, "A\nB\nC\nD\n");
    // The paper's 17000, with each function at a 16-byte boundary as the linker places them
    // (0, 112, 224, 336): every distance grows by the 12 bytes of padding it crosses.
    assert_eq!(json["ordered"]["weighted_call_distance"], 20600);
}

#[test]
fn paper_figure2_pettis_hansen() {
    let (list, json) = figure2_run("ph");
    assert_eq!(list, "B\nA\nC\nD\n");
    // The paper's 26000, 16-byte aligned as above.
    assert_eq!(json["ordered"]["weighted_call_distance"], 29480);
}

#[test]
fn auto_scores_every_algorithm_and_writes_the_chosen_ones_order() {
    let (list, json) = figure2_run("auto");
    let candidates = json["candidates"]
        .as_array()
        .expect("auto lists its candidates");
    let names: Vec<&str> = candidates
        .iter()
        .map(|c| c["algorithm"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["cdsort", "c3", "ph"]);
    let chosen: Vec<&serde_json::Value> =
        candidates.iter().filter(|c| c["chosen"] == true).collect();
    assert_eq!(chosen.len(), 1, "{json}");
    let chosen = chosen[0];
    assert_eq!(json["algorithm"], chosen["algorithm"]);
    let best = candidates
        .iter()
        .map(|c| c["score"].as_f64().unwrap())
        .fold(f64::INFINITY, f64::min);
    assert!(
        chosen["score"].as_f64().unwrap() <= best * 1.01 + 1e-12,
        "{json}"
    );
    let (same, _) = figure2_run(chosen["algorithm"].as_str().unwrap());
    assert_eq!(list, same, "auto writes the chosen algorithm's order");
    // The default is auto.
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "fig2.profile", FIGURE2);
    let default = hottext(
        &["order", "fig2.profile", "--json", "-o", "o.txt"],
        dir.path(),
    );
    let default: serde_json::Value = serde_json::from_str(&stdout(&default)).unwrap();
    assert!(default["candidates"].is_array(), "{default}");
    // The choices are auto and the library's table of algorithms; another name is refused.
    let out = hottext(
        &["order", "fig2.profile", "--algorithm", "hfsort"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("[possible values: auto, cdsort, c3, ph]"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn empty_profile_is_an_input_error() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "empty.profile",
        "# hottext profile v1\n# build-id: 00\n",
    );
    let out = hottext(&["order", "empty.profile"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("the profile is empty"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn malformed_profile_line_is_named_by_number() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "bad.profile",
        "# hottext profile v1\nfn A 100 0\ncall A\n",
    );
    let out = hottext(&["order", "bad.profile"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("line 3: 'call' record lacks a callee"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("panicked"));
}

#[test]
fn binary_without_symbols_is_an_input_error() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "p.c", "int main(void) { return 0; }\n");
    run("gcc", &["-O1", "-s", "p.c", "-o", "stripped"], dir.path());
    write(dir.path(), "fig2.profile", FIGURE2);
    for args in [
        &["verify", "--binary", "stripped"][..],
        &["order", "fig2.profile", "--binary", "stripped"],
    ] {
        let out = hottext(args, dir.path());
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            stderr(&out).contains("has no function symbols"),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn profile_of_another_program_matches_nothing() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "p.c", "int main(void) { return 0; }\n");
    run("gcc", &["-O1", "p.c", "-o", "prog"], dir.path());
    write(dir.path(), "fig2.profile", FIGURE2);
    let out = hottext(&["order", "fig2.profile", "--binary", "prog"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("none of the profile's 4 functions is in prog"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn build_id_mismatch_is_refused_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "p.c",
        "int A(void) { return 1; }\nint main(void) { return A(); }\n",
    );
    run(
        "gcc",
        &["-O1", "-Wl,--build-id", "p.c", "-o", "prog"],
        dir.path(),
    );
    write(
        dir.path(),
        "p.profile",
        "# hottext profile v1\n# build-id: 0123\nfn A 16 5\nfn main 16 1\ncall main A 5\n",
    );
    let out = hottext(&["order", "p.profile", "--binary", "prog"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("build-id 0123"), "{}", stderr(&out));
    let out = hottext(
        &[
            "order",
            "p.profile",
            "--binary",
            "prog",
            "--allow-build-id-mismatch",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "main\nA\n");
}

#[test]
fn verify_fails_on_a_binary_without_hot_text() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "p.c", "int main(void) { return 0; }\n");
    run("gcc", &["-O1", "p.c", "-o", "prog"], dir.path());
    let out = hottext(&["verify", "--binary", "prog"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("marker __hot_start is missing"),
        "{}",
        stderr(&out)
    );
}
