//! Reading the text format as it streams in, so that memory is that of the graph itself: line by
//! line, and the call section of a large profile in chunks on two more threads ([`chunks`]).

use std::borrow::Cow;
use std::io::BufRead;

use super::{Func, FuncId, Graph, GraphError, NameIndex, MAGIC_PREFIX, VERSION};

mod block_lines;
mod calls;
mod chunks;
mod fn_lines;

use block_lines::BlockLines;
use calls::{CallLines, Names};
use fn_lines::FnLines;

pub(super) fn read(input: impl BufRead) -> Result<Graph, GraphError> {
    Reader::default().read(input, chunks::CHUNK_BYTES)
}

/// Reads with the call section in chunks of about `chunk_bytes`, however few functions there
/// are: tests compare it with reading line by line.
#[cfg(test)]
pub(super) fn read_in_chunks(input: impl BufRead, chunk_bytes: usize) -> Result<Graph, GraphError> {
    Reader {
        chunked_from: 0,
        ..Reader::default()
    }
    .read(input, chunk_bytes)
}

struct Reader {
    graph: Graph,
    ids: NameIndex,
    version: u32,
    calls: CallLines,
    blocks: BlockLines,
    /// How many functions a profile must declare before its call section for that section to
    /// be read in chunks on two threads; smaller profiles are read in milliseconds on one.
    chunked_from: usize,
}

impl Default for Reader {
    fn default() -> Self {
        Reader {
            graph: Graph::default(),
            ids: NameIndex::default(),
            version: 0,
            calls: CallLines::default(),
            blocks: BlockLines::default(),
            chunked_from: 10_000,
        }
    }
}

impl Reader {
    fn read(mut self, mut input: impl BufRead, chunk_bytes: usize) -> Result<Graph, GraphError> {
        let mut raw = Vec::new();
        let mut lineno = 0;
        let mut chunked = false;
        let mut fn_lines = FnLines::default();
        while {
            raw.clear();
            input.read_until(b'\n', &mut raw)? > 0
        } {
            lineno += 1;
            if lineno > 1 && kind(&raw) == b"fn" {
                if fn_lines.push(&raw, lineno) {
                    self.read_fn_lines(&mut fn_lines)?;
                }
                continue;
            }
            self.read_fn_lines(&mut fn_lines)?;
            if !chunked
                && lineno > 1
                && self.graph.funcs.len() >= self.chunked_from
                && kind(&raw) == b"call"
            {
                // The call section: the names are all declared (or a chunk says otherwise).
                chunked = true;
                let first = std::mem::take(&mut raw);
                let left = chunks::read(&mut self, &mut input, first, lineno, chunk_bytes)?;
                lineno = left.next_line - 1;
                for chunk in left.chunks {
                    for (i, line) in chunk.lines().enumerate() {
                        self.raw_line(line, chunk.first_line + i)?;
                    }
                }
                continue;
            }
            self.raw_line(&raw, lineno)?;
        }
        self.read_fn_lines(&mut fn_lines)?;
        if lineno == 0 {
            return Err(GraphError::NotAProfile);
        }
        if self.graph.funcs.is_empty() {
            return Err(GraphError::Empty);
        }
        let calls = std::mem::take(&mut self.calls);
        self.graph.calls = calls.calls;
        self.graph.sites = calls.sites;
        if calls.unsorted {
            self.refuse_repeated_calls()?;
        }
        (self.graph.blocks, self.graph.block_edges) =
            std::mem::take(&mut self.blocks).into_sorted();
        // Each count is at most MAX_COUNT; so are their sums, so that no sum a layout takes
        // (of a cluster, of the calls moved onto an edge) can overflow.
        if self.graph.total_samples() > MAX_COUNT {
            return Err(GraphError::TooMany { what: "samples" });
        }
        if self.graph.total_call_weight() > MAX_COUNT {
            return Err(GraphError::TooMany {
                what: "call weights",
            });
        }
        if self.graph.total_block_samples() > MAX_COUNT {
            return Err(GraphError::TooMany {
                what: "block samples",
            });
        }
        if self.graph.total_block_edge_count() > MAX_COUNT {
            return Err(GraphError::TooMany {
                what: "block edge counts",
            });
        }
        Ok(self.graph)
    }

