//! A deterministic discrete-event simulation of N CPUs running a
//! [`Profile`] on a [`Machine`].
//!
//! # What is simulated
//!
//! N CPUs of the machine, spread over its nodes and core complexes as
//! [`placement`] picks them, each run the profile's operations in order,
//! round and round, one simulated thread per CPU (nothing else runs on
//! it). Each CPU starts at an operation chosen from the seed and after a
//! start delay drawn from the seed (up to one mean operation), so CPUs are
//! not in lockstep. A CPU that spins or sleeps does no work.
//!
//! A threads-mode profile with [`Profile::interleaved`] operations (what
//! a worker does when the other workers' calls come between its own) has
//! two CPUs or more choose at every operation boundary: a CPU runs the
//! next interleaved operation when another CPU has taken a lock they
//! share ([`Scope::Shared`] or [`Scope::Group`]) as writer since its
//! previous operation began, and the next of the recorded one-worker
//! [`ops`](Profile::ops) otherwise. The interleaved operations are two
//! workers' in turn, and each CPU takes one worker's seat (CPU `c`
//! worker `c % 2`) and runs only that worker's: the recording is the two
//! sides of one meeting (one worker's mapping merges into the other's,
//! which then splits it), and two CPUs on the same side would meet in
//! ways it never saw. Its call can only meet another
//! worker's work through what that worker wrote under such a lock; so
//! CPUs that share no lock each run one worker's operations, and a CPU
//! that keeps a lock while the others wait runs one worker's operations
//! under it. The two profiles' locks are one instance where they are the
//! same lock (class, kind and scope).
//!
//! Steps ([`Step`]):
//!
//! - [`Step::Run`] advances the CPU's time by its `ns`;
//! - [`Step::Acquire`] / [`Step::Release`] run the lock instance's
//!   algorithm (below) and touch its lock word;
//! - [`Step::Lines`] costs the transfer of the protected data's lines when
//!   another CPU wrote them last (below).
//!
//! Consecutive `Run` and `Lines` steps, and the acquisitions and releases
//! of [`Scope::Worker`] locks (which no other CPU sees), are folded into
//! one event; every other acquisition and release happens at its exact
//! simulated time. Events run in `(time, sequence)` order, so ties are
//! broken by the order they were scheduled in, and the only randomness is
//! a splitmix64 generator seeded with [`Config::seed`] (start operations
//! and delays): the same profile, machine and configuration give the same
//! projection, bit for bit.
//!
//! # Lock instances
//!
//! Every [`LockRef`](crate::LockRef) of the profile becomes instances by
//! its [`Scope`]: [`Scope::Worker`] one per CPU (never contended, its word
//! and data stay in that CPU's caches: no transfers), [`Scope::Shared`]
//! one for all CPUs, [`Scope::Group`] one per
//! [`Machine::group_of`](crate::Machine::group_of). The kind of the
//! i_mmap and anon_vma locks ([`LockClass::IMmap`], [`LockClass::AnonVma`])
//! is replaced by [`Config::lock`] when that is set; other classes keep
//! their recorded kind.
//!
//! # Cache lines
//!
//! Each lock instance has two things in cache lines:
//!
//! - its **lock word**, one line with the CPU that wrote it last. Every
//!   acquisition (readers too: a reader adds itself to the count) costs
//!   [`Machine::transfer_ns`](crate::Machine::transfer_ns) from that CPU
//!   and makes the acquirer its writer; when the acquirer wrote the word
//!   last but another CPU spins on it, the acquisition costs one transfer
//!   to that spinner (the invalidation of its copy). A release costs the
//!   same from the word's last writer; when the releaser wrote the word
//!   last but a CPU is spinning on it (it holds a shared copy), the
//!   release costs one transfer to that spinner instead.
//!   Spinners' own reads are not charged to them (spinning is waiting
//!   time anyway).
//! - its **protected data**, treated as one group of lines with one last
//!   writer and a set of CPUs that have read it since that write. A
//!   `Lines { read, written }` step by CPU `c` costs, per line, one
//!   transfer from the last writer when that is another CPU, for at most
//!   as many lines as that writer left dirty (the lines of its sections'
//!   `written` counts: a section reads far more lines than the one before
//!   it wrote, and the clean ones stay cached where they were read):
//!   `read` lines are free if `c` has read the data since the last write
//!   (it still holds a shared copy), `written` lines always cost it. When `c` is the
//!   last writer, reads are free and each written line costs one transfer
//!   to a CPU that read the data since (the invalidation; the
//!   lowest-numbered such CPU), or nothing if none did. A step with
//!   `written > 0` makes `c` the last writer and empties the readers'
//!   set. "One transfer" per line is before overlap: of the lines
//!   charged, the step's share reached through a pointer (its `chain`
//!   over all it touched) costs [`Machine::chain`] of a transfer each, one
//!   after the other, and the rest [`Machine::overlap`] at a time (the
//!   first in full when none was reached through a pointer). The
//!   invalidations a last writer's stores cause are all overlapped.
//!   Simplifications: all lines of one lock's
//!   data move together (no per-line ownership, no partial overlap between
//!   two critical sections' lines); the first touch of a line nobody wrote
//!   yet is free; a line costs one transfer from its last writer whatever
//!   the number of sharers.
//!
//! A line moves to one CPU at a time: a word transfer that finds the
//! word's previous transfer still under way waits for it, so CPUs that
//! all write one word (readers counting themselves in and out of an rwsem)
//! serialise on it, and their throughput is bounded by the transfer time
//! however short their critical sections are. A CPU keeps the word it
//! has just received for [`Machine::keep`](crate::Machine::keep) of the
//! transfer that takes it away, even when that transfer was asked for
//! before the word arrived; what it writes to the word in that time
//! costs it nothing. So a reader whose release follows its acquisition
//! closely moves the word once per section, not twice (on this project's
//! 2-vCPU AMD guest a CPU kept a line asked of it for a median 0.37 of a
//! transfer; `docs/machines.md`, "Keep"). (The data's lines are not
//! queued this way: a lock already serialises the writers of its data.)
//!
//! A CPU owns a lock from the moment it takes it; the acquisition's word
//! transfer follows, inside the critical section. A release takes effect
//! once its word transfer is done. Transfer time spent while holding a
//! lock (the acquisition's and release's word transfers, the data lines)
//! lengthens the critical section: it is time inside the lock, reported
//! as `held` and also as `transfers`.
//!
//! # Lock algorithms ([`LockKind`])
//!
//! Modelled by what they do, not by instruction counts.
//!
//! **Rwsem** (the kernel's rwsem):
//!
//! - Fast path: a writer takes a free lock (even with waiters queued: a
//!   running writer may steal it); a reader takes it when there is no
//!   writer and no waiter.
//! - Optimistic spinning: a CPU that misses the fast path queues for the
//!   one spinning slot (the MCS/OSQ queue: only the CPU at its head spins
//!   on the lock word; the others spin on their own queue node, which
//!   costs no transfers, and each takes its turn in FIFO order). The
//!   spinner keeps spinning while a writer owns the lock and that owner is
//!   running (in its critical section, not asleep or being woken); when
//!   readers own it a writer spins at most [`READER_SPIN_NS`]; a reader
//!   does not spin on readers (it missed the fast path because waiters
//!   are queued, and does not join the readers past them: the lab's rule,
//!   which keeps a reader stream from starving a queued writer; the
//!   kernel's readers may steal there). A spinner sees a release one
//!   read of the word after it takes effect: [`Machine::chain`] of a
//!   transfer from the releaser (a dependent load of a line another CPU
//!   wrote; the exchange that then takes the lock costs the rest of the
//!   transfer). Until then the lock is free to any CPU's fast path, the
//!   releaser's own next acquisition included: a releaser whose next
//!   section comes sooner keeps the lock, and the word and data its cache
//!   holds, while the spinner spins on (as on the hardware, where a
//!   spinner polling a line another CPU writes loses such races). Then
//!   the spinner takes the lock if it is still free (a reader only if it
//!   is free or no one is queued). A spinner that cannot spin goes to
//!   sleep, and so do the spinners of every rwsem a sleeping CPU owns as
//!   writer.
//! - Sleeping: a FIFO wait queue. Going to sleep and being switched back
//!   in cost [`Machine::sleep_ns`](crate::Machine::sleep_ns) of CPU time
//!   and a wake-up takes [`Machine::wake_ns`](crate::Machine::wake_ns)
//!   before the woken CPU runs: a woken CPU runs again `wake_ns +
//!   sleep_ns` after the wake, all of it counted as sleeping. The CPU
//!   whose release wakes (or grants the lock to) a sleeper spends
//!   [`Machine::waker_cost_ns`](crate::Machine::waker_cost_ns) in the
//!   futex call before it runs on, counted as sleeping too (CPU time the
//!   lock's sleeping costs); wake-ups made by a CPU that is itself going
//!   to sleep are not charged.
//! - Release, when the lock becomes free: if the waiter at the front (the
//!   one the numa kind's policy picks) has waited [`HANDOFF_NS`] or more
//!   since it first queued, the lock is handed to it (no
//!   stealing: a spinner seeing a sleeping owner stops spinning).
//!   Otherwise the spinner, if any, takes it (once it sees the release,
//!   above). Otherwise the front waiter
//!   is served: readers at the front are granted the lock together (a
//!   batch of consecutive readers), a writer is woken and must compete
//!   for the lock again when it runs (a running CPU may take it first; the
//!   woken writer then sleeps again, keeping its place at the front).
//!   Granted waiters own the lock while they are being woken.
//! - When a CPU goes to sleep while the lock is free (every spinner gave
//!   up), the front waiter is served at once, as the kernel does when it
//!   finds the lock free while queueing.
//!
//! **Numa**: the rwsem whose queues prefer the lock's node. When the
//! spinning slot passes on, the next spinner is the oldest queued spinner
//! on the node of the CPU that just took the lock; when a waiter is
//! served, the oldest waiter on the releasing CPU's node. At most
//! [`MAX_LOCAL_HANDOFFS`] times in a row while a CPU of another node is
//! queued (each queue counts its own run); then the oldest CPU of another
//! node. Everything else is the rwsem's. (The lab's `numa` kind engages its
//! per-node policy only after a few waiters have queued and grants the
//! lock to writers it picks; the simulation prefers local CPUs always, in
//! the spin queue as well as the wait queue, and wakes writers as the
//! rwsem does: this is the NUMA-aware optimistic-spin queue the issue
//! describes.)
//!
//! **Std** (the standard library's futex `RwLock`): a writer takes a free
//! lock, a reader one with no writer holding it and no writer asleep. A
//! CPU that misses spins for [`STD_SPIN_NS`] (every spinner on the word,
//! no queue, no owner check), then sleeps on the futex (FIFO). A release
//! that frees the lock gives it to the oldest spinner if that is a writer;
//! if it is a reader, to every spinning reader when no writer sleeps, or
//! else to the oldest spinning writer; then, if any CPU sleeps, wakes the
//! oldest sleeping writer or else every sleeping reader. Woken CPUs leave the queue and compete again from the fast
//! path (spinning, then sleeping at the back). No hand-off.
//!
//! **Vma** (a VMA's lock): a reader takes the lock when no writer holds
//! it or waits for it; a writer when it is free. Nobody sleeps: a CPU
//! that misses spins until the lock is released (all on the word). A
//! release that frees the lock gives it to the oldest spinning writer, or
//! when no writer spins, to every spinning reader.
//!
//! # Adaptive conversion
//!
//! When the profile has [`Profile::converts_to`], contended acquisitions
//! (those that missed the fast path) of its [`Scope::Shared`]
//! [`LockClass::IMmap`] locks are counted; once the count reaches
//! [`Conversion::after`](crate::profile::Conversion::after), every CPU
//! switches to the conversion's profile at its next operation boundary
//! (at an operation chosen from the seed as at the start). The converted
//! profile's locks are separate instances from the first profile's. A
//! conversion's own `converts_to` is followed the same way.
//! [`Projection::converted_at_ns`] says when the switch happened.
//!
//! # Measurement
//!
//! Each CPU warms up for `ops_per_cpu / 5` operations (rounded up); its
//! window then begins, for [`Config::ops_per_cpu`] operations, from the
//! completion of its last warm-up operation to the completion of its last
//! measured one. The simulation runs until every CPU has finished its
//! window (CPUs that finish early keep running, so contention does not
//! drop).
//!
//! Throughput is counted over one window for the whole machine, from the
//! moment the last CPU's window begins to the end of the simulation:
//! [`Projection::ops_per_sec`] is the operations all CPUs completed in it
//! over its length, in simulated time. An operation under way at either
//! end counts by the fraction of its CPU's previous operation's time that
//! has passed (at most one operation): a CPU whose operations take a
//! constant time counts exactly, so the closed-form cases come out exact.
//!
//! A lock that lets running CPUs barge past sleeping ones (std) can starve
//! a CPU for the whole run. So a CPU that has not finished its warm-up by
//! the time all CPUs together have completed twice the warm-up operations
//! of a fair run begins its window then, and the simulation also stops
//! once the CPUs together have completed, since the machine's window
//! began, [`STARVED`] times the operations of every CPU's window; windows
//! not finished then end there.
//!
//! The breakdown adds up, over every CPU's own window, where its time
//! went: outside locks, and per lock class held (including transfers),
//! spinning (including the spin queue) and sleeping (including the sleep
//! and wake costs); it is given as shares of the total, which sum to 1.
//! A `Run` while holding several locks is counted to the one taken last.
//! The per-CPU windows make each CPU's shares exact; with an unfair lock
//! they cover different stretches of time for different CPUs.
//!
//! Not modelled: preemption and other threads, the cost of the spin
//! queue's own lines, cache capacity (lines never get evicted),
//! interconnect bandwidth and queueing (a transfer costs the same however
//! many are in flight), memory (not cache) latency, and the lines of
//! anything but the profile's locks.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::machine::{Machine, MachineError};
use crate::profile::{LockClass, LockKind, Profile, ProfileError, Scope, Step};

/// How long a writer spins on the lock word while readers own an rwsem
/// before it sleeps: the kernel's reader-owned spin threshold
/// (`rwsem_rspin_threshold`) is 10 µs plus 0.5 µs per reader, at most
/// 25 µs; the simulation takes its floor.
pub const READER_SPIN_NS: f64 = 10_000.0;

