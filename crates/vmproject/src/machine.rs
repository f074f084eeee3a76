//! A machine as the simulation sees it: NUMA nodes of CPUs grouped in core
//! complexes (CPUs sharing a last-level cache), the time a cache line
//! takes to move between two CPUs, and the cost of a futex sleep and
//! wake-up.
//!
//! A description comes from [`Machine::parse`]: one of the
//! [`Machine::PRESETS`] (machines no one here has, with every figure cited
//! in `docs/machines.md`), `NxM` (N nodes of M CPUs with the figures of the
//! `12x32` preset), or a JSON file holding a [`Machine`], such as the one
//! `vmbench topology --measure --out FILE` writes for this machine. Every
//! description is checked by [`Machine::validate`] before it is used.
//!
//! ```
//! use vmproject::Machine;
//! let m: Machine = "2x4".parse().unwrap();
//! assert_eq!((m.nodes, m.cpus_per_node, m.cpus()), (2, 4, 8));
//! assert!(m.transfer_ns(0, 1) < m.transfer_ns(0, 4));
//! let e = "0x4".parse::<Machine>().unwrap_err();
//! assert_eq!(e.to_string(), "machine 0x4: 0 nodes: a machine needs at least one node");
//! ```

use std::path::Path;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The most CPUs a description may have: the kernel's largest `NR_CPUS`.
/// Bounds what a typo (`12x32000`) can make a simulation allocate.
pub const MAX_CPUS: usize = 8192;

/// The most nodes a description may have: the kernel's largest
/// `MAX_NUMNODES`. Bounds the `nodes × nodes` distance matrix.
pub const MAX_NODES: usize = 1024;

/// A machine description.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// Its name in reports (`12x32`, `host`, ...).
    pub name: String,
    /// NUMA nodes.
    pub nodes: usize,
    /// CPUs per node. CPU `c` is on node `c / cpus_per_node`.
    pub cpus_per_node: usize,
    /// CPUs per core complex (sharing a last-level cache); complexes do not
    /// straddle nodes. CPU `c` is in complex `c / ccx_cpus`.
    pub ccx_cpus: usize,
    /// Nanoseconds for a line to move between two CPUs of one complex.
    pub ccx_ns: f64,
    /// Nanoseconds between two complexes of one node.
    pub node_ns: f64,
    /// Nanoseconds between nodes: `remote_ns[i][j]` from node `i` to node
    /// `j`, a `nodes × nodes` matrix whose diagonal is not used (the two
    /// fields above cover a node's own CPUs).
    pub remote_ns: Vec<Vec<f64>>,
    /// Nanoseconds from a futex wake-up to the woken thread running again.
    pub wake_ns: f64,
    /// CPU nanoseconds a thread spends going to sleep on a futex and being
    /// switched back in (system calls and two context switches).
    pub sleep_ns: f64,
    /// CPU nanoseconds the waker spends in a futex wake-up of a thread
    /// asleep on another CPU (the system call, and the inter-processor
    /// interrupt it sends; in a virtual machine that interrupt can cost
    /// the waker as much as the wake-up takes). `None` (descriptions that
    /// do not give it, and the presets, for want of a published figure):
    /// half of [`Machine::sleep_ns`], one system call of the round trip.
    /// See [`Machine::waker_cost_ns`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waker_ns: Option<f64>,
    /// How many line transfers one CPU has under way at once when a
    /// critical section touches many lines (an out-of-order core issues
    /// independent misses together): `L` lines cost one transfer plus
    /// `(L - 1) / overlap` more. At least 1 (every line in turn); `vmbench
    /// topology --measure` measures it with a bulk read of lines another
    /// CPU wrote. Descriptions written before it existed read as 1.
    #[serde(default = "serial")]
    pub overlap: f64,
    /// What a line costs that a critical section reaches through a
    /// pointer (a tree node found from its parent), as a share of
    /// [`Machine::transfer_ns`]: such a load waits for the one before it,
    /// so none of [`Machine::overlap`] applies to it. Under 1 where the
    /// one-way figure, half a ping-pong's round trip, takes more than one
    /// line's move (the spinning reader's copy, then the exchange's).
    /// `vmbench topology --measure` measures it with a pointer chase
    /// through lines another CPU wrote. Descriptions written before it
    /// existed read as 1 (a whole transfer: the dearest it can be).
    #[serde(default = "serial")]
    pub chain: f64,
    /// The share of a transfer for which a CPU keeps a line it has just
    /// received although another CPU already asked for it: its own atomic
    /// operations on the line in that time cost it nothing. This is what
    /// lets two CPUs whose readers count themselves in and out of one rwsem
    /// move its word once per section rather than twice. The line still
    /// reaches the CPU that asked one [`Machine::transfer_ns`] after it
    /// could leave. 0: the line leaves at once. `vmbench topology
    /// --measure` measures it with two CPUs adding to one word back to
    /// back: the adds a CPU makes in a row, times what one add costs alone,
    /// over one transfer. Descriptions written before it existed read as
    /// 0, and so do the presets: no published figure gives it, and 0 is
    /// the dearest.
    #[serde(default)]
    pub keep: f64,
    /// Where the figures come from (a citation, or `measured on ...`).
    pub source: String,
}

