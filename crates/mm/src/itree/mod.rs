//! Interval trees: `[first, last]` ranges of `u64` page offsets, each with
//! an id and a value, found by overlap with another range.
//!
//! This is the store behind a file's i_mmap: every VMA that maps the file,
//! keyed by the range of file pages it maps. The reverse-map walk asks
//! "which VMAs map any page of `[a, b]`", so the tree must answer overlap
//! queries in O(log n + k) while VMAs come and go in O(log n).
//!
//! Two implementations sit behind the one type [`Itree`], picked at run time
//! by [`ItreeKind`]:
//!
//! - [`ItreeKind::Rb`]: an augmented red-black tree, one node per interval,
//!   each node holding the largest `last` in its subtree (the kernel's
//!   choice for i_mmap). Details and invariants in `rb.rs`, and in the
//!   crate's red-black core it builds on (`rbtree.rs`), which the legacy
//!   VMA index shares.
//! - [`ItreeKind::BTree`]: an augmented B+ tree with 16-wide nodes, each
//!   child slot holding its subtree's smallest key and largest `last`, so a
//!   query reads a few contiguous arrays instead of chasing one pointer per
//!   interval. Details and invariants in `btree.rs`.
//!
//! Both keep their nodes in an arena `Vec` addressed by `u32` indices with a
//! free list, in safe Rust.
//!
//! ## Keys and order
//!
//! An entry's key is `(first, last, id)`, ordered lexicographically; the id
//! tells apart entries with equal ranges (the i_mmap passes a VMA's
//! address). Queries visit entries in ascending key order, so results are
//! the same, in the same order, whichever kind holds them.

mod btree;
mod rb;

use std::fmt;
use std::ops::ControlFlow;
use std::str::FromStr;

use crate::Errno;

/// Which implementation an interval tree uses.
///
/// The default is [`BTree`](ItreeKind::BTree): in `vmbench itree` on an
/// i_mmap-like population (docs/RESULTS.md) it answers page queries about
/// 2–4 times faster at every size from 100 to 50,000 entries and churns
/// (insert + remove) faster at 50,000, while `Rb` churns 7–33% faster up
/// to 6,000 entries.
///
/// ```
/// use mm::itree::ItreeKind;
/// assert_eq!("btree".parse::<ItreeKind>(), Ok(ItreeKind::BTree));
/// assert_eq!(ItreeKind::Rb.to_string(), "rb");
/// assert!("avl".parse::<ItreeKind>().is_err());
/// assert_eq!(ItreeKind::default(), ItreeKind::BTree);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ItreeKind {
    /// Augmented red-black tree, one node per interval.
    Rb,
    /// Augmented B+ tree with 16-wide nodes.
    #[default]
    BTree,
}

impl ItreeKind {
    /// Every kind, in report order.
    pub const ALL: [ItreeKind; 2] = [ItreeKind::Rb, ItreeKind::BTree];

    /// The name used on command lines and in reports: `"rb"` or `"btree"`.
    ///
    /// ```
    /// use mm::itree::ItreeKind;
    /// assert_eq!(ItreeKind::BTree.name(), "btree");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            ItreeKind::Rb => "rb",
            ItreeKind::BTree => "btree",
        }
    }
}

impl FromStr for ItreeKind {
    type Err = String;

    /// Parses a [`name`](ItreeKind::name); the error lists the valid ones.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim();
        ItreeKind::ALL
            .into_iter()
            .find(|kind| kind.name() == wanted)
            .ok_or_else(|| {
                let valid: Vec<&str> = ItreeKind::ALL.iter().map(|k| k.name()).collect();
                format!(
                    "unknown interval tree kind '{wanted}' (valid: {})",
                    valid.join(", ")
                )
            })
    }
}

impl fmt::Display for ItreeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One entry as a query hands it out.
#[derive(Debug)]
pub struct Entry<'a, V> {
    /// First page offset of the range (inclusive).
    pub first: u64,
    /// Last page offset of the range (inclusive).
    pub last: u64,
    /// The caller's id that tells apart equal ranges.
    pub id: u64,
    /// The stored value.
    pub value: &'a V,
}

