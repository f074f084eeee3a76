//! One vocabulary for the calls that change an address space: `mmap`,
//! `munmap`, `mprotect`, `mremap`, `brk`, the write fault, `madvise`, the
//! `mlock` family, `mseal`, `prctl(PR_SET_VMA_ANON_NAME)`,
//! `pkey_alloc`/`pkey_mprotect`/`pkey_free` and userfaultfd registration.
//!
//! A [`Call`] holds its arguments as the kernel receives them: addresses,
//! lengths and flag words as raw 64-bit values, the file as a descriptor
//! number. So a call with stray flag bits, an unaligned address or a
//! descriptor that names no file can be written down, and
//! [`Call::apply`] gets the errno the kernel gives it. A call prints as
//! the C call it stands for, so a list of calls reads as a reproducer.
//!
//! The differential test drives the model and a real process with the
//! same calls, and `vmtrace` turns recorded system calls into them; a
//! sandbox or a tool that drives the model does the same: build calls,
//! apply them, print or compare the results.
//!
//! ```
//! use mm::call::{self, Call};
//! use mm::{Errno, Mm};
//!
//! let mm = Mm::default();
//! // PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS
//! let map = Call::mmap(0, 8192, 0x3, 0x22, -1, 0);
//! assert_eq!(
//!     map.to_string(),
//!     "mmap(0x0, 8192, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0)"
//! );
//! let a = map.apply(&mm, |_| None).unwrap();
//! let unaligned = Call::munmap(a + 1, 4096);
//! assert_eq!(unaligned.apply(&mm, |_| None), Err(Errno::EINVAL));
//! // What the system call's return register would hold:
//! assert_eq!(call::raw(unaligned.apply(&mm, |_| None)), -22);
//! ```

use std::fmt;
use std::sync::Arc;

use bitflags::Flags;

use crate::{Access, Advice, Errno, FaultError, File, MapFlags, Mm, MremapFlags, Prot};

/// One call on an address space, with its arguments as the kernel takes
/// them. Each variant's arguments are a struct of their own, with the C
/// parameters' names; the constructors ([`Call::mmap`], ...) take them in
/// C's order.
///
/// ```
/// use mm::call::{Call, Mprotect};
///
/// let calls = [Call::brk(0), Call::mprotect(0x10000, 4096, 0x1)];
/// let text: Vec<String> = calls.iter().map(Call::to_string).collect();
/// assert_eq!(text, ["brk(0x0)", "mprotect(0x10000, 4096, PROT_READ)"]);
/// // The arguments by name:
/// assert!(matches!(calls[1], Call::Mprotect(Mprotect { prot: 0x1, .. })));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Call {
    /// `mmap(addr, len, prot, flags, fd, off)`.
    Mmap(Mmap),
    /// `munmap(addr, len)`.
    Munmap(Munmap),
    /// `mprotect(addr, len, prot)`.
    Mprotect(Mprotect),
    /// `mremap(addr, old_len, new_len, flags, new_addr)`.
    Mremap(Mremap),
    /// `brk(addr)`: the system call, which returns the break (the C
    /// library's `brk` returns 0 or -1 instead).
    Brk(Brk),
    /// A write to one byte: a page fault, not a system call.
    WriteFault(WriteFault),
    /// `madvise(addr, len, advice)`.
    Madvise(Madvise),
    /// `mlock(addr, len)`.
    Mlock(Mlock),
    /// `mlock2(addr, len, flags)`.
    Mlock2(Mlock2),
    /// `munlock(addr, len)`.
    Munlock(Munlock),
    /// `mlockall(flags)`.
    Mlockall(Mlockall),
    /// `munlockall()`.
    Munlockall(Munlockall),
    /// `mseal(addr, len, flags)`.
    Mseal(Mseal),
    /// `prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, addr, len, name)`.
    SetVmaAnonName(SetVmaAnonName),
    /// `pkey_alloc(flags, access_rights)`.
    PkeyAlloc(PkeyAlloc),
    /// `pkey_mprotect(addr, len, prot, pkey)`.
    PkeyMprotect(PkeyMprotect),
    /// `pkey_free(pkey)`.
    PkeyFree(PkeyFree),
    /// `ioctl(uffd, UFFDIO_REGISTER, {addr, len, mode})` on the address
    /// space's one userfaultfd.
    UffdRegister(UffdRegister),
    /// `ioctl(uffd, UFFDIO_UNREGISTER, {addr, len})`.
    UffdUnregister(UffdUnregister),
}

/// The arguments of `mmap`.
///
/// `fd` is looked up only when `flags` lacks `MAP_ANONYMOUS`, as the
/// kernel does; a descriptor that names no file fails with `EBADF`.
///
/// ```
/// use mm::call::{Call, Mmap};
/// use mm::{Errno, File, Mm};
///
/// let mm = Mm::default();
/// let file = File::new("/data", 8192);
/// // PROT_READ, MAP_PRIVATE, of the file open as descriptor 3.
/// let map = Mmap { addr: 0, len: 8192, prot: 0x1, flags: 0x2, fd: 3, off: 0 };
/// let open = |fd| (fd == 3).then(|| file.clone());
/// assert!(Call::Mmap(map).apply(&mm, open).is_ok());
/// let closed = Mmap { fd: 4, ..map };
/// assert_eq!(Call::Mmap(closed).apply(&mm, open), Err(Errno::EBADF));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mmap {
    /// The hint, or with `MAP_FIXED` the address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// `PROT_*` bits.
    pub prot: u64,
    /// `MAP_*` bits, the mapping type in the low four.
    pub flags: u64,
    /// The file descriptor (`-1` for none).
    pub fd: i32,
    /// File offset in bytes.
    pub off: u64,
}

