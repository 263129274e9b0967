//! Reading back which functions a linker input asks for, so that `verify --binary --planned`
//! can compare the plan with what the linker placed: a pattern that matches no object, or an
//! order file that pulls in every static namesake, shows only in that comparison.
//!
//! The format is told by the file itself, as [`super::emit`] writes it: an ld script has a
//! `SECTIONS` block, a gold order file starts with the start marker's section, an lld order
//! file with the start marker; anything else is a list (`order --format list`), one profile
//! name a line. Every symbol read is checked as the writer checks it, so a file that is no
//! linker input of ours is refused with its line number rather than compared.

use super::format::Names;
use super::{check_symbol, gold_order, ld_script, list, lld_order};
use super::{EmitError, Format, END_SECTION, SECTION_PREFIXES, START_SECTION};
use crate::binary::{symbol_of, HOT_END, HOT_START};

/// The functions a linker input places, by symbol, in the file's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The format the file is in, told by its first lines.
    pub format: &'static Format,
    /// Each planned symbol once, with how many functions of that name the file places one by
    /// one: more than 1 only where the ld script places static namesakes from their objects
    /// (or a list names them qualified). Order files name a symbol once, whatever its
    /// namesakes.
    pub symbols: Vec<(String, u32)>,
}

impl Plan {
    /// The functions planned.
    pub fn functions(&self) -> u64 {
        self.symbols.iter().map(|&(_, n)| u64::from(n)).sum()
    }
}

/// A line that is not what the format's writer writes.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: {problem}")]
pub struct PlanError {
    /// The line, counted from 1.
    pub line: usize,
    /// What is wrong with it.
    pub problem: String,
}

/// Reads the plan of a linker input written by `order` or `fetch` (or a list).
pub fn read_plan(text: &str) -> Result<Plan, PlanError> {
    let lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty());
    let first = lines.clone().next().map_or("", |(_, l)| l);
    let mut symbols = Vec::new();
    let mut index = foldhash::HashMap::<String, usize>::default();
    let mut add = |symbol: &str| {
        let at = *index.entry(symbol.to_string()).or_insert_with(|| {
            symbols.push((symbol.to_string(), 0));
            symbols.len() - 1
        });
        symbols[at].1 += 1;
    };
    let format: &'static Format = if text.lines().any(|l| l.trim() == "SECTIONS") {
        &ld_script::FORMAT
    } else if first == START_SECTION {
        &gold_order::FORMAT
    } else if first == HOT_START {
        &lld_order::FORMAT
    } else {
        &list::FORMAT
    };
    let names = if *format == list::FORMAT {
        Names::Any
    } else {
        Names::Symbols
    };
    match format.name {
        name if name == ld_script::FORMAT.name => {
            // The placing lines lie between the markers; the others (alignment rules,
            // padding) assign to `.`.
            let body = lines
                .skip_while(|(_, l)| !l.starts_with(HOT_START))
                .skip(1)
                .take_while(|(_, l)| !l.starts_with(HOT_END));
            for (n, line) in body.filter(|(_, l)| !l.starts_with('.')) {
                let first_section = line
                    .split_once('(')
                    .and_then(|(_, rest)| rest.split([' ', ')']).next())
                    .and_then(|s| s.strip_prefix(SECTION_PREFIXES[0]));
                let symbol = first_section.ok_or_else(|| PlanError {
                    line: n,
                    problem: format!("expected `<objects>(.text.<symbol> …)`, found {line:?}"),
                })?;
                add(checked(names, symbol, n)?);
            }
        }
        name if name == gold_order::FORMAT.name => {
            let sections: Vec<(usize, &str)> = lines
                // After the end marker come only the parts placed after the range.
                .take_while(|(_, l)| *l != END_SECTION)
                .filter(|(_, l)| *l != START_SECTION)
                .collect();
            let plain: foldhash::HashSet<&str> = sections
                .iter()
                .filter_map(|(_, s)| s.strip_prefix(SECTION_PREFIXES[0]))
                .collect();
            for &(n, section) in &sections {
                let symbol =
                    section
                        .strip_prefix(SECTION_PREFIXES[0])
                        .ok_or_else(|| PlanError {
                            line: n,
                            problem: format!(
                                "expected a section `.text.<symbol>`, found {section:?}"
                            ),
                        })?;
                // `.text.hot.f` after `.text.f`: another section of the same function.
                let other_section_of = SECTION_PREFIXES[1..].iter().any(|p| {
                    section
                        .strip_prefix(p)
                        .is_some_and(|s| plain.contains(s) && s != symbol)
                });
                if !other_section_of {
                    add(checked(names, symbol, n)?);
                }
            }
        }
        _ => {
            for (n, line) in lines.filter(|(_, l)| *l != HOT_START && *l != HOT_END) {
                checked(names, line, n)?;
                add(symbol_of(line));
            }
        }
    }
    Ok(Plan { format, symbols })
}

