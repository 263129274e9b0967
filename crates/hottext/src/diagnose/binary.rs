//! The binary's checks: build-id, text size, frame pointers, the hot-text markers, the hot
//! range's file offset and the padding inside it, and how spread out a profile's hot code is.

use super::{build_remedy, Check, Status};
use crate::binary::{built_by_rustc, Binary, HOT_END, HOT_START, HUGE_PAGE, RUNTIME_ENTRY};
use crate::graph::fit::Fitted;
use crate::profile::code::{frame_pointer_share, FRAME_POINTERS_KEPT};
use crate::report::heat::{heat_map_of, HeatMap};
use crate::verify::check_binary;

const AREA: &str = "binary";

/// The binary's checks, in report order.
pub fn checks(binary: &Binary) -> Vec<Check> {
    let rust = built_by_rustc(binary.bytes());
    let build = |c: &str, cargo: &str| build_remedy(rust, c, cargo);
    let mut out = Vec::new();
    out.push(match binary.build_id_hex() {
        Some(id) => Check::new(AREA, "build-id", Status::Pass, id),
        None => Check::new(
            AREA,
            "build-id",
            Status::Warn,
            "none: profiles cannot be tied to this build",
        )
        .remedy(build(
            "link with -Wl,--build-id",
            "RUSTFLAGS=\"-C link-arg=-Wl,--build-id\"",
        )),
    });
    let text = binary.code_bytes();
    out.push(Check::new(
        AREA,
        "text",
        Status::Info,
        format!(
            "{} functions, {:.1} MiB of code",
            binary.functions.len(),
            text as f64 / (1 << 20) as f64
        ),
    ));
    out.push(match frame_pointer_share(binary) {
        Some(share) if share >= FRAME_POINTERS_KEPT => Check::new(
            AREA,
            "frame pointers",
            Status::Pass,
            format!("{:.0}% of calling functions set up a frame", 100.0 * share),
        ),
        Some(share) => Check::new(
            AREA,
            "frame pointers",
            Status::Warn,
            format!(
                "{:.0}% of calling functions set up a frame: perf's frame-pointer stacks will miss callers (hottext record uses --call-graph dwarf, which costs more)",
                100.0 * share
            ),
        )
        .remedy(build(
            "compile with -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer",
            "RUSTFLAGS=\"-C force-frame-pointers=yes\" for every crate (cargo build rebuilds them)",
        )),
        None => Check::new(
            AREA,
            "frame pointers",
            Status::Info,
            "not checked on this instruction set",
        ),
    });
    out.push(if rust {
        Check::new(
            AREA,
            "function sections",
            Status::Pass,
            "a Rust program: rustc gives each function a section of its own on Linux",
        )
    } else {
        Check::new(
            AREA,
            "function sections",
            Status::Info,
            "a linked binary does not say; the objects must have one section per function to be ordered",
        )
        .remedy("compile with -ffunction-sections (check an object: readelf -SW x.o | grep -c ' .text\\.')")
    });
    out.push(runtime(binary));
    let report = check_binary(binary, None);
    if report.start.is_none() {
        out.push(
            Check::new(AREA, "hot-text markers", Status::Warn, format!("no {HOT_START}/{HOT_END}: not linked with hottext's layout"))
                .remedy(build(
                    "hottext order PROFILE --binary BIN --format ld-script -o hot.ld; relink with -Wl,-T,hot.ld",
                    "cargo rustc --release --bin BIN -- -C link-arg=-Wl,-T,$PWD/hot.ld (docs/build.md, Cargo)",
                )),
        );
        return out;
    }
    out.push(Check::new(
        AREA,
        "hot-text markers",
        if report.passed() {
            Status::Pass
        } else {
            Status::Fail
        },
        format!(
            "{} B, {} functions, start 2 MiB aligned: {}{}",
            report.size,
            report.hot.functions,
            report.start_aligned_2m,
            report
                .problems
                .first()
                .map(|p| format!("; {p}"))
                .unwrap_or_default()
        ),
    ));
    out.push(if report.file_offset_aligned_2m {
        Check::new(
            AREA,
            "hot range file offset",
            Status::Pass,
            "2 MiB aligned: the file itself can be mapped with huge pages",
        )
    } else {
        Check::new(
            AREA,
            "hot range file offset",
            Status::Warn,
            "not 2 MiB aligned: the runtime must copy the text to anonymous huge pages",
        )
        .remedy(build(
            "link with -Wl,-z,max-page-size=0x200000 (and -z,common-page-size with lld)",
            "-C link-arg=-Wl,-z,max-page-size=0x200000,-z,common-page-size=0x200000 after cargo rustc's --",
        ))
    });
    // The padding after the last function makes the last page whole; only the padding
    // between functions spreads the hot code.
    let span = report.size.saturating_sub(report.end_padding);
    let padding = span.saturating_sub(report.hot.bytes);
    out.push(Check::new(
        AREA,
        "padding in the hot range",
        if padding * 10 > span {
            Status::Warn
        } else {
            Status::Pass
        },
        format!("{padding} B of {span} B between functions"),
    ));
    out.push(if report.mappable_huge_pages < report.huge_pages {
        Check::new(
            AREA,
            "whole 2 MiB pages",
            Status::Warn,
            format!(
                "the runtime can map {} of its {} pages: too little text follows the range to fill its last page{}",
                report.mappable_huge_pages,
                report.huge_pages,
                if report.mappable_huge_pages == 0 { " (the runtime says RANGE_TOO_SMALL)" } else { "" }
            ),
        )
        .remedy("hottext order PROFILE --binary BIN --format ld-script -o hot.ld (pads the range to whole pages by default); relink")
    } else {
        Check::new(
            AREA,
            "whole 2 MiB pages",
            Status::Pass,
            format!("{} of {} pages can be mapped", report.mappable_huge_pages, report.huge_pages),
        )
    });
    out
}

