//! The one error type of the crate, with the Linux errno each case maps to.

use std::fmt;

/// Why a tree operation was refused. A refused operation changes nothing.
///
/// ```
/// let mut tree = maple::MapleTree::new();
/// let err = tree.store_range(9..=3, ()).unwrap_err();
/// assert_eq!(err, maple::Error::InvalidRange { first: 9, last: 3 });
/// assert_eq!(err.errno(), 22); // EINVAL
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// An empty range given to a write: its first index is above its last
    /// (`5..=4`), or it is a `RangeInclusive` already iterated to its end
    /// (`EINVAL`).
    InvalidRange {
        /// First index given.
        first: u64,
        /// Last index given.
        last: u64,
    },
    /// Another argument is out of its domain, e.g. a zero-size gap request
    /// or `min > max` (`EINVAL`).
    InvalidArgument(&'static str),
    /// `insert_range` over an index that already has an entry (`EEXIST`).
    Exists,
    /// No free area of the requested size in the given bounds (`EBUSY`,
    /// as the kernel's `mas_empty_area` returns).
    NoSpace,
    /// `from_sorted` input that is not ascending and non-overlapping
    /// (`EINVAL`).
    Unsorted,
}

impl Error {
    /// The Linux errno for this error (positive, as in `errno.h`).
    pub fn errno(&self) -> i32 {
        match self {
            Error::InvalidRange { .. } | Error::InvalidArgument(_) | Error::Unsorted => 22,
            Error::Exists => 17,
            Error::NoSpace => 16,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidRange { first, last } if first > last => {
                write!(f, "invalid range: first {first:#x} is above last {last:#x}")
            }
            Error::InvalidRange { first, last } => {
                write!(f, "invalid range: {first:#x}..={last:#x} is exhausted")
            }
            Error::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            Error::Exists => f.write_str("range is already occupied"),
            Error::NoSpace => f.write_str("no free area of that size in the given bounds"),
            Error::Unsorted => f.write_str("input ranges are not ascending and non-overlapping"),
        }
    }
}

impl std::error::Error for Error {}

/// A broken tree invariant found by [`MapleTree::validate`](crate::MapleTree::validate):
/// which one, and where (node, slot, index), in words.
///
/// ```
/// let tree: maple::MapleTree<u8> = maple::MapleTree::new();
/// let checked: Result<(), maple::Invalid> = tree.validate();
/// assert!(checked.is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(pub(crate) String);

impl Invalid {
    /// The description of the broken invariant.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "maple tree invariant broken: {}", self.0)
    }
}

impl std::error::Error for Invalid {}
