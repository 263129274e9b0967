//! The simulated runs of one A/B comparison, side by side on the machine's CPUs: each (offset,
//! side) is one job, run by one of `jobs` workers; records come back in the jobs' order
//! whatever order they finish in.
//!
//! Servers side by side need a port each: the service form runs in parallel only when its
//! commands name `{slot}`, the worker's number (0, 1, ...), as in `--port 1808{slot}`; each
//! worker's servers are pinned to a CPU of their own.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

use super::config::{SimConfig, SimRecord, OFFSET_PLACEHOLDER, SLOT_PLACEHOLDER};
use super::{simulate_in, Model, Workload};
use crate::measure::ab::{Service, Side};
use crate::measure::MeasureError;

/// One simulated side at one offset.
#[derive(Debug, Clone, Copy)]
pub(super) struct Job {
    pub offset: u64,
    pub side: Side,
}

/// The jobs in report order: A first at even offsets, B first at odd ones.
pub(super) fn jobs(offsets: &[u64]) -> Vec<Job> {
    let mut jobs = Vec::with_capacity(2 * offsets.len());
    for (i, &offset) in offsets.iter().enumerate() {
        let order = match i % 2 {
            0 => [Side::A, Side::B],
            _ => [Side::B, Side::A],
        };
        jobs.extend(order.map(|side| Job { offset, side }));
    }
    jobs
}

/// Runs `jobs` with up to `config.jobs` workers; `progress` hears of each as it finishes. The
/// first error stops the start of further jobs and is returned once the running ones end.
pub(super) fn run_all(
    config: &SimConfig,
    models: &[Model],
    jobs: &[Job],
    scratch: &Path,
    cancel: &AtomicBool,
    progress: &mut dyn FnMut(&SimRecord, usize),
) -> Result<Vec<SimRecord>, MeasureError> {
    let workers = config.jobs.clamp(1, jobs.len().max(1));
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel();
    let mut done: Vec<Option<SimRecord>> = vec![None; jobs.len()];
    let mut first_error = None;
    std::thread::scope(|scope| {
        for slot in 0..workers {
            let (tx, next, failed) = (tx.clone(), &next, &failed);
            scope.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= jobs.len() || failed.load(Ordering::SeqCst) {
                    return;
                }
                let result = run_job(config, models, jobs[i], slot, scratch, cancel);
                failed.fetch_or(result.is_err(), Ordering::SeqCst);
                if tx.send((i, result)).is_err() {
                    return;
                }
            });
        }
        drop(tx);
        let mut finished = 0;
        for (i, result) in rx {
            match result {
                Ok(record) => {
                    finished += 1;
                    progress(&record, finished);
                    done[i] = Some(record);
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
    });
    match first_error {
        Some(e) => Err(e),
        None => Ok(done.into_iter().flatten().collect()),
    }
}

fn run_job(
    config: &SimConfig,
    models: &[Model],
    job: Job,
    slot: usize,
    scratch: &Path,
    cancel: &AtomicBool,
) -> Result<SimRecord, MeasureError> {
    let at = |text: &str| {
        text.replace(OFFSET_PLACEHOLDER, &job.offset.to_string())
            .replace(SLOT_PLACEHOLDER, &slot.to_string())
    };
    let (command, baseline) = match job.side {
        Side::A => (at(&config.a), config.baseline_a.as_deref().map(at)),
        Side::B => (at(&config.b), config.baseline_b.as_deref().map(at)),
    };
    let service = config.service.as_ref().map(|s| Service {
        ready: at(&s.ready),
        load: at(&s.load),
        cpu: config
            .cpus
            .get(slot % config.cpus.len().max(1))
            .copied()
            .unwrap_or(s.cpu),
        ..s.clone()
    });
    let baseline_load = config.baseline_load.as_deref().map(at);
    let workload = match &service {
        None => Workload::Command {
            command: &command,
            baseline: baseline.as_deref(),
        },
        Some(service) => Workload::Service {
            server: &command,
            service,
            baseline_load: baseline_load.as_deref(),
        },
    };
    let side = format!("{:?}", job.side);
    let label = format!("offset{}-{side}", job.offset);
    let simulated = simulate_in(
        &workload,
        models,
        &config.checks,
        &side,
        scratch,
        &label,
        cancel,
    )?;
    Ok(SimRecord {
        offset: job.offset,
        side: job.side,
        simulated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_alternate_which_side_runs_first() {
        let order: Vec<(u64, Side)> = jobs(&[0, 64, 128])
            .iter()
            .map(|j| (j.offset, j.side))
            .collect();
        assert_eq!(
            order,
            [
                (0, Side::A),
                (0, Side::B),
                (64, Side::B),
                (64, Side::A),
                (128, Side::A),
                (128, Side::B)
            ]
        );
    }
}
