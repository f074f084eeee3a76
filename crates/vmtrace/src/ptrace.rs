//! The few `ptrace`/`waitpid` calls the recorder needs, as safe functions.
//!
//! `nix` makes most of them safe calls (options, event messages, siginfo,
//! memory reads, kill, and the child's `PTRACE_TRACEME`). Four stay raw
//! `libc` calls, for reasons nix cannot cover: `waitpid` and
//! `PTRACE_SYSCALL`'s signal, because nix's `Signal` has no real-time
//! signals (a tracee stopped by `SIGRTMIN + n`, which glibc and managed
//! runtimes send, would make nix's `waitpid` fail and could not be passed
//! on); `personality`, whose nix wrapper drops the flags it does not name;
//! and `PTRACE_GET_SYSCALL_INFO`, which nix does not wrap.
//!
//! This is the only module of `vmtrace` allowed to use `unsafe`:
//! every such call is a plain system call whose pointer arguments point
//! at local, correctly sized buffers.

#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

use nix::sys::ptrace::{self as nix_ptrace, Options};
use nix::sys::signal::{self, Signal};
use nix::unistd::Pid as NixPid;

/// A task id (`pid_t`).
pub type Pid = libc::pid_t;

/// `PTRACE_EVENT_*` numbers, as `status >> 16` reports them.
pub mod event {
    /// `fork`.
    pub const FORK: i32 = libc::PTRACE_EVENT_FORK;
    /// `vfork`.
    pub const VFORK: i32 = libc::PTRACE_EVENT_VFORK;
    /// `clone` (anything that is neither fork nor vfork).
    pub const CLONE: i32 = libc::PTRACE_EVENT_CLONE;
    /// A successful `execve`.
    pub const EXEC: i32 = libc::PTRACE_EVENT_EXEC;
    /// The task is about to exit; its memory is still there.
    pub const EXIT: i32 = libc::PTRACE_EVENT_EXIT;
}

/// The options the recorder traces with: system-call stops told apart
/// from signals, every new task and exec reported, and every tracee
/// killed if the recorder dies.
pub const OPTIONS: Options = Options::PTRACE_O_TRACESYSGOOD
    .union(Options::PTRACE_O_TRACEFORK)
    .union(Options::PTRACE_O_TRACEVFORK)
    .union(Options::PTRACE_O_TRACECLONE)
    .union(Options::PTRACE_O_TRACEEXEC)
    .union(Options::PTRACE_O_TRACEEXIT)
    .union(Options::PTRACE_O_EXITKILL);

/// What `waitpid` reported about a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// It exited with this code.
    Exited(i32),
    /// A signal killed it.
    Signaled(i32),
    /// A system-call stop (entry or exit).
    Syscall,
    /// A `PTRACE_EVENT_*` stop.
    Event(i32),
    /// Stopped by a signal (a signal-delivery stop or a group stop).
    Signal(i32),
}

