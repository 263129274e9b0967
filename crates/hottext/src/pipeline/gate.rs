//! The quality gate: a profile lands only if it looks like the service under real load. A
//! failed gate changes nothing (no object, no commit), so last week's profile stays in use.

use std::time::SystemTime;

use serde::Serialize;

use super::config::Gate;
use crate::store::meta;

/// A run's recording and the gate's verdict on it: the part `pipeline run`'s report and an
/// upload's report share (flattened into each, so their JSON keys stay where they were).
#[derive(Debug, Clone, Serialize)]
pub struct Gated {
    /// Whether every check passed: only then is anything stored.
    pub passed: bool,
    /// Each check, passed or not.
    pub gate: Vec<Check>,
    /// Samples of the binary in the run.
    pub samples: u64,
    /// Share (0 to 1) of the binary's samples that fell in a function.
    pub resolved_fraction: f64,
    /// When the recording began, as the meta file writes times.
    pub window_start: String,
    /// When the recording ended.
    pub window_end: String,
}

impl Gated {
    /// The gate's checks of `facts`, recorded from `start` to `end`.
    pub(crate) fn judge(gate: &Gate, facts: &Facts, start: SystemTime, end: SystemTime) -> Gated {
        let checks = check(gate, facts);
        Gated {
            passed: checks.iter().all(|c| c.passed),
            gate: checks,
            samples: facts.samples,
            resolved_fraction: facts.resolved,
            window_start: meta::time(start),
            window_end: meta::time(end),
        }
    }
}

/// One check of the gate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    /// The check's name (`samples`, `resolved`, `drift`).
    pub name: &'static str,
    /// The measured figure.
    pub value: f64,
    /// The limit it is held to.
    pub limit: f64,
    /// Whether the figure is within the limit.
    pub passed: bool,
    /// One line for people: the figure against its limit.
    pub detail: String,
}

/// What the gate looks at.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Facts {
    /// Samples of the binary in this run.
    pub samples: u64,
    /// Of those, the share that fell in a function symbol.
    pub resolved: f64,
    /// Drift from the previous profile, if there is one to compare with.
    pub drift: Option<f64>,
}

/// Each check of the gate on `facts`, passed or not.
pub(crate) fn check(gate: &Gate, facts: &Facts) -> Vec<Check> {
    let mut checks = vec![
        Check {
            name: "samples",
            value: facts.samples as f64,
            limit: gate.min_samples as f64,
            passed: facts.samples >= gate.min_samples,
            detail: format!(
                "{} samples of the binary (at least {}: fewer means the recording missed the service or its load)",
                facts.samples, gate.min_samples
            ),
        },
        Check {
            name: "resolved",
            value: facts.resolved,
            limit: gate.min_resolved,
            passed: facts.resolved >= gate.min_resolved,
            detail: format!(
                "{:.1}% of them in a function of the binary (at least {:.0}%: less means stripped or mismatched symbols)",
                100.0 * facts.resolved,
                100.0 * gate.min_resolved
            ),
        },
    ];
    if let Some(d) = facts.drift {
        checks.push(Check {
            name: "drift",
            value: d,
            limit: gate.max_drift,
            passed: d <= gate.max_drift,
            detail: format!(
                "drift {d:.2} from the previous profile (at most {:.2}; 0 = same shares, 1 = nothing in common)",
                gate.max_drift
            ),
        });
    }
    checks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_limit_can_fail_on_its_own() {
        let gate = Gate::default();
        let good = Facts {
            samples: 5000,
            resolved: 0.99,
            drift: Some(0.1),
        };
        assert!(check(&gate, &good).iter().all(|c| c.passed));
        let failed = |facts: Facts| -> Vec<&'static str> {
            check(&gate, &facts)
                .into_iter()
                .filter(|c| !c.passed)
                .map(|c| c.name)
                .collect()
        };
        assert_eq!(
            failed(Facts {
                samples: 10,
                ..good
            }),
            ["samples"]
        );
        assert_eq!(
            failed(Facts {
                resolved: 0.5,
                ..good
            }),
            ["resolved"]
        );
        assert_eq!(
            failed(Facts {
                drift: Some(0.95),
                ..good
            }),
            ["drift"]
        );
        // No previous profile: no drift check.
        assert_eq!(
            check(
                &gate,
                &Facts {
                    drift: None,
                    ..good
                }
            )
            .len(),
            2
        );
    }
}
