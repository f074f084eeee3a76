//! Recording a workload's profile ([`vmproject::Profile`]): what one
//! worker's operations do, step by step, for the projection to replay on
//! machines with many CPUs.
//!
//! [`record`] measures one worker's throughput without the recorder, then
//! runs the job of worker 0 and the job of worker 1 of a two-worker
//! fixture, one after the other on the calling thread, with the model's
//! recorder ([`mm::profile`]) on. A lock instance both workers took is one
//! every CPU shares ([`Scope::Shared`]), one only a worker took exists
//! once per CPU ([`Scope::Worker`]); an i_mmap group's lock is one per
//! group ([`Scope::Group`]) either way. Worker 0's operations become the
//! profile's steps, their run times scaled to the measured throughput.
//!
//! In threads mode the two workers' calls also meet, as the sequential
//! recording never lets them: their anonymous mappings merge into one
//! VMA that both then fault in and split, a `brk` finds the break where
//! the other worker just put it. So [`record`] also runs the two workers
//! taking turns call by call on one thread, measures that throughput
//! without the recorder, and records it: the profile's
//! [`interleaved`](Profile::interleaved) operations, worker 0's and
//! worker 1's in turn, their run times scaled to that throughput, which
//! the projection runs at two CPUs or more. The instances of the VMA the
//! two share (remade at every merge and split, with its anon_vma) are
//! one lock there. One CPU taking turns also holds both workers' data in
//! its caches, which two CPUs do not; what that costs is measured on a
//! control, two workers taking turns in address spaces of their own
//! (`turns_apart`), and taken out of the throughput.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use mm::lockstat::LockClass as MmClass;
use mm::policy::{ImapDesign, LockKind as MmKind};
use mm::profile::{self, Event, What};
use mm::topology;
use vmproject::profile::{Conversion, FORMAT};
use vmproject::{LockClass, LockKind, LockRef, Profile, Scope, Step};

use crate::run::harness::{self, Fixture, Mode, Spec, Timing};
use crate::run::workload::Job;
use crate::LabError;

/// Steps of a job between two drains of a recording whose events are not
/// kept (the second worker's warm-up).
const DRAIN_EVERY: u32 = 256;

/// One worker's recorded operations, each its events from the mark that
/// opens it to the mark that closes it.
type Ops = Vec<Vec<Event>>;

/// The mark the recorder gets at each operation boundary.
const OP: u64 = 1;

/// How many times the operations asked for each worker records when two
/// take turns ([`record_interleaved`]): their operations differ from one
/// turn to the next (a merge, a split, a call that finds the other's
/// work done), and with 64 each the threads-mode validation's median
/// error was 22 %, with 512 15 % (`docs/projection.md`, "When the
/// threads' calls meet").
const TURNS_OPS_FACTOR: usize = 4;

/// The marks that say whose call the events after them belong to, when
/// two workers take turns ([`record_interleaved`]).
const CALL: [u64; 2] = [2, 3];

/// The mark that ends a turn: what follows until the next [`CALL`] mark
/// (changing the thread's CPU identity) is no worker's time.
const PAUSE: u64 = 4;

/// Records `ops` operations of `spec`'s workload at one worker (see the
/// [module docs](self)). `timing` is the one-worker throughput
/// measurement's (its warm-up also warms each recorded worker up). For
/// the `adaptive` i_mmap design the profile of `distributed`, which it
/// converts to, comes along in [`Profile::converts_to`].
///
/// Errors: `ops` of 0, a workload the mode does not run, a failed
/// operation, or a profile that does not validate.
pub fn record(spec: &Spec, ops: usize, timing: &Timing) -> Result<Profile, LabError> {
    if ops == 0 {
        return Err(LabError("profile: record at least one operation".into()));
    }
    let mut profile = record_one(spec, ops, timing)?;
    if spec.design.imap == ImapDesign::Adaptive {
        let mut to = spec.clone();
        to.design.imap = ImapDesign::Distributed;
        let distributed = record_one(&to, ops, timing)?;
        profile.converts_to = Some(Box::new(Conversion {
            after: spec.policy().adaptive.convert_after,
            profile: distributed,
        }));
    }
    profile
        .validate()
        .map_err(|e| LabError(format!("profile: {e}")))?;
    Ok(profile)
}

