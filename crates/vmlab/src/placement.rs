//! Where the host put the workers' CPUs, held alike across the runs of one
//! invocation.
//!
//! On a virtual machine the host may move the vCPUs between its cores from
//! one minute to the next. On this project's 2-vCPU AMD EPYC guest the
//! one-way cache-line transfer between the two read about 16 ns when they
//! were hyperthreads of one core, about 33 ns when they were two cores of
//! one core complex and about 105 ns across complexes, changing every few
//! seconds to minutes. A figure at several workers depends on it: execl
//! with one i_mmap tree for libc ran two workers at 1.7x one worker's rate
//! at 33 ns and at 1.0x at 105 ns, minutes apart, with the same binary
//! (docs/RESULTS.md, "Where the host puts the two vCPUs"). Two runs of one
//! table that differ only in placement are not comparable.
//!
//! So before each run of several pinned workers, a [`Gate`] measures the
//! transfer between the first two workers' CPUs and, under
//! [`Rule::Hold`] (the default) or [`Rule::Near`], waits until it is
//! [`alike`] the target: the first such run's placement, or the one asked
//! for. After the run it measures again, and a run during which the
//! placement changed is taken again (up to [`ATTEMPTS`] times). Where the
//! host keeps the CPUs elsewhere for longer than [`WAIT`], `hold` follows
//! it: the runs from then on hold the new placement. What was
//! measured before and after is recorded with the run, so a reader can
//! still tell.
//!
//! On a machine whose threads stay where they are pinned, the transfer is
//! the same every time and nothing waits.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mm::topology::Topology;

use crate::LabError;

pub use vmresults::samples::{alike, PLACEMENT_BAND as BAND};

/// How long a run waits for its placement before it runs anyway (the
/// record then shows the placement it had).
pub const WAIT: Duration = Duration::from_secs(30);

/// How often a waiting gate measures again. A measurement is a ping-pong
/// of about a millisecond on the two CPUs.
pub const POLL: Duration = Duration::from_millis(100);

/// Runs taken of one point at most when the placement changes during
/// them: the last is kept whatever happened.
pub const ATTEMPTS: usize = 3;

/// Which placement the runs of several workers wait for (`--placement`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Rule {
    /// Measure and record it, never wait (`any`).
    Any,
    /// Wait for the placement the first run of several workers had
    /// (`hold`, the default). When a wait runs out, the placement the
    /// host kept the CPUs in is held from then on.
    #[default]
    Hold,
    /// Wait for a transfer time [`alike`] this many nanoseconds (`NS`,
    /// e.g. `33` for two cores of one complex on the guest above).
    Near(f64),
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::Any => f.write_str("any"),
            Rule::Hold => f.write_str("hold"),
            Rule::Near(ns) => write!(f, "{ns}"),
        }
    }
}

impl FromStr for Rule {
    type Err = LabError;

    /// `any`, `hold`, or a positive number of nanoseconds.
    ///
    /// ```
    /// use vmlab::placement::Rule;
    /// assert_eq!("hold".parse::<Rule>().unwrap(), Rule::Hold);
    /// assert_eq!("33".parse::<Rule>().unwrap(), Rule::Near(33.0));
    /// assert!("-1".parse::<Rule>().is_err());
    /// ```
    fn from_str(s: &str) -> Result<Rule, LabError> {
        match s {
            "any" => Ok(Rule::Any),
            "hold" => Ok(Rule::Hold),
            _ => match s.parse::<f64>() {
                Ok(ns) if ns.is_finite() && ns > 0.0 => Ok(Rule::Near(ns)),
                _ => Err(LabError(format!(
                    "--placement: '{s}' is not any, hold or a positive number of nanoseconds"
                ))),
            },
        }
    }
}

/// The lab's gate: it measures the one-way transfer between the CPUs of
/// workers 0 and 1 on `topology` ([`crate::topology::transfer_ns`]).
pub fn first_two_workers(
    rule: Rule,
    topology: Arc<Topology>,
) -> Gate<impl FnMut() -> Result<f64, LabError>> {
    Gate::new(rule, move || {
        crate::topology::transfer_ns(topology.real_cpu(0), topology.real_cpu(1))
    })
}

/// The placement one run had.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Placed {
    /// One-way transfer between the first two workers' CPUs just before
    /// the kept run, in nanoseconds.
    pub before_ns: f64,
    /// The same just after it.
    pub after_ns: f64,
    /// Time spent waiting for the placement, over all attempts.
    pub waited: Duration,
    /// Runs taken, the kept one included.
    pub attempts: usize,
}

impl Placed {
    /// Whether the placement was the same before and after the kept run.
    pub fn held(&self) -> bool {
        alike(self.before_ns, self.after_ns)
    }
}

