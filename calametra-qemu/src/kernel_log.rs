//! The guest kernel's log in a run: the `dmesg` block the guest's `/init` prints after the
//! probe, and the kernel faults read from the console (an oops, a `BUG:` line, a task hung in a
//! driver, a panic), which fail a run as a kind of their own (`kernel_fault`).
//!
//! What lives here is reading lines, nothing else: the run loop tells the watchdog when a fault
//! line arrives ([`crate::runloop`]), the verdict turns the first fault into the run's outcome
//! and failure (`guest_run::verdict`), and the lockstep run records the kernel log as a
//! `dmesg` trace record, deterministic exactly when the console is (a lockstep run that ended
//! by itself or on a frame). The guest prints kernel lines with their timestamps
//! (`CONFIG_PRINTK_TIME`), `[   12.345678] ...`; only such lines are read as the kernel's, so a
//! program printing `BUG:` is no kernel fault.

/// Console marker before the kernel log of the run (printed by `/init` after the probe).
pub const DMESG_BEGIN: &str = "CALAMETRA-DMESG-BEGIN";
/// Console marker after it.
pub const DMESG_END: &str = "CALAMETRA-DMESG-END";

/// Kernel log lines a fault's failure text shows (the last ones the guest printed up to and
/// including the fault's report).
pub const FAULT_LINES: usize = 12;

/// What went wrong in the guest's kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelFaultKind {
    /// `Oops: ...` or `general protection fault`: the kernel killed the task that faulted.
    Oops,
    /// A `BUG:` line (`BUG: kernel NULL pointer dereference`, `BUG: soft lockup`, `kernel BUG
    /// at ...`).
    Bug,
    /// `INFO: task <name>:<pid> blocked for more than N seconds`: a task hung inside the
    /// kernel (the guest reports after 40 s of its own time, before the watchdog's 60 s).
    HungTask,
    /// `Kernel panic - not syncing`.
    Panic,
}

impl KernelFaultKind {
    /// `oops`, `bug`, `hung_task` or `panic`.
    pub fn name(self) -> &'static str {
        match self {
            KernelFaultKind::Oops => "oops",
            KernelFaultKind::Bug => "bug",
            KernelFaultKind::HungTask => "hung_task",
            KernelFaultKind::Panic => "panic",
        }
    }

    /// What a person reads on the failure screen.
    pub fn describe(self) -> &'static str {
        match self {
            KernelFaultKind::Oops => "a kernel oops",
            KernelFaultKind::Bug => "a kernel BUG",
            KernelFaultKind::HungTask => "a task hung inside the kernel (a driver did not return)",
            KernelFaultKind::Panic => "a kernel panic",
        }
    }
}

/// The first kernel fault of a run, with the kernel lines before it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelFault {
    /// Which kind.
    pub kind: KernelFaultKind,
    /// The line that says so (without its timestamp).
    pub line: String,
    /// The last [`FAULT_LINES`] kernel lines up to the fault's report (timestamps kept).
    pub tail: Vec<String>,
}

impl KernelFault {
    /// The failure's text: the kind, its line and the kernel's last lines.
    pub fn message(&self) -> String {
        let mut s = format!(
            "{} (kernel_fault {}): {}\nthe guest kernel's last lines:",
            self.kind.describe(),
            self.kind.name(),
            self.line
        );
        for l in &self.tail {
            s.push_str("\n  ");
            s.push_str(l);
        }
        s
    }
}

/// The text of a kernel console line without its `[ seconds.micros]` stamp, or `None` for a
/// line that has no such stamp (not the kernel's).
pub fn kernel_text(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix('[')?;
    let (stamp, text) = rest.split_once(']')?;
    let stamp = stamp.trim();
    let (secs, micros) = stamp.split_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(secs) && digits(micros)).then(|| text.strip_prefix(' ').unwrap_or(text))
}

/// The fault a kernel line reports, if any.
pub fn classify(line: &str) -> Option<KernelFaultKind> {
    let t = kernel_text(line)?;
    if t.starts_with("Kernel panic - not syncing") {
        Some(KernelFaultKind::Panic)
    } else if t.starts_with("INFO: task ") && t.contains(" blocked for more than ") {
        Some(KernelFaultKind::HungTask)
    } else if t.starts_with("Oops: ") || t.starts_with("general protection fault") {
        Some(KernelFaultKind::Oops)
    } else if t.starts_with("BUG: ") || t.contains(" BUG: ") || t.starts_with("kernel BUG at ") {
        Some(KernelFaultKind::Bug)
    } else {
        None
    }
}

