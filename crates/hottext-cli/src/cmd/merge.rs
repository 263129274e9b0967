//! `hottext merge`: several profiles into one, each weighted, for ad hoc use (the fleet's merge
//! job, `pipeline run --merge-uploads`, does the same from the store).

use std::fs::File;
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::{anyhow, bail, Context};
use hottext::binary::Binary;
use hottext::graph::fit::{fit_any_build, CodePrints, FitError};
use hottext::graph::merge::{merge_aged, AgedPart, MAX_WEIGHT};
use hottext::graph::{Graph, MAX_COUNT};
use hottext::store::meta::parse_time;
use serde::Serialize;

use super::{refuse_outputs_over_inputs, write_output_file};
use crate::output;

/// Merge profiles into one, each scaled by its weight
///
/// Each function's samples, each call's weight and each basic block's samples are summed,
/// every profile's scaled by its weight. The first profile leads: its headers are kept, and a function's size comes from the first
/// profile that has it. Weights are given with --weight, one per profile in order (1 when
/// omitted), and multiplied by 0.5^(age / --half-life-days) when that is given, the age
/// counted from each profile's `window-end` header (written by `pipeline run`) to the newest
/// one's. Counts are summed, so a profile with more samples weighs more in proportion.
///
/// Profiles of other builds: with --binary each profile is first fitted to that binary (by
/// name, then by code for renamed functions, as `fetch` does), and one of which the binary has
/// less than --min-matched of the weight is refused. Without --binary, profiles whose
/// `build-id` headers differ are refused unless --allow-build-id-mismatch merges their names
/// as they are.
///
/// Counts stay within what a profile may hold (2^48): when the weighted sums would pass it,
/// every weight is scaled down by one factor (a warning says so), keeping the proportions.
/// A `window-end` after this machine's clock (by more than an hour) is refused under
/// --half-life-days: it would make every other profile look old.
///
/// Examples:
///   hottext merge host1.profile host2.profile host3.profile -o fleet.profile
///   hottext merge new.profile old.profile --weight 1 --weight 0.5 -o merged.profile
///   hottext merge a.profile b.profile --half-life-days 7 --binary ./server -o merged.profile
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The profiles, newest (or leading) first.
    #[arg(required = true, num_args = 1.., value_name = "PROFILE")]
    profiles: Vec<PathBuf>,
    /// The merged profile to write.
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// A profile's weight, in the order of the profiles (repeat once per profile): from 0 to
    /// 1000000.
    #[arg(long, value_name = "W")]
    weight: Vec<f64>,
    /// Decay by age: weight × 0.5^(age in days / this), from the `window-end` headers.
    #[arg(long, value_name = "DAYS")]
    half_life_days: Option<f64>,
    /// Fit every profile to this binary first.
    #[arg(long, value_name = "BIN")]
    binary: Option<PathBuf>,
    /// Without --binary: merge profiles whose build-id headers differ, their names as they are.
    #[arg(long, conflicts_with = "binary")]
    allow_build_id_mismatch: bool,
    /// With --binary: the share of a profile's weight the binary must have, else it is refused.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.5)]
    min_matched: f64,
    #[command(flatten)]
    pub json: output::OutputArgs,
}

/// One input as merged.
#[derive(Serialize)]
struct Input {
    profile: PathBuf,
    weight: f64,
    matched_fraction: Option<f64>,
    merged: bool,
    note: Option<String>,
}

/// What `merge` did: each input's weight and fit, the file written.
#[derive(Serialize)]
struct Merged {
    output: PathBuf,
    inputs: Vec<Input>,
    functions: usize,
}

impl output::Report for Merged {
    fn print(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        for i in &self.inputs {
            let matched = i
                .matched_fraction
                .map(|m| format!(", {:.1}% matched", 100.0 * m))
                .unwrap_or_default();
            writeln!(
                out,
                "{} weight {:.3}{matched}{}",
                i.profile.display(),
                i.weight,
                if i.merged { "" } else { " (left out)" }
            )?;
        }
        writeln!(
            out,
            "wrote {} ({} functions)",
            self.output.display(),
            self.functions
        )?;
        Ok(())
    }
}