fn record_one(spec: &Spec, ops: usize, timing: &Timing) -> Result<Profile, LabError> {
    let err = |e: String| {
        LabError(format!(
            "profile of {} ({}): {e}",
            spec.workload,
            spec.mode.name()
        ))
    };
    // (1) One worker's rate, without the recorder.
    let one = Spec {
        threads: 1,
        ..spec.clone()
    };
    let rate = harness::measure(&one, timing).map_err(err)?.ops_per_sec();
    if !(rate.is_finite() && rate > 0.0) {
        return Err(err(format!(
            "one worker ran no operations in {:?}",
            timing.duration
        )));
    }
    // (2) Workers 0 and 1 of a two-worker fixture, one after the other.
    let two = Spec {
        threads: 2,
        ..spec.clone()
    };
    // On a thread of its own: the recording pins the thread it runs on to
    // each recorded worker's CPU in turn, and a pinned thread stays pinned
    // (`topology::unbind`), so the caller's thread, and every thread it
    // starts later without pinning it (an unpinned run's workers, `vmbench
    // topology`'s measurement, which reads the CPUs it may use), would be
    // left on one CPU.
    let recorded = std::thread::scope(|s| {
        s.spawn(|| record_two(&two, ops, timing.warmup))
            .join()
            .unwrap_or_else(|_| Err("the recording thread panicked".to_string()))
    });
    let (first, second) = recorded.map_err(err)?;
    // (3) Scopes, (4) steps.
    let mut profile = convert(spec, rate, &first, &second, false);
    profile.calibrate();
    // (5) Threads mode: the two workers again, taking turns call by call.
    if spec.mode == Mode::Threads {
        let recorded = std::thread::scope(|s| {
            s.spawn(|| {
                let apart = turns_apart(spec, timing)?;
                let (together, first, second) =
                    record_interleaved(&two, ops * TURNS_OPS_FACTOR, timing)?;
                Ok((together, apart, first, second))
            })
            .join()
            .unwrap_or_else(|_| Err("the recording thread panicked".to_string()))
        });
        let (together, apart, first, second) = recorded.map_err(err)?;
        // What the threads' turns cost beyond what one CPU's turns cost
        // two workers in address spaces of their own (`turns_apart`).
        let shared_rate = together * rate / apart;
        let mut together = convert(spec, shared_rate, &first, &second, true);
        together.calibrate();
        profile.interleaved = Some(Box::new(together));
    }
    Ok(profile)
}

/// Worker 0's and worker 1's events, each split at operation boundaries
/// (`ops` operations each), in one recording so that lock instances
/// compare between them.
fn record_two(spec: &Spec, ops: usize, warmup: Duration) -> Result<(Ops, Ops), String> {
    let fixture = Fixture::build(spec)?;
    let mut job0 = fixture.job(0)?;
    let mut job1 = fixture.job(1)?;
    let (vcpu0, pin0) = spec.vcpu(0);
    let (vcpu1, pin1) = spec.vcpu(1);
    if spec.mode == Mode::Threads {
        warm_elsewhere(spec, &mut job1, warmup)?;
    }
    let result = (|| -> Result<(Vec<Event>, Vec<Event>), String> {
        bind(spec, vcpu0, pin0)?;
        warm(&mut job0, warmup, false)?;
        profile::start();
        let first = run_ops(&mut job0, ops)?;
        // Worker 1 warms up recorded (its events dropped), so that the
        // recorder hears of every lock freed meanwhile.
        topology::unbind();
        bind(spec, vcpu1, pin1)?;
        warm(&mut job1, warmup, true)?;
        let _ = profile::take();
        let second = run_ops(&mut job1, ops)?;
        Ok((first, second))
    })();
    let _ = profile::stop();
    topology::unbind();
    let (first, second) = result?;
    job0.finish()?;
    job1.finish()?;
    Ok((split(first), split(second)))
}

