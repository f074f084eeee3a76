//! NUMA topology: which CPUs belong to which node, which CPU (and so which
//! node) the calling thread runs on, and thread pinning.
//!
//! The split i_mmap designs and the NUMA-aware lock need a node per thread.
//! On a real multi-node machine that comes from sysfs ([`Topology::detect`]);
//! on a one-node machine an *emulated* topology ([`Topology::emulated`],
//! `--topology 12x32`) gives every design its nodes anyway: a thread
//! [`bind`]s itself to a virtual CPU, [`current_node`] answers from the
//! binding, and with pinning on the thread also runs on the real CPU that
//! virtual CPU is mapped onto. The binding is per thread, so tests can give
//! each thread the node they want regardless of where the OS schedules it.
//!
//! ```
//! use std::sync::Arc;
//! use mm::topology::{self, Topology};
//!
//! let t: Topology = "4x2".parse().unwrap();
//! assert_eq!((t.nr_nodes(), t.nr_cpus()), (4, 8));
//! assert_eq!(t.node_of(5), 2);
//! let t = Arc::new(t);
//! topology::bind(&t, 7, false).unwrap();
//! assert_eq!((topology::current_cpu(), topology::current_node()), (7, 3));
//! topology::unbind();
//! ```

use std::cell::RefCell;
use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::sync::{Arc, OnceLock};

use crate::Errno;

/// The most CPUs a topology may have: the kernel's largest `NR_CPUS`.
/// Bounds the tables a sysfs tree or an emulation request can make us build.
pub const MAX_CPUS: usize = 8192;

/// The most nodes a topology may have: the kernel's largest `MAX_NUMNODES`.
pub const MAX_NODES: usize = 1024;

/// The kernel's sysfs directory holding one `node<N>/cpulist` per node.
#[cfg_attr(miri, allow(dead_code))] // Miri cannot read it (see `detect`)
const SYSFS_NODES: &str = "/sys/devices/system/node";

/// A set of NUMA nodes and the CPU → node map.
///
/// CPUs are numbered `0..nr_cpus()`, nodes `0..nr_nodes()`. Node indexes
/// are dense: the k-th node that has CPUs, in kernel node-id order (the
/// same numbers as the kernel's on almost every machine; memory-only nodes
/// have no CPUs for a thread to run on and are left out).
///
/// ```
/// use mm::topology::Topology;
/// let t = Topology::emulated(3, 4).unwrap();
/// assert_eq!(t.cpus_of(1), &[4, 5, 6, 7]);
/// assert!(t.is_emulated());
/// assert_eq!(t.to_string(), "3x4");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// `node_of[cpu]`. Invariant: every value `< cpus.len()`, and the
    /// table is non-empty.
    node_of: Vec<usize>,
    /// `cpus[node]`, ascending. Invariant: every node has at least one CPU
    /// and every CPU listed here maps back to that node in `node_of`.
    cpus: Vec<Vec<usize>>,
    /// `real[cpu]`: the real CPU a (virtual) CPU runs on; the identity for
    /// a detected topology.
    real: Vec<usize>,
    emulated: bool,
}

impl Topology {
    /// The topology of this machine, from
    /// `/sys/devices/system/node/node*/cpulist`; where that cannot be read
    /// (no NUMA support, a container without sysfs), one node holding
    /// [`std::thread::available_parallelism`] CPUs. Never fails.
    ///
    /// ```
    /// let t = mm::topology::Topology::detect();
    /// assert!(t.nr_nodes() >= 1 && t.nr_cpus() >= 1);
    /// assert!(!t.is_emulated());
    /// ```
    pub fn detect() -> Topology {
        // Miri isolates the file system; a read attempt would abort it.
        #[cfg(not(miri))]
        if let Ok(t) = Topology::from_sysfs(Path::new(SYSFS_NODES)) {
            return t;
        }
        let n = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .min(MAX_CPUS);
        Topology::flat(n)
    }

