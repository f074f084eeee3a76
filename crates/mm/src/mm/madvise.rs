//! `madvise`: the advices that change VMA flags (and so split and merge
//! VMAs), the ones that only drop, populate or mark pages, and the guard
//! markers of `MADV_GUARD_INSTALL`.
//!
//! The model keeps no pages. What a page-only advice leaves behind that
//! the model can see is the anon_vma a populating write fault gives a
//! private VMA, and guard markers (which fail later faults). A range that
//! `MADV_DONTNEED` or `MADV_FREE` empties "faults again as new" only in
//! the page contents, which the model does not keep: the VMA keeps its
//! anon_vma (the kernel never takes one away), so nothing the model
//! shows changes, and these advices are checked (errno, holes) and
//! otherwise do nothing.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::flags::{rounded_range, VmFlags, PAGE_SIZE, PMD_SIZE};
use crate::vma::Vma;
use crate::Errno;

use super::mprotect::Holes;
use super::{Mm, State};

/// An `madvise` advice: the kernel's `int behavior`, any value (an
/// unknown one is refused with `EINVAL`).
///
/// ```
/// use mm::Advice;
/// assert_eq!(Advice::DONTFORK.0, 10);
/// assert_eq!(Advice::DONTFORK.to_string(), "MADV_DONTFORK");
/// assert_eq!(Advice(7).to_string(), "7");
/// assert!(!Advice(7).is_known());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Advice(pub i32);

impl Advice {
    /// No special treatment: clears `SEQUENTIAL` and `RANDOM`.
    pub const NORMAL: Advice = Advice(0);
    /// `VM_RAND_READ`.
    pub const RANDOM: Advice = Advice(1);
    /// `VM_SEQ_READ`.
    pub const SEQUENTIAL: Advice = Advice(2);
    /// Read ahead (no VMA change).
    pub const WILLNEED: Advice = Advice(3);
    /// Drop the pages (refused on locked VMAs).
    pub const DONTNEED: Advice = Advice(4);
    /// Free the pages lazily (private anonymous memory only).
    pub const FREE: Advice = Advice(8);
    /// Punch a hole in a shared writable file mapping's file.
    pub const REMOVE: Advice = Advice(9);
    /// `VM_DONTCOPY`: not copied into a forked child.
    pub const DONTFORK: Advice = Advice(10);
    /// Clears `VM_DONTCOPY`.
    pub const DOFORK: Advice = Advice(11);
    /// `VM_MERGEABLE` (KSM), where KSM can work.
    pub const MERGEABLE: Advice = Advice(12);
    /// Clears `VM_MERGEABLE`.
    pub const UNMERGEABLE: Advice = Advice(13);
    /// `VM_HUGEPAGE` (clears `VM_NOHUGEPAGE`).
    pub const HUGEPAGE: Advice = Advice(14);
    /// `VM_NOHUGEPAGE` (clears `VM_HUGEPAGE`).
    pub const NOHUGEPAGE: Advice = Advice(15);
    /// `VM_DONTDUMP`.
    pub const DONTDUMP: Advice = Advice(16);
    /// Clears `VM_DONTDUMP` (refused on special mappings).
    pub const DODUMP: Advice = Advice(17);
    /// `VM_WIPEONFORK` (private anonymous memory only).
    pub const WIPEONFORK: Advice = Advice(18);
    /// Clears `VM_WIPEONFORK`.
    pub const KEEPONFORK: Advice = Advice(19);
    /// Deactivate the pages (refused on locked VMAs).
    pub const COLD: Advice = Advice(20);
    /// Reclaim the pages (refused on locked VMAs).
    pub const PAGEOUT: Advice = Advice(21);
    /// Prefault readable.
    pub const POPULATE_READ: Advice = Advice(22);
    /// Prefault writable.
    pub const POPULATE_WRITE: Advice = Advice(23);
    /// `DONTNEED` that drops locked pages too.
    pub const DONTNEED_LOCKED: Advice = Advice(24);
    /// Collapse into transparent huge pages now.
    pub const COLLAPSE: Advice = Advice(25);
    /// Install guard markers: faults there fail (6.13+).
    pub const GUARD_INSTALL: Advice = Advice(102);
    /// Remove guard markers.
    pub const GUARD_REMOVE: Advice = Advice(103);

