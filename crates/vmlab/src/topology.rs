//! `vmbench topology`: what this machine has, and what an emulated
//! topology maps onto it.
//!
//! A run's figures mean little without the machine behind them, and an
//! emulated `12x32` on a 2-CPU machine runs 192 virtual CPUs on each real
//! one; this command shows both before anyone reads a scaling curve.

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
}