/// The throughput of two workers of a threads-mode fixture taking turns
/// call by call ([`Job::call_in`]) on this thread, measured without the
/// recorder as the one-worker rate is, and then their events, in one
/// recording, each worker's split at its operation boundaries: the
/// profile's view of two workers that run at once.
///
/// The sequential recording ([`record_two`]) never lets the workers'
/// calls meet. When they run at once they do: two threads' anonymous
/// mappings are neighbours and merge into one VMA, whose lock and
/// anon_vma both threads then take (and each `munmap` splits), as in the
/// kernel; two threads' `brk` calls find the break already where they
/// move it. Taking turns is the most interleaved order; each worker's
/// clock stops while the other makes its call. The thread sits in both
/// workers' [`Seats`]; the time a change of seat takes is no worker's in
/// the recording, but the measured rate includes it.
fn record_interleaved(spec: &Spec, ops: usize, timing: &Timing) -> Result<(f64, Ops, Ops), String> {
    let warmup = timing.warmup;
    let fixture = Fixture::build(spec)?;
    let mut jobs = [fixture.job(0)?, fixture.job(1)?];
    let seats = Seats::of(spec);
    warm_elsewhere(spec, &mut jobs[1], warmup)?;
    let result = (|| -> Result<(f64, Vec<Event>), String> {
        seats.pin_first()?;
        let mut guard = maple::pin();
        let rate = turns_rate(&mut jobs, &mut guard, &seats, timing)?;
        profile::start();
        for (k, &call) in CALL.iter().enumerate() {
            profile::mark(PAUSE);
            seats.take(k)?;
            profile::mark(call);
            profile::mark(OP);
        }
        let mut done = [0u64; 2];
        let mut quiescence = harness::Quiescence::default();
        while done.iter().any(|&d| d < ops as u64) {
            for (k, job) in jobs.iter_mut().enumerate() {
                profile::mark(PAUSE);
                // Between turns, so that no worker's clock runs (see
                // `turns_rate`).
                if k == 0 {
                    quiescence.step(&mut guard);
                }
                seats.take(k)?;
                profile::mark(CALL[k]);
                let n = job.call_in(&guard)?;
                if n > 0 {
                    done[k] += n;
                    profile::mark(OP);
                }
            }
        }
        Ok((rate, profile::take()))
    })();
    let _ = profile::stop();
    topology::unbind();
    let (rate, events) = result?;
    for job in &mut jobs {
        job.finish()?;
    }
    let [first, second] = demux(events);
    Ok((rate, split(first), split(second)))
}

/// Binds the calling thread to `spec`'s CPU `vcpu` (see
/// [`topology::bind`]).
fn bind(spec: &Spec, vcpu: usize, pin: bool) -> Result<(), String> {
    topology::bind(&spec.topology, vcpu, pin).map_err(|e| format!("binding to CPU {vcpu}: {e}"))
}

/// Which CPU each of two workers taking turns on one thread is: the
/// thread is pinned to worker 0's CPU and takes worker 1's as its
/// identity (not its place) for worker 1's calls, where the two are on
/// different nodes (the node is what the model asks of it).
struct Seats<'a> {
    spec: &'a Spec,
    vcpus: [usize; 2],
    /// Whether a turn changes the thread's identity: only where the node
    /// differs.
    switch: bool,
}

impl<'a> Seats<'a> {
    fn of(spec: &'a Spec) -> Self {
        let vcpus = [spec.vcpu(0), spec.vcpu(1)].map(|(vcpu, _)| vcpu);
        let t = &spec.topology;
        Seats {
            spec,
            vcpus,
            switch: t.node_of(vcpus[0]) != t.node_of(vcpus[1]),
        }
    }

    /// Binds the thread to worker 0's CPU, pinned where the spec pins.
    fn pin_first(&self) -> Result<(), String> {
        bind(self.spec, self.vcpus[0], self.spec.vcpu(0).1)
    }

    /// Makes the thread worker `k` for its next call.
    fn take(&self, k: usize) -> Result<(), String> {
        if self.switch {
            bind(self.spec, self.vcpus[k], false)
        } else {
            Ok(())
        }
    }
}