    /// One node of `n` CPUs (`n >= 1`), the identity real-CPU map.
    fn flat(n: usize) -> Topology {
        let n = n.max(1);
        Topology {
            node_of: vec![0; n],
            cpus: vec![(0..n).collect()],
            real: (0..n).collect(),
            emulated: false,
        }
    }

    /// Parse a sysfs-like tree: `root` holds directories `node<N>`, each
    /// with a `cpulist` file in the kernel's list format (`0-3,8,10-11`).
    /// A directory without `cpulist` and a node with an empty list
    /// (memory only) are skipped. CPU ids missing from every list (offline
    /// CPUs) count as node 0's, so that [`node_of`](Self::node_of) stays
    /// total, but are not in any [`cpus_of`](Self::cpus_of).
    ///
    /// Errors: `ENODEV` if `root` cannot be listed or no node has a CPU;
    /// `EACCES` if a `cpulist` cannot be read for lack of permission;
    /// `EINVAL` for a malformed list, a CPU in two nodes, or a CPU id or
    /// node count past `MAX_CPUS` / `MAX_NODES`.
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("topo-doc-{}", std::process::id()));
    /// for (n, list) in [(0, "0-1"), (1, "2-3")] {
    ///     std::fs::create_dir_all(dir.join(format!("node{n}"))).unwrap();
    ///     std::fs::write(dir.join(format!("node{n}/cpulist")), list).unwrap();
    /// }
    /// let t = mm::topology::Topology::from_sysfs(&dir).unwrap();
    /// assert_eq!((t.nr_nodes(), t.node_of(3)), (2, 1));
    /// std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    pub fn from_sysfs(root: &Path) -> Result<Topology, Errno> {
        let entries = std::fs::read_dir(root).map_err(|_| Errno::ENODEV)?;
        let mut nodes: Vec<(usize, Vec<usize>)> = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|_| Errno::ENODEV)?;
            let name = entry.file_name();
            let Some(id) = name
                .to_str()
                .and_then(|n| n.strip_prefix("node"))
                .and_then(|n| n.parse::<usize>().ok())
            else {
                continue;
            };
            let text = match std::fs::read_to_string(entry.path().join("cpulist")) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                    return Err(Errno::EACCES)
                }
                Err(_) => continue,
            };
            let cpus = parse_cpulist(&text)?;
            if !cpus.is_empty() {
                if nodes.len() == MAX_NODES {
                    return Err(Errno::EINVAL);
                }
                nodes.push((id, cpus));
            }
        }
        if nodes.is_empty() {
            return Err(Errno::ENODEV);
        }
        nodes.sort_unstable_by_key(|(id, _)| *id);
        // parse_cpulist caps ids below MAX_CPUS, so this table is bounded.
        let nr_cpus = nodes
            .iter()
            .filter_map(|(_, c)| c.last())
            .max()
            .map_or(1, |&m| m + 1);
        let mut owner: Vec<Option<usize>> = vec![None; nr_cpus];
        for (node, (_, cpus)) in nodes.iter().enumerate() {
            for &c in cpus {
                if owner[c].replace(node).is_some() {
                    return Err(Errno::EINVAL);
                }
            }
        }
        Ok(Topology {
            node_of: owner.into_iter().map(|o| o.unwrap_or(0)).collect(),
            cpus: nodes.into_iter().map(|(_, c)| c).collect(),
            real: (0..nr_cpus).collect(),
            emulated: false,
        })
    }

    /// `nodes` nodes of `cpus_per_node` virtual CPUs each: vCPU `v` is on
    /// node `v / cpus_per_node` and runs on the `v % n`-th of the `n` real
    /// CPUs of this machine (so `12x32` on a 2-CPU machine alternates between
    /// its two CPUs).
    ///
    /// Errors: `EINVAL` if either count is 0, `nodes > MAX_NODES`, or the
    /// total passes `MAX_CPUS` (8192).
    ///
    /// ```
    /// use mm::{topology::Topology, Errno};
    /// let t = Topology::emulated(12, 32).unwrap();
    /// assert_eq!((t.nr_cpus(), t.node_of(100)), (384, 3));
    /// assert_eq!(Topology::emulated(0, 4), Err(Errno::EINVAL));
    /// ```
    pub fn emulated(nodes: usize, cpus_per_node: usize) -> Result<Topology, Errno> {
        if nodes == 0 || cpus_per_node == 0 || nodes > MAX_NODES {
            return Err(Errno::EINVAL);
        }
        let total = nodes
            .checked_mul(cpus_per_node)
            .filter(|&t| t <= MAX_CPUS)
            .ok_or(Errno::EINVAL)?;
        let host = host_ref();
        let real_cpus: Vec<usize> = host.cpus.iter().flatten().copied().collect();
        let real = if real_cpus.is_empty() {
            vec![0; total]
        } else {
            (0..total).map(|v| real_cpus[v % real_cpus.len()]).collect()
        };
        Ok(Topology {
            node_of: (0..total).map(|v| v / cpus_per_node).collect(),
            cpus: (0..nodes)
                .map(|n| (n * cpus_per_node..(n + 1) * cpus_per_node).collect())
                .collect(),
            real,
            emulated: true,
        })
    }

    /// How many nodes (at least 1).
    ///
    /// ```
    /// assert_eq!(mm::topology::Topology::emulated(2, 3).unwrap().nr_nodes(), 2);
    /// ```
    pub fn nr_nodes(&self) -> usize {
        self.cpus.len()
    }

    /// How many CPUs (at least 1): one past the highest CPU id.
    ///
    /// ```
    /// assert_eq!(mm::topology::Topology::emulated(2, 3).unwrap().nr_cpus(), 6);
    /// ```
    pub fn nr_cpus(&self) -> usize {
        self.node_of.len()
    }

    /// The node of `cpu`. A CPU past the end wraps: `cpu % nr_cpus()`, so
    /// a thread running on a CPU the topology does not know still gets a
    /// valid node.
    ///
    /// ```
    /// let t = mm::topology::Topology::emulated(2, 3).unwrap();
    /// assert_eq!((t.node_of(4), t.node_of(6 + 4)), (1, 1));
    /// ```
    pub fn node_of(&self, cpu: usize) -> usize {
        self.node_of[cpu % self.node_of.len()]
    }

    /// The CPUs of `node`, ascending; empty for a node past the end.
    ///
    /// ```
    /// let t = mm::topology::Topology::emulated(2, 2).unwrap();
    /// assert_eq!(t.cpus_of(1), &[2, 3]);
    /// assert!(t.cpus_of(2).is_empty());
    /// ```
    pub fn cpus_of(&self, node: usize) -> &[usize] {
        self.cpus.get(node).map_or(&[], |c| c.as_slice())
    }

    /// The real CPU that `cpu` runs on (itself unless emulated); wraps like
    /// [`node_of`](Self::node_of).
    ///
    /// ```
    /// let t = mm::topology::Topology::detect();
    /// assert_eq!(t.real_cpu(0), 0);
    /// ```
    pub fn real_cpu(&self, cpu: usize) -> usize {
        self.real[cpu % self.real.len()]
    }

    /// Whether this is an emulated topology rather than the machine's.
    ///
    /// ```
    /// assert!(!mm::topology::host().is_emulated());
    /// ```
    pub fn is_emulated(&self) -> bool {
        self.emulated
    }
}

