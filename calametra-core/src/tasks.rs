//! Tasks: the task table of one run (slots, the ready set, wakers that mark a task ready, the
//! wakeups of timers a task sets for itself), join handles, and how a task's output counts
//! ([`TaskOutput`]). The run loop in `sim` polls them; the task-side API that spawns them is
//! [`crate::exec`]. Nothing here reaches the world, reads the wall clock or uses OS randomness;
//! a wake only marks the task ready for the next scheduling decision. Task state is kept as bits,
//! 64 tasks a word, so a wake, a drain and a readiness test take no lock and no allocation; a
//! finished run's buffers, names and (unshared) wakers serve the next run on the same thread.

use crate::pool::{self, Pool};
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// How a task ended, derived from its output.
pub enum TaskExit {
    /// It finished.
    Ok,
    /// It returned an error; the run fails with this message.
    Err(String),
}

/// Outputs a task may return: `()`, a plain value, or a `Result`. A task that returns `Err`
/// fails the run (``task `name` returned an error: <the error's Debug>``), as a panic does, so
/// a task returns `Err` only for what the scenario counts as a failure. An outcome the driver
/// handles (a stall it retried, a timeout or an unplug it reported to its caller) is `Ok` or
/// `()`; the scenario's invariants then check what the driver reported.
pub trait TaskOutput: 'static {
    /// Whether this output means the task failed.
    fn exit(&self) -> TaskExit;
}

impl TaskOutput for () {
    fn exit(&self) -> TaskExit {
        TaskExit::Ok
    }
}

impl<T: 'static, E: std::fmt::Debug + 'static> TaskOutput for Result<T, E> {
    fn exit(&self) -> TaskExit {
        match self {
            Ok(_) => TaskExit::Ok,
            Err(e) => TaskExit::Err(format!("{e:?}")),
        }
    }
}

macro_rules! plain_output {
    ($($t:ty),*) => {$(
        impl TaskOutput for $t {
            fn exit(&self) -> TaskExit { TaskExit::Ok }
        }
    )*};
}
plain_output!(bool, u8, u16, u32, u64, usize, i32, i64, String, Vec<u8>);

pub(crate) type BoxFuture = Pin<Box<dyn Future<Output = TaskExit>>>;

pub(crate) struct TaskSlot {
    pub(crate) name: Rc<str>,
    pub(crate) fut: Option<BoxFuture>,
    pub(crate) daemon: bool,
    pub(crate) done: bool,
    pub(crate) waker: Waker,
    /// The waker's own `Arc` (the count says whether anything outside the table holds it);
    /// `None` once a later run took the waker (then `waker` is a no-op one).
    own: Option<Arc<TaskWaker>>,
}

/// The wake bits of 64 tasks (task `id` is bit `id % 64` of group `id / 64`), shared by their
/// wakers. A wake is one atomic `or` and a step's drain one load (a swap when a bit is set),
/// with no lock and no list to dedup. A waker must be `Send + Sync`, so the bits are atomics: a
/// wake from another thread sets its bit like any other, and the task is ready at the next
/// drain. A word serves one run at a time: it is kept for a later run on this thread only when
/// no waker outside the table can reach it (see [`Spare`]).
struct WakeWord(AtomicU64);

struct TaskWaker {
    word: Arc<WakeWord>,
    bit: u64,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        // Release: what the waking side wrote is seen by the drain's acquiring swap.
        self.word.0.fetch_or(self.bit, Ordering::Release);
    }
}

/// Whom a timer wakes: a task of this run by its id (a task's own timer, registered without
/// cloning its waker) or any other waker (a combinator's, one from outside the table).
#[derive(Clone)]
pub(crate) enum Wakeup {
    Task(usize),
    Waker(Waker),
}

/// Tasks `64k..64k + 63` as bits (task `id` is bit `id % 64` of group `id / 64`).
struct Group {
    /// Set by the tasks' wakers.
    woken: Arc<WakeWord>,
    /// Set by this run's own timers ([`Wakeup::Task`]): no atomics.
    timed: u64,
    /// Not done: a finished task's wake is dropped.
    live: u64,
    /// Ready to run.
    ready: u64,
}

