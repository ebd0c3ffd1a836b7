//! [`SimBus`]: a `usb_device::bus::UsbBus` whose peripheral is a set of endpoint buffers the
//! simulator fills and drains, one packet at a time, as a USB device controller's packet memory
//! would be.
//!
//! The firmware sees what it sees on silicon: `poll()` reports a reset, a suspend or resume, or
//! endpoints with a SETUP or OUT packet waiting and IN packets the host has taken; `read` and
//! `write` move single packets; STALL is a per-endpoint flag. The host side ([`BusHost`], used by
//! `device`) puts packets in, takes packets out and raises the events. Every change either side
//! makes bumps a counter, which is how the device knows the firmware's poll loop has settled.
//!
//! Nothing here knows about the simulator's clock, trace or choices, and nothing here blocks:
//! the mutex is only there because `UsbBus` must be `Sync`; one thread uses it at a time.

use std::sync::{Arc, Mutex, MutexGuard};
use usb_device::bus::{PollResult, UsbBus};
use usb_device::endpoint::{EndpointAddress, EndpointType};
use usb_device::{Result as UsbResult, UsbDirection, UsbError};

/// Endpoints per direction (USB allows 16, endpoint 0 included).
pub const ENDPOINTS: usize = 16;

/// One endpoint of one direction.
#[derive(Clone, Debug, Default)]
struct Endpoint {
    /// `Some((type, max packet size))` once allocated.
    alloc: Option<(EndpointType, u16)>,
    /// The packet in the endpoint's buffer: for OUT, received and not yet read; for IN, written
    /// by the firmware and not yet taken by the host.
    packet: Option<Vec<u8>>,
    stalled: bool,
}

/// The peripheral's state, shared by the firmware's [`SimBus`] and the host's [`BusHost`].
#[derive(Debug, Default)]
pub(crate) struct BusState {
    out: [Endpoint; ENDPOINTS],
    inn: [Endpoint; ENDPOINTS],
    /// The packet in endpoint 0's OUT buffer is a SETUP packet.
    setup: bool,
    /// IN endpoints whose packet the host took since the last `poll` (bit n = endpoint n).
    in_complete: u16,
    reset: bool,
    suspend: bool,
    resume: bool,
    enabled: bool,
    address: u8,
    /// Bumped by every change of the state, from either side.
    changes: u64,
}

impl BusState {
    fn ep(&mut self, addr: EndpointAddress) -> &mut Endpoint {
        let i = addr.index() % ENDPOINTS;
        match addr.direction() {
            UsbDirection::Out => &mut self.out[i],
            UsbDirection::In => &mut self.inn[i],
        }
    }
}

fn lock(s: &Mutex<BusState>) -> MutexGuard<'_, BusState> {
    // A panic in firmware code while the lock is held leaves a consistent state (every change
    // is a single assignment), so a poisoned lock is taken over.
    s.lock().unwrap_or_else(|p| p.into_inner())
}

/// The simulated USB peripheral the firmware is built on (`UsbBusAllocator::new(SimBus)`).
pub struct SimBus {
    state: Arc<Mutex<BusState>>,
}

impl SimBus {
    /// A new peripheral and the host's handle to it.
    pub(crate) fn new() -> (SimBus, BusHost) {
        let state = Arc::new(Mutex::new(BusState::default()));
        (
            SimBus {
                state: state.clone(),
            },
            BusHost { state },
        )
    }

    /// The address the firmware set (0 until `SET_ADDRESS` completed).
    pub fn address(&self) -> u8 {
        lock(&self.state).address
    }
}

impl UsbBus for SimBus {
    fn alloc_ep(
        &mut self,
        ep_dir: UsbDirection,
        ep_addr: Option<EndpointAddress>,
        ep_type: EndpointType,
        max_packet_size: u16,
        _interval: u8,
    ) -> UsbResult<EndpointAddress> {
        let mut s = lock(&self.state);
        let table = match ep_dir {
            UsbDirection::Out => &mut s.out,
            UsbDirection::In => &mut s.inn,
        };
        let index = match ep_addr {
            Some(a) if a.index() >= ENDPOINTS || a.direction() != ep_dir => {
                return Err(UsbError::InvalidEndpoint)
            }
            Some(a) if table[a.index()].alloc.is_some() => return Err(UsbError::InvalidEndpoint),
            Some(a) => a.index(),
            // Endpoint 0 is the control pipe's; classes get the next free one from 1.
            None => (1..ENDPOINTS)
                .find(|&i| table[i].alloc.is_none())
                .ok_or(UsbError::EndpointOverflow)?,
        };
        table[index].alloc = Some((ep_type, max_packet_size));
        s.changes += 1;
        Ok(EndpointAddress::from_parts(index, ep_dir))
    }