/// docs/output.md's stream table rows of this verb: the stream its reports declare.
pub(crate) const STREAMS: &[(&str, output::Stream)] =
    &[("merge", <Merged as output::Report>::STREAM)];

/// A profile to merge: fitted, with the weight asked for and its window's end.
struct Part {
    graph: Graph,
    weight: f64,
    window_end: Option<SystemTime>,
    /// Its row in the report's inputs.
    input: usize,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    check_numbers(&args)?;
    let inputs: Vec<&Path> = args
        .profiles
        .iter()
        .chain(&args.binary)
        .map(PathBuf::as_path)
        .collect();
    refuse_outputs_over_inputs(&[("-o", Some(&args.output))], &inputs)?;
    let profiles: Vec<Graph> = args
        .profiles
        .iter()
        .map(|p| {
            let file =
                File::open(p).with_context(|| format!("cannot open profile {}", p.display()))?;
            Graph::read(BufReader::with_capacity(1 << 20, file))
                .with_context(|| format!("cannot read profile {}", p.display()))
        })
        .collect::<anyhow::Result<_>>()?;
    if args.binary.is_none() && !args.allow_build_id_mismatch {
        refuse_other_builds(&args.profiles, &profiles)?;
    }
    let ends = window_ends(&args, &profiles)?;
    let (mut inputs, parts) = fit_each(&args, profiles, &ends)?;
    if parts.is_empty() {
        bail!("every profile was refused: nothing to merge");
    }
    let aged: Vec<AgedPart> = parts
        .iter()
        .map(|part| AgedPart {
            graph: &part.graph,
            weight: part.weight,
            window_end: part.window_end,
        })
        .collect();
    // Ages count from the newest profile's end: the merge of old profiles is not all faded.
    let newest = ends.iter().flatten().max().copied();
    let merged = merge_aged(
        &aged,
        newest.unwrap_or(SystemTime::UNIX_EPOCH),
        args.half_life_days,
    );
    for (part, weight) in parts.iter().zip(&merged.weights) {
        inputs[part.input].weight = *weight;
    }
    let scale = merged.scale;
    if scale < 1.0 {
        output::warn(format!(
            "the weighted counts sum to over {MAX_COUNT}, the most a profile holds: every weight is scaled by {scale:.3e}, keeping their proportions"
        ));
    }
    let mut bytes = Vec::new();
    merged
        .graph
        .write(&mut bytes)
        .context("cannot write the merged profile")?;
    write_output_file(&args.output, &bytes)?;
    let report = Merged {
        output: args.output,
        functions: merged.graph.funcs().len(),
        inputs,
    };
    output::emit(&report, args.json.mode())
}

/// Refuses a --weight list that does not give one per profile, and a weight, half-life or
/// --min-matched out of its range.
fn check_numbers(args: &Args) -> anyhow::Result<()> {
    if !args.weight.is_empty() && args.weight.len() != args.profiles.len() {
        bail!(
            "{} --weight values for {} profiles: give one per profile, in their order",
            args.weight.len(),
            args.profiles.len()
        );
    }
    if let Some(w) = args
        .weight
        .iter()
        .find(|w| !(0.0..=MAX_WEIGHT).contains(*w))
    {
        bail!("--weight {w:?}: a weight is a number from 0 to {MAX_WEIGHT:.0}");
    }
    if let Some(h) = args.half_life_days.filter(|h| !(h.is_finite() && *h > 0.0)) {
        bail!("--half-life-days {h}: give a number of days above 0");
    }
    if !(0.0..=1.0).contains(&args.min_matched) {
        bail!(
            "--min-matched {}: a fraction between 0 and 1",
            args.min_matched
        );
    }
    Ok(())
}

