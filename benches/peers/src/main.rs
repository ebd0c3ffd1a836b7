//! `peers`: runs every tool on every workload it fits and prints one table (see `run.sh`,
//! which also runs the madsim binary and merges its rows with `--merge FILE`).
//!
//! Options: `--quick` (smaller budgets, for a smoke run), `--only A|B|C|D` (or a list: `A,B,C`),
//! `--merge FILE`,
//! `--tsv FILE` (also write the rows as tab-separated lines).

use calametra_core::choices::{derive_seed, story, Source};
use calametra_core::explore::replay_config;
use calametra_core::shrink::minimize_owned;
use calametra_core::swarm::Strategy;
use calametra_core::{run, RunConfig, Sim};
use calametra_peers::calametra_workloads::{self as cw, AVariant};
use calametra_peers::measure::{interleaved, seconds, Row, Value};
use calametra_peers::shuttle_a::Sched;
use calametra_peers::{loom_a, proptest_b, shuttle_a, turmoil_c};
use calametra_peers::{A_SEEDS, D_BUDGET, FIND_BUDGET, REPS, SEEDS, THROUGHPUT_SEED};

struct Opts {
    quick: bool,
    only: Option<String>,
    merge: Vec<String>,
    tsv: Option<String>,
    madsim: Option<String>,
}

fn opts() -> Opts {
    let mut o = Opts {
        quick: false,
        only: None,
        merge: Vec::new(),
        tsv: None,
        madsim: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => o.quick = true,
            "--only" => o.only = args.next(),
            "--merge" => o.merge.extend(args.next()),
            "--tsv" => o.tsv = args.next(),
            "--madsim" => o.madsim = args.next(),
            "--spin" => {
                // For `perf record`: only Calametra's runs of one workload, in a loop (or, with
                // `s-` before a probe's name, shuttle's random scheduler running it).
                let w = args.next().unwrap_or_default();
                // An optional count (runs; rounds of the 20 seeds for `bs`), e.g. for callgrind.
                let n = std::env::args()
                    .skip_while(|a| a != "--spin")
                    .nth(2)
                    .and_then(|n| n.parse().ok());
                spin(&w, n);
                std::process::exit(0);
            }
            other => {
                eprintln!("peers: unknown option `{other}`; expected --quick, --only A|B|C|D, --merge FILE, --tsv FILE");
                std::process::exit(2);
            }
        }
    }
    o
}

fn spin(w: &str, n: Option<u64>) {
    if w == "bs" {
        return spin_shrink(n.unwrap_or(200));
    }
    if let Some(probe) = w.strip_prefix("s-") {
        return spin_shuttle(w, probe, n.unwrap_or(100_000));
    }
    // A `u` after a workload's letter (`au`, `ayu`, `e0u`): its runs without a swarm (every
    // pick uniform), as the `calametra-uniform` row runs A's.
    let label = w;
    let (w, swarm) = match w.strip_suffix('u') {
        Some(base) if !base.is_empty() => (base, false),
        _ => (w, true),
    };
    let f: fn(&mut Sim) = match w {
        "a" => cw::a_noyield_correct,
        "ay" => cw::a_yield_correct,
        "b" => cw::b_status_ops,
        // What a seeded run costs besides its tasks: a scenario with none (`e0`), and one with a
        // single task that returns at once (`e1`). What a step costs: two tasks that yield 500
        // times each (`y2`; shuttle's `s-y2` is the same with threads).
        "e0" => |_| {},
        "e1" => |sim| {
            sim.spawn("t", async {});
        },
        "y2" => |sim| {
            for name in ["p", "q"] {
                sim.spawn(name, async {
                    for _ in 0..500 {
                        calametra::prelude::yield_now().await;
                    }
                });
            }
        },
        "c" => cw::c_exchange,
        _ => {
            eprintln!(
                "peers: no spin `{label}`; expected a, ay, b, c, e0, e1 or y2 (a `u` after it: \
                 without a swarm), bs, or s-e0, s-y2, s-a, s-ay (shuttle)"
            );
            std::process::exit(2);
        }
    };
    let faults = if w == "c" {
        cw::c_fault_plan()
    } else {
        Default::default()
    };
    let n = n.unwrap_or(if w == "c" { 50_000 } else { 300_000 });
    // Every run's hash folded into one, so two builds can be shown to run the same runs.
    let mut fold = [0u8; 32];
    let (secs, ()) = seconds(|| {
        for i in 0..n {
            let r = run(
                RunConfig {
                    source: Source::Seeded(derive_seed(1, "spin", i)),
                    faults: faults.clone(),
                    swarm,
                    ..RunConfig::default()
                },
                &f,
            );
            for (a, b) in fold.iter_mut().zip(r.hash.0) {
                *a = a.rotate_left(1) ^ b;
            }
        }
    });
    let digest: String = fold[..8].iter().map(|b| format!("{b:02x}")).collect();
    println!(
        "{label}: {:.0} runs/s (hashes folded: {digest})",
        n as f64 / secs
    );
}

