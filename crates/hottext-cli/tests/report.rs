//! `hottext report` rendered in a real browser (headless Chromium): the demo service recorded,
//! ordered, relinked and compared for real, its page drawn without a console message (a request
//! the page tried would be one: its content security policy blocks and reports it), with every
//! page of both binaries' text in the heat maps and one forest-plot row per compared figure.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{hottext, json, require_perf, run, stderr};
use hottext::binary::{Binary, HUGE_PAGE};

/// What Chromium made of a page: the DOM once its scripts ran, its console messages, and how
/// long it took; a screenshot goes to `png`.
fn chromium(page: &Path, png: &Path) -> (String, Vec<String>, Duration) {
    let profile = tempfile::tempdir().unwrap();
    let url = format!("file://{}", page.display());
    let started = Instant::now();
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(["--dump-dom", &url])
        .output()
        .expect("this test needs Chromium: apt-get install chromium (`make test` installs it)");
    let took = started.elapsed();
    assert!(out.status.success(), "chromium failed: {}", stderr(&out));
    let console = stderr(&out)
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    let shot = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1200,1600",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        shot.status.success(),
        "chromium screenshot failed: {}",
        stderr(&shot)
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        console,
        took,
    )
}

/// The value of `attribute` on the element whose id is `id`, from a DOM dump.
fn attribute(dom: &str, id: &str, attribute: &str) -> Option<String> {
    let at = dom.find(&format!("id=\"{id}\""))?;
    let start = dom[..at].rfind('<')?;
    let tag = &dom[start..start + dom[start..].find('>')?];
    let key = format!("{attribute}=\"");
    let from = tag.find(&key)? + key.len();
    Some(tag[from..from + tag[from..].find('"')?].to_string())
}

/// Pages of 4 KiB from the 2 MiB boundary below the binary's first function to its last byte.
fn text_pages(binary: &Path) -> u64 {
    let b = Binary::open(binary).unwrap();
    let start = b.functions.iter().map(|f| f.start.0).min().unwrap();
    let end = b.functions.iter().map(|f| f.end().0).max().unwrap();
    (end - (start - start % HUGE_PAGE)).div_ceil(4096)
}

#[test]
fn the_demo_report_draws_both_heat_maps_and_every_verdict_without_a_console_message() {
    require_perf();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    common::demo_make(d, &["-j2", "objs"]);
    let (base, hot) = (d.join("base"), d.join("hot"));
    common::demo_make(d, &["link", &format!("OUT={}", base.display())]);
    let (base, hot) = (base.to_str().unwrap(), hot.to_str().unwrap());
    let steps: [&[&str]; 3] = [
        &[
            "record",
            "-o",
            "perf.data",
            "--",
            base,
            "--requests",
            "300000",
        ],
        &[
            "profile",
            "perf.data",
            "--binary",
            base,
            "-o",
            "demo.profile",
        ],
        &[
            "order",
            "demo.profile",
            "--binary",
            base,
            "--format",
            "ld-script",
            "-o",
            "hot.ld",
            "--json",
        ],
    ];
    for args in steps {
        let out = hottext(args, d);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        if args[0] == "order" {
            std::fs::write(d.join("order.json"), &out.stdout).unwrap();
        }
    }
    let script = format!("LDEXTRA=-Wl,-T,{}", d.join("hot.ld").display());
    common::demo_make(d, &["link", &format!("OUT={hot}"), &script]);
    let a = format!("{base} --requests 20000");
    let b = format!("{hot} --requests 20000");
    let ab = hottext(
        &[
            "ab",
            "--runs",
            "6",
            "-a",
            &a,
            "-b",
            &b,
            "--metric",
            "([0-9]+) requests/s",
            "--metric-name",
            "requests/s",
            "--higher-is-better",
            "--json",
        ],
        d,
    );
    std::fs::write(d.join("ab.json"), &ab.stdout).unwrap();
    let verified = hottext(&["verify", "--binary", hot, "--json"], d);
    assert!(verified.status.success(), "{}", stderr(&verified));
    std::fs::write(d.join("verify.json"), &verified.stdout).unwrap();
    let ab_rows = json(&ab)["rows"].as_array().unwrap().clone();
    let rows = ab_rows.len();
    // Plotted: the figures that score a layout and have a ratio to draw (issue 33).
    let plotted = (ab_rows.iter())
        .filter(|r| r["better"] != "neither")
        .filter(|r| {
            r["comparison"]["ratio"]["low"]
                .as_f64()
                .is_some_and(|v| v > 0.0)
        })
        .count();

    let out = hottext(
        &[
            "report",
            "--profile",
            "demo.profile",
            "--before",
            base,
            "--after",
            hot,
            "order.json",
            "ab.json",
            "verify.json",
            "-o",
            "report.html",
        ],
        d,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let page = d.join("report.html");
    let (dom, console, _) = chromium(&page, &d.join("report.png"));
    assert!(console.is_empty(), "the page logged: {console:#?}");
    assert_eq!(
        attribute(&dom, "heat-data", "type").as_deref(),
        Some("application/json")
    );
    assert!(
        dom.contains("data-drawn=\"2\""),
        "the script did not draw both maps"
    );
    for (i, binary) in [base, hot].iter().enumerate() {
        let id = format!("heat-{i}");
        let cells: u64 = attribute(&dom, &id, "data-cells").unwrap().parse().unwrap();
        assert_eq!(cells, text_pages(Path::new(binary)), "{binary}");
        let hot_cells: u64 = attribute(&dom, &id, "data-hot-cells")
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            hot_cells > 10 && hot_cells < cells,
            "{binary}: {hot_cells} of {cells}"
        );
        // Never a strip a few pixels high, however small the text.
        let cell_height: u64 = attribute(&dom, &id, "data-cell-height")
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            cell_height * cells.div_ceil(512) >= 64,
            "{binary}: {cell_height} px rows"
        );
    }
    assert_eq!(dom.matches("class=\"forest-row\"").count(), plotted);
    assert!(plotted > 0 && plotted < rows, "{plotted} of {rows} plotted");
    assert_eq!(
        dom.matches("is better)</text>").count(),
        plotted,
        "each plotted figure says which way is better"
    );
    // The table lists every figure, plotted or not, with A's and B's values.
    let table = dom
        .split("<table class=\"ab\">")
        .nth(1)
        .expect("no A/B table");
    let table = table.split("</table>").next().unwrap();
    assert_eq!(table.matches("<tr>").count(), rows + 1, "{table}");
    assert!(
        table.contains("neither better nor worse") || table.contains("describes the run"),
        "{table}"
    );
    assert!(dom.contains("Candidate orders") && dom.contains("call weight on its 4 KiB page"));
    assert!(dom.contains("linked hot range (verify.json)"));
    assert!(std::fs::metadata(d.join("report.png")).unwrap().len() > 10_000);
}