/// [`Machine::overlap`] and [`Machine::chain`] of a description that does
/// not give them.
fn serial() -> f64 {
    1.0
}

impl Machine {
    /// [`Machine::waker_ns`], or half of [`Machine::sleep_ns`] where the
    /// description does not give it.
    ///
    /// ```
    /// let m = vmproject::Machine::preset("12x32").unwrap();
    /// assert_eq!(m.waker_cost_ns(), m.sleep_ns / 2.0);
    /// ```
    pub fn waker_cost_ns(&self) -> f64 {
        self.waker_ns.unwrap_or(self.sleep_ns / 2.0)
    }

    /// Every CPU of the machine.
    pub fn cpus(&self) -> usize {
        self.nodes * self.cpus_per_node
    }

    /// The node of CPU `cpu`.
    pub fn node_of(&self, cpu: usize) -> usize {
        cpu / self.cpus_per_node.max(1)
    }

    /// The i_mmap group of CPU `cpu`, as the lab's default grouping makes
    /// them: one group per node on a machine with several, one per CPU on
    /// a machine with one node.
    pub fn group_of(&self, cpu: usize) -> usize {
        if self.nodes > 1 {
            self.node_of(cpu)
        } else {
            cpu
        }
    }

    /// Nanoseconds for a line last written by CPU `from` to reach CPU
    /// `to`: nothing on the same CPU.
    pub fn transfer_ns(&self, from: usize, to: usize) -> f64 {
        if from == to {
            return 0.0;
        }
        let (a, b) = (self.node_of(from), self.node_of(to));
        if a != b {
            return self.remote_ns[a][b];
        }
        if from / self.ccx_cpus.max(1) == to / self.ccx_cpus.max(1) {
            self.ccx_ns
        } else {
            self.node_ns
        }
    }
}

/// A machine description that cannot be used, with the reason in one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("machine {name}: {why}")]
pub struct MachineError {
    /// The description's name (or the text that failed to parse).
    pub name: String,
    /// What is wrong.
    pub why: String,
}

// The published figures the presets are made of. Every latency is one way:
// half the round trip of a cache line bounced between two pinned threads by
// atomic compare-and-exchange, which is what the cited core-to-core tests
// report. docs/machines.md tabulates them with their sources.

/// Where the core-to-core figures below come from.
const C2C: &str = "nviennot/core-to-core-latency, \"Measuring CPU core-to-core latency\", \
                   https://github.com/nviennot/core-to-core-latency (README result tables)";

/// Where the futex figures below come from.
const CTX: &str = "\"Context switch overhead\", \
                   https://ddumbying.vercel.app/experiments/ctx-switch-overhead \
                   (thread ping-pong over a pipe, Linux 6.6)";

/// Two CPUs of one Zen core complex: 25 ns on a Threadripper 1950X, the
/// Zen 1 "Zeppelin" die that Hygon's Dhyana servers are built from (the
/// same table gives 24 ns on Zen+ and 23 ns on Milan, so the figure holds
/// across the family). Source: [`C2C`].
const ZEN_CCX_NS: f64 = 25.0;

/// Two core complexes of one Zen node: 107 ns, the cross-complex median
/// inside one socket of an EPYC 7R13 (Milan, AWS c6a.metal); the same table
/// brackets it with 92 ns between the two complexes of one Zen+ die
/// (Ryzen 7 2700X). Source: [`C2C`].
const ZEN_NODE_NS: f64 = 107.0;

/// Two Zen nodes in one package: 154 ns, the cross-group median of a
/// Threadripper 1950X, whose two Zen 1 dies are what a Hygon/Naples-style
/// package exposes as separate NUMA nodes. Source: [`C2C`].
const ZEN_NEAR_NS: f64 = 154.0;

/// Two Zen nodes in different sockets: 197 ns, the socket-to-socket median
/// of a dual EPYC 7R13 (Milan). Source: [`C2C`]. No cross-socket figure for
/// a Zen 1 or Hygon part was found; this Zen 3 one stands in for it.
const ZEN_FAR_NS: f64 = 197.0;

