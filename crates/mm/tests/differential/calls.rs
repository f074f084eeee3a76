//! The calls a case is made of, how each runs on the model, and how each
//! prints.

use std::fmt;
use std::sync::Arc;

use mm::{Access, File, MapFlags, Mm, MremapFlags, Prot};

use super::child::{OP_BRK, OP_FAULT, OP_MMAP, OP_MPROTECT, OP_MREMAP, OP_MUNMAP};

/// Which file descriptor an `mmap` passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fd {
    /// `-1`.
    None,
    /// The parent's test file with this index.
    File(usize),
}

/// One system call (or write fault) with concrete arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    Mmap {
        addr: u64,
        len: u64,
        prot: u32,
        flags: u32,
        fd: Fd,
        off: u64,
    },
    Munmap {
        addr: u64,
        len: u64,
    },
    Mprotect {
        addr: u64,
        len: u64,
        prot: u32,
    },
    Mremap {
        old: u64,
        old_len: u64,
        new_len: u64,
        flags: u32,
        new_addr: u64,
    },
    Brk {
        addr: u64,
    },
    Fault {
        addr: u64,
    },
}

impl Call {
    /// The child's command record.
    pub fn record(&self, fds: &[i64]) -> [u64; 7] {
        match *self {
            Call::Mmap {
                addr,
                len,
                prot,
                flags,
                fd,
                off,
            } => {
                let fd = match fd {
                    Fd::None => -1i64,
                    Fd::File(i) => fds[i],
                };
                [
                    OP_MMAP,
                    addr,
                    len,
                    u64::from(prot),
                    u64::from(flags),
                    fd as u64,
                    off,
                ]
            }
            Call::Munmap { addr, len } => [OP_MUNMAP, addr, len, 0, 0, 0, 0],
            Call::Mprotect { addr, len, prot } => {
                [OP_MPROTECT, addr, len, u64::from(prot), 0, 0, 0]
            }
            Call::Mremap {
                old,
                old_len,
                new_len,
                flags,
                new_addr,
            } => [
                OP_MREMAP,
                old,
                old_len,
                new_len,
                u64::from(flags),
                new_addr,
                0,
            ],
            Call::Brk { addr } => [OP_BRK, addr, 0, 0, 0, 0, 0],
            Call::Fault { addr } => [OP_FAULT, addr, 0, 0, 0, 0, 0],
        }
    }

    /// Run the call on the model; the result as the child reports it
    /// (value, or `-errno`).
    pub fn run_model(&self, mm: &Mm, files: &[Arc<File>]) -> i64 {
        fn ret(r: Result<u64, mm::Errno>) -> i64 {
            match r {
                Ok(v) => v as i64,
                Err(e) => -i64::from(e.code()),
            }
        }
        match *self {
            Call::Mmap {
                addr,
                len,
                prot,
                flags,
                fd,
                off,
            } => {
                let file = match fd {
                    Fd::None => None,
                    Fd::File(i) => Some(&files[i]),
                };
                ret(mm.mmap(
                    addr,
                    len,
                    Prot::from_bits_retain(prot),
                    MapFlags::from_bits_retain(flags),
                    file,
                    off,
                ))
            }
            Call::Munmap { addr, len } => ret(mm.munmap(addr, len).map(|()| 0)),
            Call::Mprotect { addr, len, prot } => ret(mm
                .mprotect(addr, len, Prot::from_bits_retain(prot))
                .map(|()| 0)),
            Call::Mremap {
                old,
                old_len,
                new_len,
                flags,
                new_addr,
            } => ret(mm.mremap(
                old,
                old_len,
                new_len,
                MremapFlags::from_bits_retain(flags),
                new_addr,
            )),
            Call::Brk { addr } => mm.brk(addr) as i64,
            Call::Fault { addr } => match mm.fault(addr, Access::Write) {
                Ok(_) => 1,
                Err(e) => -i64::from(e.errno().code()),
            },
        }
    }
}

fn bits(v: u32, names: &[(u32, &str)], zero: &str) -> String {
    let mut out = Vec::new();
    let mut rest = v;
    for &(b, n) in names {
        if b != 0 && v & b == b {
            out.push(n.to_string());
            rest &= !b;
        }
    }
    if rest != 0 {
        out.push(format!("{rest:#x}"));
    }
    if out.is_empty() {
        zero.to_string()
    } else {
        out.join("|")
    }
}

fn prot_str(p: u32) -> String {
    bits(
        p,
        &[
            (1, "PROT_READ"),
            (2, "PROT_WRITE"),
            (4, "PROT_EXEC"),
            (0x0100_0000, "PROT_GROWSDOWN"),
            (0x0200_0000, "PROT_GROWSUP"),
        ],
        "PROT_NONE",
    )
}

fn map_str(f: u32) -> String {
    let ty = match f & 0xf {
        1 => "MAP_SHARED".to_string(),
        2 => "MAP_PRIVATE".to_string(),
        3 => "MAP_SHARED_VALIDATE".to_string(),
        t => format!("{t:#x}"),
    };
    let rest = bits(
        f & !0xf,
        &[
            (0x10, "MAP_FIXED"),
            (0x20, "MAP_ANONYMOUS"),
            (0x40, "MAP_32BIT"),
            (0x100, "MAP_GROWSDOWN"),
            (0x4000, "MAP_NORESERVE"),
            (0x8000, "MAP_POPULATE"),
            (0x2_0000, "MAP_STACK"),
            (0x10_0000, "MAP_FIXED_NOREPLACE"),
        ],
        "",
    );
    if rest.is_empty() {
        ty
    } else {
        format!("{ty}|{rest}")
    }
}

fn mremap_str(f: u32) -> String {
    bits(
        f,
        &[
            (1, "MREMAP_MAYMOVE"),
            (2, "MREMAP_FIXED"),
            (4, "MREMAP_DONTUNMAP"),
        ],
        "0",
    )
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Call::Mmap {
                addr,
                len,
                prot,
                flags,
                fd,
                off,
            } => {
                let fd = match fd {
                    Fd::None => "-1".to_string(),
                    Fd::File(i) => format!("file{i}"),
                };
                write!(
                    f,
                    "mmap({addr:#x}, {len:#x}, {}, {}, {fd}, {off:#x})",
                    prot_str(prot),
                    map_str(flags)
                )
            }
            Call::Munmap { addr, len } => write!(f, "munmap({addr:#x}, {len:#x})"),
            Call::Mprotect { addr, len, prot } => {
                write!(f, "mprotect({addr:#x}, {len:#x}, {})", prot_str(prot))
            }
            Call::Mremap {
                old,
                old_len,
                new_len,
                flags,
                new_addr,
            } => write!(
                f,
                "mremap({old:#x}, {old_len:#x}, {new_len:#x}, {}, {new_addr:#x})",
                mremap_str(flags)
            ),
            Call::Brk { addr } => write!(f, "brk({addr:#x})"),
            Call::Fault { addr } => write!(f, "write_fault({addr:#x})"),
        }
    }
}

/// A raw result as text: an address/value, or the errno's name.
pub fn result_str(r: i64) -> String {
    if r < 0 && r > -4096 {
        match mm::Errno::from_code((-r) as i32) {
            Some(e) => format!("-{}", e.name()),
            None => format!("-errno{}", -r),
        }
    } else {
        format!("{r:#x}")
    }
}
