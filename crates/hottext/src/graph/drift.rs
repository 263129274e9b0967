//! How far this run's profile moved from the previous one: one distance for the gate and the
//! functions that moved most, for the commit message a person reviews.

use foldhash::HashMap;

use serde::Serialize;

use crate::graph::Graph;

/// A function whose share of the samples changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mover {
    /// The function's name.
    pub name: String,
    /// Share (0 to 1) of the samples in the previous profile.
    pub before_fraction: f64,
    /// Share (0 to 1) in this run.
    pub after_fraction: f64,
}

/// How far this run's profile moved from the previous one, and the functions that moved most.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Drift {
    /// Total variation distance between the two sample distributions: half the sum of the
    /// absolute differences of each function's share. 0 = the same shares, 1 = no function in
    /// common.
    pub distance: f64,
    /// The functions whose share moved most, largest move first.
    pub movers: Vec<Mover>,
}

/// Compares the self-sample shares of `old` and `new` (both with the same binary's names).
pub fn drift(old: &Graph, new: &Graph, top: usize) -> Drift {
    fn shares(g: &Graph) -> HashMap<&str, f64> {
        let total = g.total_samples().max(1) as f64;
        g.funcs
            .iter()
            .filter(|f| f.samples > 0)
            .map(|f| (f.name.as_str(), f.samples as f64 / total))
            .collect()
    }
    let (before, after) = (shares(old), shares(new));
    let mut names: Vec<&str> = before.keys().chain(after.keys()).copied().collect();
    names.sort_unstable();
    names.dedup();
    let mut movers: Vec<Mover> = names
        .iter()
        .map(|n| Mover {
            name: n.to_string(),
            before_fraction: before.get(n).copied().unwrap_or(0.0),
            after_fraction: after.get(n).copied().unwrap_or(0.0),
        })
        .collect();
    let distance = movers
        .iter()
        .map(|m| (m.after_fraction - m.before_fraction).abs())
        .sum::<f64>()
        / 2.0;
    // Largest move first; names break ties so the report is stable.
    movers.sort_by(|a, b| {
        let move_of = |m: &Mover| (m.after_fraction - m.before_fraction).abs();
        let (da, db) = (move_of(a), move_of(b));
        db.total_cmp(&da).then_with(|| a.name.cmp(&b.name))
    });
    movers.truncate(top);
    Drift {
        distance: distance.min(1.0),
        movers,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(text: &str) -> Graph {
        Graph::read(format!("# hottext profile v1\n{text}").as_bytes()).unwrap()
    }

    #[test]
    fn same_shares_have_no_drift_and_disjoint_ones_full_drift() {
        let a = graph("fn f 1 10\nfn g 1 30\n");
        let twice = graph("fn f 1 20\nfn g 1 60\n");
        assert_eq!(drift(&a, &twice, 5).distance, 0.0);
        let other = graph("fn h 1 5\n");
        assert!((drift(&a, &other, 5).distance - 1.0).abs() < 1e-9);
    }

    #[test]
    fn movers_are_sorted_by_the_size_of_the_move() {
        let old = graph("fn f 1 50\nfn g 1 50\n");
        let new = graph("fn f 1 20\nfn g 1 50\nfn h 1 30\n");
        let d = drift(&old, &new, 2);
        assert!((d.distance - 0.3).abs() < 1e-9, "{d:?}");
        let names: Vec<&str> = d.movers.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["f", "h"]); // f: 50 → 20, h: 0 → 30, g: 50 → 50
        let f = &d.movers[0];
        assert_eq!((f.before_fraction, f.after_fraction), (0.5, 0.2));
    }
}
