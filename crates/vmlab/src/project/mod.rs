//! `vmbench project`: the lab's workloads carried to machines it does not
//! have.
//!
//! A projection records a workload's [`profile`] at one
//! worker on this machine, then simulates many CPUs running it on a
//! described [`Machine`] ([`vmproject::sim`]). [`project`] does that for
//! every workload, design, lock kind and CPU count asked for;
//! [`validate`] checks the method where the answer can be measured: it
//! predicts this machine at more workers from its one-worker profile, runs
//! those workers for real, and reports the error of every prediction.
//!
//! Where a design cannot change a workload, it is projected once: a
//! profile that takes no i_mmap lock is projected for the first i_mmap
//! design only, and one that takes neither an i_mmap nor an anon_vma lock
//! for the first lock kind only (the lock kinds replace only those locks'
//! algorithm).

use std::sync::Arc;

use mm::lock::LockKind;
use mm::policy::ImapDesign;
use mm::topology::Topology;
use mm::IndexKind;
use serde::{Deserialize, Serialize};
use vmproject::sim::{self, Breakdown};
use vmproject::{LockClass, Machine, Profile};

pub mod report;

use crate::placement::{self, Rule};
use crate::profile;
use crate::run::harness::{self, Design, Mode, Spec, Timing};
use crate::run::workload::Workload;
use crate::LabError;

/// The profile's lock kind for one of the lab's.
pub fn lock_kind(kind: LockKind) -> vmproject::LockKind {
    match kind {
        LockKind::Std => vmproject::LockKind::Std,
        LockKind::Rwsem => vmproject::LockKind::Rwsem,
        LockKind::Numa => vmproject::LockKind::Numa,
    }
}

/// Operations recorded per profile unless asked otherwise.
pub const DEFAULT_RECORD_OPS: usize = 64;

/// How a profile is recorded and simulated, the same for a projection
/// and a validation.
#[derive(Debug, Clone)]
pub struct Method {
    /// The one-worker calibration run of each profile.
    pub timing: Timing,
    /// Operations recorded per profile.
    pub record_ops: usize,
    /// Resident VMAs per address space (see `vmbench run --resident`).
    pub resident: usize,
    /// `execl`: libc VMAs of the idle processes.
    pub resident_vmas: usize,
    /// Operations each simulated CPU completes in the measured window;
    /// `None` sizes it to the profile ([`sim::ops_per_cpu_for`]).
    pub ops_per_cpu: Option<usize>,
    /// The simulation's seed.
    pub seed: u64,
    /// The rwsem spinners' budget ([`sim::Config::spin_budget_ns`]):
    /// `None` simulates the kernel's rwsem (a projection); a validation
    /// sets the lab's own ([`mm::lock::spin_budget_ns`]), since it
    /// compares with the lock the lab runs.
    pub spin_budget_ns: Option<f64>,
}

impl Method {
    /// The simulation's configuration at `cpus` CPUs for `profile`, sized
    /// to the operations it runs there ([`Profile::for_cpus`]).
    fn sim(
        &self,
        profile: &Profile,
        cpus: usize,
        lock: Option<vmproject::LockKind>,
    ) -> sim::Config {
        sim::Config {
            cpus,
            lock,
            seed: self.seed,
            ops_per_cpu: self
                .ops_per_cpu
                .unwrap_or_else(|| sim::ops_per_cpu_for(profile.for_cpus(cpus))),
            spin_budget_ns: self.spin_budget_ns,
        }
    }
}

/// What a projection computes.
#[derive(Debug, Clone)]
pub struct ProjectConfig {
    /// Workloads and the mode each runs in, in report order.
    pub workloads: Vec<(Workload, Mode)>,
    /// VMA indexes.
    pub indexes: Vec<IndexKind>,
    /// i_mmap designs.
    pub imaps: Vec<ImapDesign>,
    /// Lock kinds of the reverse-map locks.
    pub locks: Vec<LockKind>,
    /// The machine projected onto.
    pub machine: Machine,
    /// CPU counts, each at most the machine's.
    pub cpus: Vec<usize>,
    /// How profiles are recorded and simulated.
    pub method: Method,
}