/// Two cores of one Ice Lake-SP socket (a mesh: no core complexes): 51 ns,
/// the single-socket median of a Xeon Platinum 8375C (32 cores, AWS
/// c6i.metal). Source: [`C2C`].
const ICX_NODE_NS: f64 = 51.0;

/// Two Ice Lake-SP sockets: 108 ns, the dual-socket median of the same
/// Xeon Platinum 8375C machine. Source: [`C2C`].
const ICX_REMOTE_NS: f64 = 108.0;

/// Two cores of one 8-core complex of a server Zen part: 23 ns, the
/// intra-group median of an EPYC 7R13 (Milan). No measurement of an EPYC
/// 9654 (Genoa) was found; desktop Zen 4 measures 15–19 ns inside a complex
/// at over 5 GHz (AnandTech, Ryzen 9 7950X review), and a 9654 runs below
/// 3.7 GHz, so the server Zen 3 figure is taken. Source: [`C2C`].
const GENOA_CCX_NS: f64 = 23.0;

/// Two complexes of one single-socket, many-CCD Zen server: 115 ns, the
/// median over all pairs of an EPYC 7773X (Milan-X, 8 complexes of 8: 56 of
/// each core's 63 partners are on other complexes, so the median is a
/// cross-complex figure). Stands in for Genoa, for which no figure was
/// found. Source: [`C2C`].
const GENOA_NODE_NS: f64 = 115.0;

/// From a futex wake-up to the woken thread running: 1,070 ns, the
/// one-way time of a thread ping-pong through a pipe (a wake-up of a
/// sleeping thread and the switch to it) on Linux 6.6. Source: [`CTX`]. A
/// waker on another CPU also pays an inter-processor interrupt, and an idle
/// CPU may wake from a deep C-state; no published figure for those was
/// found, so the preset keeps the same-CPU one and `vmbench topology
/// --measure` measures the cross-CPU case on this machine.
const WAKE_NS: f64 = 1070.0;

/// CPU time of one sleep and wake-up: 2,140 ns, the round trip of the same
/// ping-pong (two system calls, two context switches). Source: [`CTX`].
const SLEEP_NS: f64 = 2140.0;

/// Line transfers a CPU overlaps ([`Machine::overlap`]): no published
/// figure measures it the way the simulation uses it, so the presets take
/// the value `vmbench topology --measure` gave on this project's machines
/// (docs/machines.md, "Overlap").
const OVERLAP: f64 = 5.0;

/// The share of a transfer a line reached through a pointer costs
/// ([`Machine::chain`]): no published figure either (core-to-core tables
/// give the ping-pong alone), so the presets take the value `vmbench
/// topology --measure` gave on this project's machines (docs/machines.md,
/// "Chain").
const CHAIN: f64 = 0.6;

/// The `12x32` preset's sockets: 12 nodes on 2 sockets of 6. A choice
/// without a source (the execl report names 12 nodes, not sockets); it
/// makes 5 of each node's 11 peers near and 6 far.
const ZEN_SOCKETS: usize = 2;

// The Zen figures must grow with distance, or the near/far split means
// nothing.
const _: () =
    assert!(ZEN_CCX_NS < ZEN_NODE_NS && ZEN_NODE_NS < ZEN_NEAR_NS && ZEN_NEAR_NS < ZEN_FAR_NS);

