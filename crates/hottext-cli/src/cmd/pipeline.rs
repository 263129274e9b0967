//! `hottext pipeline`: the scheduled refresh (`run`) and its schedule (`install`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use hottext::pipeline::config::Config;
use hottext::pipeline::fleet::{self, UploadReport};
use hottext::pipeline::gate::Gated;
use hottext::pipeline::schedule::{self, Job};
use hottext::pipeline::{run as run_pipeline, Progress, Report, RunOptions};
use indicatif::{ProgressBar, ProgressStyle};

use crate::output::{self, Mode};

/// Refresh a service's profile without anyone maintaining it by hand
///
/// `run` profiles the running service, merges the new profile with the previous one (time
/// decay), applies the quality gate, puts the profile in the store and commits the new meta file
/// on a branch of the service's repository. `install --weekly` schedules `run` with systemd (or
/// prints the cron line). The config file is described in `hottext pipeline run --help`.
///
/// A service on many hosts: each host runs `run --upload-only` (record, gate, upload to the
/// store with its host name and time), one job runs `run --merge-uploads` (merge the recent
/// uploads of every host, weighted by age, fitted to the binary, gated, committed). See
/// docs/pipeline.md.
///
/// Examples:
///   hottext pipeline run --config hottext.toml
///   hottext pipeline install --weekly --config /srv/server/hottext.toml
///   hottext pipeline install --weekly --upload-only --config /srv/server/hottext.toml
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[command(subcommand)]
    command: PipelineCommand,
}

#[derive(clap::Subcommand)]
enum PipelineCommand {
    Run(RunArgs),
    Install(InstallArgs),
}

/// Profile the service, gate, store, and commit the meta file
///
/// Records the service named in the config (pid, pid_file, systemd_unit, or command plus
/// load), builds its profile, fits last run's profile (from the meta file on the branch) to the
/// current binary, and merges the two: weight = new + decay × previous. The gate needs enough
/// samples, enough of them in the binary's functions, and a drift from the previous profile
/// below the limit. If it passes, the profile goes into the store and the meta file is
/// committed on the branch (only that file changes), with a message that lists the top movers
/// and the coverage; then pushed, if the config names a remote.
///
/// Two runs at once queue on a lock in the repository's git directory. A failed gate changes
/// nothing and exits with status 1. The repository's work tree is not touched unless the branch
/// is checked out, and then only the meta file is replaced, atomically.
///
/// Config (TOML; relative paths are relative to the file):
///   [service]  name, binary, pid | pid_file | systemd_unit | command (+ load, startup_seconds),
///              version | version_command
///   [record]   seconds (60), frequency
///   [store]    url (a directory, s3://, gs://, az://, https://)
///   [repo]     path ("."), meta, branch ("hottext/profile"), push (a remote), author
///   [merge]    decay (0.5)
///   [fleet]    window_days (14), half_life_days (7), min_matched (0.5)
///   [gate]     min_samples (1000), min_resolved (0.9), max_drift (0.9), min_previous_matched (0.5)
///   [service] host names this host's uploads (default: the host name).
///
/// With --upload-only the run needs no repository: it records, applies the gate's samples and
/// symbols checks, puts the profile in the store and adds an entry naming it, this host and
/// the recording's time; exit status 1 when the gate fails. With --merge-uploads it records
/// nothing: it merges the uploads of the last window_days, each fitted to [service] binary by
/// name and code and weighted 0.5^(age / half_life_days); an upload the binary matches less
/// than min_matched is refused and reported. Then it gates (samples summed over the uploads,
/// drift from the committed profile), stores and commits as above, and withdraws the entries
/// that fell out of the window.
///
/// Examples:
///   hottext pipeline run --config hottext.toml --json
///   hottext pipeline run --config hottext.toml --upload-only
///   hottext pipeline run --config hottext.toml --merge-uploads
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
struct RunArgs {
    /// The config file (TOML, above).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Wait this long for another run of the same service to finish.
    #[arg(long, value_name = "SECONDS", default_value_t = 3600.0)]
    lock_wait: f64,
    #[command(flatten)]
    json: output::OutputArgs,
    /// A fleet's host: record and upload this host's profile; commit nothing.
    #[arg(long, conflicts_with = "merge_uploads")]
    upload_only: bool,
    /// A fleet's merge job: merge every host's recent uploads instead of recording.
    #[arg(long)]
    merge_uploads: bool,
}

