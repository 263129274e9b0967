//! The output contract of docs/output.md, run against the real binary: every verb's help shows
//! its examples as written and a help line for every option; with --json every exit path prints
//! one JSON document with `schema`; the same outcome gives the same exit status in every verb.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use common::{hottext, program_and_profile, run, stderr, stdout};

/// The subcommands a help text lists under "Commands:", without clap's own `help`.
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// Every verb and subcommand, as the argument lists that name them, found from `--help` itself.
fn every_command(dir: &Path) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut queue = vec![Vec::<String>::new()];
    while let Some(path) = queue.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let out = hottext(&args, dir);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        for sub in subcommands(&stdout(&out)) {
            let mut child = path.clone();
            child.push(sub);
            queue.push(child);
        }
        if !path.is_empty() {
            found.push(path);
        }
    }
    found
}

#[test]
fn every_help_prints_its_examples_one_a_line() {
    let dir = tempfile::tempdir().unwrap();
    let commands = every_command(dir.path());
    let verbs: Vec<&str> = commands
        .iter()
        .filter(|c| c.len() == 1)
        .map(|c| c[0].as_str())
        .collect();
    assert!(verbs.len() >= 9, "verbs found: {verbs:?}");
    for path in &commands {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let help = stdout(&hottext(&args, dir.path()));
        let name = format!("hottext {}", path.join(" "));
        // A reflowed paragraph of examples has two invocations on one line.
        for line in help.lines() {
            let invocations = verbs
                .iter()
                .map(|v| line.matches(&format!("hottext {v} ")).count())
                .sum::<usize>();
            assert!(invocations <= 1, "{name} --help reflowed a line: {line}");
        }
        let mut lines = help.lines().skip_while(|l| !l.starts_with("Example"));
        let heading = lines.next().unwrap_or_default();
        assert!(
            heading == "Example:" || heading == "Examples:",
            "{name} --help has no Example(s): heading on a line of its own:\n{help}"
        );
        let examples: Vec<&str> = lines.take_while(|l| !l.trim().is_empty()).collect();
        assert!(!examples.is_empty(), "{name} --help shows no example");
        let mut continued = false;
        for line in examples {
            assert!(
                continued || line.trim_start().starts_with(&name),
                "{name} --help: an example line that is not an invocation of it: {line}"
            );
            continued = line.ends_with('\\');
        }
    }
}

#[test]
fn every_option_and_argument_has_a_help_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut commands = every_command(dir.path());
    commands.push(vec![]);
    for path in &commands {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("-h");
        let help = stdout(&hottext(&args, dir.path()));
        let mut in_list = false;
        for line in help.lines() {
            if line == "Options:" || line == "Arguments:" {
                in_list = true;
                continue;
            }
            if !line.starts_with("  ") {
                in_list = false;
            }
            let entry = line.trim_start();
            if !in_list || !(entry.starts_with('-') || entry.starts_with('<')) {
                continue;
            }
            // "-o, --output <FILE>   Write the order here": the help follows two spaces.
            let text = entry.split_once("  ").map_or("", |(_, t)| t.trim());
            assert!(
                !text.is_empty() && !text.starts_with('['),
                "hottext {}: no help for {entry}",
                path.join(" ")
            );
        }
    }
}

/// The one JSON document on stdout, with the contract's `schema`.
fn document(out: &Output) -> serde_json::Value {
    let doc: serde_json::Value = serde_json::from_str(&stdout(out))
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{}", stdout(out)));
    assert_eq!(doc["schema"], 2, "{doc}");
    doc
}

const PROGRAM: &str = r#"
#include <stdio.h>
#include <unistd.h>
__attribute__((noinline)) int hot_leaf(int x) { return x + 1; }
__attribute__((noinline)) int hot_mid(int x) { return hot_leaf(x) * 3; }
int main(int argc, char **argv) {
    (void)argv;
    long s = 0;
    for (int i = 0; i < 1000; i++) s += hot_mid(i);
    printf("ready %ld\n", s);
    fflush(stdout);
    if (argc > 1) pause();
    return 0;
}
"#;
const PROFILE: &str = "# hottext profile v1\nfn main 60 10\nfn hot_mid 20 50\n\
    fn hot_leaf 4 40\ncall main hot_mid 50\ncall hot_mid hot_leaf 40\n";

/// A program built plain (`base`) and with its hot range (`hot`), and its profile.
fn setup() -> tempfile::TempDir {
    let dir = program_and_profile(PROGRAM, PROFILE);
    let d = dir.path();
    let order = hottext(
        &[
            "order",
            "p.profile",
            "--binary",
            "base",
            "--format",
            "ld-script",
            "-o",
            "hot.ld",
        ],
        d,
    );
    assert!(order.status.success(), "{}", stderr(&order));
    run("gcc", &["p.o", "-Wl,-T,hot.ld", "-o", "hot"], d);
    dir
}

#[test]
fn order_prints_json_for_every_format() {
    let dir = setup();
    let d = dir.path();
    for format in ["ranges", "lld-cgprofile", "ld-script"] {
        let out = hottext(
            &[
                "order",
                "p.profile",
                "--binary",
                "base",
                "--format",
                format,
                "-o",
                "out",
                "--json",
            ],
            d,
        );
        assert!(out.status.success(), "{format}: {}", stderr(&out));
        let doc = document(&out);
        assert_eq!(doc["format"], format, "{doc}");
        assert_eq!(doc["ranges"].is_array(), format == "ranges", "{doc}");
        assert_eq!(doc["ordered"].is_object(), format == "ld-script", "{doc}");
    }
    // Bad input is exit status 2, and still one document, naming the problem.
    let out = hottext(&["order", "missing.profile", "-o", "out", "--json"], d);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let doc = document(&out);
    assert!(
        doc["error"].as_str().unwrap().contains("missing.profile"),
        "{doc}"
    );
}