impl Machine {
    /// The names [`Machine::preset`] knows, in the order reports list them.
    pub const PRESETS: [&'static str; 3] = ["12x32", "2s64", "1n96"];

    /// A preset machine by name, `None` for an unknown name. Every figure
    /// and its source is in `docs/machines.md`.
    ///
    /// - `12x32`: the execl report's machine, 12 nodes × 32 CPUs of a
    ///   Zen-derived server (Hygon-class): core complexes of 8 CPUs (a Zen 1
    ///   complex is 4 cores × 2 threads, a Zen 3/4 one 8 cores), 25 ns inside
    ///   a complex, 107 ns between complexes of a node, 154 ns to a node of
    ///   the same socket and 197 ns to one of the other socket (2 sockets of 6
    ///   nodes: the socket split is a choice, not a published figure).
    /// - `2s64`: a 2-socket, 64-core Ice Lake-SP server (Xeon Platinum
    ///   8375C-class, one node per socket): a mesh, so one complex per node,
    ///   51 ns within a socket and 108 ns across.
    /// - `1n96`: a 96-core single-socket Zen 4 part (EPYC 9654 in NPS1, 12
    ///   CCDs of 8 cores): 23 ns inside a CCD and 115 ns between CCDs (Zen 3
    ///   server figures standing in: none for Genoa was found).
    ///
    /// All three use a futex wake-up of 1,070 ns and a sleep of 2,140 ns of
    /// CPU time, measured on Linux 6.6.
    ///
    /// ```
    /// use vmproject::Machine;
    /// for name in Machine::PRESETS {
    ///     Machine::preset(name).unwrap().validate().unwrap();
    /// }
    /// assert_eq!(Machine::preset("12x32").unwrap().cpus(), 384);
    /// assert!(Machine::preset("host").is_none());
    /// ```
    pub fn preset(name: &str) -> Option<Machine> {
        match name {
            "12x32" => Some(Machine {
                name: name.to_string(),
                remote_ns: split_sockets(12, ZEN_SOCKETS, ZEN_NODE_NS, ZEN_NEAR_NS, ZEN_FAR_NS),
                source: format!(
                    "12 nodes x 32 CPUs, Zen-derived (Hygon-class): core-to-core from {C2C}; \
                     futex from {CTX}; 2 sockets of 6 nodes assumed"
                ),
                ..zen_shape(12, 32)
            }),
            "2s64" => Some(Machine {
                name: name.to_string(),
                nodes: 2,
                cpus_per_node: 32,
                ccx_cpus: 32,
                ccx_ns: ICX_NODE_NS,
                node_ns: ICX_NODE_NS,
                remote_ns: vec![vec![ICX_NODE_NS, ICX_REMOTE_NS], vec![ICX_REMOTE_NS, ICX_NODE_NS]],
                wake_ns: WAKE_NS,
                sleep_ns: SLEEP_NS,
                waker_ns: None,
                overlap: OVERLAP,
                chain: CHAIN,
                keep: 0.0,
                source: format!(
                    "2 sockets x 32 cores, Ice Lake-SP (Xeon Platinum 8375C): core-to-core from \
                     {C2C}; futex from {CTX}"
                ),
            }),
            "1n96" => Some(Machine {
                name: name.to_string(),
                nodes: 1,
                cpus_per_node: 96,
                ccx_cpus: 8,
                ccx_ns: GENOA_CCX_NS,
                node_ns: GENOA_NODE_NS,
                remote_ns: vec![vec![GENOA_NODE_NS]],
                wake_ns: WAKE_NS,
                sleep_ns: SLEEP_NS,
                waker_ns: None,
                overlap: OVERLAP,
                chain: CHAIN,
                keep: 0.0,
                source: format!(
                    "1 node x 96 cores, EPYC 9654-class in NPS1 (12 CCDs of 8): Milan and \
                     Milan-X core-to-core figures from {C2C} standing in for Genoa; futex from {CTX}"
                ),
            }),
            _ => None,
        }
    }

    /// `nodes` nodes of `cpus_per_node` CPUs with the `12x32` preset's
    /// figures: complexes of 8 CPUs where 8 divides `cpus_per_node`, else
    /// one complex per node; the nodes split into two sockets (the first
    /// `ceil(nodes / 2)` on socket 0), a node of the same socket at the
    /// near-node figure and one of the other at the far-node figure. Not
    /// validated: [`Machine::parse`] does that.
    fn scaled(nodes: usize, cpus_per_node: usize) -> Machine {
        let sockets = if nodes > 1 { ZEN_SOCKETS } else { 1 };
        Machine {
            name: format!("{nodes}x{cpus_per_node}"),
            remote_ns: split_sockets(nodes, sockets, ZEN_NODE_NS, ZEN_NEAR_NS, ZEN_FAR_NS),
            source: format!(
                "{nodes} nodes x {cpus_per_node} CPUs with the 12x32 preset's Zen-family figures \
                 (core-to-core from {C2C}; futex from {CTX}); nodes split into 2 sockets"
            ),
            ..zen_shape(nodes, cpus_per_node)
        }
    }

    /// Reads a machine description: a preset name ([`Machine::PRESETS`]),
    /// `NxM` (N nodes of M CPUs, see below), or the path of a JSON file
    /// holding a [`Machine`] (as `vmbench topology --measure --out FILE`
    /// writes). The result is [validated](Machine::validate).
    ///
    /// `NxM` takes the `12x32` preset's figures to that shape: core
    /// complexes of 8 CPUs where 8 divides M (else the node is one complex),
    /// and the nodes split into two sockets, the first `ceil(N / 2)` on
    /// socket 0: a node on the same socket costs the preset's near-node
    /// figure (154 ns), one on the other socket its far-node figure (197 ns).
    /// `12x32` itself is the preset.
    ///
    /// `host` is not a description: this machine is measured, by `vmbench
    /// topology --measure --out FILE`, and FILE given instead.
    ///
    /// Errors: one line naming the text and what is wrong with it.
    ///
    /// ```
    /// use vmproject::Machine;
    /// let m = Machine::parse("4x6").unwrap();
    /// assert_eq!(m.ccx_cpus, 6); // 8 does not divide 6: one complex per node
    /// assert_eq!(m.transfer_ns(0, 6), 154.0); // node 1: same socket
    /// assert_eq!(m.transfer_ns(0, 12), 197.0); // node 2: the other socket
    /// assert!(Machine::parse("host").unwrap_err().why.contains("--measure"));
    /// ```
    pub fn parse(text: &str) -> Result<Machine, MachineError> {
        let text = text.trim();
        let fail = |why: String| MachineError {
            name: text.to_string(),
            why,
        };
        let machine = if let Some(m) = Machine::preset(text) {
            m
        } else if let Some((n, m)) = parse_shape(text) {
            let (n, m) = (n.map_err(fail)?, m.map_err(fail)?);
            // Check the counts before building an n × n matrix from them.
            shape_error(n, m).map_or(Ok(()), |why| Err(fail(why)))?;
            Machine::scaled(n, m)
        } else if text == "host" {
            return Err(fail(
                "this machine is measured, not assumed: run `vmbench topology --measure --out \
                 FILE` and give FILE"
                    .to_string(),
            ));
        } else if looks_like_path(text) {
            Machine::read_json(Path::new(text)).map_err(fail)?
        } else {
            return Err(fail(format!(
                "unknown machine: expected one of {}, NODESxCPUS (e.g. 4x8) or a JSON file",
                Machine::PRESETS.join(", ")
            )));
        };
        machine.validate().map_err(|e| MachineError {
            name: text.to_string(),
            why: e.why,
        })?;
        Ok(machine)
    }

    /// A machine from a JSON file, not yet validated.
    fn read_json(path: &Path) -> Result<Machine, String> {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("cannot read the file: {e}"))?;
        serde_json::from_str(&text).map_err(|e| format!("not a machine description: {e}"))
    }

