//! Merging's weights, rounding, scaling and what fades out.

use super::*;

#[test]
fn weight_halves_every_half_life() {
    let day = Duration::from_secs(86400);
    assert_eq!(age_weight(Duration::ZERO, 7.0), 1.0);
    assert!((age_weight(day * 7, 7.0) - 0.5).abs() < 1e-12);
    assert!((age_weight(day * 14, 7.0) - 0.25).abs() < 1e-12);
}

#[test]
fn an_aged_merge_decays_each_weight_by_its_age_at_now_and_only_with_a_half_life() {
    let g = graph("fn a 16 100\n");
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(86400 * 100);
    let week_old = now - Duration::from_secs(86400 * 7);
    let parts = [
        AgedPart {
            graph: &g,
            weight: 2.0,
            window_end: Some(now),
        },
        AgedPart {
            graph: &g,
            weight: 2.0,
            window_end: Some(week_old),
        },
        AgedPart {
            graph: &g,
            weight: 2.0,
            window_end: None,
        },
    ];
    let aged = merge_aged(&parts, now, Some(7.0));
    assert_eq!(aged.weights, [2.0, 1.0, 2.0]);
    assert_eq!(aged.graph.funcs()[0].samples, 500);
    assert_eq!(merge_aged(&parts, now, None).weights, [2.0, 2.0, 2.0]);
}

fn graph(text: &str) -> Graph {
    Graph::read(format!("# hottext profile v2\n{text}").as_bytes()).unwrap()
}

