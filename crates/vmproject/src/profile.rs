//! What one operation of a workload does, as the simulation replays it.
//!
//! A [`Profile`] is recorded at one worker on a real machine. Each
//! operation is a list of [`Step`]s: time running ([`Step::Run`]), a lock
//! taken or released, and the shared cache lines read and written inside a
//! critical section ([`Step::Lines`]). Locks are listed once in
//! [`Profile::locks`] and named by their position there; a [`Scope`] says
//! how many instances of each exist when many CPUs run the workload, which
//! is what decides whether two CPUs contend.
//!
//! Times are those of one worker with its data in its own caches: the
//! simulation adds the cost of lines that other CPUs wrote last, and of
//! waiting.

use serde::{Deserialize, Serialize};

/// The profile format this crate reads and writes.
pub const FORMAT: u32 = 1;

/// A lock class, as the lab's lock statistics group locks
/// (`mm::lockstat::LockClass`). Mirrored rather than imported: a profile is
/// data, and this crate reads and simulates it without the address-space
/// model (one recorded elsewhere, or from another model, reads the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LockClass {
    /// An address space's `mmap_lock`.
    MmapLock,
    /// A VMA's lock, taken by the lockless fault path.
    VmaLock,
    /// A file's reverse-map lock (`i_mmap_rwsem`), any design's.
    IMmap,
    /// An anon_vma family's lock.
    AnonVma,
}

impl LockClass {
    /// Every class, in report order.
    pub const ALL: [LockClass; 4] = [
        LockClass::MmapLock,
        LockClass::VmaLock,
        LockClass::IMmap,
        LockClass::AnonVma,
    ];

    /// The class's name in reports and JSON, as the lab's lock statistics
    /// spell it.
    pub fn name(self) -> &'static str {
        match self {
            LockClass::MmapLock => "mmap_lock",
            LockClass::VmaLock => "vma_lock",
            LockClass::IMmap => "i_mmap",
            LockClass::AnonVma => "anon_vma",
        }
    }
}

/// The algorithm a lock instance runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LockKind {
    /// The kernel's rwsem: a one-CAS fast path, optimistic spinning while
    /// the owner runs (one spinner at a time, the rest queued in an
    /// MCS-style spin queue), then a sleeping FIFO wait queue, with the
    /// lock handed to a waiter that has waited too long.
    Rwsem,
    /// The rwsem whose wait queue prefers waiters on the releasing
    /// holder's node, a bounded number of times in a row.
    Numa,
    /// The standard library's lock: a short spin, then a futex sleep.
    Std,
    /// A VMA's lock: readers count in one word, a reader that finds a
    /// writer does not wait on it but falls back (in the simulation: it
    /// waits like an rwsem reader, without sleeping).
    Vma,
}

/// How many instances of a recorded lock exist when many CPUs run the
/// workload, and so which CPUs share one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// One per CPU: a lock of the worker's own address space in processes
    /// mode. Never contended; its lines stay in the CPU's caches.
    Worker,
    /// One for every CPU: threads mode's `mmap_lock`, the i_mmap lock of
    /// a file every worker maps under the `single` design.
    Shared,
    /// One per i_mmap group: a CPU uses its group's instance
    /// ([`Machine::group_of`](crate::Machine::group_of)).
    Group,
}

/// One lock instance an operation takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockRef {
    /// Its class.
    pub class: LockClass,
    /// Its algorithm, as recorded. The simulation may replace the kind of
    /// the reverse-map locks (i_mmap and anon_vma) to compare lock kinds
    /// on one profile.
    pub kind: LockKind,
    /// How many instances there are.
    pub scope: Scope,
}