    /// Checks that the description can be simulated: at least one node of at
    /// least one CPU (at most [`MAX_NODES`] nodes and [`MAX_CPUS`] CPUs),
    /// core complexes that tile a node, a `nodes × nodes` distance matrix,
    /// and latencies that are finite and not negative.
    ///
    /// Errors: the first problem found, in one line.
    ///
    /// ```
    /// let mut m = vmproject::Machine::preset("2s64").unwrap();
    /// m.remote_ns[1].pop();
    /// let e = m.validate().unwrap_err();
    /// assert_eq!(e.why, "a distance matrix whose row 1 has 1 entries for 2 nodes: it must be 2x2");
    /// ```
    pub fn validate(&self) -> Result<(), MachineError> {
        let fail = |why: String| {
            Err(MachineError {
                name: self.name.clone(),
                why,
            })
        };
        if let Some(why) = shape_error(self.nodes, self.cpus_per_node) {
            return fail(why);
        }
        if self.ccx_cpus == 0 {
            return fail("ccx_cpus is 0: a core complex needs at least one CPU".to_string());
        }
        if self.cpus_per_node % self.ccx_cpus != 0 {
            return fail(format!(
                "core complexes of {} CPUs do not tile a node of {} CPUs (ccx_cpus must divide \
                 cpus_per_node)",
                self.ccx_cpus, self.cpus_per_node
            ));
        }
        let n = self.nodes;
        let rows = self.remote_ns.len();
        if let Some((i, row)) = self
            .remote_ns
            .iter()
            .enumerate()
            .find(|(_, r)| r.len() != n)
        {
            let all_same = self.remote_ns.iter().all(|r| r.len() == row.len());
            return fail(if all_same {
                format!(
                    "a {rows}x{} distance matrix for {n} nodes: it must be {n}x{n}",
                    row.len()
                )
            } else {
                format!(
                    "a distance matrix whose row {i} has {} entries for {n} nodes: it must be \
                     {n}x{n}",
                    row.len()
                )
            });
        }
        if rows != n {
            return fail(format!(
                "a {rows}x{n} distance matrix for {n} nodes: it must be {n}x{n}"
            ));
        }
        let mut fields = vec![
            ("ccx_ns".to_string(), self.ccx_ns),
            ("node_ns".to_string(), self.node_ns),
            ("wake_ns".to_string(), self.wake_ns),
            ("sleep_ns".to_string(), self.sleep_ns),
            ("waker_ns".to_string(), self.waker_cost_ns()),
        ];
        for (i, row) in self.remote_ns.iter().enumerate() {
            for (j, &v) in row.iter().enumerate() {
                fields.push((format!("remote_ns[{i}][{j}]"), v));
            }
        }
        for (field, v) in fields {
            if !v.is_finite() || v < 0.0 {
                return fail(format!(
                    "{field} is {v}: latencies must be finite and not negative"
                ));
            }
        }
        if !self.overlap.is_finite() || self.overlap < 1.0 {
            return fail(format!(
                "overlap is {}: a CPU has at least one transfer under way at once (1 or more)",
                self.overlap
            ));
        }
        if !self.chain.is_finite() || self.chain <= 0.0 {
            return fail(format!(
                "chain is {}: a line reached through a pointer costs a positive share of a transfer",
                self.chain
            ));
        }
        if !(0.0..=1.0).contains(&self.keep) {
            return fail(format!(
                "keep is {}: a CPU keeps a line asked of it for 0 to 1 of a transfer",
                self.keep
            ));
        }
        Ok(())
    }
}

