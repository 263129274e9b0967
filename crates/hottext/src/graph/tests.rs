//! The text format's golden file and its errors, and the builder's rules.

use super::*;

/// Every kind of line, in canonical order: the golden file of the format.
const SAMPLE: &str = "# hottext profile v2\n# build-id: abcd\n# future-key: kept\n\
    fn A 100 0\nfn B 100 100\nfn C 10 5\nalias B B_alias\n\
    call A B 100\nsite A B 7 60\nsite A B 42 30\ncall A C 5\ncall C B 3\nsite C B 9 3\n";

#[test]
fn round_trips_byte_identical() {
    let g = Graph::read(SAMPLE.as_bytes()).unwrap();
    assert_eq!(g.header("build-id"), Some("abcd"));
    assert_eq!(g.funcs[1].aliases, vec!["B_alias".to_string()]);
    assert_eq!(
        g.sites[..2],
        [
            CallSite {
                caller: FuncId(0),
                callee: FuncId(1),
                offset: 7,
                weight: 60
            },
            CallSite {
                caller: FuncId(0),
                callee: FuncId(1),
                offset: 42,
                weight: 30
            }
        ]
    );
    let mut out = Vec::new();
    g.write(&mut out).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), SAMPLE);
}

#[test]
fn malformed_line_names_its_number() {
    let bad = "# hottext profile v1\nfn A 100 0\nfn B 100 lots\n";
    let err = Graph::read(bad.as_bytes()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "line 3: sample count 'lots' is not a whole number"
    );
}

#[test]
fn call_to_undeclared_function_is_an_error() {
    let bad = "# hottext profile v1\nfn A 1 0\ncall A Z 5\n";
    let err = Graph::read(bad.as_bytes()).unwrap_err().to_string();
    assert!(err.contains("line 3") && err.contains("'Z'"), "{err}");
}

#[test]
fn empty_profile_and_wrong_file_are_errors() {
    assert!(matches!(
        Graph::read("# hottext profile v1\n".as_bytes()),
        Err(GraphError::Empty)
    ));
    assert!(matches!(
        Graph::read("".as_bytes()),
        Err(GraphError::NotAProfile)
    ));
    assert!(matches!(
        Graph::read("\x7fELF".as_bytes()),
        Err(GraphError::NotAProfile)
    ));
}

#[test]
fn builder_merges_repeated_calls() {
    let mut b = GraphBuilder::default();
    let a = b.func("a", 10);
    let c = b.func("c", 10);
    b.add_call(a, c, 2);
    b.add_call(a, c, 3);
    assert_eq!(b.func("a", 99), a);
    let g = b.finish();
    assert_eq!(
        g.calls,
        vec![Call {
            caller: a,
            callee: c,
            weight: 5
        }]
    );
}

#[test]
fn v1_file_reads_as_a_profile_without_sites_and_is_written_as_v2() {
    let v1 = "# hottext profile v1\nfn A 100 0\nfn B 100 100\ncall A B 100\n";
    let g = Graph::read(v1.as_bytes()).unwrap();
    assert_eq!(g.calls.len(), 1);
    assert!(g.sites.is_empty());
    let mut out = Vec::new();
    g.write(&mut out).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        v1.replace("profile v1", "profile v2")
    );
}

/// The error of reading `lines` after a v2 header, two functions and a call of A to B.
fn site_error(lines: &str) -> String {
    let text = format!("# hottext profile v2\nfn A 100 0\nfn B 10 5\ncall A B 50\n{lines}");
    Graph::read(text.as_bytes()).unwrap_err().to_string()
}

#[test]
fn each_bad_site_line_is_an_error_naming_its_line() {
    let cases = [
        ("site A Z 1 1\n", "line 5: 'Z' is not declared"),
        (
            "site A B 100 1\n",
            "line 5: offset 100 is past the end of 'A' (100 bytes)",
        ),
        (
            "site A B 0x10 1\n",
            "line 5: offset '0x10' is not a whole number",
        ),
        (
            "site A B 1 -3\n",
            "line 5: weight '-3' is not a whole number",
        ),
        ("site A B 1\n", "line 5: 'site' record lacks a weight"),
        ("site A B 1 1 9\n", "line 5: unexpected field '9'"),
        (
            "site A B 9 1\nsite A B 9 1\n",
            "line 6: offset 9 is not above",
        ),
        (
            "site A B 1 30\nsite A B 2 30\n",
            "line 6: the sites of 'A' to 'B' weigh more than its call (50)",
        ),
        (
            "call B A 1\nsite A B 1 1\n",
            "line 6: 'site A B' does not follow 'call A B'",
        ),
    ];
    for (lines, expected) in cases {
        let err = site_error(lines);
        assert!(err.starts_with(expected), "{lines:?}: {err}");
    }
}

