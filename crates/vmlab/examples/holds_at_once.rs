//! How long `mmap_lock` is held when threads run at once: a diagnostic
//! for the projection (`docs/projection.md`), which predicts two threads
//! from recordings made on one.
//!
//! Runs `THREADS` workers of a threads-mode workload in one address
//! space, each pinned to its CPU, warms them up for 0.3 s, then records
//! `OPS` operations on every worker at once with the model's recorder
//! (`mm::profile`, each thread its own) and prints, per worker, the time
//! an operation took, how long it held `mmap_lock` (each of its holds in
//! order, with percentiles), the gaps between those holds, and how long
//! the other locks. Compare one thread with two: a hold that grows at
//! two threads pays for something
//! the one-thread recordings do not show (lines the other CPU wrote, an
//! allocator's lock), and the projection charges only the lines the
//! recorder counts (`vmbench project --machine host --cpus 1,2`, its
//! breakdown's "line transfers").
//!
//! With a fifth argument `turns`, the workers still run on their own
//! CPUs but take turns call by call, passing a baton: no two calls
//! overlap, so nothing waits for a lock, yet every call finds what the
//! other CPU's call just wrote. A hold that grows as much taking turns as
//! running at once pays for those lines; one that grows only at once pays
//! for running together (a lock's waiter, the other thread's frees, an
//! allocator's lock). With `processes`, each worker has an address space
//! of its own: taking turns, that is the baton's own cost.
//!
//! Two more ways to take turns (both with `turns`) tell what two threads
//! cost from what two CPUs cost: with `one-cpu`, every worker's thread
//! runs on worker 0's CPU, a waiting worker yielding it; with
//! `one-thread`, one thread makes every worker's call in turn, as the
//! profile recorder does (`vmlab::profile`). Neither moves a line between
//! CPUs; only `one-cpu` has two threads (two grace-period participants,
//! two sets of the allocator's and the slab's per-thread caches). Their
//! rates count each call's thread switch (`one-cpu`) or none
//! (`one-thread`, where an operation's time also has the other workers'
//! calls in it): compare their holds, not their rates
//! (`docs/projection.md`, "Two threads on one CPU, and two at once").
//!
//! With `unrecorded`, the run ends after the unrecorded operations: no
//! recording, only the rate, for a sampling profiler to see the workers
//! as the recorder does not disturb them (`perf record` of `turns`
//! against `turns processes`: `docs/data/2cpu-2026-11-29/turns-perf/`).
//!
//! The recorder's own cost is taken out of its timestamps but not out of
//! the caches it disturbs, so compare holds with holds, not with the
//! throughput of `vmbench run`.
//!
//! ```text
//! cargo run --release -p vmlab --example holds_at_once -- malloc1 maple 1 30000
//! cargo run --release -p vmlab --example holds_at_once -- malloc1 maple 2 30000
//! cargo run --release -p vmlab --example holds_at_once -- malloc1 maple 2 30000 turns
//! cargo run --release -p vmlab --example holds_at_once -- malloc1 maple 2 300000 turns unrecorded
//! cargo run --release -p vmlab --example holds_at_once -- malloc1 maple 2 30000 turns one-cpu
//! cargo run --release -p vmlab --example holds_at_once -- malloc1 maple 2 30000 turns one-thread
//! ```

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use mm::lockstat::LockClass;
use mm::policy::IndexKind;
use mm::profile::{self, Event, What};
use vmlab::run::harness::{Design, Fixture, Mode, Quiescence, Spec};
use vmlab::run::workload::Workload;

/// The mark at each operation boundary.
const OP: u64 = 1;
/// Holds reported one by one; later ones are summed only.
const HOLDS: usize = 8;

