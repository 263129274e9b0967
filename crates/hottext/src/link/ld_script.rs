//! The GNU ld / lld linker script: the one input that can do more than order sections.
//!
//! What it adds over the order files:
//! - **Namesakes placed individually.** Two `static` functions named `g` in `a.c` and `b.c` both
//!   live in sections called `.text.g`; the pattern `*(.text.g)` would pull both into the hot
//!   range. A profile names such a function `g;a.c` (see `binary`), and the script then matches
//!   only the objects that can come from `a.c`: `a.o` and CMake's `a.c.o`, bare, in any
//!   directory, or as an archive member. An object named otherwise (`-o other.o`) is not
//!   matched: that function then stays where it was, which `verify --binary` shows. A qualifier
//!   that cannot be turned into a safe file pattern falls back to every namesake, the old
//!   behaviour, rather than to none.
//! - **Cache-line starts where that pays** ([`Alignment::CacheLines`]). A function of `S` bytes
//!   that starts `o` bytes into a line spans `ceil((o + S) / line)` lines, one more than it
//!   needs when `o + S > line * ceil(S / line)`. Only then, and only when the padding is at most
//!   `max_padding` bytes, the script moves the location counter to the next line; `o` is where
//!   the section would start, at the alignment the compiler gave it. The linker evaluates the
//!   rule on the real offsets; `S` is the size the profile recorded. The output section starts
//!   2 MiB aligned, so offsets within it have the same alignment as addresses. On PostgreSQL
//!   this rule saved more i-cache misses than BOLT's "align whenever the padding is at most
//!   32 B" on the same order (bench/RESULTS.md).
//! - **A shifted start, for measurement** ([`ScriptPlacement::hot_offset`]). Padding between
//!   `__hot_start` and the first function moves the whole layout against the rest of the code
//!   by a multiple of 64 B, which changes only which i-cache lines collide by chance; binaries
//!   linked at several offsets let `ab --simulate --offsets` tell a layout's effect from luck.

use std::io::{self, Write};

use serde::Serialize;

use super::{prefetch_name_ahead, unique, Entry};
use crate::binary::{symbol_of, HOT_END, HOT_START, HUGE_PAGE};
use crate::parallel::join;

/// Where hot functions start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(tag = "rule", rename_all = "kebab-case")]
pub enum Alignment {
    /// Where the compiler's own section alignment puts them.
    #[default]
    AsCompiled,
    /// On a `line`-byte boundary when that makes the function span fewer lines and costs at most
    /// `max_padding` bytes (BOLT pads functions by at most 32 bytes for the same reason: padding
    /// is hot-range bytes that hold no code). `compiled` is the alignment the compiler gave the
    /// function's section (16 for GCC and Clang at -O2 on x86-64): a script cannot read it,
    /// and the rule must know where the section would start without it.
    CacheLines {
        line: u64,
        max_padding: u64,
        compiled: u64,
    },
}

/// How the script places the hot functions besides their order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct ScriptPlacement {
    pub alignment: Alignment,
    /// Bytes of padding after `__hot_start`, a multiple of 64 (0 in production).
    pub hot_offset: u64,
    /// End the range on a 2 MiB boundary, padding after the last function. [`super::write`]
    /// sets it from its [`super::Padding`] plan; order files get it from
    /// [`super::markers_object`].
    pub pad_to_huge_page: bool,
}

pub(super) fn write(
    entries: &[Entry],
    placement: ScriptPlacement,
    origin: &str,
    out: &mut dyn Write,
) -> io::Result<()> {
    let alignment = placement.alignment;
    writeln!(
        out,
        "/* hottext hot-text layout: {} functions, {}.",
        entries.len(),
        comment_text(origin)
    )?;
    writeln!(
        out,
        "   Link -ffunction-sections objects with -Wl,-T,<this file> (GNU ld or lld). */"
    )?;
    writeln!(
        out,
        "SECTIONS\n{{\n  .text.hot : ALIGN({HUGE_PAGE:#x})\n  {{\n    {HOT_START} = .;"
    )?;
    if placement.hot_offset > 0 {
        writeln!(out, "    . = . + {};", placement.hot_offset)?;
    }
    if entries.len() >= PARALLEL_ENTRIES {
        // Formatted in two halves at once, the second on a thread of its own: what is left of
        // `order --algorithm auto` after the algorithms is mostly this and writing the file.
        let (first, second) = entries.split_at(entries.len() / 2);
        let (second, first) = join(
            || {
                let mut bytes = Vec::new();
                write_entries(second, alignment, &mut bytes).map(|()| bytes)
            },
            || write_entries(first, alignment, out),
        );
        first?;
        out.write_all(&second?)?;
    } else {
        write_entries(entries, alignment, out)?;
    }
    if placement.pad_to_huge_page {
        writeln!(out, "    . = ALIGN({HUGE_PAGE:#x});")?;
    }
    writeln!(out, "    {HOT_END} = .;\n  }}\n}}\nINSERT BEFORE .text;")
}

/// Scripts of fewer functions are formatted on one thread: a thread costs more than it saves.
const PARALLEL_ENTRIES: usize = 1 << 16;

