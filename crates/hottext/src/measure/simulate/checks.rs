//! What a simulated run's output must show: the count of work it did (`--metric`) and the text
//! every measured run must print alike (`--expect-same`).

use crate::measure::ab::{capture, Regex};
use crate::measure::run::Captured;
use crate::measure::MeasureError;

/// What the runs' output must show (the command's, or the load's for a server).
#[derive(Debug, Clone, Default)]
pub struct Checks {
    /// Group 1 is the count of work a run did (requests served), so that figures compare per
    /// unit of it: a time-based load does more or less work from run to run.
    pub work: Option<Regex>,
    /// Group 1 must be the same text in every measured run (a checksum, a request count).
    pub expect_same: Option<Regex>,
}

impl Checks {
    fn matched(
        pattern: &Regex,
        option: &'static str,
        output: &Option<Captured>,
        side: &str,
        run: &str,
    ) -> Result<String, MeasureError> {
        let empty = Captured::default();
        let captured = output.as_ref().unwrap_or(&empty);
        capture(pattern, captured).ok_or_else(|| MeasureError::NoMatch {
            side: side.to_string(),
            run: run.to_string(),
            option,
            pattern: pattern.as_str().to_string(),
            output: format!("{}{}", captured.stdout, captured.stderr),
        })
    }

    pub(super) fn work_of(
        &self,
        output: &Option<Captured>,
        side: &str,
        run: &str,
    ) -> Result<f64, MeasureError> {
        let Some(pattern) = &self.work else {
            return Ok(0.0);
        };
        let text = Self::matched(pattern, "--metric", output, side, run)?;
        text.trim()
            .parse()
            .map_err(|_| MeasureError::MetricNotNumber {
                side: side.to_string(),
                run: run.to_string(),
                text,
            })
    }

    pub(super) fn same_of(
        &self,
        output: &Option<Captured>,
        side: &str,
        run: &str,
    ) -> Result<Option<String>, MeasureError> {
        self.expect_same
            .as_ref()
            .map(|p| Self::matched(p, "--expect-same", output, side, run))
            .transpose()
    }
}