fn text(g: &Graph) -> String {
    let mut out = Vec::new();
    g.write(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn weights_are_new_plus_decayed_old() {
    let new = graph("fn a 16 10\nfn b 32 20\ncall a b 20\nsite a b 4 15\n");
    let old = graph(
        "fn a 12 100\nfn b 32 40\nfn c 8 7\ncall a b 40\nsite a b 4 20\nsite a b 9 11\n\
         call b c 7\nsite b c 1 3\nsite b c 2 3\n",
    );
    let m = merge(&new, &old, 0.5);
    // Sites sum per offset and round down: 3 × 0.5 → 1 each, within b → c's 4.
    assert_eq!(
        text(&m),
        "# hottext profile v2\nfn a 16 60\nfn b 32 40\nfn c 8 4\n\
         call a b 40\nsite a b 4 25\nsite a b 9 5\ncall b c 4\nsite b c 1 1\nsite b c 2 1\n"
    );
}

#[test]
fn three_hosts_sum_by_their_weights() {
    let a = graph("fn main 16 100\nfn f 8 10\ncall main f 10\n");
    let b = graph("fn main 20 50\nfn g 8 40\ncall main g 40\n");
    let c = graph("fn main 16 10\nfn f 8 30\ncall main f 30\nsite main f 4 30\n");
    let m = merge_weighted(&[(&a, 1.0), (&b, 0.5), (&c, 0.25)]);
    // main: 100 + 25 + 2.5 → 128 (rounded); its size from the first part.
    assert_eq!(
        text(&m),
        "# hottext profile v2\nfn f 8 18\nfn g 8 20\nfn main 16 128\n\
         call main f 18\nsite main f 4 7\ncall main g 20\n"
    );
    assert_eq!(text(&merge_weighted(&[(&a, 1.0)])), text(&a));
}

#[test]
fn the_samples_header_is_the_weighted_sum_of_the_parts() {
    let a = graph("# samples: 3719\nfn main 16 100\n");
    let b = graph("# samples: 3685\nfn main 16 40\n");
    let b_bare = graph("fn main 16 40\n");
    assert_eq!(
        merge_weighted(&[(&a, 1.0), (&b, 1.0)]).header(SAMPLES),
        Some("7404")
    );
    // A part without the header counts its functions' samples.
    let m = merge_weighted(&[(&a, 1.0), (&b_bare, 0.5)]);
    assert_eq!(m.header(SAMPLES), Some("3739"));
    // No header to correct: none is made up.
    let m = merge_weighted(&[(&b_bare, 1.0), (&a, 1.0)]);
    assert_eq!(m.header(SAMPLES), None);
}

#[test]
fn zero_decay_is_the_new_profile_and_faded_functions_drop_out() {
    let new = graph("fn a 16 10\n");
    let old = graph("fn gone 8 1\nfn a 16 5\n");
    assert_eq!(text(&merge(&new, &old, 0.0)), text(&new));
    // 1 × 0.4 rounds to 0: `gone` fades out.
    assert_eq!(
        text(&merge(&new, &old, 0.4)),
        "# hottext profile v2\nfn a 16 12\n"
    );
}

#[test]
fn headers_that_count_samples_are_weighted_sums_and_places_sum_by_name() {
    let a = graph(
        "# build-id: ab\n# process-samples: 1000\n# cpu-samples: 600 /lib/libc.so.6\n\
         # cpu-samples: 400 [binary]\n# tail-call-weight: 10\nfn main 16 400\n",
    );
    let b = graph(
        "# build-id: cd\n# process-samples: 500\n# cpu-samples: 450 [binary]\n\
         # cpu-samples: 50 [kernel]\nfn main 16 450\n",
    );
    let m = merge_weighted(&[(&a, 1.0), (&b, 2.0)]);
    let headers: Vec<String> = m
        .headers()
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    assert_eq!(
        headers,
        [
            "build-id: ab",
            "process-samples: 2000",
            "cpu-samples: 1300 [binary]",
            "cpu-samples: 600 /lib/libc.so.6",
            "cpu-samples: 100 [kernel]",
            "tail-call-weight: 10",
        ]
    );
}

#[test]
fn merged_counts_stay_within_what_the_reader_takes() {
    let max = MAX_COUNT;
    let a = graph(&format!(
        "# samples: {max}\nfn a 16 {max}\nfn b 16 0\ncall a b {max}\n"
    ));
    let b = graph(&format!("fn a 16 {}\nfn b 16 {}\n", max / 2, max / 2));
    for weights in [(1.0, 1.0), (1e300, 1.0), (1.0, f64::MAX)] {
        let m = merge_weighted(&[(&a, weights.0), (&b, weights.1)]);
        let again = Graph::read(text(&m).as_bytes()).unwrap_or_else(|e| {
            panic!(
                "{weights:?}: the reader refuses the merge: {e}\n{}",
                text(&m)
            )
        });
        assert!(again.total_samples() <= max, "{weights:?}");
        assert!(m.header(SAMPLES).unwrap().parse::<u64>().unwrap() <= max);
    }
    // Equal weights: scaled down together, a still has 3 times b's samples.
    let m = merge_weighted(&[(&a, 1.0), (&b, 1.0)]);
    let (fa, fb) = (m.funcs[0].samples as f64, m.funcs[1].samples as f64);
    assert!(((fa / fb) - 3.0).abs() < 1e-6, "{fa} {fb}");
    assert!(fitting_scale(&[(&a, 1.0), (&b, 1.0)]) < 0.67);
    assert_eq!(fitting_scale(&[(&a, 0.5)]), 1.0);
}

#[test]
fn block_samples_are_summed_by_the_parts_weights_where_the_blocks_agree() {
    let v4 = |text: &str| Graph::read(format!("# hottext profile v4\n{text}").as_bytes()).unwrap();
    // Block 1 ran, inferred, unsampled: it stays so.
    let new = v4("fn f 64 10\nblock f 0 0 16 6\nblock f 1 16 24 0\nblock f 2 40 24 4\n");
    let old = v4("fn f 64 20\nfn g 8 4\nblock f 0 0 16 10\nblock f 2 40 20 10\nblock g 1 0 8 4\n");
    let merged = merge(&new, &old, 0.5);
    assert_eq!(
        text(&merged),
        "# hottext profile v4\nfn f 64 20\nfn g 8 2\n\
         block f 0 0 16 11\nblock f 1 16 24 0\nblock f 2 40 24 4\nblock g 1 0 8 2\n",
        "block 2 lies elsewhere in the old part: its samples are not added"
    );
}
