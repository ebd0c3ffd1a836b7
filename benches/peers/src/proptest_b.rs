//! Workload B in proptest: plain proptest (a `Vec<Op>` of 1 to 48 operations, shrunk by
//! proptest's vector and union shrinkers) and proptest-state-machine (a reference state machine
//! generating the transitions, the buggy machine as the system under test, the same invariant
//! checked after every transition). Both run on a `TestRunner` seeded from a fixed seed.

use crate::machine::{Machine, Op};
use crate::B_MAX_OPS;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestError, TestRng, TestRunner};
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest};

/// One operation, shrinking towards `GetStatus` (the first alternative), as both versions draw it.
pub fn op() -> BoxedStrategy<Op> {
    prop_oneof![
        Just(Op::GetStatus),
        Just(Op::Flip),
        Just(Op::Disconnect),
        Just(Op::Reconnect),
        Just(Op::ModeSet),
        Just(Op::Poll),
    ]
    .boxed()
}

fn runner(seed: u64) -> TestRunner {
    let config = Config {
        failure_persistence: None,
        cases: 1024,
        ..Config::default()
    };
    let mut bytes = [0u8; 32];
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(
            &(seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)).to_le_bytes(),
        );
    }
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes))
}

/// What one find-and-shrink produced: whether a failure was found and the minimal sequence.
#[derive(Debug)]
pub struct Found {
    /// The minimal failing sequence proptest reports (None when nothing failed).
    pub minimal: Option<Vec<Op>>,
}

/// Plain proptest: generate up to 48 operations, apply them, fail on the invariant.
pub fn plain(seed: u64) -> Found {
    let mut r = runner(seed);
    let strategy = proptest::collection::vec(op(), 1..=B_MAX_OPS);
    let result = r.run(&strategy, |ops| {
        let mut m = Machine::new(true);
        for o in ops {
            m.apply(o);
            m.check().map_err(TestCaseError::fail)?;
        }
        Ok(())
    });
    match result {
        Err(TestError::Fail(_, ops)) => Found { minimal: Some(ops) },
        _ => Found { minimal: None },
    }
}

/// The reference machine: a correct status machine (the bug fixed) drives generation.
pub struct Reference;

impl ReferenceStateMachine for Reference {
    type State = MachineState;
    type Transition = Op;

    fn init_state() -> BoxedStrategy<MachineState> {
        Just(MachineState(Machine::new(false))).boxed()
    }

    fn transitions(_: &MachineState) -> BoxedStrategy<Op> {
        op()
    }

    fn apply(mut state: MachineState, t: &Op) -> MachineState {
        state.0.apply(*t);
        state
    }
}

/// The reference state (a `Machine` without the bug).
#[derive(Clone, Debug)]
pub struct MachineState(pub Machine);

/// The system under test: the buggy machine; the invariant is checked after every transition.
pub struct Sut;

impl StateMachineTest for Sut {
    type SystemUnderTest = Machine;
    type Reference = Reference;

    fn init_test(_: &MachineState) -> Machine {
        Machine::new(true)
    }

    fn apply(mut m: Machine, _: &MachineState, t: Op) -> Machine {
        m.apply(t);
        m
    }

    fn check_invariants(m: &Machine, _: &MachineState) {
        if let Err(e) = m.check() {
            panic!("{e}");
        }
    }
}

/// proptest-state-machine: the sequential strategy of 1 to 48 transitions.
pub fn state_machine(seed: u64) -> Found {
    let mut r = runner(seed);
    let strategy = Reference::sequential_strategy(1..=B_MAX_OPS);
    let result = r.run(&strategy, |(init, transitions, seen)| {
        Sut::test_sequential(Config::default(), init, transitions, seen);
        Ok(())
    });
    match result {
        Err(TestError::Fail(_, (_, transitions, _))) => Found {
            minimal: Some(transitions),
        },
        _ => Found { minimal: None },
    }
}