/// The arguments of `munmap`.
///
/// ```
/// use mm::call::Call;
/// use mm::{Errno, Mm};
///
/// let mm = Mm::default();
/// // Unmapping nothing succeeds; a zero length does not.
/// assert_eq!(Call::munmap(0x10000, 4096).apply(&mm, |_| None), Ok(0));
/// assert_eq!(Call::munmap(0x10000, 0).apply(&mm, |_| None), Err(Errno::EINVAL));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Munmap {
    /// Start, page-aligned.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
}

/// The arguments of `mprotect`.
///
/// `prot` is a whole `unsigned long`, as the kernel takes it: a bit the
/// kernel does not know, above bit 31 too, is refused with `EINVAL`.
///
/// ```
/// use mm::call::Call;
/// use mm::{Errno, Mm};
///
/// let mm = Mm::default();
/// let a = Call::mmap(0, 4096, 0x1, 0x22, -1, 0).apply(&mm, |_| None).unwrap();
/// let high = Call::mprotect(a, 4096, 0x1 | 1 << 32);
/// assert_eq!(high.apply(&mm, |_| None), Err(Errno::EINVAL));
/// assert_eq!(Call::mprotect(a, 4096, 0x3).apply(&mm, |_| None), Ok(0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mprotect {
    /// Start, page-aligned.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// `PROT_*` bits.
    pub prot: u64,
}

/// The arguments of `mremap`.
///
/// ```
/// use mm::call::Call;
/// use mm::{Mm};
///
/// let mm = Mm::default();
/// let a = Call::mmap(0, 4096, 0x3, 0x22, -1, 0).apply(&mm, |_| None).unwrap();
/// // MREMAP_MAYMOVE: the mapping may move if it cannot grow in place.
/// let grow = Call::mremap(a, 4096, 8192, 0x1, 0);
/// assert_eq!(grow.to_string(), format!("mremap({a:#x}, 4096, 8192, MREMAP_MAYMOVE, 0x0)"));
/// assert!(grow.apply(&mm, |_| None).is_ok());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mremap {
    /// Start of the old mapping, page-aligned.
    pub addr: u64,
    /// Its length in bytes (0 duplicates a shared mapping).
    pub old_len: u64,
    /// The new length in bytes.
    pub new_len: u64,
    /// `MREMAP_*` bits.
    pub flags: u64,
    /// The target with `MREMAP_FIXED` or `MREMAP_DONTUNMAP`.
    pub new_addr: u64,
}

/// The argument of `brk`.
///
/// ```
/// use mm::call::Call;
/// use mm::{Mm};
///
/// let mm = Mm::default();
/// mm.set_brk_base(0x5555_5555_8000);
/// // 0 asks for the break: a refused move returns it unchanged.
/// assert_eq!(Call::brk(0).apply(&mm, |_| None), Ok(0x5555_5555_8000));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Brk {
    /// The requested break.
    pub addr: u64,
}

/// A write to the byte at `addr`.
///
/// It serves the fault as [`Mm::fault`] does (a first write gives a
/// private mapping its anon_vma; one just below a grows-down mapping
/// grows it) and fails with `EFAULT` where the process would get a
/// signal, which is what a system call writing there (`read(2)` into the
/// byte) returns. It prints as `write_fault(addr)`: C has no call for it.
///
/// ```
/// use mm::call::Call;
/// use mm::{Errno, Mm};
///
/// let mm = Mm::default();
/// // PROT_READ only
/// let a = Call::mmap(0, 4096, 0x1, 0x22, -1, 0).apply(&mm, |_| None).unwrap();
/// let write = Call::write_fault(a + 8);
/// assert_eq!(write.apply(&mm, |_| None), Err(Errno::EFAULT));
/// assert_eq!(write.to_string(), format!("write_fault({:#x})", a + 8));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WriteFault {
    /// The address written.
    pub addr: u64,
}

/// The arguments of `madvise`.
///
/// `advice` is the kernel's `int`: only its low 32 bits count.
///
/// ```
/// use mm::call::Call;
/// use mm::{Errno, Mm};
///
/// let mm = Mm::default();
/// let a = Call::mmap(0, 8192, 0x3, 0x22, -1, 0).apply(&mm, |_| None).unwrap();
/// let dontfork = Call::madvise(a, 4096, 10);
/// assert_eq!(dontfork.to_string(), format!("madvise({a:#x}, 4096, MADV_DONTFORK)"));
/// assert_eq!(dontfork.apply(&mm, |_| None), Ok(0));
/// assert_eq!(mm.map_count(), 2);
/// assert_eq!(Call::madvise(a, 4096, 7).to_string(), format!("madvise({a:#x}, 4096, 7)"));
/// assert_eq!(Call::madvise(a, 4096, 7).apply(&mm, |_| None), Err(Errno::EINVAL));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Madvise {
    /// Start, page-aligned.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// `MADV_*`.
    pub advice: u64,
}

/// The arguments of `mlock`.
///
/// ```
/// use mm::call::Call;
/// use mm::Mm;
///
/// let mm = Mm::default();
/// let a = Call::mmap(0, 4096, 0x3, 0x22, -1, 0).apply(&mm, |_| None).unwrap();
/// assert_eq!(Call::mlock(a, 4096).apply(&mm, |_| None), Ok(0));
/// assert_eq!(Call::mlock(a, 4096).to_string(), format!("mlock({a:#x}, 4096)"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mlock {
    /// Start (rounded down to its page).
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
}