impl FromStr for Machine {
    type Err = MachineError;

    /// [`Machine::parse`].
    fn from_str(s: &str) -> Result<Machine, MachineError> {
        Machine::parse(s)
    }
}

/// A Zen-family machine of `nodes × cpus_per_node` with the Zen figures and
/// no distance matrix yet.
fn zen_shape(nodes: usize, cpus_per_node: usize) -> Machine {
    Machine {
        name: String::new(),
        nodes,
        cpus_per_node,
        ccx_cpus: if cpus_per_node % 8 == 0 {
            8
        } else {
            cpus_per_node
        },
        ccx_ns: ZEN_CCX_NS,
        node_ns: ZEN_NODE_NS,
        remote_ns: Vec::new(),
        wake_ns: WAKE_NS,
        sleep_ns: SLEEP_NS,
        waker_ns: None,
        overlap: OVERLAP,
        chain: CHAIN,
        keep: 0.0,
        source: String::new(),
    }
}

/// The distance matrix of `nodes` nodes on `sockets` sockets, the first
/// `ceil(nodes / sockets)` nodes on socket 0 and so on: `near` between
/// nodes of one socket, `far` between sockets, and `diagonal` (unused by
/// [`Machine::transfer_ns`]; the within-node figure, so that a reader of the
/// matrix alone never sees a node cheaper to itself than to its own CPUs).
fn split_sockets(
    nodes: usize,
    sockets: usize,
    diagonal: f64,
    near: f64,
    far: f64,
) -> Vec<Vec<f64>> {
    let per = nodes.div_ceil(sockets.max(1)).max(1);
    (0..nodes)
        .map(|i| {
            (0..nodes)
                .map(|j| match (i == j, i / per == j / per) {
                    (true, _) => diagonal,
                    (false, true) => near,
                    (false, false) => far,
                })
                .collect()
        })
        .collect()
}

/// What is wrong with `nodes × cpus_per_node`, if anything.
fn shape_error(nodes: usize, cpus_per_node: usize) -> Option<String> {
    if nodes == 0 {
        return Some("0 nodes: a machine needs at least one node".to_string());
    }
    if cpus_per_node == 0 {
        return Some("0 CPUs per node: a node needs at least one CPU".to_string());
    }
    if nodes > MAX_NODES {
        return Some(format!("{nodes} nodes: at most {MAX_NODES}"));
    }
    match nodes.checked_mul(cpus_per_node) {
        Some(c) if c <= MAX_CPUS => None,
        _ => Some(format!(
            "{nodes} nodes x {cpus_per_node} CPUs: at most {MAX_CPUS} CPUs in all"
        )),
    }
}

/// `NxM` split into its two counts (each parsed or its error), or `None`
/// when `text` is not two runs of digits around an `x`.
#[allow(clippy::type_complexity)]
fn parse_shape(text: &str) -> Option<(Result<usize, String>, Result<usize, String>)> {
    let (n, m) = text.split_once(['x', 'X'])?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(n) || !digits(m) {
        return None;
    }
    let count = |s: &str, what: &str| {
        s.parse::<usize>()
            .map_err(|_| format!("{s} {what}: too many"))
    };
    Some((count(n, "nodes"), count(m, "CPUs per node")))
}