/// Run the pipeline every week: write and enable a systemd timer and service
///
/// Where systemd does not run (containers, some CI machines), the units are still written and
/// the crontab line that does the same is printed on stdout.
///
/// Example:
///   hottext pipeline install --weekly --config /srv/server/hottext.toml
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
struct InstallArgs {
    /// The config file `pipeline run` will read.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Once a week (the paper's period; the only schedule for now).
    #[arg(long, required = true)]
    weekly: bool,
    /// Where to write the units.
    #[arg(long, value_name = "DIR", default_value = schedule::SYSTEM_UNIT_DIR)]
    unit_dir: PathBuf,
    /// Write the units but do not enable them.
    #[arg(long)]
    no_enable: bool,
    /// Schedule a fleet host's run: `run --upload-only`.
    #[arg(long, conflicts_with = "merge_uploads")]
    upload_only: bool,
    /// Schedule a fleet's merge job, `run --merge-uploads`, six hours after the uploads.
    #[arg(long)]
    merge_uploads: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        PipelineCommand::Run(a) => run_once(a),
        PipelineCommand::Install(a) => install(a),
    }
}

fn run_once(args: RunArgs) -> anyhow::Result<ExitCode> {
    if !(args.lock_wait >= 0.0 && args.lock_wait.is_finite()) {
        bail!("--lock-wait must be zero or more seconds");
    }
    let config = Config::read(&args.config)?;
    let mode = args.json.mode();
    output::parameters(
        "pipeline",
        &serde_json::json!({
            "record": config.record,
            "merge": config.merge,
            "gate": config.gate,
        }),
    );
    let opts = RunOptions {
        lock_wait: output::seconds("--lock-wait", args.lock_wait)?,
        // Ctrl-C, SIGTERM (systemd stopping the timer's unit) and SIGHUP stop the run cleanly.
        cancel: hottext::os::cancel::on_interrupt(),
        from_uploads: args.merge_uploads,
    };
    if args.merge_uploads {
        eprintln!(
            "hottext: pipeline {}: merging the uploads of the last {} days",
            config.service.name, config.fleet.window_days
        );
    } else {
        eprintln!(
            "hottext: pipeline {}: recording for {} s",
            config.service.name, config.record.seconds
        );
    }
    if args.upload_only {
        let report = fleet::upload(&config, opts.cancel, &mut progress_display())?;
        return output::emit(&report, mode);
    }
    let report = run_pipeline(&config, &opts, &mut progress_display())?;
    output::emit(&report, mode)
}

/// Exit status 1 when the gate failed, the failed checks named on stderr.
fn gate_status(gated: &Gated) -> anyhow::Result<ExitCode> {
    if gated.passed {
        return Ok(ExitCode::SUCCESS);
    }
    // Exit status 1 always comes with its reason on stderr, whatever stdout holds.
    for c in gated.gate.iter().filter(|c| !c.passed) {
        eprintln!("hottext: pipeline failed: gate {}: {}", c.name, c.detail);
    }
    Ok(ExitCode::from(1))
}

/// The gate's checks, one a line, for a person.
fn print_gate(out: &mut dyn Write, gate: &[hottext::pipeline::gate::Check]) -> anyhow::Result<()> {
    for c in gate {
        let mark = if c.passed { "ok  " } else { "FAIL" };
        writeln!(out, "  {mark} {}", c.detail)?;
    }
    Ok(())
}

/// An upload-only run's result, on stdout.
/// docs/output.md's stream table rows of this verb: the stream its reports declare.
pub(crate) const STREAMS: &[(&str, output::Stream)] = &[
    ("pipeline run", <Report as output::Report>::STREAM),
    (
        "pipeline run --upload-only",
        <UploadReport as output::Report>::STREAM,
    ),
];

impl output::Report for UploadReport {
    fn print(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        let r = self;
        print_gate(out, &r.gated.gate)?;
        match (&r.object, &r.entry) {
            (Some(object), Some(entry)) => writeln!(
                out,
                "uploaded {object} ({} samples, {} .. {}) as {entry}",
                r.gated.samples, r.gated.window_start, r.gated.window_end
            )?,
            _ => writeln!(out, "the gate failed: nothing was uploaded")?,
        }
        Ok(())
    }

    fn finish(&self, _mode: Mode) -> anyhow::Result<ExitCode> {
        gate_status(&self.gated)
    }
}

