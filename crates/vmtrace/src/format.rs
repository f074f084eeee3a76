//! The trace file: a versioned JSON document, written one event per line
//! so that a trace can be read (and diffed) by eye.
//!
//! Addresses, lengths and flag words are hexadecimal strings (`"0x7fff"`);
//! a system call's result is a hexadecimal value or a negative errno name
//! (`"-ENOMEM"`, or `"-95"` for one without a name here).

use std::fmt::{self, Write as _};
use std::path::Path;

use mm::call::AnonName;
use mm::Call;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The `format` field of every trace.
pub const FORMAT: &str = "vmscale-trace";
/// The version this build writes. Version 2 added the events of the
/// calls the model is gaining in issue 14 (`madvise`, the `mlock` family,
/// `mseal`, VMA names, protection keys, userfaultfd registration); a
/// version 1 trace recorded those calls, when at all, as
/// [`Event::Other`].
pub const VERSION: u32 = 2;
/// The oldest version this build reads: every version 1 trace is a valid
/// version 2 trace, so old recordings replay unchanged.
pub const MIN_VERSION: u32 = 1;

/// How many bytes of a `PR_SET_VMA_ANON_NAME` name the recorder reads:
/// the kernel's limit (`ANON_VMA_NAME_MAX_LEN`, 80, with the terminating
/// NUL), so a name that fills it without a NUL is one the kernel refuses.
pub const ANON_NAME_READ: usize = 80;

/// A 64-bit value written as a hexadecimal string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Hex(pub u64);

impl Serialize for Hex {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{:#x}", self.0))
    }
}

impl<'de> Deserialize<'de> for Hex {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Hex, D::Error> {
        let text = String::deserialize(d)?;
        let digits = text
            .strip_prefix("0x")
            .ok_or_else(|| D::Error::custom(format!("{text:?} is not a 0x-prefixed number")))?;
        u64::from_str_radix(digits, 16)
            .map(Hex)
            .map_err(|_| D::Error::custom(format!("{text:?} is not a hexadecimal number")))
    }
}

/// Errno names used in traces (the x86-64 values).
const ERRNO_NAMES: &[(i64, &str)] = &[
    (1, "EPERM"),
    (2, "ENOENT"),
    (4, "EINTR"),
    (9, "EBADF"),
    (11, "EAGAIN"),
    (12, "ENOMEM"),
    (13, "EACCES"),
    (14, "EFAULT"),
    (16, "EBUSY"),
    (17, "EEXIST"),
    (19, "ENODEV"),
    (22, "EINVAL"),
    (26, "ETXTBSY"),
    (38, "ENOSYS"),
    (75, "EOVERFLOW"),
    (95, "EOPNOTSUPP"),
];

/// A system call's raw result: a value, or `-errno` (-4095..=-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ret(pub i64);

impl Ret {
    /// The errno, if the call failed.
    pub fn errno(self) -> Option<i64> {
        (-4095..=-1).contains(&self.0).then_some(-self.0)
    }
}

impl fmt::Display for Ret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.errno() {
            Some(e) => match ERRNO_NAMES.iter().find(|(n, _)| *n == e) {
                Some((_, name)) => write!(f, "-{name}"),
                None => write!(f, "-{e}"),
            },
            None => write!(f, "{:#x}", self.0 as u64),
        }
    }
}

impl Serialize for Ret {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Ret {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Ret, D::Error> {
        let text = String::deserialize(d)?;
        let bad = || D::Error::custom(format!("{text:?} is not a system call result"));
        if let Some(hex) = text.strip_prefix("0x") {
            let v = u64::from_str_radix(hex, 16).map_err(|_| bad())?;
            return Ok(Ret(v as i64));
        }
        let err = text.strip_prefix('-').ok_or_else(bad)?;
        let code = match ERRNO_NAMES.iter().find(|(_, n)| *n == err) {
            Some((code, _)) => *code,
            None => err.parse::<i64>().map_err(|_| bad())?,
        };
        if !(1..=4095).contains(&code) {
            return Err(bad());
        }
        Ok(Ret(-code))
    }
}

/// A whole trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// Always [`FORMAT`].
    pub format: String,
    /// [`MIN_VERSION`] to [`VERSION`] for traces this build reads.
    pub version: u32,
    /// The recorded command line.
    pub command: Vec<String>,
    /// `uname -r` of the recording machine.
    pub kernel: String,
    /// How the command ended: `"exit 0"`, `"signal 9"`.
    pub status: String,
    /// System-wide settings the model's layout takes.
    pub sysctl: Sysctl,
    /// Every mapped file, referred to by index from the events.
    pub files: Vec<FileInfo>,
    /// What happened, in the order the tracer saw it.
    pub events: Vec<Event>,
}