    const ALL: [(Advice, &'static str); 25] = [
        (Advice::NORMAL, "MADV_NORMAL"),
        (Advice::RANDOM, "MADV_RANDOM"),
        (Advice::SEQUENTIAL, "MADV_SEQUENTIAL"),
        (Advice::WILLNEED, "MADV_WILLNEED"),
        (Advice::DONTNEED, "MADV_DONTNEED"),
        (Advice::FREE, "MADV_FREE"),
        (Advice::REMOVE, "MADV_REMOVE"),
        (Advice::DONTFORK, "MADV_DONTFORK"),
        (Advice::DOFORK, "MADV_DOFORK"),
        (Advice::MERGEABLE, "MADV_MERGEABLE"),
        (Advice::UNMERGEABLE, "MADV_UNMERGEABLE"),
        (Advice::HUGEPAGE, "MADV_HUGEPAGE"),
        (Advice::NOHUGEPAGE, "MADV_NOHUGEPAGE"),
        (Advice::DONTDUMP, "MADV_DONTDUMP"),
        (Advice::DODUMP, "MADV_DODUMP"),
        (Advice::WIPEONFORK, "MADV_WIPEONFORK"),
        (Advice::KEEPONFORK, "MADV_KEEPONFORK"),
        (Advice::COLD, "MADV_COLD"),
        (Advice::PAGEOUT, "MADV_PAGEOUT"),
        (Advice::POPULATE_READ, "MADV_POPULATE_READ"),
        (Advice::POPULATE_WRITE, "MADV_POPULATE_WRITE"),
        (Advice::DONTNEED_LOCKED, "MADV_DONTNEED_LOCKED"),
        (Advice::COLLAPSE, "MADV_COLLAPSE"),
        (Advice::GUARD_INSTALL, "MADV_GUARD_INSTALL"),
        (Advice::GUARD_REMOVE, "MADV_GUARD_REMOVE"),
    ];

    /// The C name, for the advices this kernel knows.
    ///
    /// ```
    /// use mm::Advice;
    /// assert_eq!(Advice::GUARD_INSTALL.name(), Some("MADV_GUARD_INSTALL"));
    /// assert_eq!(Advice(100).name(), None); // MADV_HWPOISON: not built in
    /// ```
    pub fn name(self) -> Option<&'static str> {
        Advice::ALL
            .iter()
            .find(|(a, _)| *a == self)
            .map(|&(_, n)| n)
    }

    /// Whether the kernel accepts it. `MADV_HWPOISON` and
    /// `MADV_SOFT_OFFLINE` are refused, as by a kernel without
    /// `CONFIG_MEMORY_FAILURE` (the running one).
    pub fn is_known(self) -> bool {
        self.name().is_some()
    }

    /// Whether the advice discards pages or changes what a later fault or
    /// a fork child reads (the kernel's `is_discard`): these are the ones a
    /// sealed read-only private anonymous VMA refuses with `EPERM`.
    ///
    /// ```
    /// use mm::Advice;
    /// assert!(Advice::DONTNEED.discards() && Advice::WIPEONFORK.discards());
    /// assert!(!Advice::WILLNEED.discards() && !Advice::DONTDUMP.discards());
    /// ```
    pub fn discards(self) -> bool {
        matches!(
            self,
            Advice::FREE
                | Advice::DONTNEED
                | Advice::DONTNEED_LOCKED
                | Advice::REMOVE
                | Advice::DONTFORK
                | Advice::WIPEONFORK
                | Advice::GUARD_INSTALL
        )
    }
}

impl fmt::Display for Advice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "{}", self.0),
        }
    }
}

/// The page ranges holding guard markers, disjoint and coalesced.
///
/// Markers live in page tables: they stay through `mprotect`,
/// `MADV_DONTNEED` and splits, move with `mremap`, are copied by `fork`
/// (but not into `VM_DONTCOPY` or `VM_WIPEONFORK` VMAs) and go away with
/// `munmap` or `MADV_GUARD_REMOVE`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Guards(BTreeMap<u64, u64>);

