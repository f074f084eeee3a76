//! Running one configuration: build its fixture ([`Fixture::build`]),
//! start the workers, warm up, time, and collect operations and lock
//! statistics.
//!
//! Workers and the controlling thread move through the phases together
//! at barriers: set-up, warm-up, a pause, the timed interval, a pause,
//! clean-up. The controller takes its lock-statistics snapshots and clock
//! readings while every worker is parked at a barrier, so the lock counts
//! cover exactly the operations counted, with no warm-up or clean-up call
//! mixed in.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use mm::lockstat::{self, LockStats};
use mm::policy::{ImapDesign, LockKind, Policy, Topology};
use mm::topology;
use mm::{Access, IndexKind, Mm, PAGE_SIZE};

use super::execl::{Process, Program};
use super::resident;
use super::workload::{Job, Workload, HEAP_BASE};

/// Pages of heap the `aim7-brk` parent has, written, before it forks.
pub const AIM7_PARENT_HEAP_PAGES: u64 = 4;

/// Pages of heap each `kernbench` worker's `make` has, written, before it
/// forks its first job: 132 KiB, the `[heap]` of a freshly started
/// dynamically linked program.
pub const KERNBENCH_PARENT_HEAP_PAGES: u64 = 33;

/// How workers share address spaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Every worker has its own `Mm` (will-it-scale's processes).
    Processes,
    /// All workers share one `Mm` (will-it-scale's threads).
    Threads,
}

impl Mode {
    /// Both modes, in report order.
    pub const ALL: [Mode; 2] = [Mode::Processes, Mode::Threads];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Processes => "processes",
            Mode::Threads => "threads",
        }
    }
}

/// The design choices a run compares: every address space and shared
/// file of the run is built with them. The one shape they travel in from
/// the command line to a result (`vmbench run`'s lists make a `Design`
/// per combination; the suite's configurations each name one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Design {
    /// The VMA index of every address space.
    pub index: IndexKind,
    /// The i_mmap design of the files workers share.
    pub imap: ImapDesign,
    /// The lock of every i_mmap and anon_vma lock.
    pub lock: LockKind,
    /// The anon_vma rule: an adjustment that only moves a VMA's end
    /// takes no anon_vma lock.
    pub anon_rule: bool,
}

impl Default for Design {
    /// The kernel's current design: the maple tree, one i_mmap tree under
    /// one rwsem, the anon_vma rule on.
    fn default() -> Design {
        Design {
            index: IndexKind::Maple,
            imap: ImapDesign::default(),
            lock: LockKind::default(),
            anon_rule: true,
        }
    }
}

impl Design {
    /// The model's policy for a run with this design: every address space
    /// and file of the run is made under it, its i_mmap groups taken from
    /// `topology`.
    pub fn policy(&self, topology: &Arc<Topology>) -> Arc<Policy> {
        Arc::new(Policy {
            index: self.index,
            imap: self.imap,
            lock: self.lock,
            anon_rule: self.anon_rule,
            topology: Some(Arc::clone(topology)),
            ..Policy::default()
        })
    }
}

impl std::fmt::Display for Design {
    /// `maple imap=single lock=rwsem anon-rule=on`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} imap={} lock={} anon-rule={}",
            self.index,
            self.imap,
            self.lock,
            crate::run::rule_name(self.anon_rule)
        )
    }
}

/// One configuration to measure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// What each worker does.
    pub workload: Workload,
    /// Whether workers share an address space.
    pub mode: Mode,
    /// The design choices of every address space and file.
    pub design: Design,
    /// Number of workers.
    pub threads: usize,
    /// Resident VMAs mapped into each address space before starting
    /// (for `aim7-brk` and `kernbench`, into the parent the tasks or
    /// compile jobs fork from).
    pub resident: usize,
    /// `execl`: libc file VMAs held by idle processes through the run.
    pub resident_vmas: usize,
    /// The machine the i_mmap groups and the workers' CPUs come from, real
    /// or emulated.
    pub topology: Arc<Topology>,
    /// Pin each worker to its real CPU on the host topology.
    pub pin: bool,
}

