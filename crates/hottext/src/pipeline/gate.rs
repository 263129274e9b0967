//! The quality gate: a profile lands only if it looks like the service under real load. A
//! failed gate changes nothing (no object, no commit), so last week's profile stays in use.

use serde::Serialize;

use super::config::Gate;

/// One check of the gate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub value: f64,
    pub limit: f64,
    pub passed: bool,
    /// One line for people: the figure against its limit.
    pub detail: String,
}

/// What the gate looks at.
#[derive(Debug, Clone, Copy)]
pub struct Facts {
    /// Samples of the binary in this run.
    pub samples: u64,
    /// Of those, the share that fell in a function symbol.
    pub resolved: f64,
    /// Drift from the previous profile, if there is one to compare with.
    pub drift: Option<f64>,
}

pub fn check(gate: &Gate, facts: &Facts) -> Vec<Check> {
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
