//! The workloads and what one worker does for each: will-it-scale's,
//! `execl` (the program model is in [`super::execl`]), `aim7-brk` and
//! `kernbench`.
//!
//! Each workload is a loop of [`Job::step`] calls; a step returns how many
//! operations it completed, in will-it-scale's unit for that workload
//! (one exec for `execl`, one grow plus shrink for `aim7-brk`, one compile
//! job for `kernbench`).
//!
//! `kernbench` models the process churn of a parallel kernel build
//! (`make -jN`): each worker is a `make` whose long-lived address space
//! holds a resident map and a written heap, and one op is one compile job
//! forked from it. The job's child execs the compiler (the dynamically
//! linked program of [`super::execl`], so every job of every worker maps
//! the same executable, ld.so and libc), then does a compiler's memory
//! work: it maps and reads its source file, maps heap arenas and writes
//! part of each, grows its `brk` heap and writes it, frees every other
//! arena, writes its object file through a shared mapping, unmaps the
//! files, trims the heap and exits with the rest still mapped, which
//! `exit_mmap` tears down. The source and object files are one pair per
//! worker, shared by all its jobs. A job makes about 300 page faults
//! besides those of its exec. The compiler is modelled by the small
//! executable `execl` runs: its text size changes no call the job makes,
//! only the file offsets of its mappings.
//! Every system call's result is checked: a failed `mmap`, `munmap`, `brk`
//! or fault is a bug in the model, so the worker stops with an error that
//! names the call instead of counting it.

use std::fmt;
use std::sync::Arc;

use mm::{Access, File, FileMode, MapFlags, Mm, Prot, PAGE_SIZE};

use super::execl::{Process, Program};

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
    /// Exec a dynamically linked program into a fresh address space, over
    /// and over; all workers map the same executable and libraries. One
    /// op is one exec. Processes mode only.
    Execl,
    /// AIM7's brk test: tasks forked from one parent (which stays alive,
    /// so they share its anon_vmas) grow their heap by a page, write it,
    /// and shrink it back: an end-only adjustment of the heap VMA each
    /// task made with its first allocation (an inherited VMA cannot grow
    /// in place). One op is one grow plus one shrink. Processes mode only.
    Aim7Brk,
    /// A parallel kernel build's process churn: each worker forks compile
    /// jobs from a long-lived `make` address space; a job execs the
    /// compiler, maps, faults and unmaps its arenas, heap, source and
    /// object file, and exits. One op is one job. Processes mode only.
    Kernbench,
}

impl Workload {
    /// Every workload, in report order.
    pub const ALL: [Workload; 8] = [
        Workload::Brk1,
        Workload::Mmap1,
        Workload::Malloc1,
        Workload::Mmap2,
        Workload::PageFault3,
        Workload::Execl,
        Workload::Aim7Brk,
        Workload::Kernbench,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Brk1 => "brk1",
            Workload::Mmap1 => "mmap1",
            Workload::Malloc1 => "malloc1",
            Workload::Mmap2 => "mmap2",
            Workload::PageFault3 => "page_fault3",
            Workload::Execl => "execl",
            Workload::Aim7Brk => "aim7-brk",
            Workload::Kernbench => "kernbench",
        }
    }

    /// Why the workload has no threads mode, if it has none.
    pub fn processes_only(self) -> Option<&'static str> {
        match self {
            Workload::Execl => Some("exec replaces the whole address space"),
            Workload::Aim7Brk => Some("its tasks are forked processes"),
            Workload::Kernbench => Some("its compile jobs are forked processes that exec"),
            _ => None,
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One worker's state for one workload.
pub struct Job<'a> {
    workload: Workload,
    /// Names the worker in error messages.
    who: String,
    target: Target<'a>,
}