impl Spec {
    /// The size of the structure the workload stresses, reported as `n`:
    /// libc's resident VMAs for `execl`, the VMAs resident in each
    /// address space otherwise.
    pub fn population(&self) -> usize {
        match self.workload {
            Workload::Execl => self.resident_vmas,
            _ => self.resident,
        }
    }

    /// The model's policy for the run (see [`Design::policy`]).
    pub fn policy(&self) -> Arc<Policy> {
        self.design.policy(&self.topology)
    }

    /// Whether the run has a placement to hold (see [`crate::placement`]):
    /// several workers, pinned to distinct real CPUs of the host.
    pub fn placed(&self) -> bool {
        let t = &self.topology;
        self.threads >= 2 && self.pin && !t.is_emulated() && t.nr_cpus() >= 2
    }

    /// The (virtual) CPU worker `id` runs as, and whether it is pinned to
    /// the real CPU behind it. On the host's topology worker `i` runs as
    /// CPU `i`, pinned to it unless `pin` is off; on an emulated one the workers are spread over the
    /// nodes first (worker `i` on node `i mod nodes`), so that two workers
    /// are as far apart as the emulated machine allows, and not pinned:
    /// several virtual CPUs share each real one.
    pub fn vcpu(&self, id: usize) -> (usize, bool) {
        let t = &self.topology;
        if !t.is_emulated() {
            return (id % t.nr_cpus().max(1), self.pin);
        }
        let nodes = t.nr_nodes().max(1);
        let per_node = (t.nr_cpus() / nodes).max(1);
        let node = id % nodes;
        (node * per_node + (id / nodes) % per_node, false)
    }
}

/// How long to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Untimed run before the measurement, so that allocator arenas,
    /// caches and the grace-period collector reach a steady state.
    pub warmup: Duration,
    /// The timed interval.
    pub duration: Duration,
}

/// What one configuration achieved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measurement {
    /// Operations completed in the timed interval, summed over workers.
    pub ops: u64,
    /// Length of the timed interval.
    pub elapsed: Duration,
    /// Lock acquisitions and waits during the timed interval.
    pub locks: LockStats,
    /// The workers' scheduler times in the timed interval, summed; `None`
    /// where the kernel does not report them.
    pub cpu: Option<CpuTime>,
}

/// Where the workers' wall time went, from `/proc/thread-self/schedstat`.
///
/// On a shared machine other processes take CPU from the workers; a
/// worker that waits on the run queue does no operations, and its
/// throughput drops without any fault of the code under test. These
/// figures show when a result was disturbed that way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTime {
    /// Nanoseconds the workers ran on a CPU.
    pub on_cpu_ns: u64,
    /// Nanoseconds the workers were runnable but waited for a CPU.
    pub run_delay_ns: u64,
}

impl CpuTime {
    /// This thread's times so far, if the kernel reports them.
    fn now() -> Option<CpuTime> {
        let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
        let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
        Some(CpuTime {
            on_cpu_ns: fields.next()??,
            run_delay_ns: fields.next()??,
        })
    }

    fn since(self, earlier: CpuTime) -> CpuTime {
        CpuTime {
            on_cpu_ns: self.on_cpu_ns.saturating_sub(earlier.on_cpu_ns),
            run_delay_ns: self.run_delay_ns.saturating_sub(earlier.run_delay_ns),
        }
    }
}

impl Measurement {
    /// The fraction of the workers' wall time they spent on a CPU: near
    /// 1 on a quiet machine, lower when other processes competed.
    pub fn cpu_share(&self, threads: usize) -> Option<f64> {
        self.of_wall(threads, |c| c.on_cpu_ns)
    }

    /// The fraction of the workers' wall time they were runnable but
    /// waited for a CPU: near 0 on a quiet machine; the share of the run
    /// that other processes took from them otherwise. Unlike a low
    /// [`cpu_share`](Measurement::cpu_share), which a worker asleep on a
    /// contended lock also shows, this is the machine's doing alone.
    pub fn cpu_wait(&self, threads: usize) -> Option<f64> {
        self.of_wall(threads, |c| c.run_delay_ns)
    }

