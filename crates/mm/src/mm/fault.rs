//! The page-fault path: find the VMA and check the access, first with no
//! `mmap_lock` at all, then under it.

use std::fmt;
use std::sync::Arc;

use crate::flags::{VmFlags, PAGE_SHIFT, PAGE_SIZE};
use crate::index::{FaultHandle, Reader};
use crate::vma::Vma;
use crate::Errno;

use super::{Mm, State};

/// The kind of memory access that faulted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// A load.
    Read,
    /// A store.
    Write,
    /// An instruction fetch.
    Exec,
}

/// How a fault that could not be served ends for the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultError {
    /// No VMA covers the address, or it forbids the access: `SIGSEGV`.
    Segv,
    /// The address is past the end of the mapped file: `SIGBUS`.
    Bus,
}

impl FaultError {
    /// What a system call touching the address reports: `EFAULT`.
    pub fn errno(self) -> Errno {
        Errno::EFAULT
    }
}

impl fmt::Display for FaultError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FaultError::Segv => "SIGSEGV",
            FaultError::Bus => "SIGBUS",
        })
    }
}

impl std::error::Error for FaultError {}

/// Which path served a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultPath {
    /// Lockless lookup plus the VMA's own lock; `mmap_lock` untouched.
    VmaLock,
    /// The fallback under `mmap_lock` (no lockless index, the VMA was
    /// being changed, a first write needed an anon_vma, or the stack grew).
    MmapLock,
}

/// What the access checks concluded about a VMA.
enum Verdict {
    Ok,
    Fail(FaultError),
    /// A private write needs an anon_vma first, which takes `mmap_lock`.
    NeedsAnon,
}

fn check(vma: &Vma, addr: u64, access: Access) -> Verdict {
    let flags = vma.flags();
    let allowed = match access {
        Access::Write => flags.contains(VmFlags::WRITE),
        Access::Exec => flags.contains(VmFlags::EXEC),
        Access::Read => flags.intersects(VmFlags::ACCESS),
    };
    if !allowed {
        return Verdict::Fail(FaultError::Segv);
    }
    // A private write prepares the anon_vma before it looks at the file
    // (do_cow_fault), so even a write past the end of the file, which
    // then fails with SIGBUS, leaves the VMA with an anon_vma.
    if access == Access::Write && !flags.contains(VmFlags::SHARED) && vma.anon().is_none() {
        return Verdict::NeedsAnon;
    }
    check_eof(vma, addr)
}

/// `SIGBUS` for a page past the end of the mapped file.
fn check_eof(vma: &Vma, addr: u64) -> Verdict {
    if let Some(f) = vma.file() {
        let pages = f.size().div_ceil(PAGE_SIZE);
        if vma.pgoff_at(addr) >= pages && !vma.flags().contains(VmFlags::DONTEXPAND) {
            return Verdict::Fail(FaultError::Bus);
        }
    }
    Verdict::Ok
}

/// The lockless half of a fault: the lookup under `guard`, the VMA's read
/// lock taken by try-lock, the access check. `None` sends the fault to
/// the `mmap_lock` fallback (no VMA, the VMA being changed, or an anon_vma
/// to prepare).
#[inline]
fn lockless_fault(
    h: &FaultHandle,
    guard: &maple::Guard,
    addr: u64,
    access: Access,
) -> Option<Result<FaultPath, FaultError>> {
    let vma = h.tree.load(addr, guard)?.get();
    if vma.flags().contains(VmFlags::MAYBE_GUARD) {
        // Guard markers are kept under mmap_lock.
        return None;
    }
    let held = vma.lock().try_read()?;
    let verdict = check(vma, addr, access);
    drop(held);
    match verdict {
        Verdict::Ok => Some(Ok(FaultPath::VmaLock)),
        Verdict::Fail(e) => Some(Err(e)),
        Verdict::NeedsAnon => None,
    }
}