/// One projected point: a workload under one design on one machine at one
/// CPU count, and where its CPUs' time went.
#[derive(Debug, Clone, Serialize)]
pub struct ProjectedPoint {
    /// The workload.
    pub workload: String,
    /// `processes` or `threads`.
    pub mode: String,
    /// The VMA index.
    pub index: String,
    /// The i_mmap design.
    pub imap: String,
    /// The reverse-map lock kind.
    pub lock: String,
    /// The machine's name.
    pub machine: String,
    /// Simulated CPUs.
    pub cpus: usize,
    /// Projected throughput, all CPUs together.
    pub value: f64,
    /// `ops/s`.
    pub unit: &'static str,
    /// Where the CPUs' time went.
    pub breakdown: Breakdown,
}

/// The topology a profile is recorded under for `machine`: this machine's
/// own for `host`, else the machine's shape emulated, so that the i_mmap
/// groups (and the VMAs each group's tree holds) are the projected
/// machine's.
fn recording_topology(machine: &Machine) -> Result<Arc<Topology>, LabError> {
    if machine.name == "host" {
        return Ok(mm::topology::host());
    }
    Topology::emulated(machine.nodes, machine.cpus_per_node)
        .map(Arc::new)
        .map_err(|e| LabError(format!("machine {}: {e}", machine.name)))
}

/// A one-worker spec of `workload` under `design`.
fn spec(
    workload: Workload,
    mode: Mode,
    design: Design,
    topology: &Arc<Topology>,
    resident: usize,
    resident_vmas: usize,
) -> Spec {
    Spec {
        workload,
        mode,
        design,
        threads: 1,
        resident,
        resident_vmas,
        topology: Arc::clone(topology),
        pin: !topology.is_emulated(),
    }
}

fn takes(profile: &Profile, classes: &[LockClass]) -> bool {
    profile.locks.iter().any(|l| classes.contains(&l.class))
        || profile
            .converts_to
            .as_ref()
            .is_some_and(|c| c.profile.locks.iter().any(|l| classes.contains(&l.class)))
}

/// Records each workload's profiles and projects them onto the machine at
/// every CPU count; `on_point` sees each point as it is computed.
pub fn project(
    config: &ProjectConfig,
    on_point: &mut dyn FnMut(&ProjectedPoint),
) -> Result<Projection, LabError> {
    config
        .machine
        .validate()
        .map_err(|e| LabError(e.to_string()))?;
    if let Some(&c) = config
        .cpus
        .iter()
        .find(|&&c| c == 0 || c > config.machine.cpus())
    {
        return Err(LabError(format!(
            "--cpus: {c} CPUs on machine {} (1 to {})",
            config.machine.name,
            config.machine.cpus()
        )));
    }
    let topology = recording_topology(&config.machine)?;
    let mut out = Vec::new();
    let mut profiles = Vec::new();
    for &(workload, mode) in &config.workloads {
        for &index in &config.indexes {
            for (d, &imap) in config.imaps.iter().enumerate() {
                let design = Design {
                    index,
                    imap,
                    lock: config.locks.first().copied().unwrap_or_default(),
                    anon_rule: true,
                };
                let s = spec(
                    workload,
                    mode,
                    design,
                    &topology,
                    config.method.resident,
                    config.method.resident_vmas,
                );
                let profile = profile::record(&s, config.method.record_ops, &config.method.timing)?;
                if d > 0 && !takes(&profile, &[LockClass::IMmap]) {
                    break;
                }
                profiles.push(profile.clone());
                for (l, &lock) in config.locks.iter().enumerate() {
                    if l > 0 && !takes(&profile, &[LockClass::IMmap, LockClass::AnonVma]) {
                        break;
                    }
                    for &cpus in &config.cpus {
                        let sim_config = config.method.sim(&profile, cpus, Some(lock_kind(lock)));
                        let p = sim::simulate(&profile, &config.machine, &sim_config)
                            .map_err(|e| LabError(format!("{workload} {design}: {e}")))?;
                        let point = ProjectedPoint {
                            workload: workload.name().to_string(),
                            mode: mode.name().to_string(),
                            index: index.name().to_string(),
                            imap: imap.name().to_string(),
                            lock: lock.name().to_string(),
                            machine: config.machine.name.clone(),
                            cpus,
                            value: p.ops_per_sec,
                            unit: "ops/s",
                            breakdown: p.breakdown,
                        };
                        on_point(&point);
                        out.push(point);
                    }
                }
            }
        }
    }
    Ok(Projection {
        points: out,
        profiles,
    })
}

