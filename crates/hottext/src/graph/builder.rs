//! [`GraphBuilder`]: the one way besides the reader to make a [`Graph`], summing what it is
//! given by name so that repeated functions, calls and sites become one.

use std::cmp::Reverse;
use std::fmt;

use foldhash::HashMap;

use super::names::NameIndex;
use super::{
    block_edges, blocks, Call, CallSite, Func, FuncId, Graph, MAX_COUNT, MAX_SITES_PER_CALL,
};

/// Accumulates functions, samples, calls and call sites by name, merging repeated ones, and
/// produces a [`Graph`]. Used by the profile builder, the pipeline's merge and rematch, and tests.
#[derive(Default)]
pub struct GraphBuilder {
    graph: Graph,
    ids: NameIndex,
    calls: HashMap<(FuncId, FuncId), u64>,
    sites: HashMap<(FuncId, FuncId, u64), u64>,
    pub(super) blocks: blocks::BlockSums,
    pub(super) block_edges: block_edges::EdgeSums,
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

    /// The size `id` was declared with.
    pub fn size_of(&self, id: FuncId) -> u64 {
        self.graph.funcs[id.index()].size
    }

    /// Adds `alias` as another name of `id`, once.
    pub fn alias(&mut self, id: FuncId, alias: &str) {
        let aliases = &mut self.graph.funcs[id.index()].aliases;
        if !aliases.iter().any(|a| a == alias) {
            aliases.push(alias.to_string());
        }
    }

    /// Adds `samples` to the function's; sums stop at [`MAX_COUNT`], the most a reader takes.
    pub fn add_samples(&mut self, id: FuncId, samples: u64) {
        let sum = &mut self.graph.funcs[id.index()].samples;
        *sum = capped_sum(*sum, samples);
    }

    /// Adds `weight` to the call's; sums stop at [`MAX_COUNT`].
    pub fn add_call(&mut self, caller: FuncId, callee: FuncId, weight: u64) {
        let sum = self.calls.entry((caller, callee)).or_default();
        *sum = capped_sum(*sum, weight);
    }

    /// Adds `weight` of the calls from `caller` to `callee`, already added with
    /// [`GraphBuilder::add_call`], at `offset` in the caller (see [`CallSite`]).
    pub fn add_site(&mut self, caller: FuncId, callee: FuncId, offset: u64, weight: u64) {
        let sum = self.sites.entry((caller, callee, offset)).or_default();
        *sum = capped_sum(*sum, weight);
    }

    /// Sets the graph's header `key` (see [`Graph::set_header`]).
    pub fn header(&mut self, key: &str, value: impl fmt::Display) {
        self.graph.set_header(key, value);
    }

    /// Adds a header line after the others, also when one with `key` is there (a key that
    /// takes several lines, such as `cpu-samples`).
    pub fn push_header(&mut self, key: &str, value: impl fmt::Display) {
        self.graph
            .headers
            .push((key.to_string(), value.to_string()));
    }

    /// The graph. Of each call's sites it keeps the [`MAX_SITES_PER_CALL`] heaviest (ties: the
    /// lower offset) that lie inside the caller and whose weights fit in the call's; the weight
    /// of the others stays in the call without a site. Of the blocks it keeps those that lie
    /// inside their function, and of the block edges those between two blocks it keeps.
    pub fn finish(mut self) -> Graph {
        let mut calls: Vec<Call> = std::mem::take(&mut self.calls)
            .into_iter()
            .map(|((caller, callee), weight)| Call {
                caller,
                callee,
                weight,
            })
            .collect();
        calls.sort_unstable_by_key(|c| (c.caller, c.callee));
        self.graph.sites = self.kept_sites(&calls);
        self.graph.calls = calls;
        self.graph.blocks = blocks::sorted(std::mem::take(&mut self.blocks), &self.graph.funcs);
        self.graph.block_edges =
            block_edges::sorted(std::mem::take(&mut self.block_edges), &self.graph.blocks);
        self.graph
    }

    fn kept_sites(&self, calls: &[Call]) -> Vec<CallSite> {
        let mut sites: Vec<CallSite> = self
            .sites
            .iter()
            .filter(|&(&(caller, _, offset), &weight)| {
                weight > 0 && offset < self.graph.funcs[caller.index()].size
            })
            .map(|(&(caller, callee, offset), &weight)| CallSite {
                caller,
                callee,
                offset,
                weight,
            })
            .collect();
        sites.sort_unstable_by_key(|s| (s.caller, s.callee, Reverse(s.weight), s.offset));
        let mut kept = Vec::with_capacity(sites.len().min(calls.len() * MAX_SITES_PER_CALL));
        for pair in sites.chunk_by(|a, b| (a.caller, a.callee) == (b.caller, b.callee)) {
            let key = (pair[0].caller, pair[0].callee);
            // A site's weight is part of its call's: without a call it has nothing to place.
            let Ok(call) = calls.binary_search_by_key(&key, |c| (c.caller, c.callee)) else {
                continue;
            };
            let mut left = calls[call].weight;
            let start = kept.len();
            for s in pair.iter().take(MAX_SITES_PER_CALL) {
                if s.weight <= left {
                    left -= s.weight;
                    kept.push(*s);
                }
            }
            kept[start..].sort_unstable_by_key(|s| s.offset);
        }
        kept
    }
}

/// `a + b`, at most [`MAX_COUNT`]: what a builder writes, a reader reads back.
pub(super) fn capped_sum(a: u64, b: u64) -> u64 {
    a.saturating_add(b).min(MAX_COUNT)
}