/// The sysctls (and kernel features) that decide placement and limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sysctl {
    /// `vm.mmap_min_addr`.
    pub mmap_min_addr: Hex,
    /// `vm.max_map_count`.
    pub max_map_count: u64,
    /// `vm.legacy_va_layout` was non-zero (bottom-up allocation).
    pub legacy_va_layout: bool,
    /// `vm.overcommit_memory`.
    pub overcommit_memory: u32,
    /// The kernel has transparent huge pages (large anonymous mappings
    /// are 2 MiB aligned).
    pub thp: bool,
    /// The CPU has protection keys enabled (`ospke` in `/proc/cpuinfo`), so
    /// a `PROT_EXEC`-only mapping gets the execute-only key. Traces made
    /// before this field was recorded were made on such a machine.
    #[serde(default = "yes")]
    pub exec_only_pkey: bool,
    /// The traced command held `CAP_SYS_RAWIO` (it may map below
    /// `mmap_min_addr`). Defaults as for `exec_only_pkey`.
    #[serde(default = "yes")]
    pub cap_sys_rawio: bool,
    /// The traced command held `CAP_IPC_LOCK` (it may lock memory past
    /// `RLIMIT_MEMLOCK`). Traces made before this field was recorded
    /// replay with no lock limit, as the model then had none.
    #[serde(default = "yes")]
    pub cap_ipc_lock: bool,
    /// The traced command's `RLIMIT_MEMLOCK` soft limit in bytes, when
    /// recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memlock_rlimit: Option<Hex>,
    /// The kernel names anonymous VMAs (`CONFIG_ANON_VMA_NAME`: a
    /// zero-length `prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME)` succeeds);
    /// without it every such call fails with `EINVAL`. Older traces hold
    /// no such call, so the default does not matter to them.
    #[serde(default = "yes")]
    pub anon_vma_name: bool,
}

fn yes() -> bool {
    true
}

/// A file the traced processes mapped, one per path and open mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileInfo {
    /// The path as `/proc/<pid>/maps` shows it.
    pub path: String,
    /// Size in bytes when first seen.
    pub size: Hex,
    /// Opened for reading.
    pub read: bool,
    /// Opened for writing.
    pub write: bool,
    /// On a `noexec` mount.
    pub noexec: bool,
    /// On a filesystem that places large file mappings 2 MiB-aligned
    /// (ext4, xfs, btrfs). Traces made before this field was recorded
    /// mapped files on ext4.
    #[serde(default = "yes")]
    pub huge_align: bool,
}

/// One mapping of `/proc/<pid>/smaps`, reduced to what the model needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmapsLine {
    /// The header line, as in `/proc/<pid>/maps`.
    pub map: String,
    /// The `VmFlags:` names.
    pub vmflags: String,
    /// `Anonymous:` was non-zero (the VMA has an anon_vma).
    pub anon: bool,
}