    /// One of the scheduler's times as a fraction of the `threads`
    /// workers' wall time.
    fn of_wall(&self, threads: usize, ns: impl FnOnce(CpuTime) -> u64) -> Option<f64> {
        let wall = self.elapsed.as_nanos() as f64 * threads as f64;
        self.cpu.filter(|_| wall > 0.0).map(|c| ns(c) as f64 / wall)
    }

    /// Operations per second over all workers.
    pub fn ops_per_sec(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.ops as f64 / secs
        } else {
            0.0
        }
    }
}

/// What the controller and the workers share.
struct Control {
    barrier: Barrier,
    /// Set by the controller to end the current run phase; polled by the
    /// workers after every step; on a cache line of its own, so that the
    /// flag the workers poll shares its line with nothing that is written.
    stop: CachePadded<AtomicBool>,
    /// Set by a worker that hit an error, so that everyone stops early.
    failed: CachePadded<AtomicBool>,
}

impl Control {
    fn fail(&self) {
        self.failed.store(true, Ordering::Relaxed);
        self.stop.store(true, Ordering::Relaxed);
    }

    fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// Sleeps for `d`, waking early if a worker failed.
    fn sleep(&self, d: Duration) {
        let until = Instant::now() + d;
        loop {
            let now = Instant::now();
            if now >= until || self.failed() {
                return;
            }
            thread::sleep((until - now).min(Duration::from_millis(10)));
        }
    }
}

/// Everything a configuration's workers run on, built from its [`Spec`]
/// before the clock starts and kept alive until the workers are done.
///
/// Each dimension of a run is a `Spec` field that this one constructor
/// reads; a new dimension is a new field here and a flag in `vmbench run`.
#[derive(Debug)]
pub struct Fixture {
    spec: Spec,
    /// The address spaces workers make calls on: one per worker in
    /// processes mode, one shared in threads mode (none for `execl`). For
    /// `kernbench`, each worker's `make`, which its jobs fork from.
    spaces: Vec<Mm>,
    /// `aim7-brk`: the parent every task was forked from. It lives as
    /// long as its tasks, so their heaps keep its anon_vma as their root.
    parent: Option<Mm>,
    /// `execl`, `kernbench`: the program and the files every exec shares.
    program: Option<Program>,
    /// `execl`: idle processes holding `resident_vmas` libc VMAs.
    idle: Vec<Process>,
}

impl Fixture {
    /// Builds the fixture of `spec`. Errors name what could not be set
    /// up, including a workload asked for in a mode it has not.
    pub fn build(spec: &Spec) -> Result<Fixture, String> {
        if let (Mode::Threads, Some(why)) = (spec.mode, spec.workload.processes_only()) {
            return Err(format!(
                "{} runs in processes mode only: {why}",
                spec.workload
            ));
        }
        let mut fixture = Fixture {
            spec: spec.clone(),
            spaces: Vec::new(),
            parent: None,
            program: None,
            idle: Vec::new(),
        };
        // One policy for every address space and file of the run.
        let policy = spec.policy();
        match spec.workload {
            Workload::Execl => {
                let program = Program::with_policy(&policy);
                fixture.idle = program.idle_population(spec.resident_vmas)?;
                fixture.program = Some(program);
            }
            Workload::Kernbench => {
                // Every worker's jobs exec the one program, so all of them
                // map the same files, as a build's compilers do.
                let program = Program::with_policy(&policy);
                fixture.spaces = (0..spec.threads)
                    .map(|_| parent_mm(&policy, spec, KERNBENCH_PARENT_HEAP_PAGES))
                    .collect::<Result<_, _>>()?;
                fixture.program = Some(program);
            }
            Workload::Aim7Brk => {
                let parent = parent_mm(&policy, spec, AIM7_PARENT_HEAP_PAGES)?;
                let top = HEAP_BASE + AIM7_PARENT_HEAP_PAGES * PAGE_SIZE;
                // A forked heap VMA cannot grow in place (its anon_vma
                // chain is not singular, so the kernel's
                // is_mergeable_anon_vma refuses the merge): a task's first
                // allocation makes a heap VMA of its own, whose first
                // write fault gives it an anon_vma of its own (the
                // inherited neighbour's cannot be shared either). That VMA is the one the task then grows
                // and shrinks at its end, which is what the end-only rule is
                // about.
                for _ in 0..spec.threads {
                    let task = parent.fork();
                    let own = top + PAGE_SIZE;
                    if task.brk(own) != own {
                        return Err("aim7-brk: a task's first brk was refused".to_string());
                    }
                    task.fault(top, Access::Write)
                        .map_err(|e| format!("aim7-brk: a task's first heap fault failed: {e}"))?;
                    fixture.spaces.push(task);
                }
                fixture.parent = Some(parent);
            }
            _ => {
                let spaces = match spec.mode {
                    Mode::Processes => spec.threads,
                    Mode::Threads => 1,
                };
                fixture.spaces = (0..spaces)
                    .map(|_| build_mm(&policy, spec))
                    .collect::<Result<_, _>>()?;
            }
        }
        Ok(fixture)
    }

