//! The meta file: the few lines in the service's repository that say which profile the build
//! uses. Small, text, one fact a line, so that a refresh is a one-line-per-fact diff that
//! people review and revert like code:
//!
//! ```text
//! # hottext profile meta v1
//! # Written by `hottext pipeline run`; the build runs `hottext fetch --meta <this file>`.
//! object: sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
//! store: s3://profiles/server
//! size: 48213
//! format: hottext profile v3
//! samples: 59880
//! window-start: 2025-03-03T03:17:00Z
//! window-end: 2025-03-03T03:19:00Z
//! binary-build-id: 5c0e8a7f2b4f0c1d9e3a6b7c8d9e0f1a2b3c4d5e
//! binary-version: 2.14.1
//! ```
//!
//! Unknown keys are ignored (a newer hottext may add some); a missing or repeated key, or a
//! malformed value, is an error that names the line. `store` is where the profile is, never how
//! to reach it (no `?endpoint=…` options: see [`super::location`]); `fetch` refuses a meta file
//! whose store carries options, and the pipeline reads only from its configured store.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Serialize;

use super::ObjectHash;

/// The first line of every meta file.
pub(crate) const MAGIC: &str = "# hottext profile meta v1";

/// What a meta file says: which stored profile the build uses, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Meta {
    /// The profile's name in the store: the SHA-256 of its bytes.
    #[serde(serialize_with = "super::display")]
    pub object: ObjectHash,
    /// Where the object is (a store URL, without credentials).
    pub store: String,
    /// The object's size in bytes: a second check that the hash names the right object.
    pub size: u64,
    /// The profile's own first line (`hottext profile v1`).
    pub format: String,
    /// Samples of the binary in the recording this profile adds (before merging).
    pub samples: u64,
    /// When the recording began.
    #[serde(serialize_with = "rfc3339")]
    pub window_start: SystemTime,
    /// When the recording ended.
    #[serde(serialize_with = "rfc3339")]
    pub window_end: SystemTime,
    /// Build-id (hex) of the binary that was profiled, if it had one.
    pub binary_build_id: Option<String>,
    /// The service's version as the pipeline was told it ("unknown" if not).
    pub binary_version: String,
}

/// Why a meta file could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MetaError {
    /// The file could not be read.
    #[error("cannot read meta file {path}: {source}")]
    Io {
        /// The meta file.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// The first line is not the meta file's magic line.
    #[error("{path} is not a hottext meta file: it does not start with '{MAGIC}'")]
    NotMeta {
        /// The file.
        path: PathBuf,
    },
    /// A line is not `key: value`, or its value does not parse.
    #[error("{path}, line {line}: {msg}")]
    Malformed {
        /// The meta file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with the line.
        msg: String,
    },
    /// A required key has no line.
    #[error("{path} lacks the '{key}' line")]
    Missing {
        /// The meta file.
        path: PathBuf,
        /// The key (`object`, `store`, …).
        key: &'static str,
    },
}

impl Meta {
    /// Reads and parses the meta file at `path`.
    pub fn read(path: &Path) -> Result<Meta, MetaError> {
        let text = std::fs::read_to_string(path).map_err(|source| MetaError::Io {
            path: path.into(),
            source,
        })?;
        Meta::parse(&text, path)
    }

    /// Parses meta text; `path` is for messages.
    pub fn parse(text: &str, path: &Path) -> Result<Meta, MetaError> {
        let mut lines = text.lines().enumerate();
        if lines.next().map(|(_, l)| l.trim_end()) != Some(MAGIC) {
            return Err(MetaError::NotMeta { path: path.into() });
        }
        let mut fields = Fields::default();
        for (i, line) in lines {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            fields.line(line).map_err(|msg| MetaError::Malformed {
                path: path.into(),
                line: i + 1,
                msg,
            })?;
        }
        fields.finish(path)
    }

    /// The file's text; `written_by` is the command that writes it (`hottext store put`),
    /// named in a comment for the person who finds the file in a repository.
    pub(crate) fn to_text(&self, written_by: &str) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "{MAGIC}");
        let _ = writeln!(
            s,
            "# Written by `{written_by}`; the build runs `hottext fetch --meta <this file>`."
        );
        let _ = writeln!(s, "object: {}", self.object);
        let _ = writeln!(s, "store: {}", self.store);
        let _ = writeln!(s, "size: {}", self.size);
        let _ = writeln!(s, "format: {}", self.format);
        let _ = writeln!(s, "samples: {}", self.samples);
        let _ = writeln!(s, "window-start: {}", time(self.window_start));
        let _ = writeln!(s, "window-end: {}", time(self.window_end));
        if let Some(id) = &self.binary_build_id {
            let _ = writeln!(s, "binary-build-id: {id}");
        }
        let _ = writeln!(s, "binary-version: {}", self.binary_version);
        s
    }

    /// Replaces `path` with this meta file atomically: readers see the old file or the new
    /// one, never a part, even if the machine stops half-way.
    pub fn write_atomic(&self, path: &Path, written_by: &str) -> io::Result<()> {
        crate::os::files::write_atomic(path, self.to_text(written_by).as_bytes())
    }
}

