//! The automated loop of section 4 of "Hot-text and huge pages": nobody maintains a profile by
//! hand. A scheduled job ([`schedule`]) runs [`run`], which
//!
//! 1. takes the [`lock`] of the repository's branch (two runs at once queue up),
//! 2. records the running service with perf ([`service`]) and builds its call graph,
//! 3. fits the previous profile (named by the meta file on the branch) to the current binary
//!    ([`crate::graph::fit`]) and reports how far usage moved ([`drift`]),
//! 4. applies the quality [`gate`]; a failed gate changes nothing,
//! 5. merges with time decay ([`merge`]), puts the result in the [`crate::store`], and
//! 6. commits the new meta file on a branch with a message that says what changed ([`git`]),
//!    and pushes it if asked.
//!
//! The build's side is [`fetch`]: fetch the profile the meta file names, check it, fit it to the
//! binary being linked.

pub mod config;
pub mod fetch;
pub mod fleet;
pub mod gate;
mod gather;
pub mod git;
pub mod lock;
mod message;
mod stored;

pub mod schedule;
pub mod service;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Serialize;

use crate::binary::BinaryError;
use crate::graph::{drift, merge, Graph, GraphError};
use crate::profile::record::RecordError;
use crate::profile::ProfileError;
use crate::store::meta::Meta;
use crate::store::StoreError;

use config::Config;
use drift::Drift;
use gate::Gated;
use git::{GitError, Repo};
use lock::{Lock, LockError, Scratch};
use message::commit_message;
use stored::{previous_profile, store_profile, Stored};

/// Movers named in the commit message.
const TOP_MOVERS: usize = 8;
/// The command named in the meta files the pipeline commits.
const PIPELINE_RUN: &str = "hottext pipeline run";

/// Why a pipeline run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PipelineError {
    /// The configuration cannot be used.
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    /// Another run holds the lock.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// The git step failed.
    #[error(transparent)]
    Git(#[from] GitError),
    /// The service cannot be found, started or named.
    #[error("{0}")]
    Service(String),
    /// The recording failed.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// The binary cannot be read.
    #[error(transparent)]
    Binary(#[from] BinaryError),
    /// perf.data cannot be read.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A file or folder could not be read or written.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The run was interrupted by a signal.
    #[error("interrupted: the service and load hottext started are stopped, and nothing was stored or committed")]
    Interrupted,
    /// The written profile does not read back.
    #[error("the profile this run wrote does not read back ({0}): it is not stored, so no build can fetch it; please report this as a hottext bug")]
    Unreadable(GraphError),
}

/// Choices of one run that are not in the config.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// How long to wait for another run that holds the lock.
    pub lock_wait: Duration,
    /// Set by a signal (`os::cancel::on_interrupt`): the run stops at the next check,
    /// stops what it started, and leaves the branch as it was.
    pub cancel: &'static AtomicBool,
    /// The fleet's merge job: merge the recent uploads of every host ([`fleet`]) instead of
    /// recording the service here.
    pub from_uploads: bool,
}

/// What a run is doing, for a progress display: a recording of the configured length says
/// nothing for a minute otherwise.
#[derive(Debug, Clone, Copy)]
pub enum Progress {
    /// The service is being recorded: this long so far, of `total` (less if its load ends).
    Recording {
        /// How long so far.
        elapsed: Duration,
        /// How long it will record at most.
        total: Duration,
    },
    /// perf.data is being read: `done` of `total` bytes.
    Reading {
        /// Bytes read.
        done: u64,
        /// Bytes in all.
        total: u64,
    },
    /// The profile is being merged, gated, stored and committed.
    Finishing,
}

/// The previous profile and what became of it.
#[derive(Debug, Clone, Serialize)]
pub struct Previous {
    /// The stored object the meta file named, when it could be read.
    pub object: Option<String>,
    /// Share (0 to 1) of its weight that matched the current binary, and of it by code.
    pub matched_fraction: f64,
    /// Of which by code, under another name.
    pub matched_by_code_fraction: f64,
    /// Whether it was merged into this run's profile.
    pub merged: bool,
    /// Why it was not merged, if it was not.
    pub note: Option<String>,
}

/// What a run did.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The service's name.
    pub service: String,
    /// The recording and the gate's verdict.
    #[serde(flatten)]
    pub gated: Gated,
    /// Seconds recorded.
    pub seconds: f64,
    /// Functions with samples in this run, and how many of them hold 99% of the samples.
    pub sampled_functions: usize,
    /// The fewest of them that hold 99% of the samples.
    pub functions_for_99_percent: usize,
    /// The previous profile, when the meta file names one.
    pub previous: Option<Previous>,
    /// How far this run moved from the previous profile.
    pub drift: Option<Drift>,
    /// The fleet's merge job: every upload in the window, merged or refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uploads: Option<Vec<gather::HostUpload>>,
    /// Set when the gate passed: the stored profile, the meta file, the commit.
    pub object: Option<String>,
    /// Whether the store had the object already.
    pub object_existed: bool,
    /// The meta file, inside the repository.
    pub meta: PathBuf,
    /// The branch committed to.
    pub branch: String,
    /// The commit, when one was made.
    pub commit: Option<String>,
    /// The remote pushed to, when `[repo] push` is set.
    pub pushed_to: Option<String>,
    /// The commit message.
    pub message: Option<String>,
}