/// What a run's table leaves to the next run on its thread: its buffers, its task slots (a
/// name is reused when the task of the same id has the same one) and its wake words with their
/// wakers, a group of 64 kept only when nothing outside the table holds one of its wakers (so a
/// waker kept by a user cannot wake a later run's task). The slots are left as they are, the
/// whole list at once, not task by task; a later task takes from the slot of its id. None of
/// it decides anything: a run with a spare and one without behave alike. A kept world's table
/// keeps it in place ([`Tasks::close`], [`Tasks::reopen`]); a table dropped with its world
/// leaves it to the thread.
#[derive(Default)]
struct Spare {
    slots: Vec<TaskSlot>,
    groups: Vec<Group>,
    order: Vec<usize>,
    /// The previous run's slots by task id (their futures dropped): a task's name is shared
    /// with the task of the same id when it is the same; the wakers of the first `reusable`
    /// are moved into the task of the same id (no count is touched).
    prev: Vec<TaskSlot>,
    reusable: usize,
    /// Per kept group, its word (moved into the group of the same index).
    words: Vec<Option<Arc<WakeWord>>>,
    /// The run loop's buffer of wakers to poll with ([`Tasks::poll_wakers`]).
    poll: Vec<Waker>,
}

/// The task table of one run.
pub(crate) struct Tasks {
    pub(crate) slots: Vec<TaskSlot>,
    groups: Vec<Group>,
    /// Required (not daemon) tasks not done.
    required: usize,
    /// The task being polled, while it is.
    pub(crate) polled: Option<usize>,
    /// The ready ids, listed once a step ([`Tasks::list_ready`]).
    order: Vec<usize>,
    /// What the previous run on this thread left, taken id by id as tasks are added.
    spare: Spare,
}

impl Tasks {
    /// A table for a new world, with what the last table dropped on this thread left.
    pub(crate) fn new() -> Self {
        let mut spare = pool::take::<Spare>(Pool::Tasks).unwrap_or_default();
        Tasks {
            slots: std::mem::take(&mut spare.slots),
            groups: std::mem::take(&mut spare.groups),
            required: 0,
            polled: None,
            order: std::mem::take(&mut spare.order),
            spare,
        }
    }

    /// Ends the run of a kept world's table in place: its tasks' names and reusable wakers go
    /// to its own spare, as [`Drop`] leaves them to the thread, with its buffers kept where they
    /// are (nothing is moved through the thread's slot). The futures were taken at the run's
    /// end; any left drop here.
    pub(crate) fn close(&mut self) {
        self.keep_spare();
        self.required = 0;
        self.polled = None;
        self.order.clear();
    }

    /// Opens a closed table for the next run (the same state [`Tasks::new`] gives, with this
    /// table's own spare).
    pub(crate) fn reopen(&mut self) {
        if !self.slots.is_empty() {
            self.close();
        }
        self.required = 0;
        self.polled = None;
    }

    /// Moves the tasks' slots (with their names and reusable wakers) and their groups' words
    /// into the spare, leaving the table empty; what the spare held and no task took is
    /// dropped.
    fn keep_spare(&mut self) {
        let spare = &mut self.spare;
        spare.words.clear();
        spare.poll.clear();
        // Groups whose every waker is held only by its slot (the slot's `Waker` and `Arc`).
        let kept = self
            .slots
            .chunks(64)
            .take_while(|c| {
                c.iter()
                    .all(|s| s.own.as_ref().is_some_and(|o| Arc::strong_count(o) == 2))
            })
            .count();
        spare
            .words
            .extend(self.groups.drain(..).take(kept).map(|g| Some(g.woken)));
        for s in &mut self.slots {
            // The future, if any, drops here (a run's futures are taken out at its end).
            s.fut = None;
        }
        // The older slots (what the run before took nothing from) drop; the table keeps
        // their buffer.
        std::mem::swap(&mut self.slots, &mut spare.prev);
        self.slots.clear();
        spare.reusable = (kept * 64).min(spare.prev.len());
    }

