//! A map keyed by names from the guest's text that stays a short list while it is short. Most
//! functions declare a few registers singly and a few register ranges (`%r<100>`), and the
//! rewrite asks for a register's type at nearly every instruction: finding the name in a list
//! of a few costs less than hashing it. Past [`FEW`] entries the map moves into a `HashMap`
//! (foldhash's hasher, seeded per process: hash.rs), so a module that declares many names gets
//! hashed lookups, never scans that grow with it.

use super::hash::{HashMap, HashMapExt};

/// Whether names `a` and `b` are the same. The passes compare a register against each
/// instruction's (`group::writes`, the lists here): nearly every pair differs, and most
/// differ in length or in their last byte (`%r12`, `%r13`), settled here without a call to
/// `memcmp`, which the plain `==` makes for every pair of equal length.
#[inline]
pub(crate) fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.last() == b.last() && a == b
}

/// Entries kept as a list; more move the map into a `HashMap`.
const FEW: usize = 8;

/// Names to values; inserting a name again replaces its value, as a `HashMap` does.
pub(crate) struct NameMap<'m, V> {
    few: Vec<(&'m str, V)>,
    many: HashMap<&'m str, V>,
}

impl<V> Default for NameMap<'_, V> {
    fn default() -> Self {
        NameMap {
            few: Vec::new(),
            many: HashMap::new(),
        }
    }
}

impl<'m, V> NameMap<'m, V> {
    /// Room for `n` names (a hashed map from the start when that is more than a few).
    pub(crate) fn reserve(&mut self, n: usize) {
        if n > FEW {
            self.many.reserve(n);
        }
    }

    pub(crate) fn insert(&mut self, name: &'m str, v: V) {
        // Hashed once reserved for many names or grown past a few.
        if self.many.capacity() > 0 {
            self.many.extend(self.few.drain(..));
            self.many.insert(name, v);
        } else if let Some(slot) = self.few.iter_mut().find(|(n, _)| same(n, name)) {
            slot.1 = v;
        } else if self.few.len() < FEW {
            self.few.push((name, v));
        } else {
            self.many.reserve(2 * FEW);
            self.many.extend(self.few.drain(..));
            self.many.insert(name, v);
        }
    }

    /// Inlined where it is asked (a register's type, at nearly every instruction): the short
    /// list's walk is a few compares, and the call and its frame, sized for the hashed path,
    /// cost more than they did.
    #[inline]
    pub(crate) fn get(&self, name: &str) -> Option<&V> {
        if self.many.is_empty() {
            self.few.iter().find(|(n, _)| same(n, name)).map(|(_, v)| v)
        } else {
            self.hashed(name)
        }
    }

    #[inline(never)]
    fn hashed(&self, name: &str) -> Option<&V> {
        self.many.get(name)
    }
}

#[cfg(test)]
mod tests {
    use super::NameMap;

    #[test]
    fn finds_the_last_value_of_each_name_short_or_long() {
        for n in [3usize, 8, 9, 40] {
            for reserve in [0, n] {
                let names: Vec<String> = (0..n).map(|k| format!("%r{k}")).collect();
                let mut m = NameMap::default();
                m.reserve(reserve);
                for (k, name) in names.iter().enumerate() {
                    m.insert(name, k);
                }
                m.insert(&names[0], 100);
                assert_eq!(m.get(&names[0]), Some(&100));
                for (k, name) in names.iter().enumerate().skip(1) {
                    assert_eq!(m.get(name), Some(&k));
                }
                assert_eq!(m.get("%x"), None);
            }
        }
    }
}