/// Whether the binary is linked with the runtime, which maps the hot range at start.
fn runtime(binary: &Binary) -> Check {
    if binary.links_runtime {
        return Check::new(
            AREA,
            "runtime",
            Status::Pass,
            format!("linked: the binary has {RUNTIME_ENTRY}"),
        );
    }
    Check::new(
        AREA,
        "runtime",
        Status::Info,
        "not linked: nothing in the binary maps its hot range on huge pages (LD_PRELOAD=libhottext_preload.so can)",
    )
    .remedy("link -lhottext_auto")
}

/// How spread out `profile`'s hot code is in `binary`'s layout, and whether hot text and huge
/// pages would help: the front end's estimate without a PMU.
/// `placed` is the profile as laid out in `binary` (`graph::fit::fit_for_view`).
pub fn spread(binary: &Binary, placed: &Fitted) -> (Check, HeatMap) {
    let map = heat_map_of("", &placed.graph, &placed.placement, binary);
    let rows: std::collections::BTreeSet<u64> = map
        .pages
        .iter()
        .enumerate()
        .filter(|(_, &s)| s > 0)
        .map(|(p, _)| p as u64 * 4096 / HUGE_PAGE)
        .collect();
    let value = format!(
        "99% of the samples on {} pages of 4 KiB; sampled code on {} pages of 2 MiB",
        map.pages_99,
        rows.len()
    );
    // A 64-entry L1 iTLB of 4 KiB pages covers 256 KiB; beyond that, misses grow with the
    // spread, unless the hot code is gathered into a few 2 MiB pages (hot text, for huge pages).
    let gathered = map.hot_range.is_some() && rows.len() <= 8;
    let check = if map.pages_99 > 64 && !gathered {
        Check::new("front-end", "hot code spread", Status::Warn, value).remedy(
            "hottext order PROFILE --binary BIN --format ld-script -o hot.ld; relink; link -lhottext_auto",
        )
    } else {
        Check::new("front-end", "hot code spread", Status::Pass, value)
    };
    (check, map)
}