/// How long a queued rwsem waiter waits before the lock is handed to it,
/// with no stealing: the kernel's `RWSEM_WAIT_TIMEOUT` (4 ms at
/// `HZ=1000`), also the lab's.
pub const HANDOFF_NS: f64 = 4_000_000.0;

/// How long the standard library's lock spins before it sleeps on the
/// futex: it spins 100 times, each a `pause` (spin-loop hint) and a load,
/// taken here as 20 ns each (a `pause` takes about 10 to 40 ns depending
/// on the core).
pub const STD_SPIN_NS: f64 = 100.0 * 20.0;

/// At most this many hand-offs in a row stay on one node while a CPU on
/// another node is queued, in the `numa` kind's spin and wait queues: the
/// lab's `mm::lock::MAX_LOCAL_HANDOFFS`.
pub const MAX_LOCAL_HANDOFFS: u32 = 64;

/// The simulation stops once the CPUs together have completed, since the
/// last CPU's window began, this many times the operations of every CPU's
/// window, even if a lock starved some CPU of its window: see the module
/// docs, *Measurement*.
pub const STARVED: usize = 2;

/// A CPU that has not finished its warm-up when all CPUs together have
/// completed this many times the warm-up operations of a fair run is
/// measured from then on (a starved CPU must show in the breakdown).
const LATE: usize = 2;

/// What to simulate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Config {
    /// CPUs running the workload, placed by [`placement`].
    pub cpus: usize,
    /// The kind the i_mmap and anon_vma locks run, instead of the
    /// profile's (`None`: as recorded).
    pub lock: Option<LockKind>,
    /// Seed of the CPUs' start operations and delays.
    pub seed: u64,
    /// Operations each CPU is measured for (after a warm-up of a fifth as
    /// many).
    pub ops_per_cpu: usize,
    /// The rwsem kinds' spinners give up after this many nanoseconds of
    /// spinning whatever their owner does, and sleep: the lab's userspace
    /// rwsem, which cannot see whether its owner runs and spins a fixed
    /// number of rounds instead. `None`: the kernel's rule (spin while the
    /// owner runs). `vmbench project --validate` sets it, to predict the
    /// lock the lab runs.
    #[serde(default)]
    pub spin_budget_ns: Option<f64>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            cpus: 1,
            lock: None,
            seed: 1,
            ops_per_cpu: 200,
            spin_budget_ns: None,
        }
    }
}

/// Steps each CPU should replay (window and warm-up, roughly) for
/// [`ops_per_cpu_for`]: 200 operations of 40 steps.
pub const STEPS_PER_CPU: usize = 200 * 40;

/// Steps a CPU's window may take so that it covers the whole profile
/// ([`ops_per_cpu_for`]).
pub const WHOLE_STEPS_PER_CPU: usize = 4 * STEPS_PER_CPU;

/// An `ops_per_cpu` for the simulation of `profile` (the one it runs, see
/// [`Profile::for_cpus`]) that keeps its cost about the same whatever the
/// size of the profile's operations and that counts each recorded
/// operation alike.
///
/// The size is [`STEPS_PER_CPU`] over the mean steps of an operation,
/// from 20 to [`Config::default`]'s 200: profiles of 40 steps or fewer an
/// operation get 200, kernbench-sized ones (2000 steps) 20, which still
/// measures tens of thousands of critical sections per CPU. Then, where
/// the whole profile fits [`WHOLE_STEPS_PER_CPU`], the window is made a
/// whole number of rounds of it: all of it when it is longer (a
/// threads-mode profile's 512 interleaved operations), the largest
/// multiple of its length otherwise. A CPU's window is consecutive
/// operations from an offset drawn from the seed, so a window shorter
/// than the profile samples it, and one rare costly operation (the
/// mapping among `page_fault3`'s 512 faults, 140 times the mean) falls in
/// some CPUs' windows and not others': it left one 2-CPU prediction 29 %
/// low that the whole profile puts within 4 % (docs/projection.md).
///
/// ```
/// use vmproject::{ops_per_cpu_for, Profile, Step};
/// let op = |ns| vec![Step::Run { ns }];
/// let mut p = Profile {
///     format: vmproject::profile::FORMAT,
///     workload: "page_fault3".into(),
///     mode: "threads".into(),
///     index: "maple".into(),
///     imap: "single".into(),
///     lock: "rwsem".into(),
///     anon_rule: true,
///     recorded_on: "host(1x2)".into(),
///     ops_per_sec: 1e6,
///     locks: vec![],
///     ops: vec![op(50.0); 64],
///     converts_to: None,
///     interleaved: None,
///     scaled: None,
/// };
/// assert_eq!(ops_per_cpu_for(&p), 192);
/// p.ops = vec![op(50.0); 512];
/// assert_eq!(ops_per_cpu_for(&p), 512);
/// ```
pub fn ops_per_cpu_for(profile: &Profile) -> usize {
    let n = profile.ops.len().max(1);
    let steps: usize = profile.ops.iter().map(Vec::len).sum();
    let mean = steps.div_ceil(n).max(1);
    let sized = (STEPS_PER_CPU / mean).clamp(20, Config::default().ops_per_cpu);
    if n > WHOLE_STEPS_PER_CPU / mean {
        sized
    } else if n <= sized {
        sized / n * n
    } else {
        n
    }
}

/// Where one lock class's share of CPU time went.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ClassTime {
    /// The class.
    pub class: LockClass,
    /// In critical sections, transfers included.
    pub held: f64,
    /// Spinning for the lock (on its word or in its spin queue).
    pub spinning: f64,
    /// Asleep waiting for it, including the CPU cost of sleeping and the
    /// wake-up latency.
    pub sleeping: f64,
    /// The part of `held` that was cache-line transfers (lock word and
    /// protected data).
    pub transfers: f64,
    /// Not a share of time: of the class's acquisitions that CPUs made
    /// in their windows, the share that missed the fast path (spun or
    /// slept first), as the lab's lock statistics count `contended`.
    #[serde(default)]
    pub contended: f64,
}

/// Where CPU time went, as shares of all measured CPU time: `outside`
/// plus every class's `held`, `spinning` and `sleeping` sum to 1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Breakdown {
    /// Running while holding no lock.
    pub outside: f64,
    /// Every class, in [`LockClass::ALL`] order (zeros for classes the
    /// profile does not take).
    pub classes: Vec<ClassTime>,
}

impl Breakdown {
    /// The share of class `class`.
    pub fn class(&self, class: LockClass) -> ClassTime {
        self.classes
            .iter()
            .copied()
            .find(|c| c.class == class)
            .unwrap_or(ClassTime {
                class,
                held: 0.0,
                spinning: 0.0,
                sleeping: 0.0,
                transfers: 0.0,
                contended: 0.0,
            })
    }

    /// The sum of the shares (1, up to rounding).
    pub fn total(&self) -> f64 {
        self.outside
            + self
                .classes
                .iter()
                .map(|c| c.held + c.spinning + c.sleeping)
                .sum::<f64>()
    }

    /// All transfer time, over every class.
    pub fn transfers(&self) -> f64 {
        self.classes.iter().map(|c| c.transfers).sum()
    }
}

/// The result of one simulation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Projection {
    /// CPUs simulated.
    pub cpus: usize,
    /// Operations per second, all CPUs together, in simulated time.
    pub ops_per_sec: f64,
    /// Where the CPUs' time went.
    pub breakdown: Breakdown,
    /// When an adaptive profile converted (simulated nanoseconds from the
    /// start), if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub converted_at_ns: Option<f64>,
}

/// Why a simulation could not run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    /// Zero CPUs, or more than the machine has.
    #[error("{cpus} CPUs: machine {machine} has {max} (ask for 1 to {max})")]
    Cpus {
        /// CPUs asked for.
        cpus: usize,
        /// The machine's name.
        machine: String,
        /// Its CPUs.
        max: usize,
    },
    /// `ops_per_cpu` is 0.
    #[error("ops_per_cpu is 0: nothing to measure")]
    NoOps,
    /// A spin budget that is negative or not a number.
    #[error("spin budget {0} ns: it must be finite and not negative")]
    SpinBudget(f64),
    /// The profile does not validate.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// The machine description cannot be simulated.
    #[error(transparent)]
    Machine(#[from] MachineError),
    /// The operations take no simulated time, so there is no rate.
    #[error("profile {workload}: its operations take no time on machine {machine}")]
    NoTime {
        /// The profile's workload.
        workload: String,
        /// The machine's name.
        machine: String,
    },
    /// Every CPU waits for a lock that nobody will release: the profile
    /// takes locks in orders that deadlock.
    #[error("profile {workload}: deadlock at {at_ns} ns (locks taken in conflicting orders)")]
    Deadlock {
        /// The profile's workload.
        workload: String,
        /// Simulated time.
        at_ns: f64,
    },
}

/// How many transfer times `lines` lines of one critical section cost
/// when `chained` of every line it touched (a share, from the step's
/// [`Step::Lines::chain`](crate::Step::Lines)) were reached through a
/// pointer: those [`Machine::chain`] each, one after the other; the rest
/// overlapped [`Machine::overlap`] at a time. With none reached through a
/// pointer the first line costs in full, as a lone miss does.
fn lines_cost(machine: &Machine, lines: u32, chained: f64) -> f64 {
    if lines == 0 {
        return 0.0;
    }
    let overlap = machine.overlap.max(1.0);
    if chained <= 0.0 {
        return 1.0 + f64::from(lines - 1) / overlap;
    }
    let dependent = f64::from(lines) * chained.min(1.0);
    dependent * machine.chain + (f64::from(lines) - dependent) / overlap
}

/// The share of a `Lines` step's lines reached through a pointer.
fn chained(read: u32, written: u32, chain: u32) -> f64 {
    let touched = u64::from(read) + u64::from(written);
    if touched == 0 {
        0.0
    } else {
        f64::from(chain) / touched as f64
    }
}

/// The machine CPUs that `n` simulated CPUs run on: spread over the
/// nodes first (CPU `k` on node `k mod nodes`), then over each node's
/// core complexes, as the kernel's load balancer spreads `n` busy tasks
/// over NUMA nodes and last-level caches before it doubles any up; `n`
/// equal to the machine's CPUs uses every one.
///
/// ```
/// let m = vmproject::Machine::parse("12x32").unwrap();
/// let p = vmproject::sim::placement(&m, 24);
/// // Two CPUs on every node, in different core complexes.
/// assert_eq!(&p[..2], &[0, 32]);
/// assert_eq!(p[12], 8);
/// ```
pub fn placement(machine: &Machine, n: usize) -> Vec<usize> {
    let nodes = machine.nodes.max(1);
    let per_node = machine.cpus_per_node.max(1);
    let ccx = machine.ccx_cpus.clamp(1, per_node);
    let complexes = per_node / ccx;
    (0..n)
        .map(|k| {
            let node = k % nodes;
            let i = k / nodes;
            let (complex, slot) = (i % complexes, i / complexes);
            node * per_node + complex * ccx + slot % ccx
        })
        .collect()
}

/// The operation CPU `c` starts at: the one `offset` picks, moved to
/// the CPU's own seat (`c % seats`) when `seats` workers' operations
/// alternate in the list.
fn seated(offset: u64, c: usize, ops: usize, seats: usize) -> usize {
    let first = (offset % ops as u64) as usize;
    first - first % seats + c % seats
}

/// Simulates `config.cpus` CPUs of `machine` running `profile`.
pub fn simulate(
    profile: &Profile,
    machine: &Machine,
    config: &Config,
) -> Result<Projection, SimError> {
    profile.validate()?;
    check_machine(machine)?;
    if config.cpus == 0 || config.cpus > machine.cpus() {
        return Err(SimError::Cpus {
            cpus: config.cpus,
            machine: machine.name.clone(),
            max: machine.cpus(),
        });
    }
    if config.ops_per_cpu == 0 {
        return Err(SimError::NoOps);
    }
    if let Some(b) = config.spin_budget_ns {
        if !b.is_finite() || b < 0.0 {
            return Err(SimError::SpinBudget(b));
        }
    }
    // Two CPUs or more of a threads-mode profile run what its workers do
    // when their calls meet.
    let interleaved = profile.for_cpus(config.cpus);
    let alone = (!std::ptr::eq(interleaved, profile)).then_some(profile);
    let profile = interleaved;
    let mut sim = Sim::new(profile, alone, machine, config);
    sim.run()?;
    sim.result(profile, machine)
}

/// What the simulation relies on in a machine description: at least one
/// node and CPU, a square distance matrix, finite non-negative times.
fn check_machine(m: &Machine) -> Result<(), MachineError> {
    let bad = |why: String| {
        Err(MachineError {
            name: m.name.clone(),
            why,
        })
    };
    if m.nodes.checked_mul(m.cpus_per_node).is_none() {
        return bad(format!(
            "{} nodes of {} CPUs is too many CPUs",
            m.nodes, m.cpus_per_node
        ));
    }
    if m.nodes == 0 || m.cpus_per_node == 0 {
        return bad(format!(
            "{} nodes of {} CPUs: need at least one of each",
            m.nodes, m.cpus_per_node
        ));
    }
    if m.remote_ns.len() != m.nodes || m.remote_ns.iter().any(|r| r.len() != m.nodes) {
        return bad(format!(
            "the distance matrix is not {0}×{0} for {0} nodes",
            m.nodes
        ));
    }
    let times = [m.ccx_ns, m.node_ns, m.wake_ns, m.sleep_ns];
    if times
        .iter()
        .chain(m.remote_ns.iter().flatten())
        .any(|t| !t.is_finite() || *t < 0.0)
    {
        return bad("a latency is negative or not finite".to_string());
    }
    Ok(())
}

/// No CPU.
const NONE: u32 = u32::MAX;