    /// Line `lineno` of the file, as read (with its line break, if any).
    fn raw_line(&mut self, raw: &[u8], lineno: usize) -> Result<(), GraphError> {
        if lineno == 1 && raw.starts_with(PERF_DATA_MAGIC) {
            return Err(GraphError::PerfData);
        }
        let text = text(raw).map_err(|msg| match lineno {
            1 => GraphError::NotAProfile,
            line => GraphError::Malformed { line, msg },
        })?;
        if lineno == 1 {
            self.version = version(text)?;
            return Ok(());
        }
        self.line(text)
            .map_err(|msg| GraphError::Malformed { line: lineno, msg })
    }

    /// A caller and callee on two `call` lines would be two calls, each written back with the
    /// sites of both, which no reader accepts: the file is refused rather than guessed at.
    fn refuse_repeated_calls(&self) -> Result<(), GraphError> {
        let mut pairs: Vec<(FuncId, FuncId)> = self
            .graph
            .calls
            .iter()
            .map(|c| (c.caller, c.callee))
            .collect();
        pairs.sort_unstable();
        match pairs.windows(2).find(|w| w[0] == w[1]) {
            Some(&[(caller, callee), _]) => Err(GraphError::RepeatedCall {
                caller: self.graph.funcs[caller.index()].name.clone(),
                callee: self.graph.funcs[callee.index()].name.clone(),
            }),
            _ => Ok(()),
        }
    }

    fn line(&mut self, text: &str) -> Result<(), String> {
        let (kind, mut fields) = match record(text) {
            Record::Nothing => return Ok(()),
            Record::Header(key, value) => {
                self.graph.headers.push((key, value));
                return Ok(());
            }
            Record::Fields(kind, fields) => (kind, fields),
        };
        if kind != "site" {
            self.calls.close_call();
        }
        let version = self.version;
        let names = Names {
            funcs: &self.graph.funcs,
            ids: &self.ids,
        };
        match kind {
            "fn" => {
                let name = &*unescape(version, field(&mut fields, kind, "a name")?)?;
                let size = number(field(&mut fields, kind, "a size")?, "size")?;
                if size > MAX_FUNCTION_SIZE {
                    return Err(format!(
                        "size {size} of '{name}' is over {MAX_FUNCTION_SIZE} bytes: no function is that large (x86-64 and AArch64 code reaches at most 4 GiB); the profile is damaged or crafted"
                    ));
                }
                let samples = count(field(&mut fields, kind, "a sample count")?, "sample count")?;
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
                let name = &*unescape(version, field(&mut fields, kind, "a function name")?)?;
                let alias = &*unescape(version, field(&mut fields, kind, "an alias name")?)?;
                no_more(fields)?;
                let id = names.id(name)?;
                self.graph.funcs[id.index()].aliases.push(alias.to_string());
            }
            "call" => self.calls.call(names, version, fields)?,
            "site" if version >= 2 => self.calls.site(names, version, fields)?,
            "site" => {
                return Err(format!(
                    "'site' records need a v2 profile; this file's first line says v{version}"
                ))
            }
            "block" if version >= 4 => {
                self.blocks
                    .block(version, fields, &self.graph.funcs, |n| names.id(n))?
            }
            "block" => {
                return Err(format!(
                    "'block' records need a v4 profile; this file's first line says v{version}"
                ))
            }
            "block-edge" if version >= 5 => {
                self.blocks.block_edge(version, fields, |n| names.id(n))?
            }
            "block-edge" => {
                return Err(format!(
                    "'block-edge' records need a v5 profile; this file's first line says v{version}"
                ))
            }
            other => {
                return Err(format!(
                    "unknown record '{other}' (expected fn, alias, call, site, block or block-edge)"
                ))
            }
        }
        Ok(())
    }
}

/// What a perf.data file starts with (`perf record`'s file and pipe formats alike).
const PERF_DATA_MAGIC: &[u8] = b"PERFILE2";