/// `--spin s-W`: shuttle's random scheduler over `n` executions of probe `W` (`e0`, `y2`, `a`,
/// `ay`: see [`shuttle_a::spin`]), beside Calametra's `--spin W`.
fn spin_shuttle(label: &str, probe: &str, n: u64) {
    let (secs, ran) = seconds(|| shuttle_a::spin(probe, THROUGHPUT_SEED, n as usize));
    let Some(ran) = ran else {
        eprintln!("peers: no shuttle probe `{probe}`; expected s-e0, s-y2, s-a or s-ay");
        std::process::exit(2);
    };
    println!(
        "{label}: {:.0} runs/s ({ran} executions)",
        ran as f64 / secs
    );
}

/// `--spin bs`: workload B's find and shrink over the 20 seeds, `rounds` times (Calametra
/// alone, as `workload_b` times it).
///
/// Every replay's trace hash is folded into one, and so is each minimized result's event list
/// (its `Debug` text), so two builds can be shown to replay the same runs and find the same
/// minimal events.
fn spin_shrink(rounds: u64) {
    let mut replays = 0;
    let mut fold = 0xcbf2_9ce4_8422_2325u64;
    let (secs, ()) = seconds(|| {
        for _ in 0..rounds {
            for &seed in &SEEDS {
                let s = find_and_shrink_folding(seed, Some(&mut fold)).expect("B is found");
                assert_eq!(s.events.len(), 3);
                replays += s.attempts;
                fnv(&mut fold, format!("{:?}", s.events).as_bytes());
            }
        }
    });
    println!(
        "bs: {:.3} ms a find+shrink ({replays} replays; hashes folded: {fold:016x})",
        secs * 1e3 / (rounds * SEEDS.len() as u64) as f64
    );
}

/// Workload B for one seed: the first failing seeded run, minimized by replays.
fn find_and_shrink(seed: u64) -> Option<calametra_core::shrink::Shrunk> {
    find_and_shrink_folding(seed, None)
}

