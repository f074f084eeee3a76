//! The will-it-scale workloads and what one worker does for each.
//!
//! Each workload is a loop of [`Job::step`] calls; a step returns how many
//! operations it completed, in will-it-scale's unit for that workload.
//! Every system call's result is checked: a failed `mmap`, `munmap`, `brk`
//! or fault is a bug in the model, so the worker stops with an error that
//! names the call instead of counting it.

use std::fmt;
use std::sync::Arc;

use mm::{Access, File, MapFlags, Mm, Prot, PAGE_SIZE};

/// Size of the mappings of `mmap1`, `malloc1`, `mmap2` and `page_fault3`
/// (will-it-scale's `MEMSIZE`).
pub const MEMSIZE: u64 = 128 << 20;

/// Where the heap starts in every address space (the end of a typical
/// non-PIE-randomised executable's data), far below the mmap area.
pub const HEAP_BASE: u64 = 0x5555_5555_8000;

/// A will-it-scale workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Workload {
    /// Grow the heap by one page with `brk`, then shrink it back. One op
    /// is one grow plus one shrink (will-it-scale counts each `brk` call,
    /// i.e. twice as many).
    Brk1,
    /// `mmap` 128 MiB of private anonymous memory and `munmap` it.
    Mmap1,
    /// `malloc` and `free` of 128 MiB: glibc serves that with `mmap` and
    /// `munmap`, and touching the block faults its first page. Modelled as
    /// private anonymous `mmap`, one write fault on the first page (which
    /// gives the VMA its anon_vma), `munmap`.
    Malloc1,
    /// `mmap` of a 128 MiB file, private and writable, then `munmap`.
    Mmap2,
    /// Shared writable mapping of a 128 MiB file, a write fault on every
    /// page, `munmap`. One op is one page fault, as will-it-scale counts.
    PageFault3,
}

impl Workload {
    /// Every workload, in report order.
    pub const ALL: [Workload; 5] = [
        Workload::Brk1,
        Workload::Mmap1,
        Workload::Malloc1,
        Workload::Mmap2,
        Workload::PageFault3,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Brk1 => "brk1",
            Workload::Mmap1 => "mmap1",
            Workload::Malloc1 => "malloc1",
            Workload::Mmap2 => "mmap2",
            Workload::PageFault3 => "page_fault3",
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One worker's state for one workload on one address space.
pub struct Job<'a> {
    mm: &'a Mm,
    workload: Workload,
    /// The worker's own file (`mmap2`, `page_fault3`): will-it-scale opens
    /// a temporary file per task, so workers share no file.
    file: Option<Arc<File>>,
    /// `page_fault3`: the current mapping, if one is mapped.
    mapped: Option<u64>,
    /// `page_fault3`: the next page of `mapped` to fault.
    next_page: u64,
    /// Names the worker in error messages.
    who: String,
}

impl<'a> Job<'a> {
    /// A job for worker `id` of `workload` on `mm`.
    pub fn new(mm: &'a Mm, workload: Workload, id: usize) -> Job<'a> {
        let file = matches!(workload, Workload::Mmap2 | Workload::PageFault3)
            .then(|| File::new(format!("/tmp/willitscale.{id}"), MEMSIZE));
        Job {
            mm,
            workload,
            file,
            mapped: None,
            next_page: 0,
            who: format!("{workload} worker {id}"),
        }
    }

    /// Does the next unit of work and returns how many operations it
    /// completed (0 when it only mapped `page_fault3`'s next region).
    pub fn step(&mut self) -> Result<u64, String> {
        match self.workload {
            Workload::Brk1 => {
                // Every worker of a threads-mode run moves the one shared
                // break between the same two values, as will-it-scale's
                // threads do; both calls succeed whatever the interleaving.
                let grown = self.mm.brk(HEAP_BASE + PAGE_SIZE);
                if grown != HEAP_BASE + PAGE_SIZE {
                    return Err(format!("{}: brk grow refused (break {grown:#x})", self.who));
                }
                let shrunk = self.mm.brk(HEAP_BASE);
                if shrunk != HEAP_BASE {
                    return Err(format!(
                        "{}: brk shrink refused (break {shrunk:#x})",
                        self.who
                    ));
                }
                Ok(1)
            }
            Workload::Mmap1 => {
                let a = self.map(
                    Prot::READ | Prot::WRITE,
                    MapFlags::PRIVATE | MapFlags::ANONYMOUS,
                )?;
                self.unmap(a)?;
                Ok(1)
            }
            Workload::Malloc1 => {
                let a = self.map(
                    Prot::READ | Prot::WRITE,
                    MapFlags::PRIVATE | MapFlags::ANONYMOUS,
                )?;
                self.fault(a)?;
                self.unmap(a)?;
                Ok(1)
            }
            Workload::Mmap2 => {
                let a = self.map(Prot::READ | Prot::WRITE, MapFlags::PRIVATE)?;
                self.unmap(a)?;
                Ok(1)
            }
            Workload::PageFault3 => {
                let Some(a) = self.mapped else {
                    self.mapped = Some(self.map(Prot::READ | Prot::WRITE, MapFlags::SHARED)?);
                    self.next_page = 0;
                    return Ok(0);
                };
                self.fault(a + self.next_page * PAGE_SIZE)?;
                self.next_page += 1;
                if self.next_page == MEMSIZE / PAGE_SIZE {
                    self.mapped = None;
                    self.unmap(a)?;
                }
                Ok(1)
            }
        }
    }

    /// Unmaps what a stopped `page_fault3` step sequence left mapped, so
    /// the address space ends as it began.
    pub fn finish(&mut self) -> Result<(), String> {
        match self.mapped.take() {
            Some(a) => self.unmap(a),
            None => Ok(()),
        }
    }

    fn map(&self, prot: Prot, flags: MapFlags) -> Result<u64, String> {
        self.mm
            .mmap(0, MEMSIZE, prot, flags, self.file.as_ref(), 0)
            .map_err(|e| format!("{}: mmap of 128 MiB failed: {e}", self.who))
    }

    fn unmap(&self, addr: u64) -> Result<(), String> {
        self.mm
            .munmap(addr, MEMSIZE)
            .map_err(|e| format!("{}: munmap at {addr:#x} failed: {e}", self.who))
    }

    fn fault(&self, addr: u64) -> Result<(), String> {
        self.mm
            .fault(addr, Access::Write)
            .map(drop)
            .map_err(|e| format!("{}: write fault at {addr:#x} failed: {e}", self.who))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mm::MmConfig;

    #[test]
    fn every_workload_leaves_the_map_as_it_found_it() {
        for w in Workload::ALL {
            let mm = Mm::new(MmConfig::default());
            mm.set_brk_base(HEAP_BASE);
            let mut job = Job::new(&mm, w, 0);
            let mut ops = 0;
            for _ in 0..10 {
                ops += job.step().unwrap();
            }
            job.finish().unwrap();
            assert!(ops > 0, "{w}");
            assert_eq!(mm.map_count(), 0, "{w}");
            assert_eq!(mm.brk_value(), HEAP_BASE, "{w}");
        }
    }

    #[test]
    fn page_fault3_counts_one_op_per_page() {
        let mm = Mm::new(MmConfig::default());
        let mut job = Job::new(&mm, Workload::PageFault3, 0);
        let pages = MEMSIZE / PAGE_SIZE;
        // One mapping step, then one step per page; the last one unmaps.
        let ops: u64 = (0..=pages).map(|_| job.step().unwrap()).sum();
        assert_eq!(ops, pages);
        assert_eq!(mm.map_count(), 0);
    }
}
