//! Workload B's system under test: a status device with a cached status register and six
//! operations, shared by every tool so that only the tool differs. The planted bug: `Disconnect`
//! forgets to clear the cache, so `GetStatus . Disconnect . GetStatus` reads a stale status while
//! disconnected and the driver goes on believing the monitor is there.

/// The six operations, in the order the tools draw them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Read the status register (the driver believes what it reads).
    GetStatus,
    /// Flip a frame.
    Flip,
    /// Unplug the monitor (the driver stops believing it is connected).
    Disconnect,
    /// Plug it back.
    Reconnect,
    /// Set a mode.
    ModeSet,
    /// Poll for interrupts.
    Poll,
}

impl Op {
    /// Every operation, in draw order.
    pub const ALL: [Op; 6] = [
        Op::GetStatus,
        Op::Flip,
        Op::Disconnect,
        Op::Reconnect,
        Op::ModeSet,
        Op::Poll,
    ];

    /// The labels Calametra's client draws show in a minimal run.
    pub const LABELS: [&'static str; 6] = [
        "get_status",
        "flip",
        "disconnect",
        "reconnect",
        "modeset",
        "poll",
    ];
}

/// The device (ground truth) and what the driver believes, side by side.
#[derive(Clone, Debug)]
pub struct Machine {
    /// Ground truth: whether the monitor is connected.
    pub connected: bool,
    status: u8,
    cache: Option<u8>,
    frames: u32,
    mode: u8,
    polls: u32,
    /// The driver's belief: the monitor is connected.
    pub believes_connected: bool,
    planted_bug: bool,
}

impl Machine {
    /// A connected device; `planted_bug` makes `Disconnect` forget the cache.
    pub fn new(planted_bug: bool) -> Machine {
        Machine {
            connected: true,
            status: 0x5a,
            cache: None,
            frames: 0,
            mode: 0,
            polls: 0,
            believes_connected: false,
            planted_bug,
        }
    }

    /// Applies one operation, device side and driver side.
    pub fn apply(&mut self, op: Op) {
        match op {
            Op::GetStatus => {
                let read = if self.connected {
                    self.cache = Some(self.status);
                    Some(self.status)
                } else {
                    self.cache
                };
                self.believes_connected = read.is_some();
            }
            Op::Flip => self.frames += 1,
            Op::Disconnect => {
                self.believes_connected = false;
                self.connected = false;
                if !self.planted_bug {
                    self.cache = None;
                }
            }
            Op::Reconnect => self.connected = true,
            Op::ModeSet => self.mode = self.mode.wrapping_add(1),
            Op::Poll => self.polls += 1,
        }
    }

    /// The invariant every tool checks after every operation: the driver never believes the
    /// monitor is connected while the device says it is not.
    pub fn check(&self) -> Result<(), String> {
        if self.believes_connected && !self.connected {
            Err("driver believes the monitor is connected; the device says disconnected".into())
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bug_needs_three_operations() {
        let run = |ops: &[Op], bug| {
            let mut m = Machine::new(bug);
            ops.iter().try_for_each(|&o| {
                m.apply(o);
                m.check()
            })
        };
        let seq = [Op::GetStatus, Op::Disconnect, Op::GetStatus];
        assert!(run(&seq, true).is_err());
        assert!(run(&seq, false).is_ok());
        assert!(run(&[Op::GetStatus, Op::Disconnect], true).is_ok());
        assert!(run(&[Op::Disconnect, Op::GetStatus], true).is_ok());
        assert!(run(
            &[Op::GetStatus, Op::Disconnect, Op::Reconnect, Op::GetStatus],
            true
        )
        .is_ok());
    }
}