/// The run's result: on stdout, as nothing else is there.
impl output::Report for Report {
    fn print(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        let r = self;
        for u in r.uploads.iter().flatten() {
            let what = if u.merged {
                format!("merged, weight {:.3}", u.weight)
            } else {
                format!("REFUSED: {}", u.note.as_deref().unwrap_or("?"))
            };
            writeln!(
                out,
                "  upload {} ({:.1} days old, {} samples, {:.1}% matched): {what}",
                if u.host.is_empty() { &u.entry } else { &u.host },
                u.age_days,
                u.samples,
                100.0 * u.matched_fraction
            )?;
        }
        if let Some(message) = &r.message {
            for line in message.lines() {
                writeln!(out, "  {line}")?;
            }
        } else {
            print_gate(out, &r.gated.gate)?;
        }
        match (&r.commit, r.gated.passed) {
            (Some(c), _) => {
                writeln!(
                    out,
                    "committed {} on {} ({} -> {})",
                    &c[..c.len().min(12)],
                    r.branch,
                    r.meta.display(),
                    r.object.as_deref().unwrap_or("?")
                )?;
                if let Some(remote) = &r.pushed_to {
                    writeln!(out, "pushed {} to {remote}", r.branch)?;
                }
            }
            (None, true) => writeln!(
                out,
                "{} already names this profile: nothing to commit",
                r.meta.display()
            )?,
            (None, false) => writeln!(
out,

            "the gate failed: nothing was stored or committed; the previous profile stays in use"
        )?,
        }
        Ok(())
    }

    fn finish(&self, _mode: Mode) -> anyhow::Result<ExitCode> {
        gate_status(&self.gated)
    }
}

fn install(args: InstallArgs) -> anyhow::Result<ExitCode> {
    debug_assert!(args.weekly);
    let config_path = std::fs::canonicalize(&args.config)
        .with_context(|| format!("cannot find {}", args.config.display()))?;
    let config = Config::read(&config_path)?;
    let exe = std::env::current_exe().context("cannot tell where the hottext binary is")?;
    let job = match (args.upload_only, args.merge_uploads) {
        (true, _) => Job::Upload,
        (_, true) => Job::Merge,
        _ => Job::Refresh,
    };
    let units = schedule::weekly(&config.service.name, &exe, &config_path, job)?;
    let written = schedule::write(&units, &args.unit_dir)?;
    for path in &written {
        eprintln!("hottext: wrote {}", path.display());
    }
    let standard_dir = args.unit_dir == Path::new(schedule::SYSTEM_UNIT_DIR);
    if args.no_enable {
        eprintln!(
            "hottext: not enabled (--no-enable): systemctl enable --now {}.timer",
            units.name
        );
    } else if schedule::systemd_running() && standard_dir {
        schedule::enable(&units)?;
        eprintln!("hottext: enabled {}.timer (weekly)", units.name);
    } else {
        let why = if standard_dir {
            "systemd is not running on this machine"
        } else {
            "the units are not in systemd's directory"
        };
        eprintln!("hottext: {why}: not enabled. The crontab line that does the same:");
        println!("{}", units.cron);
    }
    Ok(ExitCode::SUCCESS)
}

/// A progress bar on a terminal (recording, then reading perf.data), and a line at each change
/// of stage everywhere, so that a log from cron or systemd shows where a run is.
fn progress_display() -> impl FnMut(Progress) {
    let bar = ProgressBar::new(0);
    let mut stage = "recording";
    move |p| {
        let (now, done, total) = match p {
            Progress::Recording { elapsed, total } => (
                "recording",
                elapsed.as_millis() as u64,
                total.as_millis() as u64,
            ),
            Progress::Reading { done, total } => ("reading perf.data", done, total),
            Progress::Finishing => {
                bar.finish_and_clear();
                eprintln!("hottext: merging, checking, storing and committing the profile");
                return;
            }
        };
        if now != stage {
            stage = now;
            // A hidden bar (no terminal) prints nothing, not even its println.
            if bar.is_hidden() {
                eprintln!("hottext: {now}");
            } else {
                bar.println(format!("hottext: {now}"));
            }
        }
        if bar.length() != Some(total) {
            bar.set_length(total);
            bar.set_style(
                ProgressStyle::with_template("{spinner} {msg} {bar:30} {percent}%")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar.set_message(now);
        }
        bar.set_position(done);
    }
}
