//! The set of node paths a session owns.
//!
//! Almost every session owns a handful of nodes (typically the one lock
//! node it waits on or holds), and a `BTreeSet` spends a whole leaf node
//! (~280 bytes) on a single path. So the set holds one path inline, a
//! sorted vector of a few, and a `BTreeSet` past [`SMALL_SET_MAX`], which
//! keeps insert and remove O(log n) for sessions that own many nodes.

use std::collections::{btree_set, BTreeSet};

use serde::{Deserialize, Serialize, Serializer};

/// Largest set kept as a sorted vector: a binary search and a shift of at
/// most this many pointers-and-lengths is a constant.
pub(crate) const SMALL_SET_MAX: usize = 16;

/// Sorted, duplicate-free node paths. The representation is a function of
/// the length alone, so equal sets are equal values on every replica, and
/// it encodes as a plain sequence in path order either way (the bytes a
/// `BTreeSet<String>` gives).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(from = "BTreeSet<Box<str>>")]
pub(crate) struct NodeSet {
    repr: Repr,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Repr {
    /// Exactly one path: the common case needs no allocation of its own.
    One(Box<str>),
    /// None, or two to [`SMALL_SET_MAX`] paths, sorted.
    Small(Vec<Box<str>>),
    /// Boxed so the set stays three words in every form (a bare
    /// `BTreeSet` makes the enum four).
    #[allow(clippy::box_collection)]
    Large(Box<BTreeSet<Box<str>>>),
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Small(Vec::new())
    }
}

impl Repr {
    /// The form for `paths`, which are sorted and distinct.
    fn of_sorted(mut paths: Vec<Box<str>>) -> Repr {
        if paths.len() > SMALL_SET_MAX {
            return Repr::Large(Box::new(paths.into_iter().collect()));
        }
        if paths.len() == 1 {
            if let Some(path) = paths.pop() {
                return Repr::One(path);
            }
        }
        paths.shrink_to_fit();
        Repr::Small(paths)
    }
}

impl NodeSet {
    /// Adds `path`; false if it was there already.
    pub fn insert(&mut self, path: Box<str>) -> bool {
        if let Repr::Large(set) = &mut self.repr {
            return set.insert(path);
        }
        let Err(at) = self.sorted().binary_search(&path) else {
            return false;
        };
        let mut paths = self.take_sorted();
        paths.reserve_exact(1);
        paths.insert(at, path);
        self.repr = Repr::of_sorted(paths);
        true
    }

    /// Removes `path`; false if it was not there.
    pub fn remove(&mut self, path: &str) -> bool {
        if let Repr::Large(set) = &mut self.repr {
            let removed = set.remove(path);
            if set.len() == SMALL_SET_MAX {
                self.repr = Repr::of_sorted(self.take_sorted());
            }
            return removed;
        }
        let Ok(at) = self.sorted().binary_search_by(|p| (**p).cmp(path)) else {
            return false;
        };
        let mut paths = self.take_sorted();
        paths.remove(at);
        self.repr = Repr::of_sorted(paths);
        true
    }

    pub fn contains(&self, path: &str) -> bool {
        match &self.repr {
            Repr::Large(set) => set.contains(path),
            _ => self.sorted().binary_search_by(|p| (**p).cmp(path)).is_ok(),
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.iter().len()
    }

    /// The paths in order.
    pub fn iter(&self) -> Iter<'_> {
        match &self.repr {
            Repr::Large(set) => Iter::Large(set.iter()),
            _ => Iter::Small(self.sorted().iter()),
        }
    }

    /// The paths of a one- or small-form set (empty for the large form).
    fn sorted(&self) -> &[Box<str>] {
        match &self.repr {
            Repr::One(path) => std::slice::from_ref(path),
            Repr::Small(paths) => paths,
            Repr::Large(_) => &[],
        }
    }

    /// Empties the set, returning its paths in order.
    fn take_sorted(&mut self) -> Vec<Box<str>> {
        match std::mem::take(&mut self.repr) {
            Repr::One(path) => vec![path],
            Repr::Small(paths) => paths,
            Repr::Large(set) => set.into_iter().collect(),
        }
    }
}