// Manual impls: deriving would demand `V: Clone`, but only a reference is
// copied.
impl<V> Clone for Entry<'_, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<V> Copy for Entry<'_, V> {}

/// The sort key of an entry: lexicographic on `(first, last, id)` by the
/// field order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub(crate) struct Key {
    pub(crate) first: u64,
    pub(crate) last: u64,
    pub(crate) id: u64,
}

impl Key {
    fn new(first: u64, last: u64, id: u64) -> Key {
        Key { first, last, id }
    }

    fn entry<V>(self, value: &V) -> Entry<'_, V> {
        Entry {
            first: self.first,
            last: self.last,
            id: self.id,
            value,
        }
    }
}

/// The two implementations; a plain enum so a call costs one predictable
/// branch and no virtual dispatch.
#[derive(Clone)]
enum Inner<V> {
    Rb(rb::RbTree<V>),
    BTree(btree::BTree<V>),
}

/// An interval tree mapping `[first, last]` ranges (inclusive, `u64` page
/// offsets) plus an id to values, with overlap queries.
///
/// Insert and remove are O(log n); [`visit_overlap`](Itree::visit_overlap)
/// is O(log n + k) for k results. Bad input ([`Errno::EINVAL`] for an empty
/// range, [`Errno::EEXIST`] for a duplicate key) leaves the tree unchanged.
///
/// ```
/// use std::ops::ControlFlow;
/// use mm::itree::{Itree, ItreeKind};
/// use mm::Errno;
///
/// for kind in ItreeKind::ALL {
///     let mut tree = Itree::new(kind);
///     tree.insert(0, 9, 1, "text").unwrap();
///     tree.insert(10, 19, 2, "data").unwrap();
///     tree.insert(5, 14, 3, "overlay").unwrap();
///     assert_eq!(tree.insert(0, 9, 1, "again"), Err(Errno::EEXIST));
///     assert_eq!(tree.insert(9, 0, 4, "backwards"), Err(Errno::EINVAL));
///
///     // Who maps page 12? Results come in (first, last, id) order.
///     let mut hits = Vec::new();
///     tree.visit_overlap(12, 12, |e| {
///         hits.push(*e.value);
///         ControlFlow::Continue(())
///     });
///     assert_eq!(hits, ["overlay", "data"]);
///
///     assert_eq!(tree.remove(5, 14, 3), Some("overlay"));
///     assert_eq!(tree.len(), 2);
///     tree.validate().unwrap();
/// }
/// ```
#[derive(Clone)]
pub struct Itree<V> {
    inner: Inner<V>,
}

impl<V> Default for Itree<V> {
    /// An empty tree of the default kind.
    fn default() -> Self {
        Itree::new(ItreeKind::default())
    }
}

impl<V> Itree<V> {
    /// An empty tree of the given kind.
    ///
    /// ```
    /// use mm::itree::{Itree, ItreeKind};
    /// let tree: Itree<()> = Itree::new(ItreeKind::BTree);
    /// assert!(tree.is_empty() && tree.kind() == ItreeKind::BTree);
    /// ```
    pub fn new(kind: ItreeKind) -> Self {
        let inner = match kind {
            ItreeKind::Rb => Inner::Rb(rb::RbTree::new()),
            ItreeKind::BTree => Inner::BTree(btree::BTree::new()),
        };
        Itree { inner }
    }

    /// The implementation this tree uses.
    pub fn kind(&self) -> ItreeKind {
        match &self.inner {
            Inner::Rb(_) => ItreeKind::Rb,
            Inner::BTree(_) => ItreeKind::BTree,
        }
    }