/// Measures where the workers' CPUs are and waits for the placement its
/// [`Rule`] asks for. `M` measures the one-way transfer in nanoseconds
/// (in the lab, [`crate::topology::transfer_ns`] of the first two
/// workers' CPUs).
///
/// ```
/// use std::time::Duration;
/// use vmlab::placement::{Gate, Rule};
/// // A host that moves the CPUs apart for two measurements.
/// let mut seen = vec![33.0, 104.0, 106.0, 34.0, 33.0, 35.0].into_iter();
/// let mut gate = Gate::new(Rule::Hold, move || Ok(seen.next().unwrap_or(33.0)))
///     .polling(Duration::ZERO, Duration::from_secs(1));
/// let (_, first) = gate.run(|| Ok::<_, vmlab::LabError>("first run")).unwrap();
/// // The first try moved (33 -> 104 ns); the gate waited out 106 ns and
/// // ran again at 34 ns, and the CPUs stayed there (33 ns after).
/// assert_eq!((first.before_ns, first.after_ns, first.attempts), (34.0, 33.0, 2));
/// assert_eq!(gate.reference(), Some(33.0));
/// ```
pub struct Gate<M> {
    rule: Rule,
    reference: Option<f64>,
    measure: M,
    poll: Duration,
    wait: Duration,
}

impl<M: FnMut() -> Result<f64, LabError>> Gate<M> {
    /// A gate that waits as `rule` says, polling every [`POLL`] for at
    /// most [`WAIT`] per run.
    pub fn new(rule: Rule, measure: M) -> Gate<M> {
        Gate {
            reference: match rule {
                Rule::Near(ns) => Some(ns),
                Rule::Any | Rule::Hold => None,
            },
            rule,
            measure,
            poll: POLL,
            wait: WAIT,
        }
    }

    /// Polls every `poll` for at most `wait` per run, instead of
    /// [`POLL`] and [`WAIT`] (tests poll without sleeping).
    pub fn polling(mut self, poll: Duration, wait: Duration) -> Gate<M> {
        self.poll = poll;
        self.wait = wait;
        self
    }

    /// Holds `ns` from the start, as if an earlier run had had it: a
    /// resumed suite holds the placement its recorded samples had. Ignored
    /// under [`Rule::Any`] and [`Rule::Near`].
    pub fn holding(mut self, ns: Option<f64>) -> Gate<M> {
        if self.rule == Rule::Hold {
            self.reference = ns.filter(|&ns| ns > 0.0);
        }
        self
    }

    /// The transfer time the gate waits for, once it has one.
    pub fn reference(&self) -> Option<f64> {
        match self.rule {
            Rule::Any => None,
            Rule::Hold | Rule::Near(_) => self.reference,
        }
    }

    /// Measures until the placement is the one asked for, or [`WAIT`]
    /// has passed; returns the last measurement and the time waited.
    fn settle(&mut self) -> Result<(f64, Duration), LabError> {
        let start = Instant::now();
        loop {
            let ns = (self.measure)()?;
            let target = match self.reference() {
                None => {
                    if self.rule == Rule::Hold {
                        self.reference = Some(ns);
                    }
                    return Ok((ns, start.elapsed()));
                }
                Some(t) => t,
            };
            if alike(ns, target) {
                return Ok((ns, start.elapsed()));
            }
            if start.elapsed() >= self.wait {
                // The host keeps the CPUs elsewhere. Holding on would make
                // every later run wait as long; follow the host instead,
                // so that at least the runs from here on are alike.
                if self.rule == Rule::Hold {
                    self.reference = Some(ns);
                }
                return Ok((ns, start.elapsed()));
            }
            std::thread::sleep(self.poll);
        }
    }

