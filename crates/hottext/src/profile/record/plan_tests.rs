use super::*;

fn machine(cycles: bool, branch_calls: bool, cpus: &str) -> Machine {
    Machine {
        cycles,
        branch_calls,
        branch_any: branch_calls,
        max_sample_rate: 8700,
        paranoid: 2,
        root: true,
        online: CpuSet::parse(cpus).unwrap(),
    }
}

fn request(target: Target) -> Request {
    Request {
        target,
        output: "perf.data".into(),
        duration: None,
        frequency: None,
        pin_cpu: None,
        per_process: false,
        sampling: None,
        frame_pointer_share: None,
    }
}

fn args(plan: &Plan) -> String {
    plan.command_line()
}

#[test]
fn vm_without_pmu_samples_stacks_on_the_software_clock() {
    let m = machine(false, false, "0-1");
    let p = plan(
        &request(Target::Command(vec!["./prog".into(), "a b".into()])),
        &m,
        &m.online,
    )
    .unwrap();
    assert_eq!(p.sampling, SampleKind::Stack);
    assert_eq!(
        args(&p),
        "perf record -o perf.data -e cpu-clock:u -F 4999 --call-graph fp -a -C 0-1 -- ./prog 'a b'"
    );
}

#[test]
fn program_without_frame_pointers_is_unwound_by_dwarf() {
    let m = machine(false, false, "0-1");
    let mut r = request(Target::Command(vec!["./prog".into()]));
    r.frame_pointer_share = Some(0.1);
    let p = plan(&r, &m, &m.online).unwrap();
    assert_eq!(p.sampling, SampleKind::Dwarf);
    assert_eq!(
        args(&p),
        "perf record -o perf.data -e cpu-clock:u -F 4999 --call-graph dwarf -m 16M -a -C 0-1 -- ./prog"
    );
    assert!(
        p.reasons[0].contains("10% of the program's calling functions"),
        "{:?}",
        p.reasons
    );
    // With frame pointers, or where the program is not known, they are used.
    for share in [Some(0.9), None] {
        r.frame_pointer_share = share;
        assert_eq!(plan(&r, &m, &m.online).unwrap().sampling, SampleKind::Stack);
    }
    // Branch records, where the CPU has them, need no stack at all.
    let lbr = machine(true, true, "0-1");
    r.frame_pointer_share = Some(0.1);
    assert_eq!(
        plan(&r, &lbr, &lbr.online).unwrap().sampling,
        SampleKind::Branch
    );
}

#[test]
fn lbr_machine_records_call_branches() {
    let m = machine(true, true, "0-7");
    let p = plan(&request(Target::Pid(42)), &m, &CpuSet::parse("3").unwrap()).unwrap();
    assert_eq!(
        args(&p),
        "perf record -o perf.data -e cycles:u -F 4999 -j any_call,u -a -C 3"
    );
}

#[test]
fn every_branch_is_recorded_where_asked_and_the_pmu_has_it() {
    let mut r = request(Target::Pid(42));
    r.sampling = Some(Sampling::EveryBranch);
    let m = machine(true, true, "0-7");
    let p = plan(&r, &m, &CpuSet::parse("3").unwrap()).unwrap();
    assert_eq!(
        args(&p),
        "perf record -o perf.data -e cycles:u -F 4999 -j any,u -a -C 3"
    );
    assert_eq!(p.sampling, SampleKind::Branch);
    assert_eq!(
        p.description(),
        "branch records of every taken branch (LBR, BRS)"
    );
    assert!(p.reasons[0].contains("fall-throughs"), "{:?}", p.reasons);
    // AMD's BRS records every branch but cannot filter calls: every branch still works.
    let brs = Machine {
        branch_calls: false,
        ..m.clone()
    };
    assert!(args(&plan(&r, &brs, &brs.online).unwrap()).contains(" -j any,u "));
    // Without the PMU, an error that says what block edges need, never another recording.
    let vm = machine(false, false, "0-1");
    let err = plan(&r, &vm, &vm.online).unwrap_err();
    assert!(matches!(err, RecordError::NoEveryBranchRecords));
    assert!(
        err.to_string().contains("perf record -j any fails"),
        "{err}"
    );
}