/// RFC 3339 in UTC, to the second: `2025-03-03T03:17:00Z`.
pub fn time(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// Parses [`time`]'s format (RFC 3339 in UTC, from 1970 on); the error says what is wrong
/// with `text`, quoting it.
pub fn parse_time(text: &str) -> Result<SystemTime, String> {
    humantime::parse_rfc3339(text).map_err(|e| match e {
        humantime::TimestampError::OutOfRange => {
            let year = text.get(..4).and_then(|y| y.parse::<u32>().ok());
            if year.is_some_and(|y| y < 1970) {
                format!("'{text}' is before 1970-01-01T00:00:00Z, the earliest time hottext takes")
            } else {
                format!("'{text}' has a field out of range (month 1-12, a day its month has, hour 0-23, minute 0-59, second 0-60)")
            }
        }
        _ => format!("'{text}' is not a time like 2025-03-03T03:17:00Z"),
    })
}

fn rfc3339<S: serde::Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&time(*t))
}

#[derive(Default)]
struct Fields {
    object: Option<ObjectHash>,
    store: Option<String>,
    size: Option<u64>,
    format: Option<String>,
    samples: Option<u64>,
    window_start: Option<SystemTime>,
    window_end: Option<SystemTime>,
    binary_build_id: Option<String>,
    binary_version: Option<String>,
}

impl Fields {
    fn line(&mut self, line: &str) -> Result<(), String> {
        let (key, value) = line
            .split_once(':')
            .ok_or_else(|| format!("'{line}' is not 'key: value'"))?;
        let (key, value) = (key.trim(), value.trim());
        fn set<T>(slot: &mut Option<T>, key: &str, value: T) -> Result<(), String> {
            if slot.replace(value).is_some() {
                return Err(format!("'{key}' is given twice"));
            }
            Ok(())
        }
        let number = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| format!("{key} '{v}' is not a whole number"))
        };
        let when = |v: &str| parse_time(v).map_err(|e| format!("{key} {e}"));
        match key {
            "object" => set(
                &mut self.object,
                key,
                value.parse().map_err(|e: super::BadHash| e.to_string())?,
            ),
            "store" => set(&mut self.store, key, value.to_string()),
            "size" => set(&mut self.size, key, number(value)?),
            "format" => set(&mut self.format, key, value.to_string()),
            "samples" => set(&mut self.samples, key, number(value)?),
            "window-start" => set(&mut self.window_start, key, when(value)?),
            "window-end" => set(&mut self.window_end, key, when(value)?),
            "binary-build-id" => set(&mut self.binary_build_id, key, value.to_string()),
            "binary-version" => set(&mut self.binary_version, key, value.to_string()),
            _ => Ok(()), // a newer hottext's key
        }
    }

    fn finish(self, path: &Path) -> Result<Meta, MetaError> {
        let missing = |key| MetaError::Missing {
            path: path.into(),
            key,
        };
        Ok(Meta {
            object: self.object.ok_or_else(|| missing("object"))?,
            store: self.store.ok_or_else(|| missing("store"))?,
            size: self.size.ok_or_else(|| missing("size"))?,
            format: self.format.ok_or_else(|| missing("format"))?,
            samples: self.samples.ok_or_else(|| missing("samples"))?,
            window_start: self.window_start.ok_or_else(|| missing("window-start"))?,
            window_end: self.window_end.ok_or_else(|| missing("window-end"))?,
            binary_build_id: self.binary_build_id,
            binary_version: self.binary_version.unwrap_or_else(|| "unknown".into()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn sample() -> Meta {
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_741_000_000);
        Meta {
            object: ObjectHash::of(b"profile"),
            store: "s3://bucket/p?endpoint=http://127.0.0.1:9000".into(),
            size: 7,
            format: "hottext profile v1".into(),
            samples: 1234,
            window_start: start,
            window_end: start + Duration::from_secs(60),
            binary_build_id: Some("abcd".into()),
            binary_version: "1.2.3".into(),
        }
    }

    #[test]
    fn round_trips_through_text() {
        let meta = sample();
        let text = meta.to_text("hottext store put");
        assert!(
            text.contains("window-start: 2025-03-03T11:06:40Z\n"),
            "{text}"
        );
        assert_eq!(Meta::parse(&text, Path::new("m")).unwrap(), meta);
    }

    #[test]
    fn malformed_value_names_the_line() {
        let text = sample()
            .to_text("hottext store put")
            .replace("samples: 1234", "samples: many");
        let err = Meta::parse(&text, Path::new("svc.meta")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "svc.meta, line 7: samples 'many' is not a whole number"
        );
    }

    #[test]
    fn bad_hash_missing_key_and_wrong_file_are_errors() {
        let short = sample()
            .to_text("hottext store put")
            .replace(&ObjectHash::of(b"profile").hex()[..8], "");
        let err = Meta::parse(&short, Path::new("m")).unwrap_err().to_string();
        assert!(
            err.contains("line 3") && err.contains("not an object hash"),
            "{err}"
        );

        let no_store: String = sample()
            .to_text("hottext store put")
            .lines()
            .filter(|l| !l.starts_with("store:"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(matches!(
            Meta::parse(&no_store, Path::new("m")),
            Err(MetaError::Missing { key: "store", .. })
        ));
        assert!(matches!(
            Meta::parse("# hottext profile v1\n", Path::new("m")),
            Err(MetaError::NotMeta { .. })
        ));
    }

    #[test]
    fn atomic_write_replaces_the_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("svc.meta");
        std::fs::write(&path, "old").unwrap();
        sample().write_atomic(&path, "hottext store put").unwrap();
        assert_eq!(Meta::read(&path).unwrap(), sample());
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
    }
}