/// The throughput of two workers taking turns as [`record_interleaved`]'s
/// do, each in an address space of its own (the processes-mode fixture
/// of `spec`'s workload and design): the control for what taking turns
/// costs two workers that share no address space (only what processes
/// share, such as a file both map). One CPU then
/// holds both workers' data in its caches, as no CPU does when two run
/// at once, and where that data is more than the caches keep (each
/// `page_fault3` worker's pages) every turn evicts the other's. The
/// threads' turns pay the same, so their rate is divided by this one's
/// share of the one-worker rate before it calibrates the interleaved
/// profile: what is left is what sharing the address space costs.
fn turns_apart(spec: &Spec, timing: &Timing) -> Result<f64, String> {
    let apart = Spec {
        mode: Mode::Processes,
        threads: 2,
        ..spec.clone()
    };
    let fixture = Fixture::build(&apart)?;
    let mut jobs = [fixture.job(0)?, fixture.job(1)?];
    let seats = Seats::of(&apart);
    let result = (|| {
        seats.pin_first()?;
        let mut guard = maple::pin();
        turns_rate(&mut jobs, &mut guard, &seats, timing)
    })();
    topology::unbind();
    let rate = result?;
    for job in &mut jobs {
        job.finish()?;
    }
    Ok(rate)
}

/// The throughput of `jobs` taking turns, one call each a round, on this
/// thread, seated as each in turn ([`Seats::take`]):
/// rounds for `timing.warmup`, then for `timing.duration`,
/// timed. Each phase goes on past its end to a round that ends an
/// operation of both, so the next begins with whole operations (the two
/// keep in step: both start between operations and make as many calls
/// per operation). A quiescent state every [`harness::Quiescence::EVERY`]
/// rounds, as the harness's workers announce, lets what the calls retire
/// be freed: held for the whole run, one grace period would keep every
/// node the tree's copies replaced, and the calls would write fresh
/// memory that a measured run's do not.
fn turns_rate(
    jobs: &mut [Job<'_>; 2],
    guard: &mut maple::Guard,
    seats: &Seats<'_>,
    timing: &Timing,
) -> Result<f64, String> {
    let mut turns = |until: Instant| -> Result<u64, String> {
        let (mut done, mut between) = (0, true);
        let mut quiescence = harness::Quiescence::default();
        while !between || Instant::now() < until {
            between = true;
            quiescence.step(guard);
            for (k, job) in jobs.iter_mut().enumerate() {
                seats.take(k)?;
                let n = job.call_in(guard)?;
                done += n;
                between &= n > 0;
            }
        }
        Ok(done)
    };
    turns(Instant::now() + timing.warmup)?;
    let since = Instant::now();
    let done = turns(since + timing.duration)?;
    let rate = done as f64 / since.elapsed().as_secs_f64();
    if !(rate.is_finite() && rate > 0.0) {
        return Err(format!(
            "two workers taking turns ran no operations in {:?}",
            timing.duration
        ));
    }
    Ok(rate)
}

/// Each worker's events of a recording in which two took turns
/// ([`CALL`] marks say whose turn begins, [`PAUSE`] marks end one), with
/// each worker's clock stopped while it was not its turn.
fn demux(events: Vec<Event>) -> [Vec<Event>; 2] {
    let mut out = [Vec::new(), Vec::new()];
    let mut turn: Option<usize> = None;
    // Per worker: the time spent in the other's turns so far, and when
    // its last turn ended.
    let mut away = [Duration::ZERO; 2];
    let mut left: [Option<Duration>; 2] = [None; 2];
    for e in events {
        if let What::Mark(m) = e.what {
            if m == PAUSE {
                if let Some(t) = turn.take() {
                    left[t] = Some(e.at);
                }
                continue;
            }
            if let Some(k) = CALL.iter().position(|&c| c == m) {
                if let Some(t) = turn {
                    left[t] = Some(e.at);
                }
                if let Some(l) = left[k] {
                    away[k] += e.at.saturating_sub(l);
                }
                turn = Some(k);
                continue;
            }
        }
        if let Some(t) = turn {
            out[t].push(Event {
                at: e.at.saturating_sub(away[t]),
                ..e
            });
        }
    }
    out
}

/// Threads mode: puts the address space in the mode its workers run it
/// in before workers take turns on one thread. The maple tree is written
/// in place until a second thread faults in it, and in RCU mode (copies,
/// grace periods) for good from then on; so worker 1 (`job`) first warms
/// up on a thread of its own, bound to its CPU.
fn warm_elsewhere(spec: &Spec, job: &mut Job<'_>, warmup: Duration) -> Result<(), String> {
    let (vcpu, pin) = spec.vcpu(1);
    std::thread::scope(|s| {
        s.spawn(|| -> Result<(), String> {
            bind(spec, vcpu, pin)?;
            let warmed = warm(job, warmup, false);
            topology::unbind();
            warmed
        })
        .join()
        .unwrap_or_else(|_| Err("worker 1's warm-up panicked".to_string()))
    })
}

/// Steps `job` for `warmup` (at least one step), dropping what the
/// recorder, if on, records meanwhile.
fn warm(job: &mut Job<'_>, warmup: Duration, drain: bool) -> Result<(), String> {
    let until = std::time::Instant::now() + warmup;
    let mut steps = 0u32;
    loop {
        job.step()?;
        steps = steps.wrapping_add(1);
        if drain && steps % DRAIN_EVERY == 0 {
            let _ = profile::take();
        }
        if std::time::Instant::now() >= until {
            return Ok(());
        }
    }
}

/// Runs `ops` operations with a mark before each and after the last: an
/// operation is what the harness counts as one (a step that completes
/// none, as `page_fault3`'s mapping, belongs to the next).
fn run_ops(job: &mut Job<'_>, ops: usize) -> Result<Vec<Event>, String> {
    let guard = maple::pin();
    let mut done = 0u64;
    profile::mark(OP);
    while done < ops as u64 {
        let n = job.step_in(&guard)?;
        if n > 0 {
            done += n;
            profile::mark(OP);
        }
    }
    Ok(profile::take())
}

/// The events between consecutive marks, each starting with the mark
/// that opens it and ending with the one that closes it.
fn split(events: Vec<Event>) -> Vec<Vec<Event>> {
    let marks: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.what == What::Mark(OP))
        .map(|(i, _)| i)
        .collect();
    marks
        .windows(2)
        .map(|w| events[w[0]..=w[1]].to_vec())
        .collect()
}