/// splitmix64: a small, well-mixed generator; the simulation needs only a
/// few draws per CPU.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A CPU's next resumption. Each CPU has at most one that counts: `gen`
/// must match the CPU's, so rescheduling a CPU cancels its older event.
struct Event {
    t: f64,
    seq: u64,
    cpu: u32,
    gen: u32,
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Event {}

impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Event {
    /// Reversed, so that the max-heap pops the earliest (then first
    /// scheduled) event.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .t
            .total_cmp(&self.t)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

/// What a CPU is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Running its steps (an event resumes it).
    Run,
    /// Releasing `inst`: the word's transfer is under way (an event
    /// completes the release).
    Release,
    /// Spinning for `inst` (maybe with a timeout event).
    Spin,
    /// Asleep in `inst`'s wait queue (no event).
    Sleep,
    /// Woken (or granted `inst`, see `granted`), running again at its
    /// event.
    Wake,
}

struct Cpu {
    state: State,
    /// The lock instance it waits for or releases.
    inst: u32,
    /// Whether it wants `inst` exclusive.
    write: bool,
    /// Granted `inst` while asleep.
    granted: bool,
    /// In `inst`'s wait queue (an rwsem writer stays there while woken).
    in_queue: bool,
    /// When the current spin or sleep began.
    since: f64,
    /// When it first queued to sleep for `inst` (for the hand-off).
    queued_at: f64,
    /// When its spinning on a reader-owned rwsem ends.
    rspin_until: f64,
    /// When its pending event (the one `gen` names) is due.
    armed: f64,
    gen: u32,
    node: usize,
    /// Profile stage (0, or later after conversions), operation, step.
    stage: usize,
    op: usize,
    step: usize,
    /// Whether its current operation is the alone profile's (see
    /// [`Sim::alone`]), and that profile's next operation.
    alone: bool,
    alone_op: usize,
    /// [`Sim::shared_writes`] when its current operation began, and its
    /// own writer acquisitions of shared locks since.
    writes_at: u64,
    own_writes: u64,
    /// The offset its operations start at, from the seed.
    offset: u64,
    /// Instances held, in acquisition order.
    held: Vec<u32>,
    done: usize,
    measuring: bool,
    /// Its last two operations' completion times.
    t_prev: f64,
    t_last: f64,
    /// Operations done when its window began (`usize::MAX`: not yet).
    base: usize,
    win_start: f64,
    win_end: f64,
}

impl Cpu {
    fn running(&self) -> bool {
        !matches!(self.state, State::Sleep | State::Wake)
    }
}

/// CPUs queued by node (one queue for kinds that ignore nodes), with
/// arrival numbers giving the order across queues.
struct NodeQueue {
    qs: Vec<VecDeque<(u64, u32)>>,
    len: usize,
    seq: u64,
    /// Hand-offs in a row that stayed local while a remote CPU was queued.
    run: u32,
}

impl NodeQueue {
    fn new(queues: usize) -> Self {
        NodeQueue {
            qs: (0..queues).map(|_| VecDeque::new()).collect(),
            len: 0,
            seq: 0,
            run: 0,
        }
    }

    fn queue_of(&self, node: usize) -> usize {
        if self.qs.len() == 1 {
            0
        } else {
            node
        }
    }

    fn push(&mut self, node: usize, cpu: u32) {
        let q = self.queue_of(node);
        self.qs[q].push_back((self.seq, cpu));
        self.seq += 1;
        self.len += 1;
    }

    /// The queue whose front arrived first, leaving out queue `skip`.
    fn oldest(&self, skip: usize) -> Option<usize> {
        let mut best: Option<(u64, usize)> = None;
        for (i, q) in self.qs.iter().enumerate() {
            if i == skip {
                continue;
            }
            if let Some(&(s, _)) = q.front() {
                if best.is_none_or(|(b, _)| s < b) {
                    best = Some((s, i));
                }
            }
        }
        best.map(|(_, i)| i)
    }

    /// The queue to serve next: the oldest CPU, or with `local` the
    /// oldest on `node` unless [`MAX_LOCAL_HANDOFFS`] in a row have stayed
    /// local while a remote CPU waited. `commit` counts the choice.
    fn pick(&mut self, node: usize, local: bool, commit: bool) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        if !local || self.qs.len() == 1 {
            return self.oldest(usize::MAX);
        }
        let here = (!self.qs[node].is_empty()).then_some(node);
        let remote = self.oldest(node);
        let (q, run) = match (here, remote) {
            (Some(l), Some(_)) if self.run < MAX_LOCAL_HANDOFFS => (l, self.run + 1),
            (_, Some(r)) => (r, 0),
            (Some(l), None) => (l, 0),
            (None, None) => return None,
        };
        if commit {
            self.run = run;
        }
        Some(q)
    }

    fn front(&self, q: usize) -> Option<u32> {
        self.qs[q].front().map(|&(_, c)| c)
    }

    fn pop(&mut self, q: usize) -> Option<u32> {
        let c = self.qs[q].pop_front().map(|(_, c)| c);
        if c.is_some() {
            self.len -= 1;
        }
        c
    }

    fn remove(&mut self, node: usize, cpu: u32) {
        let q = self.queue_of(node);
        if let Some(pos) = self.qs[q].iter().position(|&(_, c)| c == cpu) {
            self.qs[q].remove(pos);
            self.len -= 1;
        }
    }
}

struct Inst {
    kind: LockKind,
    class: usize,
    stage: usize,
    /// Its contended acquisitions count towards a conversion.
    counts: bool,
    /// One per CPU: its lines never move.
    worker: bool,
    writer: u32,
    readers: u32,
    /// The lock word's last writer.
    word: u32,
    /// When the word's last transfer completes: a line moves to one CPU
    /// at a time, so transfers of one word queue behind each other.
    word_free: f64,
    /// CPUs the word is queued to leave and until when it stays with
    /// each ([`Machine::keep`](crate::Machine::keep) of the transfer that
    /// takes it away): their writes until then cost nothing. Entries in
    /// the past are dropped as the word is written.
    word_kept: Vec<(u32, f64)>,
    /// Rwsem kinds: when a release last left the lock free, and by whom:
    /// a spinner sees it free only once its read of the word has brought
    /// the releaser's store over.
    freed_at: f64,
    freed_by: u32,
    /// The protected data's last writer.
    data: u32,
    /// Lines of the data its last writer left dirty: what another CPU's
    /// section can have to fetch from it at most.
    dirty: u32,
    /// Start of its readers-since-the-last-write bitset in `Sim::sharers`.
    sharers: usize,
    /// Rwsem kinds: the CPU spinning on the word.
    spinner: u32,
    /// Rwsem kinds: the spin queue behind it.
    osq: NodeQueue,
    /// Std and vma: every spinning CPU, in arrival order.
    spin: VecDeque<u32>,
    /// Writers among `spin`.
    spin_writers: u32,
    waiters: NodeQueue,
    /// Writers asleep in `waiters` (std).
    wait_writers: u32,
}

impl Inst {
    fn free(&self) -> bool {
        self.writer == NONE && self.readers == 0
    }

    /// A CPU other than `c` that spins on the word, holding a copy of
    /// its line (the rwsem's spinner, or the first of the other kinds'),
    /// or [`NONE`].
    fn spinning_other(&self, c: u32) -> u32 {
        if self.spinner != NONE && self.spinner != c {
            self.spinner
        } else {
            self.spin.iter().copied().find(|&s| s != c).unwrap_or(NONE)
        }
    }

    fn rwsem(&self) -> bool {
        matches!(self.kind, LockKind::Rwsem | LockKind::Numa)
    }
}

/// Where a lock of a profile stage has its instances.
#[derive(Clone, Copy)]
struct Placement {
    base: u32,
    scope: Scope,
}

/// Time shares by class: held, spinning, sleeping, transfers.
const HELD: usize = 0;
const SPIN: usize = 1;
const SLEEP: usize = 2;
const XFER: usize = 3;

fn class_index(c: LockClass) -> usize {
    match c {
        LockClass::MmapLock => 0,
        LockClass::VmaLock => 1,
        LockClass::IMmap => 2,
        LockClass::AnonVma => 3,
    }
}

struct Sim<'a> {
    machine: &'a Machine,
    /// [`Config::spin_budget_ns`].
    spin_budget: Option<f64>,
    /// CPU time a release spends waking a sleeper
    /// ([`Machine::waker_cost_ns`]).
    waker_ns: f64,
    /// The machine CPU each simulated CPU runs on ([`placement`]).
    place: Vec<usize>,
    /// The profile and the ones it converts to, in order.
    profiles: Vec<&'a Profile>,
    places: Vec<Vec<Placement>>,
    group: Vec<u32>,
    cpus: Vec<Cpu>,
    insts: Vec<Inst>,
    sharers: Vec<u64>,
    words: usize,
    heap: BinaryHeap<Event>,
    seq: u64,
    now: f64,
    warmup: usize,
    measure: usize,
    finished: usize,
    /// Operations completed, all CPUs together, and where the run stops
    /// if a lock starves some CPU of its window.
    ops: usize,
    cap: usize,
    /// CPUs whose windows have begun; when the last one began, and every
    /// CPU's [`Sim::progress`] then.
    started: usize,
    t_start: Option<f64>,
    p_start: Vec<f64>,
    stage: usize,
    /// A threads-mode profile's operations as one worker ran them, when
    /// the simulation runs its interleaved ones, and where their locks'
    /// instances are.
    alone: Option<&'a Profile>,
    alone_places: Vec<Placement>,
    /// How many workers' operations alternate in the first stage's list:
    /// 2 for an interleaved profile (worker 0's, worker 1's, in turn) of
    /// an even length, when each CPU takes one worker's seat and steps
    /// over the other's operations; 1 otherwise.
    seats: usize,
    /// Writer acquisitions of locks other CPUs see, all CPUs together.
    shared_writes: u64,
    contended: u64,
    converted_at: Option<f64>,
    outside: f64,
    classes: [[f64; 4]; 4],
    /// By class: acquisitions CPUs made in their windows, and how many of
    /// them missed the fast path.
    acquired: [[u64; 2]; 4],
}

impl<'a> Sim<'a> {
    fn new(
        profile: &'a Profile,
        alone: Option<&'a Profile>,
        machine: &'a Machine,
        config: &Config,
    ) -> Self {
        let n = config.cpus;
        let mut profiles = vec![profile];
        while let Some(c) = &profiles[profiles.len() - 1].converts_to {
            profiles.push(&c.profile);
        }
        // Dense group numbers for the CPUs simulated.
        // (A CPU's group is at most its own number.)
        let place = placement(machine, n);
        let mut seen: Vec<u32> = vec![NONE; machine.cpus()];
        let mut groups = 0u32;
        let group: Vec<u32> = (0..n)
            .map(|c| {
                let g = machine.group_of(place[c]);
                if seen[g] == NONE {
                    seen[g] = groups;
                    groups += 1;
                }
                seen[g]
            })
            .collect();
        let words = n.div_ceil(64);
        let mut insts = Vec::new();
        let mut nsharers = 0;
        let stages = profiles.len();
        // Makes a lock's instances (by its scope) for a profile stage.
        let mut make = |l: &crate::profile::LockRef, stage: usize| {
            let count = match l.scope {
                Scope::Worker => n,
                Scope::Shared => 1,
                Scope::Group => groups as usize,
            };
            let at = Placement {
                base: insts.len() as u32,
                scope: l.scope,
            };
            let kind = match (l.class, config.lock) {
                (LockClass::IMmap | LockClass::AnonVma, Some(k)) => k,
                _ => l.kind,
            };
            let queues = if kind == LockKind::Numa {
                machine.nodes
            } else {
                1
            };
            for _ in 0..count {
                insts.push(Inst {
                    kind,
                    class: class_index(l.class),
                    stage,
                    counts: l.class == LockClass::IMmap
                        && l.scope == Scope::Shared
                        && stage + 1 < stages,
                    worker: l.scope == Scope::Worker,
                    writer: NONE,
                    readers: 0,
                    word: NONE,
                    word_free: 0.0,
                    word_kept: Vec::new(),
                    freed_at: f64::NEG_INFINITY,
                    freed_by: NONE,
                    data: NONE,
                    dirty: 0,
                    sharers: if l.scope == Scope::Worker {
                        0
                    } else {
                        nsharers += words;
                        nsharers - words
                    },
                    spinner: NONE,
                    osq: NodeQueue::new(queues),
                    spin: VecDeque::new(),
                    spin_writers: 0,
                    waiters: NodeQueue::new(queues),
                    wait_writers: 0,
                });
            }
            at
        };
        let places: Vec<Vec<Placement>> = profiles
            .iter()
            .enumerate()
            .map(|(stage, p)| p.locks.iter().map(|l| make(l, stage)).collect())
            .collect();
        // The alone profile's locks are the interleaved one's instances
        // where they are the same lock (class, kind and scope).
        let alone_places = alone.map_or_else(Vec::new, |a| {
            a.locks
                .iter()
                .enumerate()
                .map(|(k, l)| {
                    let same = profiles[0].locks.get(k) == Some(l);
                    match (same, profiles[0].locks.iter().position(|m| m == l)) {
                        (true, _) => places[0][k],
                        (false, Some(j)) => places[0][j],
                        (false, None) => make(l, 0),
                    }
                })
                .collect()
        });
        let sharers = vec![0; nsharers];
        let mut rng = SplitMix(config.seed);
        let mean = profile.mean_op_ns();
        // One worker's side of the turns per CPU (module docs).
        let seats = if alone.is_some() && profile.ops.len() % 2 == 0 {
            2
        } else {
            1
        };
        let mut sim = Sim {
            machine,
            spin_budget: config.spin_budget_ns,
            waker_ns: machine.waker_cost_ns(),
            place,
            profiles,
            places,
            group,
            cpus: Vec::with_capacity(n),
            insts,
            sharers,
            words,
            heap: BinaryHeap::with_capacity(2 * n),
            seq: 0,
            now: 0.0,
            warmup: config.ops_per_cpu.div_ceil(5),
            measure: config.ops_per_cpu,
            finished: 0,
            ops: 0,
            started: 0,
            t_start: None,
            p_start: vec![0.0; n],
            cap: usize::MAX,
            stage: 0,
            alone,
            alone_places,
            seats,
            shared_writes: 0,
            contended: 0,
            converted_at: None,
            outside: 0.0,
            classes: [[0.0; 4]; 4],
            acquired: [[0; 2]; 4],
        };
        let max_held = sim.profiles.iter().map(|p| p.locks.len()).max();
        for c in 0..n {
            let offset = rng.next();
            let start = rng.unit() * mean;
            let first = seated(offset, c, profile.ops.len(), seats);
            sim.cpus.push(Cpu {
                state: State::Run,
                inst: NONE,
                write: false,
                granted: false,
                in_queue: false,
                since: 0.0,
                queued_at: 0.0,
                rspin_until: f64::INFINITY,
                armed: f64::NEG_INFINITY,
                gen: 0,
                node: machine.node_of(sim.place[c]),
                stage: 0,
                op: first,
                step: 0,
                alone: false,
                alone_op: alone.map_or(0, |a| (offset % a.ops.len() as u64) as usize),
                writes_at: 0,
                own_writes: 0,
                offset,
                held: Vec::with_capacity(max_held.unwrap_or(0)),
                done: 0,
                measuring: false,
                t_prev: f64::NEG_INFINITY,
                t_last: f64::NEG_INFINITY,
                base: usize::MAX,
                win_start: 0.0,
                win_end: 0.0,
            });
            sim.schedule(c, start);
        }
        sim
    }

