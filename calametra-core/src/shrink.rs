//! Minimization: delta debugging over a failing run's events until no single event can go.
//!
//! The record of choices is what shrinks (client actions, externals, injected faults,
//! non-default schedule choices), never generated values: a shrunk run is just another run,
//! replayed from its events. A candidate is kept only while the same failure signature fails;
//! when a candidate's actual run took fewer events than it was given, those are kept instead.
//! Nothing here reads the wall clock.

use crate::choices::Event;
use std::ops::Range;
use std::rc::Rc;

/// A minimized failure.
#[derive(Clone, Debug)]
pub struct Shrunk {
    /// The 1-minimal events.
    pub events: Vec<Event>,
    /// Event counts after each accepted reduction, starting with the original count.
    pub chain: Vec<usize>,
    /// Replays tried.
    pub attempts: u64,
}

impl Shrunk {
    /// `48 -> 12 -> 5 -> 3`.
    pub fn chain_text(&self) -> String {
        self.chain
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(" -> ")
    }
}

/// How many events `cur` holds as [`crate::choices::count_events`] counts them: a unit of
/// anchors alone (anchors recorded after the last event) is not an event.
fn counted(base: &[Event], cur: &[Range<usize>]) -> usize {
    cur.iter()
        .filter(|u| {
            u.end
                .checked_sub(1)
                .and_then(|i| base.get(i))
                .is_some_and(|e| !matches!(e, Event::Anchor { .. }))
        })
        .count()
}

/// The units minimization removes: each event with the [`Event::Anchor`] recorded before it
/// (an anchor goes with its event; alone it is never removed, nor counted), as ranges of
/// `events` (no copy of an event).
fn units(events: &[Event]) -> Vec<Range<usize>> {
    let mut out = Vec::with_capacity(events.len());
    let mut open = 0;
    for (i, e) in events.iter().enumerate() {
        if !matches!(e, Event::Anchor { .. }) {
            out.push(open..i + 1);
            open = i + 1;
        }
    }
    if open < events.len() {
        out.push(open..events.len());
    }
    out
}

/// The events of `units` (ranges of `base`), in order.
fn flat(base: &[Event], units: &[Range<usize>]) -> Vec<Event> {
    let mut out = Vec::with_capacity(units.iter().map(|u| u.len()).sum());
    for u in units {
        out.extend_from_slice(&base[u.clone()]);
    }
    out
}

/// A candidate as ranges of the events of an accepted run (shared, not copied): what ddmin
/// tries, and what a replay that passed is remembered by.
struct Cand<'a> {
    base: &'a Rc<Vec<Event>>,
    units: &'a [Range<usize>],
    /// The units of `units` left out (a range, or one index).
    skip: Range<usize>,
}

impl Cand<'_> {
    /// The kept units, in order.
    fn kept(&self) -> impl Iterator<Item = &Range<usize>> + Clone {
        self.units[..self.skip.start]
            .iter()
            .chain(&self.units[self.skip.end..])
    }

    /// The candidate's events, in order (borrowed).
    fn events(&self) -> impl Iterator<Item = &Event> {
        let base = &**self.base;
        self.kept().flat_map(move |u| &base[u.clone()])
    }

    fn len(&self) -> usize {
        self.kept().map(|u| u.len()).sum()
    }

    /// The candidate's events: the one copy a replay gets.
    fn to_list(&self) -> Vec<Event> {
        let mut out = Vec::with_capacity(self.len());
        for u in self.kept() {
            out.extend_from_slice(&self.base[u.clone()]);
        }
        out
    }
}

/// A candidate replayed without the failure: its kept units of `base`, and its event count.
struct Passed {
    base: Rc<Vec<Event>>,
    units: Vec<Range<usize>>,
    len: usize,
}

impl Passed {
    /// Whether `c` is the same event list (compared event by event, as lists compare).
    fn is(&self, c: &Cand<'_>, len: usize) -> bool {
        if self.len != len {
            return false;
        }
        if Rc::ptr_eq(&self.base, c.base) && self.units.iter().eq(c.kept()) {
            return true;
        }
        let mine = self.units.iter().flat_map(|u| &self.base[u.clone()]);
        mine.eq(c.events())
    }
}

