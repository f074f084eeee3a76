//! `vmbench topology`: what this machine has, and what an emulated
//! topology maps onto it.
//!
//! A run's figures mean little without the machine behind them, and an
//! emulated `12x32` on a 2-CPU machine runs 192 virtual CPUs on each real
//! one; this command shows both before anyone reads a scaling curve.
//!
//! [`measure`] (`vmbench topology --measure`) measures what the projection
//! needs to know about this machine: the time a cache line takes to move
//! between two CPUs, per pair, and the cost of a futex sleep and wake-up,
//! as a [`vmproject::Machine`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_utils::CachePadded;
use mm::topology::Topology;
use serde::Serialize;

use crate::LabError;
use vmresults::Machine;

/// One node of a topology.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeView {
    /// Node index (dense, from 0).
    pub node: usize,
    /// The node's CPUs (virtual CPUs when emulated), ascending.
    pub cpus: Vec<usize>,
    /// The real CPUs those CPUs run on, ascending and distinct.
    pub real_cpus: Vec<usize>,
}

/// The emulated topology and how it lands on the machine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EmulatedView {
    /// `NxM`.
    pub topology: String,
    /// Emulated nodes.
    pub nodes: usize,
    /// Virtual CPUs per node.
    pub vcpus_per_node: usize,
    /// Virtual CPUs in all.
    pub vcpus: usize,
    /// Per node: its virtual CPUs and the real CPUs they run on.
    pub node_map: Vec<NodeView>,
    /// `real_cpu_of[v]`: the real CPU virtual CPU `v` runs on.
    pub real_cpu_of: Vec<usize>,
}

/// Everything `vmbench topology` reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TopologyReport {
    /// CPU model, CPUs usable by this process, nodes, kernel.
    pub machine: Machine,
    /// The machine's nodes and their CPUs.
    pub host_nodes: Vec<NodeView>,
    /// Present with `--emulate`.
    pub emulated: Option<EmulatedView>,
}

/// The nodes of `t` with their (virtual) CPUs and the real CPUs below them.
fn nodes(t: &Topology) -> Vec<NodeView> {
    (0..t.nr_nodes())
        .map(|node| {
            let cpus = t.cpus_of(node).to_vec();
            let mut real_cpus: Vec<usize> = cpus.iter().map(|&c| t.real_cpu(c)).collect();
            real_cpus.sort_unstable();
            real_cpus.dedup();
            NodeView {
                node,
                cpus,
                real_cpus,
            }
        })
        .collect()
}

/// Parses `--emulate`: only `NxM`, since `host` is not an emulation.
fn parse_emulate(text: &str) -> Result<Topology, LabError> {
    let t: Topology = text
        .parse()
        .map_err(|e| LabError(format!("--emulate: {e}")))?;
    if !t.is_emulated() {
        return Err(LabError(format!(
            "--emulate {text:?}: expected NODESxCPUS, e.g. 12x32"
        )));
    }
    Ok(t)
}

/// Builds the report for this machine and, if given, an emulation.
pub fn report(emulate: Option<&str>) -> Result<TopologyReport, LabError> {
    let emulated = emulate.map(parse_emulate).transpose()?;
    let host = mm::topology::host();
    Ok(TopologyReport {
        machine: Machine::detect(&host),
        host_nodes: nodes(&host),
        emulated: emulated.map(|t| EmulatedView {
            topology: t.to_string(),
            nodes: t.nr_nodes(),
            vcpus_per_node: t.cpus_of(0).len(),
            vcpus: t.nr_cpus(),
            node_map: nodes(&t),
            real_cpu_of: (0..t.nr_cpus()).map(|v| t.real_cpu(v)).collect(),
        }),
    })
}

/// A CPU list in the kernel's format (`0-3,8,10-11`), from ascending ids.
pub fn cpulist(cpus: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// The report as text for people.
pub fn render_text(r: &TopologyReport) -> String {
    let m = &r.machine;
    let mut out = format!(
        "CPU model: {}\nCPUs: {} (usable by this process)\nkernel: {}\nNUMA nodes: {}\n",
        m.cpu_model,
        m.cpus,
        m.kernel,
        r.host_nodes.len()
    );
    for n in &r.host_nodes {
        out.push_str(&format!("  node {}: CPUs {}\n", n.node, cpulist(&n.cpus)));
    }
    if let Some(e) = &r.emulated {
        let real: usize = r.host_nodes.iter().map(|n| n.cpus.len()).sum();
        out.push_str(&format!(
            "emulated {}: {} nodes x {} vCPUs = {} vCPUs on {} real CPUs\n",
            e.topology, e.nodes, e.vcpus_per_node, e.vcpus, real
        ));
        // How crowded each real CPU is: the emulation only spreads vCPUs
        // round-robin, so the counts differ by at most one.
        let mut load = std::collections::BTreeMap::<usize, usize>::new();
        for &c in &e.real_cpu_of {
            *load.entry(c).or_default() += 1;
        }
        let (lo, hi) = (load.values().min(), load.values().max());
        if let (Some(lo), Some(hi)) = (lo, hi) {
            if lo == hi {
                out.push_str(&format!("  each real CPU runs {lo} vCPUs\n"));
            } else {
                out.push_str(&format!("  each real CPU runs {lo} to {hi} vCPUs\n"));
            }
        }
        for n in &e.node_map {
            out.push_str(&format!(
                "  node {}: vCPUs {} -> real CPUs {}\n",
                n.node,
                cpulist(&n.cpus),
                cpulist(&n.real_cpus)
            ));
        }
    }
    out
}

/// How much `measure` times. The defaults keep a 384-CPU machine under a
/// few seconds and still give each figure a median of several rounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeasureOptions {
    /// Round trips of the line per timed round.
    pub round_trips: u32,
    /// Timed rounds per CPU pair (after one untimed warm-up); a pair's
    /// figure is their median.
    pub rounds: usize,
    /// Above [`ALL_PAIRS_UP_TO`] CPUs, the most pairs timed per class of
    /// pair (same complex, same node, each pair of nodes), spread evenly.
    pub pairs_per_class: usize,
    /// Futex wake-ups timed for `wake_ns`, and rounds of sleep round trips
    /// for `sleep_ns`; each figure is a median.
    pub wakeups: usize,
}