/// A binary of `n` functions of 64 bytes each, `fn_0000000` on, assembled and linked for real.
fn big_binary(dir: &Path, n: usize) -> std::path::PathBuf {
    use std::fmt::Write as _;
    let mut asm = String::with_capacity(n * 110);
    asm.push_str("\t.text\n");
    for i in 0..n {
        let _ = write!(
            asm,
            "\t.globl fn_{i:07}\n\t.type fn_{i:07},@function\nfn_{i:07}:\n\tret\n\t.skip 63,0xcc\n\t.size fn_{i:07},64\n"
        );
    }
    asm.push_str(
        "\t.globl main\n\t.type main,@function\nmain:\n\txor %eax,%eax\n\tret\n\t.size main,3\n\
         \t.section .note.GNU-stack,\"\",@progbits\n",
    );
    std::fs::write(dir.join("big.s"), asm).unwrap();
    run("gcc", &["-c", "big.s", "-o", "big.o"], dir);
    run("gcc", &["big.o", "-o", "big"], dir);
    dir.join("big")
}

#[test]
fn a_million_function_report_stays_small_and_renders_quickly() {
    const N: usize = 1_000_000;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let big = big_binary(d, N);
    // Samples on a Zipf-like law over every other function, as in a real service.
    let mut profile = String::from("# hottext profile v1\n");
    for i in 0..N {
        let samples = if i % 2 == 0 {
            (1e6 / (1.0 + i as f64).powf(1.1)) as u64
        } else {
            0
        };
        profile.push_str(&format!("fn fn_{i:07} 64 {samples}\n"));
    }
    std::fs::write(d.join("big.profile"), profile).unwrap();
    let big = big.to_str().unwrap();
    let out = hottext(
        &[
            "report",
            "--profile",
            "big.profile",
            "--after",
            big,
            "-o",
            "big.html",
        ],
        d,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let page = d.join("big.html");
    let size = std::fs::metadata(&page).unwrap().len();
    assert!(size < 10 << 20, "the page is {size} bytes");
    let (dom, console, took) = chromium(&page, &d.join("big.png"));
    assert!(console.is_empty(), "the page logged: {console:#?}");
    // Chromium's own start-up is part of it; on a loaded 2-CPU VM that alone takes seconds. A
    // page that laid out each of a million functions would take minutes.
    assert!(took < Duration::from_secs(30), "Chromium took {took:?}");
    let cells: u64 = attribute(&dom, "heat-0", "data-cells")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(cells, text_pages(Path::new(big)));
    assert!(
        cells >= (N as u64 * 64) / 4096,
        "{cells} pages for {N} functions of 64 B"
    );
}