#[test]
fn perf_times_a_process_recording_and_hottext_only_a_command() {
    let m = machine(false, false, "0-1");
    let mut r = request(Target::Pid(42));
    r.duration = Some(Duration::from_millis(2500));
    let p = plan(&r, &m, &m.online).unwrap();
    assert!(
        args(&p).ends_with(" -a -C 0-1 -- sleep 2.500"),
        "{}",
        args(&p)
    );
    assert_eq!(p.stop_after(), Some(Duration::from_secs(35)));
    r.target = Target::Command(vec!["./prog".into()]);
    let p = plan(&r, &m, &m.online).unwrap();
    assert!(args(&p).ends_with(" -- ./prog"), "{}", args(&p));
    assert_eq!(p.stop_after(), Some(Duration::from_millis(2500)));
}

#[test]
fn pinning_samples_only_that_cpu() {
    let m = machine(false, false, "0-3");
    let mut r = request(Target::Pid(42));
    r.pin_cpu = Some(2);
    let p = plan(&r, &m, &m.online).unwrap();
    assert_eq!(p.scope, Scope::Cpus(CpuSet::one(2)));
    r.pin_cpu = Some(9);
    assert!(matches!(
        plan(&r, &m, &m.online),
        Err(RecordError::CpuOffline { cpu: 9, .. })
    ));
    // A command runs pinned under taskset; only its CPU is sampled.
    let mut c = request(Target::Command(vec!["./prog".into(), "a b".into()]));
    c.pin_cpu = Some(1);
    let p = plan(&c, &m, &m.online).unwrap();
    assert_eq!(p.scope, Scope::Cpus(CpuSet::one(1)));
    assert!(
        args(&p).ends_with(" -a -C 1 -- taskset -c 1 ./prog 'a b'"),
        "{}",
        args(&p)
    );
    assert!(p.reasons.iter().any(|r| r.contains("taskset -c 1")));
    // Unpinned, the reason says what a CPU-wide recording of a command takes in.
    c.pin_cpu = None;
    let p = plan(&c, &m, &m.online).unwrap();
    assert!(
        p.reasons
            .iter()
            .any(|r| r.contains("every process on them is recorded") && r.contains("--cpu N")),
        "{:?}",
        p.reasons
    );
}

#[test]
fn big_unpinned_process_falls_back_to_per_process_events() {
    let m = machine(false, false, "0-63");
    let p = plan(&request(Target::Pid(42)), &m, &m.online).unwrap();
    assert_eq!(p.scope, Scope::Process);
    assert!(args(&p).ends_with("-p 42"), "{}", args(&p));
    assert!(p.reasons.iter().any(|r| r.contains("--cpu")));
}

#[test]
fn unprivileged_users_get_per_process_events_and_paranoid_3_is_an_error() {
    let mut m = machine(false, false, "0-1");
    m.root = false;
    let p = plan(&request(Target::Pid(42)), &m, &m.online).unwrap();
    assert_eq!(p.scope, Scope::Process);
    m.paranoid = 3;
    assert!(matches!(
        plan(&request(Target::Pid(42)), &m, &m.online),
        Err(RecordError::Forbidden { level: 3 })
    ));
}

#[test]
fn frequency_is_capped_by_the_kernel_and_branch_needs_a_pmu() {
    let m = machine(false, false, "0");
    let mut r = request(Target::Pid(1));
    r.frequency = Some(20000);
    assert_eq!(plan(&r, &m, &m.online).unwrap().frequency, 8700);
    r.sampling = Some(Sampling::Branch);
    assert!(matches!(
        plan(&r, &m, &m.online),
        Err(RecordError::NoBranchRecords)
    ));
}
