//! `hottext doctor` on this machine: its JSON reports the kernel's real THP mode and the free
//! blocks of /proc/buddyinfo, and the binary and service checks find what is there.

mod common;

use common::{hottext, json, run, stdout};

/// The selected word of a THP settings file: `always [madvise] never` → `madvise`.
fn selected(path: &str) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let start = text.find('[').unwrap() + 1;
    text[start..start + text[start..].find(']').unwrap()].to_string()
}

#[test]
fn doctor_reports_the_real_thp_mode_and_buddyinfo() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    common::write(d, "p.c", "int main(void) { return 0; }\n");
    run(
        "gcc",
        &["-O1", "-fno-omit-frame-pointer", "p.c", "-o", "p"],
        d,
    );
    let out = hottext(&["doctor", "--binary", "p", "--json"], d);
    let doc = json(&out);
    // Exit 1 exactly when a check fails (THP `never` here would be one), else 0.
    let failed = doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["status"] == "fail");
    assert_eq!(
        out.status.code(),
        Some(i32::from(failed)),
        "{}",
        stdout(&out)
    );
    let thp = "/sys/kernel/mm/transparent_hugepage";
    assert_eq!(
        doc["memory"]["thp"]["enabled"],
        selected(&format!("{thp}/enabled"))
    );
    assert_eq!(
        doc["memory"]["thp"]["defrag"],
        selected(&format!("{thp}/defrag"))
    );
    // The zones are /proc/buddyinfo's, and the 2 MiB figure is their blocks of order 9 and up.
    let buddyinfo = std::fs::read_to_string("/proc/buddyinfo").unwrap();
    let zones = doc["memory"]["zones"].as_array().unwrap();
    assert_eq!(zones.len(), buddyinfo.lines().count());
    for (zone, line) in zones.iter().zip(buddyinfo.lines()) {
        assert!(
            line.contains(zone["zone"].as_str().unwrap()),
            "{zone} vs {line}"
        );
        assert_eq!(
            zone["free"].as_array().unwrap().len(),
            line.split_whitespace().count() - 4
        );
    }
    let blocks: u64 = zones
        .iter()
        .flat_map(|z| {
            let free: Vec<u64> = z["free"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect();
            free.into_iter()
                .enumerate()
                .skip(9)
                .map(|(order, n)| n << (order - 9))
        })
        .sum();
    assert_eq!(doc["memory"]["free_2m_blocks"], blocks);
    let check = |name: &str| {
        doc["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no check {name}: {doc}"))
            .clone()
    };
    assert_eq!(
        check("THP enabled")["value"],
        selected(&format!("{thp}/enabled"))
    );
    assert_eq!(check("build-id")["status"], "pass");
    // No markers in a plain program: the check says so and names the remedy.
    let markers = check("hot-text markers");
    assert_eq!(markers["status"], "warn");
    assert!(markers["remedy"]
        .as_str()
        .unwrap()
        .contains("hottext order"));
}

#[test]
fn doctor_checks_a_running_service() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A copy of sleep in the test's folder: the file-text check must try its scratch file
    // beside the file /proc/PID/exe points to (issue 33: it tried /proc/PID and gave up).
    let sleep = d.join("sleep");
    common::copy_program(std::path::Path::new("/usr/bin/sleep"), &sleep);
    let mut sleeper = common::KillOnDrop(
        std::process::Command::new(&sleep)
            .arg("30")
            .spawn()
            .unwrap(),
    );
    let pid = sleeper.0.id().to_string();
    let out = hottext(&["doctor", "--pid", &pid, "--interval", "0.2"], d);
    let _ = sleeper.0.kill();
    let text = stdout(&out);
    for line in [
        "THP for the process",
        "context switches",
        "allocator",
        "CPU affinity",
    ] {
        assert!(text.contains(line), "no {line} line:\n{text}");
    }
    assert!(text.contains("glibc malloc"), "{text}");
    assert!(
        text.contains("write-execute policy") && text.contains("no seccomp filter"),
        "{text}"
    );
    let file_text = text
        .lines()
        .find(|l| l.contains("file text on 2 MiB pages"))
        .unwrap_or_else(|| panic!("no file-text check:\n{text}"));
    assert!(
        !file_text.contains("not tried") && file_text.contains(&d.display().to_string()),
        "the scratch file was not tried beside the executable: {file_text}"
    );
}

