//! Handle tables: the map from a handle value a C caller holds to the driver object behind it.
//! Values come from [`crate::driver::new_handle`] and are never reused, so a stale handle finds
//! nothing rather than a newer object.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::driver::{self, Tag};

/// One table of live objects of one kind.
pub(crate) struct Table<T> {
    tag: Tag,
    map: Mutex<BTreeMap<u64, Arc<T>>>,
}

impl<T> Table<T> {
    /// An empty table for handles of kind `tag`.
    pub(crate) const fn new(tag: Tag) -> Table<T> {
        Table {
            tag,
            map: Mutex::new(BTreeMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<u64, Arc<T>>> {
        // A panic while holding the lock cannot leave the map half-updated (each operation is a
        // single insert/remove), so poisoning is safe to ignore.
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Builds an object with a fresh handle value and registers it.
    pub(crate) fn insert_with(&self, make: impl FnOnce(u64) -> Arc<T>) -> (u64, Arc<T>) {
        let handle = driver::new_handle(self.tag);
        let obj = make(handle);
        self.lock().insert(handle, Arc::clone(&obj));
        (handle, obj)
    }

    /// Registers `obj` under a handle value drawn earlier from `driver::new_handle` (stream
    /// capture names nodes before their graph exists).
    pub(crate) fn insert_at(&self, handle: u64, obj: Arc<T>) {
        self.lock().insert(handle, obj);
    }

    /// The object behind `handle`, if it is live.
    pub(crate) fn get(&self, handle: u64) -> Option<Arc<T>> {
        if !driver::has_tag(handle, self.tag) {
            return None;
        }
        self.lock().get(&handle).cloned()
    }

    /// Unregisters `handle`, returning its object.
    pub(crate) fn remove(&self, handle: u64) -> Option<Arc<T>> {
        self.lock().remove(&handle)
    }

    /// The first live object for which `pred` is true.
    pub(crate) fn find(&self, pred: impl Fn(&T) -> bool) -> Option<Arc<T>> {
        self.lock().values().find(|v| pred(v)).cloned()
    }

    /// Every live object.
    pub(crate) fn all(&self) -> Vec<Arc<T>> {
        self.lock().values().cloned().collect()
    }

    /// Unregisters every object for which `doomed` is true, returning them.
    pub(crate) fn remove_where(&self, doomed: impl Fn(&T) -> bool) -> Vec<Arc<T>> {
        let mut map = self.lock();
        let keys: Vec<u64> = map
            .iter()
            .filter(|(_, v)| doomed(v))
            .map(|(k, _)| *k)
            .collect();
        keys.iter().filter_map(|k| map.remove(k)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removed_handle_is_never_found_again_and_values_are_not_reused() {
        let table: Table<u32> = Table::new(Tag::Event);
        let (a, _) = table.insert_with(|_| Arc::new(1));
        assert_eq!(table.remove(a).as_deref(), Some(&1));
        let (b, _) = table.insert_with(|_| Arc::new(2));
        assert_ne!(a, b);
        assert!(table.get(a).is_none());
        assert_eq!(table.get(b).as_deref(), Some(&2));
    }

    #[test]
    fn handle_of_another_kind_is_not_found() {
        let table: Table<u32> = Table::new(Tag::Event);
        let (a, _) = table.insert_with(|_| Arc::new(1));
        let forged = (a & !0xf) | Tag::Stream as u64;
        assert!(table.get(forged).is_none());
    }
}