/// The arguments of `mlock2`.
///
/// `flags` is the kernel's `int`: only its low 32 bits count.
///
/// ```
/// use mm::call::Call;
/// use mm::{Errno, Mm};
///
/// let mm = Mm::default();
/// let a = Call::mmap(0, 4096, 0x3, 0x22, -1, 0).apply(&mm, |_| None).unwrap();
/// let onfault = Call::mlock2(a, 4096, 1);
/// assert_eq!(onfault.to_string(), format!("mlock2({a:#x}, 4096, MLOCK_ONFAULT)"));
/// assert_eq!(onfault.apply(&mm, |_| None), Ok(0));
/// assert_eq!(Call::mlock2(a, 4096, 2).apply(&mm, |_| None), Err(Errno::EINVAL));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mlock2 {
    /// Start (rounded down to its page).
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// `MLOCK_ONFAULT` or 0.
    pub flags: u64,
}

/// The arguments of `munlock`.
///
/// ```
/// use mm::call::Call;
/// use mm::{Errno, Mm};
///
/// let mm = Mm::default();
/// assert_eq!(Call::munlock(0x10000, 4096).apply(&mm, |_| None), Err(Errno::ENOMEM));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Munlock {
    /// Start (rounded down to its page).
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
}

/// The argument of `mlockall`.
///
/// `flags` is the kernel's `int`: only its low 32 bits count.
///
/// ```
/// use mm::call::Call;
/// use mm::{Errno, Mm};
///
/// let mm = Mm::default();
/// let future = Call::mlockall(2);
/// assert_eq!(future.to_string(), "mlockall(MCL_FUTURE)");
/// assert_eq!(future.apply(&mm, |_| None), Ok(0));
/// assert_eq!(Call::mlockall(0).apply(&mm, |_| None), Err(Errno::EINVAL));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mlockall {
    /// `MCL_*` bits.
    pub flags: u64,
}

/// `munlockall` takes no argument.
///
/// ```
/// use mm::call::Call;
/// assert_eq!(Call::munlockall().to_string(), "munlockall()");
/// assert_eq!(Call::munlockall().apply(&mm::Mm::default(), |_| None), Ok(0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Munlockall {}

/// The arguments of `mseal`.
///
/// ```
/// use mm::call::Call;
/// use mm::{Errno, Mm};
///
/// let mm = Mm::default();
/// let a = Call::mmap(0, 4096, 0x1, 0x22, -1, 0).apply(&mm, |_| None).unwrap();
/// assert_eq!(Call::mseal(a, 4096, 0).apply(&mm, |_| None), Ok(0));
/// assert_eq!(Call::munmap(a, 4096).apply(&mm, |_| None), Err(Errno::EPERM));
/// assert_eq!(Call::mseal(a, 4096, 0).to_string(), format!("mseal({a:#x}, 4096, 0)"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mseal {
    /// Start, page-aligned.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Must be 0.
    pub flags: u64,
}

/// A VMA name as `prctl(PR_SET_VMA_ANON_NAME)` reads it: the bytes of a C
/// string up to its NUL, at most [`AnonName::MAX`] of them kept (a longer
/// string fails as an 80-byte one does, so nothing is lost). Copy, so that
/// a [`Call`] stays a plain value.
///
/// ```
/// use mm::call::AnonName;
/// assert_eq!(AnonName::new(b"heap\0rest").as_bytes(), b"heap");
/// assert_eq!(AnonName::new(&[b'x'; 200]).as_bytes().len(), AnonName::MAX);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct AnonName {
    len: u8,
    bytes: [u8; AnonName::MAX],
}

impl AnonName {
    /// Bytes kept: the kernel's limit, `ANON_VMA_NAME_MAX_LEN` (80, the
    /// NUL included, so a kept string of 80 bytes is already too long).
    pub const MAX: usize = crate::mm::ANON_NAME_MAX;

    /// The name in `bytes`, cut at the first NUL and at [`AnonName::MAX`]
    /// bytes.
    pub fn new(bytes: &[u8]) -> AnonName {
        let s = bytes.split(|&b| b == 0).next().unwrap_or(&[]);
        let s = &s[..s.len().min(AnonName::MAX)];
        let mut out = AnonName {
            len: s.len() as u8,
            bytes: [0; AnonName::MAX],
        };
        out.bytes[..s.len()].copy_from_slice(s);
        out
    }

    /// The bytes, without a NUL.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// Prints as a C string literal.
impl fmt::Debug for AnonName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"")?;
        for &b in self.as_bytes() {
            match b {
                b'"' | b'\\' => write!(f, "\\{}", b as char)?,
                0x20..=0x7e => write!(f, "{}", b as char)?,
                _ => write!(f, "\\x{b:02x}")?,
            }
        }
        f.write_str("\"")
    }
}

