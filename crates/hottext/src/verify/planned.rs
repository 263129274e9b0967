//! The hot range against the plan: did the linker place every function the linker input asked
//! for, and nothing else?
//!
//! Both shortfalls have been seen on real programs. **Fewer**: an ld script pattern that
//! matches no object leaves its function where it was, silently (ripgrep: 410 placed of 458
//! planned before rustc's codegen-unit objects were matched). **More**: order files name
//! sections or symbols without their object, so gold and lld pull every static namesake of a
//! planned function into the range (redis: 255-261 placed for 252 planned).
//!
//! Functions are compared by symbol: a planned symbol is placed when a function in the range
//! bears it, as its name or an alias (identical-code folding may make two planned functions
//! one). Namesakes are counted: a symbol planned `n` times needs `n` functions of that name.

use serde::Serialize;

use crate::binary::{symbol_of, Binary, StatedAddr};
use crate::link::Plan;

/// What the range holds against the plan.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PlanReport {
    /// Functions the linker input places.
    pub planned: u64,
    /// Planned functions found in the hot range.
    pub placed: u64,
    /// Planned symbols with fewer functions in the range than planned; `(not in the binary)`
    /// after a name the binary lacks altogether.
    pub missing: Vec<String>,
    /// Functions in the range that the plan does not name, and namesakes beyond the number
    /// planned (all functions of such a name are listed: which one was meant, the order file
    /// cannot say).
    pub unplanned: Vec<String>,
}

/// Compares the functions whose first byte lies in `[start, end)` with `plan`.
pub(crate) fn compare_with_plan(
    binary: &Binary,
    (start, end): (StatedAddr, StatedAddr),
    plan: &Plan,
) -> PlanReport {
    let inside: Vec<&crate::binary::Function> = binary
        .functions
        .iter()
        .filter(|f| f.start >= start && f.start < end)
        .collect();
    // The functions in the range that bear each symbol.
    let mut bearers: foldhash::HashMap<&str, Vec<usize>> = Default::default();
    for (i, f) in inside.iter().enumerate() {
        let symbols =
            std::iter::once(symbol_of(&f.name)).chain(f.aliases.iter().map(|a| symbol_of(a)));
        for s in symbols {
            let list = bearers.entry(s).or_default();
            if list.last() != Some(&i) {
                list.push(i);
            }
        }
    }
    let mut report = PlanReport {
        planned: plan.functions(),
        ..PlanReport::default()
    };
    let mut accounted = vec![false; inside.len()];
    for (symbol, wanted) in &plan.symbols {
        let found = bearers.get(symbol.as_str()).map_or(&[][..], Vec::as_slice);
        let wanted = *wanted as usize;
        report.placed += found.len().min(wanted) as u64;
        for &i in found {
            accounted[i] = true;
        }
        if found.len() < wanted {
            let absent = if binary.symbol(symbol).is_none() {
                " (not in the binary)"
            } else {
                ""
            };
            let count = if wanted > 1 {
                format!(" ({} of {wanted} namesakes)", found.len())
            } else {
                String::new()
            };
            report.missing.push(format!("{symbol}{count}{absent}"));
        } else if found.len() > wanted {
            report
                .unplanned
                .extend(found.iter().map(|&i| inside[i].name.clone()));
        }
    }
    report.unplanned.extend(
        inside
            .iter()
            .zip(&accounted)
            .filter(|(_, &a)| !a)
            .map(|(f, _)| f.name.clone()),
    );
    report
}