/// What [`project`] returns: the points, and the profiles they were
/// simulated from (one per workload, mode, index and i_mmap design).
#[derive(Debug, Clone)]
pub struct Projection {
    /// Every projected point, in computation order.
    pub points: Vec<ProjectedPoint>,
    /// The recorded profiles.
    pub profiles: Vec<Profile>,
}

/// What [`validate`] checks.
#[derive(Debug, Clone)]
pub struct ValidateConfig {
    /// The configurations: a label, the workload, its mode and design.
    pub configs: Vec<(String, Workload, Mode, Design)>,
    /// Worker counts predicted and measured (each above 1).
    pub cpus: Vec<usize>,
    /// This machine, measured.
    pub machine: Machine,
    /// Describes the machine again before every measured run at more
    /// than one worker, and that run is predicted with the description
    /// taken just before it; the prediction compared is the median of
    /// those. For a machine measured here (`--machine host`): a shared
    /// machine's transfer cost can change from one minute to the next (this
    /// project's 2-vCPU guest flips between about 30 and 110 ns), and a
    /// run measures the machine of its own minute. `None`: `machine` for
    /// every run.
    pub remeasure: Option<fn() -> Result<Machine, LabError>>,
    /// Which placement of the workers' CPUs the measured runs at more
    /// than one worker wait for (see [`crate::placement`]): under the
    /// default, `hold`, every run is measured, and described, with its
    /// CPUs placed as the first one's.
    pub placement: Rule,
    /// Measured runs per point; the median is compared.
    pub repeat: usize,
    /// How profiles are recorded and simulated; its timing is also every
    /// measured run's.
    pub method: Method,
}

/// One prediction against its measurement.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Validation {
    /// The workload.
    pub workload: String,
    /// The configuration's label.
    pub config: String,
    /// `processes` or `threads`.
    pub mode: String,
    /// The VMA index.
    pub index: String,
    /// The i_mmap design.
    pub imap: String,
    /// The reverse-map lock kind.
    pub lock: String,
    /// Whether the anon_vma rule was on.
    pub anon_rule: bool,
    /// Workers.
    pub cpus: usize,
    /// Measured throughput at one worker (the calibration).
    pub one_worker: f64,
    /// Every one-worker run behind `one_worker` (its median), ascending:
    /// their spread is part of the prediction's error bar.
    pub one_worker_runs: Vec<f64>,
    /// Predicted throughput at `cpus` workers: the median of
    /// `predicted_runs`.
    pub predicted: f64,
    /// One prediction per measured run, ascending: each from the machine
    /// as described just before that run (see
    /// [`ValidateConfig::remeasure`]), or all from the one description.
    pub predicted_runs: Vec<f64>,
    /// The core-complex transfer cost (`ccx_ns`) of the description each
    /// run was predicted with, in run order.
    pub transfer_ns: Vec<f64>,
    /// Measured throughput at `cpus` workers (median of the runs).
    pub measured: f64,
    /// Every measured run behind `measured`, ascending: how far this
    /// machine's own runs of the point spread.
    pub measured_runs: Vec<f64>,
    /// `(predicted - measured) / measured`.
    pub error: f64,
    /// `ops/s`.
    pub unit: String,
    /// Per lock class the measured runs took: how often an acquisition
    /// had to wait, predicted and measured. Empty in evidence written
    /// before it was kept.
    #[serde(default)]
    pub contended: Vec<Contention>,
    /// How the calibration scaled the profile's recorded run times
    /// ([`Profile::scaled`](vmproject::Profile::scaled)): its own
    /// operations', then, in threads mode, its interleaved operations'.
    /// Far below 1, the recorder ran long and the runs outside critical
    /// sections came out short. Empty in evidence written before it was
    /// kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scaled: Vec<f64>,
}

