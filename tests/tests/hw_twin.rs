//! A fixture test target for `saved_cases.rs`: the scenarios of `hw-loop`, by the same names,
//! in a second test target (their saved cases are never each other's).

include!("../fixture/hw_loop_case.rs");