    pub(crate) fn add(&mut self, name: &str, daemon: bool, fut: BoxFuture) -> usize {
        let id = self.slots.len();
        let (k, bit) = (id / 64, 1u64 << (id % 64));
        if k == self.groups.len() {
            let woken = match self.spare.words.get_mut(k).and_then(Option::take) {
                Some(w) => {
                    w.0.store(0, Ordering::Relaxed);
                    w
                }
                None => Arc::new(WakeWord(AtomicU64::new(0))),
            };
            self.groups.push(Group {
                woken,
                timed: 0,
                live: 0,
                ready: 0,
            });
        }
        let prev = self.spare.prev.get_mut(id);
        let reusable = id < self.spare.reusable;
        let (name, kept) = match prev {
            Some(p) => {
                let name = if *p.name == *name {
                    p.name.clone()
                } else {
                    Rc::from(name)
                };
                // A waker moves out, a no-op one left in its place.
                let kept = if reusable {
                    let own = p.own.take();
                    own.map(|own| (std::mem::replace(&mut p.waker, Waker::noop().clone()), own))
                } else {
                    None
                };
                (name, kept)
            }
            None => (Rc::from(name), None),
        };
        let (waker, own) = match kept {
            Some(kept) => kept,
            None => {
                let own = Arc::new(TaskWaker {
                    word: self.groups[k].woken.clone(),
                    bit,
                });
                (Waker::from(own.clone()), own)
            }
        };
        self.slots.push(TaskSlot {
            name,
            fut: Some(fut),
            daemon,
            done: false,
            waker,
            own: Some(own),
        });
        let g = &mut self.groups[k];
        g.live |= bit;
        g.ready |= bit;
        self.required += usize::from(!daemon);
        id
    }

    /// An empty buffer for the run loop's copies of the wakers (cloned once a task, not once a
    /// poll); given back with [`Tasks::keep_poll_wakers`].
    pub(crate) fn poll_wakers(&mut self) -> Vec<Waker> {
        std::mem::take(&mut self.spare.poll)
    }

    /// Gives the run loop's buffer back (emptied, so it holds no waker).
    pub(crate) fn keep_poll_wakers(&mut self, mut v: Vec<Waker>) {
        v.clear();
        self.spare.poll = v;
    }

    /// Marks task `id` finished: it is never ready again.
    pub(crate) fn finish(&mut self, id: usize) {
        let Some(s) = self.slots.get_mut(id) else {
            return;
        };
        if !s.done {
            s.done = true;
            self.required -= usize::from(!s.daemon);
            let g = &mut self.groups[id / 64];
            g.live &= !(1 << (id % 64));
            g.ready &= !(1 << (id % 64));
        }
    }

    /// What a timer registered with `waker` wakes: the polled task by id when `waker` is its
    /// own (the usual case: no waker clone), any other waker by a clone.
    pub(crate) fn wakeup(&self, waker: &Waker) -> Wakeup {
        match self.polled {
            Some(id) if self.slots.get(id).is_some_and(|s| s.waker.will_wake(waker)) => {
                Wakeup::Task(id)
            }
            _ => Wakeup::Waker(waker.clone()),
        }
    }

    /// Fires a timer's wakeup: a task of the table is marked woken as its waker would.
    pub(crate) fn wake(&mut self, w: Wakeup) {
        match w {
            Wakeup::Task(id) => {
                if let Some(g) = self.groups.get_mut(id / 64) {
                    g.timed |= 1 << (id % 64);
                }
            }
            Wakeup::Waker(w) => w.wake(),
        }
    }

    /// The waker a wakeup stands for (a state dump compares wakers).
    pub(crate) fn waker_of<'a>(&'a self, w: &'a Wakeup) -> Option<&'a Waker> {
        match w {
            Wakeup::Task(id) => self.slots.get(*id).map(|s| &s.waker),
            Wakeup::Waker(w) => Some(w),
        }
    }

