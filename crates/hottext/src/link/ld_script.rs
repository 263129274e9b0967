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
//! - **A shifted start** ([`ScriptPlacement::hot_offset`]). Padding between `__hot_start` and
//!   the first function by a multiple of 64 B moves the whole layout against the rest of the
//!   code, which changes only which i-cache lines collide by chance; binaries linked at several
//!   offsets let `ab --simulate --offsets` tell a layout's effect from luck. 16-48 B more move
//!   every function within its lines, which `auto` does where its model says that pays.

use std::io::{self, Write};

use super::format::{Format, Laid, Names, OrderWriter, Writer};
use super::{prefetch_name_ahead, unique, Entry};
use crate::binary::{symbol_of, HOT_END, HOT_START, HUGE_PAGE};
use crate::layout::alignment::{Alignment, ScriptPlacement};
use crate::parallel::join;

/// `--format ld-script`.
pub(crate) static FORMAT: Format = Format {
    name: "ld-script",
    help: "GNU ld / lld linker script (-Wl,-T,FILE)",
    writer: Writer::Order(OrderWriter {
        names: Names::Symbols,
        needs_markers_object: false,
        places_individually: true,
        write: write_laid,
        splits: None,
    }),
};

fn write_laid(laid: &Laid, out: &mut dyn Write) -> io::Result<()> {
    write(laid.entries(), laid.placement, laid.origin, out)
}

/// The script placing `entries` as `placement` says; `origin` goes into its header comment.
fn write(
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
    writeln!(out, "    {HOT_END} = .;\n  }}")?;
    // The parts clang's basic-block sections split off (`.text.split.NAME`): together, right
    // after the range, rather than spread through `.text` between the cold functions.
    writeln!(
        out,
        "  .text.split : {{ *(.text.split .text.split.*) }}\n}}\nINSERT BEFORE .text;"
    )
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
#[path = "ld_script_tests.rs"]
mod tests;
