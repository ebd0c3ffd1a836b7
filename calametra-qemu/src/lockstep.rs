//! Lockstep: a Linux guest run as repeatable as an in-process one.
//!
//! With usb-redir, a reply reaches the guest wherever its vCPU happens to be, so two runs of one
//! scenario differ. Here the guest's USB device is `usb-calametra`, a QEMU device Calametra
//! builds into QEMU 10.0.2 (`calametra-qemu/qemu/build.sh`, `patches/`): it turns every USB
//! packet into a request frame on a unix socket and the vCPU waits for the reply inside the
//! host controller's call. Each frame carries the guest's virtual clock (`QEMU_CLOCK_VIRTUAL`
//! under `-icount`), and the model's clock is driven by it (`DeviceHost::advance_to` before
//! every answer), so the model's timers, injected faults and external events (an unplug, a
//! replug) land at the same guest instruction count on every run. The guest's console is then
//! deterministic too and is hashed as `guest` records.
//!
//! A run restores the guest from a snapshot saved after boot ([`Start::Snapshot`], the default
//! of [`LockstepConfig::find`]; see [`crate::snapshot`]) or boots it ([`Start::ColdBoot`]).
//!
//! # The framing (version 2)
//!
//! Little-endian. A frame is a 24-byte [`Header`] (`magic` `CLM1`, `type`, `ep`, `flags`,
//! `seq`, `len`, `clock_ns`) and `len` payload bytes. QEMU sends requests ([`Kind`]: `hello`,
//! `control`, `out`, `in`, `reset`, `tick`, `ep_stopped`); every request gets one reply
//! (`type | 0x80`, the same `seq`) whose payload starts with `status` (u32, [`Status`]),
//! `actions` (u32, [`action`]) and `wake_ns` (u64: the guest clock at which QEMU sends a
//! `tick`; 0 for none), then the data. The hello's reply carries the framing version, the
//! speed, whether the device is plugged in at power-on, the re-enumeration gap and the device
//! descriptor. `calametra-qemu/qemu/FRAMING.md` has every field; this module is its only
//! implementation on the Rust side.
//!
//! # A guest scenario
//!
//! A guest scenario is a `fn(&mut Guest)` ([`crate::scenario::Guest`]) under
//! `#[calametra::scenario(guest = lockstep, ...)]`, or run directly with a
//! [`crate::scenario::GuestRunner`]:
//!
//! ```no_run
//! use calametra_core::explore::Probe as Trial;
//! use calametra_core::RunConfig;
//! use calametra_qemu::lockstep::LockstepConfig;
//! use calametra_qemu::scenario::GuestRunner;
//! use calametra_qemu::{Guest, Probe};
//!
//! fn lsusb(guest: &mut Guest) {
//!     guest.attach(calametra_models_here());
//!     guest.probe(Probe::Lsusb);
//! }
//! # fn calametra_models_here() -> calametra_qemu::Boxed { unimplemented!() }
//!
//! fn twice() -> Result<(), String> {
//!     // calametra-qemu/qemu/build.sh and guest/build.sh built these under target/.
//!     let lock = LockstepConfig::find(std::path::Path::new("target"))?;
//!     let runner = GuestRunner::new(lsusb, lock);
//!     let config = Trial::Baseline.config(&RunConfig::default());
//!     let (a, b) = (runner.run_guest(&config)?, runner.run_guest(&config)?);
//!     assert_eq!(a.hash, b.hash, "every frame and the console, the same twice");
//!     Ok(())
//! }
//! ```
//!
//! # Files of lockstep
//!
//! [`frame`] (`lockstep_frame.rs`) is the codec ([`Header`], [`Request`], [`Reply`],
//! [`FrameReader`], [`encode_reply`]), sans-I/O; [`server`] (`lockstep_server.rs`) answers
//! requests from a [`DeviceHost`] and writes every frame as a deterministic `emulator` record;
//! `lockstep_config.rs` has the config ([`LockstepConfig`], [`Start`], the QEMU command
//! lines). Those three are modules of their own, re-exported here, because the snapshot
//! ([`crate::snapshot`]) uses them too and this file uses the snapshot: they must not import
//! this file or the snapshot. This file has the run
//! ([`run_with_host`]: a snapshot start or a cold boot, then [`crate::runloop`]'s loop over
//! the [`LockstepTransport`], the console as records, the outcome, a [`GuestRun`] served
//! [`Via::Lockstep`]). Only the loop reads the
//! wall clock (the watchdog, the timings); nothing the server decides depends on it.