    /// The job of worker `id` (0 to `threads - 1`).
    pub fn job(&self, id: usize) -> Result<Job<'_>, String> {
        match (self.spec.workload, &self.program) {
            (Workload::Execl, Some(program)) => return Ok(Job::exec(program, id)),
            (Workload::Kernbench, Some(program)) => {
                let parent = self
                    .spaces
                    .get(id)
                    .ok_or_else(|| format!("{}: no parent for worker {id}", self.spec.workload))?;
                return Ok(Job::kernbench(parent, program, id));
            }
            _ => {}
        }
        if self.spaces.is_empty() {
            return Err(format!(
                "{}: no address space to run on",
                self.spec.workload
            ));
        }
        let mm = &self.spaces[id % self.spaces.len()];
        Ok(Job::new(mm, self.spec.workload, id, mm.brk_value()))
    }

    /// The address spaces workers make calls on.
    #[cfg(test)]
    pub fn spaces(&self) -> &[Mm] {
        &self.spaces
    }

    /// `aim7-brk`'s parent.
    #[cfg(test)]
    pub fn parent(&self) -> Option<&Mm> {
        self.parent.as_ref()
    }

    /// `execl`'s and `kernbench`'s program.
    #[cfg(test)]
    pub fn program(&self) -> Option<&Program> {
        self.program.as_ref()
    }

    /// `execl`'s idle processes.
    #[cfg(test)]
    pub fn idle(&self) -> &[Process] {
        &self.idle
    }
}

