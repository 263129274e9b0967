//! `ab --simulate` on a real server, Debian's nginx in its default shape (a master and a
//! worker that switches to `nobody` when started by root), under a request-count load: every
//! process's counts are collected, two simulations run side by side (one port per `{slot}`),
//! and ten comparisons in a row give the same verdicts (issue 33).

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::{free_port, hottext, json, require, row, stderr, write};
use serde_json::Value;

const REQUESTS: &str = "400";

/// `nginx-0.conf` and `nginx-1.conf`, each listening on its own port (in `port-N`), serving
/// `index.html` from `dir`.
fn configure(dir: &Path) {
    // The worker runs as nobody when we are root: it must read the files.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    write(dir, "index.html", "hello from hottext's test\n");
    let root = dir.display();
    for slot in 0..2 {
        let port = free_port();
        write(dir, &format!("port-{slot}"), &port.to_string());
        let conf = format!(
            "worker_processes 1;\nerror_log {root}/error-{slot}.log;\npid {root}/nginx-{slot}.pid;\n\
             events {{ worker_connections 64; }}\n\
             http {{\n  access_log off;\n  client_body_temp_path {root}/tmp-{slot};\n\
             proxy_temp_path {root}/tmp-{slot};\n  fastcgi_temp_path {root}/tmp-{slot};\n\
             uwsgi_temp_path {root}/tmp-{slot};\n  scgi_temp_path {root}/tmp-{slot};\n\
             server {{ listen 127.0.0.1:{port}; root {root}; }}\n}}\n"
        );
        write(dir, &format!("nginx-{slot}.conf"), &conf);
    }
}

fn simulate(dir: &Path) -> Value {
    let server = format!(
        "exec nginx -p {0} -c {0}/nginx-{{slot}}.conf -g 'daemon off;'",
        dir.display()
    );
    let url = "http://127.0.0.1:$(cat port-{slot})/index.html";
    let o = hottext(
        &[
            "ab",
            "--simulate",
            "--json",
            "--jobs",
            "2",
            "--server-a",
            &server,
            "--server-b",
            &server,
            "--ready",
            &format!("curl -sf {url} >/dev/null"),
            "--ready-timeout",
            "300",
            "--stop-timeout",
            "120",
            "--load",
            &format!("ab -n {REQUESTS} -c 1 {url}"),
            "--metric",
            "Complete requests: *([0-9]+)",
            "--metric-name",
            "request",
            "--expect-same",
            "Document Length: *([0-9]+ bytes)",
        ],
        dir,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    json(&o)
}

#[test]
fn ten_simulations_of_nginx_in_a_row_give_the_same_verdicts() {
    for (tool, args) in [
        ("valgrind", &["--version"][..]),
        ("nginx", &["-v"]),
        ("ab", &["-V"]),
        ("curl", &["--version"]),
    ] {
        require(tool, args);
    }
    let dir = tempfile::tempdir().unwrap();
    configure(dir.path());
    let mut first: Option<Vec<(String, String)>> = None;
    for attempt in 0..10 {
        let report = simulate(dir.path());
        // Every process wrote its counts: the master and its worker, in every run.
        for record in report["records"].as_array().unwrap() {
            for model in record["simulated"]["models"].as_array().unwrap() {
                assert_eq!(model["processes"], 2, "run {attempt}: {model}");
                assert_eq!(model["work"], 400.0, "run {attempt}: {model}");
            }
        }
        assert_eq!(report["same_outputs"]["26 bytes"], 6, "run {attempt}");
        // The same binary on both sides: the same work per request.
        let per_request = row(&report, "instructions-per-request");
        assert_eq!(
            per_request["verdict"], "no-significant-difference",
            "run {attempt}: {per_request}"
        );
        let verdicts: Vec<(String, String)> = report["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["key"].to_string(), r["verdict"].to_string()))
            .collect();
        match &first {
            None => first = Some(verdicts),
            Some(first) => assert_eq!(first, &verdicts, "run {attempt} differs from run 0"),
        }
    }
}
