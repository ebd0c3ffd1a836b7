//! What answers QEMU's USB device, sans I/O: the [`Transport`] trait, which the usbredir
//! [`crate::bridge::Bridge`] and the lockstep transport ([`crate::lockstep::LockstepTransport`])
//! implement and [`crate::runloop`]'s loop drives (see its module doc).
//!
//! Only the trait lives here: no implementation, no loop, no socket, no clock. It imports
//! nothing of this crate, so both transports and the loop can use it without importing each
//! other.

use calametra_core::host::DeviceHost;

/// What answers QEMU's USB device, sans I/O (see [`crate::runloop`]'s module doc).
pub trait Transport {
    /// Bytes QEMU sent. `Err` says why the stream is lost (the loop stops reading it; the run
    /// ends when QEMU does).
    fn feed(&mut self, bytes: &[u8]) -> Result<(), String>;
    /// The bytes to send QEMU now.
    fn take_output(&mut self) -> Vec<u8>;
    /// Why the run stops on the frame just served (an invariant broke), if it does: QEMU waits
    /// on that frame, and the loop stops it there.
    fn stop(&self) -> Option<String> {
        None
    }
    /// A counter that moves whenever USB traffic crossed (the watchdog's evidence).
    fn activity(&self) -> u64;
    /// The guest printed `line`.
    fn console_line(&mut self, _line: &str) {}
    /// QEMU's socket was quiet for `LoopOptions::idle_after` ([`crate::runloop`]); whether that did anything
    /// (the quiet time is then measured again).
    fn idle(&mut self) -> bool {
        false
    }
    /// QEMU exited by itself with `code`.
    fn exited(&mut self, _code: Option<i32>) {}
    /// The model's host (the loop records the watchdog's decision in its trace).
    fn host_mut(&mut self) -> &mut DeviceHost;
    /// What crossed, for an `emulator_blocked` reason (`usbredir Stats {..}`, `N frames`).
    fn describe(&self) -> String;
}