    fn schedule(&mut self, c: usize, t: f64) {
        let cpu = &mut self.cpus[c];
        cpu.gen = cpu.gen.wrapping_add(1);
        cpu.armed = t;
        self.heap.push(Event {
            t,
            seq: self.seq,
            cpu: c as u32,
            gen: cpu.gen,
        });
        self.seq += 1;
    }

    fn run(&mut self) -> Result<(), SimError> {
        let n = self.cpus.len();
        while self.finished < n && self.ops < self.cap {
            let Some(ev) = self.heap.pop() else {
                return Err(SimError::Deadlock {
                    workload: self.profiles[0].workload.clone(),
                    at_ns: self.now,
                });
            };
            let c = ev.cpu as usize;
            if ev.gen != self.cpus[c].gen {
                continue;
            }
            self.now = ev.t;
            match self.cpus[c].state {
                State::Run => self.run_cpu(c, 0.0),
                State::Release => {
                    let i = self.cpus[c].inst as usize;
                    self.cpus[c].state = State::Run;
                    let waking = self.release(c, i);
                    self.run_cpu(c, waking);
                }
                State::Wake => self.resume(c),
                State::Spin => self.spin_timeout(c),
                State::Sleep => {}
            }
        }
        // Stopped by the cap: the starved CPUs' windows end now.
        let now = self.now;
        for c in 0..n {
            if !self.cpus[c].measuring {
                continue;
            }
            let cpu = &self.cpus[c];
            let (waiting, i) = (self.waited(c), cpu.inst as usize);
            match cpu.state {
                State::Spin => self.add(c, i, SPIN, waiting),
                State::Sleep | State::Wake => self.add(c, i, SLEEP, waiting),
                State::Run | State::Release => {}
            }
            let cpu = &mut self.cpus[c];
            cpu.measuring = false;
            cpu.win_end = now;
        }
        Ok(())
    }

    fn result(&self, profile: &Profile, machine: &Machine) -> Result<Projection, SimError> {
        let no_time = || SimError::NoTime {
            workload: profile.workload.clone(),
            machine: machine.name.clone(),
        };
        let start = self.t_start.unwrap_or(self.now);
        let span = self.now - start;
        if span <= 0.0 {
            return Err(no_time());
        }
        let ops: f64 = (0..self.cpus.len())
            .map(|c| self.progress(c) - self.p_start[c])
            .sum();
        let rate = ops / span;
        let total = self.outside
            + self
                .classes
                .iter()
                .map(|c| c[HELD] + c[SPIN] + c[SLEEP])
                .sum::<f64>();
        if total <= 0.0 {
            return Err(no_time());
        }
        let classes = LockClass::ALL
            .iter()
            .map(|&class| {
                let t = self.classes[class_index(class)];
                ClassTime {
                    class,
                    held: t[HELD] / total,
                    spinning: t[SPIN] / total,
                    sleeping: t[SLEEP] / total,
                    transfers: t[XFER] / total,
                    contended: {
                        let [acquired, missed] = self.acquired[class_index(class)];
                        if acquired == 0 {
                            0.0
                        } else {
                            missed as f64 / acquired as f64
                        }
                    },
                }
            })
            .collect();
        Ok(Projection {
            cpus: self.cpus.len(),
            ops_per_sec: rate * 1e9,
            breakdown: Breakdown {
                outside: self.outside / total,
                classes,
            },
            converted_at_ns: self.converted_at,
        })
    }

    // ---- accounting ----

    fn add(&mut self, c: usize, inst: usize, what: usize, dt: f64) {
        if self.cpus[c].measuring {
            let class = self.insts[inst].class;
            self.classes[class][what] += dt;
            if what == XFER {
                self.classes[class][HELD] += dt;
            }
        }
    }

    fn add_run(&mut self, c: usize, dt: f64) {
        if !self.cpus[c].measuring {
            return;
        }
        match self.cpus[c].held.last() {
            Some(&i) => {
                let class = self.insts[i as usize].class;
                self.classes[class][HELD] += dt;
            }
            None => self.outside += dt,
        }
    }

    /// How long CPU `c` has waited, within its window.
    fn waited(&self, c: usize) -> f64 {
        let cpu = &self.cpus[c];
        self.now - cpu.since.max(cpu.win_start)
    }

    fn xfer(&self, from: u32, to: usize) -> f64 {
        if from == NONE || from as usize == to {
            0.0
        } else {
            self.machine
                .transfer_ns(self.place[from as usize], self.place[to])
        }
    }

    // ---- steps ----

    fn inst_of(&self, c: usize, lock: u32) -> usize {
        let cpu = &self.cpus[c];
        let p = if cpu.alone {
            self.alone_places[lock as usize]
        } else {
            self.places[cpu.stage][lock as usize]
        };
        p.base as usize
            + match p.scope {
                Scope::Worker => c,
                Scope::Shared => 0,
                Scope::Group => self.group[c] as usize,
            }
    }

    /// Runs CPU `c`'s steps from now, `dt` ns of which are already taken.
    fn run_cpu(&mut self, c: usize, mut dt: f64) {
        self.cpus[c].state = State::Run;
        let mut fresh = dt == 0.0;
        loop {
            let cpu = &self.cpus[c];
            let op = match (cpu.alone, self.alone) {
                (true, Some(a)) => &a.ops[cpu.alone_op],
                _ => &self.profiles[cpu.stage].ops[cpu.op],
            };
            let Some(&step) = op.get(cpu.step) else {
                // An operation ends at an event of its own, so that every
                // CPU gets its turn even when operations take no time.
                if dt > 0.0 || !fresh {
                    self.schedule(c, self.now + dt);
                    return;
                }
                self.complete_op(c);
                fresh = false;
                if self.finished == self.cpus.len() {
                    return;
                }
                continue;
            };
            fresh = false;
            match step {
                Step::Run { ns } => {
                    self.add_run(c, ns);
                    dt += ns;
                    self.cpus[c].step += 1;
                }
                Step::Lines {
                    lock,
                    read,
                    written,
                    chain,
                } => {
                    let i = self.inst_of(c, lock);
                    let cost = self.lines(i, c, read, written, chain);
                    self.add(c, i, XFER, cost);
                    dt += cost;
                    self.cpus[c].step += 1;
                }
                Step::Acquire { lock, write } => {
                    let i = self.inst_of(c, lock);
                    if self.insts[i].worker {
                        // Nobody else sees this CPU's own lock: no event.
                        self.count_acquisition(c, i);
                        self.cpus[c].step += 1;
                        self.own(c, i, write);
                        continue;
                    }
                    if dt > 0.0 {
                        self.schedule(c, self.now + dt);
                        return;
                    }
                    self.cpus[c].step += 1;
                    self.count_acquisition(c, i);
                    match self.acquire(c, i, write) {
                        Some(cost) => dt += cost,
                        None => return,
                    }
                }
                Step::Release { lock } => {
                    let i = self.inst_of(c, lock);
                    if self.insts[i].worker {
                        self.cpus[c].step += 1;
                        dt += self.release(c, i);
                        continue;
                    }
                    if dt > 0.0 {
                        self.schedule(c, self.now + dt);
                        return;
                    }
                    self.cpus[c].step += 1;
                    let cost = self.word_write(i, c);
                    if cost > 0.0 {
                        self.add(c, i, XFER, cost);
                        self.cpus[c].state = State::Release;
                        self.cpus[c].inst = i as u32;
                        self.schedule(c, self.now + cost);
                        return;
                    }
                    dt += self.release(c, i);
                }
            }
        }
    }

    fn complete_op(&mut self, c: usize) {
        let now = self.now;
        let warmup = self.warmup;
        let stage = self.stage;
        self.ops += 1;
        let measure = self.measure;
        let cpu = &mut self.cpus[c];
        cpu.done += 1;
        cpu.t_prev = cpu.t_last;
        cpu.t_last = now;
        if cpu.base == usize::MAX && cpu.done == warmup {
            cpu.measuring = true;
            cpu.base = warmup;
            cpu.win_start = now;
            self.started += 1;
        }
        if cpu.measuring && cpu.done == cpu.base + measure {
            cpu.measuring = false;
            cpu.win_end = now;
            self.finished += 1;
        }

        let ops = self.profiles[stage].ops.len();
        // An operation meets the other CPUs' work when one of them wrote
        // under a lock they share since this CPU's last one began.
        let met = self.shared_writes - cpu.writes_at > cpu.own_writes;
        cpu.writes_at = self.shared_writes;
        cpu.own_writes = 0;
        if cpu.stage != stage {
            cpu.stage = stage;
            cpu.alone = false;
            cpu.op = (cpu.offset % ops as u64) as usize;
        } else if let (false, Some(a)) = (met || stage != 0, self.alone) {
            cpu.alone_op = (cpu.alone_op + 1) % a.ops.len();
            cpu.alone = true;
        } else {
            let stride = if stage == 0 { self.seats } else { 1 };
            cpu.op = (cpu.op + stride) % ops;
            cpu.alone = false;
        }
        cpu.step = 0;
        if self.ops == LATE * warmup * self.cpus.len() {
            // CPUs starved through their warm-up are measured from now.
            for cpu in self.cpus.iter_mut().filter(|c| c.base == usize::MAX) {
                cpu.measuring = true;
                cpu.base = cpu.done;
                cpu.win_start = now;
                self.started += 1;
            }
        }
        if self.started == self.cpus.len() && self.t_start.is_none() {
            self.t_start = Some(now);
            self.cap = self.ops + STARVED * self.measure * self.cpus.len();
            for k in 0..self.cpus.len() {
                self.p_start[k] = self.progress(k);
            }
        }
    }

    /// How many operations CPU `c` has done by now, the one under way
    /// counted by the fraction of its previous operation's time that has
    /// passed since it began (at most 1).
    fn progress(&self, c: usize) -> f64 {
        let cpu = &self.cpus[c];
        let last = cpu.t_last - cpu.t_prev;
        let part = if last > 0.0 {
            ((self.now - cpu.t_last) / last).min(1.0)
        } else {
            0.0
        };
        cpu.done as f64 + part
    }

    /// The cost of a `Lines` step of CPU `c` on instance `i`'s data, of
    /// whose lines `chain` were reached through a pointer.
    fn lines(&mut self, i: usize, c: usize, read: u32, written: u32, chain: u32) -> f64 {
        let chained = chained(read, written, chain);
        let machine = self.machine;
        let inst = &self.insts[i];
        if inst.worker {
            return 0.0;
        }
        let (w, base, dirty) = (inst.data, inst.sharers, inst.dirty);
        let bits = &mut self.sharers[base..base + self.words];
        let (word, bit) = (c / 64, 1u64 << (c % 64));
        let shared = bits[word] & bit != 0;
        if written == 0 {
            if w == NONE || w as usize == c || shared {
                return 0.0;
            }
            bits[word] |= bit;
            // Only the lines the last writer dirtied move; the rest of
            // what this section reads is clean and already cached here.
            return lines_cost(machine, read.min(dirty), chained)
                * machine.transfer_ns(self.place[w as usize], self.place[c]);
        }
        let (cost, now_dirty) = if w == NONE {
            (0.0, written)
        } else if w as usize != c {
            let lines = if shared {
                written
            } else {
                (read + written).min(dirty.max(written))
            };
            (
                lines_cost(machine, lines, chained)
                    * machine.transfer_ns(self.place[w as usize], self.place[c]),
                written,
            )
        } else {
            // Its own data: invalidating the copies of CPUs that read it,
            // stores the CPU issues without waiting for each (it holds
            // every line already, so no load waits on another).
            match bits.iter().position(|&b| b != 0) {
                Some(k) => {
                    let other = k * 64 + bits[k].trailing_zeros() as usize;
                    (
                        lines_cost(machine, written, 0.0)
                            * machine.transfer_ns(self.place[other], self.place[c]),
                        written,
                    )
                }
                None => (0.0, dirty.max(written)),
            }
        };
        bits.fill(0);
        self.insts[i].data = c as u32;
        self.insts[i].dirty = now_dirty;
        cost
    }

    // ---- locks ----

    /// Tries to take `i` for CPU `c`: the cost of the word if it got it,
    /// `None` if it now waits (spinning or asleep).
    fn acquire(&mut self, c: usize, i: usize, write: bool) -> Option<f64> {
        if self.fast_ok(i, write) {
            return Some(self.take(c, i, write));
        }
        let inst = &self.insts[i];
        if self.cpus[c].measuring {
            self.acquired[inst.class][1] += 1;
        }
        if inst.counts && inst.stage == self.stage {
            self.contended += 1;
            let after = self.profiles[self.stage]
                .converts_to
                .as_ref()
                .map_or(u64::MAX, |v| u64::from(v.after));
            if self.contended >= after {
                self.stage += 1;
                self.contended = 0;
                self.converted_at.get_or_insert(self.now);
            }
        }
        self.block(c, i, write);
        None
    }

    /// Counts an acquisition of `i` by `c` if `c` is in its window.
    fn count_acquisition(&mut self, c: usize, i: usize) {
        if self.cpus[c].measuring {
            self.acquired[self.insts[i].class][0] += 1;
        }
    }