    /// Runs `f` once the placement is the one asked for, and again (up to
    /// [`ATTEMPTS`] runs) while the placement changes during it; returns
    /// the last run's result and its placement. Under [`Rule::Any`] it
    /// measures before and after and runs once.
    ///
    /// Errors: the measurement's (a CPU the measuring threads cannot be
    /// pinned to), or the first error of `f`.
    pub fn run<T, E>(&mut self, mut f: impl FnMut() -> Result<T, E>) -> Result<(T, Placed), E>
    where
        E: From<LabError>,
    {
        let mut waited = Duration::ZERO;
        let mut attempts = 0;
        loop {
            let (before_ns, w) = self.settle()?;
            waited += w;
            attempts += 1;
            let out = f()?;
            let after_ns = (self.measure)()?;
            let placed = Placed {
                before_ns,
                after_ns,
                waited,
                attempts,
            };
            if placed.held() || self.rule == Rule::Any || attempts >= ATTEMPTS {
                return Ok((out, placed));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A gate over a scripted host: each measurement takes the next value
    /// (the last one repeats), and the values taken are counted.
    fn scripted(rule: Rule, values: &[f64]) -> Gate<impl FnMut() -> Result<f64, LabError>> {
        let values = values.to_vec();
        let mut i = 0;
        Gate::new(rule, move || {
            let v = values[i.min(values.len() - 1)];
            i += 1;
            Ok(v)
        })
        .polling(Duration::ZERO, Duration::from_millis(50))
    }

    /// One run through `gate` that counts itself in `runs`.
    fn count<M: FnMut() -> Result<f64, LabError>>(
        gate: &mut Gate<M>,
        runs: &mut usize,
    ) -> ((), Placed) {
        gate.run(|| {
            *runs += 1;
            Ok::<_, LabError>(())
        })
        .unwrap()
    }

    #[test]
    fn rules_parse_and_print_back() {
        for text in ["any", "hold", "33", "104.5"] {
            assert_eq!(text.parse::<Rule>().unwrap().to_string(), text);
        }
        for bad in ["", "0", "-3", "nan", "inf", "near"] {
            let e = bad.parse::<Rule>().unwrap_err().to_string();
            assert!(e.starts_with("--placement:"), "{bad}: {e}");
        }
    }

    #[test]
    fn placements_are_alike_within_the_band_only() {
        assert!(alike(30.0, 45.0));
        assert!(!alike(30.0, 45.1));
        assert!(!alike(0.0, 0.0));
        assert!(!alike(-1.0, -1.0));
    }

    #[test]
    fn hold_waits_for_the_first_runs_placement() {
        // First run at 33 ns; the host then moves the CPUs apart for three
        // measurements before bringing them back.
        let mut gate = scripted(Rule::Hold, &[33.0, 34.0, 105.0, 104.0, 106.0, 32.0, 33.0]);
        let mut runs = 0;
        let (_, first) = count(&mut gate, &mut runs);
        assert_eq!(
            (first.before_ns, first.after_ns, first.attempts),
            (33.0, 34.0, 1)
        );
        let (_, second) = count(&mut gate, &mut runs);
        assert_eq!((second.before_ns, second.after_ns), (32.0, 33.0));
        assert_eq!((second.attempts, runs), (1, 2));
        assert_eq!(gate.reference(), Some(33.0));
    }

    #[test]
    fn a_run_whose_placement_moves_is_taken_again_up_to_the_limit() {
        // Every run ends on the other placement.
        let mut gate = scripted(
            Rule::Near(33.0),
            &[33.0, 105.0, 33.0, 105.0, 33.0, 105.0, 33.0],
        );
        let mut runs = 0;
        let (_, placed) = count(&mut gate, &mut runs);
        assert_eq!(runs, ATTEMPTS);
        assert_eq!(placed.attempts, ATTEMPTS);
        assert!(!placed.held());
    }

    #[test]
    fn a_placement_that_never_comes_runs_anyway_after_the_wait() {
        let mut gate = scripted(Rule::Near(16.0), &[105.0]);
        let (ran, placed) = gate.run(|| Ok::<_, LabError>(true)).unwrap();
        assert!(ran);
        assert_eq!((placed.before_ns, placed.after_ns), (105.0, 105.0));
        assert!(placed.held()); // it did not move during the run
    }

    #[test]
    fn hold_follows_a_placement_the_host_keeps_past_the_wait() {
        // First run at 105 ns; from then on the host keeps them at 33 ns.
        let mut gate = scripted(Rule::Hold, &[105.0, 104.0, 33.0]);
        gate.run(|| Ok::<_, LabError>(())).unwrap();
        assert_eq!(gate.reference(), Some(105.0));
        let (_, placed) = gate.run(|| Ok::<_, LabError>(())).unwrap();
        assert_eq!(placed.before_ns, 33.0);
        assert!(placed.waited >= Duration::from_millis(50));
        // The next run takes 33 ns as it comes, with no wait.
        assert_eq!(gate.reference(), Some(33.0));
        let (_, next) = gate.run(|| Ok::<_, LabError>(())).unwrap();
        assert!(next.waited < Duration::from_millis(20), "{next:?}");
    }

    #[test]
    fn any_never_waits_nor_repeats() {
        let mut gate = scripted(Rule::Any, &[33.0, 105.0, 16.0]);
        let mut runs = 0;
        let (_, placed) = count(&mut gate, &mut runs);
        assert_eq!((placed.before_ns, placed.after_ns, runs), (33.0, 105.0, 1));
        assert_eq!(gate.reference(), None);
    }

    #[test]
    fn a_resumed_hold_keeps_the_recorded_placement() {
        let mut gate = scripted(Rule::Hold, &[105.0, 33.0, 33.0]).holding(Some(33.0));
        let (_, placed) = gate.run(|| Ok::<_, LabError>(())).unwrap();
        assert_eq!(placed.before_ns, 33.0);
        // Near and Any ignore a recorded placement.
        let near = scripted(Rule::Near(105.0), &[105.0]).holding(Some(33.0));
        assert_eq!(near.reference(), Some(105.0));
    }

    #[test]
    fn errors_of_the_run_and_of_the_measurement_come_back() {
        let mut gate = scripted(Rule::Hold, &[33.0]);
        let e = gate
            .run(|| Err::<(), _>(LabError("boom".to_string())))
            .unwrap_err();
        assert_eq!(e.to_string(), "boom");
        let mut broken = Gate::new(Rule::Hold, || Err(LabError("cannot pin".to_string())));
        let e = broken.run(|| Ok::<_, LabError>(())).unwrap_err();
        assert_eq!(e.to_string(), "cannot pin");
    }
}
