//! A run's data and user draws: each from its own stream (`data/<actor>`, `user/<name>`),
//! named once a thread and derived on its first draw in a seeded run, or answered from its
//! replayed queue; every draw logged with its stream's shared name. Part of the decider
//! ([`super::DeciderState`]).

use super::{below, data_stream, stream_named, user_stream, DeciderState, Event, Source};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

impl DeciderState {
    /// A data draw in `0..n` by `actor` (a task or device name), from its `data/<actor>`
    /// stream; 0 for the default source and past the end of a replayed stream.
    pub(crate) fn data(&mut self, actor: &str, n: u64) -> u64 {
        if matches!(self.source, Source::Default) {
            return 0;
        }
        self.draw(true, actor, n)
    }

    /// A draw in `0..n` from the scenario's own stream `user/<name>`.
    pub(crate) fn user(&mut self, name: &str, n: u64) -> u64 {
        if matches!(self.source, Source::Default) {
            return 0;
        }
        self.draw(false, name, n)
    }

    /// The index in `draws` of the data stream of actor `key` (`data`) or the user stream
    /// `key`: named and (seeded) derived on its first draw.
    fn drawn(&mut self, data: bool, key: &str) -> usize {
        let hit =
            |d: &Drawn| d.data == data && crate::words::same(d.key.as_bytes(), key.as_bytes());
        let i = if self.draws.get(self.last_draw).is_some_and(hit) {
            self.last_draw
        } else {
            match self.draws.iter().position(hit) {
                Some(i) => i,
                None => {
                    let name = if data {
                        data_stream(key)
                    } else {
                        user_stream(key)
                    };
                    self.draws.push(Drawn {
                        data,
                        key: key.into(),
                        name: name.into(),
                        live: false,
                        rng: None,
                    });
                    self.draws.len() - 1
                }
            }
        };
        let d = &mut self.draws[i];
        if !d.live {
            d.live = true;
            d.rng = self.seed.map(|seed| stream_named(seed, &d.name));
        }
        self.last_draw = i;
        i
    }

    /// A draw from the data stream of actor `key` (`data`) or the user stream `key` (seeded),
    /// or its replayed queue; a data stream falls back on the draws recorded without a stream
    /// name. Logged with the stream's shared name.
    fn draw(&mut self, data: bool, key: &str, n: u64) -> u64 {
        let i = self.drawn(data, key);
        let d = &mut self.draws[i];
        let v = match &mut d.rng {
            Some(rng) => below(rng, n.max(1)),
            None => {
                let queued = self
                    .replay_draws
                    .get_mut(&*d.name)
                    .and_then(|q| q.pop_front());
                let v = match queued {
                    Some(v) => v,
                    None if data => self.replay_data.pop_front().unwrap_or(0),
                    None => 0,
                };
                v.min(n.saturating_sub(1))
            }
        };
        self.log.push(Event::Data {
            value: v,
            stream: Some(d.name.clone()),
        });
        v
    }
}

/// A data or user stream a run drew from ([`DeciderState::drawn`]).
pub(super) struct Drawn {
    /// A data stream (`data/<key>`), or a user stream (`user/<key>`).
    data: bool,
    /// The actor or user name.
    key: Box<str>,
    /// The stream's full name, shared by every draw's event.
    name: Arc<str>,
    /// Whether this run drew from it yet (the names are kept from run to run).
    live: bool,
    /// Its generator in a seeded run once live; `None` on replay (answered from the recorded
    /// draws).
    rng: Option<ChaCha8Rng>,
}

impl Drawn {
    /// Not drawn from in the next run yet (its names kept, its generator dropped).
    pub(super) fn reset(&mut self) {
        self.live = false;
        self.rng = None;
    }
}