use crate::guest::Probe;
use crate::guest_run::{verdict, GuestRun, Outcome, Timings, Via};
use crate::launcher::{kernel_append, Scratch};
use crate::qemu_process::{accept_qemu, start_qemu, QemuError, Started};
use crate::runloop::{self, run_loop, LoopEnd, LoopOptions};
use crate::snapshot;
use crate::transport::Transport;
use crate::watchdog::{self, GuestWatch};
use calametra_core::choices::Event;
use calametra_core::clock::Nanos;
use calametra_core::fault::Fault;
use calametra_core::host::DeviceHost;
use calametra_core::trace::{parse_kept, Record};
use calametra_core::usb::Device;
use calametra_core::RunConfig;
use std::time::{Duration, Instant};

pub use crate::lockstep_config::{find_qemu, firmware_dirs, LockstepConfig, Start};
pub use crate::lockstep_frame as frame;
pub use crate::lockstep_server as server;
pub use frame::*;
pub use server::*;

/// The events of a run read back from its trace (with the core's parser), in order: the faults
/// injected (`fault` records) and the externals fired (`external` records, as
/// [`Event::GuestExternal`] at the guest clock). What a replay needs; schedule picks among simultaneous model events and data
/// draws are not in the trace, and a replay that needed them shows a different hash, never a
/// silent pass.
pub fn events_of(lines: &[String]) -> Vec<Event> {
    let text = |r: &Record, k: &str| r.data.get(k).and_then(|v| v.as_str()).map(str::to_owned);
    let mut out = Vec::new();
    for r in parse_kept(lines) {
        match r.kind.as_str() {
            "fault" => {
                if let (Some(site), Some(f)) = (text(&r, "site"), text(&r, "fault")) {
                    if let Ok(fault) = Fault::parse(&f) {
                        out.push(Event::Fault { site, fault });
                    }
                }
            }
            "external" => {
                let at = r.data.get("at_ns").and_then(|v| v.as_u64());
                if let (Some(name), Some(at_ns)) = (text(&r, "external"), at) {
                    out.push(Event::GuestExternal { name, at_ns });
                }
            }
            _ => {}
        }
    }
    out
}

/// The events of a run: the model's (faults, schedule picks, data draws, as its decider took
/// them) and then the externals the server fired on the guest clock.
fn run_events(host: &DeviceHost, trace: &[String]) -> Vec<Event> {
    let mut events = host.events();
    events.extend(
        events_of(trace)
            .into_iter()
            .filter(|e| matches!(e, Event::GuestExternal { .. })),
    );
    events
}

/// The lockstep run's result: a [`GuestRun`] served [`Via::Lockstep`] (the former name, kept
/// for users' code; the frames and guest clock are [`GuestRun::frames`] and
/// [`GuestRun::end_clock_ns`]).
pub type LockstepRun = GuestRun;

/// The lockstep transport: QEMU's frames to the [`Server`], its replies back; sans I/O. A run
/// stops on the frame after which an invariant broke (the server says [`Served::Stop`]).
pub struct LockstepTransport<'a> {
    server: &'a mut Server,
    reader: FrameReader,
    out: Vec<u8>,
    stopped: bool,
}

impl<'a> LockstepTransport<'a> {
    /// A transport over `server`; `stopped` when the run already stopped on the hello (a
    /// snapshot start serves it before the loop).
    pub fn new(server: &'a mut Server, stopped: bool) -> LockstepTransport<'a> {
        LockstepTransport {
            server,
            reader: FrameReader::new(),
            out: Vec::new(),
            stopped,
        }
    }
}

impl Transport for LockstepTransport<'_> {
    fn feed(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.reader.push(bytes);
        while !self.stopped {
            let Some(r) = self.reader.next_request() else {
                break;
            };
            match r.and_then(|req| self.server.serve(&req)) {
                Ok(Served::Reply(bytes)) => self.out.extend_from_slice(&bytes),
                Ok(Served::Stop) => self.stopped = true,
                Err(e) => return Err(e.to_string()),
            }
        }
        Ok(())
    }

    fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    fn stop(&self) -> Option<String> {
        self.stopped.then(|| {
            self.server
                .failure()
                .map(|f| f.to_string())
                .unwrap_or_else(|| "stopped".into())
        })
    }

    fn activity(&self) -> u64 {
        self.server.frames()
    }

    fn host_mut(&mut self) -> &mut DeviceHost {
        self.server.host_mut()
    }

    fn describe(&self) -> String {
        format!("{} frames", self.server.frames())
    }
}

/// What a run is asked to do besides the probe.
#[derive(Clone, Default)]
pub struct Extras {
    /// External events a seeded run places (or a replay takes from its events).
    pub externals: Vec<External>,
    /// Where on the guest clock a seeded run places them.
    pub window: (Nanos, Nanos),
    /// Checked after every frame; the first that breaks ends the run there.
    pub invariants: Vec<(String, Invariant)>,
}

/// Boots the lockstep guest with `device`, runs `probe`, and returns the run and the device
/// host. `config` gives the model's choice source, fault plan and fault set; its trace is
/// always kept.
pub fn run_with_host<D: Device>(
    device: D,
    config: &RunConfig,
    probe: &Probe,
    lock: &LockstepConfig,
) -> Result<(GuestRun, DeviceHost), QemuError> {
    run_with_extras(device, config, &Extras::default(), probe, lock)
}