/// The first kernel fault on `console`, with the kernel lines before it. A `BUG:` line comes
/// before its `Oops:` line, so an oops caused by a NULL dereference is reported as the `BUG:`
/// that names it.
pub fn first_fault(console: &[String]) -> Option<KernelFault> {
    let (i, kind) = console
        .iter()
        .enumerate()
        .find_map(|(i, l)| classify(l).map(|k| (i, k)))?;
    let line = kernel_text(&console[i]).unwrap_or(&console[i]).to_string();
    // The report goes on for a few lines (the oops' registers, the hung task's stack): show
    // those too, up to FAULT_LINES kernel lines in all, the fault's among them.
    let kernel: Vec<&String> = console
        .iter()
        .enumerate()
        .filter(|(_, l)| kernel_text(l).is_some())
        .filter(|(j, _)| *j <= i + FAULT_LINES / 2)
        .map(|(_, l)| l)
        .collect();
    let from = kernel.len().saturating_sub(FAULT_LINES);
    Some(KernelFault {
        kind,
        line,
        tail: kernel[from..].iter().map(|l| l.to_string()).collect(),
    })
}

/// The kernel log of the run: the lines between [`DMESG_BEGIN`] and [`DMESG_END`] (`None`
/// when the guest did not get to print it: it hung, or the run stopped on a frame).
pub fn dmesg(console: &[String]) -> Option<Vec<String>> {
    let i = console.iter().position(|l| l.starts_with(DMESG_BEGIN))?;
    let rest = &console[i + 1..];
    let n = rest.iter().position(|l| l.starts_with(DMESG_END))?;
    Some(rest[..n].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn only_stamped_lines_are_the_kernel_s() {
        assert_eq!(
            kernel_text("[   12.345678] usb 1-1: new high-speed USB device"),
            Some("usb 1-1: new high-speed USB device")
        );
        assert_eq!(kernel_text("[ 0.1] x"), Some("x"));
        assert_eq!(kernel_text("BUG: in my program"), None);
        assert_eq!(kernel_text("[abc] BUG: no"), None);
        assert_eq!(kernel_text("[12] no micros"), None);
        assert_eq!(classify("BUG: kernel NULL pointer dereference"), None);
    }

    #[test]
    fn each_kind_is_named_by_its_line() {
        let k = |l: &str| classify(l).map(KernelFaultKind::name);
        assert_eq!(
            k("[    3.000001] BUG: kernel NULL pointer dereference, address: 0000000000000010"),
            Some("bug")
        );
        assert_eq!(
            k("[    3.000001] watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [sh:80]"),
            Some("bug")
        );
        assert_eq!(
            k("[    3.000001] kernel BUG at drivers/usb/core/urb.c:1!"),
            Some("bug")
        );
        assert_eq!(
            k("[    3.000002] Oops: 0000 [#1] PREEMPT SMP NOPTI"),
            Some("oops")
        );
        assert_eq!(
            k("[    3.000002] general protection fault, probably for non-canonical address"),
            Some("oops")
        );
        assert_eq!(
            k("[   63.100000] INFO: task cat:91 blocked for more than 40 seconds."),
            Some("hung_task")
        );
        assert_eq!(
            k("[    9.9] Kernel panic - not syncing: Fatal exception"),
            Some("panic")
        );
        assert_eq!(
            k("[    1.0] usb 1-1: USB disconnect, device number 2"),
            None
        );
        assert_eq!(
            k("[    1.0] sd 0:0:0:0: [sda] Attached SCSI removable disk"),
            None
        );
    }

    #[test]
    fn the_first_fault_keeps_the_lines_before_and_after_it() {
        let console = lines(&[
            "CALAMETRA-PROBE-BEGIN name=script",
            "[    1.000000] usb 1-1: new high-speed USB device number 2 using xhci_hcd",
            "reading",
            "[    2.000000] BUG: kernel NULL pointer dereference, address: 0000000000000010",
            "[    2.000001] #PF: supervisor read access in kernel mode",
            "[    2.000002] Oops: 0000 [#1] PREEMPT SMP NOPTI",
        ]);
        let f = first_fault(&console).expect("a fault");
        assert_eq!(f.kind, KernelFaultKind::Bug);
        assert_eq!(
            f.line,
            "BUG: kernel NULL pointer dereference, address: 0000000000000010"
        );
        assert_eq!(f.tail.len(), 4);
        assert!(f.tail[0].contains("new high-speed"));
        let m = f.message();
        assert!(
            m.starts_with("a kernel BUG (kernel_fault bug): BUG: kernel NULL"),
            "{m}"
        );
        assert!(m.contains("\n  [    2.000002] Oops: 0000"), "{m}");
        assert!(first_fault(&console[..3]).is_none());
    }

    #[test]
    fn the_dmesg_block_is_read_between_its_markers() {
        let console = lines(&[
            "CALAMETRA-PROBE-END rc=0",
            DMESG_BEGIN,
            "[    1.0] usb 1-1: USB disconnect, device number 2",
            DMESG_END,
        ]);
        assert_eq!(
            dmesg(&console),
            Some(lines(&[
                "[    1.0] usb 1-1: USB disconnect, device number 2"
            ]))
        );
        assert_eq!(dmesg(&console[..3]), None);
        assert_eq!(dmesg(&console[..1]), None);
    }
}
