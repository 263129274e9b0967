//! `ab --simulate`'s settings from the command line.

use anyhow::{bail, Context};
use hottext::measure::ab::Config;
use hottext::measure::simulate::compare::SimConfig;
use hottext::measure::simulate::Checks;
use hottext::os::cpus;

use super::Args;

/// The --simulate run's settings: offsets once each, the --metric as the count of work, the
/// number of simulations at once.
pub(super) fn config(args: &Args, config: Config) -> anyhow::Result<SimConfig> {
    let mut offsets = Vec::new();
    for &offset in &args.offsets {
        if !offsets.contains(&offset) {
            offsets.push(offset); // each offset once: runs share a directory per offset
        }
    }
    if offsets.is_empty() {
        offsets.push(0);
    }
    if config.metrics.len() > 1 {
        bail!(
            "--simulate takes one --metric, the count of work a run did (e.g. 'Complete requests: *([0-9]+)'); {} given",
            config.metrics.len()
        );
    }
    let own: Vec<u32> = cpus::own()
        .context("cannot read this process's CPU affinity")?
        .iter()
        .collect();
    let first = config.service.as_ref().map(|s| s.cpu);
    let cpus = first
        .into_iter()
        .chain(own.iter().copied().filter(|&c| Some(c) != first))
        .collect();
    let metric = config.metrics.into_iter().next();
    let mut sim = SimConfig {
        a: config.a,
        b: config.b,
        baseline_a: args.baseline_a.clone(),
        baseline_b: args.baseline_b.clone(),
        service: config.service,
        baseline_load: args.baseline_load.clone(),
        offsets,
        work_name: metric.as_ref().map_or_else(String::new, |m| m.name.clone()),
        checks: Checks {
            work: metric.map(|m| m.pattern),
            expect_same: config.expect_same,
        },
        jobs: 1,
        cpus,
    };
    let parallel_ok = sim.service.is_none() || sim.names_slot();
    sim.jobs = match args.jobs {
        Some(0) => bail!("--jobs 0: give at least 1"),
        Some(n) if n > 1 && !parallel_ok => bail!(
            "--jobs {n}: servers side by side would listen on the same port; put {{slot}} in \
             --server-a and --server-b where the port goes (e.g. -c nginx-{{slot}}.conf), and in \
             --ready and --load, or use --jobs 1"
        ),
        Some(n) => n,
        None if parallel_ok => own.len().max(1),
        None => 1,
    };
    Ok(sim)
}
