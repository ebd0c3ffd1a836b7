//! The Calametra workloads as a user runs them: `calametra::main!()` over the scenarios in
//! `calametra_workloads` (`cargo run --release --bin peers-scenarios -- --list`).

use calametra_peers::calametra_workloads as w;

fn main() {
    // Referencing the scenarios keeps their registrations linked into this binary.
    let all: [fn(&mut calametra::Sim); 6] = [
        w::a_noyield_buggy,
        w::a_yield_buggy,
        w::a_noyield_correct,
        w::a_yield_correct,
        w::b_status_ops,
        w::c_exchange,
    ];
    std::hint::black_box(all);
    calametra::harness::main()
}