fn class(c: MmClass) -> LockClass {
    match c {
        MmClass::MmapLock => LockClass::MmapLock,
        MmClass::VmaLock => LockClass::VmaLock,
        MmClass::IMmap => LockClass::IMmap,
        MmClass::AnonVma => LockClass::AnonVma,
    }
}

/// The algorithm of a lock of `class` in a run with reverse-map locks of
/// `kind`.
fn kind(class: LockClass, kind: MmKind) -> LockKind {
    match class {
        LockClass::MmapLock => LockKind::Rwsem,
        LockClass::VmaLock => LockKind::Vma,
        LockClass::IMmap | LockClass::AnonVma => match kind {
            MmKind::Std => LockKind::Std,
            MmKind::Rwsem => LockKind::Rwsem,
            MmKind::Numa => LockKind::Numa,
        },
    }
}

/// What the recording says of one lock instance.
struct Seen {
    group: bool,
}

fn instances(ops: &[Vec<Event>], into: &mut HashMap<u64, Seen>) -> HashSet<u64> {
    let mut mine = HashSet::new();
    for e in ops.iter().flatten() {
        if let What::Acquire { lock, group, .. } = e.what {
            mine.insert(lock);
            let s = into.entry(lock).or_insert(Seen { group });
            s.group |= group;
        }
    }
    mine
}