    /// Adds `value` under the key `(first, last, id)`.
    ///
    /// The id disambiguates equal ranges (the i_mmap passes a VMA's
    /// address). Errors, with the tree unchanged: [`Errno::EINVAL`] if
    /// `first > last`, [`Errno::EEXIST`] if the exact key is present,
    /// [`Errno::ENOMEM`] if the arena would outgrow its `u32` indices.
    ///
    /// ```
    /// use mm::itree::{Itree, ItreeKind};
    /// use mm::Errno;
    /// let mut tree = Itree::new(ItreeKind::Rb);
    /// tree.insert(0, u64::MAX, 7, ()).unwrap();
    /// tree.insert(0, u64::MAX, 8, ()).unwrap(); // same range, other id
    /// assert_eq!(tree.insert(0, u64::MAX, 7, ()), Err(Errno::EEXIST));
    /// assert_eq!(tree.len(), 2);
    /// ```
    pub fn insert(&mut self, first: u64, last: u64, id: u64, value: V) -> Result<(), Errno> {
        if first > last {
            return Err(Errno::EINVAL);
        }
        let key = Key::new(first, last, id);
        // The profile recorder counts the tree's header (root, length,
        // arenas) as written by an edit and read by a query, besides the
        // nodes each kind reports.
        crate::profile::touch(self, true);
        match &mut self.inner {
            Inner::Rb(t) => t.insert(key, value),
            Inner::BTree(t) => t.insert(key, value),
        }
    }

    /// Removes the entry with key `(first, last, id)` and returns its
    /// value, or `None` (tree unchanged) if there is none.
    ///
    /// ```
    /// use mm::itree::{Itree, ItreeKind};
    /// let mut tree = Itree::new(ItreeKind::BTree);
    /// tree.insert(3, 4, 1, 'a').unwrap();
    /// assert_eq!(tree.remove(3, 4, 2), None);
    /// assert_eq!(tree.remove(3, 4, 1), Some('a'));
    /// assert!(tree.is_empty());
    /// ```
    pub fn remove(&mut self, first: u64, last: u64, id: u64) -> Option<V> {
        let key = Key::new(first, last, id);
        crate::profile::touch(self, true);
        match &mut self.inner {
            Inner::Rb(t) => t.remove(&key),
            Inner::BTree(t) => t.remove(&key),
        }
    }

    /// The value stored under `(first, last, id)`, if any.
    ///
    /// ```
    /// use mm::itree::{Itree, ItreeKind};
    /// let mut tree = Itree::new(ItreeKind::Rb);
    /// tree.insert(1, 2, 3, "v").unwrap();
    /// assert_eq!(tree.get(1, 2, 3), Some(&"v"));
    /// assert_eq!(tree.get(1, 2, 4), None);
    /// ```
    pub fn get(&self, first: u64, last: u64, id: u64) -> Option<&V> {
        let key = Key::new(first, last, id);
        crate::profile::touch(self, false);
        match &self.inner {
            Inner::Rb(t) => t.get(&key),
            Inner::BTree(t) => t.get(&key),
        }
    }

