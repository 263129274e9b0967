//! Reading the text format, line by line, so that memory is that of the graph itself.

use std::borrow::Cow;
use std::io::BufRead;

use super::{Call, CallSite, Func, FuncId, Graph, GraphError, NameIndex, MAGIC_PREFIX, VERSION};

pub(super) fn read(input: impl BufRead) -> Result<Graph, GraphError> {
    Reader::default().read(input)
}

#[derive(Default)]
struct Reader {
    graph: Graph,
    ids: NameIndex,
    version: u32,
    /// The last caller seen: canonical files list calls sorted by caller, so most call lines
    /// repeat it and skip a look-up.
    last_caller: Option<FuncId>,
    /// The `call` line the next `site` lines belong to, and what they may still weigh.
    open_call: Option<OpenCall>,
    /// Whether a call line did not follow the previous one in (caller, callee) order, as in
    /// canonical files: only then can a pair repeat, and only then is it looked for.
    calls_unsorted: bool,
}

struct OpenCall {
    call: Call,
    weight_left: u64,
    /// The offset of the call's last site so far.
    last_offset: Option<u64>,
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
                self.version = version(text)?;
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
        if self.calls_unsorted {
            self.refuse_repeated_calls()?;
        }
        Ok(self.graph)
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
        if kind != "site" {
            self.open_call = None;
        }
        let version = self.version;
        match kind {
            "fn" => {
                let name = &*unescape(version, next("a name")?)?;
                let size = number(next("a size")?, "size")?;
                if size > MAX_FUNCTION_SIZE {
                    return Err(format!(
                        "size {size} of '{name}' is over {MAX_FUNCTION_SIZE} bytes: no function is that large (x86-64 and AArch64 code reaches at most 4 GiB); the profile is damaged or crafted"
                    ));
                }
                let samples = count(next("a sample count")?, "sample count")?;
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
                let name = &*unescape(version, next("a function name")?)?;
                let alias = &*unescape(version, next("an alias name")?)?;
                no_more(fields)?;
                let id = self.id(name)?;
                self.graph.funcs[id.index()].aliases.push(alias.to_string());
            }
            "call" => {
                let caller = &*unescape(version, next("a caller")?)?;
                let callee = &*unescape(version, next("a callee")?)?;
                let weight = count(next("a weight")?, "weight")?;
                no_more(fields)?;
                let caller = match self.last_caller {
                    Some(id) if self.graph.funcs[id.index()].name == caller => id,
                    _ => self.id(caller)?,
                };
                self.last_caller = Some(caller);
                let callee = self.id(callee)?;
                let call = Call {
                    caller,
                    callee,
                    weight,
                };
                if let Some(last) = self.graph.calls.last() {
                    self.calls_unsorted |= (last.caller, last.callee) >= (caller, callee);
                }
                self.graph.calls.push(call);
                self.open_call = Some(OpenCall {
                    call,
                    weight_left: weight,
                    last_offset: None,
                });
            }
            "site" if self.version >= 2 => {
                let caller = &*unescape(version, next("a caller")?)?;
                let callee = &*unescape(version, next("a callee")?)?;
                let offset = number(next("an offset")?, "offset")?;
                let weight = count(next("a weight")?, "weight")?;
                no_more(fields)?;
                let site = self.site(caller, callee, offset, weight)?;
                self.graph.sites.push(site);
            }
            "site" => {
                return Err(format!(
                    "'site' records need a v2 profile; this file's first line says v{}",
                    self.version
                ))
            }
            other => {
                return Err(format!(
                    "unknown record '{other}' (expected fn, alias, call or site)"
                ))
            }
        }
        Ok(())
    }

    /// Checks a `site` line against its function and the `call` line it follows.
    fn site(
        &mut self,
        caller_name: &str,
        callee_name: &str,
        offset: u64,
        weight: u64,
    ) -> Result<CallSite, String> {
        let (caller, callee) = (self.id(caller_name)?, self.id(callee_name)?);
        let size = self.graph.funcs[caller.index()].size;
        if offset >= size {
            return Err(format!(
                "offset {offset} is past the end of '{caller_name}' ({size} bytes)"
            ));
        }
        let open = self
            .open_call
            .as_mut()
            .filter(|o| (o.call.caller, o.call.callee) == (caller, callee))
            .ok_or_else(|| {
                format!("'site {caller_name} {callee_name}' does not follow 'call {caller_name} {callee_name}' or another of its sites")
            })?;
        if open.last_offset.is_some_and(|last| offset <= last) {
            return Err(format!(
                "offset {offset} is not above the previous site's: sites go by increasing offset"
            ));
        }
        open.last_offset = Some(offset);
        open.weight_left = open.weight_left.checked_sub(weight).ok_or_else(|| {
            format!(
                "the sites of '{caller_name}' to '{callee_name}' weigh more than its call ({})",
                open.call.weight
            )
        })?;
        Ok(CallSite {
            caller,
            callee,
            offset,
            weight,
        })
    }

    fn id(&self, name: &str) -> Result<FuncId, String> {
        self.ids
            .get(&self.graph.funcs, name)
            .ok_or_else(|| format!("'{name}' is not declared by an earlier 'fn' line"))
    }
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

/// The largest sample count or weight a profile may state: 2^48 samples are nine years of one
/// CPU at 1 MHz, and with it sums over millions of records stay far from overflowing.
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