/// What a worker works on.
// One per worker, so its size does not matter; boxing the exec'd process
// (whose address space is cache-line aligned) would cost an allocation per
// exec instead.
#[allow(clippy::large_enum_variant)]
enum Target<'a> {
    /// System calls on an address space that outlives the job.
    Space(Space<'a>),
    /// `execl`: processes the job execs, one after the other.
    Exec {
        program: &'a Program,
        /// The process the last exec built, replaced by the next one.
        current: Option<Process>,
    },
    /// `kernbench`: compile jobs forked from one parent.
    Build(Build<'a>),
}

/// Pages of the source file a compile job maps and reads (256 KiB: a
/// preprocessed kernel source file is a few hundred KiB).
const SOURCE_PAGES: u64 = 64;

/// Pages of the object file a compile job writes.
const OUTPUT_PAGES: u64 = 16;

/// Heap arenas a compile job maps (GCC's garbage-collected heap takes
/// memory from `mmap` in 1 MiB chunks).
const ARENAS: u64 = 4;

/// Size of one arena.
const ARENA_SIZE: u64 = 1 << 20;

/// Pages written in each arena: the compiler touches part of each chunk
/// before collecting.
const ARENA_PAGES_WRITTEN: u64 = 48;

/// Pages `malloc` adds to the heap with `brk`, and writes.
const BRK_PAGES: u64 = 32;

/// Pages of that growth `malloc_trim` gives back before exit.
const BRK_TRIM_PAGES: u64 = 16;

/// `kernbench`: a worker's `make` and what its compile jobs share.
struct Build<'a> {
    /// The long-lived parent every job is forked from.
    parent: &'a Mm,
    /// The compiler every job execs.
    program: &'a Program,
    /// The source file every job of this worker compiles (read-only).
    source: Arc<File>,
    /// The object file every job of this worker writes.
    output: Arc<File>,
}

/// The state of a worker that makes calls on one address space.
struct Space<'a> {
    mm: &'a Mm,
    /// The break the `brk` workloads grow from and shrink back to.
    heap: u64,
    /// The worker's own file (`mmap2`, `page_fault3`): will-it-scale opens
    /// a temporary file per task, so workers share no file.
    file: Option<Arc<File>>,
    /// `page_fault3`: the current mapping, if one is mapped.
    mapped: Option<u64>,
    /// `page_fault3`: the next page of `mapped` to fault.
    next_page: u64,
    /// The calls of the operation under way made so far (0 between
    /// operations): see [`Space::call`].
    made: u8,
    /// `mmap1`, `malloc1`, `mmap2`: the mapping the operation under way
    /// made, until its `munmap`.
    pending: Option<u64>,
}

impl<'a> Job<'a> {
    /// A job for worker `id` of `workload` on `mm`, whose break is at
    /// `heap` (where the `brk` workloads start). For `execl`, see
    /// [`Job::exec`].
    pub fn new(mm: &'a Mm, workload: Workload, id: usize, heap: u64) -> Job<'a> {
        let file = matches!(workload, Workload::Mmap2 | Workload::PageFault3)
            .then(|| File::new(format!("/tmp/willitscale.{id}"), MEMSIZE));
        Job {
            workload,
            who: format!("{workload} worker {id}"),
            target: Target::Space(Space {
                mm,
                heap,
                file,
                mapped: None,
                next_page: 0,
                made: 0,
                pending: None,
            }),
        }
    }

    /// A `kernbench` job for worker `id`: compile jobs forked from
    /// `parent`, each execing `program`; the worker's source and object
    /// files are opened under the parent's policy.
    pub fn kernbench(parent: &'a Mm, program: &'a Program, id: usize) -> Job<'a> {
        let policy = parent.policy();
        let read_only = FileMode {
            write: false,
            ..FileMode::default()
        };
        let source = policy.file_with_mode(
            format!("/tmp/kernbench.{id}/main.i"),
            SOURCE_PAGES * PAGE_SIZE,
            read_only,
        );
        let output = policy.file_with_mode(
            format!("/tmp/kernbench.{id}/main.o"),
            OUTPUT_PAGES * PAGE_SIZE,
            FileMode::default(),
        );
        Job {
            workload: Workload::Kernbench,
            who: format!("{} worker {id}", Workload::Kernbench),
            target: Target::Build(Build {
                parent,
                program,
                source,
                output,
            }),
        }
    }

