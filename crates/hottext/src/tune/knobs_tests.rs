//! Tests of the knobs and the shell lines their settings make.

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
    let line = command_line("./srv --port 1 | tee log", &[&a, &b]);
    assert_eq!(
        line,
        "printf '%s' always > /sys/x && env K='v w' taskset -c 0 sh -c './srv --port 1 | tee log'"
    );
    assert_eq!(command_line("./srv", &[]), "./srv");
}

#[test]
fn a_layout_replaces_the_command_and_keeps_the_other_settings() {
    let layout: Layout = "c3=./build-c3/srv --port 1".parse().unwrap();
    let given = Given {
        cpus: &[0, 1],
        layouts: &[layout],
        binary: None,
    };
    let layouts = knob("layout", &given).unwrap();
    assert_eq!(layouts.alternatives[0].label, "c3");
    let cpu = setting(
        "cpu",
        vec![Change::Prefix {
            words: vec!["taskset".into(), "-c".into(), "0".into()],
        }],
    );
    assert_eq!(
        command_line("./srv --port 1", &[&layouts.alternatives[0], &cpu]),
        "taskset -c 0 sh -c './build-c3/srv --port 1'"
    );
    assert!(knob("layout", &Given::default())
        .unwrap()
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
    let line = command_line("./db", &[&knob.alternatives[1]]);
    assert_eq!(
        line,
        "sh -c 'dd if=/dev/null of='\\''/srv/my db'\\'' oflag=nocache conv=notrunc,fdatasync count=0 2>/dev/null; numactl --membind=1 cat '\\''/srv/my db'\\'' > /dev/null' && ./db"
    );
    assert!(numa_text("numa-text", 1, Some(Path::new("/x")))
        .unavailable
        .is_some());
    assert!(numa_text("numa-text", 2, None).unavailable.is_some());
}
