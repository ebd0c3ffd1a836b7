//! The thread-local context: which world the tasks and devices of this thread reach. It is set
//! only while a simulation is being built or run on this thread (by `sim`), so task-side calls
//! ([`crate::exec`]) and driver interfaces find their world without a handle. Nothing else
//! lives here.

use crate::world::World;
use std::cell::RefCell;
use std::rc::Rc;

thread_local! {
    static CURRENT: RefCell<Option<Rc<RefCell<World>>>> = const { RefCell::new(None) };
}

/// Runs `f` on the current world. Panics (with a clear message) outside a simulation.
///
/// The world is borrowed in place, through the thread's slot (no count of its `Rc` is taken
/// and dropped a call): `f` must not replace the current world, which only `sim` does, outside
/// any `with`.
pub(crate) fn with<R>(f: impl FnOnce(&mut World) -> R) -> R {
    CURRENT.with(|c| {
        let slot = c.borrow();
        let w = slot.as_ref().unwrap_or_else(|| outside());
        let mut b = w.borrow_mut();
        f(&mut b)
    })
}

pub(crate) fn current() -> Rc<RefCell<World>> {
    CURRENT
        .with(|c| c.borrow().clone())
        .unwrap_or_else(|| outside())
}

/// The panic of a call made outside a simulation (out of line: the callers' fast path stays
/// small).
#[cold]
#[inline(never)]
fn outside() -> ! {
    panic!(
        "calametra: this needs a running simulation (call it from a scenario or a task it spawned)"
    )
}

/// Whether this thread is building or running a simulation.
pub fn in_simulation() -> bool {
    CURRENT.with(|c| c.borrow().is_some())
}

pub(crate) fn set_current(w: Option<Rc<RefCell<World>>>) -> Option<Rc<RefCell<World>>> {
    CURRENT.with(|c| std::mem::replace(&mut *c.borrow_mut(), w))
}
