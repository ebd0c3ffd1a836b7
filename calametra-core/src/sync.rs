//! Synchronization for simulated tasks: a mutex whose `lock` is a scheduling point.
//!
//! As in shuttle, acquiring a lock is where another task may run: `lock().await` first offers
//! the scheduler a switch (a traced choice), then takes the lock or waits for its release.
//! Nothing here blocks a thread; it only works inside a simulation.

use std::cell::{Cell, RefCell, RefMut};
use std::collections::VecDeque;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// A mutex for simulated tasks.
pub struct Mutex<T> {
    value: RefCell<T>,
    state: LockState,
}

/// Whether a [`Mutex`] is held and who waits for it (apart from the value: one copy of the
/// lock and unlock code serves every `T`).
struct LockState {
    locked: Cell<bool>,
    /// How many wakers `waiters` holds, so an unlock with none waiting borrows no queue.
    waiting: Cell<usize>,
    waiters: RefCell<VecDeque<Waker>>,
}

/// Holds a [`Mutex`] until dropped.
pub struct MutexGuard<'a, T> {
    // Fields drop in order: the value's borrow ends before the lock is released.
    inner: RefMut<'a, T>,
    _unlock: Unlock<'a>,
}

/// Releases a held lock when dropped, waking the first waiter.
struct Unlock<'a>(&'a LockState);

impl<T> Mutex<T> {
    /// A new unlocked mutex.
    pub fn new(value: T) -> Self {
        Mutex {
            value: RefCell::new(value),
            state: LockState {
                locked: Cell::new(false),
                waiting: Cell::new(0),
                waiters: RefCell::new(VecDeque::new()),
            },
        }
    }

    /// Acquires the lock: a scheduling point, then the lock (waiting while another task holds it).
    pub fn lock(&self) -> impl Future<Output = MutexGuard<'_, T>> + '_ {
        Lock {
            m: self,
            yielded: false,
        }
    }
}

/// [`Mutex::lock`]'s future: first a yield (pending once, its task woken at once, as
/// [`crate::exec::yield_now`]), then the lock, in one plain struct (no state machine around a
/// yield and a `poll_fn`).
struct Lock<'a, T> {
    m: &'a Mutex<T>,
    yielded: bool,
}

impl<'a, T> Future for Lock<'a, T> {
    type Output = MutexGuard<'a, T>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<MutexGuard<'a, T>> {
        if !self.yielded {
            self.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let m = self.m;
        m.state.try_acquire(cx.waker()).map(|()| MutexGuard {
            inner: m.value.borrow_mut(),
            _unlock: Unlock(&m.state),
        })
    }
}

impl LockState {
    /// Takes the lock if it is free, else queues `waker` for its release.
    fn try_acquire(&self, waker: &Waker) -> Poll<()> {
        if self.locked.get() {
            self.waiters.borrow_mut().push_back(waker.clone());
            self.waiting.set(self.waiting.get() + 1);
            Poll::Pending
        } else {
            self.locked.set(true);
            Poll::Ready(())
        }
    }
}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.inner
    }
}

impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.inner
    }
}

impl Drop for Unlock<'_> {
    fn drop(&mut self) {
        let s = self.0;
        s.locked.set(false);
        if s.waiting.get() != 0 {
            s.waiting.set(s.waiting.get() - 1);
            let w = s.waiters.borrow_mut().pop_front();
            if let Some(w) = w {
                w.wake();
            }
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

    #[test]
    fn waiters_take_the_lock_in_the_order_they_queued() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let l2 = log.clone();
        let r = run(RunConfig::default(), &move |sim| {
            let m = Rc::new(Mutex::new(0u32));
            for name in ["a", "b", "c"] {
                let (m, log) = (m.clone(), l2.clone());
                sim.spawn(name, async move {
                    let mut g = m.lock().await;
                    for _ in 0..3 {
                        crate::exec::yield_now().await;
                    }
                    *g += 1;
                    log.borrow_mut().push((name, *g));
                });
            }
            let (m, log) = (m.clone(), l2.clone());
            sim.spawn("late", async move {
                for _ in 0..20 {
                    crate::exec::yield_now().await;
                }
                let g = m.lock().await;
                log.borrow_mut().push(("late", *g));
            });
        });
        assert!(r.failure.is_none(), "{:?}", r.failure);
        assert_eq!(
            *log.borrow(),
            [("a", 1), ("b", 2), ("c", 3), ("late", 3)],
            "queued in task order, each released lock handed on, free at the end"
        );
    }
}