impl Default for MeasureOptions {
    fn default() -> Self {
        MeasureOptions {
            round_trips: 1000,
            rounds: 5,
            pairs_per_class: 12,
            wakeups: 100,
        }
    }
}

/// Up to this many usable CPUs every pair is timed (and `vmbench topology
/// --measure` prints the pair matrix); above, a sample of each class.
pub const ALL_PAIRS_UP_TO: usize = 16;

/// Where two CPUs are relative to each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PairClass {
    /// Sharing a last-level cache.
    SameComplex,
    /// On one node, in different complexes.
    SameNode,
    /// On two nodes.
    Remote,
}

/// One timed CPU pair.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairLatency {
    /// The two CPUs (the kernel's numbers), `a < b`.
    pub a: usize,
    /// See `a`.
    pub b: usize,
    /// Where they are relative to each other.
    pub class: PairClass,
    /// One-way nanoseconds: half the median round trip.
    pub ns: f64,
}

/// What [`measure`] found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostMeasurement {
    /// The machine as the projection takes it (named `host`).
    pub machine: vmproject::Machine,
    /// The kernel's CPU numbers in the description's order: its CPU `k`
    /// is CPU `cpus[k]` here.
    pub cpus: Vec<usize>,
    /// Every pair timed.
    pub pairs: Vec<PairLatency>,
}

/// The CPUs of this machine as the description lays them out: per node,
/// the usable CPUs grouped by last-level cache.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Layout {
    /// Per node, its CPUs (kernel numbers), complex by complex; every node
    /// holds the same count.
    nodes: Vec<Vec<usize>>,
    /// The last-level cache group of each CPU, by CPU number: two CPUs
    /// share a cache iff their groups are equal.
    group: BTreeMap<usize, usize>,
    /// CPUs per complex in the description.
    ccx_cpus: usize,
}

impl Layout {
    /// Lays out `usable` CPUs (ascending) over the `host` nodes with the
    /// cache groups `group` (a CPU missing from it is its node's group).
    ///
    /// Nodes with no usable CPU are left out; the description wants equal
    /// nodes, so each keeps as many CPUs as the smallest has. A complex is
    /// the most common cache-group size within the kept CPUs if consecutive
    /// runs of that size each lie in one group and it divides the node,
    /// else the whole node.
    fn new(host: &[Vec<usize>], usable: &[usize], group: &BTreeMap<usize, usize>) -> Layout {
        let mut groups = BTreeMap::new();
        let mut nodes: Vec<Vec<usize>> = Vec::new();
        for (node, cpus) in host.iter().enumerate() {
            let mut mine: Vec<usize> = cpus
                .iter()
                .copied()
                .filter(|c| usable.binary_search(c).is_ok())
                .collect();
            if mine.is_empty() {
                continue;
            }
            for &c in &mine {
                // Offset node ids past any CPU number, so that a CPU with no
                // cache information shares a group only with its node.
                let g = group.get(&c).copied().unwrap_or(usize::MAX - node);
                groups.insert(c, g);
            }
            mine.sort_by_key(|c| (groups[c], *c));
            nodes.push(mine);
        }
        let per = nodes.iter().map(Vec::len).min().unwrap_or(0);
        for n in &mut nodes {
            n.truncate(per);
        }
        let mut sizes: BTreeMap<usize, usize> = BTreeMap::new();
        for n in &nodes {
            let mut run: BTreeMap<usize, usize> = BTreeMap::new();
            for c in n {
                *run.entry(groups[c]).or_default() += 1;
            }
            for size in run.into_values() {
                *sizes.entry(size).or_default() += 1;
            }
        }
        let common = sizes
            .iter()
            .max_by_key(|(size, count)| (**count, **size))
            .map_or(per, |(size, _)| *size);
        let tiles = common > 0
            && per % common == 0
            && nodes.iter().all(|n| {
                n.chunks(common)
                    .all(|chunk| chunk.iter().all(|c| groups[c] == groups[&chunk[0]]))
            });
        Layout {
            nodes,
            group: groups,
            ccx_cpus: if tiles { common } else { per },
        }
    }

    /// The description's CPU order.
    fn cpus(&self) -> Vec<usize> {
        self.nodes.iter().flatten().copied().collect()
    }

    /// The node (description index) of each CPU.
    fn node_of(&self) -> BTreeMap<usize, usize> {
        self.nodes
            .iter()
            .enumerate()
            .flat_map(|(i, n)| n.iter().map(move |&c| (c, i)))
            .collect()
    }

    /// The pairs to time, each with its class and node pair: all of them up
    /// to [`ALL_PAIRS_UP_TO`] CPUs, else at most `per_class` of each class
    /// (each node pair its own class), evenly spread over the class.
    fn pairs(&self, per_class: usize) -> Vec<(usize, usize, PairClass)> {
        let cpus = self.cpus();
        let node = self.node_of();
        let mut classes: BTreeMap<(PairClass, usize, usize), Vec<(usize, usize)>> = BTreeMap::new();
        for (i, &a) in cpus.iter().enumerate() {
            for &b in &cpus[i + 1..] {
                let (na, nb) = (node[&a], node[&b]);
                let key = if na != nb {
                    (PairClass::Remote, na.min(nb), na.max(nb))
                } else if self.group[&a] == self.group[&b] {
                    (PairClass::SameComplex, 0, 0)
                } else {
                    (PairClass::SameNode, 0, 0)
                };
                classes.entry(key).or_default().push((a.min(b), a.max(b)));
            }
        }
        let take = if cpus.len() <= ALL_PAIRS_UP_TO {
            usize::MAX
        } else {
            per_class.max(1)
        };
        let mut out = Vec::new();
        for ((class, _, _), list) in classes {
            let k = take.min(list.len());
            out.extend((0..k).map(|t| {
                let (a, b) = list[t * list.len() / k];
                (a, b, class)
            }));
        }
        out
    }