impl Guards {
    /// Mark `[s, e)`.
    pub(crate) fn insert(&mut self, mut s: u64, mut e: u64) {
        if s >= e {
            return;
        }
        // Absorb every range touching or overlapping [s, e).
        let touching: Vec<(u64, u64)> = self
            .0
            .range(..=e)
            .rev()
            .take_while(|&(_, &end)| end >= s)
            .map(|(&a, &b)| (a, b))
            .collect();
        for (a, b) in touching {
            self.0.remove(&a);
            s = s.min(a);
            e = e.max(b);
        }
        self.0.insert(s, e);
    }

    /// Unmark `[s, e)`.
    pub(crate) fn remove(&mut self, s: u64, e: u64) {
        if s >= e || self.0.is_empty() {
            return;
        }
        let hit: Vec<(u64, u64)> = self
            .0
            .range(..e)
            .rev()
            .take_while(|&(_, &end)| end > s)
            .map(|(&a, &b)| (a, b))
            .collect();
        for (a, b) in hit {
            self.0.remove(&a);
            if a < s {
                self.0.insert(a, s);
            }
            if b > e {
                self.0.insert(e, b);
            }
        }
    }

    /// The lowest marked address in `[s, e)`.
    pub(crate) fn first_in(&self, s: u64, e: u64) -> Option<u64> {
        if let Some((_, &end)) = self.0.range(..=s).next_back() {
            if end > s {
                return (s < e).then_some(s);
            }
        }
        self.0.range(s..e).next().map(|(&a, _)| a)
    }

    /// The marked parts of `[s, e)`.
    pub(crate) fn within(&self, s: u64, e: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        for (&a, &b) in self.0.range(..e) {
            if b > s {
                out.push((a.max(s), b.min(e)));
            }
        }
        out
    }

    /// Move the markers of `[s, e)` to start at `to` (an `mremap` move).
    pub(crate) fn shift(&mut self, s: u64, e: u64, to: u64) {
        let moved = self.within(s, e);
        self.remove(s, e);
        for (a, b) in moved {
            self.insert(a - s + to, b - s + to);
        }
    }
}

impl Mm {
    /// `madvise(addr, len, advice)`.
    ///
    /// Checks in the kernel's order: an unknown advice, an unaligned
    /// address or a length that wraps is `EINVAL`; a zero length then
    /// succeeds. The range is walked VMA by VMA in address order: an
    /// advice refused by one VMA (`EINVAL`, `EACCES`) stops the walk and
    /// leaves the VMAs before it changed, as the kernel does; a hole is
    /// skipped and reported as `ENOMEM` at the end, after the mapped parts
    /// took the advice. A split refused at `max_map_count` is `EAGAIN`.
    /// `MADV_POPULATE_READ`/`WRITE` fault the range in page order: a hole
    /// is `ENOMEM`, a VMA without the access `EINVAL`, a page past the end
    /// of its file or a guard marker `EFAULT`, each after the pages before
    /// it were populated (a populating write gives a private VMA its
    /// anon_vma).
    ///
    /// `MADV_COLLAPSE` is refused (`EINVAL`) where the kernel refuses it
    /// for the VMA whatever its pages: `VM_NOHUGEPAGE`, no room for an
    /// aligned huge page, private anonymous memory with no anon_vma. File
    /// and shared memory are refused too, which is what a file open for
    /// writing gets (no read-only THP for filesystems); shmem's answer
    /// depends on its pages and on free memory, which the model does not
    /// have. Otherwise the model, having no pages, answers as if every huge
    /// page of the range collapsed.
    ///
    /// ```
    /// use mm::{Advice, Errno, MapFlags, Mm, Prot, VmFlags};
    /// let mm = Mm::default();
    /// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    /// let a = mm.mmap(0, 4 * 4096, Prot::READ | Prot::WRITE, anon, None, 0).unwrap();
    /// mm.madvise(a + 4096, 4096, Advice::DONTFORK).unwrap(); // splits in three
    /// assert_eq!(mm.map_count(), 3);
    /// assert!(mm.find_vma(a + 4096).unwrap().flags().contains(VmFlags::DONTCOPY));
    /// mm.madvise(a, 4 * 4096, Advice::DOFORK).unwrap(); // merges back
    /// assert_eq!(mm.map_count(), 1);
    /// assert_eq!(mm.madvise(a + 1, 4096, Advice::DONTFORK), Err(Errno::EINVAL));
    /// assert_eq!(mm.madvise(a, 8 * 4096, Advice::DONTNEED), Err(Errno::ENOMEM));
    /// ```
    pub fn madvise(&self, addr: u64, len: u64, advice: Advice) -> Result<(), Errno> {
        if !advice.is_known() {
            return Err(Errno::EINVAL);
        }
        let Some(end) = rounded_range(addr, len)? else {
            return Ok(());
        };
        let mut st = self.state.write();
        match advice {
            Advice::POPULATE_READ => st.madvise_populate(addr, end, false),
            Advice::POPULATE_WRITE => st.madvise_populate(addr, end, true),
            _ => st.madvise_walk(addr, end, advice),
        }
    }
}