/// One refresh; see the module docs. `Ok` with `passed == false` when the gate failed (nothing
/// was changed). `progress` hears what the run is doing, several times a second.
pub fn run(
    config: &Config,
    opts: &RunOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<Report, PipelineError> {
    let repo = Repo::open(&config.repo.path, config.repo.author.as_deref())?;
    // The branch is what runs contend for, whichever services they profile.
    let lock_path = repo.common_dir()?.join(format!(
        "hottext-pipeline-{}.lock",
        config.repo.branch.replace('/', "-")
    ));
    let lock = Lock::acquire(&lock_path, opts.lock_wait)?;

    // Read the branch only under the lock: a queued run builds on the run before it.
    let branch = &config.repo.branch;
    let tip = repo.branch_tip(branch)?;
    let parent = match &tip {
        Some(t) => Some(t.clone()),
        None => repo.head()?,
    };
    let previous_meta = match &parent {
        Some(p) => repo
            .read_file(p, &config.repo.meta)?
            .map(|text| Meta::parse(&text, &config.repo.meta)),
        None => None,
    };

    let scratch = Scratch::create(&lock).map_err(|source| PipelineError::Io {
        what: format!(
            "cannot make a scratch directory beside {}",
            lock.path.display()
        ),
        source,
    })?;
    let mut g = if opts.from_uploads {
        progress(Progress::Finishing);
        fleet::from_uploads(config, std::time::SystemTime::now())?
    } else {
        gather::from_recording(config, &scratch.0, opts.cancel, progress)?
    };
    if opts.cancel.load(Ordering::SeqCst) {
        return Err(PipelineError::Interrupted);
    }
    let (mut previous, old) = previous_profile(previous_meta, &g.binary, &g.prints, config);
    if let Some(p) = previous.as_mut().filter(|_| opts.from_uploads) {
        // The uploads' own decay by age replaces the decay of the previous profile.
        p.merged = false;
        p.note =
            Some("the fleet's uploads in the window replace it (compared for drift only)".into());
    }
    let drift = old.as_ref().map(|o| drift::drift(o, &g.graph, TOP_MOVERS));
    let facts = gate::Facts {
        samples: g.samples,
        resolved: g.resolved,
        drift: drift.as_ref().map(|d| d.distance),
    };
    let (sampled_functions, functions_for_99_percent) = coverage(&g.graph);
    let mut report = Report {
        service: config.service.name.clone(),
        gated: Gated::judge(&config.gate, &facts, g.window_start, g.window_end),
        seconds: g.seconds,
        sampled_functions,
        functions_for_99_percent,
        previous,
        drift,
        uploads: g.uploads.take(),
        object: None,
        object_existed: false,
        meta: config.repo.meta.clone(),
        branch: branch.clone(),
        commit: None,
        pushed_to: None,
        message: None,
    };
    if !report.gated.passed {
        return Ok(report);
    }

    if let (Some(o), Some(p)) = (&old, report.previous.as_ref().filter(|p| p.merged)) {
        g.graph = merge::merge(&g.graph, o, config.merge.decay);
        if let Some(object) = &p.object {
            g.graph.set_header(
                "merged-with",
                format!("{object} decay {}", config.merge.decay),
            );
        }
    }
    let Stored { store, put, meta } = store_profile(&mut g, config)?;
    report.object = Some(put.hash.to_string());
    report.object_existed = put.existed;
    let message = commit_message(&report, &meta, config);
    report.commit = repo.commit_file(
        branch,
        parent.as_deref(),
        tip.as_deref(),
        &config.repo.meta,
        &meta.to_text(PIPELINE_RUN),
        &message,
    )?;
    report.message = Some(message);
    if let (Some(remote), Some(_)) = (&config.repo.push, &report.commit) {
        repo.push(remote, branch)?;
        report.pushed_to = Some(remote.clone());
    }
    // Entries that fell out of the window can never be merged again; their objects go at the
    // next gc unless a meta version names them.
    for u in &g.expired {
        store
            .withdraw(u)
            .map_err(|e| PipelineError::Service(e.to_string()))?;
    }
    Ok(report)
}

/// Functions with samples, and how few of them hold 99% of the samples.
fn coverage(g: &Graph) -> (usize, usize) {
    let mut samples: Vec<u64> = g
        .funcs()
        .iter()
        .map(|f| f.samples)
        .filter(|&s| s > 0)
        .collect();
    samples.sort_unstable_by(|a, b| b.cmp(a));
    let total: u64 = samples.iter().sum();
    let mut sum = 0;
    let needed = samples
        .iter()
        .take_while(|&&s| {
            let before = sum;
            sum += s;
            (before as f64) < 0.99 * total as f64
        })
        .count();
    (samples.len(), needed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coverage_counts_the_functions_that_hold_99_percent() {
        let g = Graph::read(
            "# hottext profile v1\nfn a 1 990\nfn b 1 9\nfn c 1 1\nfn d 1 0\n".as_bytes(),
        )
        .unwrap();
        assert_eq!(coverage(&g), (3, 1));
    }
}
