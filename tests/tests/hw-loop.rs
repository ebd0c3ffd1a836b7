//! A fixture test target for `saved_cases.rs`: its name has a hyphen (`--test hw-loop`; the
//! crate is `hw_loop`). All trials pass unless the fixture's `HW_LOOP_*` knobs plant a bug.

include!("../fixture/hw_loop_case.rs");
