//! Issue 34: `merge` writes only profiles its reader takes (counts within 2^48, weights
//! bounded), refuses times it cannot age and profiles of other builds.

mod common;

use common::{hottext, stderr, write};

const MAX_COUNT: u64 = 1 << 48;

fn profile(build_id: &str, header: &str, a: u64, b: u64) -> String {
    format!(
        "# hottext profile v2\n# build-id: {build_id}\n{header}fn a 16 {a}\nfn b 16 {b}\ncall a b {a}\n"
    )
}

fn refused(o: &std::process::Output, says: &str) {
    assert_eq!(o.status.code(), Some(2), "{}", stderr(o));
    assert!(stderr(o).contains(says), "{}", stderr(o));
}

#[test]
fn counts_at_the_limit_merge_into_a_profile_the_reader_takes() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "x.profile", &profile("ab", "", MAX_COUNT, 0));
    write(dir.path(), "y.profile", &profile("ab", "", MAX_COUNT, 0));
    let o = hottext(
        &["merge", "x.profile", "y.profile", "-o", "m.profile"],
        dir.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("every weight is scaled by"),
        "{}",
        stderr(&o)
    );
    // The merged profile is read again: by order, and by merge itself.
    let o = hottext(&["order", "m.profile", "-o", "order.txt"], dir.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let o = hottext(
        &["merge", "m.profile", "x.profile", "-o", "n.profile"],
        dir.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn weights_out_of_range_are_refused_naming_the_option() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "x.profile", &profile("ab", "", 100, 5));
    write(dir.path(), "y.profile", &profile("ab", "", 50, 5));
    for w in ["1e300", "-1", "NaN", "inf"] {
        let weight = format!("--weight={w}");
        let o = hottext(
            &[
                "merge",
                "x.profile",
                "y.profile",
                "--weight",
                "1",
                &weight,
                "-o",
                "m.profile",
            ],
            dir.path(),
        );
        refused(&o, &format!("--weight {:?}", w.parse::<f64>().unwrap()));
        assert!(!dir.path().join("m.profile").exists());
    }
}

#[test]
fn profiles_of_other_builds_are_refused_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "x.profile", &profile("1111", "", 100, 5));
    write(dir.path(), "y.profile", &profile("2222", "", 50, 5));
    let o = hottext(
        &["merge", "x.profile", "y.profile", "-o", "m.profile"],
        dir.path(),
    );
    refused(
        &o,
        "x.profile has build-id 1111 and y.profile has build-id 2222",
    );
    let o = hottext(
        &[
            "merge",
            "x.profile",
            "y.profile",
            "--allow-build-id-mismatch",
            "-o",
            "m.profile",
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn window_ends_in_the_future_or_before_1970_are_refused_with_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let end = |t: &str| format!("# window-end: {t}\n");
    write(
        dir.path(),
        "now.profile",
        &profile("ab", &end("2026-01-05T00:00:00Z"), 100, 5),
    );
    write(
        dir.path(),
        "future.profile",
        &profile("ab", &end("9999-12-31T00:00:00Z"), 100, 5),
    );
    write(
        dir.path(),
        "old.profile",
        &profile("ab", &end("1900-01-01T00:00:00Z"), 100, 5),
    );
    write(
        dir.path(),
        "bad.profile",
        &profile("ab", &end("2026-13-01T00:00:00Z"), 100, 5),
    );
    let merge = |other: &str| {
        hottext(
            &[
                "merge",
                "now.profile",
                other,
                "--half-life-days",
                "7",
                "-o",
                "m.profile",
            ],
            dir.path(),
        )
    };
    refused(
        &merge("future.profile"),
        "future.profile: window-end '9999-12-31T00:00:00Z' is in the future",
    );
    refused(
        &merge("old.profile"),
        "window-end '1900-01-01T00:00:00Z' is before 1970-01-01T00:00:00Z",
    );
    refused(&merge("bad.profile"), "has a field out of range");
}