/// How many of one lock class's acquisitions missed the fast path (waited
/// first), as a share of them: the simulation's
/// [`ClassTime::contended`](vmproject::ClassTime::contended) against the
/// lab's lock statistics (`contended` over `acquisitions`). A check of the
/// mechanism behind a predicted throughput: whether the lock changes
/// hands as often in the simulation as on the machine.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Contention {
    /// The lock class.
    pub class: LockClass,
    /// The simulation's share (median of its predictions).
    pub predicted: f64,
    /// The lab's share (median of the measured runs).
    pub measured: f64,
}

/// The lab's share of contended acquisitions per class over `runs`, for
/// the classes every run took: the median of the runs' shares.
fn measured_contention(runs: &[mm::lockstat::LockStats]) -> Vec<(LockClass, f64)> {
    LockClass::ALL
        .iter()
        .zip(mm::lockstat::LockClass::ALL)
        .filter_map(|(&class, lab)| {
            let mut shares: Vec<f64> = runs
                .iter()
                .map(|r| r.class(lab))
                .filter(|c| c.acquisitions > 0)
                .map(|c| c.contended as f64 / c.acquisitions as f64)
                .collect();
            if shares.is_empty() || shares.len() < runs.len() {
                return None;
            }
            shares.sort_by(f64::total_cmp);
            Some((class, median(&shares)))
        })
        .collect()
}

/// Pairs the simulation's contended shares (`projections`) with the
/// measured ones, class by class.
fn contention(projections: &[sim::Projection], measured: &[(LockClass, f64)]) -> Vec<Contention> {
    measured
        .iter()
        .map(|&(class, measured)| {
            let mut shares: Vec<f64> = projections
                .iter()
                .map(|p| p.breakdown.class(class).contended)
                .collect();
            shares.sort_by(f64::total_cmp);
            Contention {
                class,
                predicted: median(&shares),
                measured,
            }
        })
        .collect()
}

/// Everything one configuration's predictions were computed from: its
/// calibrated profile and, per worker count, the simulation's
/// configuration and each run's machine description, beside the
/// measurements they were compared with.
///
/// `vmbench project --validate` writes these (`evidence.jsonl.gz`, one
/// configuration a line) so that a later model can be checked against the
/// same measurements without running anything again ([`replay`]): a
/// machine lent for a few minutes (16 cores, say) is measured once, and
/// every change to the simulation afterwards is judged on its figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Evidence {
    /// The profile, calibrated to the median one-worker rate.
    pub profile: Profile,
    /// One per worker count, ascending.
    pub points: Vec<EvidencePoint>,
}

/// One worker count of an [`Evidence`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EvidencePoint {
    /// The prediction and the measurements, as reported.
    pub validation: Validation,
    /// The simulation's configuration.
    pub sim: sim::Config,
    /// The machine description of each measured run, in run order.
    pub machines: Vec<Machine>,
}