/// The arguments of `prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, addr, len,
/// name)`; `name` `None` is a NULL pointer (clear the name).
///
/// ```
/// use mm::call::{AnonName, Call};
/// use mm::{Errno, Layout, Mm, Policy};
///
/// let named = Layout { anon_vma_name: true, ..Layout::default() };
/// let mm = Mm::new(Policy::shared_default(), named);
/// let a = Call::mmap(0, 4096, 0x1, 0x22, -1, 0).apply(&mm, |_| None).unwrap();
/// let set = Call::set_vma_anon_name(a, 4096, Some(AnonName::new(b"buf")));
/// assert_eq!(set.apply(&mm, |_| None), Ok(0));
/// assert_eq!(
///     set.to_string(),
///     format!("prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, {a:#x}, 4096, \"buf\")")
/// );
/// assert_eq!(Call::set_vma_anon_name(a, 4096, None).to_string(),
///     format!("prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, {a:#x}, 4096, NULL)"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SetVmaAnonName {
    /// Start, page-aligned.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// The name, or `None` for NULL.
    pub name: Option<AnonName>,
}

/// The arguments of `pkey_alloc`.
///
/// ```
/// use mm::call::Call;
/// use mm::{Errno, Mm};
///
/// // Without protection keys, as on this project's machine.
/// let mm = Mm::default();
/// assert_eq!(Call::pkey_alloc(0, 0x1).apply(&mm, |_| None), Err(Errno::EINVAL));
/// assert_eq!(Call::pkey_alloc(0, 0x1).to_string(), "pkey_alloc(0, PKEY_DISABLE_ACCESS)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PkeyAlloc {
    /// Must be 0.
    pub flags: u64,
    /// `PKEY_DISABLE_ACCESS` (1) and/or `PKEY_DISABLE_WRITE` (2).
    pub access_rights: u64,
}

/// The arguments of `pkey_mprotect`; `pkey` is a C `int`, -1 for none.
///
/// ```
/// use mm::call::Call;
/// use mm::{Errno, Mm};
///
/// let mm = Mm::default();
/// let a = Call::mmap(0, 4096, 0x3, 0x22, -1, 0).apply(&mm, |_| None).unwrap();
/// assert_eq!(Call::pkey_mprotect(a, 4096, 0x1, -1).apply(&mm, |_| None), Ok(0));
/// assert_eq!(Call::pkey_mprotect(a, 4096, 0x1, 1).apply(&mm, |_| None), Err(Errno::EINVAL));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PkeyMprotect {
    /// Start, page-aligned.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// `PROT_*` bits.
    pub prot: u64,
    /// The key, or -1.
    pub pkey: i32,
}

/// The argument of `pkey_free`.
///
/// ```
/// use mm::call::Call;
/// assert_eq!(Call::pkey_free(3).to_string(), "pkey_free(3)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PkeyFree {
    /// The key.
    pub pkey: i32,
}

/// The arguments of `UFFDIO_REGISTER` (`struct uffdio_register`).
///
/// ```
/// use mm::call::Call;
/// use mm::Mm;
///
/// let mm = Mm::default();
/// let a = Call::mmap(0, 4096, 0x3, 0x22, -1, 0).apply(&mm, |_| None).unwrap();
/// let reg = Call::uffd_register(a, 4096, 0x1);
/// assert_eq!(reg.apply(&mm, |_| None), Ok(0));
/// assert_eq!(
///     reg.to_string(),
///     format!("ioctl(uffd, UFFDIO_REGISTER, {{start={a:#x}, len=4096, \
///              mode=UFFDIO_REGISTER_MODE_MISSING}})")
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UffdRegister {
    /// Start, page-aligned.
    pub addr: u64,
    /// Length in bytes, page-aligned.
    pub len: u64,
    /// `UFFDIO_REGISTER_MODE_*` bits.
    pub mode: u64,
}

/// The arguments of `UFFDIO_UNREGISTER` (`struct uffdio_range`).
///
/// ```
/// use mm::call::Call;
/// use mm::{Errno, Mm};
/// let mm = Mm::default();
/// // Nothing mapped there.
/// let unreg = Call::uffd_unregister(0x10000, 4096);
/// assert_eq!(unreg.apply(&mm, |_| None), Err(Errno::EINVAL));
/// assert_eq!(unreg.to_string(), "ioctl(uffd, UFFDIO_UNREGISTER, {start=0x10000, len=4096})");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UffdUnregister {
    /// Start, page-aligned.
    pub addr: u64,
    /// Length in bytes, page-aligned.
    pub len: u64,
}

// A bit the kernel does not know in each flag word the model takes as
// `u32`: it stands in for bits above 31 (see `low_word`).
const STRAY_PROT: u32 = 0x10;
const STRAY_MAP: u32 = 0x80_0000;
const STRAY_MREMAP: u32 = 0x8;

/// The model's `u32` for a flag word the kernel takes as `unsigned long`.
/// The kernel names no flag above bit 31, so a higher bit does what any
/// unknown bit does (ignored by `mmap`, refused by `mprotect`, `mremap`
/// and `MAP_SHARED_VALIDATE`); an unknown low bit, `stray`, keeps that.
fn low_word(word: u64, stray: u32) -> u32 {
    let high = if word >> 32 != 0 { stray } else { 0 };
    word as u32 | high
}

impl Call {
    /// `mmap(addr, len, prot, flags, fd, off)`.
    pub const fn mmap(addr: u64, len: u64, prot: u64, flags: u64, fd: i32, off: u64) -> Call {
        Call::Mmap(Mmap {
            addr,
            len,
            prot,
            flags,
            fd,
            off,
        })
    }

    /// `munmap(addr, len)`.
    pub const fn munmap(addr: u64, len: u64) -> Call {
        Call::Munmap(Munmap { addr, len })
    }