/// The profile of worker 0's operations, or with `both`, of worker 0's
/// and worker 1's in turn (operation 0 of each, then operation 1, ...).
///
/// Every [`Scope::Shared`] or [`Scope::Group`] instance is a lock of its
/// own in [`Profile::locks`]. Instances one worker alone takes are never
/// contended, so they are pooled: within an operation, each gets the
/// first lock of its class and scope that no other instance holds at the
/// time (brk1's VMA locks, new every operation, are one lock).
fn convert(
    spec: &Spec,
    rate: f64,
    first: &[Vec<Event>],
    second: &[Vec<Event>],
    both: bool,
) -> Profile {
    let mut seen = HashMap::new();
    let mine = instances(first, &mut seen);
    let theirs = instances(second, &mut seen);
    let scope = |lock: u64| {
        let s = &seen[&lock];
        if s.group {
            Scope::Group
        } else if mine.contains(&lock) && theirs.contains(&lock) {
            Scope::Shared
        } else {
            Scope::Worker
        }
    };
    let mut locks: Vec<LockRef> = Vec::new();
    let mut shared: HashMap<u64, u32> = HashMap::new();
    let mut ops = Vec::with_capacity(first.len());
    let order: Vec<&Vec<Event>> = if both {
        let mut v = Vec::with_capacity(first.len() + second.len());
        for i in 0..first.len().max(second.len()) {
            v.extend(first.get(i));
            v.extend(second.get(i));
        }
        v
    } else {
        first.iter().collect()
    };
    for events in order {
        // Instance -> (lock index, holds deep) in this operation.
        let mut held: HashMap<u64, (u32, u32)> = HashMap::new();
        let mut steps = Vec::new();
        let mut last = events.first().map(|e| e.at).unwrap_or_default();
        for e in events {
            let ns = e.at.saturating_sub(last).as_nanos() as f64;
            last = e.at;
            if ns > 0.0 {
                steps.push(Step::Run { ns });
            }
            match e.what {
                What::Acquire {
                    class: c,
                    lock,
                    write,
                    ..
                } => {
                    if let Some(h) = held.get_mut(&lock) {
                        // Taken again while held (a nested read): one hold.
                        h.1 += 1;
                        continue;
                    }
                    let sc = scope(lock);
                    // Workers taking turns remake the VMA they share (its
                    // lock and anon_vma come and go with it) at every
                    // call that merges or splits it: at any time it is
                    // one VMA, so its successive instances are one lock.
                    let remade = both
                        && sc == Scope::Shared
                        && matches!(class(c), LockClass::VmaLock | LockClass::AnonVma);
                    let index = if sc == Scope::Worker || remade {
                        let c = class(c);
                        let busy: HashSet<u32> = held.values().map(|h| h.0).collect();
                        let free = locks.iter().enumerate().position(|(i, l)| {
                            l.class == c && l.scope == sc && !busy.contains(&(i as u32))
                        });
                        free.map(|i| i as u32).unwrap_or_else(|| {
                            locks.push(LockRef {
                                class: c,
                                kind: kind(c, spec.design.lock),
                                scope: sc,
                            });
                            locks.len() as u32 - 1
                        })
                    } else {
                        *shared.entry(lock).or_insert_with(|| {
                            let c = class(c);
                            locks.push(LockRef {
                                class: c,
                                kind: kind(c, spec.design.lock),
                                scope: sc,
                            });
                            locks.len() as u32 - 1
                        })
                    };
                    held.insert(lock, (index, 1));
                    steps.push(Step::Acquire { lock: index, write });
                }
                What::Release { lock } => {
                    let Some(h) = held.get_mut(&lock) else {
                        // Taken before the operation began.
                        continue;
                    };
                    h.1 -= 1;
                    if h.1 == 0 {
                        let index = h.0;
                        held.remove(&lock);
                        steps.push(Step::Release { lock: index });
                    }
                }
                What::Lines {
                    lock,
                    read,
                    written,
                    chain,
                } => {
                    if let Some(&(index, _)) = held.get(&lock) {
                        steps.push(Step::Lines {
                            lock: index,
                            read,
                            written,
                            chain,
                        });
                    }
                }
                What::Mark(_) => {}
            }
        }
        // A hold the operation did not end (none is expected: every lock
        // is released within an operation) ends with it.
        let mut open: Vec<u32> = held.values().map(|h| h.0).collect();
        open.sort_unstable();
        steps.extend(open.into_iter().map(|lock| Step::Release { lock }));
        ops.push(steps);
    }
    Profile {
        format: FORMAT,
        workload: spec.workload.name().to_string(),
        mode: spec.mode.name().to_string(),
        index: spec.design.index.to_string(),
        imap: spec.design.imap.to_string(),
        lock: spec.design.lock.to_string(),
        anon_rule: spec.design.anon_rule,
        recorded_on: spec.topology.to_string(),
        ops_per_sec: rate,
        locks,
        ops,
        converts_to: None,
        interleaved: None,
        scaled: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::harness::{Design, Mode};
    use crate::run::workload::Workload;

    fn spec(workload: Workload, mode: Mode, imap: ImapDesign) -> Spec {
        Spec {
            workload,
            mode,
            design: Design {
                imap,
                ..Design::default()
            },
            threads: 1,
            resident: 20,
            resident_vmas: 20,
            topology: std::sync::Arc::new(mm::topology::Topology::emulated(2, 2).unwrap()),
            pin: false,
        }
    }

    fn timing() -> Timing {
        Timing {
            warmup: Duration::from_millis(5),
            duration: Duration::from_millis(20),
        }
    }

    fn scopes(p: &Profile, c: LockClass) -> Vec<Scope> {
        p.locks
            .iter()
            .filter(|l| l.class == c)
            .map(|l| l.scope)
            .collect()
    }

    fn lines(p: &Profile, c: LockClass) -> u32 {
        p.ops
            .iter()
            .flatten()
            .map(|s| match *s {
                Step::Lines {
                    lock,
                    read,
                    written,
                    ..
                } if p.locks[lock as usize].class == c => read + written,
                _ => 0,
            })
            .sum()
    }

    /// The CPUs the calling thread may run on, as the kernel lists them.
    fn allowed() -> Option<String> {
        let status = std::fs::read_to_string("/proc/thread-self/status").ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .map(|l| l.trim().to_string())
    }

    /// Recording pins workers to CPUs, on a thread of its own: the caller
    /// may still run anywhere it could before.
    #[test]
    fn recording_leaves_the_callers_cpus_alone() {
        let before = allowed();
        // Threads mode adds the turns and their control, each on a thread
        // of its own.
        for mode in [Mode::Processes, Mode::Threads] {
            let mut s = spec(Workload::Brk1, mode, ImapDesign::Single);
            s.topology = mm::topology::host();
            s.pin = true;
            record(&s, 20, &timing()).unwrap();
            assert_eq!(allowed(), before, "{mode:?}");
        }
    }

    #[test]
    fn profile_brk1_processes_takes_only_its_own_locks() {
        let p = record(
            &spec(Workload::Brk1, Mode::Processes, ImapDesign::Single),
            50,
            &timing(),
        )
        .unwrap();
        assert_eq!(p.ops.len(), 50);
        assert!(!p.locks.is_empty());
        assert!(
            p.locks.iter().all(|l| l.scope == Scope::Worker),
            "{:?}",
            p.locks
        );
        assert_eq!(scopes(&p, LockClass::MmapLock), vec![Scope::Worker]);
        assert!(lines(&p, LockClass::MmapLock) > 0);
        assert!((p.mean_op_ns() - 1e9 / p.ops_per_sec).abs() < 1e-6 * p.mean_op_ns());
        // Address spaces of their own: the workers' calls never meet.
        assert!(p.interleaved.is_none());
    }

    #[test]
    fn profile_malloc1_threads_shares_the_merged_vma_when_taking_turns() {
        let p = record(
            &spec(Workload::Malloc1, Mode::Threads, ImapDesign::Single),
            10,
            &timing(),
        )
        .unwrap();
        // One after the other, each worker's mapping is gone before the
        // other maps: nothing of a VMA is shared.
        assert!(
            !scopes(&p, LockClass::VmaLock).contains(&Scope::Shared),
            "{:?}",
            p.locks
        );
        assert!(!scopes(&p, LockClass::AnonVma).contains(&Scope::Shared));
        let t = p.interleaved.as_ref().expect("threads mode takes turns");
        // Both workers' operations, more of them.
        assert_eq!(t.ops.len(), 2 * 10 * TURNS_OPS_FACTOR);
        // Taking turns, the second mapping merges with the first: one VMA
        // (its lock, its anon_vma) that both fault in, one lock of each
        // however often it is remade. (A piece a split leaves to one
        // worker alone has a lock of its own.)
        let shared = |c| {
            scopes(t, c)
                .into_iter()
                .filter(|&s| s == Scope::Shared)
                .count()
        };
        assert_eq!(shared(LockClass::VmaLock), 1);
        assert_eq!(shared(LockClass::AnonVma), 1);
        assert_eq!(scopes(t, LockClass::MmapLock), vec![Scope::Shared]);
        assert!((t.mean_op_ns() - 1e9 / t.ops_per_sec).abs() < 1e-6 * t.mean_op_ns());
        assert_eq!(t.validate(), Ok(()));
    }

    #[test]
    fn demux_stops_each_workers_clock_outside_its_turns() {
        let at = |ns: u64, what: What| Event {
            at: Duration::from_nanos(ns),
            what,
        };
        let lock = |l: u64| What::Release { lock: l };
        let events = vec![
            at(0, What::Mark(CALL[0])),
            at(10, lock(1)),
            at(20, What::Mark(PAUSE)),
            at(25, What::Mark(CALL[1])),
            at(40, lock(2)),
            at(50, What::Mark(PAUSE)),
            at(60, What::Mark(CALL[0])),
            at(65, lock(3)),
            at(70, What::Mark(CALL[1])),
            at(75, lock(4)),
        ];
        let [a, b] = demux(events);
        // Worker 0's turns are 0..20 and 60..70: at 65 its clock has run
        // 20 + 5. (The pause 20..25 is nobody's.)
        assert_eq!(a, vec![at(10, lock(1)), at(25, lock(3))]);
        // Worker 1's clock starts where the recording's does (only its
        // differences count); its turns are 25..50 and 70..: the 20 from 50
        // to 70 are taken out.
        assert_eq!(b, vec![at(40, lock(2)), at(55, lock(4))]);
    }

    #[test]
    fn profile_brk1_threads_shares_mmap_lock() {
        let p = record(
            &spec(Workload::Brk1, Mode::Threads, ImapDesign::Single),
            50,
            &timing(),
        )
        .unwrap();
        assert_eq!(scopes(&p, LockClass::MmapLock), vec![Scope::Shared]);
        let step = p.ops[0].iter().find(|s| matches!(s, Step::Acquire { .. }));
        assert_eq!(
            step,
            Some(&Step::Acquire {
                lock: 0,
                write: true
            })
        );
    }

    #[test]
    fn profile_execl_single_shares_an_i_mmap_lock_with_lines() {
        let p = record(
            &spec(Workload::Execl, Mode::Processes, ImapDesign::Single),
            20,
            &timing(),
        )
        .unwrap();
        let imap = scopes(&p, LockClass::IMmap);
        assert!(imap.contains(&Scope::Shared), "{imap:?}");
        assert!(!imap.contains(&Scope::Group));
        assert!(lines(&p, LockClass::IMmap) > 0);
        // The address space is each exec's own.
        assert!(scopes(&p, LockClass::MmapLock)
            .iter()
            .all(|&s| s == Scope::Worker));
    }

    #[test]
    fn profile_execl_split_locked_takes_group_locks() {
        let p = record(
            &spec(Workload::Execl, Mode::Processes, ImapDesign::SplitLocked),
            20,
            &timing(),
        )
        .unwrap();
        let imap = scopes(&p, LockClass::IMmap);
        assert!(imap.contains(&Scope::Group), "{imap:?}");
        assert!(lines(&p, LockClass::IMmap) > 0);
    }

    #[test]
    fn profile_adaptive_carries_its_distributed_profile() {
        let p = record(
            &spec(Workload::Execl, Mode::Processes, ImapDesign::Adaptive),
            10,
            &timing(),
        )
        .unwrap();
        let c = p.converts_to.as_ref().expect("adaptive converts");
        assert_eq!(c.profile.imap, "distributed");
        assert_eq!(c.after, mm::policy::AdaptiveConfig::default().convert_after);
        assert!(scopes(&c.profile, LockClass::IMmap).contains(&Scope::Group));
        assert!(c.profile.validate().is_ok());
    }

    #[test]
    fn profile_every_workload_validates() {
        for w in Workload::ALL {
            for mode in Mode::ALL {
                if mode == Mode::Threads && w.processes_only().is_some() {
                    continue;
                }
                let p = record(&spec(w, mode, ImapDesign::Single), 8, &timing())
                    .unwrap_or_else(|e| panic!("{w} {}: {e}", mode.name()));
                assert_eq!(p.validate(), Ok(()));
                assert_eq!(p.ops.len(), 8, "{w}");
                assert_eq!(p.workload, w.name());
                assert_eq!(p.recorded_on, "2x2");
            }
        }
    }

    #[test]
    fn profile_of_no_operations_is_refused() {
        let s = spec(Workload::Brk1, Mode::Processes, ImapDesign::Single);
        assert!(record(&s, 0, &timing()).is_err());
    }
}