/// The simulation of `profile` under `sim_config` on each of `machines`,
/// in ascending order of throughput.
fn predictions(
    profile: &Profile,
    machines: &[Machine],
    sim_config: &sim::Config,
) -> Result<Vec<sim::Projection>, LabError> {
    let mut runs = machines
        .iter()
        .map(|machine| {
            sim::simulate(profile, machine, sim_config).map_err(|e| {
                LabError(format!(
                    "{} {} {} x{}: {e}",
                    profile.workload, profile.index, profile.imap, sim_config.cpus
                ))
            })
        })
        .collect::<Result<Vec<_>, LabError>>()?;
    runs.sort_by(|a, b| a.ops_per_sec.total_cmp(&b.ops_per_sec));
    Ok(runs)
}

/// How the calibration scaled `profile`'s run times, then its
/// interleaved operations' ([`Validation::scaled`]).
fn scaled(profile: &Profile) -> Vec<f64> {
    std::iter::once(profile)
        .chain(profile.interleaved.as_deref())
        .filter_map(|p| p.scaled)
        .collect()
}

/// The throughputs of ascending `projections`.
fn rates(projections: &[sim::Projection]) -> Vec<f64> {
    projections.iter().map(|p| p.ops_per_sec).collect()
}

/// Predicts every piece of `evidence` again with this build's simulation
/// and compares it with the measurements recorded beside it; nothing is
/// run. The rows are [`validate`]'s, with `predicted`, `predicted_runs`
/// and `error` recomputed.
///
/// ```
/// # use vmlab::project::replay;
/// // No evidence, no rows.
/// assert!(replay(&[]).unwrap().is_empty());
/// ```
pub fn replay(evidence: &[Evidence]) -> Result<Vec<Validation>, LabError> {
    let mut rows = Vec::new();
    // `sim::simulate` checks each profile and machine description itself.
    for e in evidence {
        for p in &e.points {
            let v = &p.validation;
            if p.machines.is_empty() {
                return Err(LabError(format!(
                    "{} {} x{}: no machine description",
                    v.workload, v.config, v.cpus
                )));
            }
            if !(v.measured.is_finite() && v.measured > 0.0) {
                return Err(LabError(format!(
                    "{} {} x{}: measured {} ops/s (expected a positive rate)",
                    v.workload, v.config, v.cpus, v.measured
                )));
            }
            let projections = predictions(&e.profile, &p.machines, &p.sim)?;
            let measured: Vec<(LockClass, f64)> =
                v.contended.iter().map(|c| (c.class, c.measured)).collect();
            let predicted_runs = rates(&projections);
            let predicted = median(&predicted_runs);
            rows.push(Validation {
                predicted,
                predicted_runs,
                error: (predicted - v.measured) / v.measured,
                contended: contention(&projections, &measured),
                // The profile's own: a re-recorded one (`rerecord`) was
                // scaled anew. Evidence written before it was kept has
                // none, and keeps the row's (none either).
                scaled: if e.profile.scaled.is_some() {
                    scaled(&e.profile)
                } else {
                    v.scaled.clone()
                },
                ..v.clone()
            });
        }
    }
    Ok(rows)
}