    /// An `execl` job for worker `id`, running `program`.
    pub fn exec(program: &'a Program, id: usize) -> Job<'a> {
        Job {
            workload: Workload::Execl,
            who: format!("{} worker {id}", Workload::Execl),
            target: Target::Exec {
                program,
                current: None,
            },
        }
    }

    /// Does the next unit of work and returns how many operations it
    /// completed (0 when it only mapped `page_fault3`'s next region).
    /// Pins a grace period for the step; a loop of steps uses
    /// [`step_in`](Job::step_in) instead.
    pub fn step(&mut self) -> Result<u64, String> {
        self.step_in(&maple::pin())
    }

    /// [`step`](Job::step) inside the caller's grace period: the step's
    /// page faults read the VMA tree with neither pin nor handshake
    /// ([`Mm::fault_in`]), as the kernel's faults take an RCU read lock
    /// that costs nothing. The caller announces a quiescent state between
    /// steps (the harness repins and collects every 1024 steps).
    pub fn step_in(&mut self, guard: &maple::Guard) -> Result<u64, String> {
        let who = &self.who;
        match &mut self.target {
            Target::Exec { program, current } => {
                let next = program
                    .exec(current.take())
                    .map_err(|e| format!("{who}: {e}"))?;
                *current = Some(next);
                Ok(1)
            }
            Target::Build(build) => {
                build
                    .compile(guard)
                    .map_err(|e| format!("{who}: {e}"))?
                    .exit();
                Ok(1)
            }
            Target::Space(space) => space.step(self.workload, who, guard),
        }
    }

    /// Makes the next system call of the operation under way (a `brk`,
    /// an `mmap`, a write fault, a `munmap`) and returns how many
    /// operations it completed: 0 before an operation's last call. A
    /// [`step_in`](Job::step_in) makes an operation's calls in a row; this
    /// makes them one at a time, so that the profile recorder can let two
    /// workers of one address space take turns call by call, as their
    /// calls interleave when they run at once. Jobs that run processes of
    /// their own (`execl`, `kernbench`) make a whole operation per call.
    pub fn call_in(&mut self, guard: &maple::Guard) -> Result<u64, String> {
        match &mut self.target {
            Target::Space(space) => space.call(self.workload, &self.who, guard),
            _ => self.step_in(guard),
        }
    }

    /// Undoes what a stopped step sequence left behind: unmaps
    /// `page_fault3`'s region, ends `execl`'s last process. (A
    /// `kernbench` job ends within its step.)
    pub fn finish(&mut self) -> Result<(), String> {
        match &mut self.target {
            Target::Exec { current, .. } => {
                if let Some(p) = current.take() {
                    p.exit();
                }
                Ok(())
            }
            Target::Build(_) => Ok(()),
            Target::Space(space) => {
                // An operation left between its calls: undo what it did.
                if let Some(a) = space.pending.take() {
                    space.unmap(a, &self.who)?;
                }
                if std::mem::take(&mut space.made) > 0
                    && matches!(self.workload, Workload::Brk1 | Workload::Aim7Brk)
                {
                    space.mm.brk(space.heap);
                }
                match space.mapped.take() {
                    Some(a) => space.unmap(a, &self.who),
                    None => Ok(()),
                }
            }
        }
    }
}

impl Build<'_> {
    /// One compile job up to its exit: forks the parent, execs the
    /// compiler in the child and does the compiler's memory work. Returns
    /// the process, still holding the arenas and heap it did not free, for
    /// the caller to end. Errors name the call that failed.
    fn compile(&self, guard: &maple::Guard) -> Result<Process, String> {
        let child = self.parent.fork();
        let process = self.program.exec_forked(child)?;
        // A failure below drops the process, which tears it down as the
        // kernel does when a process dies.
        let mm = process.mm();
        let source_len = SOURCE_PAGES * PAGE_SIZE;
        let source = mm
            .mmap(
                0,
                source_len,
                Prot::READ,
                MapFlags::PRIVATE,
                Some(&self.source),
                0,
            )
            .map_err(|e| format!("mmap of the source failed: {e}"))?;
        touch(mm, guard, source, SOURCE_PAGES, Access::Read, "the source")?;
        let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
        let mut arenas = Vec::with_capacity(ARENAS as usize);
        for _ in 0..ARENAS {
            let arena = mm
                .mmap(0, ARENA_SIZE, Prot::READ | Prot::WRITE, anon, None, 0)
                .map_err(|e| format!("mmap of a heap arena failed: {e}"))?;
            touch(
                mm,
                guard,
                arena,
                ARENA_PAGES_WRITTEN,
                Access::Write,
                "a heap arena",
            )?;
            arenas.push(arena);
        }
        let old_top = mm.brk(0);
        let top = old_top + BRK_PAGES * PAGE_SIZE;
        let grown = mm.brk(top);
        if grown != top {
            return Err(format!("brk grow to {top:#x} refused (break {grown:#x})"));
        }
        touch(mm, guard, old_top, BRK_PAGES, Access::Write, "the heap")?;
        // The collector frees every other arena; the rest stay mapped
        // until exit.
        for &arena in arenas.iter().step_by(2) {
            mm.munmap(arena, ARENA_SIZE)
                .map_err(|e| format!("munmap of a heap arena at {arena:#x} failed: {e}"))?;
        }
        let output_len = OUTPUT_PAGES * PAGE_SIZE;
        let output = mm
            .mmap(
                0,
                output_len,
                Prot::READ | Prot::WRITE,
                MapFlags::SHARED,
                Some(&self.output),
                0,
            )
            .map_err(|e| format!("mmap of the object file failed: {e}"))?;
        touch(
            mm,
            guard,
            output,
            OUTPUT_PAGES,
            Access::Write,
            "the object file",
        )?;
        mm.munmap(output, output_len)
            .map_err(|e| format!("munmap of the object file failed: {e}"))?;
        mm.munmap(source, source_len)
            .map_err(|e| format!("munmap of the source failed: {e}"))?;
        let trimmed = top - BRK_TRIM_PAGES * PAGE_SIZE;
        let shrunk = mm.brk(trimmed);
        if shrunk != trimmed {
            return Err(format!(
                "brk shrink to {trimmed:#x} refused (break {shrunk:#x})"
            ));
        }
        Ok(process)
    }
}