/// Whether `text` names a file rather than a misspelt preset: it has a
/// path separator or a `.json` ending, or a file of that name exists.
fn looks_like_path(text: &str) -> bool {
    text.contains('/') || text.ends_with(".json") || Path::new(text).is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_validate_and_have_their_shapes() {
        let shapes = [
            ("12x32", 12, 32, 8),
            ("2s64", 2, 32, 32),
            ("1n96", 1, 96, 8),
        ];
        for (name, nodes, per, ccx) in shapes {
            let m = Machine::preset(name).unwrap();
            m.validate().unwrap();
            assert_eq!(
                (m.name.as_str(), m.nodes, m.cpus_per_node, m.ccx_cpus),
                (name, nodes, per, ccx)
            );
            assert!(m.source.contains("https://"), "{name}: {}", m.source);
            assert_eq!(Machine::parse(name).unwrap(), m);
        }
        assert_eq!(Machine::PRESETS.len(), shapes.len());
    }

    #[test]
    fn transfers_cost_more_the_further_they_go() {
        let m = Machine::preset("12x32").unwrap();
        assert_eq!(m.transfer_ns(5, 5), 0.0);
        assert_eq!(m.transfer_ns(0, 7), ZEN_CCX_NS); // one complex
        assert_eq!(m.transfer_ns(0, 8), ZEN_NODE_NS); // node 0, next complex
        assert_eq!(m.transfer_ns(0, 32), ZEN_NEAR_NS); // node 1, socket 0
        assert_eq!(m.transfer_ns(0, 6 * 32), ZEN_FAR_NS); // node 6, socket 1
        assert_eq!(m.transfer_ns(6 * 32, 0), ZEN_FAR_NS);
        let x = Machine::preset("2s64").unwrap();
        assert_eq!(x.transfer_ns(0, 31), x.transfer_ns(0, 1)); // a mesh
        assert_eq!(x.transfer_ns(31, 32), ICX_REMOTE_NS);
    }

    #[test]
    fn a_shape_takes_the_zen_figures() {
        let m = Machine::parse("2x4").unwrap();
        assert_eq!(
            (m.name.as_str(), m.nodes, m.cpus_per_node, m.ccx_cpus),
            ("2x4", 2, 4, 4)
        );
        assert_eq!(
            m.remote_ns,
            [[ZEN_NODE_NS, ZEN_FAR_NS], [ZEN_FAR_NS, ZEN_NODE_NS]]
        );
        assert_eq!(m.transfer_ns(1, 2), ZEN_CCX_NS);
        assert_eq!(m.transfer_ns(1, 5), ZEN_FAR_NS);
        let m = Machine::parse("3X16").unwrap();
        assert_eq!(m.ccx_cpus, 8);
        assert_eq!(m.transfer_ns(0, 16), ZEN_NEAR_NS); // nodes 0 and 1: socket 0
        assert_eq!(m.transfer_ns(16, 32), ZEN_FAR_NS); // node 2: socket 1
        let one = Machine::parse("1x8").unwrap();
        assert_eq!(one.remote_ns, [[ZEN_NODE_NS]]);
        // The scaled 12x32 has the preset's figures, only the name of where
        // they come from differs.
        let scaled = Machine::scaled(12, 32);
        let preset = Machine::preset("12x32").unwrap();
        assert_eq!(scaled.remote_ns, preset.remote_ns);
        assert_eq!(
            (scaled.ccx_ns, scaled.node_ns),
            (preset.ccx_ns, preset.node_ns)
        );
    }

    #[test]
    fn a_json_file_round_trips() {
        let dir = std::env::temp_dir().join(format!("vmproject-machine-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut m = Machine::preset("2s64").unwrap();
        m.name = "lab".to_string();
        m.remote_ns[0][1] = 111.5;
        let path = dir.join("lab.json");
        std::fs::write(&path, serde_json::to_string_pretty(&m).unwrap()).unwrap();
        assert_eq!(Machine::parse(path.to_str().unwrap()).unwrap(), m);
        // A file holding a bad description is refused like any other.
        m.ccx_ns = -1.0;
        std::fs::write(&path, serde_json::to_string(&m).unwrap()).unwrap();
        let e = Machine::parse(path.to_str().unwrap()).unwrap_err();
        assert!(e.why.starts_with("ccx_ns is -1"), "{e}");
        std::fs::write(&path, "{\"nodes\": 2}").unwrap();
        let e = Machine::parse(path.to_str().unwrap()).unwrap_err();
        assert!(e.why.starts_with("not a machine description: "), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
        let e = Machine::parse("/nonexistent/m.json").unwrap_err();
        assert!(e.why.starts_with("cannot read the file: "), "{e}");
    }

    /// Every bad description gets its own one-line reason.
    #[test]
    fn bad_descriptions_say_what_is_wrong() {
        let base = Machine::preset("12x32").unwrap();
        let bad = |f: &dyn Fn(&mut Machine)| {
            let mut m = base.clone();
            f(&mut m);
            let e = m.validate().unwrap_err();
            let line = e.to_string();
            assert!(
                line.starts_with("machine 12x32: ") && !line.contains('\n'),
                "{line}"
            );
            e.why
        };
        assert_eq!(
            bad(&|m| m.nodes = 0),
            "0 nodes: a machine needs at least one node"
        );
        assert_eq!(
            bad(&|m| m.cpus_per_node = 0),
            "0 CPUs per node: a node needs at least one CPU"
        );
        assert_eq!(
            bad(&|m| m.ccx_cpus = 0),
            "ccx_cpus is 0: a core complex needs at least one CPU"
        );
        assert_eq!(
            bad(&|m| m.ccx_cpus = 6),
            "core complexes of 6 CPUs do not tile a node of 32 CPUs (ccx_cpus must divide \
             cpus_per_node)"
        );
        assert_eq!(
            bad(&|m| {
                m.nodes = 4;
                m.remote_ns = vec![vec![1.0; 2]; 3];
            }),
            "a 3x2 distance matrix for 4 nodes: it must be 4x4"
        );
        assert_eq!(
            bad(&|m| m.remote_ns.truncate(11)),
            "a 11x12 distance matrix for 12 nodes: it must be 12x12"
        );
        assert_eq!(
            bad(&|m| m.remote_ns[3].push(1.0)),
            "a distance matrix whose row 3 has 13 entries for 12 nodes: it must be 12x12"
        );
        assert_eq!(
            bad(&|m| m.node_ns = -5.0),
            "node_ns is -5: latencies must be finite and not negative"
        );
        assert_eq!(
            bad(&|m| m.wake_ns = f64::NAN),
            "wake_ns is NaN: latencies must be finite and not negative"
        );
        assert_eq!(
            bad(&|m| m.sleep_ns = f64::INFINITY),
            "sleep_ns is inf: latencies must be finite and not negative"
        );
        assert_eq!(
            bad(&|m| m.waker_ns = Some(-2.0)),
            "waker_ns is -2: latencies must be finite and not negative"
        );
        assert_eq!(
            bad(&|m| m.overlap = 0.5),
            "overlap is 0.5: a CPU has at least one transfer under way at once (1 or more)"
        );
        assert_eq!(
            bad(&|m| m.chain = 0.0),
            "chain is 0: a line reached through a pointer costs a positive share of a transfer"
        );
        assert_eq!(
            bad(&|m| m.keep = 1.5),
            "keep is 1.5: a CPU keeps a line asked of it for 0 to 1 of a transfer"
        );
        assert_eq!(
            bad(&|m| m.keep = f64::NAN),
            "keep is NaN: a CPU keeps a line asked of it for 0 to 1 of a transfer"
        );
        assert_eq!(
            bad(&|m| m.remote_ns[2][7] = -1.0),
            "remote_ns[2][7] is -1: latencies must be finite and not negative"
        );
        assert_eq!(
            bad(&|m| m.nodes = MAX_NODES + 1),
            "1025 nodes: at most 1024"
        );
        assert_eq!(
            bad(&|m| m.cpus_per_node = 1000),
            "12 nodes x 1000 CPUs: at most 8192 CPUs in all"
        );
    }

    #[test]
    fn bad_text_says_what_is_wrong() {
        let why = |t: &str| {
            let e = Machine::parse(t).unwrap_err();
            assert_eq!(e.name, t.trim());
            assert!(!e.to_string().contains('\n'), "{e}");
            e.why
        };
        assert_eq!(why("0x4"), "0 nodes: a machine needs at least one node");
        assert_eq!(why("4x0"), "0 CPUs per node: a node needs at least one CPU");
        assert_eq!(
            why("2x5000"),
            "2 nodes x 5000 CPUs: at most 8192 CPUs in all"
        );
        assert_eq!(
            why("99999999999999999999999x2"),
            "99999999999999999999999 nodes: too many"
        );
        assert!(why("host").contains("vmbench topology --measure --out FILE"));
        for t in ["big", "12x", "x32", "12x32x2", "-1x4", ""] {
            assert!(
                why(t).starts_with("unknown machine: expected one of 12x32, 2s64, 1n96"),
                "{t}"
            );
        }
        assert_eq!(" 2x4 ".parse::<Machine>().unwrap().name, "2x4");
    }
}