    /// `mprotect(addr, len, prot)`.
    pub const fn mprotect(addr: u64, len: u64, prot: u64) -> Call {
        Call::Mprotect(Mprotect { addr, len, prot })
    }

    /// `mremap(addr, old_len, new_len, flags, new_addr)`.
    pub const fn mremap(addr: u64, old_len: u64, new_len: u64, flags: u64, new_addr: u64) -> Call {
        Call::Mremap(Mremap {
            addr,
            old_len,
            new_len,
            flags,
            new_addr,
        })
    }

    /// `brk(addr)`.
    pub const fn brk(addr: u64) -> Call {
        Call::Brk(Brk { addr })
    }

    /// A write to the byte at `addr`.
    pub const fn write_fault(addr: u64) -> Call {
        Call::WriteFault(WriteFault { addr })
    }

    /// `madvise(addr, len, advice)`.
    pub const fn madvise(addr: u64, len: u64, advice: u64) -> Call {
        Call::Madvise(Madvise { addr, len, advice })
    }

    /// `mlock(addr, len)`.
    pub const fn mlock(addr: u64, len: u64) -> Call {
        Call::Mlock(Mlock { addr, len })
    }

    /// `mlock2(addr, len, flags)`.
    pub const fn mlock2(addr: u64, len: u64, flags: u64) -> Call {
        Call::Mlock2(Mlock2 { addr, len, flags })
    }

    /// `munlock(addr, len)`.
    pub const fn munlock(addr: u64, len: u64) -> Call {
        Call::Munlock(Munlock { addr, len })
    }

    /// `mlockall(flags)`.
    pub const fn mlockall(flags: u64) -> Call {
        Call::Mlockall(Mlockall { flags })
    }

    /// `munlockall()`.
    pub const fn munlockall() -> Call {
        Call::Munlockall(Munlockall {})
    }

    /// `mseal(addr, len, flags)`.
    pub const fn mseal(addr: u64, len: u64, flags: u64) -> Call {
        Call::Mseal(Mseal { addr, len, flags })
    }

    /// `prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, addr, len, name)`.
    pub const fn set_vma_anon_name(addr: u64, len: u64, name: Option<AnonName>) -> Call {
        Call::SetVmaAnonName(SetVmaAnonName { addr, len, name })
    }

    /// `pkey_alloc(flags, access_rights)`.
    pub const fn pkey_alloc(flags: u64, access_rights: u64) -> Call {
        Call::PkeyAlloc(PkeyAlloc {
            flags,
            access_rights,
        })
    }

    /// `pkey_mprotect(addr, len, prot, pkey)`.
    pub const fn pkey_mprotect(addr: u64, len: u64, prot: u64, pkey: i32) -> Call {
        Call::PkeyMprotect(PkeyMprotect {
            addr,
            len,
            prot,
            pkey,
        })
    }

    /// `pkey_free(pkey)`.
    pub const fn pkey_free(pkey: i32) -> Call {
        Call::PkeyFree(PkeyFree { pkey })
    }

    /// `ioctl(uffd, UFFDIO_REGISTER, {addr, len, mode})`.
    pub const fn uffd_register(addr: u64, len: u64, mode: u64) -> Call {
        Call::UffdRegister(UffdRegister { addr, len, mode })
    }

    /// `ioctl(uffd, UFFDIO_UNREGISTER, {addr, len})`.
    pub const fn uffd_unregister(addr: u64, len: u64) -> Call {
        Call::UffdUnregister(UffdUnregister { addr, len })
    }

    /// Run the call on `mm`: the value the system call returns (an
    /// address, the break, 0 for the calls that return nothing), or the
    /// errno, from the same checks in the kernel's order.
    ///
    /// `file` is asked for the file behind an `mmap`'s descriptor, at most
    /// once and only for a file mapping; `None` means the descriptor names
    /// no file (`EBADF`). Callers without files pass `|_| None`.
    ///
    /// ```
    /// use mm::call::Call;
    /// use mm::{Errno, Mm};
    ///
    /// let mm = Mm::default();
    /// // MAP_PRIVATE without MAP_ANONYMOUS wants a file; -1 is none.
    /// let no_file = Call::mmap(0, 4096, 0x1, 0x2, -1, 0);
    /// assert_eq!(no_file.apply(&mm, |_| None), Err(Errno::EBADF));
    /// ```
    pub fn apply(
        &self,
        mm: &Mm,
        file: impl FnOnce(i32) -> Option<Arc<File>>,
    ) -> Result<u64, Errno> {
        match self {
            Call::Mmap(c) => {
                let anonymous = c.flags & u64::from(MapFlags::ANONYMOUS.bits()) != 0;
                let file = if anonymous { None } else { file(c.fd) };
                let prot = Prot::from_bits_retain(low_word(c.prot, STRAY_PROT));
                let flags = MapFlags::from_bits_retain(low_word(c.flags, STRAY_MAP));
                mm.mmap(c.addr, c.len, prot, flags, file.as_ref(), c.off)
            }
            Call::Munmap(c) => mm.munmap(c.addr, c.len).map(|()| 0),
            Call::Mprotect(c) => {
                let prot = Prot::from_bits_retain(low_word(c.prot, STRAY_PROT));
                mm.mprotect(c.addr, c.len, prot).map(|()| 0)
            }
            Call::Mremap(c) => {
                let flags = MremapFlags::from_bits_retain(low_word(c.flags, STRAY_MREMAP));
                mm.mremap(c.addr, c.old_len, c.new_len, flags, c.new_addr)
            }
            Call::Brk(c) => Ok(mm.brk(c.addr)),
            Call::WriteFault(c) => mm
                .fault(c.addr, Access::Write)
                .map(|_| 0)
                .map_err(FaultError::errno),
            // madvise / mlock: `int` arguments keep their low 32 bits.
            Call::Madvise(c) => mm
                .madvise(c.addr, c.len, Advice(c.advice as i32))
                .map(|()| 0),
            Call::Mlock(c) => mm.mlock(c.addr, c.len).map(|()| 0),
            Call::Mlock2(c) => mm.mlock2(c.addr, c.len, c.flags as u32).map(|()| 0),
            Call::Munlock(c) => mm.munlock(c.addr, c.len).map(|()| 0),
            Call::Mlockall(c) => mm.mlockall(c.flags as u32).map(|()| 0),
            Call::Munlockall(_) => mm.munlockall().map(|()| 0),
            Call::Mseal(c) => mm.mseal(c.addr, c.len, c.flags).map(|()| 0),
            Call::SetVmaAnonName(c) => {
                let name = c.name.as_ref().map(AnonName::as_bytes);
                mm.set_vma_anon_name(c.addr, c.len, name).map(|()| 0)
            }
            Call::PkeyAlloc(c) => mm.pkey_alloc(c.flags, c.access_rights),
            Call::PkeyMprotect(c) => {
                let prot = Prot::from_bits_retain(low_word(c.prot, STRAY_PROT));
                mm.pkey_mprotect(c.addr, c.len, prot, c.pkey).map(|()| 0)
            }
            Call::PkeyFree(c) => mm.pkey_free(c.pkey).map(|()| 0),
            Call::UffdRegister(c) => mm.uffd_register(c.addr, c.len, c.mode).map(|()| 0),
            Call::UffdUnregister(c) => mm.uffd_unregister(c.addr, c.len).map(|()| 0),
        }
    }