/// Parse a kernel CPU list (`"0-3,8,10-11"`, possibly empty), ascending
/// and deduplicated; every id below [`MAX_CPUS`].
fn parse_cpulist(text: &str) -> Result<Vec<usize>, Errno> {
    let text = text.trim();
    let mut out = Vec::new();
    if text.is_empty() {
        return Ok(out);
    }
    let id = |s: &str| -> Result<usize, Errno> {
        s.trim()
            .parse::<usize>()
            .ok()
            .filter(|&c| c < MAX_CPUS)
            .ok_or(Errno::EINVAL)
    };
    for part in text.split(',') {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (id(a)?, id(b)?),
            None => (id(part)?, id(part)?),
        };
        if lo > hi {
            return Err(Errno::EINVAL);
        }
        out.extend(lo..=hi);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

impl FromStr for Topology {
    type Err = String;

    /// `"host"` is [`Topology::detect`]; `"NxM"` is
    /// [`Topology::emulated`]`(N, M)`.
    ///
    /// ```
    /// use mm::topology::Topology;
    /// assert_eq!("2x8".parse::<Topology>().unwrap(), Topology::emulated(2, 8).unwrap());
    /// assert!("2x0".parse::<Topology>().is_err());
    /// assert!("many".parse::<Topology>().is_err());
    /// ```
    fn from_str(s: &str) -> Result<Topology, String> {
        let s = s.trim();
        if s == "host" {
            return Ok(Topology::detect());
        }
        let bad = || format!("topology {s:?}: expected \"host\" or NODESxCPUS, e.g. 12x32");
        let (n, m) = s.split_once(['x', 'X']).ok_or_else(bad)?;
        let n: usize = n.parse().map_err(|_| bad())?;
        let m: usize = m.parse().map_err(|_| bad())?;
        Topology::emulated(n, m).map_err(|e| {
            format!("topology {s:?}: {e}: counts must be at least 1, at most {MAX_NODES} nodes and {MAX_CPUS} CPUs")
        })
    }
}

impl fmt::Display for Topology {
    /// `NxM` for an emulated topology; `host(NxM)` for a detected one with
    /// equal nodes, `host(N nodes, C cpus)` otherwise.
    ///
    /// ```
    /// let t = mm::topology::Topology::emulated(12, 32).unwrap();
    /// assert_eq!(t.to_string(), "12x32");
    /// assert!(mm::topology::host().to_string().starts_with("host("));
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let per = self.cpus[0].len();
        let uniform = self.cpus.iter().all(|c| c.len() == per);
        match (self.emulated, uniform) {
            (true, _) => write!(f, "{}x{}", self.nr_nodes(), per),
            (false, true) => write!(f, "host({}x{})", self.nr_nodes(), per),
            (false, false) => write!(
                f,
                "host({} nodes, {} cpus)",
                self.nr_nodes(),
                self.cpus.iter().map(Vec::len).sum::<usize>()
            ),
        }
    }
}

