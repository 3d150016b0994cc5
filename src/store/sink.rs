//! The [`Sink`] trait: where the state's items go once they are durable.
//!
//! Like ripgrep's `Sink`, a sink is handed items by the state
//! ([`State::deliver`]): in sequence order, each once, from the one the sink
//! asks for, and only items whose group is durable. The crawl's `--output`
//! file, `export` and `watch` are sinks; so may a library user's own be. Where
//! a sink keeps its place across runs is its own business.
//!
//! Items of the group made durable last are handed over from memory when the
//! state was asked to keep them ([`State::keep_durable_items`], as a crawl
//! with `--output` does); any other start is read from the database. Depends on
//! the [`State`]'s items table and `error`.

use super::State;
use super::error::StoreError;

/// Receives durable items (see the module doc).
pub trait Sink {
    /// What the sink's own work fails with; an error reading the items from
    /// the state converts into it.
    type Error: From<StoreError>;

    /// The sequence number of the first item the sink still needs.
    fn next_item(&self) -> u64;

    /// Item `seq` as JSON text; `seq` is the sink's [`Sink::next_item`] at
    /// the call. `Ok(false)` ends this delivery early (the sink has what it
    /// wants).
    fn item(&mut self, seq: u64, json: &str) -> Result<bool, Self::Error>;
}

impl State {
    /// Hands `sink` the durable items from its [`Sink::next_item`] on, in
    /// order, until there are no more or it says stop.
    pub fn deliver<S: Sink>(&self, sink: &mut S) -> Result<(), S::Error> {
        let from = sink.next_item();
        if let Some(kept) = self.items.kept(&self.db, from) {
            for entry in kept {
                let (seq, json) = entry?;
                if !sink.item(seq, json)? {
                    break;
                }
            }
            return Ok(());
        }
        let mut failure = None;
        self.items
            .for_each(&self.db, from, |seq, json| match sink.item(seq, json) {
                Ok(more) => more,
                Err(error) => {
                    failure = Some(error);
                    false
                }
            })?;
        failure.map_or(Ok(()), Err)
    }

    /// Keeps the items of the group made durable last in memory, so that
    /// [`State::deliver`] hands them over without reading the database (at
    /// most one group's items, three times: the open, the sealed and the
    /// durable group's).
    pub fn keep_durable_items(&mut self) {
        self.items.keep();
    }
}

/// A sink that calls a closure for each item from a sequence number on
/// ([`Each::new`]; the closure's `Ok(false)` stops).
pub struct Each<F> {
    next: u64,
    each: F,
}

impl<F> Each<F> {
    /// A sink of the items from `from` on that calls `each` with each.
    pub fn new<E>(from: u64, each: F) -> Each<F>
    where
        F: FnMut(u64, &str) -> Result<bool, E>,
    {
        Each { next: from, each }
    }
}

impl<F, E> Sink for Each<F>
where
    F: FnMut(u64, &str) -> Result<bool, E>,
    E: From<StoreError>,
{
    type Error = E;

    fn next_item(&self) -> u64 {
        self.next
    }

    fn item(&mut self, seq: u64, json: &str) -> Result<bool, E> {
        self.next = seq + 1;
        (self.each)(seq, json)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{complete, open};
    use super::*;

    /// Every item from `from` on, as `deliver` hands them over.
    fn delivered(state: &State, from: u64) -> Vec<(u64, String)> {
        let mut got = Vec::new();
        state
            .deliver(&mut Each::new(from, |seq, json: &str| {
                got.push((seq, json.to_owned()));
                Ok::<_, StoreError>(true)
            }))
            .unwrap();
        got
    }

    /// The same, read from the database.
    fn stored(state: &State, from: u64) -> Vec<(u64, String)> {
        let mut got = Vec::new();
        state
            .for_each_item(from, |seq, json| {
                got.push((seq, json.to_owned()));
                true
            })
            .unwrap();
        got
    }

    #[test]
    fn kept_items_are_handed_over_as_the_database_holds_them_and_never_before_they_are_durable() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = open(dir.path());
        state.keep_durable_items();
        let seeds: Vec<String> = (0..5).map(|n| format!("http://a.test/{n}")).collect();
        state.add_seeds(&seeds, &[]).unwrap();
        for group in 0..3 {
            // Two completions (two items) per group, then the group's flush.
            for _ in 0..2 {
                if let Some(lease) = state.lease().unwrap() {
                    complete(&mut state, lease, &[]);
                }
            }
            let flush = state.seal().unwrap().unwrap();
            let durable_before = state.items.durable_end();
            assert_eq!(delivered(&state, 0).len() as u64, durable_before, "{group}");
            let receipt = flush.run().unwrap();
            state.durable(receipt);
            // From the start of the last group (memory), from before it (the
            // database) and from its middle: the same as the database.
            for from in 0..=state.items.durable_end() {
                assert_eq!(
                    delivered(&state, from),
                    stored(&state, from),
                    "{group} {from}"
                );
            }
            assert!(state.items.kept(&state.db, durable_before).is_some());
        }
        assert_eq!(delivered(&state, 0).len(), 5);
        // A sink that stops gets no more.
        let mut seen = 0;
        state
            .deliver(&mut Each::new(0, |_, _: &str| {
                seen += 1;
                Ok::<_, StoreError>(seen < 2)
            }))
            .unwrap();
        assert_eq!(seen, 2);
    }
}
