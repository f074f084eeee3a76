//! Fuzz target `mm_calls`: sequences of every public [`mm::Mm`] call with
//! arbitrary arguments.
//!
//! Each input picks a layout (map-count limit, bottom-up allocation, THP
//! alignment, execute-only keys, ...), reverse-map designs and up to
//! [`MAX_CALLS`] calls: `mmap` (anonymous and of a handful of files of
//! several sizes and open modes, with any flag bits), `munmap`,
//! `mprotect`, `mremap` (every flag combination), `brk`, `set_brk_base`,
//! faults, `fork`, `exit`, `exec`, dropping an address space, rebuilding
//! one with `from_smaps`, truncating a file, and the read-only queries.
//! Addresses mix page offsets around a few bases (so calls hit, split and
//! merge existing VMAs) with unaligned values, 0, the top of the address
//! space and `u64::MAX`.
//!
//! The sequence runs twice, on address spaces that differ only in their
//! VMA index (maple tree and legacy), each with files of its own. After
//! every call:
//!
//! - both runs returned the same result and hold the same VMAs (same
//!   ranges, flags, offsets, files and anon_vma sharing, up to renaming);
//! - a refused call left its address space exactly as it was, and no call
//!   touched any other address space;
//! - a successful call did what it says on the range it names, and left
//!   every page outside that range alone;
//! - every address space passes `Mm::validate`, every file's reverse map
//!   passes `IMap::validate` and holds exactly the live VMAs mapping the
//!   file, and every anon_vma's tree holds exactly the page ranges of the
//!   live VMAs whose chain names it.
//!
//! Exemptions from "a refused call changes nothing", each Linux's own
//! behaviour that the model reproduces on purpose:
//! - `mprotect` changes VMAs in address order and stops at a hole or a
//!   refused VMA (`mm/mprotect.c`), so a failure may have changed pages
//!   inside its range (for `PROT_GROWSDOWN`, from the grows-down VMA's
//!   start); pages outside must be as they were.
//! - `mremap` unmaps the `MREMAP_FIXED` target and the shrunk tail before
//!   later checks can fail, and the multi-VMA move of Linux 6.17 leaves
//!   the VMAs moved so far where they went (`mm/mremap.c`): a failure may
//!   have changed pages in the source and target ranges only.
//! - A fault that fails may still have given its VMA an anon_vma
//!   (`do_cow_fault` and `expand_downwards` prepare it first), and one
//!   below a grows-down VMA grows it before the access check refuses the
//!   access (`lock_mm_and_find_vma` expands the stack, then
//!   `do_user_addr_fault` checks `access_error`): the map may differ by
//!   that growth only, the anon_vma links are not compared.
//! - `exec` fails past the point of no return, with a partly built image
//!   (as the kernel kills such a process): nothing is required of it but
//!   agreement between the runs and valid structures.
//!
//! Run from the workspace root:
//!
//! ```text
//! cargo +nightly fuzz run mm_calls fuzz/corpus/mm_calls -- -max_total_time=600
//! ```

#![no_main]

use std::collections::HashMap;
use std::sync::Arc;

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use mm::anon::AnonVma;
use mm::policy::{ImapDesign, Policy};
use mm::policy::ItreeKind;
use mm::procmaps::{MapsEntry, SmapsEntry};
use mm::{
    Access, Errno, File, FileMode, Image, IndexKind, Layout, MapFlags, Mm, MremapFlags, Prot,
    Segment, Vma, PAGE_SIZE, PMD_SIZE,
};

/// Enough calls to build, split, merge and move a few dozen VMAs while an
/// input still runs in a millisecond or two.
const MAX_CALLS: usize = 100;
/// Forks stop here, so an input cannot grow memory without bound.
const MAX_MMS: usize = 4;
const TASK_SIZE: u64 = mm::layout::TASK_SIZE_X86_64;
const HEAP: u64 = 0x5555_5555_8000;

// ---------------------------------------------------------------------
// Decoded arguments.

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Addr {
    /// A page offset from the start or the end of one of the address
    /// space's VMAs: calls that must hit a mapping (`mremap`) mostly miss
    /// one otherwise.
    VmaStart(u8, i8),
    VmaEnd(u8, i8),
    /// A page offset around one of [`bases`]: most calls, so that they
    /// land on and next to each other's mappings.
    Near(u8, i8),
    /// The same, off by some bytes.
    Unaligned(u8, i8, u16),
    /// Low memory, around and below `mmap_min_addr`.
    Low(u16),
    /// Pages below the top of the address space.
    Top(u8),
    Zero,
    Max,
    Raw(u64),
}

/// Addresses calls gather around: a quiet window of its own, one 2 MiB
/// aligned, the top-down and bottom-up allocation starts, the heap, the
/// stack top.
fn bases(layout: &Layout) -> [u64; 8] {
    [
        0x1000_0000_0000,
        0x1000_0000_0000 + 64 * PAGE_SIZE,
        0x2000_0020_0000,
        layout.mmap_base - 64 * PAGE_SIZE,
        layout.mmap_base - PMD_SIZE,
        layout.unmapped_base(),
        HEAP,
        layout.stack_top - 64 * PAGE_SIZE,
    ]
}

