//! Carries a workload measured on this machine to machines with hundreds
//! of CPUs and many NUMA nodes.
//!
//! Three parts, each in its own module:
//!
//! - [`profile`]: what one operation of a workload does, recorded at one
//!   worker — time outside locks, every lock it takes (which class, whether
//!   the instance is private to the worker, shared by all, or one per
//!   i_mmap group, read or write, how long it is held) and the shared cache
//!   lines it reads and writes inside each critical section;
//! - [`machine`]: a machine described by its NUMA nodes, core complexes and
//!   the cost of moving a cache line between two CPUs, and of a futex
//!   sleep and wake-up;
//! - [`sim`]: a deterministic discrete-event simulation of N CPUs running a
//!   profile on a machine, with every lock simulated by its algorithm and
//!   every shared line owned by the CPU that last wrote it.

pub mod machine;
pub mod profile;
pub mod sim;

pub use machine::{Machine, MachineError};
pub use profile::{LockClass, LockKind, LockRef, Profile, Scope, Step};
pub use sim::{ops_per_cpu_for, simulate, Breakdown, ClassTime, Config, Projection, SimError};
