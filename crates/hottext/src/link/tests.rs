//! Tests of what every linker input shares: refused names, the formats' shapes, split parts.

use super::*;

fn render(format: &Format) -> String {
    let aliases = vec!["f_alias".to_string()];
    let entries = [
        Entry {
            name: "f",
            aliases: &aliases,
            size: 0,
            unlikely_is_whole: true,
        },
        Entry {
            name: "g;a.c",
            aliases: &[],
            size: 0,
            unlikely_is_whole: true,
        },
    ];
    let mut out = Vec::new();
    emit_entries(
        format,
        &entries,
        ScriptPlacement::default(),
        "test",
        &mut out,
    )
    .unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn names_a_linker_could_read_as_syntax_are_refused_before_anything_is_written() {
    let injected = [r#"x)}"hot1"=hot2,".text.q":{*(y"#.to_string()];
    for (name, aliases) in [
        ("main", &injected[..]),
        ("a b", &[][..]),
        ("INCLUDE\"/etc/passwd\"", &[][..]),
        ("nul\0", &[][..]),
    ] {
        for format in [&ld_script::FORMAT, &gold_order::FORMAT, &lld_order::FORMAT] {
            let entries = [Entry {
                name,
                aliases,
                size: 0,
                unlikely_is_whole: true,
            }];
            let mut out = Vec::new();
            let err = emit_entries(format, &entries, ScriptPlacement::default(), "t", &mut out)
                .expect_err(name);
            assert!(matches!(err, EmitError::UnsafeName { .. }), "{err}");
            assert!(out.is_empty(), "nothing is written for {name}");
        }
    }
    // Real compilers' symbols pass: C++, Rust legacy and v0 mangling, GCC clones.
    for name in [
        "_ZN3foo3barEv",
        "_ZN4core3fmt5write17h0123456789abcdefE",
        "_RNvCs1234_5crate3run",
        "f.isra.0",
        "g;src/a.c",
    ] {
        let entries = [Entry {
            name,
            aliases: &[],
            size: 0,
            unlikely_is_whole: true,
        }];
        emit_entries(
            &ld_script::FORMAT,
            &entries,
            ScriptPlacement::default(),
            "t",
            &mut Vec::new(),
        )
        .unwrap();
    }
}

#[test]
fn list_is_one_name_a_line() {
    assert_eq!(render(&list::FORMAT), "f\ng;a.c\n");
}

#[test]
fn ld_script_brackets_the_sections_with_markers() {
    let s = render(&ld_script::FORMAT);
    assert!(s.contains(".text.hot : ALIGN(0x200000)"), "{s}");
    let start = s.find("__hot_start = .;").unwrap();
    let f = s
        .find("*(.text.f .text.hot.f .text.startup.f .text.unlikely.f .text.f_alias")
        .unwrap();
    let g = s
        .find("[a].o(.text.g .text.hot.g .text.startup.g .text.unlikely.g)")
        .unwrap();
    let end = s.find("__hot_end = .;").unwrap();
    assert!(start < f && f < g && g < end, "{s}");
    let split = s
        .find("  .text.split : { *(.text.split .text.split.*) }")
        .unwrap();
    assert!(
        end < split,
        "clang's split parts go right after the range: {s}"
    );
    assert!(s.trim_end().ends_with("INSERT BEFORE .text;"));
}

#[test]
fn order_files_bracket_the_range_with_the_marker_sections() {
    let gold = render(&gold_order::FORMAT);
    let lines: Vec<&str> = gold.lines().collect();
    assert_eq!(lines.first(), Some(&START_SECTION));
    assert!(lines.contains(&".text.f_alias"));
    // After the range, only the parts clang's basic-block sections split off.
    let end = lines.iter().position(|&l| l == END_SECTION).unwrap();
    assert_eq!(
        lines[end + 1..],
        [".text.split.f", ".text.split.f_alias", ".text.split.g"]
    );
    assert_eq!(read_plan(&gold).unwrap().functions(), 3);

    let sym = render(&lld_order::FORMAT);
    assert_eq!(sym, "__hot_start\nf\nf_alias\ng\n__hot_end\n");
}

#[test]
fn split_cold_parts_are_told_from_names_that_only_contain_cold() {
    for cold in ["f.cold", "f.cold.12", "f.cold;a.c"] {
        assert!(is_split_cold_part(cold), "{cold}");
    }
    for hot in ["cold", "f.colder", "f.cold.", "f.cold.x", "scold"] {
        assert!(!is_split_cold_part(hot), "{hot}");
    }
}