    /// The call's name as it prints: the system call's, or `write_fault`.
    ///
    /// ```
    /// use mm::call::Call;
    /// assert_eq!(Call::write_fault(0).name(), "write_fault");
    /// ```
    pub fn name(&self) -> &'static str {
        match self {
            Call::Mmap(_) => "mmap",
            Call::Munmap(_) => "munmap",
            Call::Mprotect(_) => "mprotect",
            Call::Mremap(_) => "mremap",
            Call::Brk(_) => "brk",
            Call::WriteFault(_) => "write_fault",
            Call::Madvise(_) => "madvise",
            Call::Mlock(_) => "mlock",
            Call::Mlock2(_) => "mlock2",
            Call::Munlock(_) => "munlock",
            Call::Mlockall(_) => "mlockall",
            Call::Munlockall(_) => "munlockall",
            Call::Mseal(_) => "mseal",
            Call::SetVmaAnonName(_) => "prctl",
            Call::PkeyAlloc(_) => "pkey_alloc",
            Call::PkeyMprotect(_) => "pkey_mprotect",
            Call::PkeyFree(_) => "pkey_free",
            Call::UffdRegister(_) | Call::UffdUnregister(_) => "ioctl",
        }
    }
}

/// A result as a system call's return register holds it: the value, or
/// `-errno`. Real and recorded calls report their results so; this is the
/// form to compare the model's with theirs.
///
/// ```
/// use mm::{call, Errno};
/// assert_eq!(call::raw(Ok(0x7000)), 0x7000);
/// assert_eq!(call::raw(Err(Errno::ENOMEM)), -12);
/// ```
pub fn raw(result: Result<u64, Errno>) -> i64 {
    match result {
        Ok(v) => v as i64,
        Err(e) => -i64::from(e.code()),
    }
}