/// Something the tracer saw. `space` numbers an address space: threads
/// and `CLONE_VM` children share their parent's, a forked child gets a
/// new one, and so does a task that execs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "ev", rename_all = "snake_case", deny_unknown_fields)]
pub enum Event {
    /// A task exec'd (or the command started): a fresh address space.
    Exec {
        /// The new address space.
        space: usize,
        /// The task.
        pid: i32,
        /// The program, as `/proc/<pid>/exe` names it.
        exe: String,
        /// `RLIMIT_STACK` soft limit (`0xffffffffffffffff`: unlimited).
        stack_rlimit: Hex,
        /// `mm->start_brk` (field 47 of `/proc/<pid>/stat`); the break
        /// starts there.
        start_brk: Hex,
        /// `mm->start_stack` (field 28 of `/proc/<pid>/stat`).
        start_stack: Hex,
        /// The files of `smaps`, as indexes into [`Trace::files`].
        files: Vec<usize>,
        /// The map right after exec, before the first system call.
        smaps: Vec<SmapsLine>,
    },
    /// A child without `CLONE_VM`: a copy of its parent's address space.
    Fork {
        /// The parent's address space.
        parent: usize,
        /// The child's new address space.
        space: usize,
        /// The child task.
        pid: i32,
    },
    /// Hidden state that changed since the space's previous snapshot,
    /// read from `smaps` at a system call's entry: VMAs that gained or
    /// lost anonymous pages (by start address), and grows-down VMAs'
    /// extents when a stack grew.
    Sync {
        /// The address space.
        space: usize,
        /// The task whose entry this was.
        pid: i32,
        /// VMAs that now hold anonymous pages (and did not before).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        anon_add: Vec<Hex>,
        /// VMAs that no longer do (or are gone).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        anon_del: Vec<Hex>,
        /// Every grows-down VMA as `[start, end]`, when they changed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stacks: Option<Vec<[Hex; 2]>>,
    },
    /// `mmap(addr, len, prot, flags, fd, off)`.
    Mmap {
        /// The address space.
        space: usize,
        /// The calling task.
        pid: i32,
        /// Hint or fixed address.
        addr: Hex,
        /// Length in bytes.
        len: Hex,
        /// `PROT_*` bits.
        prot: Hex,
        /// `MAP_*` bits.
        flags: Hex,
        /// The file descriptor argument.
        fd: i32,
        /// File offset in bytes.
        off: Hex,
        /// The file `fd` named (index into [`Trace::files`]), unless the
        /// mapping is anonymous or `fd` named no file.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        file: Option<usize>,
        /// The file's size at the call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        file_size: Option<Hex>,
        /// The kernel's result.
        ret: Ret,
    },
    /// `munmap(addr, len)`.
    Munmap {
        /// The address space.
        space: usize,
        /// The calling task.
        pid: i32,
        /// Start.
        addr: Hex,
        /// Length in bytes.
        len: Hex,
        /// The kernel's result.
        ret: Ret,
    },
    /// `mprotect(addr, len, prot)` (or `pkey_mprotect` with key -1).
    Mprotect {
        /// The address space.
        space: usize,
        /// The calling task.
        pid: i32,
        /// Start.
        addr: Hex,
        /// Length in bytes.
        len: Hex,
        /// `PROT_*` bits.
        prot: Hex,
        /// The kernel's result.
        ret: Ret,
    },
    /// `mremap(addr, old_len, new_len, flags, new_addr)`.
    Mremap {
        /// The address space.
        space: usize,
        /// The calling task.
        pid: i32,
        /// Start of the old mapping.
        addr: Hex,
        /// Its length.
        old_len: Hex,
        /// The new length.
        new_len: Hex,
        /// `MREMAP_*` bits.
        flags: Hex,
        /// Target address for `MREMAP_FIXED`.
        new_addr: Hex,
        /// The kernel's result.
        ret: Ret,
    },
    /// `brk(addr)`.
    Brk {
        /// The address space.
        space: usize,
        /// The calling task.
        pid: i32,
        /// Requested break (0 asks for the current one).
        addr: Hex,
        /// The kernel's result: the break after the call.
        ret: Ret,
    },
    /// `madvise(addr, len, advice)`, every advice (those that change VMA
    /// flags split VMAs; those that drop pages change what the next fault
    /// finds). Version 2.
    Madvise {
        /// The address space.
        space: usize,
        /// The calling task.
        pid: i32,
        /// Start.
        addr: Hex,
        /// Length in bytes.
        len: Hex,
        /// `MADV_*` value.
        advice: Hex,
        /// The kernel's result.
        ret: Ret,
    },
    /// `mlock(addr, len)`. Version 2.
    Mlock {
        /// The address space.
        space: usize,
        /// The calling task.
        pid: i32,
        /// Start.
        addr: Hex,
        /// Length in bytes.
        len: Hex,
        /// The kernel's result.
        ret: Ret,
    },
    /// `mlock2(addr, len, flags)`. Version 2.
    Mlock2 {
        /// The address space.
        space: usize,
        /// The calling task.
        pid: i32,
        /// Start.
        addr: Hex,
        /// Length in bytes.
        len: Hex,
        /// `MLOCK_*` bits (`MLOCK_ONFAULT`).
        flags: Hex,
        /// The kernel's result.
        ret: Ret,
    },
    /// `munlock(addr, len)`. Version 2.
    Munlock {
        /// The address space.
        space: usize,
        /// The calling task.
        pid: i32,
        /// Start.
        addr: Hex,
        /// Length in bytes.
        len: Hex,
        /// The kernel's result.
        ret: Ret,
    },
    /// `mlockall(flags)`. Version 2.
    Mlockall {
        /// The address space.
        space: usize,
        /// The calling task.
        pid: i32,
        /// `MCL_*` bits.
        flags: Hex,
        /// The kernel's result.
        ret: Ret,
    },
    /// `munlockall()`. Version 2.
    Munlockall {
        /// The address space.
        space: usize,
        /// The calling task.
        pid: i32,
        /// The kernel's result.
        ret: Ret,
    },
    /// `mseal(addr, len, flags)`. Version 2.
    Mseal {
        /// The address space.
        space: usize,
        /// The calling task.
        pid: i32,
        /// Start.
        addr: Hex,
        /// Length in bytes.
        len: Hex,
        /// Flags (none are defined; the kernel refuses any).
        flags: Hex,
        /// The kernel's result.
        ret: Ret,
    },
    /// `prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, addr, len, name)`: names
    /// (or, with a null `name_ptr`, unnames) anonymous VMAs. The string is
    /// read from the caller's memory at the call's entry, as the kernel
    /// reads it. Version 2.
    SetVmaAnonName {
        /// The address space.
        space: usize,
        /// The calling task.
        pid: i32,
        /// Start.
        addr: Hex,
        /// Length in bytes.
        len: Hex,
        /// The name argument, a pointer in the caller's memory (0 clears
        /// the name).
        name_ptr: Hex,
        /// The bytes at `name_ptr` up to their terminating NUL, or the
        /// first [`ANON_NAME_READ`] bytes when none of them is a NUL (the
        /// kernel refuses a name that long with `EINVAL`). Bytes that are
        /// not UTF-8 are replaced by U+FFFD (the kernel accepts only
        /// printable ASCII, so either way the name is refused). `None`
        /// when `name_ptr` is 0, or when its memory could not be read
        /// (the kernel then fails with `EFAULT`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// The kernel's result.
        ret: Ret,
    },
    /// `pkey_alloc(flags, access_rights)`. Version 2.
    PkeyAlloc {
        /// The address space.
        space: usize,
        /// The calling task.
        pid: i32,
        /// Flags (none are defined).
        flags: Hex,
        /// `PKEY_DISABLE_*` bits.
        access_rights: Hex,
        /// The kernel's result: the key, or an error.
        ret: Ret,
    },
    /// `pkey_mprotect(addr, len, prot, pkey)` with a key other than -1
    /// (with -1 it is `mprotect`, and recorded as [`Event::Mprotect`]).
    /// Version 2.
    PkeyMprotect {
        /// The address space.
        space: usize,
        /// The calling task.
        pid: i32,
        /// Start.
        addr: Hex,
        /// Length in bytes.
        len: Hex,
        /// `PROT_*` bits.
        prot: Hex,
        /// The key.
        pkey: i32,
        /// The kernel's result.
        ret: Ret,
    },
    /// `pkey_free(pkey)`. Version 2.
    PkeyFree {
        /// The address space.
        space: usize,
        /// The calling task.
        pid: i32,
        /// The key.
        pkey: i32,
        /// The kernel's result.
        ret: Ret,
    },
    /// `ioctl(fd, UFFDIO_REGISTER, &uffdio_register)` on a userfaultfd:
    /// the range's VMAs get `VM_UFFD_*` flags (which may split them). The
    /// structure is read from the caller's memory at the call's entry.
    /// Version 2.
    UffdRegister {
        /// The address space.
        space: usize,
        /// The calling task.
        pid: i32,
        /// The userfaultfd descriptor.
        fd: i32,
        /// The structure's address in the caller's memory.
        arg: Hex,
        /// `range.start`.
        addr: Hex,
        /// `range.len`.
        len: Hex,
        /// `UFFDIO_REGISTER_MODE_*` bits.
        mode: Hex,
        /// The structure could not be read (the kernel then fails with
        /// `EFAULT`, or with `EINVAL` on a descriptor that has not made
        /// its `UFFDIO_API` handshake); `addr`, `len` and `mode` are 0.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        unreadable: bool,
        /// The kernel's result.
        ret: Ret,
    },
    /// `ioctl(fd, UFFDIO_UNREGISTER, &uffdio_range)` on a userfaultfd.
    /// Version 2.
    UffdUnregister {
        /// The address space.
        space: usize,
        /// The calling task.
        pid: i32,
        /// The userfaultfd descriptor.
        fd: i32,
        /// The structure's address in the caller's memory.
        arg: Hex,
        /// `start`.
        addr: Hex,
        /// `len`.
        len: Hex,
        /// As for [`Event::UffdRegister`].
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        unreadable: bool,
        /// The kernel's result.
        ret: Ret,
    },
    /// A call that can change VMAs and has no event of its own (`shmat`,
    /// `shmdt`, `remap_file_pages`, `process_madvise`, `prctl(PR_SET_VMA)`
    /// with another option): always reported as not modelled. Version 1
    /// traces also recorded this way `madvise` with a flag-changing
    /// advice, the `mlock` family, `mseal`, `prctl(PR_SET_VMA)` and
    /// `pkey_mprotect` with a key.
    Other {
        /// The address space.
        space: usize,
        /// The calling task.
        pid: i32,
        /// System call name.
        name: String,
        /// Its six raw arguments.
        args: Vec<Hex>,
        /// The kernel's result.
        ret: Ret,
    },
    /// The map of an address space as a task left it (exit or exec); the
    /// last one of each space is compared with the model's. The recorder
    /// keeps only that one (traces recorded before it did hold one per
    /// exiting task, and replay the same).
    Final {
        /// The address space.
        space: usize,
        /// The task.
        pid: i32,
        /// `/proc/<pid>/maps` lines.
        maps: Vec<String>,
    },
}

