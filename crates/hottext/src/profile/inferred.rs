//! Call edges for a recording without stacks or branch records (`perf record` without `-g`,
//! the most common perf.data there is), inferred from the binary's code.
//!
//! The samples say where time went, function by function, but not who called. The code says who
//! can call whom: every direct call (and tail jump) to a function's entry. A stack-sampled edge
//! `C → G` weighs G's samples taken while C called it, so here G's samples are shared among its
//! direct callers by how often each call ran, and that is read from the samples of the code
//! around the call: the straight run of instructions it sits in, from the branch before it to
//! the branch after (a call's block and the block it returns into, which run as often as the
//! call). When no caller has such samples, they share by their own samples. A function whose
//! direct callers hold no sample at all (a small wrapper often holds none) gets an edge only
//! from a single such caller: among several the samples do not tell which ran, and the edge
//! would be a guess. Functions entered only through pointers get no edge. Functions with
//! samples are decoded; the rest of the code only when some sampled function has no sampled
//! direct caller.
//!
//! The accuracy against an exact graph is in bench/RESULTS.md ("Call-graph accuracy").

use super::apportion::apportion;
use super::code::Code;
use super::function_index::FunctionIndex;
use crate::binary::Function;

/// A direct call or tail jump from a sampled function to another's entry, and the samples of
/// the runs of code around it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Site {
    caller: u32,
    callee: u32,
    /// The instruction's last byte.
    at: u64,
    heat: u64,
}

/// One inferred edge: `weight` of the callee's samples, at the caller's hottest site of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Edge {
    pub caller: u32,
    pub callee: u32,
    pub site: u64,
    pub weight: u64,
}

/// The edges of the functions with `self_samples`, from `ip_samples` (sampled stated addresses
/// with their counts, sorted).
pub(crate) fn edges(
    functions: &[Function],
    index: &FunctionIndex,
    code: &Code<'_>,
    self_samples: &[u64],
    ip_samples: &[(u64, u64)],
) -> Vec<Edge> {
    let sampled = |f: usize| self_samples[f] > 0;
    let mut sites: Vec<Site> = Vec::new();
    for f in (0..functions.len()).filter(|&f| sampled(f)) {
        sites_of(f as u32, &functions[f], index, code, ip_samples, &mut sites);
    }
    sites.retain(|s| sampled(s.callee as usize));
    // A small wrapper may hold no sample of its own: a sampled function that no sampled one
    // calls gets its callers from the rest of the code (decoded once, only then).
    let mut called = vec![false; functions.len()];
    sites.iter().for_each(|s| called[s.callee as usize] = true);
    if (0..functions.len()).any(|f| sampled(f) && !called[f]) {
        let mut more = Vec::new();
        for f in (0..functions.len()).filter(|&f| !sampled(f)) {
            sites_of(f as u32, &functions[f], index, code, &[], &mut more);
            more.retain(|s| sampled(s.callee as usize) && !called[s.callee as usize]);
            sites.append(&mut more);
        }
        // Of those, only a callee with a single caller: which of several ran is unknown.
        sites.sort_unstable_by_key(|s| (s.callee, s.caller, s.at));
        let guesses: Vec<u32> = sites
            .chunk_by(|a, b| a.callee == b.callee)
            .filter(|of| !called[of[0].callee as usize])
            .filter(|of| of.iter().any(|s| s.caller != of[0].caller))
            .map(|of| of[0].callee)
            .collect();
        sites.retain(|s| guesses.binary_search(&s.callee).is_err());
    }
    // Sites by callee, each callee's samples shared among them.
    sites.sort_unstable_by_key(|s| (s.callee, s.caller, s.at));
    let mut edges = Vec::new();
    for of_callee in sites.chunk_by(|a, b| a.callee == b.callee) {
        let callee = of_callee[0].callee;
        share(
            self_samples[callee as usize],
            of_callee,
            self_samples,
            &mut edges,
        );
    }
    edges.sort_unstable_by_key(|e| (e.caller, e.callee));
    edges
}

/// Shares `samples` of one callee among its call sites (sorted by caller) by heat, else by the
/// callers' own samples (a single caller without any gets them all); rounds so that the weights
/// add up to `samples`.
fn share(samples: u64, sites: &[Site], self_samples: &[u64], edges: &mut Vec<Edge>) {
    let by_caller: Vec<(u32, u64, u64)> = sites
        .chunk_by(|a, b| a.caller == b.caller)
        .map(|s| {
            let hottest = s.iter().max_by_key(|x| (x.heat, std::cmp::Reverse(x.at)));
            let at = hottest.map_or(s[0].at, |x| x.at);
            (s[0].caller, s.iter().map(|x| x.heat).sum::<u64>(), at)
        })
        .collect();
    // By heat; without any, by the callers' own samples.
    let heats: Vec<u64> = by_caller.iter().map(|c| c.1).collect();
    let weights = if heats.iter().any(|&h| h > 0) {
        heats
    } else {
        by_caller
            .iter()
            .map(|c| self_samples[c.0 as usize])
            .collect()
    };
    for (&(caller, _, site), weight) in by_caller.iter().zip(apportion(samples, &weights)) {
        if weight > 0 {
            edges.push(Edge {
                caller,
                callee: sites[0].callee,
                site,
                weight,
            });
        }
    }
}

/// The direct calls and tail jumps of function `f` to other functions' entries, each with the
/// samples of the straight run of code it ends and of the run after it.
fn sites_of(
    f: u32,
    func: &Function,
    index: &FunctionIndex,
    code: &Code<'_>,
    ip_samples: &[(u64, u64)],
    sites: &mut Vec<Site>,
) {
    let mut runs: Vec<Run> = Vec::new();
    let mut run_start = func.start.0;
    for flow in code.control_flow(func) {
        let site = flow.transfer().and_then(|t| {
            let callee = index.starting_at(t.target).filter(|&callee| callee != f)?;
            Some(RunEnd {
                callee,
                at: t.site,
                is_call: t.is_call,
            })
        });
        runs.push(Run {
            start: run_start,
            end: flow.next,
            site,
        });
        run_start = flow.next;
    }
    runs.push(Run {
        start: run_start,
        end: func.end().0,
        site: None,
    });
    let samples_in = |run: &Run| -> u64 {
        let from = ip_samples.partition_point(|&(ip, _)| ip < run.start);
        ip_samples[from..]
            .iter()
            .take_while(|&&(ip, _)| ip < run.end)
            .map(|&(_, n)| n)
            .sum()
    };
    for (i, run) in runs.iter().enumerate() {
        let Some(end) = run.site else {
            continue;
        };
        let after = match runs.get(i + 1) {
            Some(next) if end.is_call => samples_in(next),
            _ => 0,
        };
        sites.push(Site {
            caller: f,
            callee: end.callee,
            at: end.at,
            heat: samples_in(run) + after,
        });
    }
}

/// A run of straight-line code, `[start, end)`, and the call or jump to a function that ends
/// it, if one does.
struct Run {
    start: u64,
    end: u64,
    site: Option<RunEnd>,
}

#[derive(Clone, Copy)]
struct RunEnd {
    callee: u32,
    /// The instruction's last byte.
    at: u64,
    /// A call, whose callee returns into the next run (a jump's does not).
    is_call: bool,
}

#[cfg(test)]
#[path = "inferred_tests.rs"]
mod tests;
