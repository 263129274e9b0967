//! Where a run's new profile comes from: this host's recording of the service
//! ([`from_recording`]), or the recent uploads of every host of the service
//! ([`super::fleet::from_uploads`], the fleet's merge job). Either way the rest of the run (gate,
//! store, commit) is the same.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use serde::Serialize;

use super::{service, PipelineError, Progress};
use crate::binary::fingerprint::{fingerprints, Fingerprints};
use crate::binary::Binary;
use crate::graph::Graph;
use crate::profile;
use crate::store::uploads::Upload;

/// One upload as the merge job saw it.
#[derive(Debug, Clone, Serialize)]
pub struct HostUpload {
    /// The entry's key in the store.
    pub entry: String,
    /// The host that uploaded it.
    pub host: String,
    /// The stored profile it names, when its entry could be read.
    pub object: Option<String>,
    /// When its recording ended.
    pub window_end: Option<String>,
    /// Its age in days at the merge.
    pub age_days: f64,
    /// Samples in its recording.
    pub samples: u64,
    /// Share (0 to 1) of the upload's weight that the binary has.
    pub matched_fraction: f64,
    /// 0.5^(age / half-life) when merged, 0 when refused.
    pub weight: f64,
    /// Whether it went into the merge.
    pub merged: bool,
    /// Why it was refused.
    pub note: Option<String>,
}

/// A new profile and what it covers.
pub struct Gathered {
    pub binary: Binary,
    pub prints: Fingerprints,
    /// Under the binary's names.
    pub graph: Graph,
    /// Samples of the binary behind it (summed over the uploads merged).
    pub samples: u64,
    /// Share of those samples that fell in a function symbol.
    pub resolved: f64,
    pub window_start: SystemTime,
    pub window_end: SystemTime,
    /// Seconds spent recording (for a merge of uploads, the merged uploads' recordings summed).
    pub seconds: f64,
    /// From uploads: each upload, merged or refused, and why.
    pub uploads: Option<Vec<HostUpload>>,
    /// From uploads: entries older than the window, withdrawn once the merge is committed.
    pub expired: Vec<Upload>,
}

/// The binary's code fingerprints, which let a later build match renamed functions.
pub(crate) fn code_of(binary: &Binary) -> Result<Fingerprints, PipelineError> {
    fingerprints(binary).map_err(|source| PipelineError::Io {
        what: format!("cannot read the code of {}", binary.path.display()),
        source,
    })
}

/// Records the service into `dir` and reads the recording; `progress` hears both.
pub fn from_recording(
    config: &super::config::Config,
    dir: &Path,
    cancel: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
) -> Result<Gathered, PipelineError> {
    let rec = service::record(config, dir, cancel, &mut |elapsed, total| {
        progress(Progress::Recording { elapsed, total })
    })?;
    let binary = Binary::open(&rec.binary)?;
    let opts_read = profile::Options {
        pid: Some(rec.pid),
        ..Default::default()
    };
    let (graph, stats) = profile::read(&rec.perf_data, &binary, &opts_read, &mut |done, total| {
        progress(Progress::Reading { done, total })
    })?;
    if cancel.load(Ordering::SeqCst) {
        return Err(PipelineError::Interrupted);
    }
    progress(Progress::Finishing);
    let prints = code_of(&binary)?;
    let resolved = if stats.samples_in_binary == 0 {
        0.0
    } else {
        1.0 - stats.samples_unresolved as f64 / stats.samples_in_binary as f64
    };
    Ok(Gathered {
        binary,
        prints,
        graph,
        samples: stats.samples_in_binary,
        resolved,
        window_start: rec.start,
        window_end: rec.end,
        seconds: rec.outcome.wall_seconds,
        uploads: None,
        expired: Vec::new(),
    })
}
