//! The name of a function as a person reads it: Itanium C++ (`_ZN7leveldb2DB3PutE…`) and Rust
//! (legacy `_ZN…17h<hash>E` and v0 `_R…`) symbols demangled, every other name as it is.
//!
//! Only what people read goes through here: tables, warnings, commit messages, the report.
//! Profiles, linker inputs and JSON documents keep the mangled symbol, the one name that
//! identifies a function to a linker and to another tool (docs/output.md says so).
//!
//! A profile qualifies a local symbol that several files define as `name;file` (and a further
//! namesake as `name;file;2`): the qualifier is shown after the readable name, in brackets.

use std::borrow::Cow;

/// `name` as a person reads it; a name that is not mangled (C, or a symbol the demanglers
/// refuse) comes back unchanged.
pub fn readable(name: &str) -> Cow<'_, str> {
    let (symbol, qualifier) = match name.split_once(';') {
        Some((symbol, qualifier)) => (symbol, Some(qualifier)),
        None => (name, None),
    };
    let demangled = demangle(symbol);
    match (demangled, qualifier) {
        (None, _) => Cow::Borrowed(name),
        (Some(d), None) => Cow::Owned(d),
        (Some(d), Some(q)) => Cow::Owned(format!("{d} [{q}]")),
    }
}

/// [`readable`] in at most `width` characters, for a table's column: template arguments are
/// dropped first (`std::vector<…>::push_back(…)`), then the parameters, then the front of the
/// scope, so that what stays is the function's own name.
pub fn readable_short(name: &str, width: usize) -> String {
    let full = readable(name);
    if chars(&full) <= width {
        return full.into_owned();
    }
    let without_templates = elide_between(&full, '<', '>');
    if chars(&without_templates) <= width {
        return without_templates;
    }
    let without_params = elide_between(&without_templates, '(', ')');
    if chars(&without_params) <= width {
        return without_params;
    }
    let keep = width.saturating_sub(1);
    let skip = chars(&without_params) - keep;
    format!("…{}", without_params.chars().skip(skip).collect::<String>())
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// `s` with everything inside each outermost `open`…`close` pair written `…`. C++'s
/// `operator<`, `operator<<` and `operator->` are not brackets; when what follows leaves
/// the pairs unbalanced, `s` is returned whole rather than cut at the wrong place.
fn elide_between(s: &str, open: char, close: char) -> String {
    let mut out = String::with_capacity(s.len());
    let mut depth = 0usize;
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        if let Some(op) = [
            "operator<<=",
            "operator<<",
            "operator<=",
            "operator<",
            "operator->",
        ]
        .iter()
        .find(|op| rest.starts_with(*op))
        {
            if depth == 0 {
                out.push_str(op);
            }
            rest = &rest[op.len()..];
            continue;
        }
        if c == open {
            if depth == 0 {
                out.push(open);
                out.push('…');
            }
            depth += 1;
        } else if c == close {
            let Some(d) = depth.checked_sub(1) else {
                return s.to_string();
            };
            depth = d;
            if depth == 0 {
                out.push(close);
            }
        } else if depth == 0 {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    if depth == 0 {
        out
    } else {
        s.to_string()
    }
}

/// The demangled symbol, or `None` when it is not a mangled name either demangler takes.
fn demangle(symbol: &str) -> Option<String> {
    if !(symbol.starts_with("_Z") || symbol.starts_with("_R")) {
        return None;
    }
    // Rust first: its legacy names are valid Itanium names too, but only rustc-demangle
    // knows to leave out the hash (`{:#}`).
    if let Ok(rust) = rustc_demangle::try_demangle(symbol) {
        return Some(format!("{rust:#}"));
    }
    let cpp = cpp_demangle::Symbol::new(symbol).ok()?;
    cpp.demangle().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpp_names_are_demangled_and_c_names_kept() {
        assert_eq!(
            readable("_ZN7leveldb6DBImpl5WriteERKNS_12WriteOptionsEPNS_10WriteBatchE"),
            "leveldb::DBImpl::Write(leveldb::WriteOptions const&, leveldb::WriteBatch*)"
        );
        assert_eq!(readable("main"), "main");
        assert!(matches!(
            readable("ngx_http_process_request"),
            Cow::Borrowed(_)
        ));
        // gcc's split-off parts keep saying what they are.
        assert_eq!(readable("_Z3hotv.cold"), "hot() [clone .cold]");
    }

    #[test]
    fn rust_names_lose_their_hash() {
        assert_eq!(
            readable("_ZN4core3fmt5write17h0123456789abcdefE"),
            "core::fmt::write"
        );
        assert_eq!(readable("_RNvCs1234_7mycrate3foo"), "mycrate::foo");
    }

    #[test]
    fn a_qualified_local_symbol_keeps_its_file() {
        assert_eq!(readable("_ZL4stepv;a.cpp"), "step() [a.cpp]");
        assert_eq!(readable("_ZL4stepv;a.cpp;2"), "step() [a.cpp;2]");
        assert_eq!(readable("step;a.c"), "step;a.c");
    }

    #[test]
    fn what_the_demanglers_refuse_stays_as_it_is() {
        for name in ["_Z", "_ZN", "_Zfoo", "_R", "_ZN3foo"] {
            assert_eq!(readable(name), name);
        }
    }

    #[test]
    fn short_names_drop_templates_then_parameters_then_scope() {
        let name = "_ZNSt6vectorIiSaIiEE9push_backERKi";
        assert_eq!(
            readable(name),
            "std::vector<int, std::allocator<int> >::push_back(int const&)"
        );
        assert_eq!(
            readable_short(name, 40),
            "std::vector<…>::push_back(int const&)"
        );
        assert_eq!(readable_short(name, 30), "std::vector<…>::push_back(…)");
        assert_eq!(readable_short(name, 12), "…ush_back(…)");
    }

    #[test]
    fn operators_are_not_brackets() {
        assert_eq!(
            elide_between("operator<<(std::ostream&, Foo<int> const&)", '<', '>'),
            "operator<<(std::ostream&, Foo<…> const&)"
        );
        assert_eq!(elide_between("a<b", '<', '>'), "a<b");
    }
}
