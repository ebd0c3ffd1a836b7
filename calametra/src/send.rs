//! [`SimSend`]: a simulated value (an interface, a transfer's future) made usable where a
//! published library demands `Send`, checked at run time instead of proved by the compiler.
//!
//! Host libraries with an IO trait often ask for `Send` futures (dfu-core's `DfuAsyncIo`
//! returns `impl Future + Send`), because on hardware their users run them on multi-threaded
//! executors. The simulator's interface holds an `Rc` to its world and is not `Send`, and need
//! not be: a simulation runs on one thread and nothing of it ever leaves that thread. Without
//! this module the only way through was an `unsafe impl Send` in the user's crate; here the
//! `unsafe` lives once, in the framework, with its reason, and a user's crate can keep
//! `#![forbid(unsafe_code)]`.
//!
//! The check: a [`SimSend`] records the thread that made it and touches its value only on that
//! thread (a poll, a borrow, taking it out, dropping it). On any other thread it panics with a
//! message naming both threads before the value is touched, and a drop there leaks the value
//! rather than run its destructor on the wrong thread. So the promise `Send` makes is kept even
//! if the wrapper is moved: the value itself is only ever used on its own thread.
//!
//! Nothing here reads the wall clock, spawns a thread or keeps global state.

use std::fmt;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::thread::{self, ThreadId};

/// A value that stays on the thread that wrapped it, usable where `Send` (and `Sync`) is
/// demanded.
///
/// Wrap the future a library's IO trait must return as `Send`, or a value holding the
/// simulated interface:
///
/// ```
/// use calametra::SimSend;
/// use std::future::Future;
/// use std::rc::Rc;
///
/// fn library_wants(f: impl Future<Output = u32> + Send) -> impl Future<Output = u32> + Send {
///     f
/// }
///
/// let shared = Rc::new(7); // not Send, like the simulator's interface
/// let fut = library_wants(SimSend::new(async move { *shared * 6 }));
/// // Polled on the thread that made it (the simulation's), it behaves as the future inside.
/// # let _ = fut;
/// ```
///
/// Every use checks the thread: on another one, [`SimSend`] panics before touching the value
/// (`calametra: a SimSend made on thread ... was polled on thread ...`), and a drop there leaks
/// the value instead of dropping it on the wrong thread.
pub struct SimSend<T> {
    /// The thread that made it: the only one that touches `value`.
    owner: ThreadId,
    /// Dropped in place (through [`Drop`]) only on `owner`; leaked elsewhere.
    value: ManuallyDrop<T>,
}

// SAFETY: `Send` and `Sync` promise that moving or sharing a `SimSend<T>` across threads cannot
// cause a data race in `T`. Every access to `value` (`get`, `get_mut`, `into_inner`, `poll`,
// `drop`) first calls `check`, which panics unless the current thread is `owner`, the thread
// that created the wrapper; a `ThreadId` is never reused within a process. So `T` is only ever
// read, written, polled or dropped on the one thread that made it, exactly as if it had never
// moved: whatever state `T` shares with other values on that thread (an `Rc`'s count, a
// `RefCell`'s flag, a thread-local) is never touched concurrently. A drop on another thread
// leaks `value` (no destructor runs there); leaking is safe. Moving the bytes of `T` to another
// thread and back without touching them reads or writes nothing of `T`'s shared state.
unsafe impl<T> Send for SimSend<T> {}
// SAFETY: as for `Send`: a `&SimSend<T>` on another thread can reach `value` only through
// `get`, which checks the thread first, so no two threads ever access `T`.
unsafe impl<T> Sync for SimSend<T> {}

impl<T> SimSend<T> {
    /// Wraps `value`, owned by the current thread from now on.
    pub fn new(value: T) -> SimSend<T> {
        SimSend {
            owner: thread::current().id(),
            value: ManuallyDrop::new(value),
        }
    }

    /// Whether the current thread is the one that made it (so using it will not panic).
    pub fn on_owner_thread(&self) -> bool {
        thread::current().id() == self.owner
    }

    /// Panics, naming `what` was done and both threads, unless called on the owner thread.
    #[track_caller]
    fn check(&self, what: &str) {
        if !self.on_owner_thread() {
            let here = thread::current();
            panic!(
                "calametra: a SimSend made on thread {:?} was {what} on thread {:?} ({}): a \
                 simulated value must stay on its simulation's thread; run the library's future \
                 on the simulation's executor (sim.spawn), not on another runtime's worker",
                self.owner,
                here.id(),
                here.name().unwrap_or("unnamed"),
            );
        }
    }

    /// The value. Panics on another thread than the one that made it.
    #[track_caller]
    pub fn get(&self) -> &T {
        self.check("borrowed");
        &self.value
    }

    /// The value, mutably. Panics on another thread than the one that made it.
    #[track_caller]
    pub fn get_mut(&mut self) -> &mut T {
        self.check("borrowed");
        &mut self.value
    }

    /// Takes the value out. Panics on another thread than the one that made it.
    #[track_caller]
    pub fn into_inner(self) -> T {
        self.check("unwrapped");
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never used again and its `Drop` never runs (it is `ManuallyDrop`),
        // so `value` is taken exactly once and not dropped twice.
        unsafe { ManuallyDrop::take(&mut this.value) }
    }
}

