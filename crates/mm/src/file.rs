//! Files: named objects with a size that VMAs may map.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::imap::IMap;
use crate::policy::Policy;

/// How a file was opened and where it lives, which decides what `mmap`
/// and `mprotect` allow (`EACCES` for a shared writable mapping of a file
/// opened read-only, `EPERM` for `PROT_EXEC` on a `noexec` mount).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileMode {
    /// Opened for reading (`FMODE_READ`).
    pub read: bool,
    /// Opened for writing (`FMODE_WRITE`).
    pub write: bool,
    /// On a filesystem mounted `noexec`.
    pub noexec: bool,
    /// The filesystem places mappings with `thp_get_unmapped_area` (ext4,
    /// xfs, btrfs): a mapping covering a whole 2 MiB-aligned stretch of
    /// the file gets an address congruent to its offset modulo 2 MiB.
    pub huge_align: bool,
}

impl Default for FileMode {
    /// Opened read-write on an ordinary (ext4-like) mount.
    fn default() -> Self {
        FileMode {
            read: true,
            write: true,
            noexec: false,
            huge_align: true,
        }
    }
}

/// A file that can be mapped: a name, a size and an open mode. File
/// contents are not modelled; the size decides which pages a fault may
/// touch (`SIGBUS` past the end).
///
/// Two VMAs can merge only if they map the same `File` (the same `Arc`).
///
/// A file's reverse map is kept as the [`Policy`] it was opened under
/// says: [`Policy::file`] opens one under a policy of your own;
/// [`File::new`] and [`File::with_mode`] under the default policy.
///
/// ```
/// use mm::File;
/// let libc = File::new("/usr/lib/x86_64-linux-gnu/libc.so.6", 2 << 20);
/// assert_eq!(libc.name(), "/usr/lib/x86_64-linux-gnu/libc.so.6");
/// assert_eq!(libc.size(), 2 << 20);
/// ```
#[derive(Debug)]
// Aligned to two cache lines: a kernel inode is hundreds of bytes, so two
// files' `i_mmap_rwsem`s never share a line; two of these, allocated side
// by side for two workers, must not either.
#[repr(align(128))]
pub struct File {
    name: String,
    size: AtomicU64,
    mode: FileMode,
    id: u64,
    imap: IMap,
}

/// The name `/proc/<pid>/maps` shows for shared anonymous memory.
pub(crate) const SHMEM_ZERO: &str = "/dev/zero (deleted)";

static NEXT_FILE_ID: AtomicU64 = AtomicU64::new(1);

impl File {
    /// A file opened read-write under the default [`Policy`].
    pub fn new(name: impl Into<String>, size: u64) -> Arc<File> {
        File::with_mode(name, size, FileMode::default())
    }

    /// A file opened with `mode` under the default [`Policy`].
    ///
    /// ```
    /// use mm::FileMode;
    /// use mm::File;
    /// let ro = FileMode { write: false, ..FileMode::default() };
    /// let f = File::with_mode("/etc/ld.so.cache", 4096, ro);
    /// assert!(!f.mode().write);
    /// ```
    pub fn with_mode(name: impl Into<String>, size: u64, mode: FileMode) -> Arc<File> {
        File::open(Policy::shared_default(), name, size, mode)
    }

    /// A file opened with `mode` under `policy` ([`Policy::file`] and
    /// [`Policy::file_with_mode`] are the public doors).
    pub(crate) fn open(
        policy: &Arc<Policy>,
        name: impl Into<String>,
        size: u64,
        mode: FileMode,
    ) -> Arc<File> {
        Arc::new(File {
            name: name.into(),
            size: AtomicU64::new(size),
            mode,
            id: NEXT_FILE_ID.fetch_add(1, Ordering::Relaxed),
            imap: IMap::new(policy),
        })
    }

    /// The policy the file was opened under.
    pub fn policy(&self) -> &Arc<Policy> {
        self.imap.policy()
    }

    /// The file's reverse map (`i_mmap`): every VMA that maps it.
    pub fn imap(&self) -> &IMap {
        &self.imap
    }

    /// The path (or, for shared anonymous memory, `/dev/zero (deleted)`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.size.load(Ordering::Relaxed)
    }

    /// Change the size (as `ftruncate` would); mappings stay as they are.
    pub fn set_size(&self, size: u64) {
        self.size.store(size, Ordering::Relaxed)
    }

    /// How the file was opened.
    pub fn mode(&self) -> FileMode {
        self.mode
    }

    /// Shared anonymous memory's own shmem file (`/dev/zero (deleted)`),
    /// which is placed by shmem's rules and never merges at `mmap` time.
    pub fn is_shmem_zero(&self) -> bool {
        self.name == SHMEM_ZERO
    }

    /// A number unique to this file within the process (its "inode").
    pub fn id(&self) -> u64 {
        self.id
    }
}