/// Prints the call as C: addresses in hex, lengths and offsets in decimal
/// (in hex past 32 bits, where the bit pattern is what matters), flag
/// words by name with any unnamed bits in hex.
impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}(", self.name())?;
        match self {
            Call::Mmap(c) => write!(
                f,
                "{:#x}, {}, {}, {}, {}, {}",
                c.addr,
                Size(c.len),
                flag_word::<Prot>("PROT_", c.prot, "PROT_NONE"),
                map_word(c.flags),
                c.fd,
                Size(c.off)
            )?,
            Call::Munmap(c) => write!(f, "{:#x}, {}", c.addr, Size(c.len))?,
            Call::Mprotect(c) => write!(
                f,
                "{:#x}, {}, {}",
                c.addr,
                Size(c.len),
                flag_word::<Prot>("PROT_", c.prot, "PROT_NONE")
            )?,
            Call::Mremap(c) => write!(
                f,
                "{:#x}, {}, {}, {}, {:#x}",
                c.addr,
                Size(c.old_len),
                Size(c.new_len),
                flag_word::<MremapFlags>("MREMAP_", c.flags, "0"),
                c.new_addr
            )?,
            Call::Brk(Brk { addr }) | Call::WriteFault(WriteFault { addr }) => {
                write!(f, "{addr:#x}")?
            }
            Call::Madvise(c) => {
                let advice = Advice(c.advice as i32);
                if c.advice >> 32 == 0 && advice.is_known() {
                    write!(f, "{:#x}, {}, {advice}", c.addr, Size(c.len))?
                } else {
                    write!(f, "{:#x}, {}, {}", c.addr, Size(c.len), c.advice as i64)?
                }
            }
            Call::Mlock(Mlock { addr, len }) | Call::Munlock(Munlock { addr, len }) => {
                write!(f, "{addr:#x}, {}", Size(*len))?
            }
            Call::Mlock2(c) => write!(
                f,
                "{:#x}, {}, {}",
                c.addr,
                Size(c.len),
                named_bits(c.flags, &[(1, "MLOCK_ONFAULT")])
            )?,
            Call::Mlockall(c) => write!(
                f,
                "{}",
                named_bits(
                    c.flags,
                    &[(1, "MCL_CURRENT"), (2, "MCL_FUTURE"), (4, "MCL_ONFAULT")]
                )
            )?,
            Call::Munlockall(_) => {}
            Call::Mseal(c) => write!(f, "{:#x}, {}, {}", c.addr, Size(c.len), Hex0(c.flags))?,
            Call::SetVmaAnonName(c) => {
                write!(
                    f,
                    "PR_SET_VMA, PR_SET_VMA_ANON_NAME, {:#x}, {}, ",
                    c.addr,
                    Size(c.len)
                )?;
                match &c.name {
                    Some(n) => write!(f, "{n:?}")?,
                    None => f.write_str("NULL")?,
                }
            }
            Call::PkeyAlloc(c) => write!(
                f,
                "{}, {}",
                Hex0(c.flags),
                named_bits(
                    c.access_rights,
                    &[(1, "PKEY_DISABLE_ACCESS"), (2, "PKEY_DISABLE_WRITE")]
                )
            )?,
            Call::PkeyMprotect(c) => write!(
                f,
                "{:#x}, {}, {}, {}",
                c.addr,
                Size(c.len),
                flag_word::<Prot>("PROT_", c.prot, "PROT_NONE"),
                c.pkey
            )?,
            Call::PkeyFree(c) => write!(f, "{}", c.pkey)?,
            Call::UffdRegister(c) => write!(
                f,
                "uffd, UFFDIO_REGISTER, {{start={:#x}, len={}, mode={}}}",
                c.addr,
                Size(c.len),
                named_bits(
                    c.mode,
                    &[
                        (1, "UFFDIO_REGISTER_MODE_MISSING"),
                        (2, "UFFDIO_REGISTER_MODE_WP"),
                        (4, "UFFDIO_REGISTER_MODE_MINOR")
                    ]
                )
            )?,
            Call::UffdUnregister(c) => write!(
                f,
                "uffd, UFFDIO_UNREGISTER, {{start={:#x}, len={}}}",
                c.addr,
                Size(c.len)
            )?,
        }
        f.write_str(")")
    }
}

/// A flag word with no names: 0, or the bits in hex.
struct Hex0(u64);

impl fmt::Display for Hex0 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            f.write_str("0")
        } else {
            write!(f, "{:#x}", self.0)
        }
    }
}

/// A word of the bits `names` names, joined by `|`, the rest in hex; "0"
/// when it is 0.
fn named_bits(word: u64, names: &[(u64, &str)]) -> String {
    let mut parts = Vec::new();
    let mut rest = word;
    for &(bit, name) in names {
        if word & bit != 0 {
            parts.push(name.to_string());
            rest &= !bit;
        }
    }
    if rest != 0 {
        parts.push(format!("{rest:#x}"));
    }
    join(parts, "0")
}

/// A length or offset as [`Call`] prints it.
struct Size(u64);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 >> 32 == 0 {
            write!(f, "{}", self.0)
        } else {
            write!(f, "{:#x}", self.0)
        }
    }
}

/// A flag word as C writes it: its flags' names joined by `|`, then the
/// bits no name covers in hex; `none` when it is 0.
fn flag_word<F: Flags<Bits = u32>>(prefix: &str, word: u64, none: &str) -> String {
    let mut parts = Vec::new();
    push_names::<F>(&mut parts, prefix, word);
    join(parts, none)
}

/// `mmap`'s flags: the mapping type, then the flags.
fn map_word(word: u64) -> String {
    let ty = word & u64::from(MapFlags::TYPE);
    let mut parts = Vec::new();
    // The type is a number, not bits: 3 is MAP_SHARED_VALIDATE, not
    // MAP_SHARED|MAP_PRIVATE.
    let named = MapFlags::FLAGS
        .iter()
        .find(|flag| ty != 0 && u64::from(flag.value().bits()) == ty);
    match named {
        Some(flag) => parts.push(format!("MAP_{}", flag.name())),
        None if ty != 0 => parts.push(format!("{ty:#x}")),
        None => {}
    }
    push_names::<MapFlags>(&mut parts, "MAP_", word & !u64::from(MapFlags::TYPE));
    join(parts, "0")
}

fn push_names<F: Flags<Bits = u32>>(parts: &mut Vec<String>, prefix: &str, word: u64) {
    let mut rest = word;
    for (name, flag) in F::from_bits_retain(word as u32).iter_names() {
        rest &= !u64::from(flag.bits());
        // MAP_32BIT keeps its C prefix in Rust, where a name cannot start
        // with a digit.
        if name.starts_with(prefix) {
            parts.push(name.to_string());
        } else {
            parts.push(format!("{prefix}{name}"));
        }
    }
    if rest != 0 {
        parts.push(format!("{rest:#x}"));
    }
}

