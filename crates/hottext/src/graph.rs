//! The weighted, directed call graph and its text format.
//!
//! Profiles are reviewed and reverted like code, so the canonical form is plain text, one record a
//! line, sorted so that re-running the same profile gives a byte-identical file:
//!
//! ```text
//! # hottext profile v1
//! # build-id: 3f2a…
//! fn    <name> <size-bytes> <self-samples>
//! alias <name> <other-name-at-the-same-address>
//! call  <caller> <callee> <weight>
//! ```
//!
//! `fn` lines come before the `alias` and `call` lines that name them. Unknown `#` lines are
//! kept as headers and otherwise ignored; any other malformed line is an error naming its number.

use std::fmt;
use std::io::{self, BufRead, Write};

use std::hash::BuildHasher;

use rustc_hash::FxHashMap;

/// Maps keyed by symbol names. FxHash clusters on names that differ only in their last bytes
/// (`fn_0001234`), which made look-ups half of `order`'s time on a 1 M-function profile.
pub type NameMap<V> = foldhash::HashMap<String, V>;

/// Index of a function in [`Graph::funcs`].
pub type FuncId = u32;

/// The first line of every profile; readers insist on it so that a wrong file fails early.
pub const MAGIC: &str = "# hottext profile v1";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Func {
    /// Symbol name as in the ELF symbol table (mangled).
    pub name: String,
    /// Size in bytes, from the symbol table.
    pub size: u64,
    /// Samples whose innermost frame was in this function.
    pub samples: u64,
    /// Other symbol names at the same address (identical-code folding, C aliases).
    pub aliases: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    pub caller: FuncId,
    pub callee: FuncId,
    pub weight: u64,
}