    /// Moves woken tasks into the ready set (finished tasks are ignored).
    pub(crate) fn drain_wakes(&mut self) {
        for g in &mut self.groups {
            let mut bits = std::mem::take(&mut g.timed);
            if g.woken.0.load(Ordering::Relaxed) != 0 {
                bits |= g.woken.0.swap(0, Ordering::Acquire);
            }
            g.ready |= bits & g.live;
        }
    }

    /// Lists the ready tasks in ascending id order (what a schedule choice indexes) for
    /// [`Tasks::ready_ids`]; returns how many there are.
    pub(crate) fn list_ready(&mut self) -> usize {
        self.order.clear();
        for (k, g) in self.groups.iter().enumerate() {
            let mut w = g.ready;
            while w != 0 {
                self.order.push(k * 64 + w.trailing_zeros() as usize);
                w &= w - 1;
            }
        }
        self.order.len()
    }

    /// The ready tasks as [`Tasks::list_ready`] last listed them.
    pub(crate) fn ready_ids(&self) -> &[usize] {
        &self.order
    }

    /// Whether task `id` is ready.
    pub(crate) fn is_ready(&self, id: usize) -> bool {
        self.groups
            .get(id / 64)
            .is_some_and(|g| g.ready & (1 << (id % 64)) != 0)
    }

    /// Takes task `id` out of the ready set (it is about to be polled).
    pub(crate) fn unready(&mut self, id: usize) {
        if let Some(g) = self.groups.get_mut(id / 64) {
            g.ready &= !(1 << (id % 64));
        }
    }

    pub(crate) fn all_required_done(&self) -> bool {
        self.required == 0
    }

    pub(crate) fn unfinished(&self) -> Vec<String> {
        self.slots
            .iter()
            .filter(|s| !s.done && !s.daemon)
            .map(|s| s.name.to_string())
            .collect()
    }
}

impl Drop for Tasks {
    /// Leaves the table's buffers, names and reusable wakers to the next run on this thread.
    fn drop(&mut self) {
        self.keep_spare();
        let mut spare = std::mem::take(&mut self.spare);
        self.order.clear();
        spare.slots = std::mem::take(&mut self.slots);
        spare.groups = std::mem::take(&mut self.groups);
        spare.order = std::mem::take(&mut self.order);
        pool::put(Pool::Tasks, spare);
    }
}

/// Awaits a spawned task's output.
pub struct JoinHandle<T> {
    slot: Rc<RefCell<JoinSlot<T>>>,
}

struct JoinSlot<T> {
    value: Option<T>,
    waker: Option<Waker>,
}

impl<T> Future for JoinHandle<T> {
    type Output = T;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut s = self.slot.borrow_mut();
        match s.value.take() {
            Some(v) => Poll::Ready(v),
            None => {
                // Polled again by the same task: its waker is kept, not cloned again.
                if !s.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    s.waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}

/// Wraps a user future so its output is kept for a [`JoinHandle`] and judged by [`TaskOutput`].
pub(crate) fn wrap<F>(fut: F) -> (BoxFuture, JoinHandle<F::Output>)
where
    F: Future + 'static,
    F::Output: TaskOutput,
{
    let slot = Rc::new(RefCell::new(JoinSlot {
        value: None,
        waker: None,
    }));
    let s2 = slot.clone();
    let boxed: BoxFuture = Box::pin(async move {
        let out = fut.await;
        let exit = out.exit();
        let mut s = s2.borrow_mut();
        s.value = Some(out);
        if let Some(w) = s.waker.take() {
            w.wake();
        }
        exit
    });
    (boxed, JoinHandle { slot })
}

#[cfg(test)]
mod tests {
    use crate::exec::yield_now;
    use crate::{run, RunConfig};
    use std::cell::{Cell, RefCell};
    use std::future::poll_fn;
    use std::rc::Rc;
    use std::task::{Poll, Waker};

    #[test]
    fn a_wake_from_another_thread_marks_the_task_ready() {
        let polls = Rc::new(Cell::new(0));
        let p2 = polls.clone();
        let r = run(RunConfig::default(), &move |sim| {
            let p = p2.clone();
            sim.spawn("t", async move {
                poll_fn(|cx| {
                    p.set(p.get() + 1);
                    if p.get() > 1 {
                        return Poll::Ready(());
                    }
                    let w = cx.waker().clone();
                    #[allow(
                        clippy::disallowed_methods,
                        reason = "the test wakes from a real thread on purpose (and joins it in the poll)"
                    )]
                    let t = std::thread::spawn(move || w.wake());
                    t.join().expect("the waking thread ran");
                    Poll::Pending
                })
                .await
            });
        });
        assert!(r.failure.is_none(), "{:?}", r.failure);
        assert_eq!(polls.get(), 2);
    }