    fn enable(&mut self) {
        let mut s = lock(&self.state);
        s.enabled = true;
        s.changes += 1;
    }

    fn reset(&self) {
        let mut guard = lock(&self.state);
        let s = &mut *guard;
        for ep in s.out.iter_mut().chain(s.inn.iter_mut()) {
            ep.packet = None;
            ep.stalled = false;
        }
        s.setup = false;
        s.in_complete = 0;
        s.address = 0;
        s.changes += 1;
    }

    fn set_device_address(&self, addr: u8) {
        let mut s = lock(&self.state);
        s.address = addr;
        s.changes += 1;
    }

    fn write(&self, ep_addr: EndpointAddress, buf: &[u8]) -> UsbResult<usize> {
        let mut s = lock(&self.state);
        if ep_addr.direction() != UsbDirection::In || ep_addr.index() >= ENDPOINTS {
            return Err(UsbError::InvalidEndpoint);
        }
        let ep = s.ep(ep_addr);
        let Some((_, mps)) = ep.alloc else {
            return Err(UsbError::InvalidEndpoint);
        };
        if ep.packet.is_some() {
            return Err(UsbError::WouldBlock);
        }
        if buf.len() > mps as usize {
            return Err(UsbError::BufferOverflow);
        }
        ep.packet = Some(buf.to_vec());
        s.changes += 1;
        Ok(buf.len())
    }

    fn read(&self, ep_addr: EndpointAddress, buf: &mut [u8]) -> UsbResult<usize> {
        let mut s = lock(&self.state);
        if ep_addr.direction() != UsbDirection::Out || ep_addr.index() >= ENDPOINTS {
            return Err(UsbError::InvalidEndpoint);
        }
        let ep = s.ep(ep_addr);
        if ep.alloc.is_none() {
            return Err(UsbError::InvalidEndpoint);
        }
        let Some(p) = ep.packet.as_ref() else {
            return Err(UsbError::WouldBlock);
        };
        if p.len() > buf.len() {
            return Err(UsbError::BufferOverflow);
        }
        let n = p.len();
        buf[..n].copy_from_slice(p);
        ep.packet = None;
        if ep_addr.index() == 0 {
            s.setup = false;
        }
        s.changes += 1;
        Ok(n)
    }

    fn set_stalled(&self, ep_addr: EndpointAddress, stalled: bool) {
        let mut s = lock(&self.state);
        if ep_addr.index() >= ENDPOINTS {
            return;
        }
        let ep = s.ep(ep_addr);
        if ep.stalled != stalled {
            ep.stalled = stalled;
            s.changes += 1;
        }
    }

    fn is_stalled(&self, ep_addr: EndpointAddress) -> bool {
        let mut s = lock(&self.state);
        ep_addr.index() < ENDPOINTS && s.ep(ep_addr).stalled
    }

    fn suspend(&self) {}

    fn resume(&self) {}

    fn poll(&self) -> PollResult {
        let mut s = lock(&self.state);
        if s.reset {
            s.reset = false;
            s.suspend = false;
            s.resume = false;
            s.changes += 1;
            return PollResult::Reset;
        }
        if s.suspend {
            s.suspend = false;
            s.changes += 1;
            return PollResult::Suspend;
        }
        if s.resume {
            s.resume = false;
            s.changes += 1;
            return PollResult::Resume;
        }
        let mut ep_out = 0u16;
        let mut ep_setup = 0u16;
        for (i, ep) in s.out.iter().enumerate() {
            if ep.packet.is_some() {
                if i == 0 && s.setup {
                    ep_setup |= 1;
                } else {
                    ep_out |= 1 << i;
                }
            }
        }
        let ep_in_complete = s.in_complete;
        if ep_out | ep_setup | ep_in_complete == 0 {
            return PollResult::None;
        }
        if ep_in_complete != 0 {
            // Reported once per packet taken.
            s.in_complete = 0;
            s.changes += 1;
        }
        PollResult::Data {
            ep_out,
            ep_in_complete,
            ep_setup,
        }
    }
}

