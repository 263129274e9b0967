//! `hottext tune` on the demo service: two knobs, a verdict for each setting tried, the THP
//! setting as it was afterwards; and a run killed with SIGKILL whose THP change the next start
//! puts back; a second run with another state directory refused while the first changes THP,
//! and signals other than SIGTERM putting it back too.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{hottext, json, serial, stderr, stdout, KillOnDrop};

const THP: &str = "/sys/kernel/mm/transparent_hugepage/enabled";
fn thp() -> String {
    let text = std::fs::read_to_string(THP)
        .expect("this test needs THP (/sys/kernel/mm/transparent_hugepage)");
    let start = text.find('[').unwrap() + 1;
    text[start..start + text[start..].find(']').unwrap()].to_string()
}

// Tests that change the machine's THP setting take turns (`serial`).
#[test]
fn tune_judges_each_setting_puts_thp_back_and_recovers_after_a_crash() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let demo = common::demo(d);
    let state = d.join("state");
    let state = state.to_str().unwrap();
    let before = thp();
    let command = format!("{demo} --requests 20000");
    let out = hottext(
        &[
            "tune",
            "--command",
            &command,
            "--metric",
            "([0-9]+) requests/s",
            "--metric-name",
            "requests/s",
            "--knobs",
            "thp,malloc",
            "--max-runs",
            "6",
            "--state-dir",
            state,
            "--json",
        ],
        d,
    );
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let report = json(&out);
    let trials = report["trials"].as_array().unwrap();
    // thp: the two other modes; malloc: glibc's huge-page tunable at least.
    let of = |knob: &str| trials.iter().filter(|t| t["knob"] == knob).count();
    assert_eq!(of("thp"), 2, "{report}");
    assert!(of("malloc") >= 1, "{report}");
    for t in trials {
        assert!(t["verdict"].as_str().is_some_and(|v| !v.is_empty()), "{t}");
        assert!(t["runs"].as_u64().unwrap() >= 6, "{t}");
    }
    assert_eq!(report["metric"], "requests/s");
    assert_eq!(thp(), before, "tune left THP changed");
    assert!(!Path::new(state).join("tune-restore").exists());

    // Killed while B's setting is in force: the next start puts it back.
    let mut tune = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_hottext"))
            .args([
                "tune",
                "--command",
                &command,
                "--knobs",
                "thp",
                "--max-runs",
                "24",
            ])
            .args(["--state-dir", state])
            .current_dir(d)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let until = Instant::now() + Duration::from_secs(120);
    while thp() == before {
        assert!(Instant::now() < until, "tune never changed THP");
        assert!(
            tune.0.try_wait().unwrap().is_none(),
            "tune ended before changing THP"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    tune.0.kill().unwrap();
    tune.0.wait().unwrap();
    assert!(
        Path::new(state).join("tune-restore").exists(),
        "no restore file after the crash"
    );
    // Started again (a knob with nothing to try, so that it ends at once): THP is back first.
    let again = hottext(
        &[
            "tune",
            "--command",
            "true",
            "--knobs",
            "prefetchers",
            "--state-dir",
            state,
        ],
        d,
    );
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(thp(), before, "starting again did not put THP back");
    assert!(
        stdout(&again).contains(&format!("put back {THP}")),
        "{}",
        stdout(&again)
    );
    assert!(!Path::new(state).join("tune-restore").exists());
    let restored = hottext(&["tune", "--restore", "--state-dir", state], d);
    assert!(restored.status.success(), "{}", stderr(&restored));
    assert!(
        stdout(&restored).contains("nothing to put back"),
        "{}",
        stdout(&restored)
    );
}

#[test]
fn a_run_with_another_state_directory_is_refused_and_any_signal_puts_thp_back() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let before = thp();
    let command = "i=0; while [ $i -lt 5000 ]; do i=$((i+1)); done";
    for signal in ["USR1", "ALRM"] {
        let first_state = d.join(format!("state-{signal}"));
        let mut tune = KillOnDrop(
            Command::new(env!("CARGO_BIN_EXE_hottext"))
                .args(["tune", "--command", command, "--knobs", "thp"])
                .args(["--max-runs", "24", "--state-dir"])
                .arg(&first_state)
                .current_dir(d)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let until = Instant::now() + Duration::from_secs(120);
        while thp() == before {
            assert!(Instant::now() < until, "tune never changed THP");
            assert!(
                tune.0.try_wait().unwrap().is_none(),
                "tune ended before changing THP"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // Its changed value must not become another run's original.
        let other_state = d.join("other-state");
        let second = hottext(
            &["tune", "--command", "true", "--knobs", "thp", "--state-dir"]
                .into_iter()
                .chain([other_state.to_str().unwrap()])
                .collect::<Vec<_>>(),
            d,
        );
        assert_eq!(second.status.code(), Some(2), "{}", stderr(&second));
        assert!(
            stderr(&second).contains(&format!("another hottext tune is changing {THP}")),
            "{}",
            stderr(&second)
        );
        assert!(!other_state.join("tune-restore").exists());

        Command::new("kill")
            .args(["-s", signal, &tune.0.id().to_string()])
            .status()
            .unwrap();
        let status = tune.0.wait().unwrap();
        assert_eq!(
            status.code(),
            Some(2),
            "SIG{signal}: an interrupted tune exits 2"
        );
        assert_eq!(thp(), before, "SIG{signal} left THP changed");
        assert!(!first_state.join("tune-restore").exists());
    }
}

/// The layout knob: a command per layout against the command as given. The "layout" here is the
/// same demo under valgrind's no-op tool, several times slower, so its verdict is certain.
#[test]
fn tune_compares_layouts_given_as_commands() {
    common::require("valgrind", &["--version"]);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let demo = common::demo(d);
    let command = format!("{demo} --requests 5000");
    let slow = format!("slow=valgrind -q --tool=none {command}");
    let state = d.join("state");
    let out = hottext(
        &[
            "tune",
            "--command",
            &command,
            "--metric",
            "([0-9]+) requests/s",
            "--knobs",
            "layout",
            "--layout",
            &slow,
            "--state-dir",
            state.to_str().unwrap(),
            "--json",
        ],
        d,
    );
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let report = json(&out);
    let trial = &report["trials"][0];
    assert_eq!(trial["knob"], "layout", "{report}");
    assert_eq!(trial["setting"], "slow", "{report}");
    assert_eq!(trial["verdict"], "b-worse", "{report}");
    assert!(trial["ratio"][0].as_f64().unwrap() < 0.7, "{report}");
    assert!(report["winners"].as_array().unwrap().is_empty(), "{report}");

    // --layout without the layout knob is a usage error.
    let out = hottext(
        &[
            "tune",
            "--command",
            &command,
            "--knobs",
            "thp",
            "--layout",
            &slow,
        ],
        d,
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("add layout to --knobs"),
        "{}",
        stderr(&out)
    );
}

/// Bad numbers and paths are refused before anything runs, naming the option.
#[test]
fn tune_and_doctor_refuse_bad_options() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let state = d.join("state");
    let state = state.to_str().unwrap();
    let cases: [(&[&str], &str); 6] = [
        (
            &[
                "tune",
                "--command",
                "true",
                "--budget=-1",
                "--state-dir",
                state,
            ],
            "--budget -1: give minutes",
        ),
        (
            &[
                "tune",
                "--command",
                "true",
                "--knobs",
                "numa-text",
                "--binary",
                "no-such-file",
                "--state-dir",
                state,
            ],
            "--binary no-such-file: not a file",
        ),
        // The knobs are the library's table: an unknown one is refused with their names.
        (
            &["tune", "--command", "true", "--knobs", "thp,turbo"],
            "invalid value 'turbo' for '--knobs <LIST>'\n  [possible values: layout, thp, thp-defrag",
        ),
        (
            &["doctor", "--pid", "999999999"],
            "--pid 999999999: no such process",
        ),
        (&["doctor", "--interval", "0"], "--interval 0"),
        (&["doctor", "--record=-1"], "--record -1"),
    ];
    for (args, message) in cases {
        let out = hottext(args, d);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(message), "{args:?}: {}", stderr(&out));
    }
}
