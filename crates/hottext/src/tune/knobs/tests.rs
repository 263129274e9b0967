//! Tests of the knobs and the shell lines their settings make.

use super::service::numa_text;
use super::*;

#[test]
fn settings_become_one_shell_line() {
    let a = setting("x", vec![sysfs("/sys/x", "always"), env("K", "v w")]);
    let b = setting(
        "cpu",
        vec![Change::Prefix {
            words: vec!["taskset".into(), "-c".into(), "0".into()],
        }],
    );
    let (setup, line) = command_line("./srv --port 1 | tee log", &[&a, &b]);
    assert_eq!(setup, "printf '%s' always > /sys/x");
    assert_eq!(
        line,
        "env K='v w' taskset -c 0 sh -c './srv --port 1 | tee log'"
    );
    assert_eq!(command_line("./srv", &[]), (String::new(), "./srv".into()));
    // The set-up runs before the counted run, apart from it: the command stays as given.
    assert_eq!(
        command_line("a || b", &[&setting("x", vec![sysfs("/sys/x", "never")])]),
        ("printf '%s' never > /sys/x".into(), "a || b".into())
    );
}

#[test]
fn a_restore_file_may_name_only_the_files_knobs_write() {
    assert!(may_write(Path::new(crate::os::sys::THP_ENABLED_FILE)));
    assert!(may_write(Path::new(
        "/sys/devices/system/cpu/cpufreq/policy12/scaling_governor"
    )));
    for other in [
        "/etc/ld.so.preload",
        "/sys/devices/system/cpu/cpufreq/policy/scaling_governor",
        "/sys/devices/system/cpu/cpufreq/policy1/../../../../../etc/passwd",
        "/sys/devices/system/cpu/cpufreq/policy1/scaling_max_freq",
        "/sys/kernel/mm/transparent_hugepage/enabled/../x",
    ] {
        assert!(!may_write(Path::new(other)), "{other}");
    }
}

#[test]
fn a_server_pinned_by_ab_has_no_cpus_knob() {
    let given = Given {
        cpus: &[0, 1],
        pinned_server: true,
        ..Given::default()
    };
    let cpus = named("cpus").unwrap().probe(&given);
    assert!(cpus
        .unavailable
        .unwrap()
        .contains("already runs on one CPU"));
    let given = Given {
        cpus: &[0, 1],
        ..Given::default()
    };
    assert!(named("cpus").unwrap().probe(&given).unavailable.is_none());
}

#[test]
fn a_layout_replaces_the_command_and_keeps_the_other_settings() {
    let layout: Layout = "c3=./build-c3/srv --port 1".parse().unwrap();
    let given = Given {
        cpus: &[0, 1],
        layouts: &[layout],
        binary: None,
        pinned_server: false,
    };
    let layouts = named("layout").unwrap().probe(&given);
    assert_eq!(layouts.alternatives[0].label, "c3");
    let cpu = setting(
        "cpu",
        vec![Change::Prefix {
            words: vec!["taskset".into(), "-c".into(), "0".into()],
        }],
    );
    assert_eq!(
        command_line("./srv --port 1", &[&layouts.alternatives[0], &cpu]).1,
        "taskset -c 0 sh -c './build-c3/srv --port 1'"
    );
    assert!(named("layout")
        .unwrap()
        .probe(&Given::default())
        .unavailable
        .is_some());
    for bad in ["c3", "=./srv", "a b=./srv", "c3=", "c3=  "] {
        assert!(bad.parse::<Layout>().is_err(), "{bad}");
    }
}

#[test]
fn the_text_page_cache_is_placed_before_each_run() {
    let knob = numa_text("numa-text", 2, Some(Path::new("/srv/my db")));
    assert_eq!(knob.alternatives.len(), 2);
    let (setup, line) = command_line("./db", &[&knob.alternatives[1]]);
    assert_eq!(
        setup,
        "sh -c 'dd if='\\''/srv/my db'\\'' iflag=nocache count=0 2>/dev/null; numactl --membind=1 cat '\\''/srv/my db'\\'' > /dev/null'"
    );
    assert_eq!(line, "./db");
    assert!(numa_text("numa-text", 1, Some(Path::new("/x")))
        .unavailable
        .is_some());
    assert!(numa_text("numa-text", 2, None).unavailable.is_some());
}

#[test]
fn the_table_names_each_knob_once_and_the_restore_file_allows_every_file_a_knob_writes() {
    let all: Vec<&str> = KNOBS.iter().map(|k| k.name).collect();
    let mut unique = all.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), all.len(), "{all:?}");
    let layouts = ["c3=./srv".parse::<Layout>().unwrap()];
    let given = Given {
        cpus: &[0, 1],
        layouts: &layouts,
        binary: Some(Path::new("/bin/sh")),
        pinned_server: false,
    };
    for name in all {
        let knob = named(name).unwrap().probe(&given);
        assert_eq!(knob.name, name);
        let settings = std::iter::once(&knob.current).chain(&knob.alternatives);
        for file in files(settings) {
            assert!(may_write(&file), "{name} writes {}", file.display());
        }
    }
    assert!(named("no-such-knob").is_none());
}