/// This machine's topology, detected once and shared.
///
/// ```
/// let a = mm::topology::host();
/// assert!(std::sync::Arc::ptr_eq(&a, &mm::topology::host()));
/// ```
pub fn host() -> Arc<Topology> {
    Arc::clone(host_ref())
}

/// [`host`] without the reference count traffic: the lock slow paths ask
/// for the node of unbound threads, and every thread bumping one shared
/// count would be the very contention they avoid.
fn host_ref() -> &'static Arc<Topology> {
    static HOST: OnceLock<Arc<Topology>> = OnceLock::new();
    HOST.get_or_init(|| Arc::new(Topology::detect()))
}

thread_local! {
    static BOUND: RefCell<Option<(Arc<Topology>, usize)>> = const { RefCell::new(None) };
}

/// Make the calling thread run as virtual CPU `vcpu` of `topology`: from
/// now on [`current_cpu`] is `vcpu` and [`current_node`] its node. With
/// `pin`, the thread is also restricted to `topology.real_cpu(vcpu)`.
///
/// Errors (the binding is left as it was): `EINVAL` if `vcpu` is not a
/// CPU of `topology` or the real CPU cannot be named in an affinity mask;
/// the OS's errno if pinning fails (`EINVAL` for a CPU outside the
/// thread's allowed set); `EOPNOTSUPP` where pinning is unavailable.
///
/// ```
/// use std::sync::Arc;
/// use mm::topology::{self, Topology};
/// let t = Arc::new(Topology::emulated(2, 2).unwrap());
/// assert_eq!(topology::bind(&t, 4, false), Err(mm::Errno::EINVAL));
/// topology::bind(&t, 2, false).unwrap();
/// assert_eq!(topology::current_node(), 1);
/// topology::unbind();
/// ```
#[cfg(feature = "lab")]
pub fn bind(topology: &Arc<Topology>, vcpu: usize, pin: bool) -> Result<(), Errno> {
    if vcpu >= topology.nr_cpus() {
        return Err(Errno::EINVAL);
    }
    // Past its thread-locals' destruction a thread can hold no binding.
    BOUND.try_with(|_| ()).map_err(|_| Errno::EINVAL)?;
    if pin {
        sys::pin(topology.real_cpu(vcpu))?;
    }
    let _ = BOUND.try_with(|b| *b.borrow_mut() = Some((Arc::clone(topology), vcpu)));
    Ok(())
}

