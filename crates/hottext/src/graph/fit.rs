//! Fitting a profile to a binary, in one place: the build-id policy, the code fingerprints
//! (computed always, or only when some sampled name is missing), the matching itself
//! ([`rematch`]) and where each fitted function sits in the binary. What a person should hear
//! about comes back as [`FitWarning`] values; the caller decides how to print them.

mod rematch;

pub(crate) use rematch::add_fingerprints;
pub use rematch::{rematch, Matched};

use crate::binary::fingerprint::{fingerprints, Fingerprints};
use crate::binary::{Binary, OtherBuild, StatedAddr};
use crate::graph::Graph;

/// Where each function of a graph starts; `None` for functions the layout lacks. A modelled
/// layout (`layout::metrics::place_in_order`) is a binary whose hot range starts at stated
/// address 0.
pub type Placement = Vec<Option<StatedAddr>>;

/// What to do with a profile recorded on another build than the binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtherBuildPolicy {
    /// Refuse it ([`FitError::OtherBuild`]).
    Refuse,
    /// Use it, with a [`FitWarning::OtherBuild`].
    Warn,
    /// Use it without a word (the matching shows how far it fits).
    Ignore,
}

/// When the binary's code is fingerprinted, to find renamed functions.
#[derive(Debug, Clone, Copy)]
pub enum CodePrints<'a> {
    /// Always: the fitted profile carries its functions' `# fn-hash` headers, and a binary
    /// whose code cannot be read is an error.
    Eager,
    /// Only when some sampled name is not in the binary, and an unreadable binary's code
    /// matches nothing (a view of the profile, not an input to a linker).
    WhenNamesMiss,
    /// Already computed, for fitting many profiles to one binary.
    Known(&'a Fingerprints),
}

/// How to fit a profile to a binary.
#[derive(Debug, Clone, Copy)]
pub struct FitPolicy<'a> {
    pub other_build: OtherBuildPolicy,
    pub code: CodePrints<'a>,
    /// The least share of the profile's weight (0 to 1) the binary must have
    /// ([`FitError::TooLittleMatched`] below it).
    pub min_matched: f64,
}

/// A profile fitted to a binary.
#[derive(Debug)]
pub struct Fitted {
    /// The profile under the binary's names, the unmatched left out, sizes the binary's.
    pub graph: Graph,
    /// Where each function of `graph` starts in the binary.
    pub placement: Placement,
    pub matched: Matched,
    pub warnings: Vec<FitWarning>,
}

/// What a fit did that a person should know about.
#[derive(Debug)]
pub enum FitWarning {
    /// The profile was recorded on another build, and used anyway ([`OtherBuildPolicy::Warn`]).
    OtherBuild(OtherBuild),
    /// Sampled functions the binary lacks, hottest first: left out.
    Unmatched(Vec<String>),
    /// Functions found by their code under a new name: (profile name, binary name).
    Renamed(Vec<(String, String)>),
}

