//! Tasks: the task table of one run (slots, the ready set, wakers that mark a task ready), join
//! handles, and how a task's output counts ([`TaskOutput`]). The run loop in `sim` polls them;
//! the task-side API that spawns them is [`crate::exec`]. Nothing here reaches the world, reads
//! the wall clock or uses OS randomness; a wake only marks the task ready for the next
//! scheduling decision.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
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
}

struct WakeQueue(Mutex<Vec<usize>>);

struct TaskWaker {
    id: usize,
    queue: Arc<WakeQueue>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        if let Ok(mut q) = self.queue.0.lock() {
            q.push(self.id);
        }
    }
}

/// Whom a timer wakes: a task of this run by its id (a task's own timer, registered without
/// cloning its waker) or any other waker (a combinator's, one from outside the table).
pub(crate) enum Wakeup {
    Task(usize),
    Waker(Waker),
}

/// The ready tasks by id, ascending (the order a schedule choice indexes), in a sorted vector:
/// a few tasks are ready at once, and a `BTreeSet` allocated a node each time it went from
/// empty to one (most steps); once grown, this allocates nothing.
#[derive(Default)]
pub(crate) struct ReadySet(Vec<usize>);

impl ReadySet {
    pub(crate) fn insert(&mut self, id: usize) {
        if let Err(i) = self.0.binary_search(&id) {
            self.0.insert(i, id);
        }
    }

    pub(crate) fn remove(&mut self, id: &usize) {
        if let Ok(i) = self.0.binary_search(id) {
            self.0.remove(i);
        }
    }

    pub(crate) fn contains(&self, id: &usize) -> bool {
        self.0.binary_search(id).is_ok()
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &usize> {
        self.0.iter()
    }
}

/// The task table of one run.
pub(crate) struct Tasks {
    pub(crate) slots: Vec<TaskSlot>,
    pub(crate) ready: ReadySet,
    queue: Arc<WakeQueue>,
    scratch: Vec<usize>,
    /// Wakes of this run's own timers ([`Wakeup::Task`]), drained with the queue's.
    timed: Vec<usize>,
    /// The task being polled, while it is.
    pub(crate) polled: Option<usize>,
}

impl Tasks {
    pub(crate) fn new() -> Self {
        // Room for the tasks and wakes of a small run: no growth step by step.
        Tasks {
            slots: Vec::with_capacity(4),
            ready: ReadySet(Vec::with_capacity(4)),
            queue: Arc::new(WakeQueue(Mutex::new(Vec::with_capacity(4)))),
            scratch: Vec::with_capacity(4),
            timed: Vec::with_capacity(4),
            polled: None,
        }
    }

    pub(crate) fn add(&mut self, name: &str, daemon: bool, fut: BoxFuture) -> usize {
        let id = self.slots.len();
        let waker = Waker::from(Arc::new(TaskWaker {
            id,
            queue: self.queue.clone(),
        }));
        self.slots.push(TaskSlot {
            name: Rc::from(name),
            fut: Some(fut),
            daemon,
            done: false,
            waker,
        });
        self.ready.insert(id);
        id
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
            Wakeup::Task(id) => self.timed.push(id),
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
        // Swap buffers so neither side reallocates on every step.
        if let Ok(mut q) = self.queue.0.lock() {
            if !q.is_empty() {
                std::mem::swap(&mut *q, &mut self.scratch);
            }
        }
        self.scratch.append(&mut self.timed);
        for i in 0..self.scratch.len() {
            let id = self.scratch[i];
            if self.slots.get(id).is_some_and(|s| !s.done) {
                self.ready.insert(id);
            }
        }
        self.scratch.clear();
    }

    pub(crate) fn all_required_done(&self) -> bool {
        self.slots.iter().all(|s| s.done || s.daemon)
    }

    pub(crate) fn unfinished(&self) -> Vec<String> {
        self.slots
            .iter()
            .filter(|s| !s.done && !s.daemon)
            .map(|s| s.name.to_string())
            .collect()
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
                s.waker = Some(cx.waker().clone());
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