/// The lines that place `entries`, in order.
fn write_entries(entries: &[Entry], alignment: Alignment, out: &mut dyn Write) -> io::Result<()> {
    // Each function's lines go to `line` and then out at once: a million entries through the
    // formatting machinery, with strings for their sections, took most of a second.
    let mut line: Vec<u8> = Vec::with_capacity(256);
    for (i, e) in entries.iter().enumerate() {
        prefetch_name_ahead(entries, i);
        line.clear();
        if let (
            Alignment::CacheLines {
                line: line_bytes,
                max_padding,
                compiled,
            },
            true,
        ) = (alignment, e.size > 0)
        {
            // Where the section would start: the counter rounded up to the compiler's alignment.
            let (s, m, at) = (e.size, line_bytes - 1, format!("ALIGN({compiled})"));
            writeln!(
                line,
                "    . = (({at} & {m}) + {s} > {} && (-{at} & {m}) <= {max_padding}) ? ALIGN({line_bytes}) : .;",
                s.div_ceil(line_bytes) * line_bytes
            )?;
        }
        let sections = section_list(e);
        line.extend_from_slice(b"    ");
        match object_patterns(e.name) {
            Some(objects) => {
                for (i, o) in objects.iter().enumerate() {
                    if i > 0 {
                        line.push(b' ');
                    }
                    line.extend_from_slice(o.as_bytes());
                    line.push(b'(');
                    line.extend_from_slice(sections.as_bytes());
                    line.push(b')');
                }
            }
            None => {
                line.extend_from_slice(b"*(");
                line.extend_from_slice(sections.as_bytes());
                line.push(b')');
            }
        }
        line.push(b'\n');
        out.write_all(&line)?;
    }
    Ok(())
}

/// The input sections of `e`'s symbols, each once, separated by spaces.
fn section_list(e: &Entry) -> String {
    if e.aliases.is_empty() {
        // Most functions: one symbol's sections, distinct by construction, written without
        // the set that removes repeats (a million entries made that a second of the write).
        let symbol = symbol_of(e.name);
        let mut list = String::with_capacity(4 * symbol.len() + 48);
        for prefix in e.section_prefixes() {
            if !list.is_empty() {
                list.push(' ');
            }
            list.push_str(prefix);
            list.push_str(symbol);
        }
        return list;
    }
    let sections: Vec<String> = e.sections().collect();
    sections.join(" ")
}

/// File patterns for the objects compiled from the source file a qualified profile name
/// (`name;file.c`) gives; `None` for a plain name or one that cannot be matched safely.
///
/// rustc names no source file: the `STT_FILE` symbol of its objects is the codegen unit
/// (`regex_automata.1a2b3c4d5e6f7a8b-cgu.03`), and the object is
/// `<crate>-<hash>.<codegen unit>.rcgu.o`, a file of its own (the binary's crate, LTO) or a
/// member of the crate's `.rlib` archive. Both linkers match a pattern without `:` against an
/// archive member's name too, so one pattern covers both.
fn object_patterns(profile_name: &str) -> Option<Vec<String>> {
    let (_, file) = profile_name.split_once(';')?;
    // `name;N` numbers namesakes within one file: nothing tells their objects apart.
    let base = file.rsplit('/').next()?;
    let safe = |c: char| c.is_ascii_alphanumeric() || "._+-".contains(c);
    if base.is_empty() || !base.chars().all(safe) || base.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    if is_codegen_unit(base) {
        return Some(vec![format!("*.{base}.rcgu.o")]);
    }
    let stem = base.rsplit_once('.').map_or(base, |(stem, _)| stem);
    let objects = unique([format!("{stem}.o"), format!("{base}.o")].into_iter());
    // GNU ld opens a plain file name in a script as one more input: the bare object is matched
    // by a one-letter class instead (`[a].o`), which is a pattern and still matches only `a.o`.
    let bare = |o: &str| {
        let first = o.chars().next().filter(char::is_ascii_alphanumeric)?;
        Some(format!("[{first}]{}", &o[1..]))
    };
    Some(
        objects
            .flat_map(|o| [bare(&o), Some(format!("*/{o}")), Some(format!("*:{o}"))])
            .flatten()
            .collect(),
    )
}

/// Whether a file symbol is a rustc codegen unit's name: `<crate>.<hash>-cgu.<number>`.
fn is_codegen_unit(file: &str) -> bool {
    file.rsplit_once("-cgu.").is_some_and(|(unit, number)| {
        unit.contains('.') && !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit())
    })
}

/// `text` made safe inside a `/* */` comment: a `*/` in it (a path such as
/// `q*/ASSERT(0, "x") /*.profile`) would end the comment and make the rest script commands, so
/// it is written `* /`; control characters (a line break) are written as Rust escapes.
fn comment_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out.replace("*/", "* /")
}

#[cfg(test)]
mod tests {
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
        let name = "_ZN4core3ptr13drop_in_place17h0123456789abcdefE;regex_automata.1a2b3c4d5e6f7a8b-cgu.03";
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
}
