//! `hottext ab` on a service through the real binary: servers started, pinned, measured under
//! their load and stopped, leaving nothing behind, also when the load fails or Ctrl-C comes.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{
    ab, f, free_port, hottext, json, processes_mentioning, row, run, serial, stderr, write,
    KillOnDrop,
};

/// A Python HTTP server on a free loopback port, its readiness probe, and a bounded load that
/// prints its request rate.
struct Service {
    port: u16,
    server: String,
    ready: String,
    load: String,
}

fn service(dir: &Path, requests: u32) -> Service {
    write(dir, "index.html", "hello\n");
    write(
        dir,
        "load.py",
        "import sys, time, urllib.request\n\
         url, n = sys.argv[1], int(sys.argv[2])\n\
         start = time.perf_counter()\n\
         for _ in range(n):\n\
         \x20   urllib.request.urlopen(url, timeout=5).read()\n\
         print(f'rps={n / (time.perf_counter() - start):.1f}')\n",
    );
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/index.html");
    Service {
        port,
        server: format!("exec python3 -m http.server {port} --bind 127.0.0.1"),
        ready: format!(
            "python3 -c \"import urllib.request; urllib.request.urlopen('{url}', timeout=1)\""
        ),
        load: format!("python3 load.py {url} {requests}"),
    }
}

#[test]
fn service_form_starts_measures_and_stops_servers() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let s = service(dir.path(), 60);
    let out = ab(
        dir.path(),
        &[
            "--runs",
            "6",
            "--warmup",
            "0",
            "--server-a",
            &s.server,
            "--server-b",
            &s.server,
            "--ready",
            &s.ready,
            "--load",
            &s.load,
            "--metric",
            "rps=([0-9.]+)",
            "--metric-name",
            "rps",
            "--higher-is-better",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let report = json(&out);
    assert_eq!(report["form"], "service");
    let rps = row(&report, "rps");
    assert_eq!(rps["better"], "higher");
    assert!(f(&rps["comparison"]["median_a"]) > 0.0, "{rps:#}");
    assert_eq!(rps["a"].as_array().unwrap().len(), 6);
    assert_eq!(report["headline"], "rps");
    // The server's own CPU time, from /proc: serving 60 requests takes some.
    let cpu = row(&report, "server-cpu-time");
    assert!(f(&cpu["comparison"]["median_a"]) > 0.0, "{cpu:#}");
    // Whose resolution the report states (clock ticks: 10 ms on Linux's usual USER_HZ).
    let notes = report["notes"].to_string();
    assert!(notes.contains("clock ticks: 10 ms resolution"), "{notes}");
    // The load's duration, counted on the server's CPU.
    assert!(f(&row(&report, "wall-time")["comparison"]["median_b"]) > 0.0);
    let last_cpu = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64 - 1;
    assert!(report["cpu"].as_u64().unwrap() <= last_cpu);
    let marker = format!("http.server {}", s.port);
    assert_eq!(processes_mentioning(&marker), Vec::<String>::new());
}

#[test]
fn a_failing_load_or_a_server_that_never_gets_ready_leaves_no_server() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let s = service(dir.path(), 1);
    let marker = format!("http.server {}", s.port);

    let out = hottext(
        &[
            "ab",
            "--runs",
            "6",
            "--server-a",
            &s.server,
            "--server-b",
            &s.server,
            "--ready",
            &s.ready,
            "--load",
            "echo overloaded >&2; exit 7",
        ],
        dir.path(),
    );
    // A failing load is a failing command: exit status 1, as in `hottext stat`.
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("the load against server A failed in warm-up round 1"),
        "{err}"
    );
    assert!(err.contains("overloaded"), "{err}");
    assert_eq!(processes_mentioning(&marker), Vec::<String>::new());

    let out = hottext(
        &[
            "ab",
            "--runs",
            "6",
            "--server-a",
            &s.server,
            "--server-b",
            &s.server,
            "--ready",
            "false",
            "--ready-timeout",
            "1",
            "--load",
            &s.load,
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("server A was not ready after 1s"),
        "{}",
        stderr(&out)
    );
    assert_eq!(processes_mentioning(&marker), Vec::<String>::new());
}

#[test]
fn ctrl_c_during_the_load_stops_the_server() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let s = service(dir.path(), 1);
    let marker = format!("http.server {}", s.port);
    // A load that waits, named uniquely by the port.
    let load = format!("sleep 37.{}", s.port);
    let mut child = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_hottext"))
            .args([
                "ab",
                "--runs",
                "6",
                "--server-a",
                &s.server,
                "--server-b",
                &s.server,
                "--ready",
                &s.ready,
                "--load",
                &load,
            ])
            .current_dir(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // hottext's own command line mentions both; the server's and the load's lack "--load".
    let running = |marker: &str| {
        processes_mentioning(marker)
            .iter()
            .any(|p| !p.contains("--load"))
    };
    let until = Instant::now() + Duration::from_secs(30);
    while !running(&load) {
        assert!(Instant::now() < until, "the load never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(running(&marker), "the server is not up");
    run("kill", &["-INT", &child.0.id().to_string()], dir.path());
    let until = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < until, "hottext did not stop after SIGINT");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    if let Some(mut pipe) = child.0.stderr.take() {
        std::io::Read::read_to_string(&mut pipe, &mut err).unwrap();
    }
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    assert_eq!(processes_mentioning(&marker), Vec::<String>::new());
    assert_eq!(processes_mentioning(&load), Vec::<String>::new());
}
