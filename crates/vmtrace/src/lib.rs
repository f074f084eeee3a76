//! `vmtrace`: an strace for address spaces, checked against a model.
//!
//! [`record`] runs a command under a native `ptrace` tracer with
//! address-space randomisation off and returns a [`Trace`]: each address
//! space's map when it starts (at exec, before the first system call),
//! every `mmap`/`munmap`/`mprotect`/`mremap`/`brk` with its arguments and
//! result, forks, the hidden state the model needs (which VMAs got an
//! anon_vma from a write fault, how far stacks grew), and each address
//! space's final map. Threads and children are followed. The other calls
//! that change VMAs or their flags are recorded too, each as an event with
//! its raw arguments and the kernel's result: `madvise`, `mlock`,
//! `mlock2`, `munlock`, `mlockall`, `munlockall`, `mseal`,
//! `prctl(PR_SET_VMA_ANON_NAME)` (with the name read from the caller's
//! memory), `pkey_alloc`/`pkey_mprotect`/`pkey_free`, and userfaultfd
//! registration (`UFFDIO_REGISTER`/`UNREGISTER`, with the structure read
//! from the caller's memory). The file format (version 2; version 1
//! traces still read) is described in [`format`](mod@format).
//!
//! [`replay`] rebuilds each address space with [`mm::Mm::from_smaps`] (a
//! forked one with [`mm::Mm::fork`]), replays every call in order and
//! reports each result and each final-map line that differs from the
//! kernel's. A call the model does not implement is reported as "not
//! modelled" (in [`Outcome::notes`], counted by name in
//! [`Outcome::not_modelled`]); which recorded calls the model takes is
//! decided in one place, [`format::Event::call`]. Traces are untrusted
//! input: parsing never panics, and a replay stays within [`Limits`].
//!
//! ```
//! let text = std::fs::read_to_string(concat!(
//!     env!("CARGO_MANIFEST_DIR"),
//!     "/tests/fixtures/sh-pipeline.json"
//! ))
//! .unwrap();
//! let trace = vmtrace::Trace::parse(&text).unwrap();
//! let outcome = vmtrace::replay(&trace, mm::IndexKind::Maple, &vmtrace::Limits::default()).unwrap();
//! assert!(outcome.diffs.is_empty(), "{:?}", outcome.diffs);
//! println!("{} calls in {} address spaces", outcome.total_calls(), outcome.spaces);
//! ```
//!
//! Dependencies: `nix` for the ptrace calls it wraps safely, `libc` for
//! the rest (`waitpid` and resuming with a signal, where nix's `Signal`
//! lacks real-time signals, `PTRACE_GET_SYSCALL_INFO`, and system call
//! numbers; one small module holds the crate's only `unsafe`),
//! `serde`/`serde_json` for the format.

#![deny(unsafe_code)]
#![deny(missing_docs)]

pub mod format;
mod ptrace;
mod record;
mod replay;

pub use format::Trace;
pub use record::record;
pub use replay::{replay, LimitExceeded, Limits, Outcome};