/// Where in the caller a call sits: the byte offset of the call instruction from the caller's
/// start, and how many samples saw a call from there. A caller may call one callee from several
/// sites; the [`Call`] of the pair carries the sum of their weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallSite {
    pub caller: FuncId,
    pub callee: FuncId,
    pub offset: u64,
    pub weight: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Graph {
    /// `# key: value` header lines, in file order (build-id, sample kind, …).
    pub headers: Vec<(String, String)>,
    pub funcs: Vec<Func>,
    /// At most one entry per (caller, callee) pair.
    pub calls: Vec<Call>,
    /// Call sites, where the profile knows them (empty for profiles that predate them).
    pub sites: Vec<CallSite>,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GraphError {
    #[error("line {line}: {msg}")]
    Malformed { line: usize, msg: String },
    #[error("the file does not start with '{MAGIC}' (is it a hottext profile?)")]
    NotAProfile,
    #[error("the profile is empty: it names no function")]
    Empty,
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl Graph {
    /// Adds a function and returns its id. Names must be unique; see [`GraphBuilder`] for
    /// accumulating samples and calls by name.
    pub fn add_func(&mut self, func: Func) -> FuncId {
        self.funcs.push(func);
        (self.funcs.len() - 1) as FuncId
    }

    pub fn header(&self, key: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn set_header(&mut self, key: &str, value: impl fmt::Display) {
        let value = value.to_string();
        match self.headers.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.headers.push((key.to_string(), value)),
        }
    }

    pub fn total_samples(&self) -> u64 {
        self.funcs.iter().map(|f| f.samples).sum()
    }

    /// Reads the text format. Streams line by line, so memory is that of the graph itself.
    pub fn read(input: impl BufRead) -> Result<Graph, GraphError> {
        Reader::default().read(input)
    }

    /// Writes the canonical text: functions sorted by name, calls by (caller, callee) name.
    pub fn write(&self, mut out: impl Write) -> io::Result<()> {
        writeln!(out, "{MAGIC}")?;
        for (k, v) in &self.headers {
            writeln!(out, "# {k}: {v}")?;
        }
        let mut by_name: Vec<FuncId> = (0..self.funcs.len() as FuncId).collect();
        by_name.sort_unstable_by(|&a, &b| {
            self.funcs[a as usize]
                .name
                .cmp(&self.funcs[b as usize].name)
        });
        for &id in &by_name {
            let f = &self.funcs[id as usize];
            writeln!(out, "fn {} {} {}", f.name, f.size, f.samples)?;
        }
        for &id in &by_name {
            let f = &self.funcs[id as usize];
            let mut aliases: Vec<&String> = f.aliases.iter().collect();
            aliases.sort_unstable();
            for a in aliases {
                writeln!(out, "alias {} {}", f.name, a)?;
            }
        }
        // Rank by name so calls sort without comparing strings millions of times.
        let mut rank = vec![0u32; self.funcs.len()];
        for (r, &id) in by_name.iter().enumerate() {
            rank[id as usize] = r as u32;
        }
        let mut calls = self.calls.clone();
        calls.sort_unstable_by_key(|c| (rank[c.caller as usize], rank[c.callee as usize]));
        for c in &calls {
            let (a, b) = (
                &self.funcs[c.caller as usize].name,
                &self.funcs[c.callee as usize].name,
            );
            writeln!(out, "call {a} {b} {}", c.weight)?;
        }
        out.flush()
    }
}

#[derive(Default)]
struct Reader {
    graph: Graph,
    ids: NameIndex,
    /// The last caller seen: canonical files list calls sorted by caller, so most call lines
    /// repeat it and skip a look-up.
    last_caller: Option<FuncId>,
}

impl Reader {
    fn read(mut self, mut input: impl BufRead) -> Result<Graph, GraphError> {
        let mut line = String::new();
        let mut lineno = 0;
        while {
            line.clear();
            input.read_line(&mut line)? > 0
        } {
            lineno += 1;
            let text = line.trim_end_matches(['\n', '\r']);
            if lineno == 1 {
                if text != MAGIC {
                    return Err(GraphError::NotAProfile);
                }
                continue;
            }
            self.line(text)
                .map_err(|msg| GraphError::Malformed { line: lineno, msg })?;
        }
        if lineno == 0 {
            return Err(GraphError::NotAProfile);
        }
        if self.graph.funcs.is_empty() {
            return Err(GraphError::Empty);
        }
        Ok(self.graph)
    }

    fn line(&mut self, text: &str) -> Result<(), String> {
        if let Some(comment) = text.strip_prefix('#') {
            if let Some((k, v)) = comment.split_once(':') {
                self.graph
                    .headers
                    .push((k.trim().to_string(), v.trim().to_string()));
            }
            return Ok(());
        }
        let mut fields = text.split_ascii_whitespace();
        let Some(kind) = fields.next() else {
            return Ok(()); // blank line
        };
        let mut next = |what: &str| {
            fields
                .next()
                .ok_or_else(|| format!("'{kind}' record lacks {what}"))
        };
        match kind {
            "fn" => {
                let name = next("a name")?;
                let size = number(next("a size")?, "size")?;
                let samples = number(next("a sample count")?, "sample count")?;
                no_more(fields)?;
                if self.ids.get(&self.graph.funcs, name).is_some() {
                    return Err(format!("function '{name}' is declared twice"));
                }
                let id = self.graph.add_func(Func {
                    name: name.to_string(),
                    size,
                    samples,
                    aliases: vec![],
                });
                self.ids.insert(&self.graph.funcs, id);
            }
            "alias" => {
                let name = next("a function name")?;
                let alias = next("an alias name")?;
                no_more(fields)?;
                let id = self.id(name)?;
                self.graph.funcs[id as usize]
                    .aliases
                    .push(alias.to_string());
            }
            "call" => {
                let caller = next("a caller")?;
                let callee = next("a callee")?;
                let weight = number(next("a weight")?, "weight")?;
                no_more(fields)?;
                let caller = match self.last_caller {
                    Some(id) if self.graph.funcs[id as usize].name == caller => id,
                    _ => self.id(caller)?,
                };
                self.last_caller = Some(caller);
                let callee = self.id(callee)?;
                self.graph.calls.push(Call {
                    caller,
                    callee,
                    weight,
                });
            }
            other => {
                return Err(format!(
                    "unknown record '{other}' (expected fn, alias or call)"
                ))
            }
        }
        Ok(())
    }

    fn id(&self, name: &str) -> Result<FuncId, String> {
        self.ids
            .get(&self.graph.funcs, name)
            .ok_or_else(|| format!("'{name}' is not declared by an earlier 'fn' line"))
    }
}

fn no_more<'a>(mut fields: impl Iterator<Item = &'a str>) -> Result<(), String> {
    match fields.next() {
        Some(extra) => Err(format!("unexpected field '{extra}' at the end")),
        None => Ok(()),
    }
}

/// Finds functions by name without storing each name a second time: the table holds ids and
/// compares against `funcs[id].name`. On a 1 M-function profile a second copy of every name
/// cost more in allocations and cache misses than the look-ups themselves.
#[derive(Default)]
struct NameIndex {
    table: hashbrown::HashTable<FuncId>,
    hasher: foldhash::fast::FixedState,
}

impl NameIndex {
    fn get(&self, funcs: &[Func], name: &str) -> Option<FuncId> {
        let hash = self.hasher.hash_one(name);
        self.table
            .find(hash, |&id| funcs[id as usize].name == name)
            .copied()
    }

    /// Indexes `funcs[id]`, whose name must not be indexed yet.
    fn insert(&mut self, funcs: &[Func], id: FuncId) {
        let hasher = &self.hasher;
        let hash = hasher.hash_one(&funcs[id as usize].name);
        self.table.insert_unique(hash, id, |&other| {
            hasher.hash_one(&funcs[other as usize].name)
        });
    }
}

fn number(field: &str, what: &str) -> Result<u64, String> {
    field
        .parse()
        .map_err(|_| format!("{what} '{field}' is not a whole number"))
}

/// Accumulates functions, samples and calls by name, merging repeated calls, and produces a
/// [`Graph`]. Used by the profile builder and by tests.
#[derive(Default)]
pub struct GraphBuilder {
    graph: Graph,
    ids: NameIndex,
    calls: FxHashMap<(FuncId, FuncId), u64>,
}

impl GraphBuilder {
    /// Returns the id of `name`, declaring it with `size` on first sight.
    pub fn func(&mut self, name: &str, size: u64) -> FuncId {
        if let Some(id) = self.ids.get(&self.graph.funcs, name) {
            return id;
        }
        let id = self.graph.add_func(Func {
            name: name.to_string(),
            size,
            samples: 0,
            aliases: vec![],
        });
        self.ids.insert(&self.graph.funcs, id);
        id
    }

    pub fn alias(&mut self, id: FuncId, alias: &str) {
        let aliases = &mut self.graph.funcs[id as usize].aliases;
        if !aliases.iter().any(|a| a == alias) {
            aliases.push(alias.to_string());
        }
    }

    pub fn add_samples(&mut self, id: FuncId, samples: u64) {
        self.graph.funcs[id as usize].samples += samples;
    }

    pub fn add_call(&mut self, caller: FuncId, callee: FuncId, weight: u64) {
        *self.calls.entry((caller, callee)).or_default() += weight;
    }

    pub fn header(&mut self, key: &str, value: impl fmt::Display) {
        self.graph.set_header(key, value);
    }

    pub fn finish(mut self) -> Graph {
        let mut calls: Vec<Call> = self
            .calls
            .into_iter()
            .map(|((caller, callee), weight)| Call {
                caller,
                callee,
                weight,
            })
            .collect();
        calls.sort_unstable_by_key(|c| (c.caller, c.callee));
        self.graph.calls = calls;
        self.graph
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "# hottext profile v1\n# build-id: abcd\n# future-key: kept\n\
        fn A 100 0\nfn B 100 100\nalias B B_alias\ncall A B 100\n";

    #[test]
    fn round_trips_byte_identical() {
        let g = Graph::read(SAMPLE.as_bytes()).unwrap();
        assert_eq!(g.header("build-id"), Some("abcd"));
        assert_eq!(g.funcs[1].aliases, vec!["B_alias".to_string()]);
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
}
