//! What each linker needs to lay out an order as one 2 MiB-aligned hot range bracketed by
//! `__hot_start` and `__hot_end`.
//!
//! | linker        | input                                   | markers and alignment from |
//! | ------------- | --------------------------------------- | -------------------------- |
//! | GNU ld, lld   | [`Format::LdScript`] (`-Wl,-T,FILE`)    | the script itself          |
//! | gold          | [`Format::GoldOrder`] (`--section-ordering-file`) | [`markers_object`] |
//! | lld           | [`Format::SymbolOrder`] (`--symbol-ordering-file`) | [`markers_object`] |
//!
//! mold is not supported: Debian 12's mold 1.10 has no option that orders sections. lld can also
//! order by itself from the call edges ([`write_call_graph_profile`]); that gives no markers.
//!
//! Order files cannot define symbols or align anything, so the markers object supplies two
//! empty sections: `.text.hottext.start` (2 MiB aligned, defines `__hot_start`) and
//! `.text.hottext.end` (defines `__hot_end`). The order files name them first and last.
//!
//! Every format can end the range on a 2 MiB boundary ([`padding`]), so that a range followed
//! by little text still has whole pages for the runtime: the script aligns `__hot_end`, the
//! markers object aligns the end section.
//!
//! All inputs assume objects compiled with `-ffunction-sections`, so that every function has an
//! input section of its own named after it.

mod call_graph_profile;
mod hot_list;
mod input;
mod ld_script;
mod markers;
pub mod padding;
mod planned;
mod ranges;

pub use call_graph_profile::write_call_graph_profile;
pub use hot_list::{hot_list, HotList, HotText, UnsafeNames};
pub use input::{write, Target, Written, MARKERS_ADVICE};
pub use ld_script::{Alignment, ScriptPlacement};
pub use markers::{host_architecture, markers_object};
pub use padding::{plan_padding, Padding, PaddingPlan};
pub use planned::{read_plan, Plan, PlanError};
pub use ranges::{read_ranges, write_ranges, RangesError, RangesFile};

use std::io::{self, Write};

use crate::binary::{symbol_of, HOT_END, HOT_START};
use crate::graph::Func;
use crate::prefetch::{prefetch, DISTANCE as PREFETCH_DISTANCE};

/// Section that holds `__hot_start` in the markers object.
pub(crate) const START_SECTION: &str = ".text.hottext.start";
/// Section that holds `__hot_end` in the markers object.
pub(crate) const END_SECTION: &str = ".text.hottext.end";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One symbol a line, in order.
    List,
    /// GNU ld / lld linker script with `INSERT BEFORE .text`.
    LdScript,
    /// gold `--section-ordering-file`.
    GoldOrder,
    /// lld `--symbol-ordering-file`.
    SymbolOrder,
}

impl Format {
    /// Whether the linker also needs [`markers_object`] to get the markers and the alignment.
    pub(crate) fn needs_markers_object(self) -> bool {
        matches!(self, Format::GoldOrder | Format::SymbolOrder)
    }

    /// Whether the format can align functions ([`Alignment`]) and place namesakes one by one:
    /// order files only order sections, and name them without the object they come from.
    pub fn places_individually(self) -> bool {
        self == Format::LdScript
    }
}

/// A function to place: its profile name, the other symbols at its address, its size in the
/// profiled binary (0 if unknown), and whether a `.text.unlikely.<symbol>` section would be the
/// function itself.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    pub name: &'a str,
    pub aliases: &'a [String],
    pub size: u64,
    /// False when GCC split a `.cold` part off this function: that part, not the function,
    /// lives in `.text.unlikely.<symbol>` (see [`is_split_cold_part`]). Otherwise a section of
    /// that name is the whole function, put there because it is `cold` (`#[cold]` in Rust,
    /// `__attribute__((cold))` in C), and it is placed like any other.
    pub unlikely_is_whole: bool,
}

impl<'a> From<&'a Func> for Entry<'a> {
    fn from(f: &'a Func) -> Self {
        Entry {
            name: &f.name,
            aliases: &f.aliases,
            size: f.size,
            unlikely_is_whole: true,
        }
    }
}