/// Minimizes `events`. `fails(candidate)` replays a candidate and returns the events its run
/// actually took when it fails with the original signature, `None` otherwise. The result is
/// 1-minimal: removing any single remaining event (with its anchor) makes that signature go
/// away. Counts (the chain) leave anchors out.
///
/// Runs are deterministic, so a candidate already replayed without the failure is not replayed
/// again (ddmin meets the same list again after a reduction): its answer is known. Every replay
/// that does happen is a whole run; `attempts` counts those. [`minimize_owned`] is the same
/// search handing each replay its list to keep (no copy for a replay that takes it).
pub fn minimize(
    events: Vec<Event>,
    fails: &mut dyn FnMut(&[Event]) -> Option<Vec<Event>>,
) -> Shrunk {
    minimize_owned(events, &mut |cand: Vec<Event>| fails(&cand))
}

/// [`minimize`], handing `fails` each candidate as its own list, so a replay can run from it
/// without copying it (`explore::replay_config` takes a list by value as well as by reference).
///
/// The current list is kept as ranges of the last accepted run's events, and a candidate that
/// passed is remembered by its ranges too: the list a replay gets is the one copy of its events.
pub fn minimize_owned(
    events: Vec<Event>,
    fails: &mut dyn FnMut(Vec<Event>) -> Option<Vec<Event>>,
) -> Shrunk {
    let mut cur = units(&events);
    let mut base = Rc::new(events);
    let mut chain = vec![counted(&base, &cur)];
    let mut attempts = 0u64;
    // Candidates replayed without the failure.
    let mut passed: Vec<Passed> = Vec::new();
    let mut fails = |c: Cand<'_>, attempts: &mut u64| -> Option<Vec<Event>> {
        let len = c.len();
        if passed.iter().any(|p| p.is(&c, len)) {
            return None;
        }
        *attempts += 1;
        let r = fails(c.to_list());
        if r.is_none() {
            passed.push(Passed {
                base: c.base.clone(),
                units: c.kept().cloned().collect(),
                len,
            });
        }
        r
    };
    let accept = |base: &mut Rc<Vec<Event>>,
                  cur: &mut Vec<Range<usize>>,
                  cand: Vec<Range<usize>>,
                  taken: Vec<Event>,
                  chain: &mut Vec<usize>| {
        let taken_units = units(&taken);
        if taken_units.len() <= cand.len() {
            *base = Rc::new(taken);
            *cur = taken_units;
        } else {
            *cur = cand;
        }
        let n = counted(base, cur);
        if chain.last() != Some(&n) {
            chain.push(n);
        }
    };
    // ddmin: remove chunks at growing granularity. When it ends on a pass that removed single
    // events and none could go, the result is already 1-minimal.
    let mut one_minimal = false;
    let mut n = 2usize;
    while cur.len() >= 2 {
        let chunk = cur.len().div_ceil(n);
        let mut reduced = false;
        let mut start = 0;
        while start < cur.len() {
            let end = (start + chunk).min(cur.len());
            let c = Cand {
                base: &base,
                units: &cur,
                skip: start..end,
            };
            if let Some(taken) = fails(c, &mut attempts) {
                let cand: Vec<Range<usize>> =
                    cur[..start].iter().chain(&cur[end..]).cloned().collect();
                accept(&mut base, &mut cur, cand, taken, &mut chain);
                reduced = true;
                break;
            }
            start = end;
        }
        if reduced {
            n = (n - 1).max(2);
        } else if n >= cur.len() {
            one_minimal = true;
            break;
        } else {
            n = (n * 2).min(cur.len());
        }
    }
    // 1-minimality: no single event may go (ddmin's last pass tried each one already unless it
    // stopped above single events: one unit left, or a pass at a coarser granularity).
    while !one_minimal {
        let mut removed = false;
        let mut i = 0;
        while i < cur.len() {
            let c = Cand {
                base: &base,
                units: &cur,
                skip: i..i + 1,
            };
            if let Some(taken) = fails(c, &mut attempts) {
                let mut cand = cur.clone();
                cand.remove(i);
                accept(&mut base, &mut cur, cand, taken, &mut chain);
                removed = true;
            } else {
                i += 1;
            }
        }
        one_minimal = !removed;
    }
    Shrunk {
        events: flat(&base, &cur),
        chain,
        attempts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(v: u64) -> Event {
        Event::Client {
            value: v,
            label: None,
        }
    }

    #[test]
    fn finds_the_one_minimal_subsequence() {
        // Fails when 3, 17 and 29 are present in that order.
        let events: Vec<Event> = (0..48).map(ev).collect();
        let mut fails = |c: &[Event]| {
            let vals: Vec<u64> = c
                .iter()
                .map(|e| match e {
                    Event::Client { value, .. } => *value,
                    _ => 0,
                })
                .collect();
            let pos = |x| vals.iter().position(|&v| v == x);
            match (pos(3), pos(17), pos(29)) {
                (Some(a), Some(b), Some(c2)) if a < b && b < c2 => Some(c.to_vec()),
                _ => None,
            }
        };
        let s = minimize(events, &mut fails);
        assert_eq!(s.events, vec![ev(3), ev(17), ev(29)]);
        assert_eq!(s.chain.first(), Some(&48));
        assert_eq!(s.chain.last(), Some(&3));
        for i in 0..s.events.len() {
            let mut c = s.events.clone();
            c.remove(i);
            assert!(fails(&c).is_none(), "1-minimal");
        }
    }

    #[test]
    fn the_last_single_event_pass_is_not_replayed() {
        // Fails when 3, 17 and 29 are present: ddmin ends on a pass that tries removing each of
        // the three alone, which is the 1-minimality check, so none is tried twice.
        let events: Vec<Event> = (0..48).map(ev).collect();
        let mut tried: Vec<Vec<Event>> = Vec::new();
        let mut fails = |c: &[Event]| {
            tried.push(c.to_vec());
            let has = |x| c.contains(&ev(x));
            (has(3) && has(17) && has(29)).then(|| c.to_vec())
        };
        let s = minimize(events, &mut fails);
        assert_eq!(s.events, vec![ev(3), ev(17), ev(29)]);
        assert_eq!(s.attempts, tried.len() as u64);
        for i in 0..3 {
            let mut without = s.events.clone();
            without.remove(i);
            let times = tried.iter().filter(|c| **c == without).count();
            assert_eq!(
                times, 1,
                "removing {:?} alone was tried {times} times",
                s.events[i]
            );
        }
    }

    #[test]
    fn a_candidate_that_passed_is_not_replayed_again() {
        // As a run does: it stops at the failure (3 then 17), so it takes only the events up to
        // there; ddmin then meets lists it already replayed.
        let events: Vec<Event> = (0..40).map(|v| ev(v % 20)).collect();
        let mut tried: Vec<Vec<Event>> = Vec::new();
        let mut fails = |c: &[Event]| {
            tried.push(c.to_vec());
            let three = c.iter().position(|e| *e == ev(3))?;
            let end = three + 1 + c[three + 1..].iter().position(|e| *e == ev(17))?;
            Some(c[..=end].to_vec())
        };
        let s = minimize(events, &mut fails);
        assert_eq!(s.events, vec![ev(3), ev(17)]);
        assert_eq!(s.attempts, tried.len() as u64);
        for (i, c) in tried.iter().enumerate() {
            assert!(
                !tried[..i].contains(c),
                "replayed twice: {c:?} (attempt {i})"
            );
        }
    }

    #[test]
    fn a_single_event_left_is_still_checked_alone() {
        // ddmin stops at one unit without trying the empty run; the 1-minimality pass does.
        let events: Vec<Event> = (0..4).map(ev).collect();
        let mut fails = |c: &[Event]| Some(c.to_vec());
        let s = minimize(events, &mut fails);
        assert!(s.events.is_empty(), "{:?}", s.events);
    }

    #[test]
    fn keeps_the_events_a_run_actually_took() {
        let events: Vec<Event> = (0..8).map(ev).collect();
        let mut fails = |c: &[Event]| {
            if c.contains(&ev(5)) {
                Some(vec![ev(5)])
            } else {
                None
            }
        };
        let s = minimize(events, &mut fails);
        assert_eq!(s.events, vec![ev(5)]);
    }
}