/// One step of an operation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum Step {
    /// Running for `ns` nanoseconds, inside or outside locks, with the
    /// data in this CPU's caches.
    Run {
        /// Nanoseconds.
        ns: f64,
    },
    /// Taking lock `lock` (an index into [`Profile::locks`]).
    Acquire {
        /// The lock.
        lock: u32,
        /// Exclusive (`true`) or shared.
        write: bool,
    },
    /// Releasing lock `lock`, taken by an earlier `Acquire` of the same
    /// operation.
    Release {
        /// The lock.
        lock: u32,
    },
    /// Shared cache lines of the data lock `lock` protects (tree nodes,
    /// list heads, counters), counted from the structure as the critical
    /// section walked it: `read` lines read, `written` lines written.
    /// The lock word itself is not counted here: every acquisition and
    /// release touches it.
    Lines {
        /// The lock whose data the lines are.
        lock: u32,
        /// Lines read (and not written).
        read: u32,
        /// Lines written.
        written: u32,
        /// Of `read + written`, the lines the section reached through a
        /// pointer (the first line of each tree node it descended to):
        /// loads that wait for the load before them, so the CPU cannot
        /// fetch them together with the rest. 0 in profiles recorded
        /// before it was counted, which are simulated as before.
        #[serde(default, skip_serializing_if = "is_zero")]
        chain: u32,
    },
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A workload's operations, recorded at one worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// [`FORMAT`].
    pub format: u32,
    /// The workload (`execl`, `brk1`, ...).
    pub workload: String,
    /// `processes` or `threads`.
    pub mode: String,
    /// The VMA index (`maple` or `legacy`).
    pub index: String,
    /// The i_mmap design (`single`, `split`, ...).
    pub imap: String,
    /// The reverse-map lock kind it was recorded with (`rwsem`, ...).
    pub lock: String,
    /// Whether the anon_vma end-only rule was on.
    pub anon_rule: bool,
    /// The machine it was recorded on, as `vmbench run` names topologies
    /// (`host(1x2)`).
    pub recorded_on: String,
    /// One worker's throughput on that machine, measured without the
    /// recorder, in operations per second. The steps' times are scaled so
    /// that an average operation takes `1 / ops_per_sec`.
    pub ops_per_sec: f64,
    /// Every lock instance the operations take.
    pub locks: Vec<LockRef>,
    /// Consecutive operations of one worker, each a list of steps. A
    /// simulated CPU runs them in order, round and round.
    pub ops: Vec<Vec<Step>>,
    /// `adaptive`: the profile of the design it converts to
    /// (`distributed`) and how many contended acquisitions of a shared
    /// i_mmap lock convert it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub converts_to: Option<Box<Conversion>>,
    /// Threads mode: the operations of two workers whose calls took
    /// turns on the one address space (worker 0's first operation, worker
    /// 1's, worker 0's second, ...), which the simulation of two CPUs or
    /// more runs instead of [`ops`](Profile::ops) whenever another CPU
    /// wrote under a lock they share since a CPU's previous operation
    /// began (see [`crate::sim`]): what a worker's calls
    /// do when another worker's calls come between them (its anonymous
    /// mapping merges with the other's, so both take one VMA's lock; its
    /// `brk` finds the break moved already). Its `ops_per_sec` is the
    /// throughput of two workers taking turns on one CPU, measured
    /// without the recorder, less what taking turns on one CPU costs by
    /// itself (the recorder measures that on two workers that share no
    /// address space), and its run times are scaled to it. Of an even
    /// number of them, the simulation gives each CPU one worker's side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interleaved: Option<Box<Profile>>,
    /// The factor [`calibrate`](Profile::calibrate) scaled the recorded
    /// run times by, all its calls together: the unrecorded operation's
    /// length over the recorded one's. Near 1 when the recorder took all
    /// of its own time out; below 1 when the recording ran long, and then
    /// the runs between critical sections, where the recorder has few
    /// hooks, shrink with the rest (`docs/projection.md`, "The recorder's
    /// own time"). Absent in profiles never calibrated, and in those
    /// written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaled: Option<f64>,
}

/// `adaptive`'s switch from one design to another under contention.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Conversion {
    /// Contended acquisitions of a [`Scope::Shared`] i_mmap lock after
    /// which the file converts.
    pub after: u32,
    /// The operations from then on.
    pub profile: Profile,
}

/// Why a profile cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("profile {workload}: {why}")]
pub struct ProfileError {
    /// The profile's workload.
    pub workload: String,
    /// What is wrong.
    pub why: String,
}

impl Profile {
    fn error(&self, why: String) -> ProfileError {
        ProfileError {
            workload: self.workload.clone(),
            why,
        }
    }

    /// The profile the simulation of `cpus` CPUs starts from: the
    /// [`interleaved`](Profile::interleaved) operations from two CPUs on,
    /// where there are some, and this profile's own otherwise. (From two
    /// CPUs on, a CPU whose call meets no other CPU's work runs this
    /// profile's own operations: see [`crate::sim`].)
    ///
    /// ```
    /// use vmproject::{Profile, Step};
    /// let alone = Profile {
    ///     format: vmproject::profile::FORMAT,
    ///     workload: "brk1".into(),
    ///     mode: "threads".into(),
    ///     index: "maple".into(),
    ///     imap: "single".into(),
    ///     lock: "rwsem".into(),
    ///     anon_rule: true,
    ///     recorded_on: "host(1x2)".into(),
    ///     ops_per_sec: 1e6,
    ///     locks: vec![],
    ///     ops: vec![vec![Step::Run { ns: 1000.0 }]],
    ///     converts_to: None,
    ///     interleaved: None,
    ///     scaled: None,
    /// };
    /// let mut p = alone.clone();
    /// p.interleaved = Some(Box::new(Profile { ops_per_sec: 2e6, ..alone }));
    /// assert_eq!(p.for_cpus(1).ops_per_sec, 1e6);
    /// assert_eq!(p.for_cpus(2).ops_per_sec, 2e6);
    /// ```
    pub fn for_cpus(&self, cpus: usize) -> &Profile {
        match &self.interleaved {
            Some(p) if cpus >= 2 => p,
            _ => self,
        }
    }