impl Mm {
    /// Serve a page fault at `addr`: the VMA lookup, the per-VMA lock and
    /// the permission check (page tables and page contents are not
    /// modelled). A first write to a private mapping gives its VMA an
    /// anon_vma; a fault just below a grows-down VMA grows it.
    ///
    /// On a maple-tree index the fast path looks the VMA up with no lock
    /// (pinning a grace period unless this thread is the only one that
    /// does so; [`fault_in`](Mm::fault_in) reads inside one the caller
    /// holds) and try-locks the VMA alone: it takes no `mmap_lock` and
    /// writes no shared cache line but the VMA's lock.
    /// When that fails it falls back to `mmap_lock`, as Linux does.
    ///
    /// ```
    /// use mm::{Access, FaultError, FaultPath, MapFlags, Mm, Prot};
    /// let mm = Mm::default();
    /// let shared = MapFlags::SHARED | MapFlags::ANONYMOUS;
    /// let a = mm.mmap(0, 4096, Prot::READ, shared, None, 0).unwrap();
    /// assert_eq!(mm.fault(a, Access::Read), Ok(FaultPath::VmaLock));
    /// assert_eq!(mm.fault(a, Access::Write), Err(FaultError::Segv));
    /// ```
    pub fn fault(&self, addr: u64, access: Access) -> Result<FaultPath, FaultError> {
        if let Some(h) = &self.lockless {
            let mut reader = h.sharing.begin_read();
            if let Reader::Unadmitted = reader {
                // This thread's first lockless fault: become a lockless
                // reader under mmap_lock, so that no in-place write is
                // under way and later writers switch to RCU writes.
                let _st = self.state.read();
                h.sharing.admit();
                reader = h.sharing.begin_read();
            }
            // The claimant alone reads with no grace period (see the
            // `sharing` module); any other reader pins one.
            let pinned;
            let guard = if let Reader::Alone(_) = reader {
                // SAFETY: while `reader` lives, no other thread writes the
                // tree (a writer other than this thread first makes it
                // shared, waiting for this read to end), and this thread
                // is reading, not writing: nothing reachable is retired.
                unsafe { maple::unprotected() }
            } else {
                pinned = maple::pin();
                &pinned
            };
            if let Some(served) = lockless_fault(h, guard, addr, access) {
                return served;
            }
            // The lockless read is over before the fallback takes
            // `mmap_lock`, which a writer waiting for it may hold.
            drop(reader);
        }
        self.fault_locked(addr, access)
    }

    /// [`fault`](Mm::fault) inside a grace period the caller already
    /// holds: the lockless lookup then costs no pin and no handshake, as
    /// the kernel's `rcu_read_lock` costs nothing on a kernel that does
    /// not preempt.
    ///
    /// This is quiescent-state-based reclamation: a thread that faults
    /// often (a vCPU, a benchmark worker) holds one [`Guard`](maple::Guard)
    /// across many faults and announces a quiescent state between them
    /// with [`Guard::repin`](maple::Guard::repin), and now and then
    /// [`Guard::flush`](maple::Guard::flush) so that what writers retired
    /// is freed. Until it does, nothing retired after its last repin is
    /// freed: the guard delays reclamation, never correctness, and no
    /// call of this crate waits for a grace period, so holding it across
    /// other calls (`mmap`, `munmap`, the `mmap_lock` fallback) cannot
    /// deadlock. The guard is the tree's own type, which only
    /// [`maple::pin`] makes, so it always protects the tree.
    ///
    /// ```
    /// use mm::{Access, FaultPath, MapFlags, Mm, Prot};
    /// let mm = Mm::default();
    /// let shared = MapFlags::SHARED | MapFlags::ANONYMOUS;
    /// let a = mm.mmap(0, 16 << 12, Prot::READ, shared, None, 0).unwrap();
    /// let mut guard = maple::pin();
    /// for page in 0..16 {
    ///     assert_eq!(mm.fault_in(&guard, a + page * 4096, Access::Read), Ok(FaultPath::VmaLock));
    ///     guard.repin(); // a quiescent state: nothing read above is in use
    /// }
    /// ```
    pub fn fault_in(
        &self,
        guard: &maple::Guard,
        addr: u64,
        access: Access,
    ) -> Result<FaultPath, FaultError> {
        if let Some(h) = &self.lockless {
            if !h.sharing.admitted() {
                // As in `fault`: become a lockless reader under mmap_lock.
                let _st = self.state.read();
                h.sharing.admit();
            }
            // Admitted, this thread's reads are safe under any grace
            // period: only this thread writes in place while it is the
            // claimant (and it is reading now, not writing), and every
            // other write is an RCU write, which retires through the
            // epoch that `guard` holds back.
            if let Some(served) = lockless_fault(h, guard, addr, access) {
                return served;
            }
        }
        self.fault_locked(addr, access)
    }

