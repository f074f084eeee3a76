//! The random call generator.
//!
//! Every call it makes either touches only the test window and the ranges
//! the kernel handed out to earlier test calls ("owned" ranges, which
//! never held anything of the child's own), or is refused before it
//! changes anything (unaligned address, bad flags). So a generated case,
//! and any sub-sequence of it the shrinker tries, never unmaps or
//! re-protects the child's code, libraries, heap or stack.

use std::sync::Arc;

use mm::call::AnonName;
use mm::{Call, Mm, VmFlags, Vma, PAGE_SIZE};

use super::child::{ANON_NAMES, FILE_FD0};

const PAGE: u64 = PAGE_SIZE;
const PMD: u64 = 2 << 20;

/// SplitMix64: small, fast and good enough to drive a generator.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, n)`; `n > 0`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform in `[lo, hi]`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `pct` percent.
    pub fn pct(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }

    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

/// A test file as the generator sees it.
#[derive(Debug, Clone)]
pub struct FileInfo {
    pub size: u64,
}

/// Generator state for one case.
pub struct Gen {
    pub rng: Rng,
    /// The private window: `[window, window + window_len)`.
    pub window: u64,
    pub window_len: u64,
    /// Ranges the kernel gave to test calls, plus the window.
    pub owned: Vec<(u64, u64)>,
    pub files: Vec<FileInfo>,
    /// The break when the child reported ready; brk never goes lower.
    pub brk0: u64,
    pub start_brk: u64,
    /// Pages of the window's crowded corner: small values make calls
    /// meet (merge, split, collide) more often.
    pub cluster: u64,
}

const MAP_SHARED: u64 = 0x01;
const MAP_PRIVATE: u64 = 0x02;
const MAP_SHARED_VALIDATE: u64 = 0x03;
const MAP_FIXED: u64 = 0x10;
const MAP_ANONYMOUS: u64 = 0x20;
const MAP_32BIT: u64 = 0x40;
const MAP_GROWSDOWN: u64 = 0x100;
const MAP_NORESERVE: u64 = 0x4000;
const MAP_POPULATE: u64 = 0x8000;
const MAP_STACK: u64 = 0x2_0000;
const MAP_FIXED_NOREPLACE: u64 = 0x10_0000;
const PROT_GROWSDOWN: u64 = 0x0100_0000;
const PROT_GROWSUP: u64 = 0x0200_0000;
const MREMAP_MAYMOVE: u64 = 1;
const MREMAP_FIXED: u64 = 2;
const MREMAP_DONTUNMAP: u64 = 4;
/// A bit above the 32 the flag words' names use: the kernel takes the
/// words as `unsigned long`.
const HIGH_BIT: u64 = 1 << 32;
// madvise / mlock
const MLOCK_ONFAULT: u64 = 1;
const MCL_CURRENT: u64 = 1;
const MCL_FUTURE: u64 = 2;
const MCL_ONFAULT: u64 = 4;

impl Gen {
    /// Whether `[s, e)` lies inside one owned range.
    pub fn is_owned(&self, s: u64, e: u64) -> bool {
        s < e && self.owned.iter().any(|&(a, b)| a <= s && e <= b)
    }