/// Why a profile could not be fitted.
#[derive(Debug, thiserror::Error)]
pub enum FitError {
    #[error("{0}")]
    OtherBuild(OtherBuild),
    #[error("the binary has {:.1}% of the profile's weight, below the {:.1}% required", 100.0 * matched.share(), 100.0 * min)]
    TooLittleMatched { matched: Box<Matched>, min: f64 },
    #[error("cannot read the code of {path}: {source}")]
    Code {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
}

/// `profile` fitted to `binary` under `policy`.
pub fn fit(profile: &Graph, binary: &Binary, policy: FitPolicy<'_>) -> Result<Fitted, FitError> {
    let mut warnings = Vec::new();
    if let Err(other) = binary.check_profile_build(profile.header("build-id")) {
        match policy.other_build {
            OtherBuildPolicy::Refuse => return Err(FitError::OtherBuild(other)),
            OtherBuildPolicy::Warn => warnings.push(FitWarning::OtherBuild(other)),
            OtherBuildPolicy::Ignore => {}
        }
    }
    let (graph, matched) = match policy.code {
        CodePrints::Eager => {
            let prints = fingerprints(binary).map_err(|source| FitError::Code {
                path: binary.path.clone(),
                source,
            })?;
            rematch(profile, binary, &prints)
        }
        CodePrints::WhenNamesMiss => by_name_then_code(profile, binary),
        CodePrints::Known(prints) => rematch(profile, binary, prints),
    };
    if matched.share() < policy.min_matched {
        return Err(FitError::TooLittleMatched {
            matched: Box::new(matched),
            min: policy.min_matched,
        });
    }
    if !matched.unmatched.is_empty() {
        warnings.push(FitWarning::Unmatched(matched.unmatched.clone()));
    }
    if !matched.renamed.is_empty() {
        warnings.push(FitWarning::Renamed(matched.renamed.clone()));
    }
    let placement = placement_in(&graph, binary);
    Ok(Fitted {
        graph,
        placement,
        matched,
        warnings,
    })
}

/// `profile` fitted to `binary` to be looked at, never refused: whatever its build, by name,
/// and by code only when a sampled name is missing (unreadable code matches nothing).
pub fn fit_for_view(profile: &Graph, binary: &Binary) -> Fitted {
    let policy = FitPolicy {
        other_build: OtherBuildPolicy::Ignore,
        code: CodePrints::WhenNamesMiss,
        min_matched: 0.0,
    };
    match fit(profile, binary, policy) {
        Ok(fitted) => fitted,
        // Ignoring the build, tolerating unreadable code and requiring no share refuse nothing.
        Err(_) => unreachable!("fit_for_view's policy refuses nothing"),
    }
}

fn by_name_then_code(profile: &Graph, binary: &Binary) -> (Graph, Matched) {
    let by_name = rematch(profile, binary, &Fingerprints::default());
    if by_name.1.unmatched.is_empty() {
        return by_name;
    }
    rematch(profile, binary, &fingerprints(binary).unwrap_or_default())
}

/// Where each function of `graph` (under `binary`'s names) starts in `binary`.
pub fn placement_in(graph: &Graph, binary: &Binary) -> Placement {
    let index = binary.index_by_name();
    graph
        .funcs()
        .iter()
        .map(|f| {
            index
                .get(f.name.as_str())
                .map(|&i| binary.functions[i].start)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::rematch::tests::binary;
    use super::*;

    fn profile(build_id: &str) -> Graph {
        let text = format!(
            "# hottext profile v1\n# build-id: {build_id}\nfn main 10 10\nfn work 32 60\nfn gone 8 30\n\
             call main work 60\n"
        );
        Graph::read(text.as_bytes()).unwrap()
    }

    fn policy(other_build: OtherBuildPolicy, min_matched: f64) -> FitPolicy<'static> {
        FitPolicy {
            other_build,
            code: CodePrints::WhenNamesMiss,
            min_matched,
        }
    }

    #[test]
    fn another_build_is_refused_warned_about_or_ignored_as_the_policy_says() {
        let bin = binary(&[("main", 12), ("work", 32)]);
        let other = profile("00");
        assert!(matches!(
            fit(&other, &bin, policy(OtherBuildPolicy::Refuse, 0.0)),
            Err(FitError::OtherBuild(_))
        ));
        let warned = fit(&other, &bin, policy(OtherBuildPolicy::Warn, 0.0)).unwrap();
        assert!(matches!(warned.warnings[0], FitWarning::OtherBuild(_)));
        let ignored = fit(&other, &bin, policy(OtherBuildPolicy::Ignore, 0.0)).unwrap();
        assert!(!ignored
            .warnings
            .iter()
            .any(|w| matches!(w, FitWarning::OtherBuild(_))));

        let own = profile(&bin.build_id_hex().expect("the test binary has a build-id"));
        let same = fit(&own, &bin, policy(OtherBuildPolicy::Refuse, 0.0)).unwrap();
        assert_eq!(same.matched.by_name, 70);
    }

    #[test]
    fn the_fit_places_functions_where_the_binary_has_them_and_reports_the_missing() {
        let bin = binary(&[("main", 12), ("work", 32)]);
        let fitted = fit_for_view(&profile("00"), &bin);
        let names: Vec<&str> = fitted
            .graph
            .funcs()
            .iter()
            .map(|f| f.name.as_str())
            .collect();
        assert_eq!(names, ["main", "work"]);
        assert_eq!(
            fitted.placement,
            [Some(StatedAddr(0x1000)), Some(StatedAddr(0x2000))]
        );
        assert!(matches!(&fitted.warnings[..], [FitWarning::Unmatched(n)] if n == &["gone"]));
    }

    #[test]
    fn less_than_min_matched_of_the_weight_is_refused() {
        let bin = binary(&[("main", 12), ("work", 32)]);
        let err = fit(&profile("00"), &bin, policy(OtherBuildPolicy::Ignore, 0.8)).unwrap_err();
        assert!(
            matches!(&err, FitError::TooLittleMatched { matched, min } if matched.share() < *min),
            "{err}"
        );
        assert!(fit(&profile("00"), &bin, policy(OtherBuildPolicy::Ignore, 0.7)).is_ok());
    }
}
