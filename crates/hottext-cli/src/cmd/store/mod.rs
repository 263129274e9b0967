//! `hottext store`: the content-addressed profile store by hand.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::{bail, Context};
use hottext::graph::Graph;
use hottext::store::meta::Meta;
use hottext::store::{ObjectHash, Store};

use super::{refuse_outputs_over_inputs, write_output_file};

mod printed;
use crate::output;
pub(crate) use printed::STREAMS;
use printed::{Collected, Listed, Stored};

/// Put, get, list and collect profiles in a content-addressed store
///
/// Objects are named by the SHA-256 of their content, and every read checks the content against
/// the name. STORE is a directory (the default kind; writes are atomic) or a URL: s3://bucket/prefix
/// (S3 and S3-compatible servers: add ?endpoint=http://host:9000&allow_http=true), gs://bucket,
/// az://container, https://host/path. Credentials come from the environment
/// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, ...), never from the URL.
///
/// Examples:
///   hottext store put server.profile --store /var/lib/hottext
///   hottext store get sha256:9f86d08... --store s3://profiles/server -o server.profile
///   hottext store ls --store /var/lib/hottext
///   hottext store gc --store /var/lib/hottext --repo . --meta hottext/server.meta
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[command(subcommand)]
    command: StoreCommand,
}

#[derive(clap::Subcommand)]
enum StoreCommand {
    Put(PutArgs),
    Get(GetArgs),
    Ls(LsArgs),
    Gc(GcArgs),
}

/// Store a profile under its hash; prints the hash
///
/// With --meta, also writes a meta file that names the object (facts from the profile's
/// headers), for a profile published by hand or by CI rather than by `hottext pipeline run`.
///
/// Example:
///   hottext store put server.profile --store /var/lib/hottext --meta server.meta
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
struct PutArgs {
    /// The file to store (a profile, unless --any).
    file: PathBuf,
    /// The store: a directory, or an s3://, gs://, az:// or https:// URL.
    #[arg(long, value_name = "STORE")]
    store: String,
    /// Write a meta file naming the stored profile.
    #[arg(long, value_name = "FILE")]
    meta: Option<PathBuf>,
    /// Store a file that is not a hottext profile.
    #[arg(long, conflicts_with = "meta")]
    any: bool,
    #[command(flatten)]
    json: output::OutputArgs,
}

/// Fetch an object by hash, checking its content against the hash
///
/// Exit status 1 when the object is missing or corrupt (the message names the hash). The
/// object itself is the output, so there is no --json.
///
/// Example:
///   hottext store get sha256:9f86d08... --store /var/lib/hottext -o server.profile
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
struct GetArgs {
    /// sha256:<hex> (or the bare hex).
    hash: String,
    /// The store: a directory, or an s3://, gs://, az:// or https:// URL.
    #[arg(long, value_name = "STORE")]
    store: String,
    /// Write here instead of stdout (atomically).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

/// List the objects: hash, size, age
///
/// Example:
///   hottext store ls --store /var/lib/hottext --json
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
struct LsArgs {
    /// The store: a directory, or an s3://, gs://, az:// or https:// URL.
    #[arg(long, value_name = "STORE")]
    store: String,
    #[command(flatten)]
    json: output::OutputArgs,
}

/// Delete the objects nothing refers to
///
/// Kept: objects named by --keep-meta files, by --keep hashes, by every version of --meta in the
/// history of --repo (so any profile commit can still be reverted and built), by the store's
/// upload entries (a fleet's hosts' profiles, `pipeline run --upload-only`), and objects younger
/// than --min-age-days (a run may have stored one and not committed yet). An upload entry that
/// cannot be read stops gc, as an unreadable meta version does.
///
/// Example:
///   hottext store gc --store /var/lib/hottext --repo . --meta hottext/server.meta --dry-run
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
struct GcArgs {
    /// The store: a directory, or an s3://, gs://, az:// or https:// URL.
    #[arg(long, value_name = "STORE")]
    store: String,
    /// Keep the object this meta file names (repeatable).
    #[arg(long, value_name = "FILE")]
    keep_meta: Vec<PathBuf>,
    /// Keep this object (repeatable).
    #[arg(long, value_name = "HASH")]
    keep: Vec<String>,
    /// A git repository whose history of --meta names objects to keep.
    #[arg(long, value_name = "DIR", requires = "meta")]
    repo: Option<PathBuf>,
    /// The meta file's path inside --repo.
    #[arg(long, value_name = "PATH", requires = "repo")]
    meta: Option<PathBuf>,
    /// Keep unreferenced objects younger than this many days.
    #[arg(long, value_name = "DAYS", default_value_t = 7.0)]
    min_age_days: f64,
    /// Say what would be deleted, delete nothing.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    json: output::OutputArgs,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        StoreCommand::Put(a) => put(a),
        StoreCommand::Get(a) => get(a),
        StoreCommand::Ls(a) => ls(a),
        StoreCommand::Gc(a) => gc(a),
    }
}

