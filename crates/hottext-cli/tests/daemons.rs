//! Nothing is left behind by commands that daemonize (issue 34): `record -- CMD`, `ab` with
//! servers, and `pipeline run` in command mode start a `setsid` child and a server that double
//! forks, so that both leave the command's process tree and group; once hottext is done, no
//! process of theirs runs, and each round's server finds its port free; nor when hottext is
//! killed.

mod common;
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{ab, free_port, gcc, hottext, processes_mentioning, require_perf, stderr, KillOnDrop};
use support::repo_with;

/// Daemonizes as servers do: forks, starts a session, forks again; the first process exits
/// once the last has bound `127.0.0.1:PORT` (no port when PORT is 0), with status 1 when that
/// failed. The daemon appends `bound` or `bind failed` to LOG and then waits to be killed.
const DAEMON: &str = r#"
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static int bind_port(int port) {
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    return s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0 && listen(s, 16) == 0;
}

int main(int argc, char **argv) {
    int ready[2];
    char bound = 0;
    if (argc != 3 || pipe(ready) != 0) return 2;
    if (fork() != 0) {
        close(ready[1]);
        return read(ready[0], &bound, 1) == 1 && bound ? 0 : 1;
    }
    setsid();
    if (fork() != 0) return 0;
    /* As daemons do: no hold on the caller's terminal or pipes. */
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0), dup2(null, 1), dup2(null, 2);
    bound = atoi(argv[1]) == 0 || bind_port(atoi(argv[1]));
    FILE *log = fopen(argv[2], "a");
    if (log) fprintf(log, bound ? "bound\n" : "bind failed\n");
    if (log) fclose(log);
    if (write(ready[1], &bound, 1) != 1 || !bound) return 1;
    for (;;) pause();
}
"#;

/// The daemon, built in `dir`, and the path of its log there.
fn daemon(dir: &Path) -> (PathBuf, PathBuf) {
    (gcc(dir, "daemon", DAEMON, &[]), dir.join("daemon.log"))
}

/// A shell line that starts a `setsid` child whose command line names `dir`; it outlives the
/// shell, in a session of its own, and holds none of its pipes (else hottext's output would
/// stay open, and a test waiting for it would hang instead of failing).
fn setsid_child(dir: &Path) -> String {
    format!(
        "setsid sh -c 'sleep 100000; : {}' </dev/null >/dev/null 2>&1 &",
        dir.display()
    )
}

/// Fails when a process whose command line names `dir` still runs (and kills it, so that a
/// failure leaves nothing either).
fn assert_nothing_left(dir: &Path, after: &str) {
    let left = processes_mentioning(&dir.display().to_string());
    for pid in left.iter().filter_map(|p| p.split_once(':')) {
        let _ = std::process::Command::new("kill").arg(pid.0).status();
    }
    assert!(left.is_empty(), "after {after}, still running: {left:#?}");
}

#[test]
fn record_of_a_command_that_daemonizes_leaves_nothing() {
    require_perf();
    let dir = tempfile::tempdir().unwrap();
    let (daemon, log) = daemon(dir.path());
    let line = format!(
        "{} {} 0 {}",
        setsid_child(dir.path()),
        daemon.display(),
        log.display()
    );
    let data = dir.path().join("x.data");
    let out = hottext(
        &[
            "record",
            "-o",
            data.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &line,
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "bound\n");
    assert_nothing_left(dir.path(), "record");
}

#[test]
fn a_daemon_is_stopped_also_when_hottext_is_killed() {
    require_perf();
    let dir = tempfile::tempdir().unwrap();
    let (daemon, log) = daemon(dir.path());
    let line = format!(
        "{} 0 {} && exec sleep 100000",
        daemon.display(),
        log.display()
    );
    let mut record = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_hottext"))
            .args(["record", "-o", "x.data", "--", "sh", "-c", &line])
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let until = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&log).is_ok_and(|l| l == "bound\n") {
        assert!(Instant::now() < until, "the daemon never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    record.0.kill().unwrap();
    record.0.wait().unwrap();
    // The watchdog finds the daemon by its mark, now that init has it; it gets 10 s.
    let until = Instant::now() + Duration::from_secs(10);
    while !processes_mentioning(&dir.path().display().to_string()).is_empty()
        && Instant::now() < until
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_nothing_left(dir.path(), "SIGKILL to record");
}

#[test]
fn ab_stops_each_rounds_daemonized_server_so_the_next_finds_its_port_free() {
    require_perf();
    let dir = tempfile::tempdir().unwrap();
    let (daemon, log) = daemon(dir.path());
    let port = free_port();
    // The server's shell stays as the leader; the daemon holding the port is outside its tree
    // and group. A daemon left from the round before makes the next one fail to bind, and the
    // shell exit 1: ab then fails with "server exited".
    let server = format!(
        "{} {} {port} {} && exec sleep 100000",
        setsid_child(dir.path()),
        daemon.display(),
        log.display()
    );
    let out = ab(
        dir.path(),
        &[
            "--runs",
            "6",
            "--warmup",
            "0",
            "--server-a",
            &server,
            "--server-b",
            &server,
            "--ready",
            "true",
            "--load",
            "true",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(!log.contains("bind failed"), "{log}");
    assert!(log.lines().count() >= 12, "one bind a server start:\n{log}");
    assert_nothing_left(dir.path(), "ab");
    assert!(
        std::net::TcpListener::bind(("127.0.0.1", port)).is_ok(),
        "port {port} is still held"
    );
}

#[test]
fn pipeline_run_in_command_mode_leaves_no_daemon() {
    require_perf();
    let dir = tempfile::tempdir().unwrap();
    let (daemon, log) = daemon(dir.path());
    let repo = dir.path().join("repo");
    let config = format!(
        "[service]\nname = \"svc\"\nbinary = \"/bin/sleep\"\n\
         command = [\"sh\", \"-c\", \"{} 0 {} && exec sleep 100000\"]\nstartup_seconds = 0.1\n\
         load = [\"sh\", \"-c\", \"{} sleep 1\"]\n\
         [record]\nseconds = 1\n[store]\nurl = \"../store\"\n[repo]\nmeta = \"m.meta\"\n",
        daemon.display(),
        log.display(),
        setsid_child(dir.path()),
    );
    repo_with(&repo, &[("hottext.toml", &config)]);
    // Whether the run finds samples of /bin/sleep does not matter here: only what it leaves.
    let out = hottext(&["pipeline", "run", "--config", "hottext.toml"], &repo);
    assert!(out.status.code().is_some(), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "bound\n");
    assert_nothing_left(dir.path(), "pipeline run");
}
