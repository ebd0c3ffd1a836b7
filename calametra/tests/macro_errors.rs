//! `#[calametra::scenario]`: bad arguments are compile errors pointing at the argument.

#[test]
fn attribute_arguments_are_validated_at_compile_time() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/ok.rs");
    t.compile_fail("tests/ui/unknown_arg.rs");
    t.compile_fail("tests/ui/bad_faults.rs");
    t.compile_fail("tests/ui/bad_primitive.rs");
    t.compile_fail("tests/ui/bad_timeout.rs");
    t.compile_fail("tests/ui/bad_schedules.rs");
    t.compile_fail("tests/ui/zero_steps.rs");
    t.compile_fail("tests/ui/expect_with_seed.rs");
    t.compile_fail("tests/ui/duplicate.rs");
    t.compile_fail("tests/ui/async_fn.rs");
    t.compile_fail("tests/ui/no_sim.rs");
    t.compile_fail("tests/ui/missing_spec.rs");
    t.compile_fail("tests/ui/bad_guest.rs");
    t.compile_fail("tests/ui/guest_max_steps.rs");
    t.compile_fail("tests/ui/marks_floor_without_marks.rs");
}
