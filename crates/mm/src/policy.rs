//! The design choices of a model instance, in one place: [`Policy`].
//!
//! Every structure the kernel has tried more than one way of keeping is
//! chosen here, once, and read by everything that builds one: the VMA
//! index of each address space ([`Mm`]), the reverse map of
//! each file ([`File`]) — including the files the model makes
//! itself, such as the shmem file behind a shared anonymous mapping — and
//! the lock of every anon_vma family. Address spaces made by `fork` and
//! `exec` inherit their parent's policy.
//!
//! A policy is shared as an `Arc<Policy>`; [`Policy::mm`] and
//! [`Policy::file`] make address spaces and files under it, so two
//! structures that should agree (the lock kind of the i_mmap and of the
//! anon_vma locks, say) cannot be configured apart.
//!
//! ```
//! use std::sync::Arc;
//! use mm::policy::{ImapDesign, Policy};
//! use mm::{MapFlags, Prot};
//!
//! let policy = Arc::new(Policy { imap: ImapDesign::SplitLocked, ..Policy::default() });
//! let libc = policy.file("libc.so.6", 2 << 20);
//! let mm = policy.mm();
//! mm.mmap(0, 8192, Prot::READ, MapFlags::PRIVATE, Some(&libc), 0).unwrap();
//! assert_eq!(libc.imap().mode(), ImapDesign::SplitLocked);
//! assert!(Arc::ptr_eq(mm.policy(), libc.policy()));
//! ```

use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, OnceLock};

pub use crate::index::IndexKind;
pub use crate::itree::ItreeKind;
pub use crate::lock::LockKind;
pub use crate::topology::Topology;

use crate::file::{File, FileMode};
use crate::layout::Layout;
use crate::Mm;

/// Every design choice of the model. See the [module documentation](self).
///
/// The default is the kernel's current design: the maple tree, one i_mmap
/// tree under one rwsem, the anon_vma end-only rule, on the host's
/// topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Which structure keeps each address space's VMAs.
    pub index: IndexKind,
    /// Which design keeps each file's reverse map (`i_mmap`).
    pub imap: ImapDesign,
    /// How CPUs form the split i_mmap designs' groups (ignored by
    /// `single`).
    pub group_by: GroupBy,
    /// Which group a newly linked VMA without a parent goes to.
    pub placement: Placement,
    /// When the `adaptive` i_mmap design converts.
    pub adaptive: AdaptiveConfig,
    /// Which interval tree every i_mmap tree is.
    pub itree: ItreeKind,
    /// Which reader-writer lock every reverse-map lock is: the i_mmap
    /// locks and the anon_vma family locks alike. (`mmap_lock` is always
    /// the kernel-style rwsem.)
    pub lock: LockKind,
    /// The anon_vma end-only rule: an adjustment that only moves a VMA's
    /// end takes no anon_vma lock, because the chain entries are keyed by
    /// their first page, which does not move ([`anon`](crate::anon)).
    pub anon_rule: bool,
    /// The machine the i_mmap groups come from, real or emulated; `None`
    /// is this machine's, detected once.
    pub topology: Option<Arc<Topology>>,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            index: IndexKind::default(),
            imap: ImapDesign::default(),
            group_by: GroupBy::default(),
            placement: Placement::default(),
            adaptive: AdaptiveConfig::default(),
            itree: ItreeKind::default(),
            lock: LockKind::default(),
            anon_rule: true,
            topology: None,
        }
    }
}

impl Policy {
    /// The default policy, shared: what [`File::new`] and [`Mm::default`]
    /// build under.
    ///
    /// ```
    /// use mm::policy::Policy;
    /// assert_eq!(**Policy::shared_default(), Policy::default());
    /// ```
    pub fn shared_default() -> &'static Arc<Policy> {
        static DEFAULT: OnceLock<Arc<Policy>> = OnceLock::new();
        DEFAULT.get_or_init(|| Arc::new(Policy::default()))
    }

    /// An empty address space under this policy, with the default
    /// [`Layout`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// use mm::policy::Policy;
    /// let mm = Arc::new(Policy::default()).mm();
    /// assert_eq!(mm.map_count(), 0);
    /// ```
    pub fn mm(self: &Arc<Self>) -> Mm {
        Mm::new(self, Layout::default())
    }

    /// A file opened read-write, its reverse map kept as this policy says.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use mm::policy::{ImapDesign, Policy};
    /// let policy = Arc::new(Policy { imap: ImapDesign::Distributed, ..Policy::default() });
    /// assert_eq!(policy.file("libc.so.6", 4096).imap().mode(), ImapDesign::Distributed);
    /// ```
    pub fn file(self: &Arc<Self>, name: impl Into<String>, size: u64) -> Arc<File> {
        File::open(self, name, size, FileMode::default())
    }

    /// A file opened with `mode`, its reverse map kept as this policy
    /// says.
    pub fn file_with_mode(
        self: &Arc<Self>,
        name: impl Into<String>,
        size: u64,
        mode: FileMode,
    ) -> Arc<File> {
        File::open(self, name, size, mode)
    }

    /// The topology the i_mmap groups come from: the configured one, else
    /// this machine's.
    pub(crate) fn topology(&self) -> Arc<Topology> {
        self.topology.clone().unwrap_or_else(crate::topology::host)
    }
}