    /// Record that the kernel handed `[s, e)` to a test call.
    pub fn own(&mut self, s: u64, e: u64) {
        if s >= e || self.is_owned(s, e) {
            return;
        }
        self.owned.push((s, e));
        // Merge touching ranges so that calls may span them.
        self.owned.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::new();
        for &(a, b) in &self.owned {
            match out.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => out.push((a, b)),
            }
        }
        self.owned = out;
    }

    /// A page count: mostly 1..=16, sometimes a multiple of 2 MiB.
    fn pages(&mut self) -> u64 {
        match self.rng.below(100) {
            0..=79 => self.rng.range(1, 16),
            80..=89 => self.rng.range(1, 2) * (PMD / PAGE),
            90..=94 => self.rng.range(17, 64),
            _ => self.rng.range(1, 4) * (PMD / PAGE) + self.rng.range(1, 3),
        }
    }

    /// A length in bytes: mostly whole pages, sometimes not.
    fn len(&mut self) -> u64 {
        let l = self.pages() * PAGE;
        if self.rng.pct(8) {
            l - self.rng.range(1, PAGE - 1)
        } else {
            l
        }
    }

    /// A page-aligned address in the window, clustered near its start so
    /// that calls meet each other.
    fn window_addr(&mut self) -> u64 {
        let pages = match self.rng.below(100) {
            0..=59 => self.rng.below(self.cluster),
            60..=84 => self.rng.below(256),
            _ => self.rng.below(self.window_len / PAGE / 2),
        };
        self.window + pages * PAGE
    }

    /// An address next to an owned VMA: at its end, or `len` below its
    /// start (so that a new mapping or a moved one touches it).
    fn near_addr(&mut self, mm: &Mm, len: u64) -> u64 {
        match self.owned_vma(mm) {
            Some(v) if self.rng.pct(50) => v.end(),
            Some(v) => v.start().saturating_sub(len.next_multiple_of(PAGE)),
            None => self.window_addr(),
        }
    }

    /// A page-aligned address in an owned range (the window included).
    fn owned_addr(&mut self) -> u64 {
        if self.owned.len() == 1 || self.rng.pct(50) {
            return self.window_addr();
        }
        let (a, b) = self.owned[self.rng.below(self.owned.len() as u64) as usize];
        a + self.rng.below((b - a) / PAGE) * PAGE
    }

    /// An owned VMA of the model, if any.
    fn owned_vma(&mut self, mm: &Mm) -> Option<Arc<Vma>> {
        let vmas: Vec<Arc<Vma>> = mm
            .vmas()
            .into_iter()
            .filter(|v| {
                self.owned
                    .iter()
                    .any(|&(a, b)| v.start() < b && a < v.end())
            })
            .collect();
        if vmas.is_empty() {
            return None;
        }
        Some(Arc::clone(
            &vmas[self.rng.below(vmas.len() as u64) as usize],
        ))
    }

    /// A page-aligned range `[s, e)` inside owned memory, often lined up
    /// with an owned VMA's edges, sometimes spanning several VMAs.
    fn owned_range(&mut self, mm: &Mm) -> (u64, u64) {
        let (mut s, mut e) = match self.owned_vma(mm) {
            Some(v) if self.rng.pct(80) => {
                let s = match self.rng.below(4) {
                    0 | 1 => v.start(),
                    2 => v.start() + self.rng.below(v.len() / PAGE) * PAGE,
                    _ => v.start().saturating_sub(self.rng.range(1, 4) * PAGE),
                };
                let e = match self.rng.below(4) {
                    0 | 1 => v.end(),
                    2 => v.end() - self.rng.below(v.len() / PAGE) * PAGE,
                    _ => v.end() + self.rng.range(1, 4) * PAGE,
                };
                (s, e)
            }
            _ => {
                let s = self.owned_addr();
                (s, s + self.pages() * PAGE)
            }
        };
        if e <= s {
            e = s + PAGE;
        }
        // Clamp to the owned range holding `s`.
        if let Some(&(a, b)) = self.owned.iter().find(|&&(a, b)| a <= s && s < b) {
            s = s.max(a);
            e = e.min(b);
        } else if let Some(&(a, b)) = self.owned.iter().find(|&&(a, b)| a < e && e <= b) {
            s = a.max(s);
            e = e.min(b);
        } else {
            let w = self.window_addr();
            return (w, w + PAGE);
        }
        if e <= s {
            e = s + PAGE;
        }
        (s, e)
    }

    fn prot(&mut self) -> u64 {
        let p = self.rng.below(8);
        if self.rng.pct(2) {
            p | self.rng.pick(&[0x8, 0x10, 0x40, 0x8000_0000, HIGH_BIT])
        } else {
            p
        }
    }

    /// The next call, given the model's current state.
    pub fn call(&mut self, mm: &Mm) -> Call {
        if self.rng.pct(15) {
            return self.madvise_mlock(mm);
        }
        if self.rng.pct(18) {
            // 15 % of what is left: with the above, 30 % of calls are the
            // calls of issue 14.
            return self.seal_call(mm);
        }
        match self.rng.below(100) {
            0..=29 => self.mmap(mm),
            30..=41 => self.munmap(mm),
            42..=59 => self.mprotect(mm),
            60..=74 => self.mremap(mm),
            75..=79 => self.brk(),
            _ => self.fault(mm),
        }
    }

    fn mmap(&mut self, mm: &Mm) -> Call {
        let mut len = self.len();
        let prot = self.prot();
        let nfiles = self.files.len() as u64;
        // The test file the descriptor names, if any.
        let (mut flags, index) = match self.rng.below(100) {
            0..=34 => (MAP_PRIVATE | MAP_ANONYMOUS, None),
            35..=49 => (MAP_SHARED | MAP_ANONYMOUS, None),
            50..=74 => (MAP_PRIVATE, Some(self.rng.below(nfiles) as usize)),
            75..=94 => (MAP_SHARED, Some(self.rng.below(nfiles) as usize)),
            95..=96 => (MAP_SHARED_VALIDATE, Some(self.rng.below(nfiles) as usize)),
            97 => (MAP_PRIVATE, None),
            98 => (self.rng.pick(&[0, 0xf, 4]) | MAP_ANONYMOUS, None),
            _ => (MAP_SHARED | MAP_ANONYMOUS, Some(0)),
        };
        let fd = index.map_or(-1, |i| FILE_FD0 + i as i32);
        let file = index
            .filter(|_| flags & MAP_ANONYMOUS == 0)
            .map(|i| self.files[i].clone());
        if self.rng.pct(5) {
            flags |= MAP_GROWSDOWN;
        }
        if self.rng.pct(10) {
            flags |= MAP_NORESERVE;
        }
        if self.rng.pct(5) {
            flags |= MAP_POPULATE;
        }
        if self.rng.pct(5) {
            flags |= MAP_STACK;
        }
        if self.rng.pct(3) {
            flags |= MAP_32BIT;
        }
        if self.rng.pct(1) {
            flags |= self
                .rng
                .pick(&[0x80_0000, 0x400_0000, 0x5400_0000, HIGH_BIT]);
        }
        let off = match &file {
            Some(f) => {
                let pages = f.size.div_ceil(PAGE);
                let mut off = self.rng.below(pages + 4) * PAGE;
                if self.rng.pct(40) {
                    off = 0;
                }
                if self.rng.pct(2) {
                    off += self.rng.range(1, PAGE - 1);
                }
                if self.rng.pct(1) {
                    off = !(PAGE - 1);
                }
                off
            }
            None => {
                if self.rng.pct(3) {
                    self.rng.range(1, 4) * PAGE
                } else {
                    0
                }
            }
        };
        let addr = match self.rng.below(110) {
            100..=104 => {
                flags |= MAP_FIXED;
                self.near_addr(mm, len)
            }
            105..=107 => self.near_addr(mm, len),
            108..=109 => {
                // Above the heap: brk must stop short of it (and its
                // guard gap, if it grows down).
                flags |= MAP_FIXED_NOREPLACE;
                self.brk0.next_multiple_of(PAGE) + self.rng.range(1, 64) * PAGE
            }
            0..=37 => {
                flags |= MAP_FIXED;
                self.window_addr()
            }
            38..=44 => {
                flags |= MAP_FIXED;
                self.owned_addr()
            }
            45..=57 => {
                flags |= MAP_FIXED_NOREPLACE;
                self.owned_addr()
            }
            58..=59 => {
                flags |= MAP_FIXED_NOREPLACE | MAP_FIXED;
                self.owned_addr()
            }
            60..=79 => self.owned_addr(),
            80..=95 => 0,
            96 => {
                // An unaligned hint is rounded down; unaligned MAP_FIXED
                // is refused.
                self.window_addr() + self.rng.range(1, PAGE - 1)
            }
            97 => {
                flags |= MAP_FIXED;
                self.window_addr() + self.rng.range(1, PAGE - 1)
            }
            98 => {
                len = self.rng.pick(&[0, u64::MAX - PAGE, 1 << 47, u64::MAX]);
                self.window_addr()
            }
            _ => {
                // A hint below mmap_min_addr, or beyond the address space.
                self.rng.pick(&[PAGE, 2 * PAGE, 0x7fff_ffff_f000, 1 << 47])
            }
        };
        // MAP_FIXED replaces: it may only land on owned memory.
        let mut addr = addr;
        if flags & MAP_FIXED != 0 && addr % PAGE == 0 {
            let end = len
                .checked_next_multiple_of(PAGE)
                .and_then(|l| addr.checked_add(l));
            if end.is_some_and(|end| !self.is_owned(addr, end.max(addr + PAGE))) {
                addr = self.window_addr();
            }
        }
        Call::mmap(addr, len, prot, flags, fd, off)
    }

    /// `[s, e)` as an address and a length, sometimes spoilt: a length
    /// short of a page boundary, an unaligned address, a zero length, or
    /// a range at the top of the address space or beyond it.
    fn spoilt(&mut self, s: u64, e: u64) -> (u64, u64) {
        match self.rng.below(100) {
            0..=89 => (s, e - s),
            90..=93 => (s, e - s - self.rng.range(1, PAGE - 1)),
            94..=96 => (s + self.rng.range(1, PAGE - 1), e - s),
            97 => (s, 0),
            _ => (
                self.rng.pick(&[0x7fff_ffff_f000, 1 << 47, !(PAGE - 1)]),
                self.rng.pick(&[PAGE, !(PAGE - 1)]),
            ),
        }
    }

    fn munmap(&mut self, mm: &Mm) -> Call {
        let (s, e) = self.owned_range(mm);
        let (addr, len) = self.spoilt(s, e);
        Call::munmap(addr, len)
    }

    fn mprotect(&mut self, mm: &Mm) -> Call {
        let (s, e) = self.owned_range(mm);
        let mut prot = self.prot();
        if self.rng.pct(4) {
            // PROT_GROWSDOWN extends the range down to the VMA's start:
            // allow it only when that stays in owned memory.
            let vma = mm.find_vma(s);
            let safe = vma.is_some_and(|v| v.start() >= s || self.is_owned(v.start(), e));
            if safe {
                prot |= PROT_GROWSDOWN;
            }
        }
        if self.rng.pct(1) {
            prot |= PROT_GROWSUP;
        }
        let (addr, len) = self.spoilt(s, e);
        Call::mprotect(addr, len, prot)
    }

    fn mremap(&mut self, mm: &Mm) -> Call {
        let (s, e) = self.owned_range(mm);
        let old_pages = (e - s) / PAGE;
        let mut old_len = e - s;
        let mut new_len = match self.rng.below(10) {
            0..=2 => old_len,
            3..=5 => self.rng.range(1, old_pages.max(1)) * PAGE,
            6..=8 => old_len + self.rng.range(1, 8) * PAGE,
            _ => self.pages() * PAGE,
        };
        let mut flags = match self.rng.below(100) {
            0..=29 => 0,
            30..=64 => MREMAP_MAYMOVE,
            65..=84 => MREMAP_MAYMOVE | MREMAP_FIXED,
            85..=91 => MREMAP_MAYMOVE | MREMAP_DONTUNMAP,
            92..=95 => MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP,
            96 => MREMAP_FIXED,
            97 => MREMAP_DONTUNMAP,
            98 => self.rng.pick(&[8, HIGH_BIT]),
            _ => MREMAP_MAYMOVE | 0x10,
        };
        if flags & MREMAP_DONTUNMAP != 0 && self.rng.pct(80) {
            new_len = old_len;
        }
        let mut new_addr = if flags & MREMAP_FIXED != 0 || self.rng.pct(5) {
            if self.rng.pct(30) {
                let a = self.near_addr(mm, new_len);
                if self.is_owned(a, a.saturating_add(new_len.max(PAGE))) {
                    a
                } else {
                    self.window_addr()
                }
            } else {
                self.window_addr()
            }
        } else {
            0
        };
        if self.rng.pct(4) {
            // Duplicating a shared mapping with old_len 0.
            old_len = 0;
            flags |= MREMAP_MAYMOVE;
        }
        let mut addr = s;
        match self.rng.below(100) {
            0..=1 => addr += self.rng.range(1, PAGE - 1),
            2..=3 => new_addr += self.rng.range(1, PAGE - 1),
            4 => new_len = 0,
            5 => old_len -= self.rng.range(1, PAGE - 1).min(old_len),
            6 => new_len = new_len.saturating_sub(self.rng.range(1, PAGE - 1)).max(1),
            7 => new_len = self.rng.pick(&[!(PAGE - 1), 1 << 47]),
            _ => {}
        }
        Call::mremap(addr, old_len, new_len, flags, new_addr)
    }

    fn brk(&mut self) -> Call {
        let addr = match self.rng.below(100) {
            0..=74 => self.brk0 + self.rng.below(48) * PAGE + self.rng.pick(&[0, 0, 1, 100]),
            75..=84 => self.brk0,
            85..=89 => 0,
            90..=94 => self.start_brk.saturating_sub(PAGE),
            _ => self.brk0 + self.rng.range(1, 2048) * PAGE,
        };
        Call::brk(addr)
    }

    fn fault(&mut self, mm: &Mm) -> Call {
        let addr = match self.owned_vma(mm) {
            Some(v) if self.rng.pct(85) => match self.rng.below(10) {
                // Just below: grows a grows-down VMA.
                0 => v.start() - self.rng.range(1, 3) * PAGE + self.rng.below(PAGE),
                _ => v.start() + self.rng.below(v.len()),
            },
            _ => self.owned_addr() + self.rng.below(PAGE),
        };
        let page = addr & !(PAGE - 1);
        let addr = if self.is_owned(page, page + PAGE) {
            addr
        } else {
            self.window_addr()
        };
        Self::fault_or_unregister(mm, addr)
    }

    /// A write fault at `addr`, unless a VMA registered with userfaultfd
    /// is there, or is a grows-down VMA above it that the fault would
    /// extend: whether the kernel serves that fault depends on which of
    /// its pages are present, which the model does not know; unregister
    /// the VMA instead.
    fn fault_or_unregister(mm: &Mm, addr: u64) -> Call {
        match mm.find_vma(addr) {
            Some(v)
                if v.flags().intersects(VmFlags::UFFD_MASK)
                    && (v.start() <= addr || v.flags().contains(VmFlags::GROWSDOWN)) =>
            {
                Call::uffd_unregister(v.start(), v.len())
            }
            _ => Call::write_fault(addr),
        }
    }

    /// One of `mseal`, `prctl(PR_SET_VMA_ANON_NAME)`, `pkey_*` and
    /// userfaultfd registration, on owned ranges or refused before they
    /// change anything.
    fn seal_call(&mut self, mm: &Mm) -> Call {
        let (s, e) = self.owned_range(mm);
        match self.rng.below(100) {
            0..=14 => {
                let (addr, len) = self.seal_spoilt(s, e);
                let flags = if self.rng.pct(4) {
                    self.rng.pick(&[1, 2, HIGH_BIT])
                } else {
                    0
                };
                Call::mseal(addr, len, flags)
            }
            15..=34 => {
                let (addr, len) = self.seal_spoilt(s, e);
                let name = if self.rng.pct(15) {
                    None
                } else {
                    let i = self.rng.below(ANON_NAMES.len() as u64) as usize;
                    let t = ANON_NAMES[i];
                    Some(AnonName::new(&t[..t.len() - 1]))
                };
                Call::set_vma_anon_name(addr, len, name)
            }
            35..=44 => {
                let flags = if self.rng.pct(10) { 1 } else { 0 };
                let rights = self.rng.pick(&[0, 1, 2, 3, 3, 4, HIGH_BIT]);
                Call::pkey_alloc(flags, rights)
            }
            45..=59 => {
                let (addr, len) = self.seal_spoilt(s, e);
                let pkey = self.rng.pick(&[-1, -1, -1, 0, 1, 15, 16, -2, i32::MIN]);
                Call::pkey_mprotect(addr, len, self.prot(), pkey)
            }
            60..=64 => Call::pkey_free(self.rng.pick(&[-1, 0, 1, 2, 15, 16])),
            65..=89 => {
                let (addr, len) = self.seal_spoilt(s, e);
                let mode = self.rng.pick(&[1, 1, 2, 3, 4, 5, 7, 0, 8, 1 | HIGH_BIT]);
                Call::uffd_register(addr, len, mode)
            }
            _ => {
                let (addr, len) = self.seal_spoilt(s, e);
                Call::uffd_unregister(addr, len)
            }
        }
    }

    /// `[s, e)` as an address and a length, sometimes spoilt in ways the
    /// calls refuse before looking at the map (or that reach only the
    /// owned range): a length short of a page boundary, an unaligned
    /// address, a zero length, or a length that wraps.
    fn seal_spoilt(&mut self, s: u64, e: u64) -> (u64, u64) {
        match self.rng.below(100) {
            0..=89 => (s, e - s),
            90..=93 => (s, e - s - self.rng.range(1, PAGE - 1)),
            94..=96 => (s + self.rng.range(1, PAGE - 1), e - s),
            97 => (s, 0),
            _ => (s, self.rng.pick(&[!(PAGE - 1), u64::MAX])),
        }
    }

    // --- madvise / mlock (issue 14) ---

    /// One of `madvise`, `mlock`, `mlock2`, `munlock`, `mlockall`,
    /// `munlockall`, mostly on owned ranges lined up with VMAs (so that
    /// flags split and merge), with bad arguments now and then.
    fn madvise_mlock(&mut self, mm: &Mm) -> Call {
        let call = self.madvise_mlock_call(mm);
        // Faulting pages in where a userfaultfd is registered: whether the
        // kernel's fault reaches the userfaultfd (and fails, as the
        // child's context answers SIGBUS) depends on which pages are
        // present, which the model does not know. As for write faults
        // (see `seal_call`), unregister there instead.
        let (s, e, populates) = match call {
            Call::Mlock(c) => (c.addr, c.addr.saturating_add(c.len), true),
            Call::Mlock2(c) => (
                c.addr,
                c.addr.saturating_add(c.len),
                c.flags as u32 & MLOCK_ONFAULT as u32 == 0,
            ),
            Call::Mlockall(c) => (
                0,
                u64::MAX,
                c.flags as u32 & (MCL_CURRENT | MCL_ONFAULT) as u32 == MCL_CURRENT as u32,
            ),
            // MADV_POPULATE_READ, MADV_POPULATE_WRITE
            Call::Madvise(c) if matches!(c.advice, 22 | 23) => {
                (c.addr, c.addr.saturating_add(c.len), true)
            }
            _ => (0, 0, false),
        };
        if populates {
            let registered = mm.vmas().into_iter().find(|v| {
                v.start() < e && s < v.end() && v.flags().intersects(mm::VmFlags::UFFD_MASK)
            });
            if let Some(v) = registered {
                return Call::uffd_unregister(v.start(), v.len());
            }
        }
        call
    }

    fn madvise_mlock_call(&mut self, mm: &Mm) -> Call {
        let (s, e) = self.owned_range(mm);
        match self.rng.below(100) {
            0..=64 => {
                let advice = self.advice(mm, s);
                let (addr, len) = self.spoilt(s, e);
                Call::madvise(addr, len, advice)
            }
            65..=73 => {
                let (addr, len) = self.lock_range(s, e);
                Call::mlock(addr, len)
            }
            74..=80 => {
                let (addr, len) = self.lock_range(s, e);
                let flags = match self.rng.below(20) {
                    0..=9 => MLOCK_ONFAULT,
                    10..=17 => 0,
                    18 => self.rng.pick(&[2, 0x80, 3]),
                    // An int: the high half is dropped.
                    _ => MLOCK_ONFAULT | HIGH_BIT,
                };
                Call::mlock2(addr, len, flags)
            }
            81..=89 => {
                let (addr, len) = self.lock_range(s, e);
                Call::munlock(addr, len)
            }
            90..=94 => {
                let flags = match self.rng.below(20) {
                    0..=4 => MCL_FUTURE,
                    5..=8 => MCL_CURRENT,
                    9..=10 => MCL_CURRENT | MCL_FUTURE,
                    11..=12 => MCL_FUTURE | MCL_ONFAULT,
                    13..=14 => MCL_CURRENT | MCL_ONFAULT,
                    15 => MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT,
                    _ => self.rng.pick(&[0, MCL_ONFAULT, 8, 0x10 | MCL_FUTURE]),
                };
                Call::mlockall(flags)
            }
            _ => Call::munlockall(),
        }
    }

    /// An `mlock` range: `[s, e)`, sometimes with an unaligned start or
    /// length (which mlock rounds), or wrapping.
    fn lock_range(&mut self, s: u64, e: u64) -> (u64, u64) {
        match self.rng.below(100) {
            0..=79 => (s, e - s),
            80..=87 => (
                s + self.rng.range(1, PAGE - 1),
                e - s - self.rng.range(1, PAGE - 1),
            ),
            88..=91 => (s, 0),
            92..=95 => (s, u64::MAX - self.rng.below(PAGE)),
            _ => (!(PAGE - 1), 2 * PAGE),
        }
    }

    /// An advice for a range starting at `s`: mostly ones that change
    /// flags, then page-only ones, guard markers and unknown values.
    fn advice(&mut self, mm: &Mm, s: u64) -> u64 {
        const FLAGS: [u64; 13] = [10, 11, 18, 19, 14, 15, 16, 17, 12, 13, 2, 1, 0];
        const PAGES: [u64; 9] = [4, 24, 8, 9, 3, 20, 21, 22, 23];
        match self.rng.below(100) {
            0..=59 => self.rng.pick(&FLAGS),
            60..=84 => self.rng.pick(&PAGES),
            85..=92 => self.rng.pick(&[102, 102, 103]),
            93..=94 => {
                // MADV_COLLAPSE only where the answer does not depend on
                // pages: the model has none.
                let certain = mm.find_vma(s).is_some_and(|v| {
                    let room = v
                        .start()
                        .checked_next_multiple_of(PMD)
                        .is_some_and(|h| h + PMD <= v.end());
                    // File and shmem VMAs depend on pages too (a shared
                    // anonymous one has been seen to fail with ENOMEM).
                    v.start() <= s
                        && ((v.file().is_none() && v.anon().is_none())
                            || v.flags().contains(mm::VmFlags::NOHUGEPAGE)
                            || !room)
                });
                if certain {
                    25
                } else {
                    4
                }
            }
            // Unknown, MADV_HWPOISON (not built in), and an int whose
            // high half the kernel drops.
            _ => self
                .rng
                .pick(&[5, 6, 7, 26, 100, 101, 104, u64::MAX, HIGH_BIT | 10]),
        }
    }

    // --- end madvise / mlock ---
}