/// The same `evidence` with every profile recorded again by this build's
/// recorder, on this machine, and calibrated to the one-worker runs
/// measured beside it; [`replay`] then predicts the stored measurements
/// from the new profiles. [`replay`] judges a change to the simulation on
/// measurements already made; this judges a change to the recorder (a
/// structure that now counts more of its lines, say) on them, with no
/// measured run made again, so that two recorders meet the same
/// measurements rather than two hours' noise. The evidence must come from
/// this machine, a profile being its run times: evidence recorded on
/// another topology is an error. Each configuration
/// is recorded with `method`'s timing and operation count, and `method`'s
/// `resident` and `resident_vmas`, which the evidence does not keep, must
/// be those it was made with (the defaults, unless it says otherwise).
///
/// ```
/// use std::time::Duration;
/// use vmlab::project::{rerecord, Method};
/// use vmlab::run::harness::Timing;
///
/// let method = Method {
///     timing: Timing { warmup: Duration::from_millis(10), duration: Duration::from_millis(50) },
///     record_ops: 64,
///     resident: 300,
///     resident_vmas: 6000,
///     ops_per_cpu: None,
///     seed: 1,
///     spin_budget_ns: None,
/// };
/// // No evidence, nothing recorded.
/// assert!(rerecord(&[], &method).unwrap().is_empty());
/// ```
pub fn rerecord(evidence: &[Evidence], method: &Method) -> Result<Vec<Evidence>, LabError> {
    let topology = mm::topology::host();
    evidence
        .iter()
        .map(|e| {
            let v = &e
                .points
                .first()
                .ok_or_else(|| {
                    LabError(format!(
                        "{} {}: no worker counts",
                        e.profile.workload, e.profile.index
                    ))
                })?
                .validation;
            let what = || format!("{} {}", v.workload, v.config);
            // A shape is not a machine, but a different one is surely
            // another machine.
            if e.profile.recorded_on != topology.to_string() {
                return Err(LabError(format!(
                    "{}: recorded on {}, and this machine is {}: only the machine that measured the evidence can record its profiles again",
                    what(),
                    e.profile.recorded_on,
                    topology
                )));
            }
            let unknown = |field: &str, value: &str| {
                LabError(format!("{}: unknown {field} {value:?}", what()))
            };
            let workload = Workload::ALL
                .into_iter()
                .find(|w| w.name() == v.workload)
                .ok_or_else(|| unknown("workload", &v.workload))?;
            let mode = Mode::ALL
                .into_iter()
                .find(|m| m.name() == v.mode)
                .ok_or_else(|| unknown("mode", &v.mode))?;
            let design = Design {
                index: v.index.parse().map_err(|_| unknown("index", &v.index))?,
                imap: v.imap.parse().map_err(|_| unknown("i_mmap design", &v.imap))?,
                lock: v.lock.parse().map_err(|_| unknown("lock kind", &v.lock))?,
                anon_rule: v.anon_rule,
            };
            let s = spec(
                workload,
                mode,
                design,
                &topology,
                method.resident,
                method.resident_vmas,
            );
            let mut profile = profile::record(&s, method.record_ops, &method.timing)?;
            // The rate the stored prediction was made from: the median
            // of the one-worker runs, as `validate` calibrates to.
            profile.calibrate_to(v.one_worker);
            Ok(Evidence {
                profile,
                points: e.points.clone(),
            })
        })
        .collect()
}

