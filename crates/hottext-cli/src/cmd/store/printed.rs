//! What `store put`, `ls` and `gc` print: a payload on stdout (a hash, a list) for a script,
//! and a line on stderr about it for a person; `--json` prints the library's report alone.

use std::io::Write;
use std::time::{Duration, SystemTime};

use hottext::store::{GcReport, Object, Put};
use serde::Serialize;

use crate::output;

/// `store put`: the hash on stdout.
#[derive(Serialize)]
#[serde(transparent)]
pub(super) struct Stored<'a> {
    pub put: Put,
    #[serde(skip)]
    pub store: &'a str,
}

/// docs/output.md's stream table rows of `store`: the stream its reports declare.
pub(crate) const STREAMS: &[(&str, output::Stream)] = &[
    ("store put", <Stored as output::Report>::STREAM),
    ("store ls", <Listed as output::Report>::STREAM),
    ("store gc", <Collected as output::Report>::STREAM),
];

impl output::Report for Stored<'_> {
    fn print(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        writeln!(out, "{}", self.put.hash)?;
        Ok(())
    }

    fn note(&self) -> Option<String> {
        let what = if self.put.existed {
            "already there"
        } else {
            "stored"
        };
        Some(format!(
            "{what}: {} ({}) in {}",
            self.put.hash,
            output::bytes(self.put.size),
            self.store
        ))
    }
}

/// `store ls`: a line an object. The document is an object, so that it can carry `schema`.
#[derive(Serialize)]
pub(super) struct Listed<'a> {
    pub objects: Vec<Object>,
    #[serde(skip)]
    pub store: &'a str,
}

impl output::Report for Listed<'_> {
    fn print(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        for o in &self.objects {
            let when = o
                .modified
                .map(|s| {
                    hottext::store::meta::time(SystemTime::UNIX_EPOCH + Duration::from_secs(s))
                })
                .unwrap_or_else(|| "?".into());
            writeln!(out, "{}  {:>10}  {when}", o.hash, o.size)?;
        }
        Ok(())
    }

    fn note(&self) -> Option<String> {
        Some(format!("{} objects in {}", self.objects.len(), self.store))
    }
}

/// `store gc`: a line a deleted object (or one that would be, with --dry-run).
#[derive(Serialize)]
#[serde(transparent)]
pub(super) struct Collected {
    pub report: GcReport,
    #[serde(skip)]
    pub dry_run: bool,
    #[serde(skip)]
    pub min_age_days: f64,
}

impl Collected {
    fn verb(&self) -> &'static str {
        match self.dry_run {
            true => "would delete",
            false => "deleted",
        }
    }
}

impl output::Report for Collected {
    fn print(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        for o in &self.report.deleted {
            writeln!(out, "{} {}", self.verb(), o.hash)?;
        }
        Ok(())
    }

    fn note(&self) -> Option<String> {
        let r = &self.report;
        Some(format!(
            "{} {} objects; kept {} referenced and {} younger than {} days",
            self.verb(),
            r.deleted.len(),
            r.kept_referenced,
            r.kept_young,
            self.min_age_days
        ))
    }
}