#[test]
fn site_in_a_v1_file_and_a_newer_version_are_errors() {
    let err = Graph::read("# hottext profile v1\nfn A 9 1\ncall A A 1\nsite A A 1 1\n".as_bytes())
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("line 4: 'site' records need a v2 profile"),
        "{err}"
    );
    let newer = Graph::read("# hottext profile v6\nfn A 9 1\n".as_bytes()).unwrap_err();
    assert!(matches!(newer, GraphError::NewerVersion(6)));
    assert_eq!(
        newer.to_string(),
        "the file is a hottext profile v6; this hottext reads v1 to v5: upgrade it"
    );
    assert!(matches!(
        Graph::read("# hottext profile v0\nfn A 9 1\n".as_bytes()),
        Err(GraphError::NotAProfile)
    ));
}

#[test]
fn builder_keeps_the_heaviest_sites_that_fit_in_the_call() {
    let mut b = GraphBuilder::default();
    let (a, c) = (b.func("a", 1000), b.func("c", 10));
    b.add_call(a, c, 100);
    for offset in 0..MAX_SITES_PER_CALL as u64 + 2 {
        b.add_site(a, c, offset * 10, offset + 1);
    }
    b.add_site(a, c, 5, 1); // merges with nothing: another offset
    b.add_site(a, c, 90, 1); // merges into offset 90's site
    b.add_site(a, c, 2000, 50); // past the caller's end
    b.add_site(c, a, 3, 1); // no call c → a
    let g = b.finish();
    let kept: Vec<(u64, u64)> = g.sites.iter().map(|s| (s.offset, s.weight)).collect();
    // Weights 11 (offset 90), 9, 8, …, 3: the eight heaviest, 55 of the call's 100.
    assert_eq!(
        kept,
        [
            (20, 3),
            (30, 4),
            (40, 5),
            (50, 6),
            (60, 7),
            (70, 8),
            (80, 9),
            (90, 11)
        ]
    );
    let sited: u64 = g.sites.iter().map(|s| s.weight).sum();
    assert!(sited <= g.calls[0].weight);

    // Sites heavier than their call keep only what fits.
    let mut b = GraphBuilder::default();
    let (a, c) = (b.func("a", 1000), b.func("c", 10));
    b.add_call(a, c, 10);
    b.add_site(a, c, 1, 6);
    b.add_site(a, c, 2, 5);
    b.add_site(a, c, 3, 4);
    let offsets: Vec<u64> = b.finish().sites.iter().map(|s| s.offset).collect();
    assert_eq!(offsets, [1, 3]);
}

#[test]
fn names_with_spaces_and_percent_signs_round_trip_escaped_in_v3() {
    // Go's generic symbols have spaces; a v2 writer wrote them as they were, and the next
    // reader failed on the line.
    let mut g = Graph::default();
    let a = g.add_func(Func {
        name: "main.hot fn(x)".into(),
        size: 16,
        samples: 5,
        aliases: vec!["100%\tdone".into()],
    });
    let b = g.add_func(Func {
        name: "plain".into(),
        size: 8,
        samples: 1,
        aliases: vec![],
    });
    g.calls.push(Call {
        caller: a,
        callee: b,
        weight: 3,
    });
    let mut out = Vec::new();
    g.write(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.starts_with("# hottext profile v3\n"), "{text}");
    assert!(text.contains("fn main.hot%20fn(x) 16 5\n"), "{text}");
    assert!(
        text.contains("alias main.hot%20fn(x) 100%25%09done\n"),
        "{text}"
    );
    let back = Graph::read(text.as_bytes()).unwrap();
    assert_eq!(back.funcs[0].name, "main.hot fn(x)");
    assert_eq!(back.funcs[0].aliases, ["100%\tdone"]);
    // In v2 a '%' is a '%'; in v3 a stray one is an error naming the line.
    let v2 = Graph::read("# hottext profile v2\nfn a%20b 8 1\n".as_bytes()).unwrap();
    assert_eq!(v2.funcs[0].name, "a%20b");
    let err = Graph::read("# hottext profile v3\nfn a%2 8 1\n".as_bytes()).unwrap_err();
    assert!(err.to_string().starts_with("line 2:"), "{err}");
}

#[test]
fn a_profile_whose_counts_sum_past_the_limit_is_refused() {
    let max = MAX_COUNT;
    let err = Graph::read(format!("# hottext profile v2\nfn a 16 {max}\nfn b 16 1\n").as_bytes())
        .unwrap_err();
    assert!(err.to_string().contains("samples sum to over"), "{err}");
    let err = Graph::read(
        format!("# hottext profile v2\nfn a 16 0\nfn b 16 0\ncall a b {max}\ncall b a 1\n")
            .as_bytes(),
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("call weights sum to over"),
        "{err}"
    );
}

#[test]
fn a_perf_data_file_or_binary_bytes_are_named_for_what_they_are() {
    let err = Graph::read(&b"PERFILE2h\x00\x00\x00\xff\xfe\n"[..]).unwrap_err();
    assert!(err.to_string().contains("perf.data recording"), "{err}");
    assert!(err.to_string().contains("hottext profile"), "{err}");
    let err = Graph::read(&b"# hottext profile v2\nfn a 8 1\nfn \xff 8 1\n"[..]).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("line 3: byte 4 of the line is not UTF-8"),
        "{err}"
    );
}
