//! anon_vma: the object that ties a VMA's anonymous pages to every VMA
//! that may map them (after fork, a parent's and its children's).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// An anon_vma. A VMA gets one on its first write fault (or shares a
/// compatible neighbour's); a forked child's VMA gets a new one chained to
/// its parent's.
///
/// The anon_vma decides merging: two VMAs with different anon_vmas never
/// merge, and a VMA whose chain holds a parent's anon_vma merges only with
/// VMAs that already share its anon_vma.
#[derive(Debug)]
pub struct AnonVma {
    id: u64,
}

static NEXT_ANON_ID: AtomicU64 = AtomicU64::new(1);

impl AnonVma {
    /// A fresh anon_vma.
    pub fn new() -> Arc<AnonVma> {
        Arc::new(AnonVma {
            id: NEXT_ANON_ID.fetch_add(1, Ordering::Relaxed),
        })
    }

    /// A number unique to this anon_vma.
    pub fn id(&self) -> u64 {
        self.id
    }
}

/// A VMA's link to its anon_vma: the kernel's `vma->anon_vma` plus the one
/// fact about its `anon_vma_chain` that merging needs.
#[derive(Debug, Clone)]
pub struct AnonLink {
    /// The VMA's own anon_vma.
    pub anon_vma: Arc<AnonVma>,
    /// The chain also holds ancestors' anon_vmas (the VMA was forked and
    /// not all of its pages have been copied since): the kernel's
    /// `!list_is_singular(&vma->anon_vma_chain)`.
    pub inherited: bool,
}

impl AnonLink {
    /// Whether two links name the same anon_vma.
    pub(crate) fn same(a: Option<&AnonLink>, b: Option<&AnonLink>) -> bool {
        match (a, b) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(&a.anon_vma, &b.anon_vma),
            _ => false,
        }
    }
}