/// Each profile fitted to --binary (as it is without one): the report's rows, and the parts
/// to merge, those of which the binary has too little left out with a warning.
fn fit_each(
    args: &Args,
    profiles: Vec<Graph>,
    ends: &[Option<SystemTime>],
) -> anyhow::Result<(Vec<Input>, Vec<Part>)> {
    let binary = args.binary.as_deref().map(Binary::open).transpose()?;
    let prints = match &binary {
        Some(b) => Some(
            hottext::binary::fingerprint::fingerprints(b)
                .with_context(|| format!("cannot read the code of {}", b.path.display()))?,
        ),
        None => None,
    };
    let mut inputs = Vec::new();
    let mut parts = Vec::new();
    for (i, profile) in profiles.into_iter().enumerate() {
        let mut input = Input {
            profile: args.profiles[i].clone(),
            weight: 0.0,
            matched_fraction: None,
            merged: true,
            note: None,
        };
        let graph = match (&binary, &prints) {
            // The build is checked above, against the other profiles, when there is no binary.
            (Some(b), Some(prints)) => {
                match fit_any_build(&profile, b, CodePrints::Known(prints), args.min_matched) {
                    Ok(fitted) => {
                        input.matched_fraction = Some(fitted.matched.share());
                        fitted.graph
                    }
                    Err(FitError::TooLittleMatched { matched, .. }) => {
                        input.matched_fraction = Some(matched.share());
                        input.merged = false;
                        input.note = Some(format!(
                            "{} has {:.1}% of its weight, below --min-matched",
                            b.path.display(),
                            100.0 * matched.share()
                        ));
                        profile
                    }
                    Err(other) => return Err(other.into()),
                }
            }
            _ => profile,
        };
        if input.merged {
            parts.push(Part {
                graph,
                weight: args.weight.get(i).copied().unwrap_or(1.0),
                window_end: ends[i],
                input: inputs.len(),
            });
        } else {
            output::warn(format!(
                "{} is left out: {}",
                input.profile.display(),
                input.note.as_deref().unwrap_or("")
            ));
        }
        inputs.push(input);
    }
    Ok((inputs, parts))
}

/// Each profile's `window-end` header, when --half-life-days needs it; a profile without one
/// is an error that names it.
fn window_ends(args: &Args, profiles: &[Graph]) -> anyhow::Result<Vec<Option<SystemTime>>> {
    profiles
        .iter()
        .zip(&args.profiles)
        .map(|(g, path)| {
            if args.half_life_days.is_none() {
                return Ok(None);
            }
            let text = g.header("window-end").with_context(|| {
                format!(
                    "{} has no window-end header (pipeline run writes one): --half-life-days cannot tell its age; give --weight instead",
                    path.display()
                )
            })?;
            let end = parse_time(text)
                .map_err(|e| anyhow!("{}: window-end {e}", path.display()))?;
            if end > SystemTime::now() + MAX_CLOCK_SKEW {
                bail!(
                    "{}: window-end '{text}' is in the future: its age cannot be told, and it would make every other profile look old; fix the header or give --weight instead of --half-life-days",
                    path.display()
                );
            }
            Ok(Some(end))
        })
        .collect()
}

/// How far a profile's `window-end` may be ahead of this machine's clock: hosts' clocks differ
/// by seconds, not by hours.
const MAX_CLOCK_SKEW: Duration = Duration::from_secs(3600);

/// Refuses profiles of different builds (their `build-id` headers differ): their names may
/// mean other code, and merged as they are they would mix two layouts.
fn refuse_other_builds(paths: &[PathBuf], profiles: &[Graph]) -> anyhow::Result<()> {
    let mut ids = paths
        .iter()
        .zip(profiles)
        .filter_map(|(p, g)| Some((p, g.header("build-id")?)));
    let Some((first_path, first)) = ids.next() else {
        return Ok(());
    };
    if let Some((path, other)) = ids.find(|(_, id)| id != &first) {
        bail!(
            "{} has build-id {first} and {} has build-id {other}: profiles of different builds; give --binary BIN to fit each to one build, or --allow-build-id-mismatch to merge their names as they are",
            first_path.display(),
            path.display()
        );
    }
    Ok(())
}
