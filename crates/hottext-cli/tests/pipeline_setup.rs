//! Setting the pipeline up: the weekly units and cron line it installs, the configs it refuses,
//! and a config whose load command runs while the service is recorded.

mod common;
mod support;

use std::path::{Path, PathBuf};

use common::{hottext, perf_records_every_branch, record_until_enough, stderr, stdout, write};
use support::need;
use support::pipeline::{branch_commits, caught_enough, pipeline_run, recording_for, service_repo};

#[test]
fn install_weekly_writes_the_units_and_prints_the_cron_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "hottext.toml",
        "[service]\nname = \"web\"\npid = 1\n[store]\nurl = \"store\"\n[repo]\nmeta = \"web.meta\"\n",
    );
    let out = hottext(
        &[
            "pipeline",
            "install",
            "--weekly",
            "--config",
            "hottext.toml",
            "--unit-dir",
            "units",
        ],
        d,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let config = std::fs::canonicalize(d.join("hottext.toml")).unwrap();
    let service = std::fs::read_to_string(d.join("units/hottext-pipeline-web.service")).unwrap();
    let exec = format!(
        "ExecStart={} pipeline run --config {}\n",
        env!("CARGO_BIN_EXE_hottext"),
        config.display()
    );
    assert!(service.contains(&exec), "{service}");
    let timer = std::fs::read_to_string(d.join("units/hottext-pipeline-web.timer")).unwrap();
    assert!(timer.contains("OnCalendar=weekly"), "{timer}");
    assert_eq!(
        stdout(&out).trim(),
        format!(
            "0 3 * * 1 {} pipeline run --config {}",
            env!("CARGO_BIN_EXE_hottext"),
            config.display()
        )
    );
}

#[test]
fn install_refuses_a_service_name_that_systemd_rejects() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "hottext.toml",
        "[service]\nname = \"x%n%i%%\"\npid = 1\n[store]\nurl = \"store\"\n[repo]\nmeta = \"m.meta\"\n",
    );
    let out = hottext(
        &[
            "pipeline",
            "install",
            "--weekly",
            "--config",
            "hottext.toml",
        ]
        .into_iter()
        .chain(["--unit-dir", "units", "--no-enable"])
        .collect::<Vec<_>>(),
        d,
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("[service] name \"x%n%i%%\" holds '%'"),
        "{}",
        stderr(&out)
    );
    assert!(!d.join("units").exists(), "units were written");
}

/// Writes `d/hottext.toml` for a service the pipeline starts, with these `[record]` lines; the
/// returned file exists once the service has been started.
fn config_of_a_started_service(d: &Path, record: &str) -> PathBuf {
    let started = d.join("started");
    write(
        d,
        "hottext.toml",
        &format!(
            "[service]\nname = \"svc\"\nbinary = \"/bin/sleep\"\n\
             command = [\"sh\", \"-c\", \"touch {} && exec sleep 100\"]\n\
             [record]\nseconds = 1\n{record}\n[store]\nurl = \"store\"\n[repo]\nmeta = \"m.meta\"\n",
            started.display()
        ),
    );
    started
}

#[test]
fn a_zero_frequency_is_refused_before_the_service_starts() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let started = config_of_a_started_service(d, "frequency = 0");
    let out = hottext(&["pipeline", "run", "--config", "hottext.toml"], d);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("[record] frequency 0 samples a second records nothing"),
        "{}",
        stderr(&out)
    );
    assert!(!started.exists(), "the service was started");
}

#[test]
fn every_branch_where_the_pmu_cannot_record_it_is_refused_before_the_service_starts() {
    need("perf", "--version");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let started = config_of_a_started_service(d, "sampling = \"every-branch\"");
    // The pipeline checks its repository before it records.
    let git = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(d)
        .status();
    assert!(git.is_ok_and(|s| s.success()), "git init failed");
    let out = hottext(&["pipeline", "run", "--config", "hottext.toml"], d);
    if perf_records_every_branch() {
        // A machine with the PMU gets past the check: the service is started and recorded.
        assert!(started.exists(), "{}", stderr(&out));
        return;
    }
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no branch records of every branch"),
        "{}",
        stderr(&out)
    );
    assert!(!started.exists(), "the service was started");
}

#[test]
fn a_config_with_two_targets_is_an_input_error() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "bad.toml",
        "[service]\nname = \"x\"\npid = 1\nsystemd_unit = \"x.service\"\n[store]\nurl = \"s\"\n[repo]\nmeta = \"m\"\n",
    );
    let out = hottext(&["pipeline", "run", "--config", "bad.toml"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("exactly one of pid, pid_file, systemd_unit or command"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_load_command_runs_while_recording_and_its_end_ends_the_recording() {
    need("perf", "--version");
    let dir = tempfile::tempdir().unwrap();
    let repo = service_repo(dir.path(), "");
    let config = std::fs::read_to_string(repo.join("hottext.toml")).unwrap();
    // A 60 s recording, cut short when the load (a sleep here) exits; a longer sleep when the
    // recording caught too few samples.
    let (load, out) = record_until_enough(1.0, |load| {
        let config = recording_for(&config, 60.0).replace(
            "command = [\"./svc\"]",
            &format!("command = [\"./svc\"]\nload = [\"sleep\", \"{load}\"]"),
        );
        write(&repo, "try-load.toml", &config);
        let out = pipeline_run(&repo, "try-load.toml", &["--json"]);
        caught_enough(&out).map(|()| (load, out))
    });
    assert!(out.status.success(), "{}", stderr(&out));
    // Without a terminal, the progress is one line a stage (what a cron or systemd log shows).
    for stage in [
        "recording for 60 s",
        "reading perf.data",
        "committing the profile",
    ] {
        assert!(
            stderr(&out).contains(stage),
            "no '{stage}' in {}",
            stderr(&out)
        );
    }
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let seconds = report["seconds"].as_f64().unwrap();
    // Perf starts just after the load and stops within moments of its end, long before 60 s.
    assert!(
        seconds > load / 2.0 && seconds < load + 10.0,
        "recorded {seconds} s with a load of {load} s"
    );
    assert_eq!(branch_commits(&repo).len(), 1);
}