    fn fast_ok(&self, i: usize, write: bool) -> bool {
        let inst = &self.insts[i];
        if write {
            return inst.free();
        }
        inst.writer == NONE
            && match inst.kind {
                LockKind::Rwsem | LockKind::Numa => inst.waiters.len == 0,
                LockKind::Std => inst.wait_writers == 0,
                LockKind::Vma => inst.spin_writers == 0,
            }
    }

    /// Makes `c` an owner of `i`.
    fn own(&mut self, c: usize, i: usize, write: bool) {
        let inst = &mut self.insts[i];
        if write && !inst.worker {
            self.shared_writes += 1;
            self.cpus[c].own_writes += 1;
        }
        if write {
            inst.writer = c as u32;
        } else {
            inst.readers += 1;
        }
        self.cpus[c].held.push(i as u32);
    }

    /// `c`'s access to the lock word as it takes the lock: its cost.
    fn pay(&mut self, c: usize, i: usize) -> f64 {
        self.pay_after(c, i, 0.0)
    }

    /// [`pay`](Self::pay) for a spinner whose read of the word has brought
    /// part of the transfer over already (`seen` nanoseconds of it, spent
    /// spinning): the exchange that takes the lock costs the rest.
    fn pay_after(&mut self, c: usize, i: usize, seen: f64) -> f64 {
        let full = self.word_write(i, c);
        let cost = (full - seen).max(0.0);
        self.insts[i].word_free -= full - cost;
        self.add(c, i, XFER, cost);
        cost
    }

    /// `c` writes lock `i`'s word now, taking the lock or releasing it,
    /// and is its last writer from then on: one transfer from the CPU
    /// that wrote it last, or, when that is `c` itself but another CPU
    /// spins on the word, one transfer to that spinner (the invalidation
    /// of its copy). Nothing when the word is on its way from `c` to
    /// another CPU but has not left `c` yet (`Machine::keep`): `c` writes
    /// it before it goes. Returns what `c` spends, waiting included.
    fn word_write(&mut self, i: usize, c: usize) -> f64 {
        let now = self.now;
        let inst = &mut self.insts[i];
        inst.word_kept.retain(|&(_, until)| until > now);
        if inst.word != c as u32 && inst.word_kept.iter().any(|&(k, _)| k == c as u32) {
            // The word is on its way to another CPU but has not left `c`.
            return 0.0;
        }
        // The word moves from its last writer; or it stays with `c`, and
        // `from` is a spinner whose copy it invalidates.
        let moves = inst.word != c as u32 && inst.word != NONE;
        let start = inst.word_free.max(now);
        let from = if inst.word != c as u32 {
            inst.word
        } else {
            inst.spinning_other(c as u32)
        };
        let cost = self.word_transfer(i, from, c);
        if moves && self.machine.keep > 0.0 {
            let until = start + self.machine.keep * self.xfer(from, c);
            self.insts[i].word_kept.push((from, until));
        }
        self.insts[i].word = c as u32;
        cost
    }

    /// Rwsem kinds: how long spinner `s`'s read of the word takes to see
    /// the store of the release that last freed `i`: a dependent load of
    /// a line another CPU wrote, [`Machine::chain`] of a transfer.
    fn look_ns(&self, i: usize, s: usize) -> f64 {
        let inst = &self.insts[i];
        self.xfer(inst.freed_by, s) * self.machine.chain
    }

    /// Moves lock `i`'s word from `from` to `c` now: the transfer waits
    /// for the word's transfers already under way (a line goes to one CPU
    /// at a time, so CPUs that all write one word, readers counting
    /// themselves in included, serialise on it). Returns the time `c`
    /// spends, waiting included.
    fn word_transfer(&mut self, i: usize, from: u32, c: usize) -> f64 {
        let cost = self.xfer(from, c);
        if cost <= 0.0 {
            return 0.0;
        }
        let inst = &mut self.insts[i];
        let done = inst.word_free.max(self.now) + cost;
        inst.word_free = done;
        done - self.now
    }

    fn take(&mut self, c: usize, i: usize, write: bool) -> f64 {
        self.own(c, i, write);
        self.pay(c, i)
    }

    /// A spinning CPU takes the lock now and runs on.
    fn take_spinning(&mut self, c: usize, i: usize) {
        let spun = self.waited(c);
        self.add(c, i, SPIN, spun);
        // What of the word's transfer its spinning read brought over.
        let seen = self
            .look_ns(i, c)
            .min(self.now - self.insts[i].freed_at)
            .max(0.0);
        let write = self.cpus[c].write;
        self.own(c, i, write);
        let cost = self.pay_after(c, i, seen);
        self.cpus[c].state = State::Run;
        self.schedule(c, self.now + cost);
    }

    /// `c` missed the fast path of `i`: it spins (or queues to).
    fn block(&mut self, c: usize, i: usize, write: bool) {
        let now = self.now;
        let cpu = &mut self.cpus[c];
        cpu.state = State::Spin;
        cpu.inst = i as u32;
        cpu.write = write;
        cpu.since = now;
        cpu.rspin_until = f64::INFINITY;
        let node = cpu.node;
        let inst = &mut self.insts[i];
        match inst.kind {
            LockKind::Rwsem | LockKind::Numa => {
                if inst.spinner == NONE {
                    inst.spinner = c as u32;
                    self.settle(i, node);
                } else {
                    inst.osq.push(node, c as u32);
                }
            }
            LockKind::Std => {
                inst.spin.push_back(c as u32);
                inst.spin_writers += u32::from(write);
                self.schedule(c, now + STD_SPIN_NS);
            }
            LockKind::Vma => {
                inst.spin.push_back(c as u32);
                inst.spin_writers += u32::from(write);
            }
        }
    }

    /// Rwsem kinds: the spinning slot passes to the next queued spinner.
    fn next_spinner(&mut self, i: usize, node: usize) {
        let inst = &mut self.insts[i];
        let numa = inst.kind == LockKind::Numa;
        inst.spinner = match inst.osq.pick(node, numa, true) {
            Some(q) => inst.osq.pop(q).unwrap_or(NONE),
            None => NONE,
        };
    }

    /// Rwsem kinds: lets the spinner of `i` act on the lock's state (take
    /// it, keep spinning, or sleep, and the next one likewise), then serves
    /// a waiter if the lock is left free. `node`: where the lock was
    /// released (for the numa kind's choice). Whether a sleeper was woken.
    fn settle(&mut self, i: usize, node: usize) -> bool {
        loop {
            let s = self.insts[i].spinner;
            if s == NONE {
                break;
            }
            let s = s as usize;
            let write = self.cpus[s].write;
            let inst = &self.insts[i];
            let can_take = if write {
                inst.free()
            } else {
                inst.writer == NONE && (inst.readers == 0 || inst.waiters.len == 0)
            };
            if can_take {
                // The release's store reaches the spinner one read of the
                // word later; until then the lock is free to anyone else,
                // the releaser's own next acquisition included.
                let seen = self.insts[i].freed_at + self.look_ns(i, s);
                if self.now < seen {
                    self.schedule(s, seen);
                    break;
                }
                self.next_spinner(i, self.cpus[s].node);
                self.take_spinning(s, i);
                continue;
            }
            let keep = if inst.writer != NONE {
                let running = self.cpus[inst.writer as usize].running();
                match self.spin_budget {
                    None => {
                        self.cpus[s].rspin_until = f64::INFINITY;
                        running
                    }
                    Some(budget) => running && self.within_budget(s, budget),
                }
            } else if write {
                let until = self.cpus[s].rspin_until;
                if until == f64::INFINITY {
                    let until = self.now + READER_SPIN_NS;
                    self.cpus[s].rspin_until = until;
                    self.schedule(s, until);
                    true
                } else {
                    // A look at a free word may have replaced the timer.
                    if self.now < until && self.cpus[s].armed != until {
                        self.schedule(s, until);
                    }
                    self.now < until
                }
            } else {
                false
            };
            if keep {
                break;
            }
            let sn = self.cpus[s].node;
            self.next_spinner(i, sn);
            self.sleep(s, i);
        }
        let inst = &self.insts[i];
        inst.free() && inst.spinner == NONE && inst.waiters.len > 0 && self.serve(i, node)
    }

    /// With a spin budget: whether spinner `s` may spin on (its budget
    /// runs from when it blocked), with a wake-up scheduled for when the
    /// budget runs out.
    fn within_budget(&mut self, s: usize, budget: f64) -> bool {
        let until = self.cpus[s].since + budget;
        if self.now >= until {
            return false;
        }
        if self.cpus[s].rspin_until != until || self.cpus[s].armed != until {
            self.cpus[s].rspin_until = until;
            self.schedule(s, until);
        }
        true
    }

    /// `c` goes to sleep in `i`'s wait queue.
    fn sleep(&mut self, c: usize, i: usize) {
        let now = self.now;
        let spun = self.waited(c);
        self.add(c, i, SPIN, spun);
        let cpu = &mut self.cpus[c];
        cpu.state = State::Sleep;
        cpu.since = now;
        cpu.gen = cpu.gen.wrapping_add(1);
        if !cpu.in_queue {
            cpu.in_queue = true;
            cpu.queued_at = now;
            let (node, write) = (cpu.node, cpu.write);
            let inst = &mut self.insts[i];
            inst.waiters.push(node, c as u32);
            inst.wait_writers += u32::from(write);
        }
        self.owner_sleeps(c);
    }

    /// `c` stopped running: spinners on rwsems it owns stop spinning.
    fn owner_sleeps(&mut self, c: usize) {
        for k in 0..self.cpus[c].held.len() {
            let h = self.cpus[c].held[k] as usize;
            let inst = &self.insts[h];
            if inst.rwsem() && inst.writer == c as u32 && inst.spinner != NONE {
                let node = self.cpus[c].node;
                self.settle(h, node);
            }
        }
    }

    /// Rwsem kinds, the lock free: serves the waiter the policy picks
    /// (wakes a writer, or grants it if it has waited [`HANDOFF_NS`];
    /// grants a batch of readers).
    /// Whether a sleeper was woken (or granted the lock while asleep).
    fn serve(&mut self, i: usize, node: usize) -> bool {
        let numa = self.insts[i].kind == LockKind::Numa;
        let Some(q) = self.insts[i].waiters.pick(node, numa, true) else {
            return false;
        };
        let Some(p) = self.insts[i].waiters.front(q) else {
            return false;
        };
        let p = p as usize;
        if self.cpus[p].write {
            let asleep = self.cpus[p].state == State::Sleep;
            if self.now - self.cpus[p].queued_at >= HANDOFF_NS {
                self.insts[i].waiters.pop(q);
                self.grant(p, i);
            } else if asleep {
                self.wake(p, false);
            }
            return asleep;
        }
        let mut woke = false;
        while let Some(r) = self.insts[i].waiters.front(q) {
            if self.cpus[r as usize].write {
                break;
            }
            self.insts[i].waiters.pop(q);
            woke |= self.cpus[r as usize].state == State::Sleep;
            self.grant(r as usize, i);
        }
        woke
    }

    /// Gives `i` to the waiter `p`, taken out of the queue already.
    fn grant(&mut self, p: usize, i: usize) {
        let write = self.cpus[p].write;
        self.insts[i].wait_writers -= u32::from(write);
        self.cpus[p].in_queue = false;
        self.own(p, i, write);
        self.cpus[p].granted = true;
        if self.cpus[p].state == State::Sleep {
            self.wake(p, true);
        }
    }

    fn wake(&mut self, p: usize, granted: bool) {
        let cpu = &mut self.cpus[p];
        cpu.state = State::Wake;
        cpu.granted = granted;
        let t = self.now + self.machine.wake_ns + self.machine.sleep_ns;
        self.schedule(p, t);
    }

    /// A woken CPU runs again.
    fn resume(&mut self, c: usize) {
        let i = self.cpus[c].inst as usize;
        let slept = self.waited(c);
        self.add(c, i, SLEEP, slept);
        self.cpus[c].since = self.now;
        if self.cpus[c].granted {
            self.cpus[c].granted = false;
            let cost = self.pay(c, i);
            self.run_cpu(c, cost);
            return;
        }
        let write = self.cpus[c].write;
        if self.insts[i].rwsem() {
            // A woken rwsem writer, still first in the queue.
            if self.insts[i].free() {
                let node = self.cpus[c].node;
                let inst = &mut self.insts[i];
                inst.waiters.remove(node, c as u32);
                inst.wait_writers -= u32::from(write);
                self.cpus[c].in_queue = false;
                let cost = self.take(c, i, write);
                self.run_cpu(c, cost);
            } else {
                self.cpus[c].state = State::Sleep;
                self.owner_sleeps(c);
            }
            return;
        }
        // Std: compete again from the fast path.
        if self.fast_ok(i, write) {
            let cost = self.take(c, i, write);
            self.run_cpu(c, cost);
        } else {
            self.block(c, i, write);
        }
    }

    /// A spinning CPU's timeout.
    fn spin_timeout(&mut self, c: usize) {
        let i = self.cpus[c].inst as usize;
        match self.insts[i].kind {
            LockKind::Rwsem | LockKind::Numa => {
                if self.insts[i].spinner == c as u32 {
                    let node = self.cpus[c].node;
                    self.settle(i, node);
                }
            }
            LockKind::Std => {
                let inst = &mut self.insts[i];
                if let Some(pos) = inst.spin.iter().position(|&s| s == c as u32) {
                    inst.spin.remove(pos);
                    inst.spin_writers -= u32::from(self.cpus[c].write);
                }
                self.sleep(c, i);
                if self.insts[i].free() {
                    self.std_free(i);
                }
            }
            LockKind::Vma => {}
        }
    }