/// The host's side of a [`SimBus`]: it puts SETUP and OUT packets into the endpoint buffers,
/// takes the IN packets the firmware wrote, and raises bus events.
pub(crate) struct BusHost {
    state: Arc<Mutex<BusState>>,
}

/// Why the host could not move a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Handshake {
    /// The endpoint is halted.
    Stall,
    /// The endpoint is not ready (an OUT buffer still full, an IN buffer empty).
    Nak,
}

impl BusHost {
    /// Changes made so far, by either side.
    pub(crate) fn changes(&self) -> u64 {
        lock(&self.state).changes
    }

    /// The max packet size of an allocated endpoint.
    pub(crate) fn max_packet(&self, ep: u8) -> Option<u16> {
        let mut s = lock(&self.state);
        let a = EndpointAddress::from(ep);
        if a.index() >= ENDPOINTS {
            return None;
        }
        s.ep(a).alloc.map(|(_, mps)| mps)
    }

    /// A SETUP packet arrives on endpoint 0. Like a device controller (USB 2.0 8.5.3.4), it
    /// clears a halt of the default pipe and replaces whatever the OUT buffer held.
    pub(crate) fn setup(&self, bytes: &[u8; 8]) {
        let mut s = lock(&self.state);
        s.out[0].stalled = false;
        s.inn[0].stalled = false;
        // A SETUP also ends an unfinished IN data stage: the stale packet is dropped.
        s.inn[0].packet = None;
        s.out[0].packet = Some(bytes.to_vec());
        s.setup = true;
        s.changes += 1;
    }

    /// An OUT packet for endpoint `ep` (its number); refused while halted or while the buffer
    /// still holds the previous packet.
    pub(crate) fn out(&self, ep: usize, data: &[u8]) -> Result<(), Handshake> {
        let mut s = lock(&self.state);
        let e = &mut s.out[ep % ENDPOINTS];
        if e.stalled {
            return Err(Handshake::Stall);
        }
        if e.packet.is_some() || e.alloc.is_none() {
            return Err(Handshake::Nak);
        }
        e.packet = Some(data.to_vec());
        if ep == 0 {
            s.setup = false;
        }
        s.changes += 1;
        Ok(())
    }

    /// An IN token on endpoint `ep` (its number): the packet the firmware wrote, which is then
    /// reported to it as IN-complete at its next poll.
    pub(crate) fn take_in(&self, ep: usize) -> Result<Vec<u8>, Handshake> {
        let mut s = lock(&self.state);
        let i = ep % ENDPOINTS;
        if s.inn[i].stalled {
            return Err(Handshake::Stall);
        }
        let Some(p) = s.inn[i].packet.take() else {
            return Err(Handshake::Nak);
        };
        s.in_complete |= 1 << i;
        s.changes += 1;
        Ok(p)
    }

    /// Whether the host has taken an IN packet the firmware has not yet been told about.
    pub(crate) fn in_complete_pending(&self) -> bool {
        lock(&self.state).in_complete != 0
    }

    /// Bus reset signalling.
    pub(crate) fn reset(&self) {
        let mut s = lock(&self.state);
        s.reset = true;
        s.changes += 1;
    }

    /// The bus went idle (suspend), or a self-powered device lost VBUS.
    pub(crate) fn suspend(&self) {
        let mut s = lock(&self.state);
        s.suspend = true;
        s.resume = false;
        s.changes += 1;
    }

    /// Resume signalling.
    pub(crate) fn resume(&self) {
        let mut s = lock(&self.state);
        s.resume = true;
        s.suspend = false;
        s.changes += 1;
    }

    /// The address the firmware set.
    pub(crate) fn address(&self) -> u8 {
        lock(&self.state).address
    }
}