    #[inline]
    fn fault_locked(&self, addr: u64, access: Access) -> Result<FaultPath, FaultError> {
        {
            let st = self.state.read();
            match st.index.find_next(addr) {
                Some(v) if v.start() <= addr => return st.finish_fault(&v, addr, access),
                Some(v) if v.flags().contains(VmFlags::GROWSDOWN) => {}
                _ => return Err(FaultError::Segv),
            }
        }
        // Growing a stack changes the map: take mmap_lock for write and
        // look again, as the map may have changed in between.
        let mut st = self.state.write();
        let vma = match st.index.find_next(addr) {
            Some(v) if v.start() <= addr => v,
            Some(v) if v.flags().contains(VmFlags::GROWSDOWN) => st.expand_stack(self, &v, addr)?,
            _ => return Err(FaultError::Segv),
        };
        st.finish_fault(&vma, addr, access)
    }
}

impl State {
    #[inline]
    fn finish_fault(&self, vma: &Vma, addr: u64, access: Access) -> Result<FaultPath, FaultError> {
        // A guard marker fails the fault before anything is prepared.
        // Markers lie only in VMAs flagged VM_MAYBE_GUARD (installing sets
        // it on the whole VMA and nothing clears it), so every other
        // fault skips the lookup.
        if vma.flags().contains(VmFlags::MAYBE_GUARD) && self.guarded(addr) {
            return Err(FaultError::Segv);
        }
        match check(vma, addr, access) {
            Verdict::Ok => Ok(FaultPath::MmapLock),
            Verdict::Fail(e) => Err(e),
            Verdict::NeedsAnon => {
                self.anon_prepare(vma);
                match check_eof(vma, addr) {
                    Verdict::Fail(e) => Err(e),
                    _ => Ok(FaultPath::MmapLock),
                }
            }
        }
    }

    /// Whether a guard marker covers the page of `addr`: out of line, as
    /// only VMAs that ever had a marker come here.
    #[cold]
    #[inline(never)]
    fn guarded(&self, addr: u64) -> bool {
        self.guards.first_in(addr, addr.saturating_add(1)).is_some()
    }

    /// `expand_downwards`: grow the grows-down `vma` to cover `addr`.
    fn expand_stack(&mut self, mm: &Mm, vma: &Arc<Vma>, addr: u64) -> Result<Arc<Vma>, FaultError> {
        let layout = &mm.layout;
        let addr = addr & !(PAGE_SIZE - 1);
        if addr < layout.mmap_min_addr {
            return Err(FaultError::Segv);
        }
        if let Some(prev) = self.index.find_prev(vma.start()) {
            if !prev.flags().contains(VmFlags::GROWSDOWN)
                && prev.flags().intersects(VmFlags::ACCESS)
                && addr - prev.end() < layout.stack_guard_gap
            {
                return Err(FaultError::Segv);
            }
        }
        self.anon_prepare(vma);
        let grow = (vma.start() - addr) >> PAGE_SHIFT;
        let size = vma.end() - addr;
        if grow > vma.pgoff() || size > layout.stack_rlimit {
            return Err(FaultError::Segv);
        }
        let grown = Vma::new(
            addr,
            vma.end(),
            vma.flags(),
            vma.pgoff() - grow,
            vma.file().cloned(),
            vma.anon().cloned(),
        );
        Ok(self.commit(&[Arc::clone(vma)], vec![grown]).remove(0))
    }
}
