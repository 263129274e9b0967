//! Who called the sampled function, from the two innermost frames of a stack sample and the code.
//!
//! The return address names the call that entered the frame below; its direct target `T` is the
//! function that call entered. Usually `T` is the sampled function `F` (or, for a function
//! sampled without its own frame, `F`'s caller). But compilers turn a call in tail position into
//! a jump (sibling calls, on at -O2 everywhere), which leaves no frame: `A` calls `B`, `B` jumps
//! to `C`, and a sample in `C` shows `A` as its caller. Taking the stack as it is would put every
//! leaf of `C` under `A`. So the chain from `T` to `F` is followed through the code:
//!
//! - `F` ran with its own frame (or the stack was unwound by CFI, which is exact everywhere):
//!   the chain is `T` then direct tail jumps to `F`.
//! - `F` had no frame of its own (its entry or `ret`, or a frameless leaf; see `frames.rs`): the
//!   frame below is its caller's, so the chain from `T` holds one direct call, with tail jumps
//!   before or after it; or none, when `F` runs in the frame of the function that jumped to it
//!   (gcc's `foo.cold` part, entered by a jump from `foo`). When `T` has no tail jumps and does
//!   not call `F` directly, `T` called it through a pointer: the edge is `T → F` with its site
//!   unknown.
//!
//! As for any stack sample, only the innermost edge gets the sample's weight: the last hop of the
//! chain, the call or jump that entered `F` (`B → C` in the example), at its site; the hops
//! before it are lower frames. It is used when every chain within [`MAX_HOPS`] ends in the same
//! hop. Chains that end in different hops (a leaf shared by several functions that `T` jumps
//! to) leave candidates, each a real call of `F` that the code shows reachable: `resolve.rs`
//! shares the sample among them by their own samples, or drops it if asked. No chain where
//! tail jumps leave `T` (an indirect jump), or more chains than the limits, leave the caller
//! undecided: no edge, counted. A call through the PLT or a pointer into a function with its
//! own frame leaves nothing to follow, and the stack is taken as unwound, unless other
//! functions enter that function by direct tail jumps: the pointer may have entered one of them
//! (PostgreSQL's walkers end in `return expression_tree_walker(...)`, its hash callbacks in a
//! jump to `hash_bytes`), so the caller is undecided. Into a function without its own frame,
//! the caller is unknown (no edge, counted).

use std::rc::Rc;

use foldhash::HashMap;

use super::code::Code;
use super::frames::Frames;
use super::function_index::FunctionIndex;
use crate::binary::{Function, StatedAddr};

/// The longest chain followed: deeper chains of tail calls are rare, and the search grows with
/// the length.
const MAX_HOPS: usize = 6;
/// The most callers a sample is shared among, and the most hops one search takes: beyond them
/// the caller is left undecided rather than the search left to grow.
const MAX_CANDIDATES: usize = 64;
const MAX_STEPS: usize = 20_000;
/// The hops all searches of one profile may take together: a crafted binary and recording with
/// millions of distinct pairs must not keep `profile` busy for hours. Past it, searches end
/// undecided (about a second of work on this project's machines).
const MAX_STEPS_IN_ALL: usize = 50_000_000;

/// One call or tail jump between two functions (indices into the binary's functions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hop {
    pub caller: u32,
    pub callee: u32,
    /// A byte of the call or jump in the caller: its last. Unknown when the caller has several.
    pub site: Option<u64>,
    pub tail: bool,
}

/// What the code says about a stack sample's caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    /// The call or tail jump that entered the sampled function; `through_tail` when tail jumps
    /// came between the stack's frames.
    Caller { hop: Hop, through_tail: bool },
    /// Chains of tail jumps that end in different hops could each have led here: one of these
    /// entered the sampled function; `through_tail` when any of the chains has a tail jump.
    Candidates { hops: Rc<[Hop]>, through_tail: bool },
    /// The function had no frame of its own and its caller was entered through a pointer.
    PointerCaller,
    /// Tail jumps leave the function the stack names, but no chain the code shows leads here
    /// (an indirect jump), or more chains than the search follows; or the stack names a call
    /// through a pointer into a function that others enter by tail jumps.
    Undecided,
    /// The return address lies in the binary but in no function.
    Unresolved,
}

