//! `hottext doctor`: what holds a service's front end back, and what to do about it. Each check
//! is a line with a status, the measured value and the remedy as a command, never applied
//! (the soft-SKU and huge-page lessons of usku-soft-skus-slides.txt and scaling-userspace-slides.txt,
//! and section 6.1 of the hot-text paper on why huge pages are sometimes not there).

pub mod binary;
pub mod front_end;
pub mod pmd;
pub mod process;
pub mod profile;
pub mod system;

use serde::Serialize;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Nothing to do.
    Pass,
    /// Works, but costs something (a lost huge page, a profile that misses callers).
    Warn,
    /// Does not work as it stands: the remedy says what to change.
    Fail,
    /// A fact worth knowing that is neither good nor bad.
    Info,
}

/// One line of the doctor's report.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// `binary`, `profile`, `front-end`, `huge-pages` or `service`.
    pub area: &'static str,
    /// What was checked ("build-id", "THP enabled").
    pub name: String,
    /// How it came out.
    pub status: Status,
    /// What was measured, as the user would say it.
    pub value: String,
    /// A command (or the change) that would help; printed, never run.
    pub remedy: Option<String>,
}

impl Check {
    /// A check without a remedy.
    pub fn new(area: &'static str, name: &str, status: Status, value: impl Into<String>) -> Check {
        Check {
            area,
            name: name.to_string(),
            status,
            value: value.into(),
            remedy: None,
        }
    }

    /// Adds the command or change that would help.
    pub fn remedy(mut self, remedy: impl Into<String>) -> Check {
        self.remedy = Some(remedy.into());
        self
    }
}

/// A remedy about build flags or stripping: `c` as it is for a C or C++ build, followed by
/// `cargo`, the same change as a Cargo setting, when the binary is a Rust program
/// ([`crate::binary::built_by_rustc`]).
pub fn build_remedy(rust: bool, c: &str, cargo: &str) -> String {
    if rust {
        format!("{c}; Cargo: {cargo}")
    } else {
        c.to_string()
    }
}