/// A line's bytes as text, without its line break; invalid UTF-8 is refused.
fn text(raw: &[u8]) -> Result<&str, String> {
    let text = std::str::from_utf8(raw).map_err(|e| {
        format!(
            "byte {} of the line is not UTF-8 text: the file is binary or damaged",
            e.valid_up_to() + 1
        )
    })?;
    Ok(text.trim_end_matches(['\n', '\r']))
}

/// A line's first field, as bytes: where the call section starts and where chunks may end.
fn kind(raw: &[u8]) -> &[u8] {
    let start = raw
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(raw.len());
    let rest = &raw[start..];
    let end = rest
        .iter()
        .position(|b| b.is_ascii_whitespace())
        .unwrap_or(rest.len());
    &rest[..end]
}

/// The fields of a raw line (its kind first), as the file spells them: for starting a look-up
/// early, before the line is read for real.
fn raw_fields(raw: &[u8]) -> impl Iterator<Item = &[u8]> {
    raw.split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty())
}

type Fields<'t> = std::str::SplitAsciiWhitespace<'t>;

/// What a line holds, before its kind is looked at.
enum Record<'t> {
    /// A blank line or a comment.
    Nothing,
    /// A `# key: value` comment.
    Header(String, String),
    Fields(&'t str, Fields<'t>),
}

fn record(text: &str) -> Record<'_> {
    if let Some(comment) = text.strip_prefix('#') {
        return match comment.split_once(':') {
            Some((k, v)) => Record::Header(k.trim().to_string(), v.trim().to_string()),
            None => Record::Nothing,
        };
    }
    let mut fields = text.split_ascii_whitespace();
    match fields.next() {
        Some(kind) => Record::Fields(kind, fields),
        None => Record::Nothing,
    }
}

/// The next field of a `kind` record, which must have `what` there.
fn field<'t>(fields: &mut Fields<'t>, kind: &str, what: &str) -> Result<&'t str, String> {
    fields
        .next()
        .ok_or_else(|| format!("'{kind}' record lacks {what}"))
}

/// A name as the file has it: from v3 on, `%XX` stands for a byte that would break the line
/// (see `graph::escaped`). Earlier versions had no escapes: a `%` there is a `%`.
fn unescape(version: u32, token: &str) -> Result<Cow<'_, str>, String> {
    if version < 3 {
        return Ok(Cow::Borrowed(token));
    }
    super::unescaped(token)
}

/// The version a profile's first line names.
fn version(first_line: &str) -> Result<u32, GraphError> {
    let version = first_line
        .strip_prefix(MAGIC_PREFIX)
        .and_then(|v| v.parse::<u32>().ok())
        .filter(|&v| v >= 1)
        .ok_or(GraphError::NotAProfile)?;
    if version > VERSION {
        return Err(GraphError::NewerVersion(version));
    }
    Ok(version)
}

fn no_more<'a>(mut fields: impl Iterator<Item = &'a str>) -> Result<(), String> {
    match fields.next() {
        Some(extra) => Err(format!("unexpected field '{extra}' at the end")),
        None => Ok(()),
    }
}

/// The largest sample count or weight a profile may state, and the most its functions' samples
/// and its calls' weights may sum to: 2^48 samples are nine years of one CPU at 1 MHz, and
/// with it sums of sums (a layout's) stay far from overflowing.
pub const MAX_COUNT: u64 = 1 << 48;

fn count(field: &str, what: &str) -> Result<u64, String> {
    let n = number(field, what)?;
    if n > MAX_COUNT {
        return Err(format!(
            "{what} {n} is over {MAX_COUNT}: no recording counts that many; the profile is damaged or crafted"
        ));
    }
    Ok(n)
}

/// The largest function size a profile may state. Code addresses itself within ±2 GiB
/// (x86-64 RIP-relative, AArch64 ADRP), so no function comes near it; with it, sums of sizes
/// over any profile a machine can read stay far from overflowing.
pub const MAX_FUNCTION_SIZE: u64 = 1 << 32;

fn number(field: &str, what: &str) -> Result<u64, String> {
    field
        .parse()
        .map_err(|_| format!("{what} '{field}' is not a whole number"))
}