    /// Checks what the simulation relies on: the format, at least one
    /// operation, a positive finite throughput and step times, lock
    /// indexes in range, and every operation releasing exactly the locks it
    /// took, each after taking it, none taken twice at once.
    pub fn validate(&self) -> Result<(), ProfileError> {
        if self.format != FORMAT {
            return Err(self.error(format!(
                "format {} (this build reads format {FORMAT})",
                self.format
            )));
        }
        if !self.ops_per_sec.is_finite() || self.ops_per_sec <= 0.0 {
            return Err(self.error(format!("ops_per_sec {} is not positive", self.ops_per_sec)));
        }
        if self.ops.is_empty() {
            return Err(self.error("no operations".to_string()));
        }
        let nlocks = self.locks.len();
        for (i, op) in self.ops.iter().enumerate() {
            let mut held = vec![false; nlocks];
            for step in op {
                let bad = |why: String| self.error(format!("operation {i}: {why}"));
                match *step {
                    Step::Run { ns } if !ns.is_finite() || ns < 0.0 => {
                        return Err(bad(format!("a run of {ns} ns")));
                    }
                    Step::Run { .. } => {}
                    Step::Acquire { lock, .. }
                    | Step::Release { lock }
                    | Step::Lines { lock, .. }
                        if lock as usize >= nlocks =>
                    {
                        return Err(bad(format!("lock {lock} of {nlocks}")));
                    }
                    Step::Acquire { lock, .. } => {
                        if std::mem::replace(&mut held[lock as usize], true) {
                            return Err(bad(format!("lock {lock} taken twice")));
                        }
                    }
                    Step::Release { lock } => {
                        if !std::mem::replace(&mut held[lock as usize], false) {
                            return Err(bad(format!("lock {lock} released but not held")));
                        }
                    }
                    Step::Lines {
                        read,
                        written,
                        chain,
                        ..
                    } if u64::from(chain) > u64::from(read) + u64::from(written) => {
                        return Err(bad(format!(
                            "{chain} lines reached through a pointer of {} touched",
                            u64::from(read) + u64::from(written)
                        )));
                    }
                    Step::Lines { .. } => {}
                }
            }
            if let Some(l) = held.iter().position(|&h| h) {
                return Err(self.error(format!("operation {i}: lock {l} never released")));
            }
        }
        if let Some(c) = &self.converts_to {
            c.profile.validate()?;
        }
        if let Some(p) = &self.interleaved {
            p.validate()?;
        }
        Ok(())
    }

    /// The mean time of one operation's [`Step::Run`]s, in nanoseconds.
    pub fn mean_op_ns(&self) -> f64 {
        let total: f64 = self
            .ops
            .iter()
            .flatten()
            .map(|s| match s {
                Step::Run { ns } => *ns,
                _ => 0.0,
            })
            .sum();
        total / self.ops.len().max(1) as f64
    }

    /// Scales every [`Step::Run`] so that the mean operation takes
    /// `1 / ops_per_sec`: the recorder's own overhead (a timestamp per
    /// step) is taken out evenly. Does nothing to a profile whose steps
    /// add up to no time. [`scaled`](Profile::scaled) keeps the factor.
    pub fn calibrate(&mut self) {
        let mean = self.mean_op_ns();
        if mean <= 0.0 || self.ops_per_sec.is_nan() || self.ops_per_sec <= 0.0 {
            return;
        }
        let k = 1e9 / self.ops_per_sec / mean;
        for s in self.ops.iter_mut().flatten() {
            if let Step::Run { ns } = s {
                *ns *= k;
            }
        }
        self.scaled = Some(self.scaled.unwrap_or(1.0) * k);
    }

