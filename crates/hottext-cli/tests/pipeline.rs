//! `hottext pipeline` end to end, with real perf, git and CMake: scheduled refreshes land
//! reviewable one-file commits, the build through the CMake module uses the newest profile,
//! two runs at once queue on the lock, and a failed gate changes nothing.

mod common;
mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{hottext, record_until_enough, run, stderr, stdout, write, KillOnDrop};
use hottext::store::Store;
use support::pipeline::{
    branch_commits, caught_enough, changed, message, meta_at, pipeline_until_enough, recording_for,
    service_repo, workspace, BRANCH, ENOUGH_SAMPLES, META,
};
use support::{git, need, repo_with};

const CMAKELISTS: &str = r#"cmake_minimum_required(VERSION 3.15)
project(demo C)
list(APPEND CMAKE_MODULE_PATH "${HOTTEXT_CMAKE_DIR}")
find_package(hottext REQUIRED)
file(GLOB units src/*.c)
add_executable(demo-service main.c ${units})
target_include_directories(demo-service PRIVATE src)
target_compile_options(demo-service PRIVATE -Og -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer)
hottext_optimize(demo-service META hottext/svc.meta ON_MISSING ${ON_MISSING})
"#;

fn cmake_configure(repo: &Path, on_missing: &str) {
    let cmake_dir = workspace().join("cmake");
    run(
        "cmake",
        &[
            "-S",
            ".",
            "-B",
            "build",
            &format!("-DHOTTEXT_CMAKE_DIR={}", cmake_dir.display()),
            &format!("-DHOTTEXT_EXECUTABLE={}", env!("CARGO_BIN_EXE_hottext")),
            &format!("-DON_MISSING={on_missing}"),
        ],
        repo,
    );
}

fn cmake_build(repo: &Path) -> Output {
    Command::new("cmake")
        .args(["--build", "build", "-j2"])
        .current_dir(repo)
        .output()
        .expect("this test needs cmake (apt-get install cmake)")
}

fn log(o: &Output) -> String {
    format!("{}{}", stdout(o), stderr(o))
}

#[test]
fn two_runs_commit_only_the_meta_file_and_the_cmake_build_uses_the_newer_profile() {
    for (tool, arg) in [
        ("perf", "--version"),
        ("cmake", "--version"),
        ("git", "--version"),
        ("python3", "--version"),
    ] {
        need(tool, arg);
    }
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    // A small demo service: 2000 functions, 4 MiB of text.
    let gen = workspace().join("examples/demo-service/gen.py");
    run(
        "python3",
        &[
            gen.to_str().unwrap(),
            "--out",
            repo.join("src").to_str().unwrap(),
            "--functions",
            "2000",
            "--text-mb",
            "4",
            "--units",
            "4",
        ],
        dir.path(),
    );
    std::fs::copy(
        workspace().join("examples/demo-service/main.c"),
        repo.join("main.c"),
    )
    .unwrap();
    let config = format!(
        "[service]\nname = \"demo\"\nbinary = \"build/demo-service\"\n\
         command = [\"build/demo-service\", \"--serve\"]\nversion = \"1.0\"\n\
         [record]\nseconds = 1\n[store]\nurl = \"../store\"\n[repo]\nmeta = \"hottext/svc.meta\"\n\
         [gate]\nmin_samples = {ENOUGH_SAMPLES}\n"
    );
    repo_with(
        &repo,
        &[
            ("CMakeLists.txt", CMAKELISTS),
            ("hottext.toml", &config),
            (".gitignore", "build/\ntry-*.toml\n"),
        ],
    );

    // First build: no profile yet; with ON_MISSING warn it builds unoptimised and says so.
    cmake_configure(&repo, "warn");
    let first = cmake_build(&repo);
    assert!(first.status.success(), "{}", log(&first));
    assert!(
        log(&first).contains("WITHOUT THE HOT-TEXT PROFILE"),
        "{}",
        log(&first)
    );
    common::copy_program(&repo.join("build/demo-service"), &dir.path().join("plain"));

    // Two scheduled refreshes.
    for _ in 0..2 {
        let out = pipeline_until_enough(&repo, "hottext.toml", &[]);
        assert!(
            out.status.success(),
            "pipeline run failed: {}",
            stderr(&out)
        );
    }
    let commits = branch_commits(&repo);
    assert_eq!(commits.len(), 2, "two runs, two commits");
    for c in &commits {
        assert_eq!(
            changed(&repo, c),
            format!("{META}\n"),
            "commit {c} changed more than the meta file"
        );
    }
    let (m1, m2) = (meta_at(&repo, &commits[0]), meta_at(&repo, &commits[1]));
    assert_ne!(m1.object, m2.object);
    assert!(message(&repo, &commits[0]).contains("this is the first profile"));
    let msg2 = message(&repo, &commits[1]);
    assert!(
        msg2.contains(&format!("previous  {} merged with decay 0.5", m1.object)),
        "{msg2}"
    );
    assert!(
        msg2.contains("top movers") && msg2.contains("coverage"),
        "{msg2}"
    );
    let store = Store::open(dir.path().join("store").to_str().unwrap()).unwrap();
    for m in [&m1, &m2] {
        let bytes = store
            .get(&m.object)
            .expect("the committed object is in the store");
        assert_eq!(bytes.len() as u64, m.size);
    }
    assert_eq!(
        git(&repo, &["status", "--porcelain"]),
        "",
        "the work tree was touched"
    );

    // The report's history: one row per pipeline commit, with its samples and drift.
    let report = hottext(
        &[
            "report",
            "--repo",
            ".",
            "--meta",
            META,
            "-o",
            "../history.html",
        ],
        &repo,
    );
    assert!(report.status.success(), "{}", stderr(&report));
    let page = std::fs::read_to_string(dir.path().join("history.html")).unwrap();
    for c in &commits {
        assert!(
            page.contains(&format!("<td>{}</td>", &c[..7])),
            "{c} not in the history"
        );
    }
    assert!(page.contains(" samples, ") && page.contains("Profile history"));
    assert!(
        page.contains("% matched</td>"),
        "the second run merged the first"
    );

    // The build on the profile branch picks the newer profile, and the binary passes verify.
    git(&repo, &["checkout", "-q", BRANCH]);
    cmake_configure(&repo, "fail");
    let build = cmake_build(&repo);
    assert!(build.status.success(), "{}", log(&build));
    assert!(
        log(&build).contains(&m2.object.to_string()),
        "{}",
        log(&build)
    );
    let script = std::fs::read_to_string(repo.join("build/hottext/demo-service/hot.ld")).unwrap();
    assert!(script.contains(&m2.object.to_string()) && !script.contains(&m1.object.to_string()));
    let verify = hottext(&["verify", "--binary", "build/demo-service"], &repo);
    assert!(
        verify.status.success(),
        "{}{}",
        stdout(&verify),
        stderr(&verify)
    );
    let plain = dir.path().join("plain");
    assert_eq!(
        stdout(&run("build/demo-service", &["--requests", "20000"], &repo)),
        stdout(&run(
            plain.to_str().unwrap(),
            &["--requests", "20000"],
            &repo
        )),
        "the ordered service answers differently"
    );

    // A damaged object in the store stops the build (ON_MISSING fail), naming the hash.
    let object = dir.path().join("store/sha256").join(m2.object.hex());
    std::fs::write(&object, "# hottext profile v1\nfn main 1 1\n").unwrap();
    std::fs::remove_file(repo.join("build/demo-service")).unwrap();
    let broken = cmake_build(&repo);
    assert!(
        !broken.status.success(),
        "the build went on with a corrupt profile"
    );
    assert!(
        log(&broken).contains(&format!("store object {} ", m2.object)),
        "{}",
        log(&broken)
    );
}

#[test]
fn two_runs_at_once_queue_on_the_lock_and_leave_a_linear_history() {
    need("perf", "--version");
    // Each try starts afresh: a run that caught too few samples changed nothing, but its twin
    // may have committed.
    let (dir, repo, a, b) = record_until_enough(1.0, |seconds| {
        let dir = tempfile::tempdir().unwrap();
        let repo = service_repo(dir.path(), "");
        let config = std::fs::read_to_string(repo.join("hottext.toml")).unwrap();
        write(&repo, "try-hottext.toml", &recording_for(&config, seconds));
        let start = || {
            Command::new(env!("CARGO_BIN_EXE_hottext"))
                .args(["pipeline", "run", "--config", "try-hottext.toml", "--json"])
                .current_dir(&repo)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (a, b) = (start(), start());
        let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
        caught_enough(&a)?;
        caught_enough(&b)?;
        Ok((dir, repo, a, b))
    });
    assert!(a.status.success(), "first run: {}", stderr(&a));
    assert!(b.status.success(), "second run: {}", stderr(&b));

    let commits = branch_commits(&repo);
    assert_eq!(commits.len(), 2, "both runs committed");
    let parent = git(&repo, &["rev-parse", &format!("{}^", commits[1])]);
    assert_eq!(parent.trim(), commits[0], "the history is linear");
    for c in &commits {
        assert_eq!(changed(&repo, c), format!("{META}\n"));
    }
    // The later run read the earlier run's profile: it waited for the lock, then merged.
    let first = meta_at(&repo, &commits[0]);
    assert!(
        message(&repo, &commits[1]).contains(&format!("previous  {} merged", first.object)),
        "{}",
        message(&repo, &commits[1])
    );
    let tip = meta_at(&repo, &commits[1]);
    let store = Store::open(dir.path().join("store").to_str().unwrap()).unwrap();
    assert_eq!(store.get(&tip.object).unwrap().len() as u64, tip.size);
    let reports: Vec<serde_json::Value> = [&a, &b]
        .iter()
        .map(|o| serde_json::from_str(&stdout(o)).unwrap())
        .collect();
    let mut committed: Vec<String> = reports
        .iter()
        .map(|r| r["commit"].as_str().unwrap().to_string())
        .collect();
    committed.sort();
    let mut expected = commits.clone();
    expected.sort();
    assert_eq!(committed, expected);
}

#[test]
fn a_failed_gate_changes_nothing_and_a_passing_run_pushes() {
    need("perf", "--version");
    let dir = tempfile::tempdir().unwrap();
    let remote = dir.path().join("remote.git");
    git(
        dir.path(),
        &["init", "-q", "--bare", remote.to_str().unwrap()],
    );
    // Recorded by pid file: the service runs on its own.
    let repo = service_repo(dir.path(), "push = \"origin\"\n");
    git(
        &repo,
        &["remote", "add", "origin", remote.to_str().unwrap()],
    );
    let service = KillOnDrop(
        Command::new(repo.join("svc"))
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid_config = |extra: &str| {
        std::fs::read_to_string(repo.join("hottext.toml"))
            .unwrap()
            .replace("command = [\"./svc\"]", "pid_file = \"svc.pid\"")
            + extra
    };
    write(&repo, "svc.pid", &format!("{}\n", service.0.id()));
    write(&repo, "byfile.toml", &pid_config(""));
    write(
        &repo,
        "strict.toml",
        &pid_config("").replace(
            &format!("min_samples = {ENOUGH_SAMPLES}"),
            "min_samples = 1000000000",
        ),
    );

    let ok = pipeline_until_enough(&repo, "byfile.toml", &[]);
    // With enough samples for any other test, the gate still fails: it wants a billion.
    let strict = pipeline_until_enough(&repo, "strict.toml", &[]);
    drop(service);
    assert!(ok.status.success(), "{}", stderr(&ok));
    let commits = branch_commits(&repo);
    assert_eq!(commits.len(), 1);
    let pushed = git(&remote, &["rev-parse", &format!("refs/heads/{BRANCH}")]);
    assert_eq!(pushed.trim(), commits[0], "the branch was pushed");

    assert_eq!(strict.status.code(), Some(1), "{}", stderr(&strict));
    // The report is the run's result: on stdout.
    assert!(stdout(&strict).contains("FAIL"), "{}", stdout(&strict));
    assert!(
        stdout(&strict).contains("nothing was stored or committed"),
        "{}",
        stdout(&strict)
    );
    assert_eq!(branch_commits(&repo), commits, "a failed gate committed");
    let objects = std::fs::read_dir(dir.path().join("store/sha256"))
        .unwrap()
        .count();
    assert_eq!(objects, 1, "a failed gate stored a profile");
}
