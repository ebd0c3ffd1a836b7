//! The task-side API of the single-threaded executor: `spawn`, `sleep`, `timeout`,
//! `yield_now`, client and data draws, marks. Each reaches the current world through the
//! thread-local context ([`crate::context`]); the task table itself is `tasks`.
//!
//! The run loop in `sim` picks which ready task runs next (a traced choice) and polls it with no
//! borrow of the world held, so a task may touch the world freely. No std thread, no wall clock
//! and no OS randomness is used here.

use crate::bus::Ev;
use crate::clock::{nanos, Nanos};
use crate::context;
use crate::tasks::wrap;
use crate::world::World;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

pub use crate::tasks::{JoinHandle, TaskExit, TaskOutput};

/// Spawns a task that the scenario waits for: the run passes only when it finishes, and does
/// not return `Err` (see [`TaskOutput`]).
pub fn spawn<F>(name: &str, fut: F) -> JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: TaskOutput,
{
    let (boxed, handle) = wrap(fut);
    context::with(|w| w.tasks.add(name, false, boxed));
    handle
}

/// Spawns a background task (a hotplug listener, a poller) that is cancelled when the
/// required tasks are done.
pub fn spawn_daemon<F>(name: &str, fut: F) -> JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: TaskOutput,
{
    let (boxed, handle) = wrap(fut);
    context::with(|w| w.tasks.add(name, true, boxed));
    handle
}

/// Virtual time now.
pub fn now() -> Nanos {
    context::with(|w| w.core.now)
}

/// Waits until `deadline` (virtual nanoseconds).
pub async fn sleep_until(deadline: Nanos) {
    let mut registered = false;
    poll_fn(|cx| context::with(|w| wait_until(w, deadline, cx, &mut registered))).await
}

/// Waits `d` of virtual time (from the time it is first polled).
pub async fn sleep(d: Duration) {
    // The deadline is taken in the first poll's own visit to the world (as `now()` then
    // `sleep_until` would: no time passes within a poll), not in a visit of its own.
    let mut deadline = None;
    let mut registered = false;
    poll_fn(|cx| {
        context::with(|w| {
            let at = *deadline.get_or_insert_with(|| w.core.now.saturating_add(nanos(d)));
            wait_until(w, at, cx, &mut registered)
        })
    })
    .await
}

/// One poll of a wait until `deadline`: ready once the time has come, else pending with the
/// polling task's wakeup registered at `deadline` (once: `registered`).
fn wait_until(w: &mut World, deadline: Nanos, cx: &Context<'_>, registered: &mut bool) -> Poll<()> {
    if w.core.now >= deadline {
        Poll::Ready(())
    } else {
        if !*registered {
            let wake = w.tasks.wakeup(cx.waker());
            w.core.push(deadline, Ev::Wake(wake));
            *registered = true;
        }
        Poll::Pending
    }
}

/// Gives the scheduler a chance to run another ready task (a scheduling point).
pub fn yield_now() -> impl Future<Output = ()> {
    YieldNow { yielded: false }
}

/// [`yield_now`]'s future: pending once (its task woken at once), then ready. A plain struct,
/// not an `async` block around a `poll_fn`: one flag, no state machine around it.
struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            Poll::Ready(())
        } else {
            self.yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

/// The error of [`timeout`]: the deadline passed first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

impl std::fmt::Display for Elapsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("virtual deadline elapsed")
    }
}

impl std::error::Error for Elapsed {}

/// Runs `fut` for at most `d` of virtual time; the future is dropped (cancelled) if late.
pub async fn timeout<F: Future>(d: Duration, fut: F) -> Result<F::Output, Elapsed> {
    let deadline = now().saturating_add(nanos(d));
    let mut fut = std::pin::pin!(fut);
    let mut registered = false;
    poll_fn(|cx| {
        if let Poll::Ready(v) = fut.as_mut().poll(cx) {
            return Poll::Ready(Ok(v));
        }
        context::with(|w| wait_until(w, deadline, cx, &mut registered)).map(|()| Err(Elapsed))
    })
    .await
}

/// Draws a client action from `labels` (the `client` stream). `None` means the client is done:
/// a replayed run has no more actions. The label shows in the run's event list.
pub fn client_choose(labels: &[&str]) -> Option<usize> {
    if labels.is_empty() {
        return None;
    }
    context::with(|w| {
        w.core
            .decide
            .client(labels.len() as u64, |v| labels.get(v as usize).copied())
            .map(|v| v as usize)
    })
}

/// Draws a client value in `0..n` from the `client` stream (in the baseline trial, seed 0's
/// draws); `None` when a replayed run has no more actions, and always for the default source.
pub fn client_below(n: u64) -> Option<u64> {
    context::with(|w| w.core.decide.client(n, |_| None))
}

/// Draws a value in `0..n` from the calling task's data stream (`data/<task name>`; `data/sim`
/// during setup), so a draw added in one task leaves the other tasks' and the models' draws
/// unchanged: in the baseline trial, seed 0's draws (not 0); on replay, the recorded values; 0
/// only for the default source (`RunConfig::default()`).
pub fn data_below(n: u64) -> u64 {
    context::with(|w| {
        let core = &mut w.core;
        core.decide.data(&core.actor, n)
    })
}

/// Draws a value in `0..n` from a stream the scenario names itself, `user/<stream>`
/// (`draw_below("retries", 4)`): derived from (seed, `user/retries`), so it moves no other
/// stream; recorded as an event and replayed like a data draw (0 for the default source and
/// past the end of a replayed stream). Tasks and models drawing from the same name share it.
pub fn draw_below(stream: &str, n: u64) -> u64 {
    context::with(|w| w.core.decide.user(stream, n))
}

/// Records a coverage mark from a task.
pub fn mark(name: &str) {
    context::with(|w| {
        let actor = w.core.actor.clone();
        crate::bus::mark(&mut w.core, &actor, name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{run, RunConfig};
    use std::cell::Cell;
    use std::rc::Rc;

    #[test]
    fn a_sleep_counts_from_its_first_poll_and_a_timeout_from_its_call() {
        let seen = Rc::new(Cell::new((0, 0, false)));
        let s2 = seen.clone();
        let r = run(RunConfig::default(), &move |sim| {
            let s = s2.clone();
            sim.spawn("t", async move {
                let ms = Duration::from_millis(1);
                let first = sleep(ms);
                sleep(5 * ms).await;
                first.await;
                let after_sleeps = now();
                let late = timeout(2 * ms, sleep(10 * ms)).await;
                s.set((after_sleeps, now(), late == Err(Elapsed)));
            });
        });
        assert!(r.failure.is_none(), "{:?}", r.failure);
        assert_eq!(seen.get(), (6_000_000, 8_000_000, true));
    }
}
