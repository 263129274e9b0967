//! The commit message of a pipeline run: what a reviewer reads to judge the new profile.

use std::fmt::Write as _;

use super::config::Config;
use super::Report;
use crate::demangle::readable;
use crate::store::meta::Meta;

/// The commit message: a summary line, then what a reviewer needs to judge the change.
pub(super) fn commit_message(r: &Report, meta: &Meta, config: &Config) -> String {
    let mut m = String::new();
    let _ = writeln!(
        m,
        "hottext: refresh the profile of {} ({} samples, {:.1}% resolved)",
        r.service,
        r.gated.samples,
        100.0 * r.gated.resolved_fraction
    );
    let _ = writeln!(m);
    let _ = writeln!(m, "object    {}", meta.object);
    let _ = writeln!(
        m,
        "window    {} .. {} ({:.0} s recorded)",
        r.gated.window_start, r.gated.window_end, r.seconds
    );
    let _ = writeln!(
        m,
        "binary    build-id {}, version {}",
        meta.binary_build_id.as_deref().unwrap_or("none"),
        meta.binary_version
    );
    let _ = writeln!(
        m,
        "coverage  {} functions with samples; {} of them hold 99% of the samples",
        r.sampled_functions, r.functions_for_99_percent
    );
    match &r.previous {
        None => {
            let _ = writeln!(m, "previous  none: this is the first profile");
        }
        Some(p) if p.merged => {
            let _ = writeln!(
                m,
                "previous  {} merged with decay {} ({:.1}% of its weight matched, {:.1}% by code under a new name)",
                p.object.as_deref().unwrap_or("?"),
                config.merge.decay,
                100.0 * p.matched_fraction,
                100.0 * p.matched_by_code_fraction
            );
        }
        Some(p) => {
            let _ = writeln!(
                m,
                "previous  {} not merged: {}",
                p.object.as_deref().unwrap_or("?"),
                p.note.as_deref().unwrap_or("")
            );
        }
    }
    if let Some(d) = &r.drift {
        let _ = writeln!(
            m,
            "drift     {:.3} (0 = same shares of samples, 1 = nothing in common)",
            d.distance
        );
        if !d.movers.is_empty() {
            let _ = writeln!(m, "\ntop movers (share of samples, previous -> this run):");
            for mv in &d.movers {
                let _ = writeln!(
                    m,
                    "  {:+6.2}  {:6.2}% -> {:6.2}%  {}",
                    100.0 * (mv.after_fraction - mv.before_fraction),
                    100.0 * mv.before_fraction,
                    100.0 * mv.after_fraction,
                    readable(&mv.name)
                );
            }
        }
    }
    if let Some(uploads) = &r.uploads {
        let merged = uploads.iter().filter(|u| u.merged).count();
        let _ = writeln!(
            m,
            "\nfleet: {merged} of {} uploads merged (weight 0.5^(age / {} days)):",
            uploads.len(),
            config.fleet.half_life_days
        );
        for u in uploads {
            let what = match (&u.note, u.merged) {
                (_, true) => format!("weight {:.3}", u.weight),
                (Some(note), false) => format!("refused: {note}"),
                (None, false) => "refused".to_string(),
            };
            let _ = writeln!(
                m,
                "  {:<20} {:5.1} days  {:>9} samples  {:5.1}% matched  {what}",
                if u.host.is_empty() { "?" } else { &u.host },
                u.age_days,
                u.samples,
                100.0 * u.matched_fraction
            );
        }
    }
    let _ = writeln!(m, "\ngate:");
    for c in &r.gated.gate {
        let _ = writeln!(
            m,
            "  {} {}",
            if c.passed { "ok  " } else { "FAIL" },
            c.detail
        );
    }
    m
}