    /// Calls `f` on every entry whose range shares at least one offset with
    /// `[first, last]`, in ascending `(first, last, id)` order, until `f`
    /// breaks; returns `Break` if it did. An empty query (`first > last`)
    /// overlaps nothing.
    ///
    /// ```
    /// use std::ops::ControlFlow;
    /// use mm::itree::{Itree, ItreeKind};
    /// let mut tree = Itree::new(ItreeKind::BTree);
    /// for i in 0..100u64 {
    ///     tree.insert(i * 10, i * 10 + 9, i, i).unwrap();
    /// }
    /// // Stop at the first mapping of any page in [95, 300].
    /// let mut first_hit = None;
    /// let flow = tree.visit_overlap(95, 300, |e| {
    ///     first_hit = Some(*e.value);
    ///     ControlFlow::Break(())
    /// });
    /// assert!(flow.is_break());
    /// assert_eq!(first_hit, Some(9));
    /// ```
    pub fn visit_overlap<'a>(
        &'a self,
        first: u64,
        last: u64,
        f: impl FnMut(Entry<'a, V>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        if first > last {
            return ControlFlow::Continue(());
        }
        let mut f = f;
        crate::profile::touch(self, false);
        match &self.inner {
            Inner::Rb(t) => t.visit_overlap(first, last, &mut f),
            Inner::BTree(t) => t.visit_overlap(first, last, &mut f),
        }
    }

    /// Calls `f` on every entry in ascending key order until `f` breaks;
    /// returns `Break` if it did.
    ///
    /// ```
    /// use std::ops::ControlFlow;
    /// use mm::itree::{Itree, ItreeKind};
    /// let mut tree = Itree::new(ItreeKind::Rb);
    /// tree.insert(5, 6, 0, ()).unwrap();
    /// tree.insert(1, 9, 0, ()).unwrap();
    /// let mut firsts = Vec::new();
    /// tree.visit_all(|e| { firsts.push(e.first); ControlFlow::Continue(()) });
    /// assert_eq!(firsts, [1, 5]);
    /// ```
    pub fn visit_all<'a>(
        &'a self,
        f: impl FnMut(Entry<'a, V>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        self.visit_overlap(0, u64::MAX, f)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        match &self.inner {
            Inner::Rb(t) => t.len(),
            Inner::BTree(t) => t.len(),
        }
    }

    /// Whether the tree has no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes every entry and releases the arena.
    ///
    /// ```
    /// use mm::itree::{Itree, ItreeKind};
    /// let mut tree = Itree::new(ItreeKind::BTree);
    /// tree.insert(1, 1, 1, ()).unwrap();
    /// tree.clear();
    /// assert!(tree.is_empty() && tree.height() == 0);
    /// ```
    pub fn clear(&mut self) {
        match &mut self.inner {
            Inner::Rb(t) => t.clear(),
            Inner::BTree(t) => t.clear(),
        }
    }

    /// Levels from the root to the deepest node (0 when empty): nodes on
    /// the longest root-to-leaf path for `Rb`, node levels for `BTree`.
    ///
    /// ```
    /// use mm::itree::{Itree, ItreeKind};
    /// let mut rb = Itree::new(ItreeKind::Rb);
    /// let mut bt = Itree::new(ItreeKind::BTree);
    /// for i in 0..1000u64 {
    ///     rb.insert(i, i, 0, ()).unwrap();
    ///     bt.insert(i, i, 0, ()).unwrap();
    /// }
    /// assert!(rb.height() <= 20); // at most 2 log2(n + 1)
    /// assert!(bt.height() <= 4);
    /// ```
    pub fn height(&self) -> usize {
        match &self.inner {
            Inner::Rb(t) => t.height(),
            Inner::BTree(t) => t.height(),
        }
    }

    /// Checks every structural invariant and the augmentation (see the
    /// implementation modules); the error names the first one broken.
    /// O(n); meant for tests.
    pub fn validate(&self) -> Result<(), String> {
        match &self.inner {
            Inner::Rb(t) => t.validate(),
            Inner::BTree(t) => t.validate(),
        }
    }
}

impl<V: fmt::Debug> fmt::Debug for Itree<V> {
    /// Shows the kind and the entries in key order.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Entries<'t, V>(&'t Itree<V>);
        impl<V: fmt::Debug> fmt::Debug for Entries<'_, V> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let mut list = f.debug_list();
                let _ = self.0.visit_all(|e| {
                    list.entry(&format_args!(
                        "[{:#x}, {:#x}] #{:#x} => {:?}",
                        e.first, e.last, e.id, e.value
                    ));
                    ControlFlow::Continue(())
                });
                list.finish()
            }
        }
        f.debug_struct("Itree")
            .field("kind", &self.kind())
            .field("len", &self.len())
            .field("entries", &Entries(self))
            .finish()
    }
}

/// The B+ tree's arena slots are addressed by `u32`; this value means "no
/// node". (The red-black tree uses the core's sentinel index instead.)
const NIL: u32 = u32::MAX;