impl<T> Drop for SimSend<T> {
    fn drop(&mut self) {
        if !self.on_owner_thread() {
            // Leak: running `T`'s destructor here would touch its state from the wrong thread.
            // Panicking during an unwind would abort; the leak alone keeps the promise then.
            if !thread::panicking() {
                self.check("dropped");
            }
            return;
        }
        // SAFETY: `drop` runs once, and `value` is not used after it.
        unsafe { ManuallyDrop::drop(&mut self.value) }
    }
}

impl<F: Future> Future for SimSend<F> {
    type Output = F::Output;

    #[track_caller]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.check("polled");
        // SAFETY: structural pinning of `value`: it is never moved out while pinned (the only
        // way out is `into_inner`, which takes `self` by value and so needs `SimSend<F>: Unpin`
        // or an unpinned value; `SimSend<F>` is `Unpin` only when `F` is), and it is dropped in
        // place by `Drop` (or leaked, never moved).
        let inner = unsafe { self.map_unchecked_mut(|s| &mut *s.value) };
        inner.poll(cx)
    }
}

impl<T> fmt::Debug for SimSend<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimSend")
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    // These tests move a wrapper to another thread on purpose, to see the check refuse it; a
    // simulation never does (clippy.toml refuses threads in simulated code).
    #![allow(clippy::disallowed_methods)]

    use super::SimSend;
    use std::future::Future;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::pin::pin;
    use std::rc::Rc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Poll, Waker};

    fn assert_send_sync<T: Send + Sync>(_: &T) {}

    /// A value counting its drops, not Send (it holds an `Rc`).
    struct Tracked {
        _rc: Rc<()>,
        drops: Arc<AtomicUsize>,
    }

    impl Drop for Tracked {
        fn drop(&mut self) {
            self.drops.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn tracked() -> (Tracked, Arc<AtomicUsize>) {
        let drops = Arc::new(AtomicUsize::new(0));
        let t = Tracked {
            _rc: Rc::new(()),
            drops: drops.clone(),
        };
        (t, drops)
    }

    fn panic_text(e: Box<dyn std::any::Any + Send>) -> String {
        e.downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    }

    #[test]
    fn on_its_own_thread_it_is_the_future_and_the_value_inside() {
        let shared = Rc::new(6);
        let s2 = shared.clone();
        let fut = SimSend::new(async move { *s2 * 7 });
        assert_send_sync(&fut);
        let mut fut = pin!(fut);
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(fut.as_mut().poll(&mut cx), Poll::Ready(42));

        let (t, drops) = tracked();
        let mut w = SimSend::new(t);
        assert!(w.on_owner_thread());
        let _ = w.get();
        let _ = w.get_mut();
        let t = w.into_inner();
        assert_eq!(drops.load(Ordering::SeqCst), 0, "into_inner drops nothing");
        drop(t);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        drop(SimSend::new(tracked().0));
        let (t, drops) = tracked();
        drop(SimSend::new(t));
        assert_eq!(
            drops.load(Ordering::SeqCst),
            1,
            "dropped once, on its thread"
        );
    }

    #[test]
    fn polled_borrowed_or_unwrapped_on_another_thread_it_panics_naming_both_threads() {
        let owner = std::thread::current().id();
        let shared = Rc::new(1);
        let s2 = shared.clone();
        let fut = SimSend::new(async move { *s2 });
        let (fut, text) = std::thread::spawn(move || {
            let mut fut = Box::pin(fut);
            let mut cx = Context::from_waker(Waker::noop());
            let r = catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(&mut cx)));
            (
                fut,
                panic_text(r.expect_err("a poll on another thread must panic")),
            )
        })
        .join()
        .unwrap();
        assert!(
            text.contains("was polled on thread") && text.contains(&format!("{owner:?}")),
            "{text}"
        );
        assert!(text.contains("sim.spawn"), "says what to do: {text}");
        // Back on its own thread it was never touched, and works.
        let mut fut = fut;
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(fut.as_mut().poll(&mut cx), Poll::Ready(1));
        drop(fut);
        assert_eq!(Rc::strong_count(&shared), 1, "dropped on its thread");

        let w = SimSend::new(Rc::new(5));
        let text = std::thread::spawn(move || {
            let r = catch_unwind(AssertUnwindSafe(|| **w.get()));
            let text = panic_text(r.expect_err("get on another thread must panic"));
            std::mem::forget(w);
            text
        })
        .join()
        .unwrap();
        assert!(text.contains("was borrowed on thread"), "{text}");

        let w = SimSend::new(Rc::new(5));
        let text = std::thread::spawn(move || {
            let r = catch_unwind(AssertUnwindSafe(|| drop(w.into_inner())));
            panic_text(r.expect_err("into_inner on another thread must panic"))
        })
        .join()
        .unwrap();
        assert!(text.contains("was unwrapped on thread"), "{text}");
    }

    #[test]
    fn dropped_on_another_thread_it_leaks_the_value_and_panics() {
        let (t, drops) = tracked();
        let w = SimSend::new(t);
        let r = std::thread::spawn(move || drop(w)).join();
        let text = panic_text(r.expect_err("a drop on another thread must panic"));
        assert!(text.contains("was dropped on thread"), "{text}");
        assert_eq!(
            drops.load(Ordering::SeqCst),
            0,
            "the value's destructor never ran on the wrong thread"
        );
    }
}
