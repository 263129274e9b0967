use super::*;

#[test]
fn every_hardware_figure_has_a_vendor_event_on_intel_or_amd() {
    for c in Counter::HARDWARE {
        assert!(
            !c.candidates(Vendor::Intel).is_empty() || !c.candidates(Vendor::Amd).is_empty(),
            "{c:?}"
        );
        assert!(c.software_event().is_none());
    }
    for c in Counter::SOFTWARE {
        assert!(c.software_event().is_some());
    }
}

#[test]
fn generic_aliases_come_last() {
    for vendor in [Vendor::Intel, Vendor::Amd] {
        for c in [Counter::ItlbWalks, Counter::L1iMisses] {
            let list = c.candidates(vendor);
            assert!(list.len() >= 2, "{c:?} {vendor:?}");
            assert!(list.last().unwrap().contains('-'), "{list:?}");
            assert!(!list[0].contains('-'), "{list:?}");
        }
    }
}

#[test]
fn cpu_scope_counts_no_per_task_software_events() {
    let plan = EventPlan {
        vendor: Vendor::Amd,
        hardware: vec![(Counter::Cycles, "cycles".into())],
        missing: Vec::new(),
    };
    assert_eq!(plan.events(Scope::Cpu(1)), ["duration_time", "cycles"]);
    let all = plan.events(Scope::Command);
    assert_eq!(all.len(), 7);
    assert!(all.contains(&"task-clock".to_string()));
    assert!(plan.has_hardware_pmu());
    assert!(!EventPlan::software_only().has_hardware_pmu());
}