/// [`run_with_host`] with externals and invariants.
pub fn run_with_extras<D: Device>(
    device: D,
    config: &RunConfig,
    extras: &Extras,
    probe: &Probe,
    lock: &LockstepConfig,
) -> Result<(GuestRun, DeviceHost), QemuError> {
    let start = Instant::now();
    let cfg = RunConfig {
        keep_trace: true,
        ..config.clone()
    };
    let placed = place_externals(
        &cfg.source,
        cfg.place_externals,
        &extras.externals,
        extras.window,
    );
    let host = DeviceHost::new(device, &cfg);
    let mut server = Server::new(
        host,
        lock.options.clone(),
        extras.externals.clone(),
        placed,
        extras.invariants.clone(),
    )
    .map_err(|e| QemuError::Qemu(e.to_string()))?;

    let scratch = Scratch::new("lockstep", &lock.qemu.guest.initramfs, probe)?;
    let dir = scratch.path();
    let (socket, initrd, listener) = (&scratch.socket, &scratch.initrd, &scratch.listener);
    let d = server.device_descriptor();
    let (vid, pid) = (
        u16::from_le_bytes([d[8], d[9]]),
        u16::from_le_bytes([d[10], d[11]]),
    );
    let append = kernel_append(probe, vid, pid, &lock.qemu.extra_append);
    let append = append.as_str();
    let mut timings = Timings::default();
    let (q, stream, qmp, stopped) = match &lock.start {
        Start::ColdBoot => {
            let qmp_path = dir.join("qmp.sock");
            let mut cmd = lock.command(socket, initrd, append);
            cmd.arg("-qmp").arg(watchdog::qmp_arg(&qmp_path));
            let mut q = start_qemu(cmd, &lock.qemu.qemu)?;
            let qmp = watchdog::open_qmp(&qmp_path, &mut q);
            let stream = accept_qemu(listener, &mut q, start, "lockstep")?;
            (q, stream, qmp, false)
        }
        Start::Snapshot { cache } => {
            let snap = snapshot::ensure(lock, cache, initrd, append)?;
            timings.snapshot = Some(snap.made_in).filter(|_| snap.fresh);
            server
                .host_mut()
                .record("emulator", "snapshot", false, |r| {
                    r.str("key", &snap.key)
                        .bool("fresh", snap.fresh)
                        .str("dir", &snap.dir.display().to_string())
                        .u64("pruned", snap.pruned.len() as u64);
                });
            let restoring = Instant::now();
            let r = snapshot::restore(
                lock,
                &snap,
                initrd,
                append,
                dir,
                socket,
                listener,
                &mut server,
            )?;
            timings.restored = Some(restoring.elapsed());
            (r.started, r.stream, Some(r.qmp), r.stopped)
        }
    };
    let command = q.command.clone();
    server.host_mut().record("emulator", "qemu", false, |r| {
        r.str("event", "start").str("command", &command);
    });
    let Started {
        console_rx,
        stderr_rx,
        mut guard,
        ..
    } = q;
    let served = run_loop(
        &mut LockstepTransport::new(&mut server, stopped),
        stream,
        &mut guard,
        console_rx,
        GuestWatch::new(&lock.qemu, qmp, start),
        start,
        &LoopOptions {
            read_timeout: Duration::from_millis(20),
            idle_after: None,
            power_off_grace: None,
            exit_drain: Duration::from_secs(5),
        },
    );
    let served = LoopEnd {
        timings: Timings {
            snapshot: timings.snapshot,
            restored: timings.restored,
            ..served.timings
        },
        ..served
    };
    let stderr: Vec<String> = stderr_rx
        .map(|rx| runloop::drain(&rx, Duration::from_millis(500)))
        .unwrap_or_default();
    drop(scratch);
    // QEMU stopped by a signal from outside (exit status 0, "terminating on signal 15 from
    // pid N") ended where the host's scheduler put it: no verdict, nothing deterministic.
    let mut served = served;
    if let Some(line) = stderr.iter().find(|l| l.contains("terminating on signal")) {
        if !matches!(
            served.outcome,
            Outcome::Passed | Outcome::EmulatorBlocked { .. }
        ) {
            served.outcome = Outcome::EmulatorBlocked {
                reason: format!("QEMU was stopped from outside the run: {line}"),
            };
            served.deterministic_end = false;
        }
    }

    // The console, whole, as deterministic records: with the vCPU waiting on every frame, what
    // the guest printed up to where the run ended is the same bytes on every run.
    let deterministic = served.deterministic_end;
    let host = server.host_mut();
    for (i, line) in served.console.iter().enumerate() {
        host.record("guest", "guest", deterministic, |r| {
            r.u64("n", i as u64).str("line", line);
        });
    }
    // The kernel's log of the run (`dmesg` after the probe), as one record: deterministic as
    // the console is (lockstep's guest clock stamps every line the same on every run).
    if let Some(log) = crate::kernel_log::dmesg(&served.console) {
        host.record("dmesg", "guest", deterministic, |r| {
            r.u64("lines", log.len() as u64).str("log", &log.join("\n"));
        });
    }
    // The first kernel fault (an oops, a BUG, a hung task, a panic), named.
    if let Some(k) = crate::kernel_log::first_fault(&served.console) {
        host.record("kernel_fault", "guest", deterministic, |r| {
            r.str("kind", k.kind.name()).str("line", &k.line);
        });
    }
    // What a program the guest ran did, as one record (its lines are in the console too).
    if let Some(p) = crate::program::ProgramOutput::of(&served.console) {
        host.record("program", "guest", deterministic, |r| {
            r.i64("status", i64::from(p.status))
                .str("stdout", &p.stdout.join("\n"))
                .str("stderr", &p.stderr.join("\n"))
                .bool("complete", p.complete);
        });
    }
    let trace: Vec<String> = server.host().lines().to_vec();
    let (outcome, failure) = verdict(served.outcome, server.failure(), &trace, &served.console);
    let (frames, end_clock_ns) = (server.frames(), server.last_clock());
    let outcome_name = outcome.name();
    let host = server.host_mut();
    let now = host.now();
    host.record("end", "lockstep", true, |r| {
        r.str("outcome", outcome_name)
            .u64("frames", frames)
            .u64("guest_clock_ns", end_clock_ns)
            .u64("model_clock_ns", now);
    });
    let trace: Vec<String> = server.host().lines().to_vec();
    let (hash, records) = server.host().hash();
    let run = GuestRun {
        outcome,
        failure,
        console: served.console,
        console_at: served.console_at,
        events: run_events(server.host(), &trace),
        trace,
        hash,
        records,
        via: Via::Lockstep {
            frames,
            end_clock_ns,
        },
        timings: Timings {
            total: start.elapsed(),
            ..served.timings
        },
        exit: served.exit,
        qemu_stderr: stderr.join("\n"),
        command,
    };
    Ok((run, server.into_host()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use calametra_core::choices::Source;
    use calametra_core::usb::Setup;
    use calametra_core::usb::{DevCtx, Reply as DevReply};

    /// A device with one interrupt IN endpoint that has data only after a timer fires.
    struct Ticker {
        armed: bool,
        ready: bool,
    }

    impl Device for Ticker {
        fn name(&self) -> &str {
            "ticker"
        }
        fn control(&mut self, cx: &mut DevCtx<'_>, s: &Setup, _data: &[u8]) -> DevReply {
            match (s.request_type, s.request) {
                (0x80, 6) if s.value == 0x0100 => DevReply::Data(vec![
                    18, 1, 0, 2, 0, 0, 0, 64, 0x09, 0x12, 0x02, 0, 0, 1, 0, 0, 0, 1,
                ]),
                (0x40, 1) => {
                    if !self.armed {
                        self.armed = true;
                        cx.wake_after(5_000_000, 1);
                    }
                    DevReply::Ack
                }
                _ => DevReply::Stall,
            }
        }
        fn out(&mut self, _cx: &mut DevCtx<'_>, _ep: u8, _data: &[u8]) -> DevReply {
            DevReply::Ack
        }
        fn poll_in(&mut self, _cx: &mut DevCtx<'_>, _ep: u8, _max: usize) -> DevReply {
            if self.ready {
                DevReply::Data(vec![7])
            } else {
                DevReply::Nak
            }
        }
        fn on_timer(&mut self, _cx: &mut DevCtx<'_>, _token: u64) {
            self.ready = true;
        }
    }

    fn server(externals: Vec<External>, placed: Vec<(Nanos, usize)>) -> Server {
        server_with(
            RunConfig {
                keep_trace: true,
                ..RunConfig::default()
            },
            externals,
            placed,
        )
    }

    fn server_with(
        config: RunConfig,
        externals: Vec<External>,
        placed: Vec<(Nanos, usize)>,
    ) -> Server {
        let host = DeviceHost::new(
            Ticker {
                armed: false,
                ready: false,
            },
            &config,
        );
        Server::new(
            host,
            LockstepOptions::default(),
            externals,
            placed,
            Vec::new(),
        )
        .unwrap()
    }

    /// A server whose model takes `fault` at `site`.
    fn server_faulted(site: &str, fault: Fault) -> Server {
        server_with(
            RunConfig {
                keep_trace: true,
                faults: calametra_core::fault::FaultPlan::single(site, fault),
                ..RunConfig::default()
            },
            Vec::new(),
            Vec::new(),
        )
    }

    fn reply_of(bytes: &[u8]) -> (Header, Reply) {
        let mut hb = [0u8; HEADER_LEN];
        hb.copy_from_slice(&bytes[..HEADER_LEN]);
        let h = Header::decode(&hb).unwrap();
        let p = &bytes[HEADER_LEN..];
        let w = |i: usize| u32::from_le_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]);
        let q = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&p[i..i + 8]);
            u64::from_le_bytes(b)
        };
        (
            h,
            Reply {
                status: Status::from_code(w(0)),
                actions: w(4),
                wake_ns: q(8),
                complete_ns: q(16),
                data: p[PREFIX_LEN..].to_vec(),
            },
        )
    }

    fn hello() -> Vec<u8> {
        let mut v = VERSION.to_le_bytes().to_vec();
        v.extend_from_slice(&[0, 0, 0, 0]);
        v
    }

    fn req(kind: Kind, seq: u32, clock_ns: Nanos, ep: u8, payload: Vec<u8>) -> Request {
        Request {
            kind,
            ep,
            seq,
            clock_ns,
            payload,
        }
    }

    fn serve(s: &mut Server, r: Request) -> Reply {
        match s.serve(&r).unwrap() {
            Served::Reply(b) => {
                let (h, reply) = reply_of(&b);
                assert_eq!(h.ty, r.kind.code() | REPLY);
                assert_eq!(h.seq, r.seq);
                reply
            }
            Served::Stop => panic!("stopped"),
        }
    }

    #[test]
    fn frames_round_trip_through_the_reader() {
        let r = req(
            Kind::Control,
            3,
            123_456,
            0,
            vec![0x80, 6, 0, 1, 0, 0, 18, 0],
        );
        let bytes = r.encode();
        assert_eq!(&bytes[..4], b"CLM1");
        let mut rd = FrameReader::new();
        rd.push(&bytes[..10]);
        assert!(rd.next_request().is_none());
        rd.push(&bytes[10..]);
        assert_eq!(rd.next_request().unwrap().unwrap(), r);
        assert!(rd.next_request().is_none());
        let mut bad = bytes.clone();
        bad[0] = b'X';
        rd.push(&bad);
        assert!(matches!(rd.next_request(), Some(Err(FrameError::Magic(_)))));
    }

    #[test]
    fn the_hello_gives_version_speed_and_descriptor() {
        let mut s = server(Vec::new(), Vec::new());
        let r = serve(&mut s, req(Kind::Hello, 0, 0, 0, hello()));
        assert_eq!(r.status, Status::Ok);
        assert_eq!(&r.data[..4], &VERSION.to_le_bytes());
        assert_eq!(r.data[4], crate::proto::speed::HIGH);
        assert_eq!(r.data[5], 1);
        assert_eq!(&r.data[16..18], &[18, 1]);
        let e = s
            .serve(&req(Kind::Hello, 1, 0, 0, vec![9, 0, 0, 0]))
            .unwrap_err();
        assert_eq!(e, FrameError::Version(9));
        let e = s.serve(&req(Kind::Tick, 7, 0, 0, vec![])).unwrap_err();
        assert!(matches!(
            e,
            FrameError::Sequence {
                expected: 2,
                found: 7
            }
        ));
    }

    #[test]
    fn the_model_runs_on_the_guest_clock_and_naks_are_polled_again() {
        let mut s = server(Vec::new(), Vec::new());
        serve(&mut s, req(Kind::Hello, 0, 0, 0, hello()));
        let r = serve(
            &mut s,
            req(Kind::In, 1, 1_000, 0x81, 8u32.to_le_bytes().to_vec()),
        );
        assert_eq!(r.status, Status::Nak);
        assert_eq!(r.wake_ns, 0, "nothing can change: no tick wanted");
        // A vendor request arms the model's 5 ms timer: QEMU is asked for a tick then.
        let r = serve(
            &mut s,
            req(
                Kind::Control,
                2,
                2_000_000,
                0,
                vec![0x40, 1, 0, 0, 0, 0, 0, 0],
            ),
        );
        assert_eq!(r.status, Status::Ok);
        let t = s.host().next_event_time().unwrap();
        assert!(t >= 7_000_000, "{t}");
        assert_eq!(r.wake_ns, 2_000_000 + LockstepOptions::default().repoll_ns);
        let r = serve(&mut s, req(Kind::Tick, 3, 3_000_000, 0, vec![]));
        assert_eq!(r.actions & action::WAKE, action::WAKE);
        assert_eq!(r.wake_ns, t);
        let r = serve(
            &mut s,
            req(Kind::In, 4, 3_000_100, 0x81, 8u32.to_le_bytes().to_vec()),
        );
        assert_eq!(r.status, Status::Nak);
        // The tick at the timer's time fires it; the retry gets the data.
        let r = serve(&mut s, req(Kind::Tick, 5, t, 0, vec![]));
        assert_eq!(r.actions & action::WAKE, action::WAKE);
        let r = serve(
            &mut s,
            req(Kind::In, 6, t + 100, 0x81, 8u32.to_le_bytes().to_vec()),
        );
        assert_eq!((r.status, r.data), (Status::Ok, vec![7]));
        assert!(s
            .host()
            .lines()
            .iter()
            .any(|l| l.contains("\"frame\":\"tick\"")));
    }

    #[test]
    fn a_delayed_transfer_completes_later_on_the_guest_clock() {
        let mut s = server_faulted("ctrl.get_descriptor#3", Fault::Delay(3_000_000));
        serve(&mut s, req(Kind::Hello, 0, 0, 0, hello()));
        let get = vec![0x80, 6, 0, 1, 0, 0, 18, 0];
        // (get_descriptor#1 was the server's own, for the hello.) The next completes within
        // the model's latency: at once.
        let r = serve(&mut s, req(Kind::Control, 1, 1_000_000, 0, get.clone()));
        assert_eq!((r.status, r.complete_ns, r.data.len()), (Status::Ok, 0, 18));
        // The second is delayed 3 ms: answered now, completed on the guest clock then.
        let r = serve(&mut s, req(Kind::Control, 2, 2_000_000, 0, get));
        assert_eq!((r.status, r.data.len()), (Status::Ok, 18));
        assert!(r.complete_ns >= 5_000_000, "{}", r.complete_ns);
        assert_eq!(r.complete_ns, s.host().now());
        assert!(s
            .host()
            .lines()
            .iter()
            .any(|l| l.contains(&format!("\"complete_ns\":{}", r.complete_ns))));
    }

    #[test]
    fn a_short_out_reply_carries_the_count_the_model_took() {
        let mut s = server_faulted("bulk.out#2", Fault::Short(3));
        serve(&mut s, req(Kind::Hello, 0, 0, 0, hello()));
        let r = serve(&mut s, req(Kind::Out, 1, 1_000, 0x01, vec![1; 8]));
        assert_eq!(
            (r.status, r.data.len()),
            (Status::Ok, 0),
            "all taken: no count"
        );
        let r = serve(&mut s, req(Kind::Out, 2, 2_000, 0x01, vec![2; 8]));
        assert_eq!(
            (r.status, r.data),
            (Status::Ok, 3u32.to_le_bytes().to_vec())
        );
    }

    #[test]
    fn a_replug_power_cycles_the_model_and_reenumerates_the_guest() {
        let ext = vec![External::new("replug", ExternalAction::Replug)];
        let mut s = server(ext, vec![(5_000, 0)]);
        serve(&mut s, req(Kind::Hello, 0, 0, 0, hello()));
        let r = serve(&mut s, req(Kind::Tick, 1, 5_000, 0, vec![]));
        assert_eq!(r.actions, action::DETACH | action::ATTACH);
        assert!(s.host().is_attached());
        let lines = s.host().lines().join("\n");
        let gone = lines
            .find("\"to\":\"detached\"")
            .expect("the model lost power");
        let back = lines
            .find("\"to\":\"attached\"")
            .expect("and was plugged back");
        assert!(gone < back, "{lines}");
    }

    #[test]
    fn externals_land_on_the_guest_clock_and_detach_the_device() {
        let ext = vec![External::new("unplug", ExternalAction::Unplug)];
        let mut s = server(ext.clone(), vec![(5_000, 0)]);
        let r = serve(&mut s, req(Kind::Hello, 0, 0, 0, hello()));
        assert_eq!(r.wake_ns, 5_000, "a tick at the external's time");
        let r = serve(&mut s, req(Kind::Tick, 1, 5_000, 0, vec![]));
        assert_eq!(r.actions, action::DETACH);
        let ev = events_of(s.host().lines());
        assert_eq!(
            ev,
            vec![Event::GuestExternal {
                name: "unplug".into(),
                at_ns: 5_000
            }]
        );
        let placed = place_externals(&Source::Seeded(7), true, &ext, (1_000, 2_000));
        assert_eq!(placed.len(), 1);
        assert!((1_000..2_000).contains(&placed[0].0));
        assert_eq!(
            placed,
            place_externals(&Source::Seeded(7), true, &ext, (1_000, 2_000))
        );
        assert_eq!(
            place_externals(&Source::Replay(ev), true, &ext, (0, 1)),
            vec![(5_000, 0)]
        );
        assert!(place_externals(&Source::Default, true, &ext, (0, 10)).is_empty());
    }

    #[test]
    fn trace_fields_read_back() {
        let l = r#"{"seq":1,"t_ns":2,"kind":"fault","actor":"bus","deterministic":true,"data":{"site":"ctrl.dnload#3","fault":"delay(1ms)"}}"#;
        assert_eq!(
            events_of(&[l.to_string()]),
            vec![Event::Fault {
                site: "ctrl.dnload#3".into(),
                fault: Fault::Delay(1_000_000)
            }]
        );
    }
}