#[test]
fn verbose_prints_the_parameters_of_the_ordering() {
    let dir = setup();
    let out = hottext(
        &[
            "order",
            "p.profile",
            "--verbose",
            "--merge-threshold",
            "8192",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("order parameters:"), "{err}");
    let line = err
        .lines()
        .find(|l| l.contains("merge_threshold"))
        .unwrap_or_default();
    assert!(line.ends_with("8192"), "{err}");
    assert!(
        !stdout(&out).contains("merge_threshold"),
        "parameters stay off stdout"
    );
}

#[test]
fn fetch_that_cannot_use_the_profile_prints_json_and_exits_1() {
    let dir = setup();
    let d = dir.path();
    let put = hottext(
        &[
            "store",
            "put",
            "p.profile",
            "--store",
            "store",
            "--meta",
            "p.meta",
            "--json",
        ],
        d,
    );
    assert!(put.status.success(), "{}", stderr(&put));
    let hash = document(&put)["hash"].as_str().unwrap().to_string();
    let hex = hash.trim_start_matches("sha256:");
    std::fs::remove_file(d.join("store/sha256").join(hex)).unwrap();
    let out = hottext(
        &[
            "fetch", "--meta", "p.meta", "--binary", "base", "-o", "hot2.ld", "--json",
        ],
        d,
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let doc = document(&out);
    assert!(doc["error"].as_str().unwrap().contains(hex), "{doc}");
    assert!(!d.join("hot2.ld").exists(), "nothing is written");
}

/// A running process, killed when dropped (also when the test fails).
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn verify_pid_exits_1_and_names_the_pages_not_on_huge_pages() {
    let dir = setup();
    let d = dir.path();
    // Without the runtime, the hot range stays on the 4 KiB pages of the file mapping.
    let mut child = Command::new(d.join("hot"))
        .arg("wait")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    let process = Running(child);
    assert!(ready.starts_with("ready"), "{ready}");
    let pid = process.0.id().to_string();
    let out = hottext(&["verify", "--pid", &pid, "--json"], d);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let doc = document(&out);
    let small: Vec<u64> = doc["pages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["backing"] == "small")
        .map(|p| p["address"].as_u64().unwrap())
        .collect();
    let problems = doc["problems"].as_array().unwrap();
    assert!(!small.is_empty() && problems.len() == small.len(), "{doc}");
    assert!(
        stderr(&out).contains(&format!("{:#x}", small[0])),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_failing_command_is_exit_status_1_in_stat_and_ab() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = hottext(&["stat", "--json", "--", "sh", "-c", "exit 3"], d);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(document(&out)["exit_code"], 3);

    let out = hottext(
        &["ab", "--runs", "6", "-a", "true", "-b", "exit 3", "--json"],
        d,
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let doc = document(&out);
    assert!(
        doc["error"].as_str().unwrap().contains("exit status 3"),
        "{doc}"
    );

    // A wrong argument stays exit status 2, with its document.
    let out = hottext(
        &["ab", "--runs", "2", "-a", "true", "-b", "true", "--json"],
        d,
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(document(&out)["error"]
        .as_str()
        .unwrap()
        .contains("--runs 2"));
}

/// One version for the project (issue 33: `hottext --version` said 0.1.0 and the runtime's
/// `.pc` 0.2.0): the workspace's version in Cargo.toml is the one the runtime's header states,
/// which its Makefile writes into hottext.pc. A release bumps both; this test says when not.
#[test]
fn the_command_and_the_runtime_have_one_version() {
    let header = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../runtime/include/hottext.h"
    ))
    .expect("cannot read runtime/include/hottext.h");
    let part = |name: &str| {
        let prefix = format!("#define HOTTEXT_VERSION_{name} ");
        header
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no HOTTEXT_VERSION_{name} in hottext.h"))
            .trim()
            .to_string()
    };
    let runtime = format!("{}.{}.{}", part("MAJOR"), part("MINOR"), part("PATCH"));
    let out = hottext(&["--version"], Path::new("."));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out).trim(),
        format!("hottext {runtime}"),
        "bump [workspace.package] version in Cargo.toml and HOTTEXT_VERSION_* in runtime/include/hottext.h together"
    );
}

/// docs/output.md's stream table is what the code declares: each verb's result type states
/// the stream of its human form (`output::Report::STREAM`), and `report_streams` gathers them
/// verb by verb. A verb whose report moves, or a new verb, fails here until the page says so.
#[test]
fn the_stream_table_is_what_the_reports_declare() {
    let page =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/output.md"))
            .expect("cannot read docs/output.md");
    let streams = page
        .split("\n## Streams\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("docs/output.md has no ## Streams section");
    let documented: Vec<(String, String)> = streams
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            (cells[1].trim_matches('`').to_string(), cells[2].to_string())
        })
        .collect();
    let declared: Vec<(String, String)> = hottext_cli::report_streams()
        .into_iter()
        .map(|(verb, stream)| (verb.to_string(), format!("{stream:?}").to_lowercase()))
        .collect();
    assert_eq!(
        documented, declared,
        "docs/output.md's stream table (left) differs from the code's declarations (right)"
    );
}
