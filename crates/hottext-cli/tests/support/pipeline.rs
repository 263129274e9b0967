//! Helpers of the pipeline tests: run the pipeline until it caught enough samples, read what it
//! committed, a repository holding the small service.

use std::path::{Path, PathBuf};
use std::process::Output;

use super::{build_service, git, repo_with};
use crate::common::{hottext, record_until_enough, stderr, stdout, write};
use hottext::store::meta::Meta;

/// Where the test repositories keep the meta file, and the branch the pipeline commits to.
pub const META: &str = "hottext/svc.meta";
pub const BRANCH: &str = "hottext/profile";

/// The repository hottext is built from.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `hottext pipeline run --config CONFIG` in `repo`, its output shown.
pub fn pipeline_run(repo: &Path, config: &str, extra: &[&str]) -> Output {
    let mut args = vec!["pipeline", "run", "--config", config];
    args.extend_from_slice(extra);
    let out = hottext(&args, repo);
    eprintln!(
        "--- pipeline run {config}:\n{}{}",
        stdout(&out),
        stderr(&out)
    );
    out
}

/// Samples of the service a test wants in a recording before it judges a run; the gate's
/// `min_samples` in the tests' configs.
pub const ENOUGH_SAMPLES: u64 = 200;

/// `config` with its recording `seconds` set.
pub fn recording_for(config: &str, seconds: f64) -> String {
    let lines: Vec<String> = config
        .lines()
        .map(|l| {
            if l.starts_with("seconds = ") {
                format!("seconds = {seconds}")
            } else {
                l.to_string()
            }
        })
        .collect();
    lines.join("\n") + "\n"
}

/// `Err` when a pipeline run caught fewer than [`ENOUGH_SAMPLES`] of the service, read from its
/// report (JSON or the gate's lines on stdout; an error on stderr); such a run changed nothing.
pub fn caught_enough(out: &Output) -> Result<(), String> {
    let err = stderr(out);
    if let Some(line) = err.lines().find(|l| l.contains("fell in its functions")) {
        return Err(line.to_string());
    }
    let report = stdout(out);
    let samples = match serde_json::from_str::<serde_json::Value>(&report) {
        Ok(report) => report["samples"].as_u64(),
        Err(_) => report
            .lines()
            .find_map(|l| l.split_once(" samples of the binary"))
            .and_then(|(head, _)| head.rsplit(' ').next()?.parse().ok()),
    };
    match samples {
        Some(n) if n < ENOUGH_SAMPLES => Err(format!("{n} samples of the service")),
        _ => Ok(()),
    }
}

/// Runs the pipeline with `config` (a file in `repo`), recording longer each time until a run
/// catches [`ENOUGH_SAMPLES`] of the service. The tries' configs are `try-*.toml`, which the
/// test repositories ignore.
pub fn pipeline_until_enough(repo: &Path, config: &str, extra: &[&str]) -> Output {
    let text = std::fs::read_to_string(repo.join(config)).unwrap();
    let tried = format!("try-{config}");
    record_until_enough(1.0, |seconds| {
        write(repo, &tried, &recording_for(&text, seconds));
        let out = pipeline_run(repo, &tried, extra);
        caught_enough(&out).map(|()| out)
    })
}

/// The commits the branch added on top of `main`, oldest first.
pub fn branch_commits(repo: &Path) -> Vec<String> {
    git(repo, &["rev-list", "--reverse", &format!("main..{BRANCH}")])
        .lines()
        .map(str::to_string)
        .collect()
}

/// Files a commit changed.
pub fn changed(repo: &Path, commit: &str) -> String {
    git(
        repo,
        &["diff-tree", "--no-commit-id", "--name-only", "-r", commit],
    )
}

/// The meta file as `commit` has it.
pub fn meta_at(repo: &Path, commit: &str) -> Meta {
    let text = git(repo, &["show", &format!("{commit}:{META}")]);
    Meta::parse(&text, Path::new(META)).expect("the committed meta file parses")
}

/// The message of `commit`.
pub fn message(repo: &Path, commit: &str) -> String {
    git(repo, &["log", "-1", "--format=%B", commit])
}

/// A repository holding the small service and a config that starts it.
pub fn service_repo(dir: &Path, extra_config: &str) -> PathBuf {
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    build_service(&repo, "svc", &[]);
    let config = format!(
        "[service]\nname = \"svc\"\nbinary = \"svc\"\ncommand = [\"./svc\"]\nstartup_seconds = 0.2\n\
         [record]\nseconds = 1\n[store]\nurl = \"../store\"\n[repo]\nmeta = \"{META}\"\n{extra_config}\
         [gate]\nmin_samples = {ENOUGH_SAMPLES}\n"
    );
    std::fs::write(repo.join("hottext.toml"), config).unwrap();
    std::fs::write(repo.join(".gitignore"), "svc\nsvc.o\ntry-*.toml\n").unwrap();
    repo_with(&repo, &[]);
    repo
}
