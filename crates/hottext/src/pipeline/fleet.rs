//! A service on many hosts, as the hot-text paper's framework runs it: each host's scheduled
//! run records the service and uploads its profile ([`upload`], `pipeline run --upload-only`),
//! and one scheduled job merges the recent uploads of every host ([`from_uploads`],
//! `pipeline run --merge-uploads`), then gates, stores and commits like a single host's run.
//!
//! The merge fits every upload to the binary being built ([`fit`](crate::graph::fit): by name, then by code),
//! refuses an upload of which the binary has less than `[fleet] min_matched` (another build,
//! too far apart), and weighs the rest by age: weight = 0.5^(age / `half_life_days`). Counts
//! are summed, so a host that recorded more samples weighs more in proportion.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::config::Config;
use super::gate::{self, Gated};
use super::gather::{self, Gathered, HostUpload};
use super::stored::{store_profile, Stored};
use super::{PipelineError, Progress};
use crate::binary::Binary;
use crate::graph::fit::{fit_any_build, CodePrints, FitError};
use crate::graph::merge::{merge_aged, AgedPart};
use crate::graph::Graph;
use crate::store::meta;
use crate::store::uploads::{check_name, Upload};
use crate::store::Store;

/// What an upload-only run did.
#[derive(Debug, Clone, Serialize)]
pub struct UploadReport {
    /// The service's name.
    pub service: String,
    /// This host's name in its upload.
    pub host: String,
    /// The recording and the gate's verdict.
    #[serde(flatten)]
    pub gated: Gated,
    /// Set when the gate passed: the stored profile and its entry.
    pub object: Option<String>,
    /// The upload's entry in the store, when the gate passed.
    pub entry: Option<String>,
}

/// This host's name in its uploads: `[service] host`, else the kernel's host name.
fn host_name(config: &Config) -> Result<String, PipelineError> {
    let host = match &config.service.host {
        Some(h) => h.clone(),
        None => crate::os::sys::hostname().map_err(|source| PipelineError::Io {
            what: "cannot read this host's name (set [service] host)".into(),
            source,
        })?,
    };
    check_name("host", &host)
        .map_err(|e| PipelineError::Service(format!("{e}; set [service] host")))?;
    Ok(host)
}

/// Records the service, and if the gate passes (samples and symbols; there is no previous
/// profile to drift from), stores the profile and announces it as this host's upload. Needs no
/// repository: hosts have the config, the merge job has the repository.
pub fn upload(
    config: &Config,
    cancel: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
) -> Result<UploadReport, PipelineError> {
    let host = host_name(config)?;
    check_name("[service] name", &config.service.name).map_err(PipelineError::Service)?;
    let scratch = tempfile::Builder::new()
        .prefix("hottext-upload-")
        .tempdir()
        .map_err(|source| PipelineError::Io {
            what: "cannot make a temporary directory".into(),
            source,
        })?;
    let mut g = gather::from_recording(config, scratch.path(), cancel, progress)?;
    let facts = gate::Facts {
        samples: g.samples,
        resolved: g.resolved,
        drift: None,
    };
    let mut report = UploadReport {
        service: config.service.name.clone(),
        host: host.clone(),
        gated: Gated::judge(&config.gate, &facts, g.window_start, g.window_end),
        object: None,
        entry: None,
    };
    if !report.gated.passed {
        return Ok(report);
    }
    g.graph.set_header("host", &host);
    let Stored { store, put, meta } = store_profile(&mut g, config)?;
    let upload = Upload {
        service: config.service.name.clone(),
        host,
        meta,
    };
    report.entry = Some(store.announce(&upload).map_err(upload_error)?);
    report.object = Some(put.hash.to_string());
    Ok(report)
}

fn upload_error(e: crate::store::uploads::UploadError) -> PipelineError {
    match e {
        crate::store::uploads::UploadError::Store(s) => PipelineError::Store(s),
        other => PipelineError::Service(other.to_string()),
    }
}