/// Faults `pages` consecutive pages from `addr` with `access`.
fn touch(
    mm: &Mm,
    guard: &maple::Guard,
    addr: u64,
    pages: u64,
    access: Access,
    what: &str,
) -> Result<(), String> {
    let kind = match access {
        Access::Read => "read",
        Access::Write => "write",
        Access::Exec => "exec",
    };
    for page in 0..pages {
        let at = addr + page * PAGE_SIZE;
        mm.fault_in(guard, at, access)
            .map_err(|e| format!("{kind} fault on {what} at {at:#x} failed: {e}"))?;
    }
    Ok(())
}

impl Space<'_> {
    /// One operation: its calls in a row.
    fn step(&mut self, workload: Workload, who: &str, guard: &maple::Guard) -> Result<u64, String> {
        loop {
            let done = self.call(workload, who, guard)?;
            if self.made == 0 {
                return Ok(done);
            }
        }
    }

    /// The next call of the operation under way (see [`Job::call_in`]);
    /// [`made`](Space::made) counts the calls made and is back at 0 once
    /// the operation's last call is made. A failed call leaves it where it
    /// was.
    fn call(&mut self, workload: Workload, who: &str, guard: &maple::Guard) -> Result<u64, String> {
        let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
        let rw = Prot::READ | Prot::WRITE;
        let last = match (workload, self.made) {
            (Workload::Brk1 | Workload::Aim7Brk, 0) => {
                // Every worker of a threads-mode brk1 run moves the one
                // shared break between the same two values, as
                // will-it-scale's threads do; both calls succeed whatever
                // the interleaving (a worker's call may find the break
                // where it asks for it: a call that changes nothing).
                let top = self.heap + PAGE_SIZE;
                let grown = self.mm.brk(top);
                if grown != top {
                    return Err(format!("{who}: brk grow refused (break {grown:#x})"));
                }
                false
            }
            (Workload::Aim7Brk, 1) => {
                self.fault(self.heap, who, guard)?;
                false
            }
            (Workload::Brk1 | Workload::Aim7Brk, _) => {
                let shrunk = self.mm.brk(self.heap);
                if shrunk != self.heap {
                    return Err(format!("{who}: brk shrink refused (break {shrunk:#x})"));
                }
                true
            }
            (Workload::Mmap1 | Workload::Malloc1 | Workload::Mmap2, 0) => {
                let flags = if workload == Workload::Mmap2 {
                    MapFlags::PRIVATE
                } else {
                    anon
                };
                self.pending = Some(self.map(rw, flags, who)?);
                false
            }
            (Workload::Malloc1, 1) => {
                // glibc writes the chunk's header: one write fault.
                let a = self
                    .pending
                    .ok_or_else(|| format!("{who}: no mapping to fault"))?;
                self.fault(a, who, guard)?;
                false
            }
            (Workload::Mmap1 | Workload::Malloc1 | Workload::Mmap2, _) => {
                let a = self
                    .pending
                    .ok_or_else(|| format!("{who}: no mapping to unmap"))?;
                self.unmap(a, who)?;
                self.pending = None;
                true
            }
            (Workload::PageFault3, _) => {
                // Every step is one call: a mapping, or one page's fault
                // (with the unmap after the last).
                return self.page_fault3(who, guard);
            }
            (Workload::Execl | Workload::Kernbench, _) => {
                return Err(format!(
                    "{who}: {workload} runs processes of its own, not calls on one address space"
                ))
            }
        };
        if last {
            self.made = 0;
            Ok(1)
        } else {
            self.made += 1;
            Ok(0)
        }
    }

    fn page_fault3(&mut self, who: &str, guard: &maple::Guard) -> Result<u64, String> {
        let Some(a) = self.mapped else {
            let shared = MapFlags::SHARED;
            self.mapped = Some(self.map(Prot::READ | Prot::WRITE, shared, who)?);
            self.next_page = 0;
            return Ok(0);
        };
        self.fault(a + self.next_page * PAGE_SIZE, who, guard)?;
        self.next_page += 1;
        if self.next_page == MEMSIZE / PAGE_SIZE {
            self.mapped = None;
            self.unmap(a, who)?;
        }
        Ok(1)
    }

    fn map(&self, prot: Prot, flags: MapFlags, who: &str) -> Result<u64, String> {
        self.mm
            .mmap(0, MEMSIZE, prot, flags, self.file.as_ref(), 0)
            .map_err(|e| format!("{who}: mmap of 128 MiB failed: {e}"))
    }

    fn unmap(&self, addr: u64, who: &str) -> Result<(), String> {
        self.mm
            .munmap(addr, MEMSIZE)
            .map_err(|e| format!("{who}: munmap at {addr:#x} failed: {e}"))
    }

    fn fault(&self, addr: u64, who: &str, guard: &maple::Guard) -> Result<(), String> {
        self.mm
            .fault_in(guard, addr, Access::Write)
            .map(drop)
            .map_err(|e| format!("{who}: write fault at {addr:#x} failed: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_workload_leaves_the_map_as_it_found_it() {
        let own_processes = [Workload::Execl, Workload::Kernbench];
        for w in Workload::ALL
            .into_iter()
            .filter(|w| !own_processes.contains(w))
        {
            let mm = Mm::default();
            mm.set_brk_base(HEAP_BASE);
            let mut job = Job::new(&mm, w, 0, HEAP_BASE);
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
    fn calls_make_an_operation_one_call_at_a_time() {
        let guard = maple::pin();
        for (w, calls) in [
            (Workload::Brk1, 2),
            (Workload::Aim7Brk, 3),
            (Workload::Mmap1, 2),
            (Workload::Malloc1, 3),
            (Workload::Mmap2, 2),
        ] {
            let mm = Mm::default();
            mm.set_brk_base(HEAP_BASE);
            let mut job = Job::new(&mm, w, 0, HEAP_BASE);
            for _ in 0..3 {
                let made: Vec<u64> = (0..calls).map(|_| job.call_in(&guard).unwrap()).collect();
                let mut want = vec![0; calls - 1];
                want.push(1);
                assert_eq!(made, want, "{w}");
                assert_eq!(mm.map_count(), 0, "{w}");
                assert_eq!(mm.brk_value(), HEAP_BASE, "{w}");
            }
            // Stopped after its first call, the job undoes it.
            assert_eq!(job.call_in(&guard), Ok(0));
            assert!(mm.map_count() > 0 || mm.brk_value() > HEAP_BASE, "{w}");
            job.finish().unwrap();
            assert_eq!(mm.map_count(), 0, "{w}");
            assert_eq!(mm.brk_value(), HEAP_BASE, "{w}");
        }
    }

    #[test]
    fn two_workers_taking_turns_merge_their_mappings() {
        let guard = maple::pin();
        let mm = Mm::default();
        let mut a = Job::new(&mm, Workload::Mmap1, 0, HEAP_BASE);
        let mut b = Job::new(&mm, Workload::Mmap1, 1, HEAP_BASE);
        a.call_in(&guard).unwrap();
        b.call_in(&guard).unwrap();
        // Two neighbouring anonymous mappings: one VMA, as in the kernel.
        assert_eq!(mm.map_count(), 1);
        assert_eq!(a.call_in(&guard), Ok(1));
        assert_eq!(mm.map_count(), 1);
        assert_eq!(b.call_in(&guard), Ok(1));
        assert_eq!(mm.map_count(), 0);
    }

    #[test]
    fn page_fault3_counts_one_op_per_page() {
        let mm = Mm::default();
        let mut job = Job::new(&mm, Workload::PageFault3, 0, HEAP_BASE);
        let pages = MEMSIZE / PAGE_SIZE;
        // One mapping step, then one step per page; the last one unmaps.
        let ops: u64 = (0..=pages).map(|_| job.step().unwrap()).sum();
        assert_eq!(ops, pages);
        assert_eq!(mm.map_count(), 0);
    }

    #[test]
    fn execl_on_an_address_space_is_an_error_not_a_panic() {
        let mm = Mm::default();
        let mut job = Job::new(&mm, Workload::Execl, 3, HEAP_BASE);
        let err = job.step().unwrap_err();
        assert!(err.contains("execl worker 3"), "{err}");
        assert_eq!(mm.map_count(), 0);
    }

    #[test]
    fn execl_job_replaces_its_process_each_step() {
        use super::super::execl::Program;
        let program = Program::new(mm::IndexKind::Maple);
        let mut job = Job::exec(&program, 0);
        for _ in 0..3 {
            assert_eq!(job.step().unwrap(), 1);
        }
        // One live process: the others were torn down by the next exec.
        let Target::Exec { current, .. } = &job.target else {
            panic!("not an exec job");
        };
        let p = current.as_ref().unwrap();
        assert_eq!(program.libc_vmas(p.mm()), 5);
        job.finish().unwrap();
        let Target::Exec { current, .. } = &job.target else {
            panic!("not an exec job");
        };
        assert!(current.is_none());
    }

    /// `make`: a resident map and a written heap.
    fn make_parent(index: mm::IndexKind) -> Mm {
        let parent = Arc::new(mm::Policy {
            index,
            ..mm::Policy::default()
        })
        .mm();
        super::super::resident::populate(&parent, 40).unwrap();
        parent.set_brk_base(HEAP_BASE);
        let top = HEAP_BASE + 4 * PAGE_SIZE;
        assert_eq!(parent.brk(top), top);
        parent.fault(HEAP_BASE, Access::Write).unwrap();
        parent
    }

    /// How many VMAs each file's reverse map holds.
    fn file_counts(files: &[&Arc<File>]) -> Vec<usize> {
        files.iter().map(|f| f.imap().count()).collect()
    }

    #[test]
    fn kernbench_job_leaves_the_parent_and_the_shared_files_as_it_found_them() {
        use super::super::execl::{count_vmas_of, VMAS_PER_OBJECT};
        for index in mm::IndexKind::ALL {
            let program = Program::new(index);
            let parent = make_parent(index);
            let mut job = Job::kernbench(&parent, &program, 2);
            let (source, output) = match &job.target {
                Target::Build(b) => (Arc::clone(&b.source), Arc::clone(&b.output)),
                _ => panic!("not a build job"),
            };
            let maps = parent.proc_maps();
            let mut parent_files: Vec<Arc<File>> = Vec::new();
            for v in parent.vmas() {
                if let Some(f) = v.file() {
                    if !parent_files.iter().any(|g| Arc::ptr_eq(f, g)) {
                        parent_files.push(Arc::clone(f));
                    }
                }
            }
            assert!(!parent_files.is_empty());
            let shared = [
                program.exe(),
                program.ld_so(),
                program.ld_so_cache(),
                program.libc(),
                &source,
                &output,
            ];
            let resident = file_counts(&shared);
            let parents = file_counts(&parent_files.iter().collect::<Vec<_>>());

            // Just before the exit: the child runs the compiler, not a
            // copy of make, and holds what the job did not free.
            let Target::Build(b) = &job.target else {
                panic!("not a build job");
            };
            let p = b.compile(&maple::pin()).unwrap();
            let mm = p.mm();
            mm.validate().unwrap();
            for f in &parent_files {
                assert_eq!(count_vmas_of(mm, f), 0, "{index}");
            }
            assert_eq!(program.libc_vmas(mm), VMAS_PER_OBJECT, "{index}");
            assert_eq!(count_vmas_of(mm, &source), 0, "{index}");
            assert_eq!(count_vmas_of(mm, &output), 0, "{index}");
            // Two arenas freed, two kept (separate VMAs: a freed one lies
            // between them), each with the anon_vma its writes gave it.
            let kept: Vec<_> = mm
                .vmas()
                .into_iter()
                .filter(|v| v.file().is_none() && v.end() - v.start() == ARENA_SIZE)
                .collect();
            assert_eq!(kept.len(), 2, "{index}: {}", mm.proc_maps());
            assert!(kept.iter().all(|v| v.anon().is_some()), "{index}");
            // The heap: ld.so's growth plus the job's, less the trim.
            let heap = mm.find_vma(mm.brk_value() - 1).unwrap();
            assert_eq!(heap.end(), mm.brk_value(), "{index}");
            assert_eq!(
                heap.end() - heap.start(),
                0x21000 + (BRK_PAGES - BRK_TRIM_PAGES) * PAGE_SIZE,
                "{index}"
            );
            // The child's executable, ld.so and libc VMAs are in the
            // shared reverse maps; the cache, source and object file
            // were unmapped.
            let mut live = resident.clone();
            for i in [0, 1, 3] {
                live[i] += VMAS_PER_OBJECT;
            }
            assert_eq!(file_counts(&shared), live, "{index}");
            p.exit();
            assert_eq!(file_counts(&shared), resident, "{index}");

            for _ in 0..3 {
                assert_eq!(job.step().unwrap(), 1, "{index}");
            }
            job.finish().unwrap();
            // The parent keeps only its own VMAs, and every file's
            // reverse map is back at its resident level.
            assert_eq!(parent.proc_maps(), maps, "{index}");
            parent.validate().unwrap();
            assert_eq!(file_counts(&shared), resident, "{index}");
            assert_eq!(
                file_counts(&parent_files.iter().collect::<Vec<_>>()),
                parents,
                "{index}"
            );
        }
    }

    #[test]
    fn aim7_brk_moves_only_the_end_of_the_task_heap() {
        let parent = Mm::default();
        parent.set_brk_base(HEAP_BASE);
        let top = HEAP_BASE + 4 * PAGE_SIZE;
        assert_eq!(parent.brk(top), top);
        parent.fault(HEAP_BASE, Access::Write).unwrap();
        let child = parent.fork();
        // The task's first allocation: a heap VMA of its own (see
        // `Fixture::build`).
        assert_eq!(child.brk(top + PAGE_SIZE), top + PAGE_SIZE);
        child.fault(top, Access::Write).unwrap();
        let anon_id = |mm: &Mm| {
            mm.find_vma(top)
                .and_then(|v| v.anon().map(|a| a.anon_vma.id()))
        };
        let before = anon_id(&child);
        assert!(before.is_some());
        let mut job = Job::new(&child, Workload::Aim7Brk, 0, child.brk_value());
        for _ in 0..5 {
            assert_eq!(job.step().unwrap(), 1);
        }
        job.finish().unwrap();
        assert_eq!(child.brk_value(), top + PAGE_SIZE);
        let own = child.find_vma(top).unwrap();
        assert_eq!((own.start(), own.end()), (top, top + PAGE_SIZE));
        // Grown and shrunk in place: still the anon_vma its first fault
        // gave it, and no VMA left over.
        assert_eq!(anon_id(&child), before);
        assert_eq!(child.map_count(), 2);
    }
}
