//! Tests of the linker script: namesakes, cache-line rules, offsets, padding, hostile origins.

use super::*;

fn render(entries: &[Entry], alignment: Alignment) -> String {
    let placement = ScriptPlacement {
        alignment,
        ..ScriptPlacement::default()
    };
    let mut out = Vec::new();
    write(entries, placement, "test", &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn entry(name: &str, size: u64) -> Entry<'_> {
    Entry {
        name,
        aliases: &[],
        size,
        unlikely_is_whole: true,
    }
}

#[test]
fn an_origin_cannot_end_the_header_comment_nor_break_its_line() {
    let mut out = Vec::new();
    let origin = "c3 order of q*/ASSERT(0, \"injected\") /*x\n.profile";
    write(
        &[entry("f", 8)],
        ScriptPlacement::default(),
        origin,
        &mut out,
    )
    .unwrap();
    let script = String::from_utf8(out).unwrap();
    let header = script.lines().next().unwrap();
    assert_eq!(
        header,
        "/* hottext hot-text layout: 1 functions, c3 order of q* /ASSERT(0, \"injected\") /*x\\n.profile."
    );
    assert_eq!(script.matches("*/").count(), 1, "{script}");
}

#[test]
fn a_namesake_matches_only_the_objects_of_its_source_file() {
    let s = render(&[entry("g;a.c", 8), entry("h", 8)], Alignment::AsCompiled);
    let g = ".text.g .text.hot.g .text.startup.g .text.unlikely.g";
    assert!(
        s.contains(&format!(
            "    [a].o({g}) */a.o({g}) *:a.o({g}) [a].c.o({g}) */a.c.o({g}) *:a.c.o({g})\n"
        )),
        "{s}"
    );
    assert!(
        s.contains("    *(.text.h .text.hot.h .text.startup.h .text.unlikely.h)\n"),
        "{s}"
    );
}

#[test]
fn a_qualifier_that_is_no_safe_file_name_matches_every_namesake() {
    for name in ["g;2", "g;a b.c", "g;a.c)(*", "g;"] {
        assert_eq!(object_patterns(name), None, "{name}");
    }
    assert_eq!(object_patterns("g;src/x.c").unwrap()[0], "[x].o");
}

#[test]
fn a_codegen_unit_qualifier_matches_the_rustc_object_file_or_rlib_member() {
    let name =
        "_ZN4core3ptr13drop_in_place17h0123456789abcdefE;regex_automata.1a2b3c4d5e6f7a8b-cgu.03";
    assert_eq!(
        object_patterns(name).unwrap(),
        ["*.regex_automata.1a2b3c4d5e6f7a8b-cgu.03.rcgu.o"]
    );
    // Only the codegen unit's shape: a C file that happens to end in `-cgu.3` is a C file.
    assert!(!is_codegen_unit("x-cgu.3"));
    assert!(!is_codegen_unit("a.b-cgu."));
    assert!(!is_codegen_unit("a.b-cgu.3x"));
}

#[test]
fn a_cold_whole_function_is_placed_from_its_unlikely_section() {
    let split = Entry {
        unlikely_is_whole: false,
        ..entry("f", 8)
    };
    let s = render(&[entry("rare", 8), split], Alignment::AsCompiled);
    assert!(
        s.contains("*(.text.rare .text.hot.rare .text.startup.rare .text.unlikely.rare)\n"),
        "{s}"
    );
    assert!(
        s.contains("*(.text.f .text.hot.f .text.startup.f)\n"),
        "{s}"
    );
}

#[test]
fn cache_line_rule_is_written_before_each_sized_function() {
    let s = render(
        &[entry("f", 10), entry("g", 64), entry("h", 0)],
        Alignment::CacheLines {
            line: 64,
            max_padding: 32,
            compiled: 16,
        },
    );
    let rules: Vec<&str> = s.lines().filter(|l| l.contains("ALIGN(64)")).collect();
    assert_eq!(
        rules,
        [
            "    . = ((ALIGN(16) & 63) + 10 > 64 && (-ALIGN(16) & 63) <= 32) ? ALIGN(64) : .;",
            "    . = ((ALIGN(16) & 63) + 64 > 64 && (-ALIGN(16) & 63) <= 32) ? ALIGN(64) : .;",
        ]
    );
}

#[test]
fn a_large_script_formatted_in_halves_is_the_one_formatted_in_one_go() {
    let names: Vec<String> = (0..PARALLEL_ENTRIES + 3)
        .map(|i| format!("f{i};a.c"))
        .collect();
    let entries: Vec<Entry> = names.iter().map(|n| entry(n, 40)).collect();
    let alignment = Alignment::CacheLines {
        line: 64,
        max_padding: 32,
        compiled: 16,
    };
    let mut whole = Vec::new();
    write_entries(&entries, alignment, &mut whole).unwrap();
    let s = render(&entries, alignment);
    let body = &s[s.find("= .;\n").unwrap() + 5..s.rfind("    __hot_end").unwrap()];
    assert_eq!(body.as_bytes(), whole);
    assert_eq!(body.lines().count(), 2 * entries.len());
    assert!(body
        .lines()
        .last()
        .unwrap()
        .contains(&format!(".text.f{}", PARALLEL_ENTRIES + 2)));
}

#[test]
fn a_hot_offset_pads_after_the_start_marker() {
    let placement = ScriptPlacement {
        alignment: Alignment::AsCompiled,
        hot_offset: 192,
        pad_to_huge_page: false,
    };
    let mut out = Vec::new();
    write(&[entry("f", 8)], placement, "test", &mut out).unwrap();
    let s = String::from_utf8(out).unwrap();
    assert!(
        s.contains("__hot_start = .;\n    . = . + 192;\n    *(.text.f "),
        "{s}"
    );
    assert!(!render(&[entry("f", 8)], Alignment::AsCompiled).contains(". + "));
}

#[test]
fn padding_aligns_the_end_marker_after_the_last_function() {
    let placement = ScriptPlacement {
        pad_to_huge_page: true,
        ..ScriptPlacement::default()
    };
    let mut out = Vec::new();
    write(&[entry("f", 8)], placement, "test", &mut out).unwrap();
    let s = String::from_utf8(out).unwrap();
    assert!(
        s.contains(".text.unlikely.f)\n    . = ALIGN(0x200000);\n    __hot_end = .;"),
        "{s}"
    );
    assert!(!render(&[entry("f", 8)], Alignment::AsCompiled).contains("ALIGN(0x200000);"));
}