fn join(parts: Vec<String>, none: &str) -> String {
    if parts.is_empty() {
        none.to_string()
    } else {
        parts.join("|")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_words_print_as_c() {
        let big = 1 << 40;
        let cases = [
            (
                Call::mmap(0x1000, big, 0, 0x3 | 0x10_0000 | 0x40, 5, 4096),
                "mmap(0x1000, 0x10000000000, PROT_NONE, \
                 MAP_SHARED_VALIDATE|MAP_32BIT|MAP_FIXED_NOREPLACE, 5, 4096)",
            ),
            (
                Call::mmap(0, 1, 0x8 | 0x4 | 1 << 40, 0x20 | 0x80_0000, -1, 0),
                "mmap(0x0, 1, PROT_EXEC|0x10000000008, MAP_ANONYMOUS|0x800000, -1, 0)",
            ),
            (
                Call::mmap(0, 1, 0x0100_0000, 0xf, -1, 0),
                "mmap(0x0, 1, PROT_GROWSDOWN, 0xf, -1, 0)",
            ),
            (
                Call::mmap(0, 1, 0x1, 0, -1, 0),
                "mmap(0x0, 1, PROT_READ, 0, -1, 0)",
            ),
            (
                Call::mremap(0x2000, 0, 4095, 0x7 | 1 << 33, 0x5000),
                "mremap(0x2000, 0, 4095, \
                 MREMAP_MAYMOVE|MREMAP_FIXED|MREMAP_DONTUNMAP|0x200000000, 0x5000)",
            ),
            (
                Call::mremap(0x2000, 4096, 4096, 0, 0),
                "mremap(0x2000, 4096, 4096, 0, 0x0)",
            ),
        ];
        for (call, text) in cases {
            assert_eq!(call.to_string(), text);
        }
    }

    #[test]
    fn seal_name_pkey_uffd_calls_print_as_c() {
        let cases = [
            (Call::mseal(0x1000, 1 << 40, 0x3), "mseal(0x1000, 0x10000000000, 0x3)"),
            (
                Call::set_vma_anon_name(0x2000, 4096, Some(AnonName::new(b"a\"b\\\t"))),
                "prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, 0x2000, 4096, \"a\\\"b\\\\\\x09\")",
            ),
            (Call::pkey_alloc(1, 0x3 | 0x8), "pkey_alloc(0x1, PKEY_DISABLE_ACCESS|PKEY_DISABLE_WRITE|0x8)"),
            (Call::pkey_alloc(0, 0), "pkey_alloc(0, 0)"),
            (Call::pkey_mprotect(0x3000, 1, 0x5, -1), "pkey_mprotect(0x3000, 1, PROT_READ|PROT_EXEC, -1)"),
            (Call::pkey_free(-7), "pkey_free(-7)"),
            (
                Call::uffd_register(0x4000, 8192, 0x7 | 0x10),
                "ioctl(uffd, UFFDIO_REGISTER, {start=0x4000, len=8192, mode=UFFDIO_REGISTER_MODE_MISSING|\
                 UFFDIO_REGISTER_MODE_WP|UFFDIO_REGISTER_MODE_MINOR|0x10})",
            ),
            (Call::uffd_register(0x4000, 8192, 0), "ioctl(uffd, UFFDIO_REGISTER, {start=0x4000, len=8192, mode=0})"),
        ];
        for (call, text) in cases {
            assert_eq!(call.to_string(), text);
        }
    }

    #[test]
    fn names_past_the_limit_fail_as_the_kernel_says() {
        let mm = Mm::new(
            crate::Policy::shared_default(),
            crate::Layout {
                anon_vma_name: true,
                ..crate::Layout::default()
            },
        );
        let a = Call::mmap(0, 4096, 0x1, 0x22, -1, 0)
            .apply(&mm, |_| None)
            .unwrap();
        let long = AnonName::new(&[b'n'; 300]);
        assert_eq!(long.as_bytes().len(), AnonName::MAX);
        let set = Call::set_vma_anon_name(a, 4096, Some(long));
        assert_eq!(set.apply(&mm, |_| None), Err(Errno::EINVAL));
        let ok = Call::set_vma_anon_name(a, 4096, Some(AnonName::new(&[b'n'; 79])));
        assert_eq!(ok.apply(&mm, |_| None), Ok(0));
        // High bits of a pkey_mprotect prot are unknown bits: EINVAL.
        assert_eq!(
            Call::pkey_mprotect(a, 4096, 1 << 33, -1).apply(&mm, |_| None),
            Err(Errno::EINVAL)
        );
    }

    #[test]
    fn high_flag_bits_act_as_unknown_ones() {
        let mm = Mm::default();
        let none = |_| None;
        // mmap ignores both, as the kernel does for MAP_PRIVATE.
        let anon = Call::mmap(0, 4096, 0x3 | 1 << 35, 0x22 | 1 << 40, -1, 0);
        let a = anon.apply(&mm, none).unwrap();
        // A file's MAP_SHARED drops unknown flags, MAP_SHARED_VALIDATE
        // refuses them.
        let file = File::new("f", 4096);
        let open = |_| Some(file.clone());
        let shared = Call::mmap(0, 4096, 0x3, 0x1 | 1 << 40, 3, 0);
        assert!(shared.apply(&mm, open).is_ok());
        let validate = Call::mmap(0, 4096, 0x3, 0x3 | 1 << 40, 3, 0);
        assert_eq!(validate.apply(&mm, open), Err(Errno::EOPNOTSUPP));
        let remap = Call::mremap(a, 4096, 4096, 1 << 63, 0);
        assert_eq!(remap.apply(&mm, none), Err(Errno::EINVAL));
        assert_eq!(Call::mremap(a, 4096, 4096, 0, 0).apply(&mm, none), Ok(a));
    }
}