impl Event {
    /// Whether this is one of the replayed system calls.
    pub fn is_call(&self) -> bool {
        self.call().is_some()
    }

    /// The address space and the task the event belongs to (for a fork,
    /// the child's).
    pub fn owner(&self) -> (usize, i32) {
        match *self {
            Event::Exec { space, pid, .. }
            | Event::Fork { space, pid, .. }
            | Event::Sync { space, pid, .. }
            | Event::Mmap { space, pid, .. }
            | Event::Munmap { space, pid, .. }
            | Event::Mprotect { space, pid, .. }
            | Event::Mremap { space, pid, .. }
            | Event::Brk { space, pid, .. }
            | Event::Madvise { space, pid, .. }
            | Event::Mlock { space, pid, .. }
            | Event::Mlock2 { space, pid, .. }
            | Event::Munlock { space, pid, .. }
            | Event::Mlockall { space, pid, .. }
            | Event::Munlockall { space, pid, .. }
            | Event::Mseal { space, pid, .. }
            | Event::SetVmaAnonName { space, pid, .. }
            | Event::PkeyAlloc { space, pid, .. }
            | Event::PkeyMprotect { space, pid, .. }
            | Event::PkeyFree { space, pid, .. }
            | Event::UffdRegister { space, pid, .. }
            | Event::UffdUnregister { space, pid, .. }
            | Event::Other { space, pid, .. }
            | Event::Final { space, pid, .. } => (space, pid),
        }
    }

    /// The replayed system call this event records, as the model takes
    /// it, with the kernel's result. An `mmap`'s `fd` is the traced
    /// process's: the file it named is the event's `file`.
    ///
    /// ```
    /// use vmtrace::format::{Event, Hex, Ret};
    /// let ev = Event::Munmap { space: 0, pid: 7, addr: Hex(0x1000), len: Hex(4096), ret: Ret(0) };
    /// let (call, ret) = ev.call().unwrap();
    /// assert_eq!((call.to_string(), ret), ("munmap(0x1000, 4096)".to_string(), Ret(0)));
    /// ```
    pub fn call(&self) -> Option<(Call, Ret)> {
        let call = match *self {
            Event::Mmap {
                addr: Hex(addr),
                len: Hex(len),
                prot: Hex(prot),
                flags: Hex(flags),
                fd,
                off: Hex(off),
                ret,
                ..
            } => (Call::mmap(addr, len, prot, flags, fd, off), ret),
            Event::Munmap {
                addr: Hex(addr),
                len: Hex(len),
                ret,
                ..
            } => (Call::munmap(addr, len), ret),
            Event::Mprotect {
                addr: Hex(addr),
                len: Hex(len),
                prot: Hex(prot),
                ret,
                ..
            } => (Call::mprotect(addr, len, prot), ret),
            Event::Mremap {
                addr: Hex(addr),
                old_len: Hex(old_len),
                new_len: Hex(new_len),
                flags: Hex(flags),
                new_addr: Hex(new_addr),
                ret,
                ..
            } => (Call::mremap(addr, old_len, new_len, flags, new_addr), ret),
            Event::Brk {
                addr: Hex(addr),
                ret,
                ..
            } => (Call::brk(addr), ret),
            _ => return Some((self.gained_call()?, self.ret()?)),
        };
        Some(call)
    }

