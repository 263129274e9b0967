//! What a profile's call graph came from, as its headers say (`hottext profile` writes them):
//! stacks, branch records, or edges inferred from the code, and how much of the call weight
//! went through tail calls, which frame-pointer stacks alone get wrong.

use super::{Check, Status};
use crate::graph::Graph;
use crate::profile::header::{
    SAMPLE_KIND, TAIL_CALL_SHARED, TAIL_CALL_UNDECIDED, TAIL_CALL_WEIGHT,
};
use crate::profile::{CpuShares, NO_EDGE_WARNING};

/// One check on the call graph's source. For a merged profile the headers are its newest
/// part's.
pub fn call_graph(profile: &Graph) -> Check {
    let name = "call graph";
    let kind = profile.header(SAMPLE_KIND).unwrap_or("unknown");
    if kind == "plain" {
        return Check::new(
            "profile",
            name,
            Status::Warn,
            "edges inferred from the code (a recording without stacks)",
        )
        .remedy("record stacks for measured edges: hottext record (frame pointers, or DWARF without them)");
    }
    let calls: u64 = profile.calls().iter().map(|c| c.weight).sum();
    let number = |key| profile.header(key).and_then(|v| v.parse::<u64>().ok());
    let (Some(tail), Some(undecided)) = (number(TAIL_CALL_WEIGHT), number(TAIL_CALL_UNDECIDED))
    else {
        return Check::new(
            "profile",
            name,
            Status::Info,
            format!("{kind}; the profile does not say how much went through tail calls (made by an older hottext)"),
        );
    };
    let shared = number(TAIL_CALL_SHARED).unwrap_or(0);
    let share = |n: u64| 100.0 * n as f64 / calls.max(1) as f64;
    let value = format!(
        "{kind}; {:.1}% of the call weight went through tail calls (followed in the code; {shared} samples shared among possible callers), {undecided} samples undecided",
        share(tail)
    );
    let samples = number("samples").unwrap_or(calls).max(1);
    if undecided as f64 > NO_EDGE_WARNING * samples as f64 {
        return Check::new("profile", name, Status::Warn, value).remedy(
            "tail calls the code cannot follow (indirect jumps) left callers undecided: record branch records where the CPU has them, or build with -fno-optimize-sibling-calls",
        );
    }
    Check::new("profile", name, Status::Info, value)
}

/// Below this share of its processes' CPU in the binary's own code, a layout has little to win.
const LITTLE_OWN_CODE: f64 = 0.10;
/// Places named besides the binary.
const PLACES_NAMED: usize = 4;

/// Where the CPU of the binary's processes went, and so the most a layout of the binary can
/// gain: the share in its own code bounds it (an upper bound: the layout speeds up only the
/// front-end stalls within that share). `None` for a profile without the shares (older ones).
pub fn own_code(profile: &Graph) -> Option<Check> {
    let shares = CpuShares::from_headers(profile)?;
    let pct = |n: u64| 100.0 * shares.fraction(n);
    let others: Vec<String> = (shares.elsewhere.iter().take(PLACES_NAMED))
        .map(|p| format!("{} {:.1}%", file_name(&p.place), pct(p.samples)))
        .collect();
    let own = shares.binary_fraction();
    let value = format!(
        "{:.1}% of its processes' {} CPU samples (elsewhere: {}): a layout of this binary can speed up at most that share of their time (an upper bound)",
        100.0 * own,
        shares.process_samples,
        if others.is_empty() { "none".into() } else { others.join(", ") }
    );
    let check = Check::new("profile", "CPU in its own code", Status::Info, value);
    if own < LITTLE_OWN_CODE {
        return Some(Check { status: Status::Warn, ..check }.remedy(
            "most of the time is in the libraries or the kernel named: a layout of this binary wins little; look at those first (perf report --sort dso)",
        ));
    }
    Some(check)
}

/// A library's file name (`libc.so.6`), or a label (`[kernel]`) as it is.
fn file_name(place: &str) -> &str {
    place.rsplit('/').next().unwrap_or(place)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(headers: &[(&str, &str)]) -> Graph {
        let mut text = String::from("# hottext profile v2\n");
        for (k, v) in headers {
            text.push_str(&format!("# {k}: {v}\n"));
        }
        text.push_str("fn a 16 1\nfn b 16 100\ncall a b 100\n");
        Graph::read(text.as_bytes()).unwrap()
    }

    #[test]
    fn reports_the_tail_call_share_and_warns_when_many_are_undecided() {
        let c = call_graph(&graph(&[
            (SAMPLE_KIND, "stack"),
            (TAIL_CALL_WEIGHT, "40"),
            (TAIL_CALL_UNDECIDED, "0"),
        ]));
        assert_eq!(c.status, Status::Info);
        assert!(c.value.contains("40.0% of the call weight"), "{}", c.value);
        let c = call_graph(&graph(&[
            (SAMPLE_KIND, "stack"),
            (TAIL_CALL_WEIGHT, "0"),
            (TAIL_CALL_UNDECIDED, "30"),
        ]));
        assert_eq!(c.status, Status::Warn);
    }

    #[test]
    fn inferred_edges_and_old_profiles_are_named() {
        assert_eq!(
            call_graph(&graph(&[(SAMPLE_KIND, "plain")])).status,
            Status::Warn
        );
        let c = call_graph(&graph(&[(SAMPLE_KIND, "stack")]));
        assert!(c.value.contains("older hottext"), "{}", c.value);
    }

    #[test]
    fn own_code_bounds_what_a_layout_can_gain() {
        assert!(own_code(&graph(&[])).is_none(), "no shares, no check");
        let text = "# hottext profile v2\n# process-samples: 1000\n# cpu-samples: 38 [binary]\n\
                    # cpu-samples: 700 /usr/lib/libc.so.6\n# cpu-samples: 262 [kernel]\nfn a 1 38\n";
        let c = own_code(&Graph::read(text.as_bytes()).unwrap()).unwrap();
        assert_eq!(c.status, Status::Warn);
        assert!(
            c.value.starts_with("3.8% of its processes' 1000 CPU samples (elsewhere: libc.so.6 70.0%, [kernel] 26.2%)")
                && c.value.contains("at most"),
            "{}",
            c.value
        );
    }
}
