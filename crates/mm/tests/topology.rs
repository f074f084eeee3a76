//! Topology: parsing a sysfs tree, the emulated mapping, the text forms,
//! refused input, and per-thread binding.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mm::topology::{self, Topology, MAX_CPUS};
use mm::Errno;

/// A fresh directory under the system temp dir, removed on drop.
struct TempTree(PathBuf);

impl TempTree {
    fn new(name: &str) -> TempTree {
        let dir = std::env::temp_dir().join(format!("vmscale-topo-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempTree(dir)
    }

    /// `node<id>/cpulist` with `list`, or the directory alone for `None`.
    fn node(&self, id: usize, list: Option<&str>) -> &TempTree {
        let d = self.0.join(format!("node{id}"));
        std::fs::create_dir_all(&d).unwrap();
        if let Some(list) = list {
            std::fs::write(d.join("cpulist"), format!("{list}\n")).unwrap();
        }
        self
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempTree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn from_sysfs_reads_nodes_and_skips_what_is_not_one() {
    let t = TempTree::new("ok");
    t.node(0, Some("0-1,4"))
        .node(1, Some("2-3"))
        .node(2, Some("")); // memory only
    t.node(3, None); // no cpulist
    std::fs::create_dir_all(t.path().join("possible")).unwrap();
    std::fs::write(t.path().join("has_cpu"), "0-4\n").unwrap();
    let topo = Topology::from_sysfs(t.path()).unwrap();
    assert_eq!(topo.nr_nodes(), 2);
    assert_eq!(topo.nr_cpus(), 5);
    assert_eq!(topo.cpus_of(0), &[0, 1, 4]);
    assert_eq!(topo.cpus_of(1), &[2, 3]);
    assert!(topo.cpus_of(2).is_empty());
    let nodes: Vec<usize> = (0..5).map(|c| topo.node_of(c)).collect();
    assert_eq!(nodes, [0, 0, 1, 1, 0]);
    // Out of range wraps: cpu % nr_cpus.
    assert_eq!(topo.node_of(5 + 2), 1);
    assert_eq!(topo.real_cpu(3), 3);
    assert!(!topo.is_emulated());
    assert_eq!(topo.to_string(), "host(2 nodes, 5 cpus)");
}

#[test]
fn from_sysfs_numbers_sparse_nodes_densely_and_leaves_holes_on_node_0() {
    let t = TempTree::new("sparse");
    t.node(2, Some("4-5")).node(0, Some("0,1"));
    let topo = Topology::from_sysfs(t.path()).unwrap();
    assert_eq!(topo.nr_nodes(), 2);
    assert_eq!(topo.cpus_of(1), &[4, 5]);
    // CPUs 2 and 3 are offline: listed nowhere, counted on node 0.
    assert_eq!(topo.nr_cpus(), 6);
    assert_eq!((topo.node_of(2), topo.node_of(5)), (0, 1));
    assert_eq!(topo.to_string(), "host(2x2)");
}

#[test]
fn from_sysfs_refuses_bad_trees() {
    let missing = std::env::temp_dir().join(format!("vmscale-topo-{}-none", std::process::id()));
    assert_eq!(Topology::from_sysfs(&missing), Err(Errno::ENODEV));
    let empty = TempTree::new("empty");
    assert_eq!(Topology::from_sysfs(empty.path()), Err(Errno::ENODEV));
    let cpuless = TempTree::new("cpuless");
    cpuless.node(0, Some(""));
    assert_eq!(Topology::from_sysfs(cpuless.path()), Err(Errno::ENODEV));
    for (i, bad) in ["0-a", "3-1", "1,,2", "-1", "0-", &MAX_CPUS.to_string()]
        .iter()
        .enumerate()
    {
        let t = TempTree::new(&format!("bad{i}"));
        t.node(0, Some("0")).node(1, Some(bad));
        assert_eq!(
            Topology::from_sysfs(t.path()),
            Err(Errno::EINVAL),
            "{bad:?}"
        );
    }
    let twice = TempTree::new("twice");
    twice.node(0, Some("0-2")).node(1, Some("2-3"));
    assert_eq!(Topology::from_sysfs(twice.path()), Err(Errno::EINVAL));
}

#[test]
fn detect_matches_sysfs_or_falls_back() {
    let t = Topology::detect();
    match Topology::from_sysfs(Path::new("/sys/devices/system/node")) {
        Ok(s) => assert_eq!(t, s),
        Err(_) => {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get());
            assert_eq!((t.nr_nodes(), t.nr_cpus()), (1, n));
        }
    }
    assert_eq!(*topology::host(), t);
}

#[test]
fn emulated_maps_vcpus_to_nodes_and_real_cpus() {
    let t = Topology::emulated(12, 32).unwrap();
    assert!(t.is_emulated());
    assert_eq!((t.nr_nodes(), t.nr_cpus()), (12, 384));
    assert_eq!(
        (t.node_of(0), t.node_of(31), t.node_of(32), t.node_of(383)),
        (0, 0, 1, 11)
    );
    assert_eq!(t.node_of(384 + 40), 1);
    assert_eq!(t.cpus_of(11), (352..384).collect::<Vec<_>>().as_slice());
    let host = topology::host();
    let real: Vec<usize> = (0..host.nr_nodes())
        .flat_map(|n| host.cpus_of(n).to_vec())
        .collect();
    for v in [0, 1, 2, 100, 383] {
        assert_eq!(t.real_cpu(v), real[v % real.len()], "vcpu {v}");
    }
}

#[test]
fn emulated_refuses_bad_sizes() {
    assert_eq!(Topology::emulated(0, 4), Err(Errno::EINVAL));
    assert_eq!(Topology::emulated(4, 0), Err(Errno::EINVAL));
    assert_eq!(Topology::emulated(2, MAX_CPUS), Err(Errno::EINVAL));
    assert_eq!(Topology::emulated(usize::MAX, 2), Err(Errno::EINVAL));
    assert_eq!(Topology::emulated(2, usize::MAX), Err(Errno::EINVAL));
    assert!(Topology::emulated(1, MAX_CPUS).is_ok());
}

#[test]
fn text_forms() {
    let t: Topology = "12x32".parse().unwrap();
    assert_eq!(t, Topology::emulated(12, 32).unwrap());
    assert_eq!(t.to_string(), "12x32");
    assert_eq!(t.to_string().parse::<Topology>().unwrap(), t);
    let h: Topology = "host".parse().unwrap();
    assert_eq!(h, Topology::detect());
    assert!(h.to_string().starts_with("host("));
    for bad in [
        "", "x", "3x", "x3", "0x4", "4x0", "3y4", "-1x2", "2x3x4", "4x9000",
    ] {
        assert!(bad.parse::<Topology>().is_err(), "{bad:?}");
    }
}

#[test]
fn bind_sets_the_threads_cpu_and_node() {
    let t = Arc::new(Topology::emulated(3, 2).unwrap());
    std::thread::spawn(move || {
        let host = topology::host();
        assert!(topology::current_node() < host.nr_nodes());
        topology::bind(&t, 5, false).unwrap();
        assert_eq!((topology::current_cpu(), topology::current_node()), (5, 2));
        // A refused binding keeps the old one.
        assert_eq!(topology::bind(&t, 6, false), Err(Errno::EINVAL));
        assert_eq!(topology::current_cpu(), 5);
        // Bindings are per thread.
        let other = std::thread::spawn(topology::current_cpu).join().unwrap();
        assert!(other < host.nr_cpus());
        topology::bind(&t, 2, false).unwrap();
        assert_eq!(topology::current_node(), 1);
        topology::unbind();
        assert!(topology::current_cpu() < host.nr_cpus());
        assert_eq!(
            topology::current_node(),
            host.node_of(topology::current_cpu())
        );
    })
    .join()
    .unwrap();
}

/// The CPUs in the calling thread's affinity mask.
fn affinity() -> Vec<usize> {
    // SAFETY: all-zero is a valid empty cpu_set_t.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a live cpu_set_t and the size passed is its own, so
    // the kernel writes only inside it.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    assert_eq!(rc, 0);
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: i < CPU_SETSIZE, inside the set.
        .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
        .collect()
}

#[test]
fn bind_with_pin_sets_affinity() {
    std::thread::spawn(|| {
        let allowed = affinity();
        let cpu = allowed[allowed.len() - 1];
        let host = topology::host();
        topology::bind(&host, cpu, true).unwrap();
        assert_eq!(affinity(), [cpu]);
        assert_eq!(topology::current_cpu(), cpu);
        assert_eq!(topology::current_node(), host.node_of(cpu));
        // The thread now runs only there.
        topology::unbind();
        assert_eq!(topology::current_cpu(), cpu);
    })
    .join()
    .unwrap();
}