    /// `c`'s release of `i` takes effect. Returns the time `c` then spends
    /// waking a sleeper (a futex wake-up is the waker's system call).
    fn release(&mut self, c: usize, i: usize) -> f64 {
        let held = &mut self.cpus[c].held;
        if let Some(pos) = held.iter().rposition(|&h| h as usize == i) {
            held.remove(pos);
        }
        let inst = &mut self.insts[i];
        if inst.writer == c as u32 {
            inst.writer = NONE;
        } else {
            inst.readers = inst.readers.saturating_sub(1);
        }
        if !inst.free() {
            return 0.0;
        }
        inst.freed_at = self.now;
        inst.freed_by = c as u32;
        let node = self.cpus[c].node;
        let woke = match inst.kind {
            LockKind::Rwsem | LockKind::Numa => {
                let numa = inst.kind == LockKind::Numa;
                // A waiter owed the lock gets it before any spinner.
                let owed = inst
                    .waiters
                    .pick(node, numa, false)
                    .and_then(|q| inst.waiters.front(q))
                    .is_some_and(|p| self.now - self.cpus[p as usize].queued_at >= HANDOFF_NS);
                let served = owed && self.serve(i, node);
                self.settle(i, node) || served
            }
            LockKind::Std => self.std_free(i),
            LockKind::Vma => {
                self.vma_free(i);
                false
            }
        };
        if !woke {
            return 0.0;
        }
        let cost = self.waker_ns;
        self.add(c, i, SLEEP, cost);
        cost
    }

    /// Std, the lock free: spinners take it, then a sleeper is woken.
    /// Whether one was.
    fn std_free(&mut self, i: usize) -> bool {
        let inst = &self.insts[i];
        if let Some(&first) = inst.spin.front() {
            if self.cpus[first as usize].write {
                self.spinner_takes(i, 0);
            } else if inst.wait_writers == 0 {
                self.readers_take(i);
            } else if let Some(pos) = inst.spin.iter().position(|&s| self.cpus[s as usize].write) {
                self.spinner_takes(i, pos);
            }
        }
        let inst = &mut self.insts[i];
        if inst.waiters.len == 0 {
            return false;
        }
        let q = &mut inst.waiters.qs[0];
        if inst.wait_writers > 0 {
            if let Some(pos) = q.iter().position(|&(_, p)| self.cpus[p as usize].write) {
                let (_, p) = q.remove(pos).unwrap_or((0, NONE));
                inst.waiters.len -= 1;
                inst.wait_writers -= 1;
                self.cpus[p as usize].in_queue = false;
                self.wake(p as usize, false);
                return true;
            }
            return false;
        }
        // Every sleeping reader (a buffer only on this path).
        let woken: Vec<u32> = q.drain(..).map(|(_, p)| p).collect();
        inst.waiters.len = 0;
        for &p in &woken {
            self.cpus[p as usize].in_queue = false;
            self.wake(p as usize, false);
        }
        !woken.is_empty()
    }

    /// Vma, the lock free or reader-owned: the oldest spinning writer
    /// takes it, or with none, every spinning reader.
    fn vma_free(&mut self, i: usize) {
        let inst = &self.insts[i];
        if inst.writer != NONE {
            return;
        }
        if inst.spin_writers > 0 {
            if inst.readers == 0 {
                if let Some(pos) = inst.spin.iter().position(|&s| self.cpus[s as usize].write) {
                    self.spinner_takes(i, pos);
                }
            }
        } else if !inst.spin.is_empty() {
            self.readers_take(i);
        }
    }

    /// Std and vma: spinner at `pos` takes the lock.
    fn spinner_takes(&mut self, i: usize, pos: usize) {
        let inst = &mut self.insts[i];
        let Some(s) = inst.spin.remove(pos) else {
            return;
        };
        inst.spin_writers -= u32::from(self.cpus[s as usize].write);
        self.take_spinning(s as usize, i);
    }