/// The uploads of the service in the window before `now`, fitted to `[service] binary`,
/// weighed by age and merged, newest first.
pub fn from_uploads(config: &Config, now: SystemTime) -> Result<Gathered, PipelineError> {
    let path = config.service.binary.as_ref().ok_or_else(|| {
        PipelineError::Service(
            "--merge-uploads needs [service] binary: every host's profile is fitted to it".into(),
        )
    })?;
    let binary = Binary::open(path)?;
    let prints = gather::code_of(&binary)?;
    let store = Store::open(&config.store.url)?;
    let fleet = &config.fleet;
    let since = now
        .checked_sub(Duration::from_secs_f64(fleet.window_days * 86400.0))
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let entries = store
        .uploads(&config.service.name, SystemTime::UNIX_EPOCH)
        .map_err(upload_error)?;
    let (mut seen, mut expired, mut parts) = (Vec::new(), Vec::new(), Vec::new());
    let (mut samples, mut seconds, mut window) = (0u64, 0.0, None::<(SystemTime, SystemTime)>);
    for entry in entries {
        let upload = match entry {
            Ok(u) if u.meta.window_end < since => {
                expired.push(u);
                continue;
            }
            Ok(u) => u,
            Err(e) => {
                seen.push(refused(String::new(), String::new(), e.to_string()));
                continue;
            }
        };
        let age = now
            .duration_since(upload.meta.window_end)
            .unwrap_or_default();
        let mut host = refused(upload.key(), upload.host.clone(), String::new());
        host.object = Some(upload.meta.object.to_string());
        host.window_end = Some(meta::time(upload.meta.window_end));
        host.age_days = age.as_secs_f64() / 86400.0;
        host.samples = upload.meta.samples;
        let profile = store
            .get(&upload.meta.object)
            .map_err(|e| e.to_string())
            .and_then(|bytes| Graph::read(bytes.as_slice()).map_err(|e| e.to_string()));
        let profile = match profile {
            Ok(p) => p,
            Err(e) => {
                host.note = Some(format!("its profile cannot be read: {e}"));
                seen.push(host);
                continue;
            }
        };
        // Each upload comes from a build of its own; what fits is what matched.
        let code = CodePrints::Known(&prints);
        let fitted = match fit_any_build(&profile, &binary, code, fleet.min_matched) {
            Ok(fitted) => fitted,
            Err(FitError::TooLittleMatched { matched, .. }) => {
                host.matched_fraction = matched.share();
                host.note = Some(format!(
                    "the binary has {:.1}% of its weight, below [fleet] min_matched {:.1}%: recorded on another build",
                    100.0 * host.matched_fraction,
                    100.0 * fleet.min_matched
                ));
                seen.push(host);
                continue;
            }
            Err(other) => {
                host.note = Some(other.to_string());
                seen.push(host);
                continue;
            }
        };
        host.matched_fraction = fitted.matched.share();
        host.merged = true;
        samples += upload.meta.samples;
        let (start, end) = (upload.meta.window_start, upload.meta.window_end);
        seconds += end.duration_since(start).unwrap_or_default().as_secs_f64();
        window = Some(window.map_or((start, end), |(s, e)| (s.min(start), e.max(end))));
        parts.push((end, fitted.graph, seen.len()));
        seen.push(host);
    }
    // Newest first: the newest upload's sizes and headers lead.
    parts.sort_by_key(|p| std::cmp::Reverse(p.0));
    let aged: Vec<AgedPart> = parts
        .iter()
        .map(|(end, graph, _)| AgedPart {
            graph,
            weight: 1.0,
            window_end: Some(*end),
        })
        .collect();
    let merged = merge_aged(&aged, now, Some(fleet.half_life_days));
    for ((_, _, host), weight) in parts.iter().zip(&merged.weights) {
        seen[*host].weight = *weight;
    }
    let (window_start, window_end) = window.unwrap_or((now, now));
    Ok(Gathered {
        binary,
        prints,
        graph: merged.graph,
        samples,
        // Each upload passed its host's gate, which checks symbols.
        resolved: 1.0,
        window_start,
        window_end,
        seconds,
        uploads: Some(seen),
        expired,
    })
}

fn refused(entry: String, host: String, note: String) -> HostUpload {
    HostUpload {
        entry,
        host,
        object: None,
        window_end: None,
        age_days: 0.0,
        samples: 0,
        matched_fraction: 0.0,
        weight: 0.0,
        merged: false,
        note: (!note.is_empty()).then_some(note),
    }
}