/// Measures one configuration. Errors name the worker and the call that
/// failed.
pub fn measure(spec: &Spec, timing: &Timing) -> Result<Measurement, String> {
    let fixture = Fixture::build(spec)?;
    let jobs = (0..spec.threads)
        .map(|id| fixture.job(id))
        .collect::<Result<Vec<_>, String>>()?;
    let ctl = Control {
        barrier: Barrier::new(spec.threads + 1),
        stop: CachePadded::new(AtomicBool::new(false)),
        failed: CachePadded::new(AtomicBool::new(false)),
    };
    thread::scope(|s| {
        let workers: Vec<_> = jobs
            .into_iter()
            .enumerate()
            .map(|(id, job)| {
                let ctl = &ctl;
                let (vcpu, pin) = spec.vcpu(id);
                let topo = &spec.topology;
                s.spawn(move || {
                    // A worker that cannot run where it should still takes
                    // part in every barrier, and reports why afterwards.
                    let bound = topology::bind(topo, vcpu, pin)
                        .map_err(|e| format!("worker {id}: binding to CPU {vcpu}: {e}"));
                    let result = worker(ctl, job, bound.is_err());
                    topology::unbind();
                    bound.and(result)
                })
            })
            .collect();
        let (elapsed, locks) = control(&ctl, timing);
        let mut ops = 0;
        let mut cpu = Some(CpuTime::default());
        let mut first_error = None;
        for w in workers {
            match w.join() {
                Ok(Ok((n, used))) => {
                    ops += n;
                    cpu = cpu.zip(used).map(|(sum, u)| CpuTime {
                        on_cpu_ns: sum.on_cpu_ns + u.on_cpu_ns,
                        run_delay_ns: sum.run_delay_ns + u.run_delay_ns,
                    });
                }
                Ok(Err(e)) => {
                    first_error.get_or_insert(e);
                }
                Err(_) => {
                    first_error.get_or_insert_with(|| "a worker panicked".to_string());
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(Measurement {
                ops,
                elapsed,
                locks,
                cpu,
            }),
        }
    })
}

/// A fresh address space under `policy` with the resident population and
/// a heap base.
fn build_mm(policy: &Arc<Policy>, spec: &Spec) -> Result<Mm, String> {
    let mm = policy.mm();
    resident::populate(&mm, spec.resident)?;
    mm.set_brk_base(HEAP_BASE);
    Ok(mm)
}

/// A parent that forks: a fresh address space (see [`build_mm`]) whose
/// heap has `pages` pages, all written, so that its children inherit an
/// anon_vma through their chains.
fn parent_mm(policy: &Arc<Policy>, spec: &Spec, pages: u64) -> Result<Mm, String> {
    let w = spec.workload;
    let parent = build_mm(policy, spec)?;
    let top = HEAP_BASE + pages * PAGE_SIZE;
    if parent.brk(top) != top {
        return Err(format!("{w}: the parent's brk was refused"));
    }
    for page in 0..pages {
        let addr = HEAP_BASE + page * PAGE_SIZE;
        parent
            .fault(addr, Access::Write)
            .map_err(|e| format!("{w}: parent's heap fault failed: {e}"))?;
    }
    Ok(parent)
}

/// The controller's side of the phases; returns the timed interval's
/// length and lock statistics.
fn control(ctl: &Control, timing: &Timing) -> (Duration, LockStats) {
    ctl.barrier.wait(); // workers set up: warm-up begins
    ctl.sleep(timing.warmup);
    ctl.stop.store(true, Ordering::Relaxed);
    ctl.barrier.wait(); // workers parked after warm-up
    if !ctl.failed() {
        // Safe to clear: every worker is parked until the next barrier.
        ctl.stop.store(false, Ordering::Relaxed);
    }
    let before = lockstat::snapshot();
    let start = Instant::now();
    ctl.barrier.wait(); // timed interval begins
    ctl.sleep(timing.duration);
    ctl.stop.store(true, Ordering::Relaxed);
    ctl.barrier.wait(); // workers parked, counts final
    let elapsed = start.elapsed();
    let locks = lockstat::snapshot().since(&before);
    ctl.barrier.wait(); // clean-up may begin
    (elapsed, locks)
}

/// A worker's side of the phases; returns the operations it completed in
/// the timed interval and its scheduler times then. After an error it
/// keeps meeting the barriers (doing no work) so the controller and the
/// other workers never wait forever.
fn worker(
    ctl: &Control,
    mut job: Job<'_>,
    unbound: bool,
) -> Result<(u64, Option<CpuTime>), String> {
    let mut error = None;
    if unbound {
        ctl.fail();
    }
    ctl.barrier.wait();
    if let Err(e) = run_phase(ctl, &mut job) {
        ctl.fail();
        error = Some(e);
    }
    ctl.barrier.wait();
    ctl.barrier.wait();
    // A local count, returned at the end: workers never write a shared
    // cache line to count.
    let mut ops = 0;
    let cpu_before = CpuTime::now();
    if error.is_none() {
        match run_phase(ctl, &mut job) {
            Ok(n) => ops = n,
            Err(e) => {
                ctl.fail();
                error = Some(e);
            }
        }
    }
    let cpu = CpuTime::now()
        .zip(cpu_before)
        .map(|(now, then)| now.since(then));
    ctl.barrier.wait();
    ctl.barrier.wait();
    if error.is_none() {
        error = job.finish().err();
    }
    match error {
        Some(e) => Err(e),
        None => Ok((ops, cpu)),
    }
}

/// Steps `job` until the controller says stop.
///
/// The worker reads as the kernel's threads do: inside one grace period
/// held across its steps, announcing a quiescent state now and then
/// (quiescent-state-based reclamation, as liburcu's `qsbr` flavour and the
/// kernel's own RCU, whose read lock costs nothing and whose quiescent
/// states are context switches). So a page fault pays no epoch pin, and
/// what other workers' writes retire is still freed: every
/// [`Quiescence::EVERY`] steps the worker repins, which lets the epoch
/// advance past it, and collects.
fn run_phase(ctl: &Control, job: &mut Job<'_>) -> Result<u64, String> {
    let mut ops = 0;
    let mut guard = maple::pin();
    let mut quiescence = Quiescence::default();
    while !ctl.stop.load(Ordering::Relaxed) {
        ops += job.step_in(&guard)?;
        quiescence.step(&mut guard);
    }
    Ok(ops)
}

/// The rhythm of a worker's quiescent states: every worker of the lab, and
/// every tool that stands in for one, holds one [`maple::Guard`] across its
/// steps and calls [`step`](Quiescence::step) after each, so that what it
/// measures retires and frees memory at the pace a measured run does.
///
/// ```
/// use vmlab::run::harness::Quiescence;
///
/// let mut guard = maple::pin();
/// let mut quiescence = Quiescence::default();
/// for _ in 0..3 * Quiescence::EVERY {
///     // ... one step of work read under `guard` ...
///     quiescence.step(&mut guard);
/// }
/// ```
#[derive(Debug, Default)]
pub struct Quiescence {
    steps: u32,
}

impl Quiescence {
    /// Steps between quiescent states. Each one writes state that the
    /// collector shares between all threads (the global epoch, the garbage
    /// queue), so announcing one after every step, or every 64, cost two
    /// workers that share nothing else a fifth of their page faults
    /// (docs/RESULTS.md, "Fourth round"); 1024 steps of the fastest
    /// workload are about 30 µs, and retired memory waits at most that
    /// long.
    pub const EVERY: u32 = 1024;

    /// Counts one step; at every [`EVERY`](Self::EVERY)th, lets the epoch
    /// advance past `guard` (a repin) and frees what this thread retired
    /// ([`maple::Guard::flush`]).
    pub fn step(&mut self, guard: &mut maple::Guard) {
        self.steps = self.steps.wrapping_add(1);
        if self.steps % Self::EVERY == 0 {
            guard.repin();
            guard.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mm::lockstat::LockClass;

    // Lock statistics are process-wide and unit tests share the process,
    // so only lower bounds are checked here; the exact mmap_lock count of
    // the fault path is checked end to end in `tests/run.rs`, one
    // benchmark process per run.
    #[test]
    fn threads_page_fault3_counts_faults_and_vma_locks() {
        let spec = Spec {
            resident: 50,
            resident_vmas: 0,
            ..spec(Workload::PageFault3, Mode::Threads, 2)
        };
        let timing = Timing {
            warmup: Duration::from_millis(5),
            duration: Duration::from_millis(30),
        };
        let m = measure(&spec, &timing).unwrap();
        assert!(m.ops > 0);
        assert!(m.ops_per_sec() > 0.0);
        let vma = m.locks.class(LockClass::VmaLock).acquisitions;
        assert!(vma >= m.ops, "{vma} vma_lock for {} ops", m.ops);
    }

    fn spec(workload: Workload, mode: Mode, threads: usize) -> Spec {
        Spec {
            workload,
            mode,
            design: Design::default(),
            threads,
            resident: 20,
            resident_vmas: 37,
            topology: topology::host(),
            pin: true,
        }
    }

    #[test]
    fn execl_fixture_holds_the_requested_libc_vmas() {
        let f = Fixture::build(&spec(Workload::Execl, Mode::Processes, 2)).unwrap();
        let program = f.program().unwrap();
        let libc: usize = f.idle().iter().map(|p| program.libc_vmas(p.mm())).sum();
        assert_eq!(libc, 37);
        assert!(f.spaces().is_empty());
        // Workers exec their own processes on the shared program.
        let mut job = f.job(1).unwrap();
        assert_eq!(job.step().unwrap(), 1);
        job.finish().unwrap();
    }

    #[test]
    fn workers_are_pinned_on_the_host_unless_asked_not_to_and_spread_on_emulated_nodes() {
        let host = spec(Workload::Brk1, Mode::Processes, 2);
        let cpus = host.topology.nr_cpus();
        assert_eq!(host.vcpu(1), (1 % cpus, true));
        let unpinned = Spec { pin: false, ..host };
        assert_eq!(unpinned.vcpu(1), (1 % cpus, false));
        let emulated = Spec {
            topology: Arc::new("12x32".parse().unwrap()),
            ..unpinned
        };
        // Worker i on node i mod 12, never pinned.
        assert_eq!(emulated.vcpu(0), (0, false));
        assert_eq!(emulated.vcpu(1), (32, false));
        assert_eq!(emulated.vcpu(13), (33, false));
    }

    #[test]
    fn aim7_fixture_forks_every_task_from_one_live_parent() {
        let f = Fixture::build(&spec(Workload::Aim7Brk, Mode::Processes, 3)).unwrap();
        let parent = f.parent().unwrap();
        let heap_top = HEAP_BASE + AIM7_PARENT_HEAP_PAGES * PAGE_SIZE;
        assert_eq!(parent.brk_value(), heap_top);
        assert!(parent.find_vma(HEAP_BASE).unwrap().anon().is_some());
        assert_eq!(f.spaces().len(), 3);
        let parent_heap = parent.find_vma(HEAP_BASE).unwrap();
        let parent_anon = &parent_heap.anon().unwrap().anon_vma;
        for task in f.spaces() {
            assert_eq!(task.map_count(), parent.map_count() + 1);
            let heap = task.find_vma(HEAP_BASE).unwrap();
            assert!(heap.anon().is_some_and(|a| a.inherited()));
            // The task's own heap VMA: one page with an anon_vma of its
            // own (the inherited neighbour's cannot be shared).
            let own = task.find_vma(heap_top).unwrap();
            assert_eq!((own.start(), own.end()), (heap_top, heap_top + PAGE_SIZE));
            let link = own.anon().unwrap();
            assert!(!link.inherited());
            assert!(!std::sync::Arc::ptr_eq(&link.anon_vma, parent_anon));
        }
        let mut job = f.job(2).unwrap();
        assert_eq!(job.step().unwrap(), 1);
        assert_eq!(f.spaces()[2].brk_value(), heap_top + PAGE_SIZE);
    }

    #[test]
    fn kernbench_fixture_gives_each_worker_a_make_to_fork_from() {
        let f = Fixture::build(&spec(Workload::Kernbench, Mode::Processes, 2)).unwrap();
        assert_eq!(f.spaces().len(), 2);
        let heap_top = HEAP_BASE + KERNBENCH_PARENT_HEAP_PAGES * PAGE_SIZE;
        for make in f.spaces() {
            // The resident map plus the heap, written.
            assert_eq!(make.map_count(), 21);
            assert_eq!(make.brk_value(), heap_top);
            assert!(make.find_vma(HEAP_BASE).unwrap().anon().is_some());
        }
        // No idle population: the program's files hold only what its jobs
        // map.
        let program = f.program().unwrap();
        assert!(f.idle().is_empty());
        assert_eq!(program.libc().imap().count(), 0);
        let maps = f.spaces()[1].proc_maps();
        let mut job = f.job(1).unwrap();
        assert_eq!(job.step().unwrap(), 1);
        job.finish().unwrap();
        assert_eq!(f.spaces()[1].proc_maps(), maps);
        assert_eq!(program.libc().imap().count(), 0);
        assert!(f.job(2).is_err(), "a worker without a parent");
    }

    #[test]
    fn processes_only_workloads_refuse_threads_mode() {
        for w in [Workload::Execl, Workload::Aim7Brk, Workload::Kernbench] {
            let err = Fixture::build(&spec(w, Mode::Threads, 1)).unwrap_err();
            assert!(err.contains("processes mode only"), "{err}");
        }
    }

    #[test]
    fn threads_mode_shares_one_space_with_the_resident_population() {
        let f = Fixture::build(&spec(Workload::Brk1, Mode::Threads, 4)).unwrap();
        assert_eq!(f.spaces().len(), 1);
        assert_eq!(f.spaces()[0].map_count(), 20);
        let f = Fixture::build(&spec(Workload::Mmap1, Mode::Processes, 2)).unwrap();
        assert_eq!(f.spaces().len(), 2);
    }
}