/// Which design keeps a file's reverse map.
///
/// ```
/// use mm::policy::ImapDesign;
/// assert_eq!("split-locked".parse::<ImapDesign>(), Ok(ImapDesign::SplitLocked));
/// assert_eq!(ImapDesign::default(), ImapDesign::Single);
/// assert!("percpu".parse::<ImapDesign>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ImapDesign {
    /// One tree, one rwsem: the kernel today.
    #[default]
    Single,
    /// One tree per group, still one rwsem.
    Split,
    /// A tree and an rwsem per group; whole-file walks take every group's
    /// lock in index order.
    SplitLocked,
    /// A tree and a lock per group under a top-level rwsem, taken shared by
    /// insert and remove and exclusive by whole-file walks.
    Distributed,
    /// Starts as `single`; converts to `distributed` once contention is
    /// seen (and may convert back).
    Adaptive,
}

impl ImapDesign {
    /// Every design, in report order.
    pub const ALL: [ImapDesign; 5] = [
        ImapDesign::Single,
        ImapDesign::Split,
        ImapDesign::SplitLocked,
        ImapDesign::Distributed,
        ImapDesign::Adaptive,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            ImapDesign::Single => "single",
            ImapDesign::Split => "split",
            ImapDesign::SplitLocked => "split-locked",
            ImapDesign::Distributed => "distributed",
            ImapDesign::Adaptive => "adaptive",
        }
    }
}

impl fmt::Display for ImapDesign {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ImapDesign {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ImapDesign::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown i_mmap design {s:?} (expected single, split, split-locked, distributed or adaptive)"
                )
            })
    }
}

/// How CPUs are grouped into the split designs' groups.
///
/// ```
/// use mm::policy::GroupBy;
/// assert_eq!("node".parse::<GroupBy>(), Ok(GroupBy::Node));
/// assert_eq!("cpus:4".parse::<GroupBy>(), Ok(GroupBy::Cpus(4)));
/// assert!("cpus:0".parse::<GroupBy>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum GroupBy {
    /// One group per NUMA node when the topology has more than one, else
    /// one per CPU.
    #[default]
    Auto,
    /// One group per NUMA node.
    Node,
    /// One group per `n` consecutive CPUs.
    Cpus(usize),
}

impl FromStr for GroupBy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("bad grouping {s:?} (expected auto, node or cpus:N with N > 0)");
        match s {
            "auto" => Ok(GroupBy::Auto),
            "node" => Ok(GroupBy::Node),
            _ => {
                let n = s.strip_prefix("cpus:").ok_or_else(bad)?;
                match n.parse::<usize>() {
                    Ok(n) if n > 0 => Ok(GroupBy::Cpus(n)),
                    _ => Err(bad()),
                }
            }
        }
    }
}

impl fmt::Display for GroupBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GroupBy::Auto => f.write_str("auto"),
            GroupBy::Node => f.write_str("node"),
            GroupBy::Cpus(n) => write!(f, "cpus:{n}"),
        }
    }
}

/// Which group a newly linked VMA with no parent goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Placement {
    /// The group of the CPU the linking thread runs on (with the `lab`
    /// feature, the virtual CPU it is bound to).
    #[default]
    Local,
    /// The group holding the fewest VMAs at the time.
    LeastPopulated,
}

/// When the `adaptive` design changes mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AdaptiveConfig {
    /// Failed try-locks of the central lock (by insert and remove) after
    /// which the map converts to `distributed`.
    pub convert_after: u32,
    /// Convert back to `single` when, in `distributed` mode, every group
    /// has seen a window of this many inserts and removes without one
    /// contended acquisition. `None` never converts back.
    pub revert_window: Option<u32>,
}

impl Default for AdaptiveConfig {
    fn default() -> Self {
        AdaptiveConfig {
            convert_after: 64,
            revert_window: None,
        }
    }
}