    /// Std and vma: every spinning reader takes the lock.
    fn readers_take(&mut self, i: usize) {
        let mut k = 0;
        while k < self.insts[i].spin.len() {
            let s = self.insts[i].spin[k] as usize;
            if self.cpus[s].write {
                k += 1;
            } else {
                self.insts[i].spin.remove(k);
                self.take_spinning(s, i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Conversion, LockRef, FORMAT};

    /// A machine of `nodes` nodes of `per` CPUs in complexes of 4, with
    /// the given latencies.
    fn machine(nodes: usize, per: usize, near: f64, remote: f64, sleep: f64) -> Machine {
        Machine {
            name: format!("{nodes}x{per}"),
            nodes,
            cpus_per_node: per,
            ccx_cpus: 4,
            ccx_ns: near,
            node_ns: near * 2.0,
            remote_ns: vec![vec![remote; nodes]; nodes],
            wake_ns: sleep,
            sleep_ns: sleep,
            waker_ns: None,
            overlap: 1.0,
            // A spinner sees a release a hundredth of a transfer later:
            // short of every gap between two sections in these tests, so
            // a waiting spinner always gets the lock (see
            // `a_releaser_back_before_the_spinner_sees_keeps_the_lock`).
            chain: 0.01,
            keep: 0.0,
            source: "test".into(),
        }
    }

    fn lock(class: LockClass, kind: LockKind, scope: Scope) -> LockRef {
        LockRef { class, kind, scope }
    }

    fn profile(locks: Vec<LockRef>, ops: Vec<Vec<Step>>) -> Profile {
        Profile {
            format: FORMAT,
            workload: "t".into(),
            mode: "threads".into(),
            index: "maple".into(),
            imap: "single".into(),
            lock: "rwsem".into(),
            anon_rule: true,
            recorded_on: "host(1x2)".into(),
            ops_per_sec: 1e6,
            locks,
            ops,
            converts_to: None,
            interleaved: None,
            scaled: None,
        }
    }

    fn run(ns: f64) -> Step {
        Step::Run { ns }
    }

    fn acq(lock: u32, write: bool) -> Step {
        Step::Acquire { lock, write }
    }

    fn rel(lock: u32) -> Step {
        Step::Release { lock }
    }

    fn lines(lock: u32, read: u32, written: u32) -> Step {
        Step::Lines {
            lock,
            read,
            written,
            chain: 0,
        }
    }

    fn config(cpus: usize, lock: Option<LockKind>) -> Config {
        Config {
            cpus,
            lock,
            ..Config::default()
        }
    }

    fn close(got: f64, want: f64, rel: f64) -> bool {
        ((got - want) / want).abs() <= rel
    }

    const KINDS: [LockKind; 4] = [
        LockKind::Rwsem,
        LockKind::Numa,
        LockKind::Std,
        LockKind::Vma,
    ];

    /// One shared lock written with a constant hold time and no line
    /// costs: one CPU runs at 1 / (outside + hold), two or more saturate
    /// the lock at 1 / hold, whatever its algorithm.
    #[test]
    fn one_lock_saturates_at_one_over_hold() {
        let m = machine(1, 64, 0.0, 0.0, 0.0);
        let (outside, hold) = (100.0, 200.0);
        let p = profile(
            vec![lock(LockClass::IMmap, LockKind::Rwsem, Scope::Shared)],
            vec![vec![run(outside), acq(0, true), run(hold), rel(0)]],
        );
        for kind in KINDS {
            let one = simulate(&p, &m, &config(1, Some(kind))).unwrap();
            assert!(
                close(one.ops_per_sec, 1e9 / (outside + hold), 1e-9),
                "{kind:?} {one:?}"
            );
            for n in [2, 4, 16, 64] {
                let r = simulate(&p, &m, &config(n, Some(kind))).unwrap();
                assert!(
                    close(r.ops_per_sec, 1e9 / hold, 0.03),
                    "{kind:?} {n}: {r:?}"
                );
                assert!(close(r.breakdown.total(), 1.0, 1e-9));
                // The lock is busy all the time, and with the fair
                // kinds every CPU is in it 1/N of its time. (Std and vma
                // let CPUs barge: their windows differ in length.)
                if matches!(kind, LockKind::Rwsem | LockKind::Numa) {
                    let held = r.breakdown.class(LockClass::IMmap).held;
                    assert!(close(held, 1.0 / n as f64, 0.05), "{kind:?} {n}: {r:?}");
                }
            }
        }
    }

    /// A window sized by `ops_per_cpu_for` covers every recorded
    /// operation once, so a rare costly one counts at its share whatever
    /// the seed: one CPU runs at exactly one over the mean operation. A
    /// window of 200 of the 512 holds the costly one or not, by the seed.
    #[test]
    fn a_sized_window_counts_every_operation_once() {
        let m = machine(1, 4, 0.0, 0.0, 0.0);
        let mut ops = vec![vec![run(50.0)]; 512];
        ops[300] = vec![run(7000.0)];
        let p = profile(vec![], ops);
        let mean = (511.0 * 50.0 + 7000.0) / 512.0;
        let sized = ops_per_cpu_for(&p);
        assert_eq!(sized, 512);
        let mut short = Vec::new();
        for seed in 1..=8 {
            let at = |ops_per_cpu| Config {
                seed,
                ops_per_cpu,
                ..config(1, None)
            };
            let r = simulate(&p, &m, &at(sized)).unwrap();
            assert!(close(r.ops_per_sec, 1e9 / mean, 1e-9), "seed {seed}: {r:?}");
            short.push(simulate(&p, &m, &at(200)).unwrap().ops_per_sec);
        }
        let (lo, hi) = short
            .iter()
            .fold((f64::MAX, 0.0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        assert!(hi / lo > 1.3, "200-operation windows: {short:?}");
    }

    /// A threads-mode profile's interleaved operations are what two CPUs
    /// or more run; one CPU runs the operations recorded alone.
    #[test]
    fn two_cpus_or_more_run_the_interleaved_operations() {
        let m = machine(1, 8, 0.0, 0.0, 0.0);
        let with = |scope| {
            let l = lock(LockClass::MmapLock, LockKind::Rwsem, scope);
            let mut p = profile(vec![l], vec![vec![acq(0, true), run(1000.0), rel(0)]]);
            let mut turns = profile(vec![l], vec![vec![acq(0, true), run(400.0), rel(0)]]);
            turns.ops_per_sec = 2.5e6;
            p.interleaved = Some(Box::new(turns));
            p
        };
        // A shared lock that changes hands at every release (no gap, and
        // a spinner sees the release at once on this machine): every
        // operation meets another CPU's, so they run the interleaved
        // operations, one at a time.
        let p = with(Scope::Shared);
        let one = simulate(&p, &m, &config(1, None)).unwrap();
        assert!(close(one.ops_per_sec, 1e6, 1e-9), "{one:?}");
        for n in [2, 8] {
            let r = simulate(&p, &m, &config(n, None)).unwrap();
            assert!(close(r.ops_per_sec, 2.5e6, 1e-9), "{n}: {r:?}");
        }
        // CPUs that share no lock never meet: each runs one worker's
        // operations.
        let mut p = with(Scope::Worker);
        for n in [2, 8] {
            let r = simulate(&p, &m, &config(n, None)).unwrap();
            assert!(close(r.ops_per_sec, n as f64 * 1e6, 1e-9), "{n}: {r:?}");
        }
        // A broken interleaved profile is the profile's error.
        if let Some(t) = p.interleaved.as_mut() {
            t.ops = vec![vec![rel(0)]];
        }
        assert!(matches!(
            simulate(&p, &m, &config(1, None)),
            Err(SimError::Profile(_))
        ));
    }

    /// Each CPU takes one worker's seat in the interleaved operations:
    /// worker 0's side of the recorded meeting takes a shared lock, worker
    /// 1's never does, so two CPUs never want it at once. (Stepping
    /// through both workers' operations, both CPUs would take it in turn
    /// and meet on it.)
    #[test]
    fn each_cpu_runs_one_workers_side_of_the_turns() {
        let m = machine(1, 8, 0.0, 0.0, 0.0);
        let l = lock(LockClass::AnonVma, LockKind::Rwsem, Scope::Shared);
        let locked = vec![acq(0, true), run(1000.0), rel(0)];
        let mut p = profile(vec![l], vec![locked.clone()]);
        // Worker 1's operation outlasts worker 0's, so that worker 0's
        // CPU takes the lock during every one of it: worker 1's CPU
        // always meets that work and stays in the turns.
        let turns = profile(vec![l], vec![locked, vec![run(1500.0)]]);
        p.interleaved = Some(Box::new(turns));
        for seed in 1..=5 {
            let c = Config {
                seed,
                ..config(2, None)
            };
            let r = simulate(&p, &m, &c).unwrap();
            let anon = r.breakdown.class(LockClass::AnonVma);
            assert_eq!(anon.contended, 0.0, "seed {seed}: {r:?}");
            assert!(
                close(r.ops_per_sec, 1e9 / 1000.0 + 1e9 / 1500.0, 0.01),
                "seed {seed}: {r:?}"
            );
        }
    }

    /// Only per-worker locks: throughput is exactly N times one CPU's,
    /// line costs and latencies notwithstanding.
    #[test]
    fn worker_locks_scale_linearly() {
        let m = machine(2, 32, 30.0, 250.0, 2000.0);
        let p = profile(
            vec![
                lock(LockClass::MmapLock, LockKind::Rwsem, Scope::Worker),
                lock(LockClass::IMmap, LockKind::Rwsem, Scope::Worker),
            ],
            vec![
                vec![run(50.0), acq(0, true), run(100.0), rel(0), run(30.0)],
                vec![
                    run(20.0),
                    acq(0, false),
                    acq(1, true),
                    lines(1, 5, 3),
                    run(120.0),
                    rel(1),
                    rel(0),
                    run(40.0),
                ],
            ],
        );
        for kind in KINDS {
            for n in [1, 2, 7, 64] {
                let r = simulate(&p, &m, &config(n, Some(kind))).unwrap();
                assert!(
                    close(r.ops_per_sec, n as f64 * 1e9 / 180.0, 1e-9),
                    "{kind:?} {n}: {r:?}"
                );
                assert_eq!(r.breakdown.transfers(), 0.0);
                assert!(close(r.breakdown.outside, 140.0 / 360.0, 1e-9));
            }
        }
    }

    /// Two CPUs on two nodes alternate in one shared lock whose critical
    /// section reads some lines and writes `L`, with `o` outside it. Each
    /// hand-over costs, in the lock: the word from the releaser (r), the L
    /// lines the other CPU wrote (L·r; the lines it only read are clean
    /// and stay cached), the hold time h, and the release's invalidation
    /// of the spinning CPU's copy of the word (r). So throughput is
    /// 1 / t, t = h + (L + 2)·r. An rwsem spinner's read sees the release
    /// `look` = chain·r after it (the lock free meanwhile, the spinner
    /// still spinning), and its exchange then costs the rest of the
    /// transfer: each CPU holds the lock t − look of every 2t, runs o and
    /// spins the rest (the std and VMA locks hand over at once: look 0).
    #[test]
    fn remote_lines_lengthen_the_critical_section() {
        // Each section reads 5 lines and writes 3; the other CPU's
        // section dirtied 3, and only those move: L = 3.
        let (h, o, r, read, written) = (200.0, 10.0, 100.0, 5, 3);
        let l = f64::from(written);
        let m = machine(2, 1, 0.0, r, 0.0);
        let p = profile(
            vec![lock(LockClass::IMmap, LockKind::Rwsem, Scope::Shared)],
            vec![vec![
                run(o),
                acq(0, true),
                lines(0, read, written),
                run(h),
                rel(0),
            ]],
        );
        let t = h + (l + 2.0) * r;
        for kind in KINDS {
            let look = if matches!(kind, LockKind::Rwsem | LockKind::Numa) {
                m.chain * r
            } else {
                0.0
            };
            let one = simulate(&p, &m, &config(1, Some(kind))).unwrap();
            assert!(
                close(one.ops_per_sec, 1e9 / (h + o), 1e-9),
                "{kind:?} {one:?}"
            );
            let two = simulate(&p, &m, &config(2, Some(kind))).unwrap();
            assert!(close(two.ops_per_sec, 1e9 / t, 1e-9), "{kind:?} {two:?}");
            let c = two.breakdown.class(LockClass::IMmap);
            assert!(
                close(c.held, (t - look) / (2.0 * t), 1e-6),
                "{kind:?} {two:?}"
            );
            assert!(
                close(c.spinning, (t + look - o) / (2.0 * t), 1e-6),
                "{kind:?} {two:?}"
            );
            assert!(
                close(c.transfers, ((l + 2.0) * r - look) / (2.0 * t), 1e-6),
                "{kind:?} {two:?}"
            );
        }
    }

    /// The rwsem's spinner sees a release one read of the word after it
    /// (`look` = chain·r); a releaser whose next section starts sooner
    /// than that takes the free lock back on its fast path, on the word
    /// and the lines its own cache holds. Two CPUs, one lock held h, a gap
    /// g outside it: with g < look one CPU runs every operation, at one
    /// per g + h + 2r (its exchange and its release each invalidate the
    /// spinner's copy of the word, r), the other spins throughout; with
    /// g > look they take turns at one per h + 2r, as above.
    #[test]
    fn a_releaser_back_before_the_spinner_sees_keeps_the_lock() {
        let (h, r) = (200.0, 100.0);
        let mut m = machine(2, 1, 0.0, r, 0.0);
        m.chain = 0.5;
        let p = |g: f64| {
            profile(
                vec![lock(LockClass::MmapLock, LockKind::Rwsem, Scope::Shared)],
                vec![vec![run(g), acq(0, true), run(h), rel(0)]],
            )
        };
        for kind in [LockKind::Rwsem, LockKind::Numa] {
            let kept = simulate(&p(10.0), &m, &config(2, Some(kind))).unwrap();
            assert!(
                close(kept.ops_per_sec, 1e9 / (10.0 + h + 2.0 * r), 1e-6),
                "{kind:?} {kept:?}"
            );
            let c = kept.breakdown.class(LockClass::MmapLock);
            assert!(c.spinning > 0.45, "{kind:?} {kept:?}");
            // The keeper's acquisitions take the fast path; the spinner
            // asked once.
            assert!(c.contended < 0.05, "{kind:?} {kept:?}");
            let turns = simulate(&p(80.0), &m, &config(2, Some(kind))).unwrap();
            assert!(
                close(turns.ops_per_sec, 1e9 / (h + 2.0 * r), 1e-6),
                "{kind:?} {turns:?}"
            );
            // Taking turns, every acquisition waits for the other's release.
            let c = turns.breakdown.class(LockClass::MmapLock);
            assert!(c.contended > 0.95, "{kind:?} {turns:?}");
        }
        // With a threads-mode profile's interleaved operations (held h2):
        // the CPU that keeps the lock meets nobody's work and runs one
        // worker's operations; CPUs taking turns run the interleaved ones.
        let h2 = 120.0;
        let q = |g: f64| {
            let mut q = p(g);
            let mut turns = profile(
                vec![lock(LockClass::MmapLock, LockKind::Rwsem, Scope::Shared)],
                vec![vec![run(g), acq(0, true), run(h2), rel(0)]],
            );
            turns.ops_per_sec = 1e9 / (g + h2);
            q.interleaved = Some(Box::new(turns));
            q
        };
        let kept = simulate(&q(10.0), &m, &config(2, None)).unwrap();
        assert!(
            close(kept.ops_per_sec, 1e9 / (10.0 + h + 2.0 * r), 1e-6),
            "{kept:?}"
        );
        let turns = simulate(&q(80.0), &m, &config(2, None)).unwrap();
        assert!(
            close(turns.ops_per_sec, 1e9 / (h2 + 2.0 * r), 1e-6),
            "{turns:?}"
        );
    }

    /// The same ping-pong with the lines priced by how they are reached,
    /// on a machine that overlaps 4 transfers and charges a line reached
    /// through a pointer 0.4 of a transfer. With no chain the L = 3 dirty
    /// lines cost 1 + 2/4 transfers (the first in full); with half of the
    /// section's 8 lines reached through a pointer, half of the 3 cost 0.4
    /// each and the other half 1/4 each, 0.975 transfers; with all of
    /// them, 3 · 0.4. Throughput is 1 / (h + (lines + 2)·r).
    #[test]
    fn lines_reached_through_a_pointer_cost_their_own_share() {
        let (h, r) = (200.0, 100.0);
        let mut m = machine(2, 1, 0.0, r, 0.0);
        m.overlap = 4.0;
        m.chain = 0.4;
        for (chain, lines) in [(0, 1.5), (4, 0.975), (8, 1.2)] {
            let p = profile(
                vec![lock(LockClass::IMmap, LockKind::Rwsem, Scope::Shared)],
                vec![vec![
                    // Longer than the spinner's look at the word (0.4·r):
                    // the lock changes hands at every release.
                    run(50.0),
                    acq(0, true),
                    Step::Lines {
                        lock: 0,
                        read: 5,
                        written: 3,
                        chain,
                    },
                    run(h),
                    rel(0),
                ]],
            );
            let two = simulate(&p, &m, &config(2, None)).unwrap();
            let t = h + (lines + 2.0) * r;
            assert!(close(two.ops_per_sec, 1e9 / t, 1e-9), "{chain}: {two:?}");
        }
    }

    /// Readers of one rwsem each write its word twice (in and out), and a
    /// line moves to one CPU at a time: however many CPUs read, and
    /// however short their sections, the word bounds throughput at one
    /// operation per two transfers, 1 / (2r).
    #[test]
    fn readers_serialise_on_the_lock_word() {
        let r = 100.0;
        // One complex of 16 CPUs: every transfer costs r.
        let mut m = machine(1, 16, r, r, 0.0);
        m.ccx_cpus = 16;
        let p = profile(
            vec![lock(LockClass::MmapLock, LockKind::Rwsem, Scope::Shared)],
            vec![vec![acq(0, false), run(1.0), rel(0)]],
        );
        let one = simulate(&p, &m, &config(1, None)).unwrap();
        assert!(close(one.ops_per_sec, 1e9, 1e-9), "{one:?}");
        let many = simulate(&p, &m, &config(16, None)).unwrap();
        assert!(close(many.ops_per_sec, 1e9 / (2.0 * r), 0.05), "{many:?}");
    }

    #[test]
    fn a_word_kept_on_arrival_moves_once_per_reader() {
        let r = 100.0;
        let mut m = machine(1, 16, r, r, 0.0);
        m.ccx_cpus = 16;
        m.keep = 0.5;
        let readers = |hold: f64| {
            profile(
                vec![lock(LockClass::MmapLock, LockKind::Rwsem, Scope::Shared)],
                // A transfer's time outside: the next acquisition comes
                // after the word has gone, so each takes it once.
                vec![vec![acq(0, false), run(hold), rel(0), run(r)]],
            )
        };
        // A release 1 ns after the acquisition comes inside the half
        // transfer the reader keeps the word: only the acquisitions move
        // it, one transfer each, all in turn.
        let soon = simulate(&readers(1.0), &m, &config(16, None)).unwrap();
        assert!(close(soon.ops_per_sec, 1e9 / r, 0.05), "{soon:?}");
        // One later than that finds the word gone: two moves a section.
        let late = simulate(&readers(0.6 * r), &m, &config(16, None)).unwrap();
        assert!(close(late.ops_per_sec, 1e9 / (2.0 * r), 0.05), "{late:?}");
        // Without the keep, the early release moves it too.
        m.keep = 0.0;
        let none = simulate(&readers(1.0), &m, &config(16, None)).unwrap();
        assert!(close(none.ops_per_sec, 1e9 / (2.0 * r), 0.05), "{none:?}");
    }

    /// Two CPUs, whose lock waiters spin at most `ns` before they sleep.
    fn budget(ns: f64) -> Config {
        Config {
            spin_budget_ns: Some(ns),
            ..config(2, None)
        }
    }

    /// The kernel's rwsem spins as long as its owner runs; with a spin
    /// budget shorter than the critical section (the lab's userspace
    /// rwsem), waiters sleep instead, and pay the wake-up.
    #[test]
    fn a_spin_budget_sends_waiters_to_sleep() {
        let m = machine(1, 4, 0.0, 0.0, 5000.0);
        let p = profile(
            vec![lock(LockClass::MmapLock, LockKind::Rwsem, Scope::Shared)],
            vec![vec![run(100.0), acq(0, true), run(2000.0), rel(0)]],
        );
        let kernel = simulate(&p, &m, &config(2, None)).unwrap();
        let c = kernel.breakdown.class(LockClass::MmapLock);
        assert_eq!(c.sleeping, 0.0, "{kernel:?}");
        assert!(c.spinning > 0.0, "{kernel:?}");
        let lab = simulate(&p, &m, &budget(500.0)).unwrap();
        let c = lab.breakdown.class(LockClass::MmapLock);
        assert!(c.sleeping > 0.0, "{lab:?}");
        assert!(lab.ops_per_sec < kernel.ops_per_sec, "{lab:?} {kernel:?}");
        let bad = budget(-1.0);
        assert!(matches!(
            simulate(&p, &m, &bad),
            Err(SimError::SpinBudget(_))
        ));
        // A budget longer than any wait changes nothing.
        let long = simulate(&p, &m, &budget(1e9)).unwrap();
        assert_eq!(long.ops_per_sec, kernel.ops_per_sec);
    }

    /// A release that wakes a sleeper pays for the wake-up: the waker's
    /// futex call ([`Machine::waker_cost_ns`]) delays its next operation.
    /// Two CPUs loop on one lock, held h, with o outside it; the waiter
    /// sleeps at once (a spin budget of 0) and, woken W = wake + sleep
    /// after each release, always finds the lock taken again (W falls
    /// inside the next hold), so it sleeps on and the other CPU does every
    /// operation, at one per h + o + w, w the waker's cost.
    #[test]
    fn a_release_that_wakes_pays_for_it() {
        let (h, o) = (1000.0, 10.0);
        let p = profile(
            vec![lock(LockClass::MmapLock, LockKind::Rwsem, Scope::Shared)],
            vec![vec![run(o), acq(0, true), run(h), rel(0)]],
        );
        for w in [0.0, 100.0, 300.0] {
            let mut m = machine(1, 4, 0.0, 0.0, 100.0);
            m.wake_ns = 400.0;
            m.waker_ns = Some(w);
            let r = simulate(&p, &m, &budget(0.0)).unwrap();
            let cycle = h + o + w;
            assert!(close(r.ops_per_sec, 1e9 / cycle, 0.01), "{w}: {r:?}");
            // The starved CPU is asleep throughout its window.
            let c = r.breakdown.class(LockClass::MmapLock);
            assert!(c.sleeping > c.held && c.spinning == 0.0, "{w}: {r:?}");
        }
    }

    /// Reads of data nobody writes stay in every reader's cache: readers
    /// of a shared lock pay only for the lock word.
    #[test]
    fn readers_share_clean_lines() {
        let m = machine(2, 1, 0.0, 100.0, 0.0);
        let p = profile(
            vec![lock(LockClass::MmapLock, LockKind::Rwsem, Scope::Shared)],
            vec![vec![
                run(1000.0),
                acq(0, false),
                lines(0, 10, 0),
                run(100.0),
                rel(0),
            ]],
        );
        let r = simulate(&p, &m, &config(2, None)).unwrap();
        // Per operation at most two word transfers (acquire, release),
        // never the ten lines.
        let per_op = r.breakdown.transfers() * 2e9 / r.ops_per_sec;
        assert!(per_op <= 2.0 * 100.0 + 1e-6, "{per_op} {r:?}");
        assert!(r.ops_per_sec > 1.5e9 / 1100.0, "{r:?}");
    }

    fn mixed() -> Profile {
        profile(
            vec![
                lock(LockClass::MmapLock, LockKind::Rwsem, Scope::Shared),
                lock(LockClass::IMmap, LockKind::Rwsem, Scope::Shared),
                lock(LockClass::AnonVma, LockKind::Rwsem, Scope::Group),
            ],
            vec![
                vec![
                    run(300.0),
                    acq(0, true),
                    run(50.0),
                    acq(1, true),
                    lines(1, 6, 2),
                    run(400.0),
                    rel(1),
                    rel(0),
                    run(100.0),
                ],
                vec![
                    run(200.0),
                    acq(0, false),
                    acq(2, true),
                    lines(2, 2, 1),
                    run(80.0),
                    rel(2),
                    rel(0),
                ],
                vec![run(500.0), acq(0, false), lines(0, 4, 0), run(60.0), rel(0)],
            ],
        )
    }

    #[test]
    fn same_seed_same_result() {
        let m = machine(4, 8, 30.0, 200.0, 3000.0);
        let p = mixed();
        for kind in KINDS {
            let c = Config {
                seed: 7,
                ..config(32, Some(kind))
            };
            let a = simulate(&p, &m, &c).unwrap();
            let b = simulate(&p, &m, &c).unwrap();
            assert_eq!(a, b);
            assert!(close(a.breakdown.total(), 1.0, 1e-9), "{a:?}");
            assert!(a.ops_per_sec > 0.0);
        }
    }

    /// Under heavy contention on a two-node machine, the numa kind keeps
    /// the lock (and its data) on one node for runs of hand-offs: fewer
    /// remote transfers, more operations.
    #[test]
    fn numa_keeps_the_lock_local() {
        let m = machine(2, 8, 20.0, 300.0, 3000.0);
        let p = profile(
            vec![lock(LockClass::IMmap, LockKind::Rwsem, Scope::Shared)],
            vec![vec![
                run(100.0),
                acq(0, true),
                lines(0, 2, 4),
                run(200.0),
                rel(0),
            ]],
        );
        let rwsem = simulate(&p, &m, &config(16, Some(LockKind::Rwsem))).unwrap();
        let numa = simulate(&p, &m, &config(16, Some(LockKind::Numa))).unwrap();
        let per_op = |r: &Projection| r.breakdown.transfers() * 16e9 / r.ops_per_sec;
        assert!(per_op(&numa) < 0.5 * per_op(&rwsem), "{numa:?}\n{rwsem:?}");
        assert!(
            numa.ops_per_sec > 1.3 * rwsem.ops_per_sec,
            "{numa:?}\n{rwsem:?}"
        );
    }

    /// An adaptive profile converts from one shared i_mmap lock to one per
    /// group after contention, and then runs as the per-group profile does.
    #[test]
    fn adaptive_converts_to_group_locks() {
        let m = machine(4, 4, 20.0, 200.0, 3000.0);
        let op = vec![run(100.0), acq(0, true), lines(0, 2, 2), run(300.0), rel(0)];
        let group = profile(
            vec![lock(LockClass::IMmap, LockKind::Rwsem, Scope::Group)],
            vec![op.clone()],
        );
        let mut single = profile(
            vec![lock(LockClass::IMmap, LockKind::Rwsem, Scope::Shared)],
            vec![op],
        );
        let c = config(16, None);
        let before = simulate(&single, &m, &c).unwrap();
        let after = simulate(&group, &m, &c).unwrap();
        assert!(before.converted_at_ns.is_none());
        single.converts_to = Some(Box::new(Conversion {
            after: 20,
            profile: group,
        }));
        let adaptive = simulate(&single, &m, &c).unwrap();
        assert!(adaptive.converted_at_ns.is_some(), "{adaptive:?}");
        assert!(
            close(adaptive.ops_per_sec, after.ops_per_sec, 0.05),
            "{adaptive:?}\n{after:?}"
        );
        assert!(
            adaptive.ops_per_sec > 2.0 * before.ops_per_sec,
            "{adaptive:?}\n{before:?}"
        );
        // Never contended enough: stays.
        if let Some(conv) = single.converts_to.as_mut() {
            conv.after = u32::MAX;
        }
        let stays = simulate(&single, &m, &c).unwrap();
        assert!(stays.converted_at_ns.is_none());
        assert!(close(stays.ops_per_sec, before.ops_per_sec, 1e-9));
    }

    /// Std waiters sleep once their short spin is over; the sleeps show in
    /// the breakdown.
    #[test]
    fn std_sleeps_behind_long_critical_sections() {
        let m = machine(1, 8, 20.0, 0.0, 2000.0);
        let p = profile(
            vec![lock(LockClass::IMmap, LockKind::Std, Scope::Shared)],
            vec![vec![run(1000.0), acq(0, true), run(20_000.0), rel(0)]],
        );
        let r = simulate(&p, &m, &config(4, None)).unwrap();
        let c = r.breakdown.class(LockClass::IMmap);
        assert!(c.sleeping > 0.3, "{r:?}");
        assert!(r.ops_per_sec <= 1e9 / 20_000.0 * 1.001, "{r:?}");
        assert!(close(r.breakdown.total(), 1.0, 1e-9));
    }

    /// Two operations taking two locks in opposite orders deadlock.
    #[test]
    fn conflicting_lock_orders_deadlock() {
        let m = machine(1, 8, 0.0, 0.0, 0.0);
        let p = profile(
            vec![
                lock(LockClass::MmapLock, LockKind::Vma, Scope::Shared),
                lock(LockClass::VmaLock, LockKind::Vma, Scope::Shared),
            ],
            vec![
                vec![acq(0, true), run(1000.0), acq(1, true), rel(1), rel(0)],
                vec![acq(1, true), run(1000.0), acq(0, true), rel(0), rel(1)],
            ],
        );
        let e = simulate(&p, &m, &config(8, None)).unwrap_err();
        assert!(matches!(e, SimError::Deadlock { .. }), "{e}");
    }

    #[test]
    fn bad_input_is_an_error() {
        let m = machine(2, 4, 0.0, 100.0, 0.0);
        let p = mixed();
        let e = simulate(&p, &m, &config(0, None)).unwrap_err();
        assert!(
            matches!(
                e,
                SimError::Cpus {
                    cpus: 0,
                    max: 8,
                    ..
                }
            ),
            "{e}"
        );
        let e = simulate(&p, &m, &config(9, None)).unwrap_err();
        assert_eq!(e.to_string(), "9 CPUs: machine 2x4 has 8 (ask for 1 to 8)");
        let c = Config {
            ops_per_cpu: 0,
            ..config(2, None)
        };
        assert_eq!(simulate(&p, &m, &c).unwrap_err(), SimError::NoOps);
        let mut bad = p.clone();
        bad.ops[0].push(rel(0));
        assert!(matches!(
            simulate(&bad, &m, &config(2, None)),
            Err(SimError::Profile(_))
        ));
        let mut skew = m.clone();
        skew.remote_ns.pop();
        assert!(matches!(
            simulate(&p, &skew, &config(2, None)),
            Err(SimError::Machine(_))
        ));
        let mut negative = m.clone();
        negative.ccx_ns = -1.0;
        assert!(matches!(
            simulate(&p, &negative, &config(2, None)),
            Err(SimError::Machine(_))
        ));
        let idle = profile(vec![], vec![vec![], vec![run(0.0)]]);
        assert!(matches!(
            simulate(&idle, &m, &config(2, None)),
            Err(SimError::NoTime { .. })
        ));
    }

    /// Random profiles (locks always taken in one order, so they cannot
    /// deadlock), kinds, machines and CPU counts: every run finishes, its
    /// shares add up, and it repeats exactly.
    #[test]
    fn random_profiles_run_to_completion() {
        let mut rng = SplitMix(42);
        let classes = LockClass::ALL;
        let scopes = [Scope::Worker, Scope::Shared, Scope::Group];
        for round in 0..60 {
            let mut pick = |k: usize| (rng.next() % k as u64) as usize;
            let nlocks = 1 + pick(4);
            let locks: Vec<LockRef> = (0..nlocks)
                .map(|_| lock(classes[pick(4)], KINDS[pick(4)], scopes[pick(3)]))
                .collect();
            let ops: Vec<Vec<Step>> = (0..1 + pick(3))
                .map(|_| {
                    let mut op = vec![run(pick(2000) as f64)];
                    let taken: Vec<u32> = (0..nlocks as u32).filter(|_| pick(3) > 0).collect();
                    for &l in &taken {
                        op.push(acq(l, pick(2) == 0));
                        op.push(lines(l, pick(8) as u32, pick(3) as u32));
                        op.push(run(pick(500) as f64));
                    }
                    for &l in taken.iter().rev() {
                        op.push(rel(l));
                        op.push(run(pick(100) as f64));
                    }
                    op
                })
                .collect();
            let nodes = 1 + pick(4);
            let m = machine(nodes, 1 + pick(16), 20.0, 200.0, pick(5000) as f64);
            let n = 1 + pick(m.cpus());
            let lock_kind = [
                None,
                Some(LockKind::Rwsem),
                Some(LockKind::Numa),
                Some(LockKind::Std),
            ][pick(4)];
            let mut p = profile(locks, ops);
            if pick(3) == 0 {
                let mut to = p.clone();
                for l in &mut to.locks {
                    l.scope = Scope::Group;
                }
                p.converts_to = Some(Box::new(Conversion {
                    after: pick(50) as u32,
                    profile: to,
                }));
            }
            let c = Config {
                seed: round,
                ops_per_cpu: 30,
                ..config(n, lock_kind)
            };
            let a = simulate(&p, &m, &c);
            let a = match a {
                Ok(a) => a,
                // A profile whose operations take no time has no rate.
                Err(SimError::NoTime { .. }) if p.mean_op_ns() == 0.0 => continue,
                Err(e) => panic!("round {round}: {e}\n{p:?}\n{m:?}\n{c:?}"),
            };
            assert!(
                a.ops_per_sec > 0.0 && a.ops_per_sec.is_finite(),
                "{round}: {a:?}"
            );
            assert!(close(a.breakdown.total(), 1.0, 1e-9), "{round}: {a:?}");
            assert_eq!(simulate(&p, &m, &c), Ok(a));
        }
    }

    /// About twenty steps an operation, the size of the suite's profiles.
    fn twenty_steps() -> Profile {
        profile(
            vec![
                lock(LockClass::MmapLock, LockKind::Rwsem, Scope::Worker),
                lock(LockClass::IMmap, LockKind::Rwsem, Scope::Shared),
                lock(LockClass::AnonVma, LockKind::Rwsem, Scope::Worker),
            ],
            vec![
                vec![
                    run(800.0),
                    acq(0, true),
                    run(200.0),
                    acq(2, true),
                    lines(2, 3, 1),
                    run(100.0),
                    rel(2),
                    acq(1, true),
                    lines(1, 12, 3),
                    run(300.0),
                    rel(1),
                    run(100.0),
                    rel(0),
                    run(400.0),
                ],
                vec![
                    run(900.0),
                    acq(0, true),
                    run(150.0),
                    acq(1, true),
                    lines(1, 10, 4),
                    run(250.0),
                    rel(1),
                    rel(0),
                    run(300.0),
                ],
            ],
        )
    }

    fn twelve_by_32() -> Machine {
        let mut m = machine(12, 32, 25.0, 0.0, 3000.0);
        m.ccx_cpus = 8;
        m.node_ns = 60.0;
        for (i, row) in m.remote_ns.iter_mut().enumerate() {
            for (j, v) in row.iter_mut().enumerate() {
                *v = if i / 4 == j / 4 { 150.0 } else { 250.0 };
            }
        }
        m
    }

    #[test]
    fn simulates_384_cpus() {
        let m = twelve_by_32();
        let c = Config {
            ops_per_cpu: 20,
            ..config(384, None)
        };
        let r = simulate(&twenty_steps(), &m, &c).unwrap();
        assert_eq!(r.cpus, 384);
        assert!(r.ops_per_sec > 0.0);
        assert!(close(r.breakdown.total(), 1.0, 1e-9));
    }

    /// `cargo test -p vmproject --release -- --ignored --nocapture
    /// timing`: what a `vmbench project` sweep costs.
    #[test]
    #[ignore]
    fn timing() {
        let m = twelve_by_32();
        let p = twenty_steps();
        let all = std::time::Instant::now();
        for kind in [LockKind::Rwsem, LockKind::Numa, LockKind::Std] {
            let t = std::time::Instant::now();
            let r = simulate(&p, &m, &config(384, Some(kind))).unwrap();
            println!(
                "{kind:?} 384 CPUs: {:.3} s, {:.0} ops/s",
                t.elapsed().as_secs_f64(),
                r.ops_per_sec
            );
        }
        for kind in [LockKind::Rwsem, LockKind::Numa, LockKind::Std] {
            for n in [1, 2, 4, 8, 16, 32, 64, 128, 256, 384] {
                let r = simulate(&p, &m, &config(n, Some(kind))).unwrap();
                let c = r.breakdown.class(LockClass::IMmap);
                println!(
                    "{kind:?} {n:>3}: {:>9.0} ops/s, outside {:.2}, i_mmap held {:.2} \
                     (transfers {:.2}) spin {:.2} sleep {:.2}",
                    r.ops_per_sec, r.breakdown.outside, c.held, c.transfers, c.spinning, c.sleeping
                );
            }
        }
        let t = std::time::Instant::now();
        let mut points = 0;
        for _design in 0..5 {
            for kind in [LockKind::Rwsem, LockKind::Numa, LockKind::Std] {
                for n in [1, 2, 4, 8, 16, 32, 64, 128, 256, 384] {
                    simulate(&p, &m, &config(n, Some(kind))).unwrap();
                    points += 1;
                }
            }
        }
        println!(
            "sweep of {points} points: {:.2} s (all: {:.2} s)",
            t.elapsed().as_secs_f64(),
            all.elapsed().as_secs_f64()
        );
        // A kernbench-sized operation: 2000 steps, 200 lock pairs.
        let mut op = Vec::new();
        for k in 0..200 {
            let l = (k % 3) as u32;
            op.extend([
                run(300.0),
                acq(l, k % 2 == 0),
                lines(l, 4, 1),
                run(100.0),
                run(50.0),
                lines(l, 2, 0),
                run(20.0),
                rel(l),
                run(10.0),
                run(10.0),
            ]);
        }
        let mut big = twenty_steps();
        big.ops = vec![op];
        assert_eq!(ops_per_cpu_for(&big), 20);
        assert_eq!(ops_per_cpu_for(&p), 200);
        let scaled = |n, kind| Config {
            ops_per_cpu: ops_per_cpu_for(&big),
            ..config(n, Some(kind))
        };
        let t = std::time::Instant::now();
        for kind in [LockKind::Rwsem, LockKind::Numa, LockKind::Std] {
            for n in [1, 2, 4, 8, 16, 32, 64, 128, 256, 384] {
                simulate(&big, &m, &scaled(n, kind)).unwrap();
            }
        }
        println!(
            "2000-step op, 3 kinds x 10 CPU counts at ops_per_cpu_for: {:.2} s",
            t.elapsed().as_secs_f64()
        );
        for kind in [LockKind::Rwsem, LockKind::Numa, LockKind::Std] {
            let t = std::time::Instant::now();
            let r = simulate(&big, &m, &config(384, Some(kind))).unwrap();
            println!(
                "2000-step op, {kind:?} 384 CPUs: {:.3} s, {:.0} ops/s",
                t.elapsed().as_secs_f64(),
                r.ops_per_sec
            );
        }
    }
}
