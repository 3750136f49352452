//! The engine's one way to take a `std::sync::Mutex`.
//!
//! Every mutex here guards state that stays usable after a panic elsewhere (a
//! mapper, a ring of stderr lines, counters, pending requests): a poisoned lock is
//! recovered rather than turned into a second panic that would take the session down.
//! Locks are held for synchronous updates only, never across an await.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Lock `m`, recovering it if a panic poisoned it.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
