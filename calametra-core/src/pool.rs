//! The buffer pools: what a finished run leaves on its thread for the thread's next run, so a
//! run does not allocate again the buffers, tables and names the last one had. Every pool of the
//! core is one [`Pool`] here, and no other module keeps a thread-local of its own for that.
//!
//! A pool holds buffers, never state: what is taken from one is reset (or cleared) by its owner
//! before a run sees it, so a run's hash does not depend on what ran before it on the thread.
//! Each owner's reset lives beside its type ([`crate::trace::Trace::new`], the decider's
//! `DeciderState::reset`, the world's `Core::reset`, the task table's `Tasks::new`, the sim's
//! `Sim::recycle`); this module only keeps the values.
//!
//! This module imports nothing from the crate (the values are kept by type, as `dyn Any`), so
//! any file can use it without a circle. A slot's box is allocated once per thread, on the
//! first [`put`]; after that, taking and putting move the value in and out of it.

use std::any::Any;
use std::cell::RefCell;

/// The pools, one a kind of value a run leaves behind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pool {
    /// The trace's encoder (its encoding buffer and string table): `trace::Trace`.
    TraceEncoder,
    /// The decider's state, reset (stream slots, priority table, kept names): `choices`.
    Decider,
    /// The whole world, emptied (no device, no task), reset in place when taken: `world::spare`.
    World,
    /// The task table's slots, names and reusable wakers: `tasks`.
    Tasks,
    /// The sim's lists of externals and invariants and its invariant names: `sim`.
    Sim,
}

const POOLS: usize = 5;

thread_local! {
    /// One slot a pool, holding an `Option<T>` of the pool's type once something was put.
    static SLOTS: RefCell<[Option<Box<dyn Any>>; POOLS]> = const { RefCell::new([const { None }; POOLS]) };
}

/// Takes the value `pool` holds on this thread, leaving it empty; `None` when it holds none
/// (the thread's first run, or a value of another type, or while the thread is ending).
pub(crate) fn take<T: 'static>(pool: Pool) -> Option<T> {
    SLOTS
        .try_with(|slots| {
            let mut slots = slots.try_borrow_mut().ok()?;
            slots[pool as usize]
                .as_mut()?
                .downcast_mut::<Option<T>>()?
                .take()
        })
        .ok()
        .flatten()
}

/// Puts `value` into `pool` for the thread's next run, replacing what it held. Whatever is
/// replaced (or `value`, when the thread is ending) is dropped after the pools are released, so
/// a drop that gives something back to a pool (a world's task table) finds them free.
pub(crate) fn put<T: 'static>(pool: Pool, value: T) {
    let mut value = Some(value);
    let mut replaced: Option<Box<dyn Any>> = None;
    let _ = SLOTS.try_with(|slots| {
        let Ok(mut slots) = slots.try_borrow_mut() else {
            return;
        };
        let slot = &mut slots[pool as usize];
        match slot.as_mut().and_then(|b| b.downcast_mut::<Option<T>>()) {
            Some(held) => std::mem::swap(held, &mut value),
            None => replaced = slot.replace(Box::new(value.take())),
        }
    });
    drop(value);
    drop(replaced);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn a_value_put_is_taken_once_and_pools_are_apart() {
        assert_eq!(take::<Vec<u8>>(Pool::Sim), None);
        put(Pool::Sim, vec![1u8, 2]);
        put(Pool::Tasks, String::from("t"));
        assert_eq!(take::<Vec<u8>>(Pool::Sim), Some(vec![1, 2]));
        assert_eq!(take::<Vec<u8>>(Pool::Sim), None);
        // Another type in a slot is not taken as this one.
        assert_eq!(take::<Vec<u8>>(Pool::Tasks), None);
        assert_eq!(take::<String>(Pool::Tasks).as_deref(), Some("t"));
    }

    #[test]
    fn the_replaced_value_is_dropped_and_the_box_kept() {
        let first = Rc::new(1);
        put(Pool::Decider, first.clone());
        assert_eq!(Rc::strong_count(&first), 2);
        put(Pool::Decider, Rc::new(2));
        assert_eq!(
            Rc::strong_count(&first),
            1,
            "the value put first was dropped"
        );
        assert_eq!(take::<Rc<i32>>(Pool::Decider).as_deref(), Some(&2));
    }

    /// A value whose drop gives something back to another pool (as a world's task table does).
    struct GivesBack;
    impl Drop for GivesBack {
        fn drop(&mut self) {
            put(Pool::Tasks, 7u32);
        }
    }

    #[test]
    fn a_drop_that_puts_finds_the_pools_free() {
        put(Pool::World, GivesBack);
        put(Pool::World, GivesBack);
        assert_eq!(take::<u32>(Pool::Tasks), Some(7));
        drop(take::<GivesBack>(Pool::World));
        assert_eq!(take::<u32>(Pool::Tasks), Some(7));
    }
}
