//! [`super::write()`]'s tests: every format out of one call, the algorithm named, `auto`'s placement.

use super::*;
use crate::graph::GraphBuilder;
use crate::link::format;

fn graph() -> Graph {
    let mut b = GraphBuilder::default();
    let main = b.func("main", 64);
    b.add_samples(main, 10);
    let work = b.func("work", 64);
    b.add_samples(work, 90);
    b.add_call(main, work, 90);
    b.finish()
}

/// A request for the format `name`, ordered by `auto`, without a binary.
pub(in crate::link) fn request<'a>(name: &str, params: &'a Params) -> Request<'a> {
    Request {
        format: format(name).unwrap(),
        ordering: Ordering::Auto,
        params,
        placement: None,
        hot_offset: 0,
        padding: Padding::Auto,
        unsafe_names: UnsafeNames::Refuse,
        binary: None,
        at: None,
        origin: Origin::Profile("test"),
        max_pages: 8,
        split: crate::link::SplitRule::default(),
        progress: &|_| {},
    }
}

#[test]
fn every_format_comes_out_of_one_call() {
    let (g, params) = (graph(), Params::default());
    let list = write(&g, &request("list", &params)).unwrap();
    let kept = &list.hot.as_ref().unwrap().kept;
    assert_eq!(kept, &list.order);
    let names: Vec<&str> = kept.iter().map(|&f| g.funcs()[f].name.as_str()).collect();
    assert_eq!(
        String::from_utf8(list.bytes.clone()).unwrap(),
        names.join("\n") + "\n"
    );
    assert_eq!(list.candidates.as_ref().unwrap().len(), 3);
    let markers = list.markers.unwrap();
    // No binary: padded, so that the one page is whole whatever follows.
    assert!(!markers.needed && markers.pad_to_huge_page);
    assert_eq!((list.hot_text.functions, list.hot_text.bytes), (2, 128));
    let script = write(&g, &request("ld-script", &params)).unwrap();
    let script = String::from_utf8(script.bytes).unwrap();
    assert!(
        script.contains("ALIGN(0x200000);\n    __hot_end"),
        "{script}"
    );
    let chosen = list.algorithm.unwrap().name;
    assert!(
        script.contains(&format!(
            "{chosen} order (chosen by --algorithm auto) of test"
        )),
        "{script}"
    );
    assert!(
        write(&g, &request("lld-order", &params))
            .unwrap()
            .markers
            .unwrap()
            .needed
    );

    let edges = write(&g, &request("lld-cgprofile", &params)).unwrap();
    assert!(String::from_utf8(edges.bytes)
        .unwrap()
        .contains("main work 90"));
    assert!(edges.algorithm.is_none() && edges.markers.is_none());
    let err = write(&g, &request("ranges", &params)).unwrap_err();
    assert!(
        matches!(err, EmitError::NeedsBinary { format: "ranges" }),
        "{err}"
    );
}

#[test]
fn auto_places_an_ld_script_unless_the_placement_is_fixed() {
    let (g, params) = (graph(), Params::default());
    let chosen = write(&g, &request("ld-script", &params)).unwrap();
    let placed = chosen.placements.as_ref().unwrap();
    assert_eq!(placed.candidates.len(), 8);
    assert_eq!(placed.placement, chosen.placement);
    // Two small functions fill no set: nothing pays, and the default is kept.
    assert_eq!(chosen.placement, ScriptPlacement::default());
    assert_eq!(chosen.ordered_metrics(&g), Some(placed.metrics.clone()));
    // An order file places nothing but the order.
    assert!(write(&g, &request("list", &params))
        .unwrap()
        .placements
        .is_none());
    let fixed = ScriptPlacement {
        hot_offset: 32,
        ..ScriptPlacement::default()
    };
    let request = Request {
        placement: Some(fixed),
        ..request("ld-script", &params)
    };
    let written = write(&g, &request).unwrap();
    assert!(written.placements.is_none());
    assert_eq!(written.placement, fixed);
    let script = String::from_utf8(written.bytes).unwrap();
    assert!(script.contains(". = . + 32;"), "{script}");
}

#[test]
fn one_algorithm_is_named_and_no_profile_lists_nothing() {
    let (g, params) = (graph(), Params::default());
    let c3 = crate::layout::algorithm("c3").unwrap();
    let fixed = Request {
        ordering: Ordering::With(c3),
        ..request("ld-script", &params)
    };
    let written = write(&g, &fixed).unwrap();
    assert!(written.candidates.is_none());
    assert!(written.ordered_metrics(&g).is_some());
    assert!(String::from_utf8(written.bytes)
        .unwrap()
        .contains("c3 order of test"));
    let none = Request {
        origin: Origin::NoProfile,
        ..request("ld-script", &params)
    };
    let empty = Graph::default();
    let written = write(&empty, &none).unwrap();
    assert!(written.algorithm.is_none());
    assert_eq!(written.hot_text, HotText::default());
    let script = String::from_utf8(written.bytes).unwrap();
    assert!(script.contains("NO PROFILE: unoptimised build"), "{script}");
}