/// KSM leaves shared, special (and huge-TLB, I/O, mixed) mappings alone.
fn ksm_compatible(flags: VmFlags) -> bool {
    !flags.intersects(VmFlags::SHARED | VmFlags::MAYSHARE | VmFlags::DONTEXPAND)
}

impl State {
    /// `madvise_walk_vmas`: the advice on each VMA in turn; a hole is
    /// `ENOMEM` once the mapped parts took the advice.
    fn madvise_walk(&mut self, addr: u64, end: u64, advice: Advice) -> Result<(), Errno> {
        let hole = self.walk_vmas(addr, end, Holes::Skip, |st, v, prev, s, e| {
            st.madvise_vma(&v, prev, s, e, advice)
        })?;
        if hole {
            Err(Errno::ENOMEM)
        } else {
            Ok(())
        }
    }

    /// `madvise_vma_behavior` for `[start, end)` of `vma`: the VMA that
    /// covers the range afterwards.
    fn madvise_vma(
        &mut self,
        vma: &Arc<Vma>,
        prev: Option<&Arc<Vma>>,
        start: u64,
        end: u64,
        advice: Advice,
    ) -> Result<Arc<Vma>, Errno> {
        // can_madvise_modify: the sealing check comes first, per VMA.
        if advice.discards() && State::sealed_refuses_discard(vma) {
            return Err(Errno::EPERM);
        }
        let old = vma.flags();
        let locked = old.contains(VmFlags::LOCKED);
        let special = old.contains(VmFlags::DONTEXPAND);
        let same = Ok(Arc::clone(vma));
        let new = match advice {
            Advice::REMOVE => {
                if locked || vma.file().is_none() {
                    return Err(Errno::EINVAL);
                }
                if !old.contains(VmFlags::SHARED | VmFlags::MAYWRITE) {
                    return Err(Errno::EACCES);
                }
                return same;
            }
            Advice::WILLNEED => return same,
            Advice::COLD | Advice::PAGEOUT => {
                return if locked { Err(Errno::EINVAL) } else { same };
            }
            Advice::DONTNEED | Advice::DONTNEED_LOCKED | Advice::FREE => {
                if locked && advice != Advice::DONTNEED_LOCKED {
                    return Err(Errno::EINVAL);
                }
                if advice == Advice::FREE && !vma.is_anonymous() {
                    return Err(Errno::EINVAL);
                }
                return same;
            }
            Advice::COLLAPSE => {
                let room = vma
                    .start()
                    .checked_next_multiple_of(PMD_SIZE)
                    .and_then(|h| h.checked_add(PMD_SIZE))
                    .is_some_and(|h| h <= vma.end());
                if !vma.is_anonymous()
                    || old.contains(VmFlags::NOHUGEPAGE)
                    || vma.anon().is_none()
                    || !room
                {
                    return Err(Errno::EINVAL);
                }
                return same;
            }
            Advice::GUARD_INSTALL => {
                if special || locked {
                    return Err(Errno::EINVAL);
                }
                // The range's page tables are no longer empty: private
                // anonymous memory gets an anon_vma (file VMAs do not),
                // and the whole VMA (no split) the sticky VM_MAYBE_GUARD.
                if vma.is_anonymous() {
                    self.anon_prepare(vma);
                }
                self.guards.insert(start, end);
                if old.contains(VmFlags::MAYBE_GUARD) {
                    return same;
                }
                let marked = vma.with_flags(old | VmFlags::MAYBE_GUARD);
                return Ok(self.commit(&[Arc::clone(vma)], vec![marked]).remove(0));
            }
            Advice::GUARD_REMOVE => {
                if special {
                    return Err(Errno::EINVAL);
                }
                self.guards.remove(start, end);
                return same;
            }
            Advice::NORMAL => old - VmFlags::RAND_READ - VmFlags::SEQ_READ,
            Advice::SEQUENTIAL => (old - VmFlags::RAND_READ) | VmFlags::SEQ_READ,
            Advice::RANDOM => (old - VmFlags::SEQ_READ) | VmFlags::RAND_READ,
            Advice::DONTFORK => old | VmFlags::DONTCOPY,
            Advice::DOFORK => old - VmFlags::DONTCOPY,
            Advice::WIPEONFORK => {
                if vma.file().is_some() || old.contains(VmFlags::SHARED) {
                    return Err(Errno::EINVAL);
                }
                old | VmFlags::WIPEONFORK
            }
            Advice::KEEPONFORK => old - VmFlags::WIPEONFORK,
            Advice::DONTDUMP => old | VmFlags::DONTDUMP,
            Advice::DODUMP => {
                if special {
                    return Err(Errno::EINVAL);
                }
                old - VmFlags::DONTDUMP
            }
            Advice::MERGEABLE if ksm_compatible(old) => old | VmFlags::MERGEABLE,
            Advice::MERGEABLE => old,
            Advice::UNMERGEABLE => old - VmFlags::MERGEABLE,
            Advice::HUGEPAGE => (old - VmFlags::NOHUGEPAGE) | VmFlags::HUGEPAGE,
            Advice::NOHUGEPAGE => (old - VmFlags::HUGEPAGE) | VmFlags::NOHUGEPAGE,
            // madvise() refused unknown advices before the walk.
            _ => return Err(Errno::EINVAL),
        };
        if new == old {
            return same;
        }
        self.modify(vma, prev, start, end, new).map_err(|e| {
            if e == Errno::ENOMEM {
                Errno::EAGAIN
            } else {
                e
            }
        })
    }