/// Forget the calling thread's binding (a pinned thread stays pinned).
///
/// ```
/// mm::topology::unbind();
/// assert!(mm::topology::current_node() < mm::topology::host().nr_nodes());
/// ```
#[cfg(feature = "lab")]
pub fn unbind() {
    let _ = BOUND.try_with(|b| *b.borrow_mut() = None);
}

/// The calling thread's CPU: its bound virtual CPU, else the real CPU it
/// is running on now (0 if the OS cannot say).
///
/// ```
/// assert!(mm::topology::current_cpu() < mm::topology::MAX_CPUS);
/// ```
pub fn current_cpu() -> usize {
    // try_with: a lock taken in a thread-local destructor may ask after
    // the binding is gone; it then counts as unbound.
    BOUND
        .try_with(|b| b.borrow().as_ref().map(|(_, v)| *v))
        .ok()
        .flatten()
        .unwrap_or_else(sys::running_cpu)
}

/// The calling thread's node: its bound CPU's node in the bound topology,
/// else the node of the CPU it runs on in [`host`].
///
/// ```
/// assert!(mm::topology::current_node() < mm::topology::host().nr_nodes());
/// ```
pub fn current_node() -> usize {
    BOUND
        .try_with(|b| b.borrow().as_ref().map(|(t, v)| t.node_of(*v)))
        .ok()
        .flatten()
        .unwrap_or_else(|| host_ref().node_of(sys::running_cpu()))
}

/// The two system calls topology needs. The crate's only `unsafe` outside
/// `lock::cell`: libc's affinity and CPU queries.
mod sys {
    #[cfg(feature = "lab")]
    use crate::Errno;

    /// The CPU the calling thread is running on, 0 if unknown.
    #[cfg(not(miri))]
    pub(super) fn running_cpu() -> usize {
        // SAFETY: sched_getcpu takes no arguments and touches no memory of
        // ours; it returns -1 on failure, handled below.
        let cpu = unsafe { libc::sched_getcpu() };
        usize::try_from(cpu).unwrap_or(0)
    }

    #[cfg(miri)]
    pub(super) fn running_cpu() -> usize {
        0
    }

    /// Restrict the calling thread to real CPU `cpu`: the lab's pinning,
    /// which the model itself never does.
    #[cfg(all(feature = "lab", not(miri)))]
    pub(super) fn pin(cpu: usize) -> Result<(), Errno> {
        // CPU_SET indexes a fixed-size mask; a larger id cannot be named.
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(Errno::EINVAL);
        }
        // SAFETY: cpu_set_t is a plain bit array for which all-zero is the
        // valid empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `cpu < CPU_SETSIZE` was checked above, so CPU_SET stays
        // inside `set`.
        unsafe { libc::CPU_SET(cpu, &mut set) };
        // SAFETY: `set` is a live, initialised cpu_set_t and the size
        // passed is its own; pid 0 means the calling thread.
        let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
        if rc == 0 {
            Ok(())
        } else {
            let code = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            Err(Errno::from_code(code).unwrap_or(Errno::EINVAL))
        }
    }

    #[cfg(all(feature = "lab", miri))]
    pub(super) fn pin(_cpu: usize) -> Result<(), Errno> {
        Err(Errno::EOPNOTSUPP)
    }
}
