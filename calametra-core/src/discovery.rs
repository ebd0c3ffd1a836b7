//! The simulated host's side of discovery: [`SimHost`] implements
//! [`calametra_usb::UsbHost`] over the world's devices (list, open by id, watch hotplug), so a
//! driver's own discovery and reopen-after-replug code runs in a scenario. A device's id is
//! its place on the bus and its plug generation (a replugged device is a new id, as on a
//! real host); what a listing shows of it comes from its model's descriptors
//! ([`crate::device::Device::descriptors`]); both are the world's (`world/hotplug.rs`). Hotplug
//! events are kept by the world (`World::hotplug`) only once a watch has started, so a run
//! without one does no work and writes no trace record for them. Nothing here reads the wall
//! clock.

use crate::context::current;
use crate::interface::Interface;
use crate::world::{device_id, device_info, World};
use calametra_usb::{DeviceId, DeviceInfo, HotplugEvent, HotplugWatch, TransferError, UsbHost};
use std::cell::RefCell;
use std::future::{poll_fn, Future};
use std::rc::Rc;
use std::task::Poll;

/// The simulated host: the world's bus seen as `nusb::list_devices`, `DeviceInfo::open` and
/// `nusb::watch_devices` see a real one. Take it from a task or while building a scenario
/// ([`SimHost::current`]).
#[derive(Clone)]
pub struct SimHost {
    world: Rc<RefCell<World>>,
}

impl SimHost {
    /// The host of the run on this thread.
    pub fn current() -> SimHost {
        SimHost { world: current() }
    }
}

/// A hotplug watch on the simulated bus: the events after it began, in order.
pub struct SimWatch {
    world: Rc<RefCell<World>>,
    next: usize,
}

impl HotplugWatch for SimWatch {
    fn next_event(&mut self) -> impl Future<Output = HotplugEvent> {
        poll_fn(|cx| {
            let mut w = self.world.borrow_mut();
            if let Some(e) = w.hotplug.events.get(self.next) {
                let e = e.clone();
                self.next += 1;
                return Poll::Ready(e);
            }
            let wake = w.tasks.wakeup(cx.waker());
            w.hotplug.waiting.push(wake);
            Poll::Pending
        })
    }
}

impl UsbHost for SimHost {
    type Interface = Interface;
    type Watch = SimWatch;

    fn list_devices(&self) -> impl Future<Output = Result<Vec<DeviceInfo>, TransferError>> {
        let w = self.world.borrow();
        let list = (0..w.devices.len())
            .filter(|&i| w.devices[i].attached)
            .map(|i| device_info(&w, i))
            .collect();
        std::future::ready(Ok(list))
    }

    fn open(
        &self,
        id: DeviceId,
        interface: u8,
    ) -> impl Future<Output = Result<Interface, TransferError>> {
        let w = self.world.borrow();
        let index = (id.0 >> 32) as usize;
        let r = match w.devices.get(index) {
            Some(s) if s.attached && device_id(index, s.generation) == id && interface == 0 => {
                Ok(Interface::new(self.world.clone(), index, s.generation))
            }
            // The simulated interface is interface 0.
            Some(_) if interface != 0 => Err(TransferError::Fault),
            _ => Err(TransferError::Disconnected),
        };
        std::future::ready(r)
    }

    fn watch_devices(&self) -> Result<SimWatch, TransferError> {
        let mut w = self.world.borrow_mut();
        w.hotplug.watching = true;
        Ok(SimWatch {
            world: self.world.clone(),
            next: w.hotplug.events.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Loopback;
    use crate::{run, RunConfig};

    /// The host lists the attached devices, opens one by id, refuses an id whose device was
    /// unplugged (the replugged device has a new id), and a watch sees the unplug and the
    /// replug in order.
    #[test]
    fn the_simulated_host_lists_opens_and_watches_a_replug() {
        let seen = Rc::new(RefCell::new(Vec::new()));
        let seen2 = seen.clone();
        let r = run(RunConfig::default(), &move |sim| {
            let dev = sim.attach(Loopback::default());
            let seen = seen2.clone();
            sim.spawn("driver", async move {
                let host = SimHost::current();
                let mut watch = host.watch_devices().expect("a watch");
                let list = host.list_devices().await.expect("a list");
                let id = list[0].id;
                seen.borrow_mut().push(format!("{} listed", list.len()));
                seen.borrow_mut()
                    .push(format!("open: {:?}", host.open(id, 0).await.map(|_| ())));
                {
                    let world = crate::context::current();
                    let mut w = world.borrow_mut();
                    w.disconnect(dev);
                    w.reconnect(dev);
                }
                let gone = watch.next_event().await;
                let back = watch.next_event().await;
                seen.borrow_mut().push(format!(
                    "{:?} {}",
                    gone == HotplugEvent::Disconnected(id),
                    matches!(&back, HotplugEvent::Connected(i) if i.id != id)
                ));
                seen.borrow_mut()
                    .push(format!("old id: {:?}", host.open(id, 0).await.map(|_| ())));
                let new = host.list_devices().await.expect("a list")[0].id;
                seen.borrow_mut()
                    .push(format!("new id: {:?}", host.open(new, 0).await.map(|_| ())));
            });
        });
        assert!(r.failure.is_none(), "{:?}", r.failure);
        assert_eq!(
            *seen.borrow(),
            [
                "1 listed",
                "open: Ok(())",
                "true true",
                "old id: Err(Disconnected)",
                "new id: Ok(())",
            ]
        );
    }
}