/// What a search for chains found.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Paths {
    /// The distinct last hops of the chains (none when there is no chain), and whether any
    /// chain has a tail jump.
    Ends { last: Rc<[Hop]>, through_tail: bool },
    /// More chains, or a larger search, than the limits allow.
    TooMany,
}

pub(crate) struct Callers<'a> {
    functions: &'a [Function],
    index: &'a FunctionIndex,
    pub code: Code<'a>,
    frames: Frames,
    /// Per function decoded so far: its direct calls and jumps to other functions' entries.
    hops: HashMap<u32, Rc<[Hop]>>,
    paths: HashMap<(u32, u32, bool), Paths>,
    /// Per function, whether another enters it by a direct tail jump; the whole code is decoded
    /// for it at the first call through a pointer.
    jumped_into: Option<Vec<bool>>,
    /// Hops left for all searches together ([`MAX_STEPS_IN_ALL`]).
    steps_left: usize,
}

impl<'a> Callers<'a> {
    pub fn new(functions: &'a [Function], index: &'a FunctionIndex, code: Code<'a>) -> Callers<'a> {
        Callers {
            functions,
            index,
            code,
            frames: Frames::new(functions.len()),
            hops: HashMap::default(),
            paths: HashMap::default(),
            jumped_into: None,
            steps_left: MAX_STEPS_IN_ALL,
        }
    }

    /// The caller of function `callee`, sampled at `ip`, with `ret` the next frame's return
    /// address (all stated addresses in the binary). `exact` when `ret` is known to be the
    /// function's own (unwound by CFI, not by frame pointers).
    pub(crate) fn of_stack(&mut self, callee: u32, ip: u64, ret: u64, exact: bool) -> Found {
        let func = &self.functions[callee as usize];
        let entered = self.code.direct_call_before(ret);
        let framed = exact
            || entered == Some(func.start.0)
            || self
                .frames
                .has_own_frame(&self.code, callee as usize, func, StatedAddr(ip));
        if framed {
            let Some(caller) = self.index.at(ret - 1) else {
                return Found::Unresolved;
            };
            let unwound = Found::Caller {
                hop: Hop {
                    caller,
                    callee,
                    site: Some(ret - 1),
                    tail: false,
                },
                through_tail: false,
            };
            return match entered.and_then(|t| self.index.starting_at(t)) {
                // Through a pointer or the PLT: nothing to follow, unless the pointer may have
                // entered a function that jumped here.
                None if self.is_jumped_into(callee) => Found::Undecided,
                None => unwound,
                Some(t) if t == callee => unwound,
                Some(t) => match self.paths(t, callee, false) {
                    Paths::Ends { last, .. } => match *last {
                        [] => Found::Undecided,
                        [hop] => Found::Caller {
                            hop,
                            through_tail: true,
                        },
                        _ => Found::Candidates {
                            hops: last,
                            through_tail: true,
                        },
                    },
                    Paths::TooMany => Found::Undecided,
                },
            };
        }
        let Some(t) = entered.and_then(|t| self.index.starting_at(t)) else {
            return Found::PointerCaller;
        };
        // The chains with one call, and those with none (a part that runs in its jumper's frame;
        // only where the function jumps at all).
        let (last, through_tail) = match self.paths(t, callee, true) {
            Paths::Ends { last, through_tail } if self.hops_from(t).iter().any(|h| h.tail) => {
                match self.paths(t, callee, false) {
                    Paths::Ends {
                        last: in_frame,
                        through_tail: jumped,
                    } => {
                        let mut all = last.to_vec();
                        all.extend(in_frame.iter().filter(|h| !last.contains(h)));
                        (Rc::<[Hop]>::from(all), through_tail || jumped)
                    }
                    Paths::TooMany => return Found::Undecided,
                }
            }
            Paths::Ends { last, through_tail } => (last, through_tail),
            Paths::TooMany => return Found::Undecided,
        };
        match *last {
            [hop] => Found::Caller { hop, through_tail },
            [_, _, ..] => Found::Candidates {
                hops: last,
                through_tail,
            },
            [] if self.hops_from(t).iter().any(|h| h.tail) => Found::Undecided,
            [] => Found::Caller {
                hop: Hop {
                    caller: t,
                    callee,
                    site: None,
                    tail: false,
                },
                through_tail: false,
            },
        }
    }

    /// The chains from `from` to `to` of tail jumps and, if `one_call`, exactly one direct call.
    fn paths(&mut self, from: u32, to: u32, one_call: bool) -> Paths {
        if let Some(p) = self.paths.get(&(from, to, one_call)) {
            return p.clone();
        }
        let mut search = Search {
            to,
            path: Vec::new(),
            last: Vec::new(),
            through_tail: false,
            steps: 0,
            budget: MAX_STEPS.min(self.steps_left),
        };
        self.walk(&mut search, from, one_call);
        self.steps_left = self.steps_left.saturating_sub(search.steps);
        let found = if search.last.len() > MAX_CANDIDATES || search.steps > search.budget {
            Paths::TooMany
        } else {
            Paths::Ends {
                last: search.last.into(),
                through_tail: search.through_tail,
            }
        };
        self.paths.insert((from, to, one_call), found.clone());
        found
    }

    fn walk(&mut self, s: &mut Search, at: u32, need_call: bool) {
        let hops = self.hops_from(at);
        for hop in hops.iter() {
            s.steps += 1;
            if s.last.len() > MAX_CANDIDATES || s.steps > s.budget {
                return;
            }
            if !hop.tail && !need_call
                || hop.callee == at
                || s.path.iter().any(|h| h.caller == hop.callee)
            {
                continue; // a second call, or a loop
            }
            let need_call = need_call && hop.tail;
            s.path.push(*hop);
            if hop.callee == s.to {
                if !need_call {
                    s.through_tail |= s.path.iter().any(|h| h.tail);
                    if !s.last.contains(hop) {
                        s.last.push(*hop);
                    }
                }
            } else if s.path.len() < MAX_HOPS {
                self.walk(s, hop.callee, need_call);
            }
            s.path.pop();
        }
    }

    /// Whether another function enters `f` by a direct tail jump.
    fn is_jumped_into(&mut self, f: u32) -> bool {
        if self.jumped_into.is_none() {
            // Not through `hops_from`: its cache would then hold every function's hops.
            let mut jumped = vec![false; self.functions.len()];
            for func in self.functions {
                for t in self.code.transfers_out(func).iter().filter(|t| !t.is_call) {
                    if let Some(callee) = self.index.starting_at(t.target) {
                        jumped[callee as usize] = true;
                    }
                }
            }
            self.jumped_into = Some(jumped);
        }
        self.jumped_into
            .as_ref()
            .is_some_and(|j| j.get(f as usize).copied().unwrap_or(false))
    }

    /// Function `f`'s direct calls and jumps to other functions' entries, one hop per callee and
    /// kind, decoded once.
    fn hops_from(&mut self, f: u32) -> Rc<[Hop]> {
        if let Some(h) = self.hops.get(&f) {
            return Rc::clone(h);
        }
        let mut transfers = self.code.transfers_out(&self.functions[f as usize]);
        transfers.sort_unstable_by_key(|t| (t.target, t.is_call, t.site));
        let mut hops: Vec<Hop> = Vec::new();
        for t in transfers {
            let Some(callee) = self.index.starting_at(t.target) else {
                continue; // into the middle of code: not a call of a function
            };
            match hops.last_mut() {
                Some(h) if h.callee == callee && h.tail != t.is_call => h.site = None,
                _ => hops.push(Hop {
                    caller: f,
                    callee,
                    site: Some(t.site),
                    tail: !t.is_call,
                }),
            }
        }
        let hops: Rc<[Hop]> = hops.into();
        self.hops.insert(f, Rc::clone(&hops));
        hops
    }
}

struct Search {
    to: u32,
    path: Vec<Hop>,
    /// The distinct last hops of the chains found so far.
    last: Vec<Hop>,
    through_tail: bool,
    steps: usize,
    /// The hops this search may take: [`MAX_STEPS`], or fewer when all searches are near theirs.
    budget: usize,
}

#[cfg(test)]
#[path = "callers_tests.rs"]
mod tests;
