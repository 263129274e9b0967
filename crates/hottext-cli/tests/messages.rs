//! Issue 34: messages that say what is wrong, with the line, and never drive the terminal.

mod common;

use common::{hottext, stderr, write};

fn refused(o: &std::process::Output, says: &str) {
    assert_eq!(o.status.code(), Some(2), "{}", stderr(o));
    assert!(stderr(o).contains(says), "{}", stderr(o));
}

#[test]
fn names_from_files_reach_the_terminal_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let profile = |id: &str| format!("# hottext profile v2\n# build-id: {id}\nfn a 8 1\n");
    write(dir.path(), "x.profile", &profile("\x1b]0;owned\x07\x1b[2J"));
    write(dir.path(), "y.profile", &profile("2222"));
    let o = hottext(&["merge", "x.profile", "y.profile", "-o", "m"], dir.path());
    refused(&o, "has build-id \\u{1b}]0;owned\\u{7}\\u{1b}[2J and");
    assert!(!o.stderr.contains(&0x1b), "{}", stderr(&o));
}

#[test]
fn a_perf_data_file_given_as_a_profile_says_to_run_profile_first() {
    let dir = tempfile::tempdir().unwrap();
    // The first bytes of every perf.data file, then binary header fields.
    std::fs::write(
        dir.path().join("perf.data"),
        b"PERFILE2h\0\0\0\0\0\0\0\xff\xfe",
    )
    .unwrap();
    let o = hottext(&["order", "perf.data"], dir.path());
    refused(
        &o,
        "perf.data recording, not a profile: run `hottext profile",
    );
}

#[test]
fn an_escaped_name_keeps_its_line_and_a_list_says_what_it_takes() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "p.profile",
        "# hottext profile v3\nfn a 16 1\nfn b%20c 16 1\nfn d(x) 16 1\n",
    );
    let o = hottext(&["order", "p.profile", "--format", "list"], dir.path());
    refused(
        &o,
        "p.profile, line 3: function \"b c\" cannot be written safely in a list: it holds ' ' \
         (a list takes any name without whitespace or control characters",
    );
    let o = hottext(&["order", "p.profile", "--format", "ld-script"], dir.path());
    refused(&o, "p.profile, line 3: function \"b c\"");
    refused(&o, "linker inputs take symbols of letters");
}
