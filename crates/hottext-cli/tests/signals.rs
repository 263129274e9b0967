//! Nothing hottext starts outlives it: `record -- CMD`, `stat`, `ab` (commands and servers) and
//! `pipeline run` are sent SIGINT, SIGTERM, SIGHUP and SIGKILL while their commands run, and
//! afterwards no process of those commands is left. The commands are shells with a child in the
//! background, which a death signal to the direct child alone would leave running.

mod common;
mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use common::{require_perf, run, KillOnDrop};
use support::repo_with;

const SIGNALS: [&str; 4] = ["INT", "TERM", "HUP", "KILL"];

/// `kill -s SIGNAL PID`.
fn send(signal: &str, pid: u32) {
    let _ = Command::new("kill")
        .args(["-s", signal, &pid.to_string()])
        .status();
}

/// Unique `sleep` arguments, so that tests running at once tell their processes apart.
fn sleeps(n: usize) -> Vec<String> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let base = std::process::id() % 1000 * 100;
    (0..n)
        .map(|_| format!("{}", 7_000_000 + base + NEXT.fetch_add(1, Ordering::SeqCst)))
        .collect()
}

/// Live (not zombie) processes whose argument vector is exactly `sleep SECONDS`.
fn sleeping(seconds: &str) -> Vec<u32> {
    let want = format!("sleep\0{seconds}\0");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
            })
            .unwrap_or(true);
        if cmdline == want.as_bytes() && !zombie {
            found.push(pid);
        }
    }
    found
}

/// Starts hottext with `args` in `dir`; once every `sleep` of `all` runs, sends it `signal`,
/// waits for it to exit, and fails if any of them is still alive 10 s later. Returns hottext's
/// exit code (None when a signal ended it).
fn outlived_by_nothing(dir: &Path, args: &[&str], all: &[String], signal: &str) -> Option<i32> {
    let mut hottext = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_hottext"))
            .args(args)
            .current_dir(dir)
            .env("TMPDIR", dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let until = Instant::now() + Duration::from_secs(60);
    while !all.iter().all(|s| !sleeping(s).is_empty()) {
        if let Some(status) = hottext.0.try_wait().unwrap() {
            panic!("hottext {args:?} ended ({status}) before its commands ran");
        }
        assert!(
            Instant::now() < until,
            "hottext {args:?} never started {all:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    send(signal, hottext.0.id());
    let until = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = hottext.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < until,
            "hottext {args:?} did not end within 30 s of SIG{}",
            signal
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let left: Vec<&String> = all.iter().filter(|s| !sleeping(s).is_empty()).collect();
        if left.is_empty() {
            break;
        }
        if Instant::now() >= until {
            for s in &left {
                for pid in sleeping(s) {
                    send("KILL", pid);
                }
            }
            panic!(
                "after SIG{} to hottext {args:?}, `sleep` {left:?} still ran 10 s later",
                signal
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    status.code()
}

/// A shell line with one `sleep` in the background and one in the foreground.
fn two_sleeps(s: &[String]) -> String {
    format!("sleep {} & sleep {}; wait", s[0], s[1])
}

#[test]
fn record_leaves_neither_perf_nor_the_command() {
    require_perf();
    for signal in SIGNALS {
        let dir = tempfile::tempdir().unwrap();
        let s = sleeps(2);
        let data = dir.path().join("x.data");
        let line = two_sleeps(&s);
        let code = outlived_by_nothing(
            dir.path(),
            &[
                "record",
                "-o",
                data.to_str().unwrap(),
                "--",
                "sh",
                "-c",
                &line,
            ],
            &s,
            signal,
        );
        // perf may still be writing its file after SIGKILL reached hottext: it gets 10 s.
        let perf_runs = || {
            std::fs::read_dir("/proc")
                .unwrap()
                .flatten()
                .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
                .any(|c| {
                    let path = data.as_os_str().as_encoded_bytes();
                    c.windows(path.len()).any(|w| w == path)
                })
        };
        let until = Instant::now() + Duration::from_secs(10);
        while perf_runs() {
            assert!(
                Instant::now() < until,
                "SIG{signal}: perf record still runs"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        if signal != "KILL" {
            // Stopped early, as at the end of the duration: perf wrote its file.
            assert_eq!(code, Some(0), "SIG{}", signal);
            assert!(std::fs::metadata(&data).is_ok_and(|m| m.len() > 0));
        }
    }
}

#[test]
fn stat_passes_the_signal_on_and_leaves_nothing() {
    require_perf();
    for signal in SIGNALS {
        let dir = tempfile::tempdir().unwrap();
        let s = sleeps(2);
        let line = two_sleeps(&s);
        let code = outlived_by_nothing(dir.path(), &["stat", "--", "sh", "-c", &line], &s, signal);
        if signal != "KILL" {
            assert_eq!(code, Some(2), "SIG{}: an interrupted stat exits 2", signal);
        }
    }
}

#[test]
fn ab_leaves_neither_perf_stat_nor_the_commands() {
    require_perf();
    for signal in SIGNALS {
        let dir = tempfile::tempdir().unwrap();
        let s = sleeps(2);
        let line = two_sleeps(&s);
        let code = outlived_by_nothing(
            dir.path(),
            &["ab", "--runs", "6", "-a", &line, "-b", &line],
            &s,
            signal,
        );
        if signal != "KILL" {
            assert_eq!(code, Some(2), "SIG{}", signal);
        }
    }
}

#[test]
fn ab_leaves_neither_the_server_nor_its_load() {
    require_perf();
    for signal in SIGNALS {
        let dir = tempfile::tempdir().unwrap();
        let s = sleeps(4);
        let (server, load) = (two_sleeps(&s[..2]), two_sleeps(&s[2..]));
        let args = [
            "ab",
            "--runs",
            "6",
            "--server-a",
            &server,
            "--server-b",
            &server,
            "--ready",
            "true",
            "--load",
            &load,
        ];
        let code = outlived_by_nothing(dir.path(), &args, &s, signal);
        if signal != "KILL" {
            assert_eq!(code, Some(2), "SIG{}", signal);
        }
    }
}

#[test]
fn pipeline_run_leaves_no_service_no_load_and_no_perf_data() {
    require_perf();
    for signal in SIGNALS {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        let s = sleeps(4);
        let config = format!(
            "[service]\nname = \"svc\"\nbinary = \"/bin/sleep\"\n\
             command = [\"sh\", \"-c\", \"sleep {} & exec sleep {}\"]\nstartup_seconds = 0.1\n\
             load = [\"sh\", \"-c\", \"{}\"]\n\
             [record]\nseconds = 120\n[store]\nurl = \"../store\"\n[repo]\nmeta = \"m.meta\"\n",
            s[0],
            s[1],
            two_sleeps(&s[2..])
        );
        repo_with(&repo, &[("hottext.toml", &config)]);
        let code = outlived_by_nothing(
            &repo,
            &["pipeline", "run", "--config", "hottext.toml"],
            &s,
            signal,
        );
        let scratch = repo.join(".git/hottext-pipeline-hottext-profile.scratch");
        if signal != "KILL" {
            assert_eq!(code, Some(2), "SIG{}", signal);
            assert!(
                !scratch.exists(),
                "SIG{}: the recording was left in {}",
                signal,
                scratch.display()
            );
            let branches = run("git", &["branch", "--list"], &repo);
            assert!(
                !String::from_utf8_lossy(&branches.stdout).contains("hottext/profile"),
                "SIG{}: an interrupted run committed",
                signal
            );
        }
    }
}