    /// Sets the one-worker rate to `ops_per_sec`, a better measurement of
    /// it (the median of several runs, say), and
    /// [`calibrate`](Profile::calibrate)s. The
    /// [`interleaved`](Profile::interleaved) operations' rate was measured
    /// against the one-worker rate (two workers taking turns in one
    /// address space over two in address spaces of their own, times that
    /// rate), so it moves by the same factor and is calibrated again too.
    /// A rate, given or held, that is not positive and finite changes
    /// nothing.
    ///
    /// ```
    /// use vmproject::{Profile, Step};
    /// let mut p = Profile {
    ///     format: vmproject::profile::FORMAT,
    ///     workload: "malloc1".into(),
    ///     mode: "threads".into(),
    ///     index: "maple".into(),
    ///     imap: "single".into(),
    ///     lock: "rwsem".into(),
    ///     anon_rule: true,
    ///     recorded_on: "host(1x2)".into(),
    ///     ops_per_sec: 1e6,
    ///     locks: vec![],
    ///     ops: vec![vec![Step::Run { ns: 1000.0 }]],
    ///     converts_to: None,
    ///     interleaved: None,
    ///     scaled: None,
    /// };
    /// p.interleaved = Some(Box::new(Profile { ops_per_sec: 5e5, ..p.clone() }));
    /// p.calibrate_to(8e5);
    /// let turns = p.interleaved.as_deref().unwrap();
    /// assert_eq!((p.ops_per_sec, turns.ops_per_sec), (8e5, 4e5));
    /// assert!((turns.mean_op_ns() - 2500.0).abs() < 1e-9);
    /// ```
    pub fn calibrate_to(&mut self, ops_per_sec: f64) {
        let usable = |r: f64| r.is_finite() && r > 0.0;
        if !usable(ops_per_sec) || !usable(self.ops_per_sec) {
            return;
        }
        let factor = ops_per_sec / self.ops_per_sec;
        self.ops_per_sec = ops_per_sec;
        self.calibrate();
        if let Some(t) = self.interleaved.as_deref_mut() {
            t.ops_per_sec *= factor;
            t.calibrate();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(ops: Vec<Vec<Step>>) -> Profile {
        Profile {
            format: FORMAT,
            workload: "t".into(),
            mode: "processes".into(),
            index: "maple".into(),
            imap: "single".into(),
            lock: "rwsem".into(),
            anon_rule: true,
            recorded_on: "host(1x2)".into(),
            ops_per_sec: 1e6,
            locks: vec![LockRef {
                class: LockClass::IMmap,
                kind: LockKind::Rwsem,
                scope: Scope::Shared,
            }],
            ops,
            converts_to: None,
            interleaved: None,
            scaled: None,
        }
    }

    #[test]
    fn validate_finds_unbalanced_locks_and_bad_indexes() {
        let ok = profile(vec![vec![
            Step::Run { ns: 10.0 },
            Step::Acquire {
                lock: 0,
                write: true,
            },
            Step::Lines {
                lock: 0,
                read: 3,
                written: 1,
                chain: 4,
            },
            Step::Release { lock: 0 },
        ]]);
        assert_eq!(ok.validate(), Ok(()));
        let mut chained = ok.clone();
        if let Step::Lines { chain, .. } = &mut chained.ops[0][2] {
            *chain = 5;
        }
        assert!(chained
            .validate()
            .unwrap_err()
            .why
            .contains("5 lines reached through a pointer of 4 touched"));
        let open = profile(vec![vec![Step::Acquire {
            lock: 0,
            write: true,
        }]]);
        assert!(open.validate().unwrap_err().why.contains("never released"));
        let bad = profile(vec![vec![Step::Release { lock: 3 }]]);
        assert!(bad.validate().unwrap_err().why.contains("lock 3 of 1"));
        let twice = profile(vec![vec![Step::Release { lock: 0 }]]);
        assert!(twice.validate().unwrap_err().why.contains("not held"));
        assert!(profile(vec![]).validate().is_err());
    }

    #[test]
    fn calibrate_scales_runs_to_the_measured_rate() {
        let mut p = profile(vec![
            vec![Step::Run { ns: 100.0 }],
            vec![Step::Run { ns: 300.0 }],
        ]);
        p.calibrate();
        // 1e6 ops/s is 1000 ns a operation; the 1:3 shape stays.
        assert!((p.mean_op_ns() - 1000.0).abs() < 1e-9);
        assert_eq!(p.ops[0][0], Step::Run { ns: 500.0 });
        // The recording ran 200 ns an operation: scaled by 5.
        assert_eq!(p.scaled, Some(5.0));
        // A second calibration, to a rate measured later, composes.
        p.ops_per_sec = 2e6;
        p.calibrate();
        assert_eq!(p.ops[0][0], Step::Run { ns: 250.0 });
        assert!((p.scaled.unwrap() - 2.5).abs() < 1e-12);
    }

    #[test]
    fn json_round_trip() {
        let p = profile(vec![vec![Step::Run { ns: 1.5 }]]);
        let text = serde_json::to_string(&p).unwrap();
        assert!(text.contains(r#"{"step":"run","ns":1.5}"#), "{text}");
        assert_eq!(serde_json::from_str::<Profile>(&text).unwrap(), p);
        // Lines recorded before chains were counted read as none.
        let old = r#"{"step":"lines","lock":0,"read":2,"written":1}"#;
        assert_eq!(
            serde_json::from_str::<Step>(old).unwrap(),
            Step::Lines {
                lock: 0,
                read: 2,
                written: 1,
                chain: 0
            }
        );
    }
}