impl Entry<'_> {
    /// Plain linker symbols of this function, canonical first.
    fn symbols(&self) -> impl Iterator<Item = &str> {
        std::iter::once(symbol_of(self.name)).chain(self.aliases.iter().map(|a| symbol_of(a)))
    }

    /// The section prefixes this function's sections can have.
    fn section_prefixes(&self) -> &'static [&'static str] {
        if self.unlikely_is_whole {
            &SECTION_PREFIXES
        } else {
            &SECTION_PREFIXES[..SECTION_PREFIXES.len() - 1]
        }
    }

    /// Input sections that can hold this function's symbols, each once.
    fn sections(&self) -> impl Iterator<Item = String> + '_ {
        let prefixes = self.section_prefixes();
        unique(
            self.symbols()
                .flat_map(move |symbol| prefixes.iter().map(move |p| format!("{p}{symbol}"))),
        )
    }
}

/// A name that cannot be written safely, or a failed write.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmitError {
    #[error("{what} {name:?} cannot be written safely in {target}: it holds {bad:?} ({rule}; a profile from a store or another host is not trusted)")]
    UnsafeName {
        /// `function` or `alias`.
        what: &'static str,
        name: String,
        bad: char,
        /// `a list` or `a linker input`.
        target: &'static str,
        /// The names the format takes, in words.
        rule: &'static str,
    },
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl EmitError {
    /// The profile name the error is about, to find its line.
    pub fn name(&self) -> Option<&str> {
        match self {
            EmitError::UnsafeName { name, .. } => Some(name),
            EmitError::Io(_) => None,
        }
    }
}

/// Refuses a symbol that could be read as more than a name by a linker: linker scripts give
/// meaning to parentheses, quotes, braces, `=`, `;`, wildcards and whitespace (a profile line
/// `alias main x)}"hot1"=hot2` once defined a symbol through the script), order files to
/// newlines and wildcards. The symbols compilers emit for C, C++ and Rust need only these
/// characters; a plain list takes any name without whitespace or control characters.
fn check_symbol(format: Format, what: &'static str, symbol: &str) -> Result<(), EmitError> {
    let safe = |c: char| match format {
        Format::List => !c.is_whitespace() && !c.is_control(),
        _ => c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '$'),
    };
    let (target, rule) = match format {
        Format::List => (
            "a list",
            "a list takes any name without whitespace or control characters",
        ),
        _ => (
            "a linker input",
            "linker inputs take symbols of letters, digits, '_', '.' and '$'",
        ),
    };
    // Bytes first, the usual case and the fast one (every name is checked on every write): an
    // ASCII byte is the character it encodes.
    let plain = |b: u8| b.is_ascii() && safe(char::from(b));
    if !symbol.is_empty() && symbol.bytes().all(plain) {
        return Ok(());
    }
    match symbol.chars().find(|&c| !safe(c)) {
        None if !symbol.is_empty() => Ok(()),
        bad => Err(EmitError::UnsafeName {
            what,
            name: symbol.to_string(),
            bad: bad.unwrap_or(' '),
            target,
            rule,
        }),
    }
}

/// Checks every name of `entries` for `format` (see `check_symbol`). [`emit`] runs it before it
/// writes anything; `fetch` runs it per function to leave out the ones it refuses.
pub fn check_entries(format: Format, entries: &[Entry]) -> Result<(), EmitError> {
    for (i, e) in entries.iter().enumerate() {
        prefetch_name_ahead(entries, i);
        let name = match format {
            Format::List => e.name,
            _ => symbol_of(e.name),
        };
        check_symbol(format, "function", name)?;
        for alias in e.aliases {
            check_symbol(format, "alias", symbol_of(alias))?;
        }
    }
    Ok(())
}

/// Starts loading the name of the entry a few places after `i`: an order's names lie at
/// random in memory, and on a million entries the loops over them waited on each.
fn prefetch_name_ahead(entries: &[Entry], i: usize) {
    if let Some(first_byte) = entries
        .get(i + PREFETCH_DISTANCE)
        .and_then(|ahead| ahead.name.as_bytes().first())
    {
        prefetch(first_byte);
    }
}