/// Start `argv` as a traced child with address-space randomisation off.
/// The child is stopped at the `SIGTRAP` its `execve` raises when this
/// returns `Ok`; a command that cannot be executed is an error.
pub fn spawn_traced(argv: &[String]) -> io::Result<Pid> {
    let (prog, args) = argv
        .split_first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no command given"))?;
    let mut cmd = Command::new(prog);
    cmd.args(args);
    // SAFETY: the closure runs in the forked child before exec and only
    // makes three async-signal-safe system calls (`personality` twice,
    // `ptrace`) with no pointer arguments; it allocates nothing and takes
    // no locks. `personality` stays a raw call: nix's keeps only the flags
    // it names, and would drop an execution domain (`setarch i386`).
    unsafe {
        cmd.pre_exec(|| {
            let current = libc::personality(0xffff_ffff);
            if current == -1
                || libc::personality((current | libc::ADDR_NO_RANDOMIZE) as libc::c_ulong) == -1
            {
                return Err(io::Error::last_os_error());
            }
            nix_ptrace::traceme()?;
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    let pid = child.id() as Pid;
    // The std handle is dropped without waiting: the recorder reaps the
    // child itself with `waitpid`.
    drop(child);
    Ok(pid)
}

/// Wait for any traced task (`waitpid(-1, __WALL)`), retrying on `EINTR`.
pub fn wait_any() -> io::Result<(Pid, Status)> {
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: `status` is a valid, writable `int` for the duration of
        // the call.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::__WALL) };
        if pid == -1 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        let st = if libc::WIFEXITED(status) {
            Status::Exited(libc::WEXITSTATUS(status))
        } else if libc::WIFSIGNALED(status) {
            Status::Signaled(libc::WTERMSIG(status))
        } else {
            let sig = libc::WSTOPSIG(status);
            let ev = (status >> 16) & 0xff;
            if sig == libc::SIGTRAP | 0x80 {
                Status::Syscall
            } else if sig == libc::SIGTRAP && ev != 0 {
                Status::Event(ev)
            } else {
                Status::Signal(sig)
            }
        };
        return Ok((pid, st));
    }
}

fn check(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// `PTRACE_SETOPTIONS`.
pub fn set_options(pid: Pid, options: Options) -> io::Result<()> {
    Ok(nix_ptrace::setoptions(NixPid::from_raw(pid), options)?)
}

/// `PTRACE_SYSCALL`: resume until the next system-call stop, delivering
/// `sig` (0 for none).
pub fn resume(pid: Pid, sig: i32) -> io::Result<()> {
    // SAFETY: PTRACE_SYSCALL takes the signal by value; no pointers.
    check(unsafe { libc::ptrace(libc::PTRACE_SYSCALL, pid, 0usize, sig as usize) })?;
    Ok(())
}

/// `PTRACE_GETEVENTMSG`: the new task's id at a fork/clone event, the
/// former id at an exec event.
pub fn event_msg(pid: Pid) -> io::Result<u64> {
    // The kernel's message is an `unsigned long`, which nix returns as a
    // `c_long` of the same bits.
    Ok(nix_ptrace::getevent(NixPid::from_raw(pid))? as u64)
}

/// Whether a signal stop is a signal-delivery stop (it has siginfo) rather
/// than a group stop.
pub fn has_siginfo(pid: Pid) -> bool {
    nix_ptrace::getsiginfo(NixPid::from_raw(pid)).is_ok()
}

/// `PTRACE_PEEKDATA`: one word of the task's memory.
pub fn peek(pid: Pid, addr: u64) -> io::Result<u64> {
    // nix tells a word of all ones from a failure (errno), which the raw
    // call's -1 return cannot.
    let word = nix_ptrace::read(
        NixPid::from_raw(pid),
        addr as usize as nix_ptrace::AddressType,
    )?;
    Ok(word as u64)
}

/// Kill a task (used to clean up after a tracer error).
pub fn kill(pid: Pid) {
    // The task may already be gone; there is nothing more to clean up then.
    let _ = signal::kill(NixPid::from_raw(pid), Signal::SIGKILL);
}

/// `AUDIT_ARCH_X86_64`: a 64-bit system call.
pub const ARCH_X86_64: u32 = 0xc000_003e;

/// What `PTRACE_GET_SYSCALL_INFO` reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyscallInfo {
    /// Stopped at a system call's entry.
    Entry {
        /// The calling convention (`AUDIT_ARCH_*`): the numbers below are
        /// x86-64 ones only when this is [`ARCH_X86_64`].
        arch: u32,
        /// System call number.
        nr: u64,
        /// Its six arguments.
        args: [u64; 6],
    },
    /// Stopped at a system call's exit.
    Exit {
        /// The raw return value (`-errno` on failure).
        rval: i64,
    },
    /// Some other stop.
    Other,
}

/// `struct ptrace_syscall_info`, laid out as the kernel writes it.
#[repr(C)]
#[derive(Default)]
struct RawSyscallInfo {
    op: u8,
    reserved: u8,
    flags: u16,
    arch: u32,
    instruction_pointer: u64,
    stack_pointer: u64,
    data: [u64; 8],
}

/// `PTRACE_GET_SYSCALL_INFO` (Linux 5.3 and later).
pub fn syscall_info(pid: Pid) -> io::Result<SyscallInfo> {
    let mut raw = RawSyscallInfo::default();
    let size = std::mem::size_of::<RawSyscallInfo>();
    // SAFETY: the kernel writes at most `size` bytes (the `addr` argument)
    // into `raw`, which is exactly that large and lives across the call.
    check(unsafe {
        libc::ptrace(
            libc::PTRACE_GET_SYSCALL_INFO,
            pid,
            size,
            &mut raw as *mut RawSyscallInfo,
        )
    })?;
    Ok(match raw.op {
        libc::PTRACE_SYSCALL_INFO_ENTRY => {
            let d = raw.data;
            SyscallInfo::Entry {
                arch: raw.arch,
                nr: d[0],
                args: [d[1], d[2], d[3], d[4], d[5], d[6]],
            }
        }
        libc::PTRACE_SYSCALL_INFO_EXIT => SyscallInfo::Exit {
            rval: raw.data[0] as i64,
        },
        _ => SyscallInfo::Other,
    })
}

/// The recorder's own `RLIMIT_MEMLOCK` soft limit, which the command it
/// starts inherits (`None` if the call fails).
pub fn memlock_rlimit() -> Option<u64> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `rl` is a valid, writable rlimit for the call to fill.
    (unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut rl) } == 0).then_some(rl.rlim_cur)
}

/// Whether the kernel names anonymous VMAs (`CONFIG_ANON_VMA_NAME`): a
/// zero-length `prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME)` changes nothing
/// and fails only on a kernel without names.
pub fn kernel_names_anon_vmas() -> bool {
    const PR_SET_VMA: libc::c_int = 0x5356_4d41;
    // SAFETY: no pointer is passed: address, length and name are all 0.
    unsafe { libc::prctl(PR_SET_VMA, 0, 0, 0, 0) == 0 }
}