    /// The calls of issue 14 as the model takes them. A
    /// [`Event::SetVmaAnonName`] whose name could not be read, and a
    /// userfaultfd event whose structure could not be, stay unmodelled:
    /// the model cannot know the caller's memory.
    fn gained_call(&self) -> Option<Call> {
        Some(match *self {
            Event::Madvise {
                addr, len, advice, ..
            } => Call::madvise(addr.0, len.0, advice.0),
            Event::Mlock { addr, len, .. } => Call::mlock(addr.0, len.0),
            Event::Mlock2 {
                addr, len, flags, ..
            } => Call::mlock2(addr.0, len.0, flags.0),
            Event::Munlock { addr, len, .. } => Call::munlock(addr.0, len.0),
            Event::Mlockall { flags, .. } => Call::mlockall(flags.0),
            Event::Munlockall { .. } => Call::munlockall(),
            Event::Mseal {
                addr, len, flags, ..
            } => Call::mseal(addr.0, len.0, flags.0),
            Event::SetVmaAnonName {
                addr,
                len,
                name_ptr,
                ref name,
                ..
            } => {
                let name = match (name_ptr.0, name) {
                    (0, _) => None,
                    (_, Some(n)) => Some(AnonName::new(n.as_bytes())),
                    (_, None) => return None,
                };
                Call::set_vma_anon_name(addr.0, len.0, name)
            }
            Event::PkeyAlloc {
                flags,
                access_rights,
                ..
            } => Call::pkey_alloc(flags.0, access_rights.0),
            Event::PkeyMprotect {
                addr,
                len,
                prot,
                pkey,
                ..
            } => Call::pkey_mprotect(addr.0, len.0, prot.0, pkey),
            Event::PkeyFree { pkey, .. } => Call::pkey_free(pkey),
            Event::UffdRegister {
                addr,
                len,
                mode,
                unreadable: false,
                ..
            } => Call::uffd_register(addr.0, len.0, mode.0),
            Event::UffdUnregister {
                addr,
                len,
                unreadable: false,
                ..
            } => Call::uffd_unregister(addr.0, len.0),
            _ => return None,
        })
    }

    /// The kernel's result, for an event that records a system call.
    pub fn ret(&self) -> Option<Ret> {
        match *self {
            Event::Mmap { ret, .. }
            | Event::Munmap { ret, .. }
            | Event::Mprotect { ret, .. }
            | Event::Mremap { ret, .. }
            | Event::Brk { ret, .. }
            | Event::Madvise { ret, .. }
            | Event::Mlock { ret, .. }
            | Event::Mlock2 { ret, .. }
            | Event::Munlock { ret, .. }
            | Event::Mlockall { ret, .. }
            | Event::Munlockall { ret, .. }
            | Event::Mseal { ret, .. }
            | Event::SetVmaAnonName { ret, .. }
            | Event::PkeyAlloc { ret, .. }
            | Event::PkeyMprotect { ret, .. }
            | Event::PkeyFree { ret, .. }
            | Event::UffdRegister { ret, .. }
            | Event::UffdUnregister { ret, .. }
            | Event::Other { ret, .. } => Some(ret),
            Event::Exec { .. } | Event::Fork { .. } | Event::Sync { .. } | Event::Final { .. } => {
                None
            }
        }
    }

    /// The system call an event records, by the name a replay counts it
    /// under (`mmap`, `madvise`, `prctl(PR_SET_VMA_ANON_NAME)`,
    /// `ioctl(UFFDIO_REGISTER)`, an [`Event::Other`]'s own name); `None`
    /// for events that are not calls.
    ///
    /// ```
    /// use vmtrace::format::{Event, Hex, Ret};
    /// let ev = Event::PkeyFree { space: 0, pid: 7, pkey: 1, ret: Ret(-22) };
    /// assert_eq!(ev.name(), Some("pkey_free"));
    /// ```
    pub fn name(&self) -> Option<&str> {
        Some(match self {
            Event::Mmap { .. } => "mmap",
            Event::Munmap { .. } => "munmap",
            Event::Mprotect { .. } => "mprotect",
            Event::Mremap { .. } => "mremap",
            Event::Brk { .. } => "brk",
            Event::Madvise { .. } => "madvise",
            Event::Mlock { .. } => "mlock",
            Event::Mlock2 { .. } => "mlock2",
            Event::Munlock { .. } => "munlock",
            Event::Mlockall { .. } => "mlockall",
            Event::Munlockall { .. } => "munlockall",
            Event::Mseal { .. } => "mseal",
            Event::SetVmaAnonName { .. } => "prctl(PR_SET_VMA_ANON_NAME)",
            Event::PkeyAlloc { .. } => "pkey_alloc",
            Event::PkeyMprotect { .. } => "pkey_mprotect",
            Event::PkeyFree { .. } => "pkey_free",
            Event::UffdRegister { .. } => "ioctl(UFFDIO_REGISTER)",
            Event::UffdUnregister { .. } => "ioctl(UFFDIO_UNREGISTER)",
            Event::Other { name, .. } => name,
            Event::Exec { .. } | Event::Fork { .. } | Event::Sync { .. } | Event::Final { .. } => {
                return None
            }
        })
    }