    #[test]
    fn a_waker_kept_from_an_earlier_run_wakes_no_task_of_a_later_one() {
        let kept: Rc<RefCell<Option<Waker>>> = Rc::default();
        let k = kept.clone();
        let r = run(RunConfig::default(), &move |sim| {
            let k = k.clone();
            sim.spawn("a", async move {
                poll_fn(|cx| {
                    *k.borrow_mut() = Some(cx.waker().clone());
                    Poll::Ready(())
                })
                .await
            });
        });
        assert!(r.failure.is_none(), "{:?}", r.failure);
        assert!(kept.borrow().is_some());
        // The same thread, the same task ids: task 0 of this run waits for nothing; the old
        // waker (task 0 of the first run) is woken while it waits.
        let polls = Rc::new(Cell::new(0));
        let (k, p2) = (kept.clone(), polls.clone());
        let r = run(RunConfig::default(), &move |sim| {
            let p = p2.clone();
            sim.spawn_daemon("a", async move {
                poll_fn(|_| {
                    p.set(p.get() + 1);
                    Poll::<()>::Pending
                })
                .await
            });
            let k = k.clone();
            sim.spawn("b", async move {
                if let Some(w) = k.borrow_mut().take() {
                    w.wake();
                }
                for _ in 0..4 {
                    yield_now().await;
                }
            });
        });
        assert!(r.failure.is_none(), "{:?}", r.failure);
        assert_eq!(
            polls.get(),
            1,
            "the stale wake reached the later run's task 0"
        );
    }

    #[test]
    fn more_than_64_tasks_all_run_in_id_order_by_default() {
        let order = Rc::new(RefCell::new(Vec::new()));
        let o2 = order.clone();
        let r = run(RunConfig::default(), &move |sim| {
            for i in 0..150usize {
                let o = o2.clone();
                sim.spawn(&format!("t{i}"), async move {
                    yield_now().await;
                    o.borrow_mut().push(i);
                });
            }
        });
        assert!(r.failure.is_none(), "{:?}", r.failure);
        assert_eq!(*order.borrow(), (0..150).collect::<Vec<_>>());
    }

    #[test]
    fn a_later_run_names_its_tasks_by_its_own_names() {
        use crate::sim::Failure;
        let r = run(RunConfig::default(), &|sim| {
            sim.spawn("a", async {});
            sim.spawn("b", async {});
        });
        assert!(r.failure.is_none(), "{:?}", r.failure);
        // The same thread: task 0 is renamed, task 1 keeps its name, task 2 is new.
        let r = run(RunConfig::default(), &|sim| {
            sim.spawn("b", async {});
            sim.spawn("b", async { Ok::<(), &str>(()) });
            sim.spawn("c", async {
                yield_now().await;
                Err::<(), &str>("boom")
            });
        });
        match r.failure {
            Some(Failure::TaskError { task, message }) => {
                assert_eq!((task.as_str(), message.as_str()), ("c", "\"boom\""));
            }
            other => panic!("{other:?}"),
        }
        let r = run(RunConfig::default(), &|sim| {
            sim.spawn("a", async { Err::<(), &str>("first") });
        });
        match r.failure {
            Some(Failure::TaskError { task, .. }) => assert_eq!(task, "a"),
            other => panic!("{other:?}"),
        }
    }
}