    /// The description from timed pairs and futex figures. A class with no
    /// pair takes the next-wider one's figure: `node_ns` is `ccx_ns` where
    /// no node has two complexes, `ccx_ns` the same-node (or else remote)
    /// median where no complex has two CPUs. Where the description makes
    /// each node one complex, both are the median of all within-node pairs.
    fn machine(
        &self,
        pairs: &[PairLatency],
        wake_ns: f64,
        sleep_ns: f64,
        source: String,
    ) -> vmproject::Machine {
        let of = |class: PairClass| -> Vec<f64> {
            pairs
                .iter()
                .filter(|p| p.class == class)
                .map(|p| p.ns)
                .collect()
        };
        let per = self.nodes.first().map_or(0, Vec::len);
        let (ccx_ns, node_ns) = if self.ccx_cpus == per {
            // One complex per node in the description: every within-node
            // pair is a same-complex pair of it.
            let within = pairs
                .iter()
                .filter(|p| p.class != PairClass::Remote)
                .map(|p| p.ns)
                .collect();
            let ns = median(within).or_else(|| median(of(PairClass::Remote)));
            (ns.unwrap_or(0.0), ns.unwrap_or(0.0))
        } else {
            let ccx = median(of(PairClass::SameComplex))
                .or_else(|| median(of(PairClass::SameNode)))
                .or_else(|| median(of(PairClass::Remote)))
                .unwrap_or(0.0);
            (ccx, median(of(PairClass::SameNode)).unwrap_or(ccx))
        };
        let node = self.node_of();
        let n = self.nodes.len();
        let mut remote_ns = vec![vec![node_ns; n]; n];
        for (i, row) in remote_ns.iter_mut().enumerate() {
            for (j, cell) in row.iter_mut().enumerate() {
                if i == j {
                    continue;
                }
                let between = pairs
                    .iter()
                    .filter(|p| {
                        let (x, y) = (node[&p.a], node[&p.b]);
                        (x, y) == (i, j) || (y, x) == (i, j)
                    })
                    .map(|p| p.ns)
                    .collect();
                *cell = median(between).unwrap_or(node_ns);
            }
        }
        vmproject::Machine {
            name: "host".to_string(),
            nodes: n,
            cpus_per_node: per,
            ccx_cpus: self.ccx_cpus,
            ccx_ns,
            node_ns,
            remote_ns,
            wake_ns,
            sleep_ns,
            waker_ns: None,
            overlap: 1.0,
            chain: 1.0,
            keep: 0.0,
            source,
        }
    }
}

/// The median of `v` (the mean of the middle two for an even count), or
/// `None` for no values.
fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    })
}

/// A CPU list in the kernel's format (`0-3,8`), ascending and deduplicated;
/// `None` if malformed. Ids past `mm::topology::MAX_CPUS` are malformed.
fn parse_cpulist(text: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    let id = |s: &str| {
        s.trim()
            .parse::<usize>()
            .ok()
            .filter(|&c| c < mm::topology::MAX_CPUS)
    };
    for part in text.trim().split(',').filter(|p| !p.trim().is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (id(a)?, id(b)?),
            None => (id(part)?, id(part)?),
        };
        if lo > hi {
            return None;
        }
        out.extend(lo..=hi);
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}

/// The CPUs the calling thread may run on, from the kernel's own account
/// of its affinity mask (`Cpus_allowed_list` in `/proc/thread-self/status`,
/// the mask `sched_getaffinity` returns, read without `unsafe`); `None` if
/// that cannot be read.
fn allowed_cpus() -> Option<Vec<usize>> {
    ["/proc/thread-self/status", "/proc/self/status"]
        .iter()
        .find_map(|path| {
            let text = std::fs::read_to_string(path).ok()?;
            let list = text
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
            parse_cpulist(list).filter(|c| !c.is_empty())
        })
}

/// The last-level cache group of each of `cpus`: the first CPU of the
/// `shared_cpu_list` of its level-3 cache in sysfs. A CPU without one is
/// left out (its node stands in).
fn cache_groups(cpus: &[usize]) -> BTreeMap<usize, usize> {
    let mut out = BTreeMap::new();
    for &c in cpus {
        let dir = format!("/sys/devices/system/cpu/cpu{c}/cache");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let shared = entries.flatten().find_map(|e| {
            let level = std::fs::read_to_string(e.path().join("level")).ok()?;
            if level.trim() != "3" {
                return None;
            }
            let list = std::fs::read_to_string(e.path().join("shared_cpu_list")).ok()?;
            parse_cpulist(&list)?.first().copied()
        });
        if let Some(first) = shared {
            out.insert(c, first);
        }
    }
    out
}

/// Pins the calling thread to CPU `cpu` of this machine.
fn pin(cpu: usize) -> Result<(), LabError> {
    mm::topology::bind(&mm::topology::host(), cpu, true)
        .map_err(|e| LabError(format!("pinning a measuring thread to CPU {cpu}: {e}")))
}

/// Runs `a` pinned to CPU `cpu_a` and `b` pinned to `cpu_b` at once, on
/// two new threads, both starting together once both are pinned; neither
/// runs if either cannot be pinned.
fn pinned_pair<A, B, RA>(cpu_a: usize, cpu_b: usize, a: A, b: B) -> Result<RA, LabError>
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() + Send,
    RA: Send,
{
    let start = Barrier::new(2);
    let failed = AtomicBool::new(false);
    let setup = |cpu| {
        let pinned = pin(cpu);
        if pinned.is_err() {
            failed.store(true, Ordering::SeqCst);
        }
        start.wait();
        pinned.map(|()| !failed.load(Ordering::SeqCst))
    };
    // Both run on threads of their own: pinning the caller would leave it
    // pinned.
    thread::scope(|s| {
        let mine = s.spawn(|| setup(cpu_a).map(|go| go.then(a)));
        let other = s.spawn(|| {
            if setup(cpu_b)? {
                b();
            }
            Ok::<(), LabError>(())
        });
        let mine = joined(mine.join());
        joined(other.join())?;
        mine?.ok_or_else(|| LabError("a measuring thread could not be pinned".to_string()))
    })
}