    /// A system call the model does not replay: its name, as the replay
    /// counts it, and the call as text with its raw arguments. `None` for
    /// calls the model replays and for events that are not calls. What
    /// stays unmodelled is a call the model has not got (recorded as
    /// [`Event::Other`]) and one whose argument the recorder could not
    /// read from the caller's memory.
    ///
    /// ```
    /// use vmtrace::format::{Event, Hex, Ret};
    /// let ev = Event::SetVmaAnonName {
    ///     space: 0, pid: 7, addr: Hex(0x7000), len: Hex(0x1000),
    ///     name_ptr: Hex(0x5000), name: None, ret: Ret(-14),
    /// };
    /// let (name, text) = ev.unmodelled().unwrap();
    /// assert_eq!(name, "prctl(PR_SET_VMA_ANON_NAME)");
    /// assert_eq!(text, "prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, 0x7000, 0x1000, 0x5000)");
    /// let mlockall = Event::Mlockall { space: 0, pid: 7, flags: Hex(1), ret: Ret(0) };
    /// assert!(mlockall.unmodelled().is_none()); // replayed as mm::Call::mlockall
    /// ```
    pub fn unmodelled(&self) -> Option<(String, String)> {
        if self.call().is_some() {
            return None;
        }
        let name = self.name()?;
        let args: Vec<String> = match self {
            Event::Madvise {
                addr, len, advice, ..
            } => hex_args(&[*addr, *len, *advice]),
            Event::Mlock { addr, len, .. } | Event::Munlock { addr, len, .. } => {
                hex_args(&[*addr, *len])
            }
            Event::Mlock2 {
                addr, len, flags, ..
            }
            | Event::Mseal {
                addr, len, flags, ..
            } => hex_args(&[*addr, *len, *flags]),
            Event::Mlockall { flags, .. } => hex_args(&[*flags]),
            Event::Munlockall { .. } => Vec::new(),
            Event::SetVmaAnonName {
                addr,
                len,
                name_ptr,
                name,
                ..
            } => {
                let mut args = vec!["PR_SET_VMA".into(), "PR_SET_VMA_ANON_NAME".into()];
                args.extend(hex_args(&[*addr, *len]));
                args.push(match name {
                    Some(n) => format!("{n:?}"),
                    None => format!("{:#x}", name_ptr.0),
                });
                args
            }
            Event::PkeyAlloc {
                flags,
                access_rights,
                ..
            } => hex_args(&[*flags, *access_rights]),
            Event::PkeyMprotect {
                addr,
                len,
                prot,
                pkey,
                ..
            } => {
                let mut args = hex_args(&[*addr, *len, *prot]);
                args.push(pkey.to_string());
                args
            }
            Event::PkeyFree { pkey, .. } => vec![pkey.to_string()],
            Event::UffdRegister {
                fd,
                arg,
                addr,
                len,
                mode,
                unreadable,
                ..
            } => {
                let st = if *unreadable {
                    format!("{:#x}", arg.0)
                } else {
                    format!(
                        "{{range={{start={:#x}, len={:#x}}}, mode={:#x}}}",
                        addr.0, len.0, mode.0
                    )
                };
                vec![fd.to_string(), "UFFDIO_REGISTER".into(), st]
            }
            Event::UffdUnregister {
                fd,
                arg,
                addr,
                len,
                unreadable,
                ..
            } => {
                let st = if *unreadable {
                    format!("{:#x}", arg.0)
                } else {
                    format!("{{start={:#x}, len={:#x}}}", addr.0, len.0)
                };
                vec![fd.to_string(), "UFFDIO_UNREGISTER".into(), st]
            }
            Event::Other { args, .. } => hex_args(args),
            // The five replayed calls always have a `Call`.
            _ => return None,
        };
        let text = format!(
            "{}({})",
            name.split('(').next().unwrap_or(name),
            args.join(", ")
        );
        Some((name.to_string(), text))
    }
}

fn hex_args(args: &[Hex]) -> Vec<String> {
    args.iter().map(|a| format!("{:#x}", a.0)).collect()
}

impl Trace {
    /// Read and check a trace file. Errors are one line, naming the file.
    pub fn load(path: &Path) -> Result<Trace, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read trace {}: {e}", path.display()))?;
        Trace::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parse and check a trace's text. Errors are one line.
    ///
    /// ```
    /// let e = vmtrace::Trace::parse("{}").unwrap_err();
    /// assert!(e.starts_with("not a valid trace"), "{e}");
    /// ```
    pub fn parse(text: &str) -> Result<Trace, String> {
        // serde quotes the offending text, which is the trace's own: its
        // control characters are escaped so the error stays one line and
        // cannot drive the terminal it is printed on.
        let trace: Trace = serde_json::from_str(text)
            .map_err(|e| format!("not a valid trace: {}", e.to_string().escape_debug()))?;
        if trace.format != FORMAT {
            return Err(format!("not a vmscale trace (format {:?})", trace.format));
        }
        if !(MIN_VERSION..=VERSION).contains(&trace.version) {
            return Err(format!(
                "trace version {} is not supported (this build reads versions \
                 {MIN_VERSION} to {VERSION})",
                trace.version
            ));
        }
        trace.check()?;
        Ok(trace)
    }

    /// Structural checks the replay relies on: file indexes in range.
    fn check(&self) -> Result<(), String> {
        let nfiles = self.files.len();
        for (i, ev) in self.events.iter().enumerate() {
            let bad = match ev {
                Event::Exec { files, .. } => files.iter().any(|&f| f >= nfiles),
                Event::Mmap { file: Some(f), .. } => *f >= nfiles,
                _ => false,
            };
            if bad {
                return Err(format!(
                    "event {i} names a file that is not in the file table"
                ));
            }
        }
        Ok(())
    }