/// One step of a case: a system call, or a whole-process event the model
/// answers with [`Mm::fork`] or [`Mm::exec`].
#[derive(Debug, Clone, Copy)]
pub enum Step {
    /// A call run in the child and applied to the models.
    Call(Call),
    /// The child forks; the new process carries on serving the calls and
    /// the models become their `fork()`.
    Fork,
    /// The child execs the test's tiny static program; always a case's
    /// last step (the program does not serve calls).
    Exec,
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Call(c) => write!(f, "{c}"),
            Step::Fork => write!(f, "fork() (the test goes on in the new process)"),
            Step::Exec => write!(f, "execve(the tiny static program)"),
        }
    }
}

/// Percent of steps that are a fork before the next call: about two
/// cases in three of 50 calls fork at least once.
const FORK_PCT: u64 = 2;
/// Percent of cases that end with an exec.
const EXEC_PCT: u64 = 30;
/// Percent of mmap calls given `MAP_LOCKED`.
const LOCKED_PCT: u64 = 4;
const MAP_LOCKED: u64 = 0x2000;

impl Gen {
    /// The next step: now and then a fork, else the next call (and now
    /// and then an mmap with `MAP_LOCKED`, whose `lo` the flag comparison
    /// then sees split, merge, move and vanish in a forked child).
    pub fn step(&mut self, mm: &Mm) -> Step {
        if self.rng.pct(FORK_PCT) {
            return Step::Fork;
        }
        match self.call(mm) {
            // Small ones only: the kernel populates a locked mapping.
            Call::Mmap(mut c) if c.len <= 64 * PAGE && self.rng.pct(LOCKED_PCT) => {
                c.flags |= MAP_LOCKED;
                Step::Call(Call::Mmap(c))
            }
            c => Step::Call(c),
        }
    }

    /// The step that ends a case, if any: an exec.
    pub fn last_step(&mut self) -> Option<Step> {
        self.rng.pct(EXEC_PCT).then_some(Step::Exec)
    }
}
