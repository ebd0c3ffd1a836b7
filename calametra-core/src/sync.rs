//! Synchronization for simulated tasks: a mutex whose `lock` is a scheduling point.
//!
//! As in shuttle, acquiring a lock is where another task may run: `lock().await` first offers
//! the scheduler a switch (a traced choice), then takes the lock or waits for its release.
//! Nothing here blocks a thread; it only works inside a simulation.

use std::cell::{Cell, RefCell, RefMut};
use std::collections::VecDeque;
use std::future::poll_fn;
use std::ops::{Deref, DerefMut};
use std::task::{Poll, Waker};

/// A mutex for simulated tasks.
pub struct Mutex<T> {
    value: RefCell<T>,
    locked: Cell<bool>,
    waiters: RefCell<VecDeque<Waker>>,
}

/// Holds a [`Mutex`] until dropped.
pub struct MutexGuard<'a, T> {
    m: &'a Mutex<T>,
    inner: Option<RefMut<'a, T>>,
}

impl<T> Mutex<T> {
    /// A new unlocked mutex.
    pub fn new(value: T) -> Self {
        Mutex {
            value: RefCell::new(value),
            locked: Cell::new(false),
            waiters: RefCell::new(VecDeque::new()),
        }
    }

    /// Acquires the lock: a scheduling point, then the lock (waiting while another task holds it).
    pub async fn lock(&self) -> MutexGuard<'_, T> {
        crate::exec::yield_now().await;
        poll_fn(|cx| {
            if self.locked.get() {
                self.waiters.borrow_mut().push_back(cx.waker().clone());
                Poll::Pending
            } else {
                self.locked.set(true);
                Poll::Ready(())
            }
        })
        .await;
        MutexGuard {
            m: self,
            inner: Some(self.value.borrow_mut()),
        }
    }
}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.inner
            .as_deref()
            .expect("guard holds the value until dropped")
    }
}

impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.inner
            .as_deref_mut()
            .expect("guard holds the value until dropped")
    }
}

impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        self.inner = None;
        self.m.locked.set(false);
        if let Some(w) = self.m.waiters.borrow_mut().pop_front() {
            w.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::choices::Source;
    use crate::{run, RunConfig};
    use std::rc::Rc;

    #[test]
    fn lock_is_a_scheduling_point_and_excludes() {
        let mut orders = std::collections::BTreeSet::new();
        for seed in 0..40 {
            let log = Rc::new(RefCell::new(Vec::new()));
            let l2 = log.clone();
            let r = run(
                RunConfig {
                    source: Source::Seeded(seed),
                    ..RunConfig::default()
                },
                &move |sim| {
                    let m = Rc::new(Mutex::new(0u32));
                    for name in ["a", "b"] {
                        let (m, log) = (m.clone(), l2.clone());
                        sim.spawn(name, async move {
                            let mut g = m.lock().await;
                            let before = *g;
                            crate::exec::yield_now().await; // held across a scheduling point
                            *g = before + 1;
                            log.borrow_mut().push(name);
                        });
                    }
                },
            );
            assert!(r.failure.is_none(), "{:?}", r.failure);
            assert_eq!(log.borrow().len(), 2);
            orders.insert(log.borrow().clone());
        }
        assert_eq!(orders.len(), 2, "both orders happen across seeds");
    }
}