/// A process under a seccomp filter (as systemd's MemoryDenyWriteExecute= installs one): the
/// doctor says the runtime may be limited to file-backed huge pages.
#[test]
fn doctor_sees_a_seccomp_filter() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let program = common::gcc(
        d,
        "filtered",
        r#"#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>
int main(void) {
    struct sock_filter allow[] = { BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW) };
    struct sock_fprog prog = { 1, allow };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
        return perror("seccomp"), 1;
    puts("filtered");
    fflush(stdout);
    sleep(30);
    return 0;
}
"#,
        &["-O1"],
    );
    let mut filtered = common::KillOnDrop(
        std::process::Command::new(&program)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Wait until the filter is in place.
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(filtered.0.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line, "filtered\n");
    let pid = filtered.0.id().to_string();
    let out = hottext(
        &[
            "doctor",
            "--pid",
            &pid,
            "--record",
            "0",
            "--interval",
            "0.1",
            "--json",
        ],
        d,
    );
    let doc = json(&out);
    let check = doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "write-execute policy")
        .unwrap_or_else(|| panic!("no write-execute check: {doc}"))
        .clone();
    assert_eq!(check["status"], "info", "{check}");
    assert!(
        check["value"]
            .as_str()
            .unwrap()
            .starts_with("seccomp mode 2, 1 filter"),
        "{check}"
    );
}

/// The front end of a busy demo service: with a PMU, its counters; without one, a short
/// profile of the process and the layout model's estimate of what hot text would change.
#[test]
fn doctor_estimates_the_front_end_of_a_busy_service() {
    common::require_perf();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let demo = common::demo(d);
    let mut service = common::KillOnDrop(
        std::process::Command::new(&demo)
            .args(["--requests", "1000000000"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = service.0.id().to_string();
    let out = hottext(
        &[
            "doctor",
            "--pid",
            &pid,
            "--record",
            "2",
            "--interval",
            "0.5",
            "--json",
        ],
        d,
    );
    let _ = service.0.kill();
    let doc = json(&out);
    let check = |name: &str| {
        doc["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no check {name}: {doc}"))
            .clone()
    };
    // The demo spreads its hot code over 4 MiB: hot text on 2 MiB pages needs far fewer
    // iTLB entries, and the check says so with the remedy.
    let (now, then) = (&doc["estimate"]["now"], &doc["estimate"]["then"]);
    let entries_now = now["pages_4k_99"].as_u64().unwrap();
    let entries_then = then["pages_2m_99"].as_u64().unwrap();
    assert!(entries_now > 64, "{doc}");
    assert!(entries_then * 2 <= entries_now, "{doc}");
    assert!(
        then["calls_within_4k"].as_f64().unwrap() > now["calls_within_4k"].as_f64().unwrap(),
        "{doc}"
    );
    let estimate = check("estimate with hot text");
    assert_eq!(estimate["status"], "warn", "{estimate}");
    assert!(estimate["value"]
        .as_str()
        .unwrap()
        .contains(&format!("{entries_now} now")));
    if doc["hardware_pmu"] == true {
        let counted = check("iTLB and L1i misses");
        assert!(
            counted["value"]
                .as_str()
                .unwrap()
                .contains("per million instructions"),
            "{counted}"
        );
        check("top-down level 1");
    } else {
        assert!(check("hardware counters")["value"]
            .as_str()
            .unwrap()
            .starts_with("none"));
    }
}
