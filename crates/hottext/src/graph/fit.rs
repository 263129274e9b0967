//! Fitting a profile to a binary, in one place: the build-id policy, the code fingerprints
//! (computed always, or only when some sampled name is missing), the matching itself
//! (`rematch`) and where each fitted function sits in the binary. What a person should hear
//! about comes back as [`FitWarning`] values; the caller decides how to print them.

mod blocks;
mod rematch;

pub(crate) use rematch::add_fingerprints;
use rematch::rematch;
pub use rematch::Matched;

use std::convert::Infallible;

use crate::binary::fingerprint::{fingerprints, Fingerprints};
use crate::binary::{Binary, OtherBuild, StatedAddr};
use crate::graph::Graph;

/// Where each function of a graph starts; `None` for functions the layout lacks. A modelled
/// layout (`layout::metrics::place_in_order`) is a binary whose hot range starts at stated
/// address 0.
pub type Placement = Vec<Option<StatedAddr>>;

/// What to do with a profile recorded on another build than the binary. A caller to whom the
/// build does not matter calls [`fit_any_build`], whose error cannot be [`FitError::OtherBuild`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtherBuildPolicy {
    /// Refuse it ([`FitError::OtherBuild`]).
    Refuse,
    /// Use it, with a [`FitWarning::OtherBuild`].
    Warn,
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
    /// Whether a profile of another build is refused or used with a warning.
    pub other_build: OtherBuildPolicy,
    /// When the binary's code is fingerprinted.
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
    /// How much of the profile's weight the binary has, and how it was found.
    pub matched: Matched,
    /// What a person should hear about, for the caller to print.
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
    /// Functions whose block counts were left out, their code or the binary's block map
    /// having changed (profile names): they are whole again for a layout.
    BlocksDropped(Vec<String>),
}

/// Why a profile could not be fitted. `B` is what another build is reported as:
/// [`OtherBuild`] from [`fit`], nothing ([`Infallible`]) from [`fit_any_build`], which never
/// refuses a build.
#[derive(Debug, thiserror::Error)]
pub enum FitError<B = OtherBuild> {
    /// The profile was recorded on another build ([`OtherBuildPolicy::Refuse`]).
    #[error("{0}")]
    OtherBuild(B),
    /// The binary has less of the profile's weight than [`FitPolicy::min_matched`].
    #[error("the binary has {:.1}% of the profile's weight, below the {:.1}% required", 100.0 * matched.share(), 100.0 * min)]
    TooLittleMatched {
        /// What did match.
        matched: Box<Matched>,
        /// The share required.
        min: f64,
    },
    /// The binary's code could not be read to fingerprint it ([`CodePrints::Eager`]).
    #[error("cannot read the code of {path}: {source}")]
    Code {
        /// The binary.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// `profile` fitted to `binary` under `policy`.
pub fn fit(profile: &Graph, binary: &Binary, policy: FitPolicy<'_>) -> Result<Fitted, FitError> {
    let other_build = match binary.check_profile_build(profile.header("build-id")) {
        Ok(()) => None,
        Err(other) => match policy.other_build {
            OtherBuildPolicy::Refuse => return Err(FitError::OtherBuild(other)),
            OtherBuildPolicy::Warn => Some(FitWarning::OtherBuild(other)),
        },
    };
    let mut fitted = match fit_any_build(profile, binary, policy.code, policy.min_matched) {
        Ok(fitted) => fitted,
        Err(FitError::TooLittleMatched { matched, min }) => {
            return Err(FitError::TooLittleMatched { matched, min })
        }
        Err(FitError::Code { path, source }) => return Err(FitError::Code { path, source }),
    };
    fitted.warnings.splice(0..0, other_build);
    Ok(fitted)
}

/// `profile` fitted to `binary` whatever build it was recorded on (a build-id checked
/// elsewhere, or a profile meant for a new build), refused only when the binary has less than
/// `min_matched` of its weight or, with [`CodePrints::Eager`], its code cannot be read.
pub fn fit_any_build(
    profile: &Graph,
    binary: &Binary,
    code: CodePrints<'_>,
    min_matched: f64,
) -> Result<Fitted, FitError<Infallible>> {
    let (graph, matched) = match code {
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
    if matched.share() < min_matched {
        return Err(FitError::TooLittleMatched {
            matched: Box::new(matched),
            min: min_matched,
        });
    }
    Ok(placed(graph, matched, binary))
}

/// `profile` fitted to `binary` to be looked at, never refused: whatever its build, by name,
/// and by code only when a sampled name is missing (unreadable code matches nothing).
pub fn fit_for_view(profile: &Graph, binary: &Binary) -> Fitted {
    let (graph, matched) = by_name_then_code(profile, binary);
    placed(graph, matched, binary)
}

/// `profile` fitted to `binary`, whose fingerprints `prints` are known, never refused: whatever
/// its build and however little of it matches, for a caller that judges [`Fitted::matched`]
/// itself (the pipeline compares a previous profile for drift even when it does not merge it).
pub fn fit_to_prints(profile: &Graph, binary: &Binary, prints: &Fingerprints) -> Fitted {
    let (graph, matched) = rematch(profile, binary, prints);
    placed(graph, matched, binary)
}

/// The fitted graph placed in `binary`, with the warnings its matching gives.
fn placed(graph: Graph, matched: Matched, binary: &Binary) -> Fitted {
    let mut warnings = Vec::new();
    if !matched.unmatched.is_empty() {
        warnings.push(FitWarning::Unmatched(matched.unmatched.clone()));
    }
    if !matched.renamed.is_empty() {
        warnings.push(FitWarning::Renamed(matched.renamed.clone()));
    }
    if !matched.blocks_dropped.is_empty() {
        warnings.push(FitWarning::BlocksDropped(matched.blocks_dropped.clone()));
    }
    let placement = placement_in(&graph, binary);
    Fitted {
        graph,
        placement,
        matched,
        warnings,
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
fn placement_in(graph: &Graph, binary: &Binary) -> Placement {
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

    fn any_build(
        profile: &Graph,
        bin: &Binary,
        min_matched: f64,
    ) -> Result<Fitted, FitError<Infallible>> {
        fit_any_build(profile, bin, CodePrints::WhenNamesMiss, min_matched)
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
        let ignored = any_build(&other, &bin, 0.0).unwrap();
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
        let err = any_build(&profile("00"), &bin, 0.8).unwrap_err();
        assert!(
            matches!(&err, FitError::TooLittleMatched { matched, min } if matched.share() < *min),
            "{err}"
        );
        assert!(any_build(&profile("00"), &bin, 0.7).is_ok());
        // Never refused, however little matches: the caller judges the share.
        let known = fit_to_prints(&profile("00"), &bin, &Fingerprints::default());
        assert!(known.matched.share() < 0.8);
    }
}