/// `symbol` if the writer would have written it (see `check_symbol`).
fn checked(names: Names, symbol: &str, line: usize) -> Result<&str, PlanError> {
    check_symbol(names, "function", symbol).map_err(|e| PlanError {
        line,
        problem: match e {
            EmitError::UnsafeName { name, bad, .. } => {
                format!("{name:?} is no symbol of a linker input: it holds {bad:?}")
            }
            other => other.to_string(),
        },
    })?;
    Ok(symbol)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::{emit_entries, Entry, ScriptPlacement};

    fn written(format: &Format) -> String {
        let aliases = vec!["f_alias".to_string()];
        let entry = |name| Entry {
            name,
            aliases: &[],
            size: 16,
            unlikely_is_whole: true,
        };
        let entries = [
            Entry {
                aliases: &aliases,
                ..entry("f")
            },
            entry("g;a.c"),
            entry("g;b.c"),
            entry("hot.x"),
        ];
        let mut out = Vec::new();
        emit_entries(format, &entries, ScriptPlacement::default(), "t", &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn symbols(plan: &Plan) -> Vec<(&str, u32)> {
        plan.symbols.iter().map(|(s, n)| (s.as_str(), *n)).collect()
    }

    #[test]
    fn the_plan_of_each_format_is_read_back() {
        let script = read_plan(&written(&ld_script::FORMAT)).unwrap();
        assert_eq!(script.format, &ld_script::FORMAT);
        assert_eq!(symbols(&script), [("f", 1), ("g", 2), ("hot.x", 1)]);
        assert_eq!(script.functions(), 4);

        let gold = read_plan(&written(&gold_order::FORMAT)).unwrap();
        assert_eq!(gold.format, &gold_order::FORMAT);
        assert_eq!(
            symbols(&gold),
            [("f", 1), ("f_alias", 1), ("g", 1), ("hot.x", 1)]
        );

        let lld = read_plan(&written(&lld_order::FORMAT)).unwrap();
        assert_eq!(lld.format, &lld_order::FORMAT);
        assert_eq!(symbols(&lld), symbols(&gold));

        let list = read_plan(&written(&list::FORMAT)).unwrap();
        assert_eq!(list.format, &list::FORMAT);
        assert_eq!(symbols(&list), [("f", 1), ("g", 2), ("hot.x", 1)]);
    }

    #[test]
    fn a_line_no_writer_of_ours_writes_is_refused_with_its_number() {
        let err = read_plan("__hot_start\nf\nx)}y\n__hot_end\n").unwrap_err();
        assert_eq!(err.line, 3, "{err}");
        let script = "SECTIONS\n{\n  .text.hot : ALIGN(0x200000)\n  {\n    __hot_start = .;\n    *(.data.x)\n    __hot_end = .;\n  }\n}\n";
        assert_eq!(read_plan(script).unwrap_err().line, 6);
        let err = read_plan(".text.hottext.start\n.text.f\n.data\n").unwrap_err();
        assert_eq!(err.line, 3, "{err}");
    }
}