impl Addr {
    fn get(self, mm: &Mm) -> u64 {
        let layout = mm.layout();
        let near = |b: u8, p: i8| {
            let base = bases(layout)[usize::from(b) % 8];
            base.wrapping_add_signed(i64::from(p) * PAGE_SIZE as i64)
        };
        let vma = |k: u8, p: i8, end: bool| {
            let vmas = mm.vmas();
            let at = vmas
                .get(usize::from(k) % vmas.len().max(1))
                .map_or(bases(layout)[0], |v| if end { v.end() } else { v.start() });
            at.wrapping_add_signed(i64::from(p % 8) * PAGE_SIZE as i64)
        };
        match self {
            Addr::VmaStart(k, p) => vma(k, p, false),
            Addr::VmaEnd(k, p) => vma(k, p, true),
            Addr::Near(b, p) => near(b, p % 48),
            Addr::Unaligned(b, p, off) => near(b, p).wrapping_add(u64::from(off)),
            Addr::Low(p) => u64::from(p) * PAGE_SIZE / 16,
            Addr::Top(p) => TASK_SIZE.wrapping_sub(u64::from(p) * PAGE_SIZE),
            Addr::Zero => 0,
            Addr::Max => u64::MAX,
            Addr::Raw(a) => a,
        }
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Len {
    Pages(u8),
    /// One to eight pages: the usual small mapping.
    Few(u8),
    Bytes(u16),
    /// Multiples of 2 MiB: the THP-aligned placements.
    Huge(u8),
    Zero,
    /// Within a page of 2^64: page rounding wraps.
    NearMax(u16),
    Raw(u64),
}

impl Len {
    fn get(self) -> u64 {
        match self {
            Len::Pages(n) => u64::from(n % 64) * PAGE_SIZE,
            Len::Few(n) => u64::from(n % 8 + 1) * PAGE_SIZE,
            Len::Bytes(n) => u64::from(n),
            Len::Huge(n) => u64::from(n % 4 + 1) * PMD_SIZE,
            Len::Zero => 0,
            Len::NearMax(n) => u64::MAX - u64::from(n),
            Len::Raw(n) => n,
        }
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum ProtArg {
    /// `rwx` plus `PROT_SEM`.
    Bits(u8),
    Grows {
        bits: u8,
        down: bool,
        up: bool,
    },
    Raw(u32),
}

impl ProtArg {
    fn get(self) -> Prot {
        let bits = match self {
            ProtArg::Bits(b) => u32::from(b & 0xf),
            ProtArg::Grows { bits, down, up } => {
                u32::from(bits & 0xf)
                    | if down { Prot::GROWSDOWN.bits() } else { 0 }
                    | if up { Prot::GROWSUP.bits() } else { 0 }
            }
            ProtArg::Raw(r) => r,
        };
        Prot::from_bits_retain(bits)
    }
}

/// `mmap` flags: a mapping type and a set of named flags, or raw bits.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum MapArg {
    /// What programs pass: private or shared, a file or anonymous, maybe
    /// fixed, and a few harmless extras; these mostly succeed.
    Common {
        shared: bool,
        anon: bool,
        fixed: u8,
        extra: u8,
    },
    Common2 {
        shared: bool,
        anon: bool,
        fixed: u8,
        extra: u8,
    },
    /// Any combination of named flags, most of which fail.
    Named {
        ty: u8,
        set: u16,
    },
    Raw(u32),
}

const NAMED_FLAGS: [MapFlags; 14] = [
    MapFlags::ANONYMOUS,
    MapFlags::FIXED,
    MapFlags::FIXED_NOREPLACE,
    MapFlags::GROWSDOWN,
    MapFlags::POPULATE,
    MapFlags::NORESERVE,
    MapFlags::LOCKED,
    MapFlags::STACK,
    MapFlags::SYNC,
    MapFlags::NONBLOCK,
    MapFlags::HUGETLB,
    MapFlags::DENYWRITE,
    MapFlags::EXECUTABLE,
    // MAP_32BIT / MAP_ABOVE4G-like bits the model has no name for.
    MapFlags::from_bits_retain(0x40),
];

impl MapArg {
    fn get(self) -> MapFlags {
        match self {
            MapArg::Common {
                shared,
                anon,
                fixed,
                extra,
            }
            | MapArg::Common2 {
                shared,
                anon,
                fixed,
                extra,
            } => {
                let mut f = if shared {
                    MapFlags::SHARED
                } else {
                    MapFlags::PRIVATE
                };
                if anon {
                    f |= MapFlags::ANONYMOUS;
                }
                f |= match fixed % 4 {
                    1 => MapFlags::FIXED,
                    2 => MapFlags::FIXED_NOREPLACE,
                    _ => MapFlags::empty(),
                };
                let extras = [
                    MapFlags::POPULATE,
                    MapFlags::NORESERVE,
                    MapFlags::LOCKED,
                    MapFlags::STACK,
                    MapFlags::NONBLOCK,
                    MapFlags::SYNC,
                ];
                for (i, x) in extras.iter().enumerate() {
                    if extra & (1 << i) != 0 {
                        f |= *x;
                    }
                }
                if extra & 0xc0 == 0xc0 {
                    f |= MapFlags::GROWSDOWN;
                }
                f
            }
            MapArg::Named { ty, set } => {
                // Mostly the three valid types; sometimes 0 or junk.
                let ty = match ty % 8 {
                    0..=2 => MapFlags::PRIVATE.bits(),
                    3 | 4 => MapFlags::SHARED.bits(),
                    5 => MapFlags::SHARED_VALIDATE.bits(),
                    6 => 0,
                    _ => u32::from(ty >> 4),
                };
                let mut f = MapFlags::from_bits_retain(ty);
                for (i, flag) in NAMED_FLAGS.iter().enumerate() {
                    if set & (1 << i) != 0 {
                        f |= *flag;
                    }
                }
                f
            }
            MapArg::Raw(r) => MapFlags::from_bits_retain(r),
        }
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Offset {
    Pages(u16),
    Raw(u64),
}

impl Offset {
    fn get(self) -> u64 {
        match self {
            Offset::Pages(p) => u64::from(p % 2048) * PAGE_SIZE,
            Offset::Raw(r) => r,
        }
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum BrkArg {
    /// Pages (and bytes) from the current break.
    Rel(i8, u16),
    Abs(Addr),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum AccessArg {
    Read,
    Write,
    Exec,
}

impl AccessArg {
    fn get(self) -> Access {
        match self {
            AccessArg::Read => Access::Read,
            AccessArg::Write => Access::Write,
            AccessArg::Exec => Access::Exec,
        }
    }
}

#[derive(Arbitrary, Debug, Clone)]
struct SegArg {
    file: u8,
    offset: Offset,
    vaddr: Addr,
    filesz: Len,
    memsz: Len,
    prot: u8,
}

#[derive(Debug, Clone)]
enum Call {
    Mmap {
        mm: u8,
        addr: Addr,
        len: Len,
        prot: ProtArg,
        flags: MapArg,
        /// 255 stands for a missing file descriptor.
        file: u8,
        offset: Offset,
    },
    Munmap {
        mm: u8,
        addr: Addr,
        len: Len,
    },
    Mprotect {
        mm: u8,
        addr: Addr,
        len: Len,
        prot: ProtArg,
    },
    Mremap {
        mm: u8,
        addr: Addr,
        old_len: Len,
        new_len: Len,
        flags: u8,
        raw_flags: Option<u32>,
        new_addr: Addr,
    },
    Brk {
        mm: u8,
        to: BrkArg,
    },
    SetBrkBase {
        mm: u8,
        addr: Addr,
    },
    Fault {
        mm: u8,
        addr: Addr,
        access: AccessArg,
    },
    Fork {
        mm: u8,
    },
    Exit {
        mm: u8,
    },
    Exec {
        mm: u8,
        segments: Vec<SegArg>,
        interp: Vec<SegArg>,
        stack: Len,
    },
    /// Drop an address space: its VMAs must leave every reverse map.
    Drop {
        mm: u8,
    },
    /// A new address space from this one's smaps.
    Rebuild {
        mm: u8,
    },
    Truncate {
        file: u8,
        size: Len,
    },
    Query {
        mm: u8,
        addr: Addr,
    },
}

impl<'a> Arbitrary<'a> for Call {
    /// Weighted by hand: the calls that edit the map make most of a
    /// sequence, the lifecycle calls (each of which replaces or wipes a
    /// whole address space) a few.
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Call> {
        let mm = u.arbitrary()?;
        Ok(match u.int_in_range(0..=99u8)? {
            0..=21 => Call::Mmap {
                mm,
                addr: u.arbitrary()?,
                len: u.arbitrary()?,
                prot: u.arbitrary()?,
                flags: u.arbitrary()?,
                file: u.arbitrary()?,
                offset: u.arbitrary()?,
            },
            22..=33 => Call::Munmap {
                mm,
                addr: u.arbitrary()?,
                len: u.arbitrary()?,
            },
            34..=48 => Call::Mprotect {
                mm,
                addr: u.arbitrary()?,
                len: u.arbitrary()?,
                prot: u.arbitrary()?,
            },
            49..=63 => Call::Mremap {
                mm,
                addr: u.arbitrary()?,
                old_len: u.arbitrary()?,
                new_len: u.arbitrary()?,
                flags: u.arbitrary()?,
                raw_flags: if u.ratio(1, 16u8)? {
                    Some(u.arbitrary()?)
                } else {
                    None
                },
                new_addr: u.arbitrary()?,
            },
            64..=70 => Call::Brk {
                mm,
                to: u.arbitrary()?,
            },
            71..=82 => Call::Fault {
                mm,
                addr: u.arbitrary()?,
                access: u.arbitrary()?,
            },
            83 | 84 => Call::SetBrkBase {
                mm,
                addr: u.arbitrary()?,
            },
            85..=87 => Call::Fork { mm },
            88 | 89 => Call::Exit { mm },
            90 | 91 => Call::Exec {
                mm,
                segments: u.arbitrary()?,
                interp: u.arbitrary()?,
                stack: u.arbitrary()?,
            },
            92 | 93 => Call::Drop { mm },
            94 | 95 => Call::Rebuild { mm },
            96 | 97 => Call::Truncate {
                file: u.arbitrary()?,
                size: u.arbitrary()?,
            },
            _ => Call::Query {
                mm,
                addr: u.arbitrary()?,
            },
        })
    }
}

#[derive(Arbitrary, Debug)]
struct Setup {
    /// 0: the default limit; otherwise a small one, so that splits and
    /// moves run into `ENOMEM`.
    max_map_count: u8,
    bottom_up: bool,
    thp_align: bool,
    exec_only_pkey: bool,
    cap_sys_rawio: bool,
    overcommit_never: bool,
    anon_rule: bool,
    imap_design: u8,
    rb_itree: bool,
    brk_base: Option<Addr>,
}

// ---------------------------------------------------------------------
// One run: the address spaces of one index kind and their files.

struct Run {
    kind: IndexKind,
    mms: Vec<Mm>,
    files: Vec<Arc<File>>,
}

/// The run's policy: every address space and file of it is made under it.
fn policy(setup: &Setup, kind: IndexKind) -> Arc<Policy> {
    Arc::new(Policy {
        index: kind,
        imap: ImapDesign::ALL[usize::from(setup.imap_design) % ImapDesign::ALL.len()],
        itree: if setup.rb_itree {
            ItreeKind::Rb
        } else {
            ItreeKind::BTree
        },
        anon_rule: setup.anon_rule,
        ..Policy::default()
    })
}

fn files(policy: &Arc<Policy>) -> Vec<Arc<File>> {
    let rw = FileMode::default();
    let mk = |name: &str, size: u64, mode: FileMode| policy.file_with_mode(name, size, mode);
    vec![
        mk("/lib/libc.so", 5 * PAGE_SIZE + 17, rw),
        mk("/data/big", 2 * PMD_SIZE + PAGE_SIZE, rw),
        mk("/ro", 3 * PAGE_SIZE, FileMode { write: false, ..rw }),
        mk("/noexec", 8 * PAGE_SIZE, FileMode { noexec: true, ..rw }),
        mk("/wronly", 2 * PAGE_SIZE, FileMode { read: false, ..rw }),
        mk("/empty", 0, rw),
        mk(
            "/tmpfs",
            100,
            FileMode {
                huge_align: false,
                ..rw
            },
        ),
    ]
}

fn layout(setup: &Setup) -> Layout {
    let mut l = Layout::default();
    if setup.max_map_count != 0 {
        l.max_map_count = 3 + usize::from(setup.max_map_count % 40);
    }
    l.bottom_up = setup.bottom_up;
    l.thp_align = setup.thp_align;
    l.exec_only_pkey = setup.exec_only_pkey;
    l.cap_sys_rawio = setup.cap_sys_rawio;
    l.overcommit_never = setup.overcommit_never;
    l
}

impl Run {
    fn new(setup: &Setup, kind: IndexKind) -> Run {
        let layout = layout(setup);
        let policy = policy(setup, kind);
        let mm = Mm::new(&policy, layout);
        mm.set_brk_base(setup.brk_base.map_or(HEAP, |a| a.get(&mm)));
        Run {
            kind,
            mms: vec![mm],
            files: files(&policy),
        }
    }

    fn pick(&self, i: u8) -> usize {
        usize::from(i) % self.mms.len()
    }

    fn file(&self, i: u8) -> &Arc<File> {
        &self.files[usize::from(i) % self.files.len()]
    }
}

/// What a call returned, comparable between the runs (a fault's path is
/// not: the legacy index has no lockless one).
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Addr(Result<u64, Errno>),
    Unit(Result<(), Errno>),
    Fault(Result<(), mm::FaultError>),
    Brk(u64),
    Done,
    Query(Option<(u64, u64)>, usize),
}

impl Outcome {
    fn failed(&self) -> bool {
        matches!(
            self,
            Outcome::Addr(Err(_)) | Outcome::Unit(Err(_)) | Outcome::Fault(Err(_))
        )
    }
}

/// Where a successful call must have put what, and which pages a call may
/// have changed; every other page of its address space must be untouched.
#[derive(Debug, Default)]
struct Effect {
    /// Pages a call may change (succeeding, or failing where exempt).
    touched: Vec<(u64, u64)>,
    /// On success: a range that must now be mapped with this protection
    /// (`None`: mapped with any), or unmapped (`Some(None)` below).
    mapped: Option<(u64, u64, Option<Prot>)>,
    unmapped: Option<(u64, u64)>,
    /// A failure may change pages in `touched` (else nothing at all).
    partial_on_error: bool,
    /// A failure may change anon_vma links (but not the maps).
    anon_on_error: bool,
    /// Anything goes on this address space (exec).
    anything: bool,
}

fn page_align(x: u64) -> u64 {
    x.wrapping_add(PAGE_SIZE - 1) & !(PAGE_SIZE - 1)
}

fn span(start: u64, len: u64) -> (u64, u64) {
    (start, start.saturating_add(len))
}

impl Run {
    /// Apply `call` to this run; returns the address space it ran on (if
    /// any), what it returned and what it may have changed.
    fn apply(&mut self, call: &Call) -> (Option<usize>, Outcome, Effect) {
        let layout = self.mms[0].layout().clone();
        let mut eff = Effect::default();
        match call {
            Call::Mmap {
                mm,
                addr,
                len,
                prot,
                flags,
                file,
                offset,
            } => {
                let i = self.pick(*mm);
                let (addr, len, prot, flags) =
                    (addr.get(&self.mms[i]), len.get(), prot.get(), flags.get());
                let file = (*file != 255).then(|| Arc::clone(self.file(*file)));
                let r = self.mms[i].mmap(addr, len, prot, flags, file.as_ref(), offset.get());
                if let Ok(a) = r {
                    let fixed = flags.intersects(MapFlags::FIXED | MapFlags::FIXED_NOREPLACE);
                    assert!(
                        !fixed || a == addr,
                        "MAP_FIXED mmap at {addr:#x} returned {a:#x}"
                    );
                    let end = a + page_align(len);
                    eff.touched.push((a, end));
                    eff.mapped =
                        Some((a, end, Some(prot & (Prot::READ | Prot::WRITE | Prot::EXEC))));
                }
                (Some(i), Outcome::Addr(r), eff)
            }
            Call::Munmap { mm, addr, len } => {
                let i = self.pick(*mm);
                let (addr, len) = (addr.get(&self.mms[i]), len.get());
                let r = self.mms[i].munmap(addr, len);
                let range = span(addr, page_align(len));
                eff.touched.push(range);
                eff.unmapped = Some(range);
                (Some(i), Outcome::Unit(r), eff)
            }
            Call::Mprotect {
                mm,
                addr,
                len,
                prot,
            } => {
                let i = self.pick(*mm);
                let (addr, len, prot) = (addr.get(&self.mms[i]), len.get(), prot.get());
                // PROT_GROWSDOWN moves the start to that of the first VMA
                // ending above it (down, or up past a hole).
                let lo = if prot.contains(Prot::GROWSDOWN) {
                    self.mms[i].find_vma(addr).map_or(addr, |v| v.start())
                } else {
                    addr
                };
                let r = self.mms[i].mprotect(addr, len, prot);
                let (_, hi) = span(addr, page_align(len));
                eff.touched.push((lo.min(addr), hi));
                if len != 0 {
                    eff.mapped =
                        Some((lo, hi, Some(prot & (Prot::READ | Prot::WRITE | Prot::EXEC))));
                }
                eff.partial_on_error = true;
                (Some(i), Outcome::Unit(r), eff)
            }
            Call::Mremap {
                mm,
                addr,
                old_len,
                new_len,
                flags,
                raw_flags,
                new_addr,
            } => {
                let i = self.pick(*mm);
                let (addr, old_len, new_len, new_addr) = (
                    addr.get(&self.mms[i]),
                    old_len.get(),
                    new_len.get(),
                    new_addr.get(&self.mms[i]),
                );
                let flags =
                    MremapFlags::from_bits_retain(raw_flags.unwrap_or(u32::from(flags % 8)));
                // The old mapping is needed to know what moved where.
                let r = self.mms[i].mremap(addr, old_len, new_len, flags, new_addr);
                eff.touched.push(span(addr, page_align(old_len)));
                eff.touched.push(span(new_addr, page_align(new_len)));
                if let Ok(a) = r {
                    let (old_len, new_len) = (page_align(old_len), page_align(new_len));
                    eff.touched.push(span(a, new_len));
                    let to_new = flags.intersects(MremapFlags::FIXED | MremapFlags::DONTUNMAP);
                    if a == addr && new_len <= old_len && !to_new {
                        // Neither a shrink nor a same-size call checks that
                        // the old range is mapped (Linux: a shrink may
                        // unmap across VMA ends); a shrink leaves no page
                        // past the new end.
                        eff.unmapped =
                            Some((addr.saturating_add(new_len), addr.saturating_add(old_len)));
                    } else if !(flags.contains(MremapFlags::FIXED) && old_len == new_len) {
                        // Growth and moves act on one VMA and map all of
                        // the result; MREMAP_FIXED with equal lengths
                        // moves every VMA of the range, gaps included.
                        eff.mapped = Some((a, a + new_len, None));
                    }
                }
                eff.partial_on_error = true;
                (Some(i), Outcome::Addr(r), eff)
            }
            Call::Brk { mm, to } => {
                let i = self.pick(*mm);
                let cur = self.mms[i].brk_value();
                let want = match *to {
                    BrkArg::Rel(p, b) => cur
                        .wrapping_add_signed(i64::from(p) * PAGE_SIZE as i64)
                        .wrapping_add(u64::from(b)),
                    BrkArg::Abs(a) => a.get(&self.mms[i]),
                };
                let got = self.mms[i].brk(want);
                let (lo, hi) = (cur.min(want), cur.max(want));
                eff.touched
                    .push((lo & !(PAGE_SIZE - 1), page_align(hi).max(hi)));
                assert!(
                    got == want || got == cur,
                    "brk({want:#x}) from {cur:#x} returned {got:#x}"
                );
                if got == cur && got != want {
                    // A refused brk: nothing may change.
                    eff.touched.clear();
                }
                (Some(i), Outcome::Brk(got), eff)
            }
            Call::SetBrkBase { mm, addr } => {
                let i = self.pick(*mm);
                self.mms[i].set_brk_base(addr.get(&self.mms[i]));
                // The heap's name follows the break.
                eff.anything = true;
                (Some(i), Outcome::Done, eff)
            }
            Call::Fault { mm, addr, access } => {
                let i = self.pick(*mm);
                let addr = addr.get(&self.mms[i]);
                // A fault below a grows-down VMA may grow it down to addr.
                let next = self.mms[i].find_vma(addr).map_or(addr, |v| v.start());
                let r = self.mms[i].fault(addr, access.get());
                eff.touched.push((addr & !(PAGE_SIZE - 1), next.max(addr)));
                eff.anon_on_error = true;
                (Some(i), Outcome::Fault(r.map(|_| ())), eff)
            }
            Call::Fork { mm } => {
                let i = self.pick(*mm);
                if self.mms.len() < MAX_MMS {
                    let child = self.mms[i].fork();
                    assert_eq!(
                        child.maps(),
                        self.mms[i].maps(),
                        "a child's maps differ from its parent's"
                    );
                    assert_eq!(child.brk_value(), self.mms[i].brk_value());
                    self.mms.push(child);
                }
                (Some(i), Outcome::Done, eff)
            }
            Call::Exit { mm } => {
                let i = self.pick(*mm);
                self.mms[i].exit();
                assert_eq!(self.mms[i].map_count(), 0, "exit left VMAs");
                eff.anything = true;
                (Some(i), Outcome::Done, eff)
            }
            Call::Exec {
                mm,
                segments,
                interp,
                stack,
            } => {
                let i = self.pick(*mm);
                let seg = |s: &SegArg, base_relative: bool| {
                    let vaddr = if base_relative {
                        s.vaddr.get(&self.mms[i]) % (16 * PMD_SIZE)
                    } else {
                        s.vaddr.get(&self.mms[i])
                    };
                    let filesz = s.filesz.get();
                    Segment {
                        file: Arc::clone(self.file(s.file)),
                        offset: s.offset.get(),
                        vaddr,
                        filesz,
                        memsz: filesz.saturating_add(s.memsz.get()),
                        prot: Prot::from_bits_retain(u32::from(s.prot & 7)),
                    }
                };
                let image = Image {
                    segments: segments.iter().take(4).map(|s| seg(s, false)).collect(),
                    interp: interp.iter().take(3).map(|s| seg(s, true)).collect(),
                    stack_size: stack.get(),
                };
                let r = self.mms[i].exec(&image);
                eff.anything = true;
                (Some(i), Outcome::Unit(r), eff)
            }
            Call::Drop { mm } => {
                if self.mms.len() > 1 {
                    let i = self.pick(*mm);
                    drop(self.mms.remove(i));
                }
                (None, Outcome::Done, eff)
            }
            Call::Rebuild { mm } => {
                let i = self.pick(*mm);
                if self.mms.len() < MAX_MMS {
                    let old = &self.mms[i];
                    let entries: Vec<SmapsEntry> = old
                        .vmas()
                        .iter()
                        .zip(old.maps())
                        .map(|(v, maps)| SmapsEntry {
                            maps,
                            flags: v.flags(),
                            has_anon_pages: v.anon().is_some(),
                        })
                        .collect();
                    let brk = old.brk_value();
                    let new = Mm::from_smaps(
                        old.policy(),
                        layout.clone(),
                        &entries,
                        brk,
                        brk,
                        layout.stack_top - 1,
                        &self.files,
                    )
                    .unwrap_or_else(|e| panic!("from_smaps refused a model's own smaps: {e:?}"));
                    // The heap and stack names depend on bounds smaps does
                    // not carry; the rest must come back as it was.
                    let strip = |m: Vec<MapsEntry>| -> Vec<_> {
                        m.into_iter()
                            .map(|e| {
                                (
                                    e.start,
                                    e.end,
                                    e.prot,
                                    e.shared,
                                    e.offset,
                                    e.name.filter(|n| !n.starts_with('[')),
                                )
                            })
                            .collect()
                    };
                    assert_eq!(
                        strip(new.maps()),
                        strip(old.maps()),
                        "from_smaps changed the map"
                    );
                    self.mms.push(new);
                }
                (Some(i), Outcome::Done, eff)
            }
            Call::Truncate { file, size } => {
                // Faults past the new end SIGBUS; mappings stay.
                self.file(*file).set_size(size.get() % (4 * PMD_SIZE));
                (None, Outcome::Done, eff)
            }
            Call::Query { mm, addr } => {
                let i = self.pick(*mm);
                let mm = &self.mms[i];
                let v = mm
                    .find_vma(addr.get(&self.mms[i]))
                    .map(|v| (v.start(), v.end()));
                let text = mm.proc_maps();
                let parsed = mm::procmaps::parse(&text)
                    .unwrap_or_else(|e| panic!("proc_maps does not parse back: {e}\n{text}"));
                assert_eq!(parsed, mm.maps(), "proc_maps does not round-trip");
                assert_eq!(mm.vmas().len(), mm.map_count());
                (Some(i), Outcome::Query(v, mm.map_count()), eff)
            }
        }
    }
}

// ---------------------------------------------------------------------
// Snapshots and checks.

/// One VMA with its file and anon_vma as pointers: exact within a run.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Raw {
    start: u64,
    end: u64,
    flags: u64,
    pgoff: u64,
    file: usize,
    anon: usize,
}

fn raw(mm: &Mm) -> (Vec<Raw>, u64, Vec<MapsEntry>) {
    let vmas = mm
        .vmas()
        .iter()
        .map(|v| Raw {
            start: v.start(),
            end: v.end(),
            flags: v.flags().bits(),
            pgoff: v.pgoff(),
            file: v.file().map_or(0, |f| Arc::as_ptr(f) as usize),
            anon: v.anon().map_or(0, |l| Arc::as_ptr(&l.anon_vma) as usize),
        })
        .collect();
    (vmas, mm.brk_value(), mm.maps())
}

/// A run's address spaces with files, inodes and anon_vmas renumbered in
/// order of first appearance, so the two runs can be compared.
fn canonical(run: &Run) -> Vec<(Vec<Raw>, u64, Vec<MapsEntry>)> {
    let mut files: HashMap<usize, usize> = HashMap::new();
    let mut inodes: HashMap<u64, u64> = HashMap::new();
    let mut anons: HashMap<usize, usize> = HashMap::new();
    // The fixed files first, so that they keep their numbers.
    for f in &run.files {
        let n = files.len() + 1;
        files.insert(Arc::as_ptr(f) as usize, n);
        inodes.insert(f.id(), n as u64);
    }
    run.mms
        .iter()
        .map(|mm| {
            let (mut vmas, brk, mut maps) = raw(mm);
            for v in &mut vmas {
                if v.file != 0 {
                    let n = files.len() + 1;
                    v.file = *files.entry(v.file).or_insert(n);
                }
                if v.anon != 0 {
                    let n = anons.len() + 1;
                    v.anon = *anons.entry(v.anon).or_insert(n);
                }
            }
            for e in &mut maps {
                if e.inode != 0 {
                    let n = inodes.len() as u64 + 1;
                    e.inode = *inodes.entry(e.inode).or_insert(n);
                }
            }
            (vmas, brk, maps)
        })
        .collect()
}

/// The maps with `holes` cut out, adjacent pieces that continue each other
/// joined: equal for two maps exactly when every page outside `holes` is
/// mapped alike in both.
fn outside(maps: &[MapsEntry], holes: &[(u64, u64)]) -> Vec<MapsEntry> {
    let mut out: Vec<MapsEntry> = Vec::new();
    for e in maps {
        let mut pieces = vec![(e.start, e.end)];
        for &(hs, he) in holes {
            pieces = pieces
                .into_iter()
                .flat_map(|(s, t)| {
                    let mut v = Vec::new();
                    if s < hs.min(t) {
                        v.push((s, hs.min(t)));
                    }
                    if he.max(s) < t {
                        v.push((he.max(s), t));
                    }
                    v
                })
                .collect();
        }
        for (s, t) in pieces {
            let mut p = e.clone();
            if p.inode != 0 {
                p.offset += s - e.start;
            } else {
                // [heap] and [stack] name the VMA that holds the break or
                // the stack start: a split elsewhere moves the name off a
                // page it does not touch.
                p.name = None;
            }
            p.start = s;
            p.end = t;
            if let Some(last) = out.last_mut() {
                let continues = last.end == p.start
                    && last.prot == p.prot
                    && last.shared == p.shared
                    && last.inode == p.inode
                    && last.name == p.name
                    && (p.inode == 0 || last.offset + (last.end - last.start) == p.offset);
                if continues {
                    last.end = p.end;
                    continue;
                }
            }
            out.push(p);
        }
    }
    out
}

/// Every page of `[start, end)` mapped (with `prot`, if given).
fn covered(maps: &[MapsEntry], start: u64, end: u64, prot: Option<Prot>) -> Result<(), String> {
    let mut pos = start;
    for e in maps.iter().filter(|e| e.end > start && e.start < end) {
        if e.start > pos {
            return Err(format!("hole at {pos:#x}"));
        }
        if prot.is_some_and(|p| p != e.prot) {
            return Err(format!("{e} has not protection {prot:?}"));
        }
        pos = e.end;
    }
    if pos < end {
        return Err(format!("hole at {pos:#x}"));
    }
    Ok(())
}

/// The call's contract on the address space it ran on.
fn check_effect(
    call: &Call,
    out: &Outcome,
    eff: &Effect,
    before: &(Vec<Raw>, u64, Vec<MapsEntry>),
    after: &(Vec<Raw>, u64, Vec<MapsEntry>),
) {
    if eff.anything {
        return;
    }
    if let Outcome::Brk(got) = out {
        assert_eq!(
            after.1, *got,
            "{call:?}: brk returned {got:#x} but the break is {:#x}",
            after.1
        );
    } else if before.1 != after.1 {
        panic!(
            "{call:?} -> {out:?} moved the break from {:#x} to {:#x}",
            before.1, after.1
        );
    }
    let fail = |what: String| {
        panic!(
            "{call:?} -> {out:?}: {what}\nbefore:\n{}\nafter:\n{}",
            show(&before.2),
            show(&after.2)
        )
    };
    if out.failed() {
        if eff.partial_on_error {
            if before.1 != after.1 {
                fail("a failed call moved the break".into());
            }
            if outside(&before.2, &eff.touched) != outside(&after.2, &eff.touched) {
                fail(format!(
                    "a failed call changed pages outside {:x?}",
                    eff.touched
                ));
            }
        } else if eff.anon_on_error {
            let strip = |s: &(Vec<Raw>, u64, Vec<MapsEntry>)| {
                let v: Vec<Raw> =
                    s.0.iter()
                        .map(|r| Raw {
                            anon: 0,
                            ..r.clone()
                        })
                        .collect();
                (v, s.1, s.2.clone())
            };
            // Else a grows-down VMA grew to the faulting page, and the
            // access check failed after (see the header): one VMA, longer.
            let grew = before.0.len() == after.0.len()
                && outside(&before.2, &eff.touched) == outside(&after.2, &eff.touched);
            if strip(before) != strip(after) && !grew {
                fail("a failed call changed the map".into());
            }
        } else if before != after {
            fail("a failed call changed the address space".into());
        }
        return;
    }
    if outside(&before.2, &eff.touched) != outside(&after.2, &eff.touched) {
        fail(format!("pages outside {:x?} changed", eff.touched));
    }
    if let Some((s, e, prot)) = eff.mapped {
        if let Err(m) = covered(&after.2, s, e, prot) {
            fail(format!("[{s:#x}, {e:#x}) not mapped as asked: {m}"));
        }
    }
    if let Some((s, e)) = eff.unmapped {
        if let Some(v) = after.2.iter().find(|v| s < e && v.end > s && v.start < e) {
            fail(format!("{v} still mapped after unmapping [{s:#x}, {e:#x})"));
        }
    }
}

fn show(maps: &[MapsEntry]) -> String {
    maps.iter().map(|e| format!("  {e}\n")).collect()
}

/// Pages `first..=last`, as an anon_vma's tree holds them.
type PageRange = (u64, u64);

/// Every address space valid; every file's reverse map holding exactly
/// the live VMAs that map it; every anon_vma's tree holding exactly the
/// page ranges of the live VMAs whose chain names it.
fn check_structures(run: &Run, call: &Call) {
    let who =
        |what: String| -> String { format!("{} run, after {call:?}: {what}", run.kind.name()) };
    let mut by_file: HashMap<usize, (Arc<File>, Vec<usize>)> = HashMap::new();
    for f in &run.files {
        by_file.insert(Arc::as_ptr(f) as usize, (Arc::clone(f), Vec::new()));
    }
    let mut by_anon: HashMap<usize, (Arc<AnonVma>, Vec<PageRange>)> = HashMap::new();
    for mm in &run.mms {
        if let Err(e) = mm.validate() {
            panic!("{}\n{}", who(format!("Mm::validate: {e}")), mm.proc_maps());
        }
        for v in mm.vmas() {
            if let Some(f) = v.file() {
                by_file
                    .entry(Arc::as_ptr(f) as usize)
                    .or_insert_with(|| (Arc::clone(f), Vec::new()))
                    .1
                    .push(Arc::as_ptr(&v) as usize);
            }
            if let Some(link) = v.anon() {
                let chain = link.chain();
                if !chain
                    .first()
                    .is_some_and(|a| Arc::ptr_eq(a, &link.anon_vma))
                {
                    panic!(
                        "{}",
                        who(format!(
                            "VMA {:#x}: chain does not start with its anon_vma",
                            v.start()
                        ))
                    );
                }
                for (k, a) in chain.iter().enumerate() {
                    if !Arc::ptr_eq(a.root(), link.anon_vma.root()) {
                        panic!(
                            "{}",
                            who(format!("VMA {:#x}: chain spans two families", v.start()))
                        );
                    }
                    if chain[..k].iter().any(|b| Arc::ptr_eq(a, b)) {
                        panic!(
                            "{}",
                            who(format!("VMA {:#x}: anon_vma twice in its chain", v.start()))
                        );
                    }
                    by_anon
                        .entry(Arc::as_ptr(a) as usize)
                        .or_insert_with(|| (Arc::clone(a), Vec::new()))
                        .1
                        .push(pages(&v));
                }
            }
        }
    }
    for (file, want) in by_file.values_mut() {
        let imap = file.imap();
        if let Err(e) = imap.validate() {
            panic!("{}", who(format!("i_mmap of {}: {e}", file.name())));
        }
        let mut have: Vec<usize> = imap
            .entries()
            .iter()
            .map(|e| Arc::as_ptr(&e.vma) as usize)
            .collect();
        have.sort_unstable();
        want.sort_unstable();
        if have != *want {
            panic!(
                "{}",
                who(format!(
                    "i_mmap of {} holds {} VMAs, {} live VMAs map it (or not the same ones)",
                    file.name(),
                    have.len(),
                    want.len()
                ))
            );
        }
        if imap.count() != want.len() || imap.is_mapped() == want.is_empty() {
            panic!(
                "{}",
                who(format!(
                    "i_mmap of {}: count {} for {} VMAs",
                    file.name(),
                    imap.count(),
                    want.len()
                ))
            );
        }
    }
    for (anon, want) in by_anon.values_mut() {
        let mut have = anon.entries();
        have.sort_unstable();
        want.sort_unstable();
        if have != *want {
            panic!(
                "{}",
                who(format!(
                    "anon_vma {} holds {have:x?}, its VMAs cover {want:x?}",
                    anon.id()
                ))
            );
        }
    }
}

fn pages(v: &Vma) -> (u64, u64) {
    let n = (v.end() - v.start()) / PAGE_SIZE;
    (v.pgoff(), v.pgoff().wrapping_add(n - 1))
}

fn run_input(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(setup) = u.arbitrary::<Setup>() else {
        return;
    };
    let mut runs = [
        Run::new(&setup, IndexKind::Maple),
        Run::new(&setup, IndexKind::Legacy),
    ];
    // Running out of input ends the sequence early, not the checks.
    let _ = run_calls(&mut u, &mut runs);
    // Address spaces that go away must take their VMAs out of every
    // file's reverse map (else they, and their files, leak).
    for run in runs {
        let files = run.files.clone();
        drop(run);
        for f in files {
            let n = f.imap().count();
            assert_eq!(
                n,
                0,
                "{}: {n} VMAs left in its i_mmap after every address space went away",
                f.name()
            );
        }
    }
}

fn run_calls(u: &mut Unstructured, runs: &mut [Run; 2]) -> arbitrary::Result<()> {
    for call in u.arbitrary_iter::<Call>()?.take(MAX_CALLS) {
        let call = call?;
        let mut outcomes = Vec::with_capacity(2);
        for run in runs.iter_mut() {
            let before: Vec<_> = run.mms.iter().map(raw).collect();
            let (target, out, eff) = run.apply(&call);
            // Drop removed one address space: compare the survivors.
            let before: Vec<_> = match (&call, before.len() != run.mms.len()) {
                (Call::Drop { mm }, true) => {
                    let mut b = before;
                    b.remove(usize::from(*mm) % b.len());
                    b
                }
                _ => before,
            };
            for (i, b) in before.iter().enumerate() {
                let after = raw(&run.mms[i]);
                if Some(i) == target {
                    check_effect(&call, &out, &eff, b, &after);
                } else if *b != after {
                    panic!(
                        "{} run: {call:?} changed address space {i}, which it did not run on\nbefore:\n{}\nafter:\n{}",
                        run.kind.name(),
                        show(&b.2),
                        show(&after.2)
                    );
                }
            }
            check_structures(run, &call);
            outcomes.push(out);
        }
        assert_eq!(outcomes[0], outcomes[1], "the indexes disagree on {call:?}");
        let (m, l) = (canonical(&runs[0]), canonical(&runs[1]));
        if m != l {
            let text = |r: &Run| {
                r.mms
                    .iter()
                    .map(|mm| mm.proc_maps() + "--\n")
                    .collect::<String>()
            };
            panic!(
                "the indexes' address spaces differ after {call:?}\nmaple:\n{}legacy:\n{}",
                text(&runs[0]),
                text(&runs[1])
            );
        }
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| run_input(data));