/// FNV-1a over `bytes`, continuing from `h`.
fn fnv(h: &mut u64, bytes: &[u8]) {
    for &b in bytes {
        *h = (*h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
}

/// [`find_and_shrink`], folding every replay's trace hash into `fold` when given.
fn find_and_shrink_folding(
    seed: u64,
    mut fold: Option<&mut u64>,
) -> Option<calametra_core::shrink::Shrunk> {
    let f: fn(&mut Sim) = cw::b_status_ops;
    let base = RunConfig::default();
    let failing = (0..1000u64)
        .map(|i| run(seeded(derive_seed(seed, "peers::b", i)), &f))
        .find(|r| r.failure.is_some())?;
    let sig = failing.failure.as_ref()?.signature();
    Some(minimize_owned(failing.events, &mut |cand| {
        let r = run(replay_config(&base, cand), &f);
        if let Some(fold) = fold.as_deref_mut() {
            fnv(fold, &r.hash.0);
        }
        match r.failure {
            Some(fl) if fl.signature() == sig => Some(r.events),
            _ => None,
        }
    }))
}

fn seeded(seed: u64) -> RunConfig {
    RunConfig {
        source: Source::Seeded(seed),
        ..RunConfig::default()
    }
}

/// A scenario's length as the harness measures it: its baseline's steps and task choices
/// (`explore::discover`; `RunConfig::horizon` and `RunConfig::choices`).
#[derive(Clone, Copy)]
struct Lengths {
    steps: u64,
    choices: u64,
}

/// A seeded run as the harness makes it: its externals are placed over the baseline's steps,
/// its swarm's priority strategy draws change points over the baseline's task choices.
fn seeded_h(seed: u64, len: Lengths) -> RunConfig {
    RunConfig {
        horizon: len.steps,
        choices: len.choices,
        ..seeded(seed)
    }
}

/// The harness's lengths for scenario `f` run from `base`.
fn baseline_lengths(base: &RunConfig, f: fn(&mut Sim)) -> Lengths {
    let b = calametra_core::explore::discover(base, &f);
    Lengths {
        steps: b.steps.max(1),
        choices: calametra_core::explore::change_point_horizon(base, &b, &f),
    }
}

/// The harness's lengths for scenario `f` (no faults).
fn baseline_steps(f: fn(&mut Sim)) -> Lengths {
    baseline_lengths(&RunConfig::default(), f)
}

/// The `i`th run of a priority-only search from `seed`: the priority strategy with the
/// parameters a swarm would draw (depth, horizon multiple, initial order) from its own draw.
fn priority_run(seed: u64, path: &str, i: u64, horizon: Lengths) -> RunConfig {
    let param = derive_seed(seed, &format!("{path}/priority"), i);
    RunConfig {
        strategy: Some(Strategy::priority_from(
            param,
            horizon.choices,
            param >> 40 & 1 == 1,
        )),
        ..seeded_h(derive_seed(seed, path, i), horizon)
    }
}

fn a_fn(v: AVariant) -> fn(&mut Sim) {
    match (v.yields, v.buggy) {
        (false, true) => cw::a_noyield_buggy,
        (true, true) => cw::a_yield_buggy,
        (false, false) => cw::a_noyield_correct,
        (true, false) => cw::a_yield_correct,
    }
}

fn workload_a(o: &Opts, rows: &mut Vec<Row>) {
    let n: u64 = if o.quick { 2_000 } else { 20_000 };
    let budget = if o.quick { 2_000 } else { FIND_BUDGET };
    for yields in [false, true] {
        let wl = if yields { "A-yield" } else { "A-noyield" };
        let correct = format!("{wl} correct");
        let buggy = format!("{wl} buggy");
        eprintln!("peers: {correct}");

        // The correct variant: a full budget of schedules, per second.
        let v = AVariant {
            yields,
            buggy: false,
        };
        let f = a_fn(v);
        let path = format!("peers::{wl}");
        let horizon = baseline_steps(f);
        let (_, loom_total) = loom_a::explore(yields, false);
        // The default row's runs, and the same seeds without a swarm: every pick uniform, as
        // shuttle's random scheduler picks, and no swarm draw or `config` record (the
        // `calametra-uniform` row, not the default).
        let reps = |swarm: bool| {
            let path = &path;
            move |rep: usize| {
                for i in 0..n {
                    let seed = derive_seed(THROUGHPUT_SEED + rep as u64, path, i);
                    let r = run(
                        RunConfig {
                            swarm,
                            ..seeded_h(seed, horizon)
                        },
                        &f,
                    );
                    assert!(r.failure.is_none(), "{:?}", r.failure);
                }
            }
        };
        let (mut cal, mut uniform) = (reps(true), reps(false));
        let shuttle = |sched| {
            move |rep: usize| {
                let (failed, ran) = shuttle_a::explore(
                    sched,
                    THROUGHPUT_SEED + rep as u64,
                    n as usize,
                    yields,
                    false,
                );
                assert!(!failed && ran == n);
            }
        };
        let mut random = shuttle(Sched::Random);
        let mut pct = shuttle(Sched::Pct);
        let mut loom = |_| {
            let (failed, ran) = loom_a::explore(yields, false);
            assert!(!failed && ran == loom_total);
        };
        let s = interleaved(
            REPS,
            &mut [
                (n, &mut cal),
                (n, &mut uniform),
                (n, &mut random),
                (n, &mut pct),
                (loom_total, &mut loom),
            ],
        );
        let records = run(
            seeded_h(derive_seed(THROUGHPUT_SEED, &path, 0), horizon),
            &f,
        )
        .records;
        let notes = [
            format!("{n} seeds a rep, trace hashed ({records} records a run)"),
            format!("the same {n} seeds a rep without a swarm (uniform picks), trace hashed"),
            format!("{n} iterations a rep"),
            format!("{n} iterations a rep, depth 3"),
            format!("exhaustive DFS: {loom_total} schedules a rep"),
        ];
        let tools = [
            "calametra",
            "calametra-uniform",
            "shuttle-random",
            "shuttle-pct",
            "loom",
        ];
        for (i, tool) in tools.iter().enumerate() {
            rows.push(Row::samples(
                tool,
                &correct,
                "schedules/s",
                s[i].clone(),
                &notes[i],
            ));
        }

        // shuttle's panic hook (installed on its first run) prints every panic; keep panics
        // quiet for every tool so that printing is not what they are timed on.
        calametra_peers::quiet_panics();

        // The buggy variant: runs until found, per seed.
        eprintln!("peers: {buggy}");
        let v = AVariant {
            yields,
            buggy: true,
        };
        let f = a_fn(v);
        let horizon = baseline_steps(f);
        let mut runs = Vec::new();
        let mut ms = Vec::new();
        for seed in 1..=A_SEEDS {
            let (secs, found) = seconds(|| {
                (0..budget).position(|i| {
                    run(seeded_h(derive_seed(seed, &path, i), horizon), &f)
                        .failure
                        .is_some()
                })
            });
            if let Some(i) = found {
                runs.push(i as f64 + 1.0);
                ms.push(secs * 1e3);
            }
        }
        push_find(rows, "calametra", &buggy, (runs, ms), A_SEEDS, budget);
        let (mut runs, mut ms) = (Vec::new(), Vec::new());
        for seed in 1..=A_SEEDS {
            let (secs, found) = seconds(|| {
                (0..budget).position(|i| {
                    run(priority_run(seed, &path, i, horizon), &f)
                        .failure
                        .is_some()
                })
            });
            if let Some(i) = found {
                runs.push(i as f64 + 1.0);
                ms.push(secs * 1e3);
            }
        }
        push_find(
            rows,
            "calametra-priority",
            &buggy,
            (runs, ms),
            A_SEEDS,
            budget,
        );
        for (tool, sched) in [
            ("shuttle-random", Sched::Random),
            ("shuttle-pct", Sched::Pct),
        ] {
            let mut runs = Vec::new();
            let mut ms = Vec::new();
            for seed in 1..=A_SEEDS {
                let (secs, (failed, ran)) =
                    seconds(|| shuttle_a::explore(sched, seed, budget as usize, yields, true));
                if failed {
                    runs.push(ran as f64);
                    ms.push(secs * 1e3);
                }
            }
            push_find(rows, tool, &buggy, (runs, ms), A_SEEDS, budget);
        }
        // loom has no seed: one exhaustive exploration, timed REPS times.
        let mut ms = Vec::new();
        let mut outcome = (false, 0);
        for _ in 0..REPS {
            let (secs, r) = seconds(|| loom_a::explore(yields, true));
            ms.push(secs * 1e3);
            outcome = r;
        }
        let (failed, ran) = outcome;
        rows.push(Row::count(
            "loom",
            &buggy,
            "found",
            failed as u64,
            1,
            &if failed {
                format!("deterministic DFS; failing schedule is number {ran}")
            } else {
                format!("deterministic DFS; all {ran} schedules pass")
            },
        ));
        if failed {
            rows.push(Row::samples(
                "loom",
                &buggy,
                "runs to find",
                vec![ran as f64],
                "",
            ));
            rows.push(Row::samples(
                "loom",
                &buggy,
                "ms to find",
                ms,
                &format!("{REPS} reps"),
            ));
        } else {
            rows.push(Row::samples(
                "loom",
                &buggy,
                "ms (exhaustive, not found)",
                ms,
                &format!("{REPS} reps"),
            ));
        }
    }
}

fn push_find(
    rows: &mut Vec<Row>,
    tool: &str,
    wl: &str,
    (runs, ms): (Vec<f64>, Vec<f64>),
    seeds: u64,
    budget: u64,
) {
    rows.push(Row::count(
        tool,
        wl,
        "found",
        runs.len() as u64,
        seeds,
        &format!("budget {budget} runs a seed"),
    ));
    if runs.is_empty() {
        rows.push(Row::na(tool, wl, "runs to find", "never found"));
    } else {
        rows.push(Row::samples(
            tool,
            wl,
            "runs to find",
            runs,
            "over the seeds that found it",
        ));
        rows.push(Row::samples(
            tool,
            wl,
            "ms to find",
            ms,
            "over the seeds that found it",
        ));
    }
}

fn workload_b(rows: &mut Vec<Row>) {
    eprintln!("peers: B");
    let wl = "B";
    let (mut ms, mut lens, mut three, mut found, mut replays) = (vec![], vec![], 0, 0, vec![]);
    let mut one_minimal = 0;
    for &seed in &SEEDS {
        let (secs, shrunk) = seconds(|| find_and_shrink(seed));
        if let Some(s) = shrunk {
            found += 1;
            ms.push(secs * 1e3);
            lens.push(s.events.len() as f64);
            replays.push(s.attempts as f64);
            if s.events.len() == 3 {
                three += 1;
            }
            if story(&s.events) == "get_status . disconnect . get_status" {
                one_minimal += 1;
            }
        }
    }
    let n = SEEDS.len() as u64;
    rows.push(Row::count(
        "calametra",
        wl,
        "found",
        found,
        n,
        "budget 1000 seeds a case",
    ));
    rows.push(Row::count(
        "calametra",
        wl,
        "shrunk to 3",
        three,
        n,
        &format!("{one_minimal}/{n} read `get_status . disconnect . get_status`"),
    ));
    rows.push(Row::samples("calametra", wl, "result length", lens, ""));
    rows.push(Row::samples(
        "calametra",
        wl,
        "find+shrink ms",
        ms,
        &format!(
            "ddmin over client events; median {} replays",
            calametra_peers::measure::median(&replays)
        ),
    ));
    calametra_peers::quiet_panics();
    for (tool, go) in [
        (
            "proptest",
            proptest_b::plain as fn(u64) -> proptest_b::Found,
        ),
        ("proptest-state-machine", proptest_b::state_machine),
    ] {
        let (mut ms, mut lens, mut three, mut found) = (vec![], vec![], 0, 0);
        let mut longer = Vec::new();
        for &seed in &SEEDS {
            let (secs, r) = seconds(|| go(seed));
            if let Some(m) = r.minimal {
                found += 1;
                ms.push(secs * 1e3);
                lens.push(m.len() as f64);
                if m.len() == 3 {
                    three += 1;
                } else {
                    longer.push(format!("seed {seed}: {m:?}"));
                }
            }
        }
        rows.push(Row::count(tool, wl, "found", found, n, "up to 1024 cases"));
        let note = match longer.first() {
            Some(first) => format!("not minimal, e.g. {first}"),
            None => String::new(),
        };
        for l in &longer {
            eprintln!("peers: {tool} stopped at {l}");
        }
        rows.push(Row::count(tool, wl, "shrunk to 3", three, n, &note));
        rows.push(Row::samples(tool, wl, "result length", lens, ""));
        rows.push(Row::samples(tool, wl, "find+shrink ms", ms, ""));
    }
}

fn workload_c(o: &Opts, rows: &mut Vec<Row>) {
    eprintln!("peers: C");
    let wl = "C";
    let n: u64 = if o.quick { 500 } else { 5_000 };
    let tn: u64 = if o.quick { 100 } else { 1_000 };
    let f: fn(&mut Sim) = cw::c_exchange;
    let cfg = |seed| RunConfig {
        source: Source::Seeded(seed),
        faults: cw::c_fault_plan(),
        ..RunConfig::default()
    };
    let probe = run(cfg(THROUGHPUT_SEED), &f);
    assert!(probe.failure.is_none(), "{:?}", probe.failure);
    let msgs = cw::C_MESSAGES.with(|m| m.get());
    let tmsgs = turmoil_c::exchange(THROUGHPUT_SEED);
    let mut cal = |rep: usize| {
        for i in 0..n {
            let r = run(
                cfg(derive_seed(THROUGHPUT_SEED + rep as u64, "peers::c", i)),
                &f,
            );
            assert!(r.failure.is_none(), "{:?}", r.failure);
        }
    };
    let mut tur = |rep: usize| {
        for i in 0..tn {
            turmoil_c::exchange((THROUGHPUT_SEED + rep as u64) * 1_000_003 + i);
        }
    };
    // madsim needs `--cfg madsim` for its whole build, so it is another binary: one
    // repetition a process, timed inside it, interleaved with the other tools' repetitions.
    let madsim_rows = std::cell::RefCell::new(Vec::new());
    let mut mad = |rep: usize| {
        let Some(bin) = &o.madsim else { return };
        let mut cmd = std::process::Command::new(bin);
        cmd.args(["--rep", &rep.to_string()]);
        if o.quick {
            cmd.arg("--quick");
        }
        match cmd.output() {
            Ok(out) if out.status.success() => madsim_rows.borrow_mut().extend(
                String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .filter_map(Row::from_tsv),
            ),
            Ok(out) => eprintln!(
                "peers: {bin} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(e) => eprintln!("peers: cannot run {bin}: {e}"),
        }
    };
    let s = interleaved(REPS, &mut [(n, &mut cal), (tn, &mut tur), (1, &mut mad)]);
    // Merge madsim's one-sample rows per metric.
    let mut merged: Vec<Row> = Vec::new();
    for r in madsim_rows.into_inner() {
        match merged.iter_mut().find(|m| m.metric == r.metric) {
            Some(m) => {
                if let (Value::Samples(a), Value::Samples(b)) = (&mut m.value, r.value) {
                    a.extend(b);
                }
            }
            None => merged.push(r),
        }
    }
    for (tool, s, m, note) in [
        (
            "calametra",
            &s[0],
            msgs,
            format!(
                "{n} seeds a rep; {msgs} messages, {} trace records, {} steps a sim",
                probe.records, probe.steps
            ),
        ),
        (
            "turmoil",
            &s[1],
            tmsgs,
            format!("{tn} seeds a rep; {tmsgs} messages a sim"),
        ),
    ] {
        rows.push(Row::samples(tool, wl, "sims/s", s.clone(), &note));
        rows.push(Row::samples(
            tool,
            wl,
            "messages/s",
            s.iter().map(|x| x * m as f64).collect(),
            "",
        ));
    }
    rows.extend(merged);
}

fn d_scenario(sim: &mut Sim) {
    calametra_peers::workload_d::pipe_scenario(sim, false)
}

/// Workload D: runs (and ms) to find, per seed, for uniform seeds (no swarm: uniform schedule,
/// every external, faults one crossing in 24), the swarm (the default), the priority strategy
/// pinned, and the guided sweep (one thread), each with the same budget of runs.
fn workload_d(o: &Opts, rows: &mut Vec<Row>) {
    eprintln!("peers: D");
    let wl = "D";
    let budget = if o.quick { 2_000 } else { D_BUDGET };
    let path = "peers::d";
    let f: fn(&mut Sim) = d_scenario;
    let mut base = RunConfig {
        fault_set: calametra_core::fault::FaultSet::Transport,
        ..RunConfig::default()
    };
    let len = baseline_lengths(&base, f);
    base.horizon = len.steps;
    base.choices = len.choices;
    let wanted = |r: &calametra_core::RunResult| {
        r.failure
            .as_ref()
            .is_some_and(|f| f.invariant() == Some("each_write_once"))
    };
    type Mk = Box<dyn Fn(u64, u64) -> RunConfig>;
    let modes: Vec<(&str, Mk, &str)> = vec![
        (
            "calametra-uniform",
            Box::new({
                let base = base.clone();
                move |seed, i| RunConfig {
                    source: Source::Seeded(derive_seed(seed, path, i)),
                    swarm: false,
                    ..base.clone()
                }
            }),
            "seeds without a swarm",
        ),
        (
            "calametra",
            Box::new({
                let base = base.clone();
                move |seed, i| RunConfig {
                    source: Source::Seeded(derive_seed(seed, path, i)),
                    ..base.clone()
                }
            }),
            "seeds with their swarm (the default)",
        ),
        (
            "calametra-priority",
            Box::new({
                let base = base.clone();
                move |seed, i| {
                    let param = derive_seed(seed, &format!("{path}/priority"), i);
                    RunConfig {
                        source: Source::Seeded(derive_seed(seed, path, i)),
                        strategy: Some(Strategy::priority_from(
                            param,
                            base.change_point_horizon(),
                            param >> 40 & 1 == 1,
                        )),
                        ..base.clone()
                    }
                }
            }),
            "seeds with their swarm, the priority strategy pinned",
        ),
    ];
    for (tool, mk, what) in &modes {
        let (mut runs, mut ms) = (Vec::new(), Vec::new());
        for &seed in &SEEDS {
            let (secs, found) = seconds(|| (0..budget).position(|i| wanted(&run(mk(seed, i), &f))));
            if let Some(i) = found {
                runs.push(i as f64 + 1.0);
                ms.push(secs * 1e3);
            }
        }
        eprintln!(
            "peers: D {tool}: found by {} of {} seeds",
            runs.len(),
            SEEDS.len()
        );
        push_find(rows, tool, wl, (runs, ms), SEEDS.len() as u64, budget);
        if let Some(r) = rows
            .iter_mut()
            .rev()
            .find(|r| r.tool == *tool && r.metric == "found")
        {
            r.note = format!("budget {budget} runs a seed; {what}");
        }
    }
    let (mut runs, mut ms) = (Vec::new(), Vec::new());
    for &seed in &SEEDS {
        let job = calametra::sweep::Job {
            path,
            func: f,
            base: &base,
            base_seed: seed,
        };
        let want = |fl: &calametra_core::Failure| fl.invariant() == Some("each_write_once");
        let (secs, found) = seconds(|| {
            calametra::sweep::run_guided_until(
                &job,
                calametra::sweep::Stop::Runs(budget),
                calametra::sweep::Partition::default(),
                1,
                calametra::sweep::Corpus::new(path),
                &want,
            )
            .3
        });
        if let Some(n) = found {
            runs.push(n as f64);
            ms.push(secs * 1e3);
        }
    }
    eprintln!(
        "peers: D guided: found by {} of {} seeds",
        runs.len(),
        SEEDS.len()
    );
    push_find(
        rows,
        "calametra-guided",
        wl,
        (runs, ms),
        SEEDS.len() as u64,
        budget,
    );
    if let Some(r) = rows
        .iter_mut()
        .rev()
        .find(|r| r.tool == "calametra-guided" && r.metric == "found")
    {
        r.note = format!(
            "budget {budget} runs a seed; guided sweep, one thread, rounds of {} runs",
            calametra::sweep::ROUND
        );
    }
    for tool in ["shuttle-random", "shuttle-pct"] {
        rows.push(Row::na(
            tool,
            wl,
            "runs to find",
            "not written: shuttle schedules threads; it has no bus, fault sites or externals to place",
        ));
    }
}

const TOOLS: [&str; 11] = [
    "calametra-uniform",
    "calametra",
    "calametra-priority",
    "calametra-guided",
    "shuttle-random",
    "shuttle-pct",
    "loom",
    "proptest",
    "proptest-state-machine",
    "madsim",
    "turmoil",
];

fn main() {
    let o = opts();
    calametra_peers::quiet_panics();
    let mut rows = Vec::new();
    let want = |w: &str| {
        o.only
            .as_deref()
            .is_none_or(|x| x.split(',').any(|x| x == w))
    };
    if want("A") {
        workload_a(&o, &mut rows);
    }
    if want("B") {
        workload_b(&mut rows);
    }
    if want("C") {
        workload_c(&o, &mut rows);
    }
    if want("D") {
        workload_d(&o, &mut rows);
    }
    for path in &o.merge {
        match std::fs::read_to_string(path) {
            Ok(text) => rows.extend(text.lines().filter_map(Row::from_tsv)),
            Err(e) => eprintln!("peers: cannot read rows from {path}: {e}"),
        }
    }
    // Group by workload and metric, tools in a fixed order; the sort is stable.
    let wl_order: Vec<String> = {
        let mut v: Vec<String> = Vec::new();
        for r in &rows {
            if !v.contains(&r.workload) {
                v.push(r.workload.clone());
            }
        }
        v
    };
    let metric_order: Vec<(String, String)> = {
        let mut v: Vec<(String, String)> = Vec::new();
        for r in &rows {
            let k = (r.workload.clone(), r.metric.clone());
            if !v.contains(&k) {
                v.push(k);
            }
        }
        v
    };
    rows.sort_by_key(|r| {
        (
            wl_order.iter().position(|w| *w == r.workload),
            metric_order
                .iter()
                .position(|(w, m)| *w == r.workload && *m == r.metric),
            TOOLS.iter().position(|t| *t == r.tool),
        )
    });
    if let Some(p) = &o.tsv {
        let text: String = rows.iter().map(|r| r.to_tsv() + "\n").collect();
        if let Err(e) = std::fs::write(p, text) {
            eprintln!("peers: cannot write {p}: {e}");
        }
    }
    println!("{}", calametra_peers::measure::table(&rows));
    println!(
        "seeds (find and shrink workloads): {:?} (workload A: 1..={A_SEEDS}); throughput seed {THROUGHPUT_SEED:#x} + repetition; {REPS} repetitions",
        SEEDS
    );
}
