//! The spelling spoken with each peer, negotiated once per process and then sticky: a
//! restart reconnects in the spelling the first connection chose while the card still
//! offers it. The table is behind a `std` mutex, never held across an await.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use crate::bindings::a2a::{Card, CardError, Choice, Spelling};
use crate::sync::lock;

fn table() -> &'static Mutex<HashMap<String, Spelling>> {
    static TABLE: OnceLock<Mutex<HashMap<String, Spelling>>> = OnceLock::new();
    TABLE.get_or_init(Mutex::default)
}

/// The spelling negotiated with the peer at `base`, if any yet.
pub(super) fn sticky(base: &str) -> Option<Spelling> {
    lock(table()).get(base).copied()
}

/// The card's choice, keeping the spelling chosen before when the card still offers it.
pub(super) fn choose(base: &str, card: &Card) -> Result<Choice, CardError> {
    let fresh = card.choose()?;
    let mut t = lock(table());
    let kept = t.get(base).copied().and_then(|s| card.choose_spelling(s));
    let choice = kept.unwrap_or(fresh);
    t.insert(base.to_owned(), choice.spelling);
    Ok(choice)
}