fn main() {
    if let Err(e) = run() {
        eprintln!("holds_at_once: {e}");
        eprintln!(
            "usage: holds_at_once WORKLOAD INDEX THREADS OPS [turns [one-cpu|one-thread]] [processes] [unrecorded] (e.g. malloc1 maple 2 30000)"
        );
        std::process::exit(2);
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |f: &str| args.iter().skip(4).any(|a| a == f);
    let (turns, processes) = (flag("turns"), flag("processes"));
    let one_cpu = flag("one-cpu");
    let one_thread = flag("one-thread");
    let only_unrecorded = flag("unrecorded");
    if let Some(bad) = args.iter().skip(4).find(|a| {
        !["turns", "processes", "unrecorded", "one-cpu", "one-thread"].contains(&a.as_str())
    }) {
        return Err(format!("unknown flag {bad}"));
    }
    let [workload, index, threads, ops] = &args[..args.len().min(4)] else {
        return Err(format!("expected 4 arguments, got {}", args.len()));
    };
    let workload = *Workload::ALL
        .iter()
        .find(|w| w.name() == workload)
        .ok_or_else(|| format!("unknown workload {workload}"))?;
    let index: IndexKind = index
        .parse()
        .map_err(|_| format!("unknown index {index}"))?;
    let threads: usize = threads
        .parse()
        .map_err(|_| format!("bad thread count {threads}"))?;
    let ops: u64 = ops
        .parse()
        .map_err(|_| format!("bad operation count {ops}"))?;
    if threads == 0 || ops == 0 {
        return Err("THREADS and OPS must be at least 1".into());
    }
    let spec = Spec {
        workload,
        mode: if processes {
            Mode::Processes
        } else {
            Mode::Threads
        },
        design: Design {
            index,
            ..Design::default()
        },
        threads,
        resident: 300,
        resident_vmas: 6000,
        topology: mm::topology::host(),
        pin: true,
    };
    if one_cpu && !turns {
        return Err("one-cpu needs turns: workers sharing a CPU take turns".into());
    }
    if one_thread && !turns {
        return Err("one-thread needs turns: one thread takes every worker's turn".into());
    }
    if one_cpu && one_thread {
        return Err("one-cpu and one-thread exclude each other".into());
    }
    let fixture = Fixture::build(&spec)?;
    let barrier = Barrier::new(threads);
    let baton = turns.then(|| Baton::new(threads, one_cpu));
    let recorded: Vec<Result<(Duration, Vec<Event>), String>> = if one_thread {
        one_thread_turns(&fixture, &spec, ops, only_unrecorded)?
            .into_iter()
            .map(Ok)
            .collect()
    } else {
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..threads)
                .map(|i| {
                    let (fixture, spec, barrier, baton) = (&fixture, &spec, &barrier, &baton);
                    s.spawn(move || {
                        worker(
                            fixture,
                            spec,
                            barrier,
                            baton.as_ref(),
                            i,
                            ops,
                            only_unrecorded,
                        )
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().unwrap_or_else(|_| Err("a worker panicked".into())))
                .collect()
        })
    };
    let mut longest = Duration::ZERO;
    for (i, worker) in recorded.into_iter().enumerate() {
        let (unrecorded, events) = worker?;
        println!(
            "worker {i}: {ops} operations unrecorded in {:.1} ms, {:.0} ns each",
            unrecorded.as_secs_f64() * 1e3,
            unrecorded.as_secs_f64() * 1e9 / ops as f64
        );
        longest = longest.max(unrecorded);
        if !only_unrecorded {
            report(i, &events);
        }
    }
    println!(
        "unrecorded: {:.0} operations a second in all",
        (threads as u64 * ops) as f64 / longest.as_secs_f64()
    );
    Ok(())
}

/// Whose call is next, where the workers take turns.
struct Baton {
    next: AtomicUsize,
    /// Workers that made their last call: the others no longer wait for
    /// them.
    left: Vec<AtomicBool>,
    /// The workers share one CPU: a waiter yields it to the holder.
    yielding: bool,
}

impl Baton {
    fn new(threads: usize, yielding: bool) -> Self {
        Baton {
            next: AtomicUsize::new(0),
            left: (0..threads).map(|_| AtomicBool::new(false)).collect(),
            yielding,
        }
    }

    /// Waits for worker `i`'s turn.
    fn take(&self, i: usize) {
        while self.next.load(Ordering::Acquire) != i {
            if self.yielding {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// Passes the turn on from worker `i` to the next that has not left.
    fn pass(&self, i: usize) {
        let n = self.left.len();
        let next = (1..=n)
            .map(|k| (i + k) % n)
            .find(|&j| j == i || !self.left[j].load(Ordering::Acquire))
            .unwrap_or(i);
        self.next.store(next, Ordering::Release);
    }

    /// Worker `i` makes no more calls.
    fn leave(&self, i: usize) {
        self.left[i].store(true, Ordering::Release);
        if self.next.load(Ordering::Acquire) == i {
            self.pass(i);
        }
    }
}

/// Steps of warm-up where the workers take turns (a count, not a time,
/// so that every worker makes as many and none waits for one that
/// stopped).
const TURNS_WARMUP: u32 = 100_000;

/// Binds the calling thread to worker `i`'s CPU.
fn bind(spec: &Spec, i: usize) -> Result<(), String> {
    let (vcpu, pin) = spec.vcpu(i);
    mm::topology::bind(&spec.topology, vcpu, pin).map_err(|e| format!("binding to CPU {vcpu}: {e}"))
}

/// The marks that say whose call the events after them are, where one
/// thread takes every worker's turn: `CALL + i` for worker `i`.
const CALL: u64 = 16;

/// Every worker's turns taken by one thread, as the profile recorder
/// takes them (`vmlab::profile`): worker 1 first warms up on a thread of
/// its own, so that the tree is shared (RCU mode), then one thread on
/// worker 0's CPU, with one grace period, makes each worker's call in
/// turn. Returns, per worker, the time of its `ops` unrecorded operations
/// (all workers' calls in that time) and its events, cut out of the one
/// recording by call.
fn one_thread_turns(
    fixture: &Fixture,
    spec: &Spec,
    ops: u64,
    only_unrecorded: bool,
) -> Result<Vec<(Duration, Vec<Event>)>, String> {
    let threads = spec.threads;
    let mut jobs = (0..threads)
        .map(|i| fixture.job(i))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(second) = jobs.get_mut(1) {
        std::thread::scope(|s| {
            s.spawn(|| -> Result<(), String> {
                bind(spec, 1)?;
                let guard = maple::pin();
                for _ in 0..TURNS_WARMUP / 10 {
                    second.call_in(&guard)?;
                }
                // On to the end of an operation, so that the turns
                // begin with both workers between operations.
                while second.call_in(&guard)? == 0 {}
                Ok(())
            })
            .join()
            .unwrap_or_else(|_| Err("worker 1's warm-up panicked".into()))
        })?;
    }
    bind(spec, 0)?;
    let mut guard = maple::pin();
    let mut quiescence = Quiescence::default();
    let mut round = |jobs: &mut [vmlab::run::workload::Job<'_>],
                     guard: &mut maple::Guard,
                     done: &mut [u64],
                     record: bool|
     -> Result<(), String> {
        for (k, job) in jobs.iter_mut().enumerate() {
            if record {
                profile::mark(CALL + k as u64);
            }
            let n = job.call_in(guard)?;
            done[k] += n;
            if record && n > 0 {
                profile::mark(OP);
            }
        }
        quiescence.step(guard);
        Ok(())
    };
    let mut done = vec![0u64; threads];
    for _ in 0..TURNS_WARMUP {
        round(&mut jobs, &mut guard, &mut done, false)?;
    }
    done.fill(0);
    let began = Instant::now();
    while done.iter().any(|&d| d < ops) {
        round(&mut jobs, &mut guard, &mut done, false)?;
    }
    let unrecorded = began.elapsed();
    let mut events = vec![Vec::new(); threads];
    if !only_unrecorded {
        done.fill(0);
        profile::start();
        // Each worker's first operation opens where the recording
        // does.
        for e in &mut events {
            e.push(Event {
                at: Duration::ZERO,
                what: What::Mark(OP),
            });
        }
        while done.iter().any(|&d| d < ops) {
            round(&mut jobs, &mut guard, &mut done, true)?;
        }
        let mut whose = None;
        for e in profile::stop() {
            match e.what {
                What::Mark(m) if (CALL..CALL + threads as u64).contains(&m) => {
                    whose = Some((m - CALL) as usize);
                }
                _ => {
                    if let Some(k) = whose {
                        events[k].push(e);
                    }
                }
            }
        }
    }
    for job in &mut jobs {
        job.finish()?;
    }
    Ok(events.into_iter().map(|e| (unrecorded, e)).collect())
}

/// Worker `i`: warm up, wait for the others, run `ops` operations
/// unrecorded, then (unless `only_unrecorded`) record `ops` more.
fn worker(
    fixture: &Fixture,
    spec: &Spec,
    barrier: &Barrier,
    baton: Option<&Baton>,
    i: usize,
    ops: u64,
    only_unrecorded: bool,
) -> Result<(Duration, Vec<Event>), String> {
    // Workers that yield to each other share worker 0's CPU.
    let one_cpu = baton.is_some_and(|b| b.yielding);
    bind(spec, if one_cpu { 0 } else { i })?;
    let mut job = fixture.job(i)?;
    let mut guard = maple::pin();
    // Quiescent states at the harness's workers' pace.
    let mut quiescence = Quiescence::default();
    let mut step = |job: &mut vmlab::run::workload::Job<'_>, guard: &mut maple::Guard| {
        let n = match baton {
            Some(b) => {
                b.take(i);
                let n = job.call_in(guard);
                b.pass(i);
                n
            }
            None => job.step_in(guard),
        };
        quiescence.step(guard);
        n
    };
    if baton.is_some() {
        for _ in 0..TURNS_WARMUP {
            step(&mut job, &mut guard)?;
        }
    } else {
        let until = Instant::now() + Duration::from_millis(300);
        while Instant::now() < until {
            step(&mut job, &mut guard)?;
        }
    }
    barrier.wait();
    // `ops` operations unrecorded, for the rate the recorder does not
    // disturb.
    let began = Instant::now();
    let mut done = 0;
    while done < ops {
        done += step(&mut job, &mut guard)?;
    }
    let unrecorded = began.elapsed();
    barrier.wait();
    if only_unrecorded {
        // Every worker has made its last call: nobody needs the baton.
        job.finish()?;
        return Ok((unrecorded, Vec::new()));
    }
    profile::start();
    profile::mark(OP);
    let mut done = 0;
    let result = (|| {
        while done < ops {
            let n = step(&mut job, &mut guard)?;
            if n > 0 {
                done += n;
                profile::mark(OP);
            }
        }
        Ok::<(), String>(())
    })();
    if let Some(b) = baton {
        b.leave(i);
    }
    let events = profile::stop();
    // Every worker stops recording before any unmaps what it left.
    barrier.wait();
    result?;
    job.finish()?;
    Ok((unrecorded, events))
}

/// Prints worker `i`'s operations and holds, in nanoseconds.
fn report(i: usize, events: &[Event]) {
    let mut took = Vec::new();
    let mut holds: Vec<Vec<f64>> = vec![Vec::new(); HOLDS];
    // The time from each `mmap_lock` release to the next acquisition (of
    // the operation or the next one), by the hold it ends before: the
    // gap in which, in the simulation, a releasing CPU that comes back
    // first keeps the lock (`docs/projection.md`, "Sections measured on
    // two CPUs"). At two threads it includes waiting for the other's
    // hold; its low percentiles are the thread's own code.
    let mut gaps: Vec<Vec<f64>> = vec![Vec::new(); HOLDS];
    let mut released_at = None;
    let (mut held, mut other) = (0.0, 0.0);
    let mut since_mark = None;
    let mut open: HashMap<u64, (f64, LockClass)> = HashMap::new();
    let mut k = 0;
    for e in events {
        let at = e.at.as_secs_f64() * 1e9;
        match e.what {
            What::Mark(OP) => {
                if let Some(m) = since_mark {
                    took.push(at - m);
                }
                since_mark = Some(at);
                k = 0;
            }
            What::Acquire { class, lock, .. } => {
                if class == LockClass::MmapLock {
                    if let (Some(r), Some(g)) = (released_at.take(), gaps.get_mut(k)) {
                        g.push(at - r);
                    }
                }
                open.insert(lock, (at, class));
            }
            What::Release { lock } => match open.remove(&lock) {
                Some((from, LockClass::MmapLock)) => {
                    released_at = Some(at);
                    held += at - from;
                    if let Some(h) = holds.get_mut(k) {
                        h.push(at - from);
                    }
                    k += 1;
                }
                // A VMA's write lock is a mark inside mmap_lock's hold.
                Some((_, LockClass::VmaLock)) | None => {}
                Some((from, _)) => other += at - from,
            },
            _ => {}
        }
    }
    let n = took.len().max(1) as f64;
    let total: f64 = took.iter().sum();
    println!(
        "worker {i}: {} operations, {:.0} ns each ({}), mmap_lock held {:.0} ns an operation, other locks {:.0} ns",
        took.len(),
        total / n,
        percentiles(&mut took),
        held / n,
        other / n
    );
    for (j, h) in holds.iter_mut().enumerate().filter(|(_, h)| !h.is_empty()) {
        let mean = h.iter().sum::<f64>() / h.len() as f64;
        println!(
            "  mmap_lock hold {j}: {} of them, {mean:.0} ns mean ({})",
            h.len(),
            percentiles(h)
        );
    }
    for (j, g) in gaps.iter_mut().enumerate().filter(|(_, g)| !g.is_empty()) {
        println!(
            "  gap before mmap_lock hold {j}: {} of them ({})",
            g.len(),
            percentiles(g)
        );
    }
}

/// `p10 p50 p90 p99` of `v`, which it sorts.
fn percentiles(v: &mut [f64]) -> String {
    if v.is_empty() {
        return "none".into();
    }
    v.sort_by(f64::total_cmp);
    let p = |q: f64| v[((v.len() - 1) as f64 * q) as usize];
    format!(
        "p10 {:.0}, p50 {:.0}, p90 {:.0}, p99 {:.0}",
        p(0.1),
        p(0.5),
        p(0.9),
        p(0.99)
    )
}
