//! What a read returns: an entry's whole range and its value.

use std::fmt;
use std::ops::RangeInclusive;

/// An entry of a tree as a read found it: its whole inclusive range
/// `[first, last]` (even where a search's bounds cut into it) and its
/// value, an [`Ownership::Ref`](crate::Ownership::Ref) that lives as long
/// as the reader's [`Guard`](crate::Guard).
///
/// Returned by [`find`](crate::MapleTree::find),
/// [`find_rev`](crate::MapleTree::find_rev),
/// [`load_entry`](crate::MapleTree::load_entry), [`Iter`](crate::Iter) and
/// [`Cursor`](crate::Cursor). It is the three words a tuple would be, and
/// `Copy` whenever the value is (every `Ownership::Ref` is). Invariant:
/// `first <= last`, so [`range`](Entry::range) is never empty.
///
/// ```
/// let mut tree = maple::MapleTree::new();
/// tree.store_range(10..=19, 'a').unwrap();
/// let g = maple::pin();
/// let e = tree.load_entry(15, &g).unwrap();
/// assert_eq!((e.first(), e.last(), e.value()), (10, 19, &'a'));
/// assert_eq!(e.range(), 10..=19);
/// assert!(e.contains(19) && !e.contains(20));
/// // The shape `Extend` and `FromIterator` take, with the value borrowed:
/// let (range, value): (std::ops::RangeInclusive<u64>, &char) = e.into();
/// assert_eq!((range, value), (10..=19, &'a'));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Entry<R> {
    first: u64,
    last: u64,
    value: R,
}

impl<R> Entry<R> {
    /// An entry read from a leaf. The callers build one only from a leaf
    /// whose stamp held over the read (a torn read is discarded before it
    /// gets here), which is what keeps `first <= last`.
    #[inline]
    pub(crate) fn new(first: u64, last: u64, value: R) -> Self {
        Entry { first, last, value }
    }

    /// The first index of the entry's range.
    #[inline]
    pub fn first(&self) -> u64 {
        self.first
    }

    /// The last index of the entry's range (inclusive).
    #[inline]
    pub fn last(&self) -> u64 {
        self.last
    }

    /// The entry's whole range, `first..=last`.
    #[inline]
    pub fn range(&self) -> RangeInclusive<u64> {
        self.first..=self.last
    }

    /// Whether `index` lies in the entry's range.
    #[inline]
    pub fn contains(&self, index: u64) -> bool {
        self.first <= index && index <= self.last
    }

    /// The value (a reference or a copied word, as the tree's
    /// [`Ownership`](crate::Ownership) makes it).
    #[inline]
    pub fn value(self) -> R {
        self.value
    }
}

impl<R> From<Entry<R>> for (RangeInclusive<u64>, R) {
    /// `(range, value)`, the item shape of the tree's `Extend` and
    /// `FromIterator`.
    #[inline]
    fn from(e: Entry<R>) -> Self {
        (e.first..=e.last, e.value)
    }
}

impl<R: fmt::Debug> fmt::Debug for Entry<R> {
    /// `10..=19 => 'a'`, as a map's entry reads.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} => {:?}", self.first..=self.last, self.value)
    }
}

#[cfg(test)]
impl<R> Entry<R> {
    /// `(first, last, value)`, the shape the unit tests' models use.
    pub(crate) fn parts(self) -> (u64, u64, R) {
        (self.first, self.last, self.value)
    }
}