fn put(args: PutArgs) -> anyhow::Result<ExitCode> {
    refuse_outputs_over_inputs(&[("--meta", args.meta.as_deref())], &[&args.file])?;
    let bytes = std::fs::read(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let profile = if args.any {
        None
    } else {
        Some(Graph::read(bytes.as_slice()).with_context(|| {
            format!(
                "{} is not a hottext profile (use --any to store another file)",
                args.file.display()
            )
        })?)
    };
    let store = Store::open(&args.store)?;
    let put = store.put(&bytes)?;
    if let (Some(path), Some(profile)) = (&args.meta, &profile) {
        // A directory is written absolute: the meta file may be read from anywhere.
        let url = if args.store.contains("://") {
            args.store.clone()
        } else {
            std::path::absolute(&args.store)
                .with_context(|| format!("cannot resolve {}", args.store))?
                .display()
                .to_string()
        };
        let meta = meta_for(profile, &put, &url, hottext::graph::declared_format(&bytes));
        meta.write_atomic(path, "hottext store put")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let stored = Stored {
        put,
        store: &args.store,
    };
    output::emit(&stored, args.json.mode())
}

/// A meta file for a profile stored by hand: its facts from the profile's headers.
fn meta_for(profile: &Graph, put: &hottext::store::Put, store: &str, format: String) -> Meta {
    let when = |key| {
        profile
            .header(key)
            .and_then(|t| hottext::store::meta::parse_time(t).ok())
            .unwrap_or_else(SystemTime::now)
    };
    Meta {
        object: put.hash,
        store: hottext::store::location(store).to_string(),
        size: put.size,
        format,
        samples: profile
            .header("samples")
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| profile.total_samples()),
        window_start: when("window-start"),
        window_end: when("window-end"),
        binary_build_id: profile.header("build-id").map(str::to_string),
        binary_version: profile
            .header("binary-version")
            .unwrap_or("unknown")
            .to_string(),
    }
}

fn get(args: GetArgs) -> anyhow::Result<ExitCode> {
    let hash: ObjectHash = args.hash.parse()?;
    let store = Store::open(&args.store)?;
    let bytes = match store.get(&hash) {
        Ok(b) => b,
        Err(e) if e.is_unavailable() => {
            eprintln!("hottext: {e}");
            return Ok(ExitCode::from(1));
        }
        Err(e) => return Err(e.into()),
    };
    match &args.output {
        Some(path) => write_output_file(path, &bytes)?,
        None => {
            use std::io::Write;
            std::io::stdout().lock().write_all(&bytes)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn ls(args: LsArgs) -> anyhow::Result<ExitCode> {
    let store = Store::open(&args.store)?;
    let listed = Listed {
        objects: store.list()?,
        store: &args.store,
    };
    output::emit(&listed, args.json.mode())
}

fn gc(args: GcArgs) -> anyhow::Result<ExitCode> {
    if !(args.min_age_days >= 0.0 && args.min_age_days.is_finite()) {
        bail!("--min-age-days must be zero or more");
    }
    let mut keep: HashSet<ObjectHash> = HashSet::new();
    for h in &args.keep {
        keep.insert(h.parse()?);
    }
    for path in &args.keep_meta {
        keep.insert(Meta::read(path)?.object);
    }
    if let (Some(repo), Some(meta)) = (&args.repo, &args.meta) {
        let found = hashes_in_history(repo, meta, &keep)?;
        if found.is_empty() {
            bail!(
                "no version of {} in the history of {} names an object: check --repo and --meta \
                 (gc would otherwise delete every profile)",
                meta.display(),
                repo.display()
            );
        }
        keep.extend(found);
    }
    let store = Store::open(&args.store)?;
    keep.extend(store.uploaded_objects().map_err(|e| {
        anyhow::anyhow!("{e}: gc stops, since the object that entry names would look unreferenced and be deleted")
    })?);
    if !(0.0..=36500.0).contains(&args.min_age_days) {
        bail!(
            "--min-age-days {:?}: give a number of days from 0 to 36500 (100 years)",
            args.min_age_days
        );
    }
    let min_age = output::seconds("--min-age-days", args.min_age_days * 86400.0)?;
    let report = store.gc(&keep, min_age, SystemTime::now(), args.dry_run)?;
    let collected = Collected {
        report,
        dry_run: args.dry_run,
        min_age_days: args.min_age_days,
    };
    output::emit(&collected, args.json.mode())
}

/// Every object that any commit's version of `meta` names, on every branch. A version that
/// cannot be read stops gc, since the object it names would otherwise look unreferenced and be
/// deleted, unless its text names an object in `kept` (`--keep HASH`): then that one is safe.
fn hashes_in_history(
    repo: &Path,
    meta: &Path,
    kept: &HashSet<ObjectHash>,
) -> anyhow::Result<HashSet<ObjectHash>> {
    let git = |args: &[&str]| -> anyhow::Result<std::process::Output> {
        std::process::Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(args)
            .output()
            .context("cannot run git (apt-get install git)")
    };
    let stdout = |args: &[&str]| -> anyhow::Result<String> {
        let out = git(args)?;
        if !out.status.success() {
            bail!(
                "git {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let path = meta.to_string_lossy();
    let commits = stdout(&["log", "--all", "--format=%H", "--", &path])?;
    let mut found = HashSet::new();
    for commit in commits.lines() {
        let version = format!("{commit}:{path}");
        // A commit that deleted the file has no version of it.
        if !git(&["cat-file", "-e", &version])?.status.success() {
            continue;
        }
        let text = stdout(&["show", &version])?;
        match Meta::parse(&text, meta) {
            Ok(m) => {
                found.insert(m.object);
            }
            Err(e) if kept.iter().any(|h| text.contains(&h.hex())) => output::warn(format!(
                "{} at commit {commit} cannot be read ({e}); the object it names is kept by --keep",
                meta.display()
            )),
            Err(e) => bail!(
                "{} at commit {commit} cannot be read ({e}): gc stops, since the object that \
                 version names would look unreferenced and be deleted; find it (git show \
                 {commit}:{path}) and keep it with --keep sha256:HEX, or rewrite that commit",
                meta.display()
            ),
        }
    }
    Ok(found)
}
