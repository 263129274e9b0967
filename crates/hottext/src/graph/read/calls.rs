//! `call` and `site` lines. They only look names up among the functions declared before them,
//! so a stretch of them can be read on its own, on another thread ([`super::chunks`]).

use super::{count, field, no_more, number, raw_fields, unescape, Fields};
use crate::graph::{Call, CallSite, Func, FuncId, NameIndex};

/// The functions declared so far, which call lines name.
#[derive(Clone, Copy)]
pub(super) struct Names<'a> {
    pub funcs: &'a [Func],
    pub ids: &'a NameIndex,
}

/// Lines ahead of the one read at which a callee's look-up starts loading its slot.
pub(super) const SLOT_AHEAD: usize = 16;
/// Lines ahead at which it starts loading the function the slot names, by then loaded.
const FUNC_AHEAD: usize = 8;

/// Starts the look-ups of the callees of the call lines ahead of the one being read, a level
/// at a time (see [`NameIndex`]): on a 1 M-function profile those look-ups were most of the
/// reading, each waiting on one cache miss after another.
pub(super) struct CalleePrefetch {
    /// The callee's hash of each line from the one read to [`SLOT_AHEAD`] past it, by line
    /// number modulo the length.
    hashes: [Option<u64>; 2 * SLOT_AHEAD],
}

impl CalleePrefetch {
    pub(super) fn new() -> CalleePrefetch {
        CalleePrefetch {
            hashes: [None; 2 * SLOT_AHEAD],
        }
    }

    /// Before reading line `i`: `ahead` is line `i + SLOT_AHEAD`, if there is one.
    pub(super) fn step(&mut self, names: Names<'_>, i: usize, ahead: Option<&[u8]>) {
        let ring = self.hashes.len();
        let hash = ahead.and_then(callee).map(|name| names.ids.hash(name));
        if let Some(hash) = hash {
            names.ids.prefetch_slot(hash);
        }
        self.hashes[(i + SLOT_AHEAD) % ring] = hash;
        if let Some(hash) = self.hashes[(i + FUNC_AHEAD) % ring] {
            names.ids.prefetch_func(names.funcs, hash);
        }
    }
}

/// The callee of a raw `call` line, as the file spells it (an escaped name then hashes
/// differently, and its look-up is merely not started early).
fn callee(raw: &[u8]) -> Option<&[u8]> {
    let mut fields = raw_fields(raw);
    (fields.next()? == b"call").then(|| fields.nth(1)).flatten()
}

impl Names<'_> {
    pub(super) fn id(&self, name: &str) -> Result<FuncId, String> {
        self.ids
            .get(self.funcs, name)
            .ok_or_else(|| format!("'{name}' is not declared by an earlier 'fn' line"))
    }
}

/// The calls and sites of consecutive lines, and what reading the next one needs to know.
#[derive(Default)]
pub(super) struct CallLines {
    pub calls: Vec<Call>,
    pub sites: Vec<CallSite>,
    /// The last caller seen: canonical files list calls sorted by caller, so most call lines
    /// repeat it and skip a look-up.
    last_caller: Option<FuncId>,
    /// The `call` line the next `site` lines belong to, and what they may still weigh.
    open_call: Option<OpenCall>,
    /// Whether a call line did not follow the previous one in (caller, callee) order, as in
    /// canonical files: only then can a pair repeat, and only then is it looked for.
    pub unsorted: bool,
}

struct OpenCall {
    call: Call,
    weight_left: u64,
    /// The offset of the call's last site so far.
    last_offset: Option<u64>,
}

impl CallLines {
    /// Any line but a `site` line ends the sites of the call before it.
    pub(super) fn close_call(&mut self) {
        self.open_call = None;
    }

    /// A `call` line's fields after its kind.
    pub(super) fn call(
        &mut self,
        names: Names<'_>,
        version: u32,
        mut fields: Fields<'_>,
    ) -> Result<(), String> {
        let caller = &*unescape(version, field(&mut fields, "call", "a caller")?)?;
        let callee = &*unescape(version, field(&mut fields, "call", "a callee")?)?;
        let weight = count(field(&mut fields, "call", "a weight")?, "weight")?;
        no_more(fields)?;
        let caller = match self.last_caller {
            Some(id) if names.funcs[id.index()].name == caller => id,
            _ => names.id(caller)?,
        };
        self.last_caller = Some(caller);
        let call = Call {
            caller,
            callee: names.id(callee)?,
            weight,
        };
        self.follow(call);
        self.calls.push(call);
        self.open_call = Some(OpenCall {
            call,
            weight_left: weight,
            last_offset: None,
        });
        Ok(())
    }

    /// Notes whether `call` is out of order after the last call line.
    fn follow(&mut self, call: Call) {
        if let Some(last) = self.calls.last() {
            self.unsorted |= (last.caller, last.callee) >= (call.caller, call.callee);
        }
    }

    /// A `site` line's fields after its kind, checked against its function and the `call`
    /// line it follows.
    pub(super) fn site(
        &mut self,
        names: Names<'_>,
        version: u32,
        mut fields: Fields<'_>,
    ) -> Result<(), String> {
        let caller_name = &*unescape(version, field(&mut fields, "site", "a caller")?)?;
        let callee_name = &*unescape(version, field(&mut fields, "site", "a callee")?)?;
        let offset = number(field(&mut fields, "site", "an offset")?, "offset")?;
        let weight = count(field(&mut fields, "site", "a weight")?, "weight")?;
        no_more(fields)?;
        let (caller, callee) = (names.id(caller_name)?, names.id(callee_name)?);
        let size = names.funcs[caller.index()].size;
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
        self.sites.push(CallSite {
            caller,
            callee,
            offset,
            weight,
        });
        Ok(())
    }

    /// Appends the lines read right after these, which start with a `call` line (so that no
    /// site is left open across the seam).
    pub(super) fn append(&mut self, next: CallLines) {
        if let Some(&first) = next.calls.first() {
            self.follow(first);
        }
        self.unsorted |= next.unsorted;
        self.calls.extend(next.calls);
        self.sites.extend(next.sites);
        self.last_caller = next.last_caller;
        self.open_call = next.open_call;
    }
}

#[cfg(test)]
mod tests {
    use super::callee;

    #[test]
    fn the_callee_ahead_is_the_third_field_of_a_call_line_only() {
        assert_eq!(
            callee(b"call main  parse_args\t12\n"),
            Some(&b"parse_args"[..])
        );
        assert_eq!(callee(b"  call a b 1"), Some(&b"b"[..]));
        assert_eq!(callee(b"call main\n"), None);
        assert_eq!(callee(b"site main parse 4 1\n"), None);
        assert_eq!(callee(b"caller a b 1\n"), None);
        assert_eq!(callee(b"\n"), None);
    }
}