/// Predicts every configuration at every worker count on this machine
/// from its one-worker profile, measures it, and reports both: `on_row`
/// sees each prediction as it is made, and the result is every
/// configuration's [`Evidence`], its rows inside.
pub fn validate(
    config: &ValidateConfig,
    on_row: &mut dyn FnMut(&Validation),
) -> Result<Vec<Evidence>, LabError> {
    config
        .machine
        .validate()
        .map_err(|e| LabError(e.to_string()))?;
    let topology = mm::topology::host();
    if let Some(&c) = config
        .cpus
        .iter()
        .find(|&&c| c < 2 || c > topology.nr_cpus())
    {
        return Err(LabError(format!(
            "--cpus: {c} workers to validate with on {} CPUs (2 to {})",
            topology.nr_cpus(),
            topology.nr_cpus()
        )));
    }
    let mut gate = placement::first_two_workers(config.placement, Arc::clone(&topology));
    let mut out = Vec::new();
    for (label, workload, mode, design) in &config.configs {
        let s = spec(
            *workload,
            *mode,
            *design,
            &topology,
            config.method.resident,
            config.method.resident_vmas,
        );
        let mut profile = profile::record(&s, config.method.record_ops, &config.method.timing)?;
        // The calibration is one run; the measured points are medians of
        // `repeat`, and so is the one-worker rate they are predicted from.
        // The runs go round (one worker, then each count, `repeat` times),
        // so that a slow spell of a shared machine lands on both sides of
        // the ratio rather than on one.
        let counts: Vec<usize> = std::iter::once(1)
            .chain(config.cpus.iter().copied())
            .collect();
        let mut runs = vec![Vec::with_capacity(config.repeat); counts.len()];
        // Each measured run's lock statistics, per count, in run order.
        let mut locks = vec![Vec::with_capacity(config.repeat); counts.len()];
        // The description each run at more than one worker is predicted
        // with, in run order.
        let mut described: Vec<Vec<Machine>> = vec![Vec::new(); counts.len()];
        for _ in 0..config.repeat.max(1) {
            for (k, &threads) in counts.iter().enumerate() {
                if threads == 1 && config.repeat <= 1 {
                    continue;
                }
                let spec = Spec {
                    threads,
                    ..s.clone()
                };
                if threads == 1 {
                    runs[k].push(rate(&spec, &config.method.timing)?.0);
                    continue;
                }
                // Described just before the run, once the CPUs are where
                // the gate holds them.
                let described_run = || {
                    let machine = match config.remeasure {
                        Some(measure) => measure()?,
                        None => config.machine.clone(),
                    };
                    Ok::<_, LabError>((machine, rate(&spec, &config.method.timing)?))
                };
                let (machine, (r, stats)) = if spec.placed() {
                    gate.run(described_run)?.0
                } else {
                    described_run()?
                };
                described[k].push(machine);
                runs[k].push(r);
                locks[k].push(stats);
            }
        }
        for r in &mut runs {
            r.sort_by(f64::total_cmp);
        }
        let one_worker_runs = if config.repeat > 1 {
            // The interleaved operations' rate came from the same single
            // run, and follows the median too.
            profile.calibrate_to(median(&runs[0]));
            runs[0].clone()
        } else {
            vec![profile.ops_per_sec]
        };
        let mut points = Vec::with_capacity(counts.len() - 1);
        for (k, &cpus) in counts.iter().enumerate().skip(1) {
            let sim_config = config.method.sim(&profile, cpus, None);
            let machines = std::mem::take(&mut described[k]);
            let projections = predictions(&profile, &machines, &sim_config)?;
            let contended = contention(&projections, &measured_contention(&locks[k]));
            let predicted_runs = rates(&projections);
            let predicted = median(&predicted_runs);
            let transfer_ns = machines.iter().map(|m| m.ccx_ns).collect();
            let measured_runs = std::mem::take(&mut runs[k]);
            let measured = median(&measured_runs);
            let row = Validation {
                workload: workload.name().to_string(),
                config: label.clone(),
                mode: mode.name().to_string(),
                index: design.index.name().to_string(),
                imap: design.imap.name().to_string(),
                lock: design.lock.name().to_string(),
                anon_rule: design.anon_rule,
                cpus,
                one_worker: profile.ops_per_sec,
                one_worker_runs: one_worker_runs.clone(),
                predicted,
                predicted_runs,
                transfer_ns,
                measured,
                measured_runs,
                error: (predicted - measured) / measured,
                unit: "ops/s".to_string(),
                contended,
                scaled: scaled(&profile),
            };
            on_row(&row);
            points.push(EvidencePoint {
                validation: row,
                sim: sim_config,
                machines,
            });
        }
        out.push(Evidence { profile, points });
    }
    Ok(out)
}

/// The throughput of one run of `spec`, and its lock statistics.
fn rate(spec: &Spec, timing: &Timing) -> Result<(f64, mm::lockstat::LockStats), LabError> {
    let m = harness::measure(spec, timing).map_err(|e| {
        LabError(format!(
            "{} {} x{}: {e}",
            spec.workload, spec.design, spec.threads
        ))
    })?;
    Ok((m.ops_per_sec(), m.locks))
}

/// The median of ascending, non-empty `rates`.
fn median(rates: &[f64]) -> f64 {
    rates.get(rates.len() / 2).copied().unwrap_or(0.0)
}
