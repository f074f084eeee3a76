//! Running one configuration: build the address spaces, start the
//! workers, warm up, time, and collect operations and lock statistics.
//!
//! Workers and the controlling thread move through the phases together
//! at barriers: set-up, warm-up, a pause, the timed interval, a pause,
//! clean-up. The controller takes its lock-statistics snapshots and clock
//! readings while every worker is parked at a barrier, so the lock counts
//! cover exactly the operations counted, with no warm-up or clean-up call
//! mixed in.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use mm::lockstat::{self, LockStats};
use mm::{IndexKind, Mm, MmConfig};

use super::resident;
use super::workload::{Job, Workload, HEAP_BASE};

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

/// One configuration to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    /// What each worker does.
    pub workload: Workload,
    /// Whether workers share an address space.
    pub mode: Mode,
    /// The VMA index of every address space.
    pub index: IndexKind,
    /// Number of workers.
    pub threads: usize,
    /// Resident VMAs mapped into each address space before starting.
    pub resident: usize,
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
        let wall = self.elapsed.as_nanos() as f64 * threads as f64;
        self.cpu
            .filter(|_| wall > 0.0)
            .map(|c| c.on_cpu_ns as f64 / wall)
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

/// Keeps a flag on a cache line of its own, so that the flag the workers
/// poll on every step shares its line with nothing that is written.
#[repr(align(128))]
struct Padded<T>(T);

/// What the controller and the workers share.
struct Control {
    barrier: Barrier,
    /// Set by the controller to end the current run phase; polled by the
    /// workers after every step.
    stop: Padded<AtomicBool>,
    /// Set by a worker that hit an error, so that everyone stops early.
    failed: Padded<AtomicBool>,
}

impl Control {
    fn fail(&self) {
        self.failed.0.store(true, Ordering::Relaxed);
        self.stop.0.store(true, Ordering::Relaxed);
    }

    fn failed(&self) -> bool {
        self.failed.0.load(Ordering::Relaxed)
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

/// Measures one configuration. Errors name the worker and the call that
/// failed.
pub fn measure(spec: &Spec, timing: &Timing) -> Result<Measurement, String> {
    let spaces = match spec.mode {
        Mode::Processes => spec.threads,
        Mode::Threads => 1,
    };
    let mms = (0..spaces)
        .map(|_| build_mm(spec))
        .collect::<Result<Vec<Mm>, String>>()?;
    let ctl = Control {
        barrier: Barrier::new(spec.threads + 1),
        stop: Padded(AtomicBool::new(false)),
        failed: Padded(AtomicBool::new(false)),
    };
    thread::scope(|s| {
        let workers: Vec<_> = (0..spec.threads)
            .map(|id| {
                let mm = &mms[id % spaces];
                let ctl = &ctl;
                s.spawn(move || worker(ctl, Job::new(mm, spec.workload, id)))
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

/// A fresh address space with the resident population and a heap base.
fn build_mm(spec: &Spec) -> Result<Mm, String> {
    let mm = Mm::new(MmConfig {
        index: spec.index,
        ..MmConfig::default()
    });
    resident::populate(&mm, spec.resident)?;
    mm.set_brk_base(HEAP_BASE);
    Ok(mm)
}

/// The controller's side of the phases; returns the timed interval's
/// length and lock statistics.
fn control(ctl: &Control, timing: &Timing) -> (Duration, LockStats) {
    ctl.barrier.wait(); // workers set up: warm-up begins
    ctl.sleep(timing.warmup);
    ctl.stop.0.store(true, Ordering::Relaxed);
    ctl.barrier.wait(); // workers parked after warm-up
    if !ctl.failed() {
        // Safe to clear: every worker is parked until the next barrier.
        ctl.stop.0.store(false, Ordering::Relaxed);
    }
    let before = lockstat::snapshot();
    let start = Instant::now();
    ctl.barrier.wait(); // timed interval begins
    ctl.sleep(timing.duration);
    ctl.stop.0.store(true, Ordering::Relaxed);
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
fn worker(ctl: &Control, mut job: Job<'_>) -> Result<(u64, Option<CpuTime>), String> {
    let mut error = None;
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
fn run_phase(ctl: &Control, job: &mut Job<'_>) -> Result<u64, String> {
    let mut ops = 0;
    while !ctl.stop.0.load(Ordering::Relaxed) {
        ops += job.step()?;
    }
    Ok(ops)
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
            workload: Workload::PageFault3,
            mode: Mode::Threads,
            index: IndexKind::Maple,
            threads: 2,
            resident: 50,
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
}
