//! Tests of the pipeline's configuration file.

use super::*;

const MINIMAL: &str = "[service]\nname = \"svc\"\npid = 42\n\
    [store]\nurl = \"store\"\n[repo]\nmeta = \"svc.meta\"\n";

fn read(text: &str) -> Result<Config, ConfigError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hottext.toml");
    std::fs::write(&path, text).unwrap();
    Config::read(&path)
}

#[test]
fn defaults_and_relative_paths() {
    let c = read(MINIMAL).unwrap();
    assert_eq!(c.repo.branch, "hottext/profile");
    assert_eq!(c.merge.decay, 0.5);
    assert_eq!(c.gate.min_samples, 1000);
    assert!(Path::new(&c.store.url).is_absolute(), "{}", c.store.url);
    assert_eq!(normalize(Path::new("/a/b/../c/./d")), Path::new("/a/c/d"));
}

#[test]
fn exactly_one_target() {
    let two = MINIMAL.replace("pid = 42", "pid = 42\nsystemd_unit = \"x\"");
    let err = read(&two).unwrap_err().to_string();
    assert!(err.contains("exactly one of"), "{err}");
}

#[test]
fn typos_are_errors() {
    let typo = MINIMAL.replace("[repo]", "[repo]\nbrnach = \"x\"");
    let err = read(&typo).unwrap_err().to_string();
    assert!(err.contains("brnach"), "{err}");
}

#[test]
fn the_sampling_is_one_record_offers() {
    assert_eq!(read(MINIMAL).unwrap().record.sampling, None);
    let every = MINIMAL.replace("[store]", "[record]\nsampling = \"every-branch\"\n[store]");
    let c = read(&every).unwrap();
    assert_eq!(c.record.sampling, Some(record::Sampling::EveryBranch));
    let typo = MINIMAL.replace("[store]", "[record]\nsampling = \"every_branch\"\n[store]");
    let err = read(&typo).unwrap_err().to_string();
    assert!(
        err.contains("every_branch") && err.contains("every-branch") && err.contains("line 5"),
        "{err}"
    );
}

#[test]
fn huge_durations_are_refused_not_panicked() {
    // record.seconds = 1e30 once panicked and left the started service running.
    let long = MINIMAL.replace("[store]", "[record]\nseconds = 1e30\n[store]");
    let err = read(&long).unwrap_err().to_string();
    assert!(err.contains("[record] seconds"), "{err}");
    let slow = MINIMAL.replace("pid = 42", "command = [\"x\"]\nstartup_seconds = 1e300");
    let err = read(&slow).unwrap_err().to_string();
    assert!(err.contains("startup_seconds"), "{err}");
}

#[test]
fn fleet_settings_and_the_host_name_are_checked() {
    let c = read(MINIMAL).unwrap();
    assert_eq!((c.fleet.window_days, c.fleet.half_life_days), (14.0, 7.0));
    for (extra, says) in [
        ("[fleet]\nhalf_life_days = 0\n", "half_life_days"),
        ("[fleet]\nwindow_days = -1\n", "window_days"),
        ("[fleet]\nmin_matched = 2\n", "min_matched"),
    ] {
        let err = read(&format!("{MINIMAL}{extra}")).unwrap_err().to_string();
        assert!(err.contains(says), "{extra}: {err}");
    }
    let hostile = MINIMAL.replace("pid = 42", "pid = 42\nhost = \"../etc\"");
    let err = read(&hostile).unwrap_err().to_string();
    assert!(err.contains("host"), "{err}");
}