/// One-way nanoseconds for a line between CPUs `a` and `b`: the two
/// threads take turns to advance one 64-byte-aligned counter by
/// compare-and-exchange (the method of the published core-to-core tests),
/// `round_trips` times per round; half the median round trip.
fn ping_pong(a: usize, b: usize, opts: &MeasureOptions) -> Result<f64, LabError> {
    let line = CachePadded::new(AtomicU64::new(0));
    let n = u64::from(opts.round_trips.max(1));
    let rounds = opts.rounds.max(1) as u64 + 1; // the first is a warm-up
                                                // Turn 2i is the initiator's, 2i + 1 the responder's.
    let take = |from: u64| {
        while line
            .compare_exchange(from, from + 1, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
    };
    let times = pinned_pair(
        a,
        b,
        || {
            let mut times = Vec::new();
            for r in 0..rounds {
                let t0 = Instant::now();
                for i in r * n..(r + 1) * n {
                    take(2 * i);
                }
                // Wait for the last reply, so the round holds n round trips.
                while line.load(Ordering::Acquire) != 2 * (r + 1) * n {
                    std::hint::spin_loop();
                }
                times.push(t0.elapsed().as_nanos() as f64 / n as f64 / 2.0);
            }
            times
        },
        || {
            for i in 0..rounds * n {
                take(2 * i + 1);
            }
        },
    )?;
    median(times[1..].to_vec()).ok_or_else(|| LabError("no round timed".to_string()))
}

/// Lines [`overlap`] has a CPU fetch at once.
const BULK_LINES: usize = 32;

/// How many line transfers a CPU overlaps: CPU `a` writes
/// [`BULK_LINES`] lines, then CPU `b` reads them all (independent loads,
/// which an out-of-order core issues together) while timing itself; the
/// one-way latency of one line (`single_ns`) over the median time per line
/// of a bulk read. At least 1.
fn overlap(a: usize, b: usize, single_ns: f64, opts: &MeasureOptions) -> Result<f64, LabError> {
    let lines: Vec<CachePadded<AtomicU64>> = (0..BULK_LINES)
        .map(|_| CachePadded::new(AtomicU64::new(0)))
        .collect();
    let turn = CachePadded::new(AtomicU64::new(0));
    let rounds = (opts.round_trips as u64).clamp(16, 1000);
    // The reader on `b` times itself; the writer on `a` dirties.
    let per_line = pinned_pair(
        b,
        a,
        || {
            let mut times = Vec::with_capacity(rounds as usize);
            let mut sum = 0u64;
            for r in 0..rounds {
                while turn.load(Ordering::Acquire) != 2 * r + 1 {
                    std::hint::spin_loop();
                }
                let t0 = Instant::now();
                for l in &lines {
                    sum = sum.wrapping_add(l.load(Ordering::Relaxed));
                }
                times.push(t0.elapsed().as_nanos() as f64 / BULK_LINES as f64);
                turn.store(2 * r + 2, Ordering::Release);
            }
            // The sum keeps the loads; the first rounds warm up.
            std::hint::black_box(sum);
            times.split_off(times.len() / 4)
        },
        || {
            for r in 0..rounds {
                while turn.load(Ordering::Acquire) != 2 * r {
                    std::hint::spin_loop();
                }
                for l in &lines {
                    l.store(r, Ordering::Relaxed);
                }
                turn.store(2 * r + 1, Ordering::Release);
            }
        },
    )?;
    let bulk = median(per_line).ok_or_else(|| LabError("no bulk read timed".to_string()))?;
    Ok(if bulk > 0.0 {
        (single_ns / bulk).max(1.0)
    } else {
        1.0
    })
}

/// What a line reached through a pointer costs, as a share of a transfer
/// ([`vmproject::Machine::chain`]): CPU `a` writes [`BULK_LINES`] lines
/// that link into one chain in a scrambled order (each holds the index of
/// the next, so no prefetcher guesses it), then CPU `b` follows the chain
/// from its head while timing itself; the median time per line over the
/// one-way latency of one line (`single_ns`). Greater than 0.
fn chain(a: usize, b: usize, single_ns: f64, opts: &MeasureOptions) -> Result<f64, LabError> {
    let n = BULK_LINES as u64;
    // A stride prime to the count visits every line once; line `order[k]`
    // holds `order[k + 1]`.
    let order: Vec<u64> = (0..n).map(|k| (k * 13 + 5) % n).collect();
    let mut next = vec![0u64; BULK_LINES];
    for k in 0..BULK_LINES {
        next[order[k] as usize] = order[(k + 1) % BULK_LINES];
    }
    let lines: Vec<CachePadded<AtomicU64>> = (0..BULK_LINES)
        .map(|_| CachePadded::new(AtomicU64::new(0)))
        .collect();
    let turn = CachePadded::new(AtomicU64::new(0));
    let rounds = (opts.round_trips as u64).clamp(16, 1000);
    let head = order[0];
    let per_line = pinned_pair(
        b,
        a,
        || {
            let mut times = Vec::with_capacity(rounds as usize);
            for r in 0..rounds {
                while turn.load(Ordering::Acquire) != 2 * r + 1 {
                    std::hint::spin_loop();
                }
                let t0 = Instant::now();
                let mut at = head;
                for _ in 0..BULK_LINES {
                    // The next address comes out of this load: each load
                    // waits for the one before it.
                    at = lines[at as usize].load(Ordering::Relaxed) % n;
                }
                times.push(t0.elapsed().as_nanos() as f64 / BULK_LINES as f64);
                std::hint::black_box(at);
                turn.store(2 * r + 2, Ordering::Release);
            }
            times.split_off(times.len() / 4)
        },
        || {
            for r in 0..rounds {
                while turn.load(Ordering::Acquire) != 2 * r {
                    std::hint::spin_loop();
                }
                for (l, &to) in lines.iter().zip(&next) {
                    // The round in the high bits dirties the line; the
                    // link stays in the low ones.
                    l.store((r << 32) * n + to, Ordering::Relaxed);
                }
                turn.store(2 * r + 1, Ordering::Release);
            }
        },
    )?;
    let walk = median(per_line).ok_or_else(|| LabError("no chase timed".to_string()))?;
    Ok(if single_ns > 0.0 && walk > 0.0 {
        walk / single_ns
    } else {
        1.0
    })
}

/// Atomic adds each CPU makes per round of [`keep`].
const KEEP_ADDS: u64 = 100_000;

/// How long a CPU keeps a line another CPU has asked for, as a share of a
/// transfer ([`vmproject::Machine::keep`]). Per round, CPU `a` first times
/// [`KEEP_ADDS`] atomic adds to one word alone (what an add costs where the
/// line stays); then `a` and `b` add to it back to back, and each counts
/// its runs: adds with none of the other's between them (the value an add
/// returns is one past its own previous one). The adds a CPU makes in a
/// row, times one add alone, is how long the line stayed after it
/// arrived while the other CPU waited for it; over one transfer
/// (`single_ns`), the median of the rounds (twice the ping-pong's, plus
/// one), within 0 and 1.
fn keep(a: usize, b: usize, single_ns: f64, opts: &MeasureOptions) -> Result<f64, LabError> {
    let word = CachePadded::new(AtomicU64::new(0));
    let turn = CachePadded::new(AtomicU64::new(0));
    let stop = CachePadded::new(AtomicBool::new(false));
    let theirs = CachePadded::new((AtomicU64::new(0), AtomicU64::new(0)));
    // More rounds than a ping-pong takes: one round's runs vary by a
    // third from the next on a virtual machine.
    let rounds = (opts.rounds.max(2) * 2 + 1) as u64;
    // Adds and runs until `KEEP_ADDS` or the other CPU is done: a tail
    // where one CPU adds alone would count as one long run.
    let contend = |word: &AtomicU64| {
        let (mut adds, mut runs, mut last) = (0u64, 0u64, u64::MAX);
        while adds < KEEP_ADDS {
            for _ in 0..64 {
                let v = word.fetch_add(1, Ordering::AcqRel);
                if v != last.wrapping_add(1) {
                    runs += 1;
                }
                last = v;
            }
            adds += 64;
            if stop.load(Ordering::Relaxed) {
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        (adds, runs)
    };
    let shares = pinned_pair(
        a,
        b,
        || {
            let mut shares = Vec::new();
            for r in 0..rounds {
                let t0 = Instant::now();
                for _ in 0..KEEP_ADDS {
                    word.fetch_add(1, Ordering::AcqRel);
                }
                let alone = t0.elapsed().as_nanos() as f64 / KEEP_ADDS as f64;
                stop.store(false, Ordering::Relaxed);
                turn.store(2 * r + 1, Ordering::Release);
                let (adds, runs) = contend(&word);
                while turn.load(Ordering::Acquire) != 2 * r + 2 {
                    std::hint::spin_loop();
                }
                let adds = adds + theirs.0.load(Ordering::Relaxed);
                let runs = runs + theirs.1.load(Ordering::Relaxed);
                if runs > 0 && single_ns > 0.0 {
                    shares.push(adds as f64 / runs as f64 * alone / single_ns);
                }
            }
            shares
        },
        || {
            for r in 0..rounds {
                while turn.load(Ordering::Acquire) != 2 * r + 1 {
                    std::hint::spin_loop();
                }
                let (adds, runs) = contend(&word);
                theirs.0.store(adds, Ordering::Relaxed);
                theirs.1.store(runs, Ordering::Relaxed);
                turn.store(2 * r + 2, Ordering::Release);
            }
        },
    )?;
    let share = median(shares).ok_or_else(|| LabError("no run of adds counted".to_string()))?;
    Ok(share.clamp(0.0, 1.0))
}

/// Median nanoseconds from a thread on CPU `waker` waking a thread asleep
/// (`park`, a futex wait) on CPU `sleeper` to that thread running again,
/// and median nanoseconds the waker spends in the wake-up call itself.
fn wake_latency(sleeper: usize, waker: usize, count: usize) -> Result<(f64, f64), LabError> {
    let base = Instant::now();
    let turn = AtomicU64::new(0);
    let waiting = AtomicU64::new(0);
    let sent_at = AtomicU64::new(0);
    let sleeper_thread = std::sync::OnceLock::new();
    let calls = std::sync::Mutex::new(Vec::new());
    let count = count.max(1) as u64 + 1; // the first is a warm-up
    let now = || base.elapsed().as_nanos() as u64;
    let lat = pinned_pair(
        sleeper,
        waker,
        || {
            let _ = sleeper_thread.set(thread::current());
            let mut lat = Vec::new();
            for k in 1..=count {
                waiting.store(k, Ordering::SeqCst);
                while turn.load(Ordering::SeqCst) != k {
                    thread::park();
                }
                let woke = now();
                lat.push(woke.saturating_sub(sent_at.load(Ordering::SeqCst)) as f64);
            }
            lat
        },
        || {
            let mut calls = calls
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for k in 1..=count {
                while waiting.load(Ordering::SeqCst) != k {
                    std::hint::spin_loop();
                }
                // Let the sleeper get into the futex wait.
                thread::sleep(Duration::from_micros(200));
                sent_at.store(now(), Ordering::SeqCst);
                turn.store(k, Ordering::SeqCst);
                if let Some(t) = sleeper_thread.get() {
                    let t0 = Instant::now();
                    t.unpark();
                    calls.push(t0.elapsed().as_nanos() as f64);
                }
            }
        },
    )?;
    let calls = calls
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let wake = median(lat[1..].to_vec()).ok_or_else(|| LabError("no wake-up timed".to_string()))?;
    let call = median(calls.get(1..).unwrap_or_default().to_vec())
        .ok_or_else(|| LabError("no wake-up call timed".to_string()))?;
    Ok((wake, call))
}

/// Median nanoseconds of a sleep and wake round trip between two threads
/// pinned to the same CPU, each waking the other and going to sleep
/// (`unpark`, `park`): on one CPU the wall time is CPU time, two futex
/// system calls each way and two context switches.
fn sleep_cost(cpu: usize, rounds: usize) -> Result<f64, LabError> {
    const PER_ROUND: u64 = 50;
    let turn = Arc::new(AtomicU64::new(0));
    // Set by `b` if it cannot be pinned, so that `a` does not wait for it.
    let failed = Arc::new(AtomicBool::new(false));
    let rounds = rounds.max(1) as u64 + 1; // the first is a warm-up
    let (tx, rx) = std::sync::mpsc::channel::<thread::Thread>();
    let (b_turn, b_failed) = (Arc::clone(&turn), Arc::clone(&failed));
    let b = thread::spawn(move || -> Result<(), LabError> {
        let pinned = pin(cpu);
        // `a` closes the channel without sending if it cannot be pinned.
        let Ok(a) = rx.recv() else {
            return pinned;
        };
        if pinned.is_err() {
            b_failed.store(true, Ordering::SeqCst);
            a.unpark();
            return pinned;
        }
        for i in 0..rounds * PER_ROUND {
            while b_turn.load(Ordering::SeqCst) != 2 * i + 1 {
                thread::park();
            }
            b_turn.store(2 * i + 2, Ordering::SeqCst);
            a.unpark();
        }
        Ok(())
    });
    let b_thread = b.thread().clone();
    let a = thread::spawn(move || -> Result<Vec<f64>, LabError> {
        pin(cpu)?;
        let _ = tx.send(thread::current());
        let mut times = Vec::new();
        for r in 0..rounds {
            let t0 = Instant::now();
            for i in r * PER_ROUND..(r + 1) * PER_ROUND {
                turn.store(2 * i + 1, Ordering::SeqCst);
                b_thread.unpark();
                while turn.load(Ordering::SeqCst) != 2 * i + 2 {
                    if failed.load(Ordering::SeqCst) {
                        return Ok(Vec::new());
                    }
                    thread::park();
                }
            }
            times.push(t0.elapsed().as_nanos() as f64 / PER_ROUND as f64);
        }
        Ok(times)
    });
    let times = joined(a.join());
    joined(b.join())?;
    median(times?.get(1..).unwrap_or_default().to_vec())
        .ok_or_else(|| LabError("no round trip timed".to_string()))
}

/// A measuring thread's result, a panic turned into an error.
fn joined<T>(r: thread::Result<Result<T, LabError>>) -> Result<T, LabError> {
    r.unwrap_or_else(|_| Err(LabError("a measuring thread panicked".to_string())))
}

/// `YYYY-MM-DD` (UTC) of `secs` seconds since the Unix epoch.
fn utc_date(secs: u64) -> String {
    // Days to a civil date, proleptic Gregorian: count 400-year eras from
    // 0000-03-01 so that the leap day ends each year.
    let days = (secs / 86_400) as i64 + 719_468;
    let era = days.div_euclid(146_097);
    let doe = days.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// Measures this machine (`vmbench topology --measure`): its nodes and the
/// CPUs of each this process may run on, its core complexes (CPUs sharing
/// a level-3 cache in sysfs, else the node), the one-way cache-line latency
/// of CPU pairs (every pair up to [`ALL_PAIRS_UP_TO`] CPUs, else a sample
/// of each class), a futex wake-up across CPUs and the CPU cost of a sleep
/// and wake-up. See `docs/machines.md` for how each figure is taken.
///
/// Errors: fewer than two usable CPUs (a ping-pong needs two), a thread
/// that cannot be pinned, or a description that fails validation.
pub fn measure(opts: &MeasureOptions) -> Result<HostMeasurement, LabError> {
    let host = Topology::detect();
    let host_nodes: Vec<Vec<usize>> = (0..host.nr_nodes())
        .map(|n| host.cpus_of(n).to_vec())
        .collect();
    let known: Vec<usize> = {
        let mut all: Vec<usize> = host_nodes.iter().flatten().copied().collect();
        all.sort_unstable();
        all
    };
    let usable: Vec<usize> = match allowed_cpus() {
        Some(allowed) => known
            .iter()
            .copied()
            .filter(|c| allowed.binary_search(c).is_ok())
            .collect(),
        None => known,
    };
    if usable.len() < 2 {
        return Err(LabError(format!(
            "this process may run on {} CPU{} ({}): measuring transfers between CPUs needs two",
            usable.len(),
            if usable.len() == 1 { "" } else { "s" },
            cpulist(&usable)
        )));
    }
    let layout = Layout::new(&host_nodes, &usable, &cache_groups(&usable));
    let mut pairs = Vec::new();
    for (a, b, class) in layout.pairs(opts.pairs_per_class) {
        let ns = ping_pong(a, b, opts)?;
        pairs.push(PairLatency { a, b, class, ns });
    }
    // The wake-up crosses CPUs, as a lock's hand-off to a sleeping waiter
    // does; the sleep cost is taken on one CPU, where wall time is CPU time.
    let (first, second) = (usable[0], usable[1]);
    let (wake_ns, waker_ns) = wake_latency(first, second, opts.wakeups)?;
    let sleep_ns = sleep_cost(first, opts.wakeups.div_ceil(10).max(3))?;
    let model = vmresults::Machine::detect(&host).cpu_model;
    let date = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or_else(|_| "unknown date".to_string(), |d| utc_date(d.as_secs()));
    let source = format!("measured on this machine ({model}, {date})");
    let mut machine = layout.machine(&pairs, wake_ns, sleep_ns, source);
    machine.waker_ns = Some(waker_ns);
    let single = pairs
        .iter()
        .find(|p| (p.a, p.b) == (first, second) || (p.b, p.a) == (first, second))
        .map_or(machine.ccx_ns, |p| p.ns);
    machine.overlap = overlap(first, second, single, opts)?;
    machine.chain = chain(first, second, single, opts)?;
    machine.keep = keep(first, second, single, opts)?;
    machine
        .validate()
        .map_err(|e| LabError(format!("the measured description is unusable: {e}")))?;
    Ok(HostMeasurement {
        machine,
        cpus: layout.cpus(),
        pairs,
    })
}

/// The one-way cache-line transfer time between CPUs `a` and `b`, in
/// nanoseconds: the ping-pong of [`measure`] for one pair (about a
/// millisecond). The suite takes it before each run of several workers,
/// because a virtual machine's CPUs can move between the host's cores
/// from one minute to the next (see [`vmresults::Sample::transfer_ns`]).
///
/// Errors: a CPU this thread cannot be pinned to.
pub fn transfer_ns(a: usize, b: usize) -> Result<f64, LabError> {
    ping_pong(a, b, &MeasureOptions::default())
}

/// [`measure`]'s machine description alone.
pub fn measure_host(opts: &MeasureOptions) -> Result<vmproject::Machine, LabError> {
    measure(opts).map(|m| m.machine)
}

/// A measurement as text for people: the shape, the latency of each class
/// of pair, the node distance matrix (up to 16 nodes), the futex figures,
/// and every pair's latency as a matrix up to [`ALL_PAIRS_UP_TO`] CPUs.
pub fn render_measurement(h: &HostMeasurement) -> String {
    let m = &h.machine;
    let mut out = format!(
        "measured: {} node{} x {} CPUs, core complexes of {} CPUs (CPUs {})\n{}\n",
        m.nodes,
        if m.nodes == 1 { "" } else { "s" },
        m.cpus_per_node,
        m.ccx_cpus,
        cpulist(&{
            let mut c = h.cpus.clone();
            c.sort_unstable();
            c
        }),
        m.source
    );
    let count = |class| h.pairs.iter().filter(|p| p.class == class).count();
    let line = |label: &str, ns: f64, note: String| format!("  {label:<28}{ns:>9.1} ns  {note}\n");
    let pairs_note = |n: usize, none: &str| {
        if n == 0 {
            format!("(no such pair: {none})")
        } else {
            format!("(median of {n} pair{})", if n == 1 { "" } else { "s" })
        }
    };
    out.push_str("one-way cache-line transfer:\n");
    out.push_str(&line(
        "same core complex (ccx_ns)",
        m.ccx_ns,
        pairs_note(count(PairClass::SameComplex), "the same-node figure"),
    ));
    out.push_str(&line(
        "same node (node_ns)",
        m.node_ns,
        pairs_note(count(PairClass::SameNode), "the same-complex figure"),
    ));
    if m.nodes > 1 {
        let remote: Vec<f64> = (0..m.nodes)
            .flat_map(|i| (0..m.nodes).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| m.remote_ns[i][j])
            .collect();
        out.push_str(&line(
            "remote node (median)",
            median(remote).unwrap_or(0.0),
            pairs_note(count(PairClass::Remote), "none"),
        ));
        if m.nodes <= 16 {
            out.push_str("node distances (ns, one way; diagonal: node_ns):\n      ");
            for j in 0..m.nodes {
                out.push_str(&format!("{:>8}", format!("node{j}")));
            }
            out.push('\n');
            for (i, row) in m.remote_ns.iter().enumerate() {
                out.push_str(&format!("{:<6}", format!("node{i}")));
                for v in row {
                    out.push_str(&format!("{v:>8.1}"));
                }
                out.push('\n');
            }
        }
    } else {
        out.push_str("  remote node                       -     (one node)\n");
    }
    out.push_str("futex:\n");
    out.push_str(&line(
        "wake-up to running (wake_ns)",
        m.wake_ns,
        "(median; waker on another CPU)".to_string(),
    ));
    out.push_str(&line(
        "sleep + wake CPU (sleep_ns)",
        m.sleep_ns,
        "(median round trip on one CPU)".to_string(),
    ));
    out.push_str(&line(
        "the waker's call (waker_ns)",
        m.waker_cost_ns(),
        if m.waker_ns.is_some() {
            "(median; sleeper on another CPU)".to_string()
        } else {
            "(half of sleep_ns: not measured)".to_string()
        },
    ));
    out.push_str(&format!(
        "lines a CPU fetches at once (overlap): {:.1}  (one line's latency over the time per line of a bulk read of {BULK_LINES})\n",
        m.overlap
    ));
    out.push_str(&format!(
        "a line reached through a pointer (chain): {:.2} of a transfer  (the time per line of a pointer chase through {BULK_LINES} over one line's latency)\n",
        m.chain
    ));
    out.push_str(&format!(
        "a line another CPU asked for stays (keep): {:.2} of a transfer  (two CPUs' adds to one word: the adds in a row, times one add alone, over one line's latency)\n",
        m.keep
    ));
    if h.cpus.len() <= ALL_PAIRS_UP_TO {
        let mut sorted = h.cpus.clone();
        sorted.sort_unstable();
        let ns: BTreeMap<(usize, usize), f64> =
            h.pairs.iter().map(|p| ((p.a, p.b), p.ns)).collect();
        out.push_str("pairs (ns, one way):\n      ");
        for c in &sorted {
            out.push_str(&format!("{:>7}", format!("cpu{c}")));
        }
        out.push('\n');
        for &a in &sorted {
            out.push_str(&format!("{:<6}", format!("cpu{a}")));
            for &b in &sorted {
                let cell = ns
                    .get(&(a.min(b), a.max(b)))
                    .map_or_else(|| "-".to_string(), |v| format!("{v:.1}"));
                out.push_str(&format!("{cell:>7}"));
            }
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpulists_use_the_kernel_format() {
        assert_eq!(cpulist(&[]), "");
        assert_eq!(cpulist(&[3]), "3");
        assert_eq!(cpulist(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
    }

    #[test]
    fn an_emulation_maps_every_vcpu_to_a_real_cpu() {
        let r = report(Some("3x4")).unwrap();
        let e = r.emulated.as_ref().unwrap();
        assert_eq!((e.nodes, e.vcpus_per_node, e.vcpus), (3, 4, 12));
        assert_eq!(e.node_map[1].cpus, [4, 5, 6, 7]);
        let real: Vec<usize> = r.host_nodes.iter().flat_map(|n| n.cpus.clone()).collect();
        assert!(e.real_cpu_of.iter().all(|c| real.contains(c)));
        for n in &e.node_map {
            let mut expect: Vec<usize> = n.cpus.iter().map(|&v| e.real_cpu_of[v]).collect();
            expect.sort_unstable();
            expect.dedup();
            assert_eq!(n.real_cpus, expect);
        }
        let text = render_text(&r);
        assert!(
            text.contains("emulated 3x4: 3 nodes x 4 vCPUs = 12 vCPUs"),
            "{text}"
        );
        assert!(
            text.contains("  node 2: vCPUs 8-11 -> real CPUs "),
            "{text}"
        );
    }

    #[test]
    fn host_nodes_cover_the_detected_topology() {
        let r = report(None).unwrap();
        assert!(r.emulated.is_none());
        assert_eq!(r.host_nodes.len(), r.machine.nodes);
        assert!(r.host_nodes.iter().all(|n| n.cpus == n.real_cpus));
        let text = render_text(&r);
        assert!(text.contains(&format!("NUMA nodes: {}\n", r.machine.nodes)));
    }

    #[test]
    fn bad_emulations_are_refused() {
        for bad in ["0x4", "4x0", "host", "12", "axb"] {
            let e = report(Some(bad)).unwrap_err().0;
            assert!(
                e.starts_with("--emulate") && !e.contains('\n'),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn cpu_lists_parse_like_the_kernel_writes_them() {
        assert_eq!(
            parse_cpulist("0-3,8,10-11\n"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpulist(""), Some(vec![]));
        assert_eq!(parse_cpulist("3-1"), None);
        assert_eq!(parse_cpulist("a"), None);
        assert_eq!(parse_cpulist("99999"), None);
    }

    #[test]
    fn dates_are_civil_utc() {
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(951_782_400), "2000-02-29");
        assert_eq!(utc_date(1_795_651_200 + 86_399), "2026-11-26");
        assert_eq!(utc_date(4_107_542_400), "2100-03-01");
    }

    /// Two nodes of four CPUs, two CPUs per last-level cache.
    fn two_by_four() -> Layout {
        let groups = (0..8).map(|c| (c, c / 2 * 2)).collect();
        Layout::new(
            &[vec![0, 1, 2, 3], vec![4, 5, 6, 7]],
            &[0, 1, 2, 3, 4, 5, 6, 7],
            &groups,
        )
    }

    #[test]
    fn a_layout_times_every_pair_of_a_small_machine_and_classifies_it() {
        let l = two_by_four();
        assert_eq!((l.nodes.len(), l.ccx_cpus), (2, 2));
        let pairs = l.pairs(1);
        assert_eq!(pairs.len(), 28);
        let count = |class| pairs.iter().filter(|p| p.2 == class).count();
        assert_eq!(count(PairClass::SameComplex), 4);
        assert_eq!(count(PairClass::SameNode), 8);
        assert_eq!(count(PairClass::Remote), 16);
        let timed: Vec<PairLatency> = pairs
            .iter()
            .map(|&(a, b, class)| PairLatency {
                a,
                b,
                class,
                ns: match class {
                    PairClass::SameComplex => 10.0,
                    PairClass::SameNode => 20.0 + a as f64, // 20, 20, 21, 21, 24, 24, 25, 25
                    PairClass::Remote => 50.0,
                },
            })
            .collect();
        let m = l.machine(&timed, 1000.0, 2000.0, "test".to_string());
        m.validate().unwrap();
        assert_eq!((m.nodes, m.cpus_per_node, m.ccx_cpus), (2, 4, 2));
        assert_eq!((m.ccx_ns, m.wake_ns, m.sleep_ns), (10.0, 1000.0, 2000.0));
        assert_eq!(m.node_ns, 22.5);
        assert_eq!(m.remote_ns, [[22.5, 50.0], [50.0, 22.5]]);
        assert_eq!(m.transfer_ns(0, 1), 10.0);
        assert_eq!(m.transfer_ns(0, 5), 50.0);
    }

    #[test]
    fn a_layout_evens_out_nodes_and_falls_back_to_the_node_as_complex() {
        // Node 1 has three usable CPUs: each node keeps three; with no cache
        // information the node is the complex.
        let l = Layout::new(
            &[vec![0, 1, 2, 3], vec![4, 5, 6, 7]],
            &[0, 1, 2, 3, 5, 6, 7],
            &BTreeMap::new(),
        );
        assert_eq!(l.nodes, [vec![0, 1, 2], vec![5, 6, 7]]);
        assert_eq!(l.ccx_cpus, 3);
        // Caches of 2 and 1 CPUs in a node of 3 cannot tile it.
        let groups = [(0, 0), (1, 0), (2, 2)].into_iter().collect();
        let l = Layout::new(&[vec![0, 1, 2]], &[0, 1, 2], &groups);
        assert_eq!(l.ccx_cpus, 3);
        // Complexes are laid out contiguously even where the kernel
        // interleaves their CPU numbers.
        let groups = [(0, 0), (1, 1), (2, 0), (3, 1)].into_iter().collect();
        let l = Layout::new(&[vec![0, 1, 2, 3]], &[0, 1, 2, 3], &groups);
        assert_eq!((l.cpus(), l.ccx_cpus), (vec![0, 2, 1, 3], 2));
    }

    #[test]
    fn a_big_machine_samples_each_class() {
        let groups = (0..64).map(|c| (c, c / 8 * 8)).collect();
        let host = [(0..32).collect::<Vec<_>>(), (32..64).collect()];
        let usable: Vec<usize> = (0..64).collect();
        let l = Layout::new(&host, &usable, &groups);
        assert_eq!(l.ccx_cpus, 8);
        let pairs = l.pairs(3);
        assert_eq!(pairs.len(), 9);
        for class in [
            PairClass::SameComplex,
            PairClass::SameNode,
            PairClass::Remote,
        ] {
            assert_eq!(pairs.iter().filter(|p| p.2 == class).count(), 3);
        }
        assert!(pairs.iter().all(|&(a, b, _)| a < b));
    }

    /// The whole measurement, on whatever this machine is. No timing
    /// thresholds: only that the description is usable and its figures
    /// positive.
    #[test]
    fn this_machine_measures_to_a_valid_description() {
        let opts = MeasureOptions {
            round_trips: 200,
            rounds: 3,
            pairs_per_class: 2,
            wakeups: 10,
        };
        let before = allowed_cpus();
        let measured = measure(&opts);
        // The measuring threads are pinned, never the caller.
        assert_eq!(allowed_cpus(), before);
        match measured {
            Ok(h) => {
                let m = &h.machine;
                m.validate().unwrap();
                assert_eq!(m.name, "host");
                assert!(
                    m.source.starts_with("measured on this machine ("),
                    "{}",
                    m.source
                );
                let all = [m.ccx_ns, m.node_ns, m.wake_ns, m.sleep_ns];
                let remote = m.remote_ns.iter().flatten().copied();
                for v in all.into_iter().chain(remote) {
                    assert!(v.is_finite() && v > 0.0, "{m:?}");
                }
                assert_eq!(h.cpus.len(), m.cpus());
                assert!(!h.pairs.is_empty());
                assert!(h.pairs.iter().all(|p| p.ns.is_finite() && p.ns > 0.0));
                let text = render_measurement(&h);
                assert!(text.contains("same core complex (ccx_ns)"), "{text}");
                assert_eq!(measure_host(&opts).unwrap().nodes, m.nodes);
            }
            // A process allowed one CPU has nothing to measure between.
            Err(e) => assert!(e.0.contains("may run on 1 CPU"), "{e}"),
        }
    }
}