    /// The trace as text: a header, then one event per line.
    pub fn to_text(&self) -> Result<String, serde_json::Error> {
        let mut out = String::new();
        let field = |out: &mut String, name: &str, value: String| {
            let _ = writeln!(out, "  \"{name}\": {value},");
        };
        out.push_str("{\n");
        field(&mut out, "format", serde_json::to_string(&self.format)?);
        field(&mut out, "version", serde_json::to_string(&self.version)?);
        field(&mut out, "command", serde_json::to_string(&self.command)?);
        field(&mut out, "kernel", serde_json::to_string(&self.kernel)?);
        field(&mut out, "status", serde_json::to_string(&self.status)?);
        field(&mut out, "sysctl", serde_json::to_string(&self.sysctl)?);
        out.push_str("  \"files\": [");
        for (i, f) in self.files.iter().enumerate() {
            out.push_str(if i == 0 { "\n    " } else { ",\n    " });
            out.push_str(&serde_json::to_string(f)?);
        }
        out.push_str("\n  ],\n  \"events\": [");
        for (i, e) in self.events.iter().enumerate() {
            out.push_str(if i == 0 { "\n    " } else { ",\n    " });
            out.push_str(&serde_json::to_string(e)?);
        }
        out.push_str("\n  ]\n}\n");
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the `trace_replay` fuzz target: serde quoted an unknown
    /// event name with its newline and control characters into the error.
    #[test]
    fn parse_errors_are_one_line_and_hold_no_control_characters() {
        let text = "{\"format\": \"vmscale-trace\", \"events\": [{\"ev\": \"a\\n\\u001b[31m\"}]}";
        let e = Trace::parse(text).unwrap_err();
        assert!(e.contains("unknown variant"), "{e}");
        assert!(!e.chars().any(char::is_control), "{e:?}");
    }

    #[test]
    fn results_round_trip() {
        for (v, text) in [
            (0, "\"0x0\""),
            (0x7fff_f7ff_f000, "\"0x7ffff7fff000\""),
            (-12, "\"-ENOMEM\""),
            (-200, "\"-200\""),
        ] {
            assert_eq!(serde_json::to_string(&Ret(v)).unwrap(), text);
            assert_eq!(serde_json::from_str::<Ret>(text).unwrap(), Ret(v));
        }
        assert!(serde_json::from_str::<Ret>("\"-0\"").is_err());
        assert!(serde_json::from_str::<Ret>("\"12\"").is_err());
        assert!(serde_json::from_str::<Hex>("\"12\"").is_err());
    }

    fn sample() -> Trace {
        Trace {
            format: FORMAT.into(),
            version: VERSION,
            command: vec!["/bin/true".into()],
            kernel: "6.18".into(),
            status: "exit 0".into(),
            sysctl: Sysctl {
                mmap_min_addr: Hex(4096),
                max_map_count: 65530,
                legacy_va_layout: false,
                overcommit_memory: 0,
                thp: true,
                exec_only_pkey: true,
                cap_sys_rawio: true,
                cap_ipc_lock: true,
                memlock_rlimit: Some(Hex(8 << 20)),
                anon_vma_name: false,
            },
            files: vec![FileInfo {
                path: "/bin/true".into(),
                size: Hex(1000),
                read: true,
                write: false,
                noexec: false,
                huge_align: true,
            }],
            events: vec![
                Event::Brk {
                    space: 0,
                    pid: 7,
                    addr: Hex(0),
                    ret: Ret(0x5555_5555_6000),
                },
                Event::Sync {
                    space: 0,
                    pid: 7,
                    anon_add: vec![Hex(0x1000)],
                    anon_del: vec![],
                    stacks: None,
                },
            ],
        }
    }

    #[test]
    fn trace_text_round_trips() {
        let trace = sample();
        let text = trace.to_text().unwrap();
        let back: Trace = serde_json::from_str(&text).unwrap();
        assert_eq!(back, trace);
        assert_eq!(text.lines().count(), 15, "{text}");
    }

    /// One event of each kind version 2 added, as the recorder writes
    /// them.
    fn gained_events() -> Vec<Event> {
        let (space, pid) = (0, 7);
        vec![
            Event::Madvise {
                space,
                pid,
                addr: Hex(0x7000),
                len: Hex(0x2000),
                advice: Hex(15),
                ret: Ret(0),
            },
            Event::Mlock {
                space,
                pid,
                addr: Hex(0x7000),
                len: Hex(0x1000),
                ret: Ret(-12),
            },
            Event::Mlock2 {
                space,
                pid,
                addr: Hex(0x7000),
                len: Hex(0x1000),
                flags: Hex(1),
                ret: Ret(0),
            },
            Event::Munlock {
                space,
                pid,
                addr: Hex(0x7000),
                len: Hex(0x1000),
                ret: Ret(0),
            },
            Event::Mlockall {
                space,
                pid,
                flags: Hex(3),
                ret: Ret(0),
            },
            Event::Munlockall {
                space,
                pid,
                ret: Ret(0),
            },
            Event::Mseal {
                space,
                pid,
                addr: Hex(0x7000),
                len: Hex(0x1000),
                flags: Hex(0),
                ret: Ret(0),
            },
            Event::SetVmaAnonName {
                space,
                pid,
                addr: Hex(0x7000),
                len: Hex(0x1000),
                name_ptr: Hex(0x5000),
                name: Some("go heap \"x\"".into()),
                ret: Ret(-22),
            },
            Event::SetVmaAnonName {
                space,
                pid,
                addr: Hex(0x7000),
                len: Hex(0x1000),
                name_ptr: Hex(0),
                name: None,
                ret: Ret(0),
            },
            Event::PkeyAlloc {
                space,
                pid,
                flags: Hex(0),
                access_rights: Hex(1),
                ret: Ret(-22),
            },
            Event::PkeyMprotect {
                space,
                pid,
                addr: Hex(0x7000),
                len: Hex(0x1000),
                prot: Hex(1),
                pkey: 1,
                ret: Ret(-22),
            },
            Event::PkeyFree {
                space,
                pid,
                pkey: 1,
                ret: Ret(-22),
            },
            Event::UffdRegister {
                space,
                pid,
                fd: 3,
                arg: Hex(0x7ffc_0000),
                addr: Hex(0x7000),
                len: Hex(0x1000),
                mode: Hex(1),
                unreadable: false,
                ret: Ret(0),
            },
            Event::UffdUnregister {
                space,
                pid,
                fd: 3,
                arg: Hex(0x10),
                addr: Hex(0),
                len: Hex(0),
                unreadable: true,
                ret: Ret(-14),
            },
        ]
    }

    #[test]
    fn gained_events_round_trip_and_replay_as_calls() {
        let events = gained_events();
        for ev in &events {
            let text = serde_json::to_string(ev).unwrap();
            assert_eq!(&serde_json::from_str::<Event>(&text).unwrap(), ev, "{text}");
            assert_eq!(ev.owner(), (0, 7));
            assert!(ev.ret().is_some());
        }
        // Defaults that are left out of the text.
        let text = serde_json::to_string(&events[8]).unwrap();
        assert!(!text.contains("name\":"), "{text}");
        let text = serde_json::to_string(&events[12]).unwrap();
        assert!(!text.contains("unreadable"), "{text}");
        // Every event whose arguments the trace holds is a call of the
        // model, with the raw arguments.
        let calls: Vec<String> = events
            .iter()
            .filter_map(|e| e.call().map(|(c, _)| c.to_string()))
            .collect();
        assert_eq!(
            calls,
            [
                "madvise(0x7000, 8192, MADV_NOHUGEPAGE)",
                "mlock(0x7000, 4096)",
                "mlock2(0x7000, 4096, MLOCK_ONFAULT)",
                "munlock(0x7000, 4096)",
                "mlockall(MCL_CURRENT|MCL_FUTURE)",
                "munlockall()",
                "mseal(0x7000, 4096, 0)",
                "prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, 0x7000, 4096, \"go heap \\\"x\\\"\")",
                "prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, 0x7000, 4096, NULL)",
                "pkey_alloc(0, PKEY_DISABLE_ACCESS)",
                "pkey_mprotect(0x7000, 4096, PROT_READ, 1)",
                "pkey_free(1)",
                "ioctl(uffd, UFFDIO_REGISTER, {start=0x7000, len=4096, \
                 mode=UFFDIO_REGISTER_MODE_MISSING})",
            ]
        );
        // What the model cannot know stays reported, with its arguments:
        // a structure or a name the recorder could not read.
        assert_eq!(
            events[13].unmodelled().unwrap().1,
            "ioctl(3, UFFDIO_UNREGISTER, 0x10)"
        );
        let unread_name = Event::SetVmaAnonName {
            space: 0,
            pid: 7,
            addr: Hex(0x7000),
            len: Hex(0x1000),
            name_ptr: Hex(0x5000),
            name: None,
            ret: Ret(-14),
        };
        assert!(unread_name.call().is_none());
        assert!(unread_name.unmodelled().is_some());
        // The replayed calls and the non-calls are not "unmodelled".
        let munmap = Event::Munmap {
            space: 0,
            pid: 7,
            addr: Hex(0),
            len: Hex(1),
            ret: Ret(-22),
        };
        assert!(munmap.unmodelled().is_none());
        assert!(events[0].unmodelled().is_none());
        let fork = Event::Fork {
            parent: 0,
            space: 1,
            pid: 8,
        };
        assert!(fork.unmodelled().is_none() && fork.ret().is_none());
    }

    #[test]
    fn version_1_traces_are_read_and_newer_ones_refused() {
        let mut trace = sample();
        trace.events.extend(gained_events());
        let v2 = trace.to_text().unwrap();
        assert_eq!(Trace::parse(&v2).unwrap(), trace);
        let v1 = sample()
            .to_text()
            .unwrap()
            .replacen("\"version\": 2", "\"version\": 1", 1);
        assert_eq!(Trace::parse(&v1).unwrap().version, 1);
        for v in ["0", "3"] {
            let text = v2.replacen("\"version\": 2", &format!("\"version\": {v}"), 1);
            let e = Trace::parse(&text).unwrap_err();
            assert!(
                e.contains(&format!("trace version {v} is not supported")),
                "{e}"
            );
        }
        // A version 1 trace's `other` event still parses and stays
        // unmodelled.
        let other = Event::Other {
            space: 0,
            pid: 7,
            name: "shmat".into(),
            args: vec![Hex(1), Hex(0), Hex(0)],
            ret: Ret(-22),
        };
        assert_eq!(other.unmodelled().unwrap().1, "shmat(0x1, 0x0, 0x0)");
    }
}
