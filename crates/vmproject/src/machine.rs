//! A machine as the simulation sees it: NUMA nodes of CPUs grouped in core
//! complexes (CPUs sharing a last-level cache), the time a cache line
//! takes to move between two CPUs, and the cost of a futex sleep and
//! wake-up.

use serde::{Deserialize, Serialize};

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
    /// Where the figures come from (a citation, or `measured on ...`).
    pub source: String,
}

impl Machine {
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