    /// `madvise_populate`: fault `[start, end)` in, page by page.
    fn madvise_populate(&mut self, start: u64, end: u64, write: bool) -> Result<(), Errno> {
        let mut pos = start;
        while pos < end {
            let v = self.index.find(pos).ok_or(Errno::ENOMEM)?;
            let flags = v.flags();
            let allowed = if write {
                flags.contains(VmFlags::WRITE)
            } else {
                flags.contains(VmFlags::READ)
            };
            if !allowed {
                return Err(Errno::EINVAL);
            }
            let seg_end = v.end().min(end);
            self.populate_vma(&v, pos, seg_end, write)?;
            pos = seg_end;
        }
        Ok(())
    }

    /// Fault `[s, e)` of `vma` in (a write fault if `write`): a private
    /// write gives the VMA its anon_vma. `EFAULT` at the first guard
    /// marker (before that page's fault prepares anything) or page past
    /// the end of the file (after, as `do_cow_fault` prepares first).
    pub(crate) fn populate_vma(&self, vma: &Vma, s: u64, e: u64, write: bool) -> Result<(), Errno> {
        let guard = self.guards.first_in(s, e);
        let eof = vma.file().and_then(|f| {
            if vma.flags().contains(VmFlags::DONTEXPAND) {
                return None;
            }
            let pages = f.size().div_ceil(PAGE_SIZE);
            let first = vma.pgoff_at(s);
            if first >= pages {
                Some(s)
            } else {
                let at = s.checked_add((pages - first).checked_mul(PAGE_SIZE)?)?;
                (at < e).then_some(at)
            }
        });
        let cow = write && !vma.flags().contains(VmFlags::SHARED);
        if cow && guard != Some(s) {
            self.anon_prepare(vma);
        }
        if guard.is_some() || eof.is_some() {
            return Err(Errno::EFAULT);
        }
        Ok(())
    }

