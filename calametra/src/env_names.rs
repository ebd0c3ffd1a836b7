//! The environment contract's names: every `CALAMETRA_...` variable a Calametra test binary
//! (the harness, and the in-binary tools of [`crate::tool`]) reads, and that the `calametra`
//! command sets or reads, named once here so that the two ends cannot drift apart by a typo.
//!
//! Only the names and what each means live here; how a value is parsed and checked is the
//! harness's (or the tool's) business, and nothing here reads the environment. The `calametra`
//! command writes no `CALAMETRA_` literal of its own: it uses these constants. DESIGN.md §5
//! says what a user sets.

/// `N`: seeded schedules per scenario (1 to 1,000,000), widening exploration.
pub const SCHEDULES: &str = "CALAMETRA_SCHEDULES";
/// `0x..` or decimal: re-bases every scenario's seeds.
pub const SEED: &str = "CALAMETRA_SEED";
/// A directory for saved cases instead of each package's `calametra-regressions/`, or `off`
/// (no case is saved or replayed).
pub const REGRESSIONS: &str = "CALAMETRA_REGRESSIONS";
/// `strict`: a fixed saved case fails instead of passing with a note.
pub const REPLAY: &str = "CALAMETRA_REPLAY";
/// A saved case or a trace file that the trial `<scenario>::replay` replays.
pub const REPLAY_FILE: &str = "CALAMETRA_REPLAY_FILE";
/// A file the harness writes each saved case's state into (`calametra review`).
pub const CASE_STATES: &str = "CALAMETRA_CASE_STATES";
/// A file a trial writes its run's full trace into (JSONL, closed by its `summary` record).
pub const TRACE_OUT: &str = "CALAMETRA_TRACE_OUT";
/// A directory a trial writes the pictures its devices showed into, with their index.
pub const SCANOUT: &str = "CALAMETRA_SCANOUT";
/// A scheduling step at which a replay stops (with [`STATE_OUT`]).
pub const STOP_AT: &str = "CALAMETRA_STOP_AT";
/// A file the world at [`STOP_AT`] is written into (JSON).
pub const STATE_OUT: &str = "CALAMETRA_STATE_OUT";
/// A sweep's budget: a duration (`90s`, `10m`) or a number of runs per scenario. Every
/// variable of a sweep starts with this name.
pub const SWEEP: &str = "CALAMETRA_SWEEP";
/// `k/n`: this machine's share of a sweep's seeds.
pub const SWEEP_PARTITION: &str = "CALAMETRA_SWEEP_PARTITION";
/// Threads of a sweep (1 to 1024).
pub const SWEEP_THREADS: &str = "CALAMETRA_SWEEP_THREADS";
/// A file a sweep writes its summary into (`calametra sweep-report` merges them).
pub const SWEEP_SUMMARY: &str = "CALAMETRA_SWEEP_SUMMARY";
/// A directory a guided sweep keeps its corpus in.
pub const SWEEP_CORPUS: &str = "CALAMETRA_SWEEP_CORPUS";
/// `1` (guided, the default) or `0` (seeds alone).
pub const SWEEP_GUIDE: &str = "CALAMETRA_SWEEP_GUIDE";
/// A known findings file: signatures a sweep meets without failing, each with whose bug it is
/// (`calametra_core::sweep::Known`).
pub const SWEEP_KNOWN: &str = "CALAMETRA_SWEEP_KNOWN";
/// Set: the harness prints more of what it does.
pub const VERBOSE: &str = "CALAMETRA_VERBOSE";
/// `calametra compare --package`: the file the in-binary comparison writes its result into.
pub const COMPARE_OUT: &str = "CALAMETRA_COMPARE_OUT";
/// `calametra compare --package`: the capture compared.
pub const COMPARE_CAPTURE: &str = "CALAMETRA_COMPARE_CAPTURE";
/// `calametra compare --package`: the spec whose model is compared.
pub const COMPARE_SPEC: &str = "CALAMETRA_COMPARE_SPEC";
/// `calametra compare --package`: `BUS:ADDR`, the one device compared.
pub const COMPARE_DEVICE: &str = "CALAMETRA_COMPARE_DEVICE";
/// `calametra compare --package`: `1` to leave the capture's hot-plug out of the model.
pub const COMPARE_NO_HOTPLUG: &str = "CALAMETRA_COMPARE_NO_HOTPLUG";
/// `calametra qemu --package`: the job file the in-binary QEMU run reads.
pub const QEMU_JOB: &str = "CALAMETRA_QEMU_JOB";
/// `calametra qemu --package`: the file the in-binary QEMU run writes its result into.
pub const QEMU_OUT: &str = "CALAMETRA_QEMU_OUT";
/// The cache directory of the guest image and the lockstep QEMU (`calametra guest-setup`);
/// read by `calametra-qemu`.
pub const CACHE: &str = "CALAMETRA_CACHE";

/// Every name above, for checks that a variable is one of the contract's.
pub const ALL: &[&str] = &[
    SCHEDULES,
    SEED,
    REGRESSIONS,
    REPLAY,
    REPLAY_FILE,
    CASE_STATES,
    TRACE_OUT,
    SCANOUT,
    STOP_AT,
    STATE_OUT,
    SWEEP,
    SWEEP_PARTITION,
    SWEEP_THREADS,
    SWEEP_SUMMARY,
    SWEEP_CORPUS,
    SWEEP_KNOWN,
    SWEEP_GUIDE,
    VERBOSE,
    COMPARE_OUT,
    COMPARE_CAPTURE,
    COMPARE_SPEC,
    COMPARE_DEVICE,
    COMPARE_NO_HOTPLUG,
    QEMU_JOB,
    QEMU_OUT,
    CACHE,
];

#[cfg(test)]
mod tests {
    use super::ALL;

    #[test]
    fn names_are_distinct_and_of_the_contract() {
        let mut seen = std::collections::BTreeSet::new();
        for n in ALL {
            assert!(n.starts_with("CALAMETRA_"), "{n}");
            assert!(
                n.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'),
                "{n}"
            );
            assert!(seen.insert(*n), "{n} twice");
        }
    }
}