/// Writes `entries` in `format`, placed as `placement` says where the format can
/// ([`Format::places_individually`]). `origin` (what produced the order) goes into a comment
/// where the format has comments. Every name is checked ([`check_entries`]) before anything
/// is written.
pub fn emit(
    format: Format,
    entries: &[Entry],
    placement: ScriptPlacement,
    origin: &str,
    out: &mut dyn Write,
) -> Result<(), EmitError> {
    check_entries(format, entries)?;
    match format {
        Format::List => {
            for e in entries {
                writeln!(out, "{}", e.name)?;
            }
        }
        Format::LdScript => ld_script::write(entries, placement, origin, out)?,
        Format::GoldOrder => {
            writeln!(out, "{START_SECTION}")?;
            for section in unique(entries.iter().flat_map(|e| e.sections())) {
                writeln!(out, "{section}")?;
            }
            writeln!(out, "{END_SECTION}")?;
        }
        Format::SymbolOrder => {
            writeln!(out, "{HOT_START}")?;
            for symbol in unique(entries.iter().flat_map(|e| e.symbols()).map(str::to_string)) {
                writeln!(out, "{symbol}")?;
            }
            writeln!(out, "{HOT_END}")?;
        }
    }
    Ok(out.flush()?)
}

/// Prefixes of the input sections that can hold a function `<symbol>` under
/// `-ffunction-sections` (rustc's default on Linux): the plain one, the ones GCC uses for `hot`
/// attributes and for `main` and other start-up code, and last the one of `cold` functions,
/// which GCC and LLVM both use. GCC also puts a part split off as `<symbol>.cold` in
/// `.text.unlikely.<symbol>`: that part never enters the hot range, so the last prefix is left
/// out for a function known to have one ([`Entry::unlikely_is_whole`]).
pub(crate) const SECTION_PREFIXES: [&str; 4] =
    [".text.", ".text.hot.", ".text.startup.", ".text.unlikely."];

/// Whether `name` is a part GCC split off a function as unlikely to run (`foo.cold`,
/// `foo.cold.3`, in `.text.unlikely.foo`). Such parts stay out of the hot range even when a
/// sample hit them: the compiler moved them out of the way, and in the hot range each one
/// would spread its rare bytes between the hot ones.
pub fn is_split_cold_part(name: &str) -> bool {
    split_cold_parent(name).is_some()
}

/// The symbol of the function a split cold part `name` was split off (`foo` for `foo.cold`
/// and `foo.cold.3`), whose section `.text.unlikely.foo` holds the part.
fn split_cold_parent(name: &str) -> Option<&str> {
    let symbol = symbol_of(name);
    // `.cold.` then digits: the digits hold no `.`, so that `.cold.` is the last one.
    let numbered = symbol.trim_end_matches(|c: char| c.is_ascii_digit());
    if numbered.len() < symbol.len() {
        numbered.strip_suffix(".cold.")
    } else {
        symbol.strip_suffix(".cold")
    }
}

/// Keeps the first occurrence of each item, in order.
fn unique(items: impl Iterator<Item = String>) -> impl Iterator<Item = String> {
    let mut seen = foldhash::HashSet::default();
    items.filter(move |s| seen.insert(s.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(format: Format) -> String {
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
        emit(
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
            for format in [Format::LdScript, Format::GoldOrder, Format::SymbolOrder] {
                let entries = [Entry {
                    name,
                    aliases,
                    size: 0,
                    unlikely_is_whole: true,
                }];
                let mut out = Vec::new();
                let err = emit(format, &entries, ScriptPlacement::default(), "t", &mut out)
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
            emit(
                Format::LdScript,
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
        assert_eq!(render(Format::List), "f\ng;a.c\n");
    }

    #[test]
    fn ld_script_brackets_the_sections_with_markers() {
        let s = render(Format::LdScript);
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
        assert!(s.trim_end().ends_with("INSERT BEFORE .text;"));
    }

    #[test]
    fn order_files_name_the_marker_sections_first_and_last() {
        let gold = render(Format::GoldOrder);
        let lines: Vec<&str> = gold.lines().collect();
        assert_eq!(lines.first(), Some(&START_SECTION));
        assert_eq!(lines.last(), Some(&END_SECTION));
        assert!(lines.contains(&".text.f_alias"));

        let sym = render(Format::SymbolOrder);
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
}