    /// `__mm_populate`: fault `[start, end)` in VMA by VMA as `mlock` and
    /// `MAP_POPULATE` do (a write fault for private writable VMAs, else a
    /// read). `VM_LOCKONFAULT` VMAs are skipped, inaccessible ones fail
    /// with `EFAULT`. With `ignore_errors` a failing VMA is left and the
    /// next one populated; without, the first error is returned.
    pub(crate) fn mm_populate(
        &self,
        start: u64,
        end: u64,
        ignore_errors: bool,
    ) -> Result<(), Errno> {
        for v in self.overlapping(start, end) {
            let flags = v.flags();
            if flags.contains(VmFlags::LOCKONFAULT) {
                continue;
            }
            let r = if flags.intersects(VmFlags::ACCESS) {
                let write = flags.contains(VmFlags::WRITE) && !flags.contains(VmFlags::SHARED);
                self.populate_vma(&v, v.start().max(start), v.end().min(end), write)
            } else {
                Err(Errno::EFAULT)
            };
            if r.is_err() && !ignore_errors {
                return r;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Access, FaultError, File, MapFlags, Prot};

    const P: u64 = PAGE_SIZE;
    const BASE: u64 = 0x1000_0000_0000;

    fn anon() -> MapFlags {
        MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED
    }

    fn rw() -> Prot {
        Prot::READ | Prot::WRITE
    }

    #[test]
    fn guard_set_coalesces_and_splits() {
        let mut g = Guards::default();
        g.insert(10, 20);
        g.insert(20, 30);
        g.insert(5, 8);
        assert_eq!(g.within(0, 100), vec![(5, 8), (10, 30)]);
        g.remove(12, 14);
        assert_eq!(g.within(0, 100), vec![(5, 8), (10, 12), (14, 30)]);
        assert_eq!(g.first_in(8, 100), Some(10));
        assert_eq!(g.first_in(11, 100), Some(11));
        assert_eq!(g.first_in(12, 14), None);
        g.shift(10, 30, 100);
        assert_eq!(g.within(0, 200), vec![(5, 8), (100, 102), (104, 120)]);
    }

    #[test]
    fn flag_advices_split_and_merge_back() {
        let mm = Mm::default();
        mm.mmap(BASE, 8 * P, rw(), anon(), None, 0).unwrap();
        let pairs = [
            (Advice::DONTFORK, Advice::DOFORK, VmFlags::DONTCOPY),
            (Advice::WIPEONFORK, Advice::KEEPONFORK, VmFlags::WIPEONFORK),
            (Advice::DONTDUMP, Advice::DODUMP, VmFlags::DONTDUMP),
            (Advice::MERGEABLE, Advice::UNMERGEABLE, VmFlags::MERGEABLE),
            (Advice::SEQUENTIAL, Advice::NORMAL, VmFlags::SEQ_READ),
            (Advice::RANDOM, Advice::NORMAL, VmFlags::RAND_READ),
            // Last: nothing clears NOHUGEPAGE but HUGEPAGE.
            (Advice::HUGEPAGE, Advice::NORMAL, VmFlags::HUGEPAGE),
        ];
        for (on, off, flag) in pairs {
            mm.madvise(BASE + 2 * P, 2 * P, on).unwrap();
            assert_eq!(mm.map_count(), 3, "{on}");
            assert!(mm.find_vma(BASE + 2 * P).unwrap().flags().contains(flag));
            if on == Advice::HUGEPAGE {
                mm.madvise(BASE + 2 * P, 2 * P, Advice::NOHUGEPAGE).unwrap();
                let f = mm.find_vma(BASE + 2 * P).unwrap().flags();
                assert!(f.contains(VmFlags::NOHUGEPAGE) && !f.contains(flag));
                // NOHUGEPAGE is a flag of its own: no merge.
                assert_eq!(mm.map_count(), 3);
                continue;
            }
            mm.madvise(BASE, 8 * P, off).unwrap();
            assert_eq!(mm.map_count(), 1, "{off}");
            mm.validate().unwrap();
        }
    }

    #[test]
    fn refusals_follow_the_vma_kind() {
        let mm = Mm::default();
        let shared = MapFlags::SHARED | MapFlags::ANONYMOUS | MapFlags::FIXED;
        mm.mmap(BASE, 2 * P, rw(), shared, None, 0).unwrap();
        assert_eq!(mm.madvise(BASE, P, Advice::WIPEONFORK), Err(Errno::EINVAL));
        assert_eq!(mm.madvise(BASE, P, Advice::FREE), Err(Errno::EINVAL));
        // KSM ignores shared memory: success, no flag, no split.
        mm.madvise(BASE, P, Advice::MERGEABLE).unwrap();
        assert_eq!(mm.map_count(), 1);
        mm.madvise(BASE, P, Advice::REMOVE).unwrap();
        let f = File::new("/f", 2 * P);
        let private = MapFlags::PRIVATE | MapFlags::FIXED;
        mm.mmap(BASE + 8 * P, 4 * P, Prot::READ, private, Some(&f), 0)
            .unwrap();
        let at = BASE + 8 * P;
        assert_eq!(mm.madvise(at, P, Advice::REMOVE), Err(Errno::EACCES));
        assert_eq!(
            mm.madvise(at, P, Advice::POPULATE_WRITE),
            Err(Errno::EINVAL)
        );
        mm.madvise(at, P, Advice::POPULATE_READ).unwrap();
        assert_eq!(
            mm.madvise(at, 4 * P, Advice::POPULATE_READ),
            Err(Errno::EFAULT)
        );
        assert_eq!(mm.madvise(at, P, Advice::COLLAPSE), Err(Errno::EINVAL));
        let locked = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED | MapFlags::LOCKED;
        mm.mmap(BASE + 16 * P, 2 * P, rw(), locked, None, 0)
            .unwrap();
        let at = BASE + 16 * P;
        for a in [
            Advice::DONTNEED,
            Advice::FREE,
            Advice::COLD,
            Advice::PAGEOUT,
        ] {
            assert_eq!(mm.madvise(at, P, a), Err(Errno::EINVAL), "{a}");
        }
        assert_eq!(mm.madvise(at, P, Advice::GUARD_INSTALL), Err(Errno::EINVAL));
        mm.madvise(at, P, Advice::DONTNEED_LOCKED).unwrap();
        mm.madvise(at, P, Advice::GUARD_REMOVE).unwrap();
        mm.validate().unwrap();
    }

    #[test]
    fn argument_checks_come_first_and_change_nothing() {
        let mm = Mm::default();
        mm.mmap(BASE, 4 * P, rw(), anon(), None, 0).unwrap();
        let before = mm.maps();
        assert_eq!(mm.madvise(BASE, P, Advice(7)), Err(Errno::EINVAL));
        assert_eq!(
            mm.madvise(BASE + 1, P, Advice::DONTFORK),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            mm.madvise(BASE, u64::MAX, Advice::DONTFORK),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            mm.madvise(u64::MAX - P + 1, 2 * P, Advice::DONTFORK),
            Err(Errno::EINVAL)
        );
        assert_eq!(mm.madvise(BASE, 0, Advice(7)), Err(Errno::EINVAL));
        assert_eq!(
            mm.madvise(BASE + 1, 0, Advice::DONTFORK),
            Err(Errno::EINVAL)
        );
        assert_eq!(mm.madvise(BASE, 0, Advice::DONTFORK), Ok(()));
        assert_eq!(
            mm.madvise(BASE + 64 * P, P, Advice::DONTFORK),
            Err(Errno::ENOMEM)
        );
        assert_eq!(mm.maps(), before);
    }

    #[test]
    fn holes_are_skipped_then_reported() {
        let mm = Mm::default();
        mm.mmap(BASE, 4 * P, rw(), anon(), None, 0).unwrap();
        mm.munmap(BASE + P, P).unwrap();
        assert_eq!(
            mm.madvise(BASE, 4 * P, Advice::DONTDUMP),
            Err(Errno::ENOMEM)
        );
        for a in [BASE, BASE + 2 * P] {
            assert!(mm.find_vma(a).unwrap().flags().contains(VmFlags::DONTDUMP));
        }
    }

    #[test]
    fn a_split_past_max_map_count_is_eagain() {
        let layout = crate::Layout {
            max_map_count: 1,
            ..crate::Layout::default()
        };
        let mm = Mm::new(crate::Policy::shared_default(), layout);
        mm.mmap(BASE, 4 * P, rw(), anon(), None, 0).unwrap();
        let before = mm.maps();
        assert_eq!(
            mm.madvise(BASE + P, P, Advice::DONTFORK),
            Err(Errno::EAGAIN)
        );
        assert_eq!(mm.maps(), before);
    }

    #[test]
    fn guard_markers_fail_faults_until_removed() {
        let mm = Mm::default();
        mm.mmap(BASE, 4 * P, rw(), anon(), None, 0).unwrap();
        mm.madvise(BASE + P, P, Advice::GUARD_INSTALL).unwrap();
        // No split: the whole VMA is marked, and has an anon_vma.
        assert_eq!(mm.map_count(), 1);
        let v = mm.find_vma(BASE).unwrap();
        assert!(v.flags().contains(VmFlags::MAYBE_GUARD) && v.anon().is_some());
        assert_eq!(mm.fault(BASE + P, Access::Write), Err(FaultError::Segv));
        assert!(mm.fault(BASE, Access::Write).is_ok());
        assert_eq!(
            mm.madvise(BASE, 4 * P, Advice::POPULATE_WRITE),
            Err(Errno::EFAULT)
        );
        // DONTNEED keeps markers; GUARD_REMOVE drops them, the flag stays.
        mm.madvise(BASE, 4 * P, Advice::DONTNEED).unwrap();
        assert_eq!(mm.fault(BASE + P, Access::Read), Err(FaultError::Segv));
        mm.madvise(BASE, 4 * P, Advice::GUARD_REMOVE).unwrap();
        assert!(mm.fault(BASE + P, Access::Write).is_ok());
        assert!(mm
            .find_vma(BASE)
            .unwrap()
            .flags()
            .contains(VmFlags::MAYBE_GUARD));
        // Sticky: a neighbour without it still merges.
        mm.mmap(BASE + 4 * P, P, rw(), anon(), None, 0).unwrap();
        assert_eq!(mm.map_count(), 1);
        // munmap drops markers.
        mm.madvise(BASE + 2 * P, P, Advice::GUARD_INSTALL).unwrap();
        mm.munmap(BASE + 2 * P, P).unwrap();
        mm.mmap(BASE + 2 * P, P, rw(), anon(), None, 0).unwrap();
        assert!(mm.fault(BASE + 2 * P, Access::Write).is_ok());
    }

    #[test]
    fn special_mappings_refuse_dodump_guards_and_locks() {
        let text = "7ffff7fc1000-7ffff7fc3000 r-xp 00000000 00:00 0    [vdso]\n\
                    VmFlags: rd ex mr mw me de\n";
        let smaps = crate::procmaps::parse_smaps(text).unwrap();
        let policy = crate::Policy::shared_default();
        let mm = Mm::from_smaps(policy, crate::Layout::default(), &smaps, 0, 0, 0, &[]).unwrap();
        let at = 0x7fff_f7fc_1000;
        assert_eq!(mm.madvise(at, P, Advice::DODUMP), Err(Errno::EINVAL));
        assert_eq!(mm.madvise(at, P, Advice::GUARD_INSTALL), Err(Errno::EINVAL));
        assert_eq!(mm.madvise(at, P, Advice::GUARD_REMOVE), Err(Errno::EINVAL));
        // KSM skips it; mlock leaves it unlocked.
        mm.madvise(at, 2 * P, Advice::MERGEABLE).unwrap();
        mm.mlock(at, 2 * P).unwrap();
        let v = mm.find_vma(at).unwrap();
        assert!(!v.flags().intersects(VmFlags::MERGEABLE | VmFlags::LOCKED));
        // DONTDUMP is allowed (and, special, it never merges back).
        mm.madvise(at, P, Advice::DONTDUMP).unwrap();
        assert!(mm.find_vma(at).unwrap().flags().contains(VmFlags::DONTDUMP));
        assert_eq!(mm.map_count(), 2);
    }

    #[test]
    fn populate_write_gives_an_anon_vma() {
        let mm = Mm::default();
        mm.mmap(BASE, 4 * P, rw(), anon(), None, 0).unwrap();
        mm.madvise(BASE, 4 * P, Advice::POPULATE_READ).unwrap();
        assert!(mm.find_vma(BASE).unwrap().anon().is_none());
        mm.madvise(BASE, 4 * P, Advice::POPULATE_WRITE).unwrap();
        assert!(mm.find_vma(BASE).unwrap().anon().is_some());
        assert_eq!(
            mm.madvise(BASE, 8 * P, Advice::POPULATE_WRITE),
            Err(Errno::ENOMEM)
        );
    }
}
