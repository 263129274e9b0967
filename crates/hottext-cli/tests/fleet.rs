//! A service on many hosts, on the real S3-compatible server: three "hosts" (the service run
//! three times: one under another mix of requests, one another build) record and upload at once
//! with
//! `pipeline run --upload-only`, a fourth uploads a profile of another program, and the merge
//! job (`pipeline run --merge-uploads`) merges what fits the binary, weighted by age, and
//! commits it.

mod common;
mod support;

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::SystemTime;

use common::{run, stderr, stdout};
use hottext::graph::Graph;
use hottext::store::meta::parse_time;
use support::pipeline::BRANCH;
use support::{build_service, git, hottext_env, need, repo_with, S3Proxy, S3_BUCKET};

/// Another program: none of the service's functions.
const OTHER_C: &str = r#"
#include <signal.h>
static volatile sig_atomic_t stop;
static void on_term(int s) { (void)s; stop = 1; }
__attribute__((noinline)) unsigned long spin(unsigned long x, int n) {
    for (int i = 0; i < n; i++) x = x * 2862933555777941757UL + 3037000493UL; return x; }
__attribute__((noinline)) unsigned long twirl(unsigned long x) { return spin(x, 300) ^ spin(x + 1, 200); }
int main(void) { signal(SIGTERM, on_term); unsigned long s = 0;
    for (unsigned long i = 0; !stop; i++) s += twirl(i); return (int)(s & 1); }
"#;

/// Half a day's weight in a few seconds: the uploads' ages make their weights differ.
const HALF_LIFE_DAYS: f64 = 0.0001;

/// A host's config: `stride` sets the service's mix of requests (its load).
fn config(store: &str, host: &str, binary: &str, seconds: f64, stride: u32) -> String {
    format!(
        "[service]\nname = \"svc\"\nhost = \"{host}\"\nbinary = \"{binary}\"\n\
         command = [\"./{binary}\", \"0\", \"{stride}\"]\n\
         startup_seconds = 0.2\nversion = \"1.0\"\n[record]\nseconds = {seconds}\n\
         [store]\nurl = \"{store}\"\n[repo]\nmeta = \"hottext/svc.meta\"\n\
         [fleet]\nhalf_life_days = {HALF_LIFE_DAYS}\nwindow_days = 1\n[gate]\nmin_samples = 50\n"
    )
}

/// The object `hash` (`sha256:…`) as s3proxy's filesystem backend keeps it.
fn object(proxy: &S3Proxy, hash: &str) -> Graph {
    let hex = hash.strip_prefix("sha256:").expect("a sha256 name");
    let path = proxy.basedir.join(S3_BUCKET).join("fleet/sha256").join(hex);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Graph::read(bytes.as_slice()).unwrap()
}

fn samples(g: &Graph) -> HashMap<String, u64> {
    g.funcs()
        .iter()
        .map(|f| (f.name.clone(), f.samples))
        .collect()
}