/// A set's paths in order. Its length is exact, which the encoding needs.
pub(crate) enum Iter<'a> {
    Small(std::slice::Iter<'a, Box<str>>),
    Large(btree_set::Iter<'a, Box<str>>),
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a Box<str>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Small(i) => i.next(),
            Iter::Large(i) => i.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Iter::Small(i) => i.size_hint(),
            Iter::Large(i) => i.size_hint(),
        }
    }
}

impl From<BTreeSet<Box<str>>> for NodeSet {
    fn from(set: BTreeSet<Box<str>>) -> Self {
        let repr = if set.len() > SMALL_SET_MAX {
            Repr::Large(Box::new(set))
        } else {
            Repr::of_sorted(set.into_iter().collect())
        };
        NodeSet { repr }
    }
}

impl Serialize for NodeSet {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use proptest::prelude::*;

    /// The form a set of `len` paths must have.
    fn has_its_form(set: &NodeSet, len: usize) -> bool {
        match &set.repr {
            Repr::One(_) => len == 1,
            Repr::Small(paths) => paths.len() == len && len != 1 && len <= SMALL_SET_MAX,
            Repr::Large(_) => len > SMALL_SET_MAX,
        }
    }

    #[test]
    fn switches_to_a_tree_past_the_small_limit_and_back() {
        let mut set = NodeSet::default();
        let paths: Vec<Box<str>> = (0..SMALL_SET_MAX + 3)
            .map(|i| format!("/p/{}", (i * 7) % 23).into())
            .collect();
        for path in &paths {
            assert!(set.insert(path.clone()));
            assert!(!set.insert(path.clone()), "a second insert is refused");
            assert!(has_its_form(&set, set.len()));
        }
        assert!(matches!(set.repr, Repr::Large(_)));
        assert!(set.contains("/p/7") && !set.contains("/p/9"));
        for path in &paths[..3] {
            assert!(set.remove(path));
            assert!(!set.remove(path));
        }
        assert!(matches!(set.repr, Repr::Small(_)) && set.len() == SMALL_SET_MAX);
        let mut expected = paths[3..].to_vec();
        expected.sort();
        assert_eq!(set.iter().cloned().collect::<Vec<_>>(), expected);
        // Down to one path, held inline, and to none.
        for path in &expected[1..] {
            assert!(set.remove(path));
            assert!(has_its_form(&set, set.len()));
        }
        assert!(matches!(&set.repr, Repr::One(p) if *p == expected[0]));
        assert!(set.contains(&expected[0]) && !set.contains(&expected[1]));
        assert!(set.insert(expected[1].clone()) && set.len() == 2);
        assert!(set.remove(&expected[1]) && set.remove(&expected[0]));
        assert!(!set.remove(&expected[0]));
        assert_eq!(set, NodeSet::default());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Answers, order and encoding are a `BTreeSet`'s, in either form.
        #[test]
        fn answers_like_a_btreeset(ops in prop::collection::vec((any::<bool>(), 0..40u8), 1..300)) {
            let mut set = NodeSet::default();
            let mut model = BTreeSet::new();
            for (insert, n) in ops {
                let path: Box<str> = format!("/n/{n}").into();
                if insert {
                    prop_assert_eq!(set.insert(path.clone()), model.insert(path));
                } else {
                    prop_assert_eq!(set.remove(&path), model.remove(&path));
                }
                prop_assert!(has_its_form(&set, model.len()));
                prop_assert_eq!(set.len(), model.len());
                prop_assert!(set.iter().eq(model.iter()));
                for n in 0..40u8 {
                    let path = format!("/n/{n}");
                    prop_assert_eq!(set.contains(&path), model.contains(path.as_str()));
                }
                let bytes = bincode::serialize(&set).expect("encode");
                prop_assert_eq!(&bytes, &bincode::serialize(&model).expect("encode"));
                let decoded: NodeSet = bincode::deserialize(&bytes).expect("decode");
                prop_assert_eq!(&decoded, &set);
            }
        }
    }
}
