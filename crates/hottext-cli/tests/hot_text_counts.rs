//! One count of hot functions and hot bytes (`hottext::link::HotText`): on the demo service,
//! recorded for real and relinked with GNU ld and lld, `order` (its table and its JSON) predicts
//! the figures that `verify --binary` (its report and its JSON) finds in the linked range.

mod common;

use common::{hottext, json, lld_dir, require_perf, stderr, stdout};

/// `(functions, bytes)` of a document's `hot`.
fn hot(doc: &serde_json::Value) -> (u64, u64) {
    let figure = |name: &str| {
        doc["hot"][name]
            .as_u64()
            .unwrap_or_else(|| panic!("no hot.{name} in {doc}"))
    };
    (figure("functions"), figure("bytes"))
}

#[test]
fn order_and_verify_count_the_same_hot_functions_and_bytes_on_the_demo() {
    require_perf();
    lld_dir();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    common::demo_make(d, &["-j2", "objs"]);
    let base = d.join("base");
    common::demo_make(d, &["link", &format!("OUT={}", base.display())]);
    let base = base.to_str().unwrap();
    let record = hottext(
        &[
            "record",
            "-o",
            "perf.data",
            "--",
            base,
            "--requests",
            "300000",
        ],
        d,
    );
    assert!(record.status.success(), "{}", stderr(&record));
    let profile = hottext(
        &[
            "profile",
            "perf.data",
            "--binary",
            base,
            "-o",
            "demo.profile",
        ],
        d,
    );
    assert!(profile.status.success(), "{}", stderr(&profile));

    let at = |name: &str| d.join(name).to_str().unwrap().to_string();
    for (linker, format, extra) in [
        ("bfd", "ld-script", format!("-Wl,-T,{}", at("hot.input"))),
        (
            "lld",
            "lld-order",
            format!(
                "{} -Wl,--symbol-ordering-file={} -Wl,--no-warn-symbol-ordering",
                at("markers.o"),
                at("hot.input")
            ),
        ),
    ] {
        let mut order_args = vec![
            "order",
            "demo.profile",
            "--binary",
            base,
            "--format",
            format,
            "-o",
            "hot.input",
        ];
        if linker == "lld" {
            order_args.extend(["--markers", "markers.o"]);
        }
        let table = hottext(&order_args, d);
        assert!(table.status.success(), "{}", stderr(&table));
        order_args.push("--json");
        let ordered = json(&hottext(&order_args, d));
        let (functions, bytes) = hot(&ordered);
        let sampled = ordered["ordered"]["sampled_functions"].as_u64().unwrap();
        // The demo's call paths run through functions with no samples of their own: they are
        // hot functions too, and the figures must not leave them out.
        assert!(
            sampled > 100 && functions > sampled,
            "{linker}: {functions} hot functions, {sampled} sampled: {ordered}"
        );
        let first_line = stderr(&table).lines().next().unwrap_or("").to_string();
        assert!(
            first_line.starts_with(&format!("hottext: {functions} hot functions, "))
                && first_line.contains(&format!(
                    "{sampled} with samples of their own, {} that only call them",
                    functions - sampled
                )),
            "{linker}: order's table says otherwise than its JSON: {first_line}"
        );

        let relinked = d.join(format!("hot-{linker}"));
        common::demo_make(
            d,
            &[
                "link",
                &format!("LINKER={linker}"),
                &format!("OUT={}", relinked.display()),
                &format!("LDEXTRA={extra}"),
            ],
        );
        let relinked = relinked.to_str().unwrap();
        let verified = hottext(&["verify", "--binary", relinked, "--json"], d);
        assert!(verified.status.success(), "{}", stdout(&verified));
        let verified = json(&verified);
        assert_eq!(
            hot(&verified),
            (functions, bytes),
            "{linker}: verify found other hot figures in the linked range than order listed"
        );
        let report = stdout(&hottext(&["verify", "--binary", relinked], d));
        assert!(
            report.contains(&format!("hot text    {functions} functions, ")),
            "{linker}: verify's report says otherwise than its JSON:\n{report}"
        );
    }
}