#[test]
fn three_hosts_upload_at_once_and_the_merge_job_sums_what_fits_by_age() {
    need("perf", "--version");
    need("git", "--version");
    let proxy = S3Proxy::start();
    let store = proxy.url("fleet");
    let dir = tempfile::tempdir().unwrap();
    let hosts = dir.path().join("hosts");
    std::fs::create_dir_all(&hosts).unwrap();
    build_service(&hosts, "svc", &[]);
    build_service(&hosts, "svc2", &["-DEXTRA"]);
    std::fs::write(hosts.join("other.c"), OTHER_C).unwrap();
    run(
        "gcc",
        &[
            "-O1",
            "-fno-omit-frame-pointer",
            "-fno-inline",
            "other.c",
            "-o",
            "other",
        ],
        &hosts,
    );
    // b serves another mix of requests (only even ones), c runs another build.
    for (host, binary, seconds, stride) in [
        ("a", "svc", 1.0, 1),
        ("b", "svc", 2.0, 2),
        ("c", "svc2", 1.5, 1),
        ("d", "other", 1.0, 1),
    ] {
        std::fs::write(
            hosts.join(format!("{host}.toml")),
            config(&store, host, binary, seconds, stride),
        )
        .unwrap();
    }

    // Three hosts at once; then the one with another program.
    let upload = |host: &str| {
        Command::new(env!("CARGO_BIN_EXE_hottext"))
            .args(["pipeline", "run", "--upload-only", "--json", "--config"])
            .arg(format!("{host}.toml"))
            .current_dir(&hosts)
            .envs(proxy.env())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let running: Vec<_> = ["a", "b", "c"].into_iter().map(upload).collect();
    let mut outs: Vec<_> = running
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    outs.push(upload("d").wait_with_output().unwrap());
    for out in &outs {
        assert!(out.status.success(), "{}{}", stdout(out), stderr(out));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            report["entry"]
                .as_str()
                .is_some_and(|e| e.starts_with("uploads/svc/")),
            "{report}"
        );
    }

    // The merge job, in the service's repository.
    let repo = dir.path().join("repo");
    let merge_config = config(
        &store,
        "merger",
        &hosts.join("svc").display().to_string(),
        1.0,
        1,
    );
    repo_with(&repo, &[("hottext.toml", &merge_config)]);
    let out = hottext_env(
        &[
            "pipeline",
            "run",
            "--merge-uploads",
            "--json",
            "--config",
            "hottext.toml",
        ],
        &repo,
        &proxy.env(),
    );
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let uploads = report["uploads"].as_array().expect("the uploads merged");
    // Nothing lost in the race: every host's upload is there.
    let mut hosts_seen: Vec<&str> = uploads
        .iter()
        .map(|u| u["host"].as_str().unwrap())
        .collect();
    hosts_seen.sort();
    assert_eq!(hosts_seen, ["a", "b", "c", "d"], "{report}");
    let by_host = |h: &str| uploads.iter().find(|u| u["host"] == h).unwrap();
    for h in ["a", "b", "c"] {
        let u = by_host(h);
        assert_eq!(u["merged"], true, "{u}");
        // c ran another build (an added function moves the code): rematched, by name and code.
        assert!(u["matched_fraction"].as_f64().unwrap() > 0.95, "{u}");
    }
    let d = by_host("d");
    assert_eq!(
        d["merged"], false,
        "another program's upload was merged: {d}"
    );
    assert!(d["note"].as_str().unwrap().contains("min_matched"), "{d}");

    // Weights follow the ages: w_i / w_j = 0.5^((end_j - end_i) / half-life).
    let end = |u: &serde_json::Value| parse_time(u["window_end"].as_str().unwrap()).unwrap();
    let weight = |u: &serde_json::Value| u["weight"].as_f64().unwrap();
    let (a, b) = (by_host("a"), by_host("b"));
    let gap = |x: SystemTime, y: SystemTime| match y.duration_since(x) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    };
    let expected = 0.5f64.powf(gap(end(a), end(b)) / (HALF_LIFE_DAYS * 86400.0));
    assert!((weight(a) / weight(b) - expected).abs() < 1e-9, "{a} {b}");

    // The committed profile is the weighted sum of the three hosts' profiles.
    let mut want: HashMap<String, u64> = HashMap::new();
    for h in ["a", "b", "c"] {
        let u = by_host(h);
        let w = weight(u);
        for (name, s) in samples(&object(&proxy, u["object"].as_str().unwrap())) {
            *want.entry(name).or_default() += (s as f64 * w).round() as u64;
        }
    }
    want.retain(|_, s| *s > 0);
    let merged = object(&proxy, report["object"].as_str().expect("stored"));
    let mut got = samples(&merged);
    got.retain(|_, s| *s > 0);
    assert_eq!(got, want);
    assert!(want.contains_key("handler_a"), "{want:?}");
    let total: u64 = ["a", "b", "c"]
        .iter()
        .map(|h| by_host(h)["samples"].as_u64().unwrap())
        .sum();
    assert_eq!(report["samples"], total);

    // Committed like a single host's run, and the message names each host.
    let message = git(&repo, &["log", "-1", "--format=%B", BRANCH]);
    assert!(
        message.contains("fleet: 3 of 4 uploads merged"),
        "{message}"
    );
    assert!(message.contains("refused"), "{message}");
    // Issue 33: the window says how long the merged uploads recorded, not "(0 s)".
    let recorded: f64 = message
        .lines()
        .find(|l| l.starts_with("window "))
        .and_then(|l| l.split_once(" ("))
        .and_then(|(_, s)| s.strip_suffix(" s recorded)"))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no window line with its seconds: {message}"));
    assert!(recorded >= 1.0, "{message}");
    let meta = git(&repo, &["show", &format!("{BRANCH}:hottext/svc.meta")]);
    assert!(meta.contains(report["object"].as_str().unwrap()), "{meta}");
}

#[test]
fn merge_by_hand_scales_each_profile_and_refuses_what_it_cannot_weigh() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let new = "# hottext profile v2\n# samples: 110\n# window-end: 2026-01-08T00:00:00Z\nfn main 16 100\nfn f 8 10\ncall main f 10\n";
    let old = "# hottext profile v2\n# samples: 80\n# window-end: 2026-01-01T00:00:00Z\nfn main 16 40\nfn g 8 40\ncall main g 40\n";
    std::fs::write(d.join("new.profile"), new).unwrap();
    std::fs::write(d.join("old.profile"), old).unwrap();
    let merge = |extra: &[&str]| {
        let mut args = vec!["merge", "new.profile", "old.profile", "-o", "m.profile"];
        args.extend_from_slice(extra);
        common::hottext(&args, d)
    };
    // A week apart with a half-life of a week: the old one counts half.
    for extra in [
        &["--weight", "1", "--weight", "0.5"][..],
        &["--half-life-days", "7"],
    ] {
        let out = merge(extra);
        assert!(out.status.success(), "{}", stderr(&out));
        let merged = std::fs::read_to_string(d.join("m.profile")).unwrap();
        let g = Graph::read(merged.as_bytes()).unwrap();
        let s = samples(&g);
        assert_eq!(
            (s["main"], s["f"], s["g"]),
            (120, 10, 20),
            "{extra:?}: {merged}"
        );
        assert_eq!(g.header("window-end"), Some("2026-01-08T00:00:00Z"));
        // Issue 33: the header counts what the body does, 110 + 0.5 × 80.
        assert_eq!(g.header("samples"), Some("150"), "{extra:?}: {merged}");
    }
    for (extra, says) in [
        (&["--weight", "1"][..], "one per profile"),
        (
            &["--weight", "1", "--weight=-1"],
            "a number from 0 to 1000000",
        ),
        (&["--half-life-days", "0"], "above 0"),
    ] {
        let out = merge(extra);
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        assert!(stderr(&out).contains(says), "{extra:?}: {}", stderr(&out));
    }
    std::fs::write(
        d.join("old.profile"),
        "# hottext profile v2\nfn main 16 40\n",
    )
    .unwrap();
    let out = merge(&["--half-life-days", "7"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("old.profile has no window-end"),
        "{}",
        stderr(&out)
    );
}
