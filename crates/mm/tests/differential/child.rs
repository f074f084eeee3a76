//! The child side: a process that runs raw memory-management system calls
//! on behalf of the parent and reports their raw results.
//!
//! Once it has told the parent it is ready, the child must not change its
//! own address space: no allocation, no mapping, no stack growth. So all
//! set-up (environment, opening files, touching stack) happens first, and
//! the command loop uses only `libc::read`, `libc::write`, `libc::syscall`
//! and stack buffers.

use std::ffi::CString;

use mm::Call;

/// Words per command record: the operation and six arguments.
pub const CMD_WORDS: usize = 7;
/// Words in the ready record.
pub const READY_WORDS: usize = 16;
/// First word of the ready record.
pub const READY_MAGIC: u64 = 0x7673_6361_6c65_6466;
/// Most files the child opens.
pub const MAX_FILES: usize = 8;
/// The descriptor of the first file; the others follow it.
pub const FILE_FD0: i32 = 100;

/// Operation codes of the command records.
pub const OP_MMAP: u64 = 1;
/// `munmap(a0, a1)`.
pub const OP_MUNMAP: u64 = 2;
/// `mprotect(a0, a1, a2)`.
pub const OP_MPROTECT: u64 = 3;
/// `mremap(a0, a1, a2, a3, a4)`.
pub const OP_MREMAP: u64 = 4;
/// `brk(a0)`.
pub const OP_BRK: u64 = 5;
/// A write fault at `a0`: `read(/dev/zero, a0, 1)`.
pub const OP_FAULT: u64 = 6;

/// `mseal(a0, a1, a2)`.
pub const OP_MSEAL: u64 = 40;
/// `prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, a0, a1, ANON_NAMES[a2])`
/// (`a2 == NULL_NAME`: NULL).
pub const OP_SET_VMA_NAME: u64 = 41;
/// `pkey_alloc(a0, a1)`.
pub const OP_PKEY_ALLOC: u64 = 42;
/// `pkey_mprotect(a0, a1, a2, a3)`.
pub const OP_PKEY_MPROTECT: u64 = 43;
/// `pkey_free(a0)`.
pub const OP_PKEY_FREE: u64 = 44;
/// `UFFDIO_REGISTER` of `[a0, a0 + a1)` with mode `a2` on `UFFD_FD`.
pub const OP_UFFD_REGISTER: u64 = 45;
/// `UFFDIO_UNREGISTER` of `[a0, a0 + a1)` on `UFFD_FD`.
pub const OP_UFFD_UNREGISTER: u64 = 46;
/// The descriptor the child's userfaultfd is moved to.
pub const UFFD_FD: i32 = 120;
/// The names `OP_SET_VMA_NAME` can pass, NUL-terminated, by index: valid
/// ones, an empty one, the longest valid one (79 bytes), one too long,
/// and ones with refused characters.
pub const ANON_NAMES: [&[u8]; 8] = [
    b"a\0",
    b"jit code\0",
    b"\0",
    b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\0",
    b"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\0",
    b"x$y\0",
    b"[heap]\0",
    b"tab\there\0",
];
/// The index word of a NULL name.
pub const NULL_NAME: u64 = u64::MAX;

/// The record of the sealing, naming, protection-key and userfaultfd
/// calls; a name must be one of `ANON_NAMES`.
fn seal_record(call: &Call) -> [u64; CMD_WORDS] {
    match call {
        Call::Mseal(c) => [OP_MSEAL, c.addr, c.len, c.flags, 0, 0, 0],
        Call::SetVmaAnonName(c) => {
            let index = c.name.map_or(NULL_NAME, |n| {
                let i = ANON_NAMES
                    .iter()
                    .position(|t| &t[..t.len() - 1] == n.as_bytes())
                    .expect("generated names come from ANON_NAMES");
                i as u64
            });
            [OP_SET_VMA_NAME, c.addr, c.len, index, 0, 0, 0]
        }
        Call::PkeyAlloc(c) => [OP_PKEY_ALLOC, c.flags, c.access_rights, 0, 0, 0, 0],
        Call::PkeyMprotect(c) => {
            let pkey = i64::from(c.pkey) as u64;
            [OP_PKEY_MPROTECT, c.addr, c.len, c.prot, pkey, 0, 0]
        }
        Call::PkeyFree(c) => [OP_PKEY_FREE, i64::from(c.pkey) as u64, 0, 0, 0, 0, 0],
        Call::UffdRegister(c) => [OP_UFFD_REGISTER, c.addr, c.len, c.mode, 0, 0, 0],
        Call::UffdUnregister(c) => [OP_UFFD_UNREGISTER, c.addr, c.len, 0, 0, 0, 0],
        _ => [0; CMD_WORDS],
    }
}

/// Run a sealing, naming, protection-key or userfaultfd command.
fn run_seal(cmd: &[u64; CMD_WORDS]) -> i64 {
    let [op, a0, a1, a2, a3, _, _] = *cmd;
    // SAFETY: (all arms) as for `run`: raw calls on ranges the parent
    // chose; the structs the ioctls read and write live on the stack, the
    // names in static memory.
    unsafe {
        match op {
            OP_MSEAL => raw(libc::syscall(libc::SYS_mseal, a0, a1, a2)),
            OP_SET_VMA_NAME => {
                let name = match ANON_NAMES.get(a2 as usize) {
                    Some(n) => n.as_ptr(),
                    None => std::ptr::null(),
                };
                let (opt, sub) = (0x5356_4d41u64, 0u64); // PR_SET_VMA, _ANON_NAME
                raw(libc::syscall(libc::SYS_prctl, opt, sub, a0, a1, name))
            }
            OP_PKEY_ALLOC => raw(libc::syscall(libc::SYS_pkey_alloc, a0, a1)),
            OP_PKEY_MPROTECT => raw(libc::syscall(libc::SYS_pkey_mprotect, a0, a1, a2, a3)),
            OP_PKEY_FREE => raw(libc::syscall(libc::SYS_pkey_free, a0)),
            OP_UFFD_REGISTER => {
                // struct uffdio_register: range, mode, ioctls (out).
                let mut reg = [a0, a1, a2, 0u64];
                raw(libc::ioctl(UFFD_FD, 0xc020_aa00, reg.as_mut_ptr()) as i64)
            }
            OP_UFFD_UNREGISTER => {
                let mut range = [a0, a1];
                raw(libc::ioctl(UFFD_FD, 0x8010_aa01, range.as_mut_ptr()) as i64)
            }
            _ => -i64::from(libc::ENOSYS),
        }
    }
}

/// Open the child's userfaultfd as `UFFD_FD`: user-mode faults only (so
/// it needs no privilege and a system call touching a registered page
/// gets `EFAULT` instead of waiting), `UFFD_API` with `SIGBUS`. A failure
/// leaves `UFFD_FD` closed: registrations then fail with `EBADF`.
fn open_uffd() {
    // SAFETY: plain descriptor calls; the api struct lives on the stack.
    unsafe {
        let fd = libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC | 1) as i32;
        if fd < 0 {
            return;
        }
        // UFFD_API (0xaa), UFFD_FEATURE_SIGBUS (0x80), ioctls (out).
        let mut api = [0xaau64, 0x80, 0];
        libc::ioctl(fd, 0xc018_aa3f, api.as_mut_ptr());
        if fd != UFFD_FD {
            libc::dup3(fd, UFFD_FD, libc::O_CLOEXEC);
            libc::close(fd);
        }
    }
}

/// The command record that runs `call`.
pub fn record(call: &Call) -> [u64; CMD_WORDS] {
    match call {
        Call::Mmap(c) => {
            let fd = i64::from(c.fd) as u64;
            [OP_MMAP, c.addr, c.len, c.prot, c.flags, fd, c.off]
        }
        Call::Munmap(c) => [OP_MUNMAP, c.addr, c.len, 0, 0, 0, 0],
        Call::Mprotect(c) => [OP_MPROTECT, c.addr, c.len, c.prot, 0, 0, 0],
        Call::Mremap(c) => [
            OP_MREMAP, c.addr, c.old_len, c.new_len, c.flags, c.new_addr, 0,
        ],
        Call::Brk(c) => [OP_BRK, c.addr, 0, 0, 0, 0, 0],
        Call::WriteFault(c) => [OP_FAULT, c.addr, 0, 0, 0, 0, 0],
        Call::Madvise(_)
        | Call::Mlock(_)
        | Call::Mlock2(_)
        | Call::Munlock(_)
        | Call::Mlockall(_)
        | Call::Munlockall(_) => record_madvise_mlock(call),
        Call::Mseal(_)
        | Call::SetVmaAnonName(_)
        | Call::PkeyAlloc(_)
        | Call::PkeyMprotect(_)
        | Call::PkeyFree(_)
        | Call::UffdRegister(_)
        | Call::UffdUnregister(_) => seal_record(call),
    }
}

// --- madvise / mlock (issue 14) ---

/// `madvise(a0, a1, a2)`.
pub const OP_MADVISE: u64 = 20;
/// `mlock(a0, a1)`.
pub const OP_MLOCK: u64 = 21;
/// `mlock2(a0, a1, a2)`.
pub const OP_MLOCK2: u64 = 22;
/// `munlock(a0, a1)`.
pub const OP_MUNLOCK: u64 = 23;
/// `mlockall(a0)`.
pub const OP_MLOCKALL: u64 = 24;
/// `munlockall()`.
pub const OP_MUNLOCKALL: u64 = 25;

fn record_madvise_mlock(call: &Call) -> [u64; CMD_WORDS] {
    match call {
        Call::Madvise(c) => [OP_MADVISE, c.addr, c.len, c.advice, 0, 0, 0],
        Call::Mlock(c) => [OP_MLOCK, c.addr, c.len, 0, 0, 0, 0],
        Call::Mlock2(c) => [OP_MLOCK2, c.addr, c.len, c.flags, 0, 0, 0],
        Call::Munlock(c) => [OP_MUNLOCK, c.addr, c.len, 0, 0, 0, 0],
        Call::Mlockall(c) => [OP_MLOCKALL, c.flags, 0, 0, 0, 0, 0],
        _ => [OP_MUNLOCKALL, 0, 0, 0, 0, 0, 0],
    }
}

/// Run a madvise or mlock-family command; `None` for another op.
fn run_madvise_mlock(cmd: &[u64; CMD_WORDS]) -> Option<i64> {
    let [op, a0, a1, a2, ..] = *cmd;
    // SAFETY: raw system calls on ranges the parent chose (its window and
    // the mappings it made), as in `run`; mlockall touches every mapping
    // but changes none of the memory the child uses.
    let r = unsafe {
        match op {
            OP_MADVISE => libc::syscall(libc::SYS_madvise, a0, a1, a2),
            OP_MLOCK => libc::syscall(libc::SYS_mlock, a0, a1),
            OP_MLOCK2 => libc::syscall(libc::SYS_mlock2, a0, a1, a2),
            OP_MUNLOCK => libc::syscall(libc::SYS_munlock, a0, a1),
            OP_MLOCKALL => libc::syscall(libc::SYS_mlockall, a0),
            OP_MUNLOCKALL => libc::syscall(libc::SYS_munlockall),
            _ => return None,
        }
    };
    Some(raw(r))
}

// --- end madvise / mlock ---

/// What the child opens before it reports ready: the files the parent
/// named (one `r:` or `w:` prefixed path per line), as descriptors
/// `FILE_FD0` on, and `/dev/zero`.
struct Setup {
    fds: [i64; MAX_FILES],
    nfiles: usize,
    devzero: i32,
}

fn open_all() -> Setup {
    let spec = std::env::var("VMSCALE_DIFF_FILES").unwrap_or_default();
    let mut fds = [-1i64; MAX_FILES];
    let mut nfiles = 0;
    for line in spec.lines().filter(|l| !l.is_empty()).take(MAX_FILES) {
        let (mode, path) = line.split_at(2);
        let flags = if mode == "r:" {
            libc::O_RDONLY
        } else {
            libc::O_RDWR
        };
        let c = CString::new(path).expect("path without NUL");
        // SAFETY: `c` is a valid NUL-terminated string for the call.
        let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC) };
        // Calls name files by descriptor, and a case runs in many children
        // (shrinking): each must hold every file at the same number.
        let want = FILE_FD0 + nfiles as i32;
        let fixed = if fd < 0 || fd == want {
            fd
        } else {
            // SAFETY: plain descriptor calls on the descriptor just opened.
            unsafe {
                let fixed = libc::dup3(fd, want, libc::O_CLOEXEC);
                libc::close(fd);
                fixed
            }
        };
        fds[nfiles] = i64::from(fixed);
        nfiles += 1;
    }
    let dz = CString::new("/dev/zero").expect("no NUL");
    // SAFETY: as above.
    let devzero = unsafe { libc::open(dz.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    Setup {
        fds,
        nfiles,
        devzero,
    }
}

/// Touch 256 KiB of stack now, so that the command loop never grows the
/// `[stack]` VMA after the parent has read the initial map.
#[inline(never)]
fn pretouch_stack() {
    let mut buf = [0u8; 256 << 10];
    for i in (0..buf.len()).step_by(4096) {
        // SAFETY: `i` is in bounds; the volatile write keeps the store.
        unsafe { std::ptr::write_volatile(buf.as_mut_ptr().add(i), 1) };
    }
    std::hint::black_box(&buf);
}

fn write_all(bytes: &[u8]) -> bool {
    let mut done = 0;
    while done < bytes.len() {
        // SAFETY: the pointer and length describe the unwritten tail.
        let n = unsafe { libc::write(1, bytes[done..].as_ptr().cast(), bytes.len() - done) };
        if n <= 0 {
            return false;
        }
        done += n as usize;
    }
    true
}

fn read_all(bytes: &mut [u8]) -> bool {
    let mut done = 0;
    while done < bytes.len() {
        // SAFETY: the pointer and length describe the unread tail.
        let n = unsafe { libc::read(0, bytes[done..].as_mut_ptr().cast(), bytes.len() - done) };
        if n <= 0 {
            return false;
        }
        done += n as usize;
    }
    true
}

fn raw(ret: i64) -> i64 {
    if ret == -1 {
        // SAFETY: errno is the calling thread's own.
        -i64::from(unsafe { *libc::__errno_location() })
    } else {
        ret
    }
}

/// Run one command; the raw result, or `-errno`.
fn run(cmd: &[u64; CMD_WORDS], devzero: i32) -> i64 {
    let [op, a0, a1, a2, a3, a4, a5] = *cmd;
    // SAFETY: (all arms) raw system calls on addresses the parent chose
    // inside its test window or mappings it created; none of them touches
    // memory this process uses after it reported ready.
    unsafe {
        match op {
            OP_MMAP => raw(libc::syscall(libc::SYS_mmap, a0, a1, a2, a3, a4, a5)),
            OP_MUNMAP => raw(libc::syscall(libc::SYS_munmap, a0, a1)),
            OP_MPROTECT => raw(libc::syscall(libc::SYS_mprotect, a0, a1, a2)),
            OP_MREMAP => raw(libc::syscall(libc::SYS_mremap, a0, a1, a2, a3, a4)),
            // brk returns the break, never -1.
            OP_BRK => libc::syscall(libc::SYS_brk, a0),
            // A served fault returns 0, as `Call::apply` does, not
            // read's byte count.
            OP_FAULT => raw(libc::read(devzero, a0 as *mut libc::c_void, 1) as i64).min(0),
            OP_FORK | OP_EXEC => process_op(op),
            OP_MSEAL..=OP_UFFD_UNREGISTER => run_seal(cmd),
            _ => run_madvise_mlock(cmd).unwrap_or(-i64::from(libc::ENOSYS)),
        }
    }
}

/// The child's main loop. Never returns.
pub fn main() -> ! {
    let setup = open_all();
    prepare_exec();
    open_uffd();
    pretouch_stack();
    // SAFETY: brk(0) only reports the current break.
    let brk0 = unsafe { libc::syscall(libc::SYS_brk, 0u64) } as u64;
    let mut ready = [0u64; READY_WORDS];
    ready[0] = READY_MAGIC;
    ready[1] = brk0;
    ready[2] = setup.devzero as u64;
    ready[3] = setup.nfiles as u64;
    for i in 0..setup.nfiles {
        ready[4 + i] = setup.fds[i] as u64;
    }
    let devzero = setup.devzero;
    let mut bytes = [0u8; READY_WORDS * 8];
    for (i, w) in ready.iter().enumerate() {
        bytes[i * 8..i * 8 + 8].copy_from_slice(&w.to_ne_bytes());
    }
    if write_all(&bytes) {
        let mut rec = [0u8; CMD_WORDS * 8];
        while read_all(&mut rec) {
            let mut cmd = [0u64; CMD_WORDS];
            for (i, w) in cmd.iter_mut().enumerate() {
                let mut b = [0u8; 8];
                b.copy_from_slice(&rec[i * 8..i * 8 + 8]);
                *w = u64::from_ne_bytes(b);
            }
            let ret = run(&cmd, devzero);
            if !write_all(&ret.to_ne_bytes()) {
                break;
            }
        }
    }
    // SAFETY: leaves without running any exit handler (which might
    // allocate); the parent only needs the process gone.
    unsafe { libc::_exit(0) }
}

/// `fork()`: the new process carries on serving commands and answers
/// with its pid; the old one waits for it, silent, and leaves with it.
pub const OP_FORK: u64 = 100;
/// `execve(VMSCALE_DIFF_EXEC, [path], [])`: on success the new program
/// answers for itself (it writes `EXEC_READY`); on failure, `-errno`.
pub const OP_EXEC: u64 = 101;
/// What the tiny program writes once it runs.
pub const EXEC_READY: u64 = 0x6578_6563_7265_6479;

/// The program `OP_EXEC` runs, ready before the loop (which must not
/// allocate).
static EXEC_PATH: std::sync::OnceLock<CString> = std::sync::OnceLock::new();

fn prepare_exec() {
    if let Some(p) = std::env::var_os("VMSCALE_DIFF_EXEC") {
        use std::os::unix::ffi::OsStrExt;
        if let Ok(c) = CString::new(p.as_bytes()) {
            let _ = EXEC_PATH.set(c);
        }
    }
}

/// Run `OP_FORK` or `OP_EXEC`.
fn process_op(op: u64) -> i64 {
    if op == OP_EXEC {
        let Some(path) = EXEC_PATH.get() else {
            return -i64::from(libc::ENOENT);
        };
        let argv = [path.as_ptr(), std::ptr::null()];
        let envp = [std::ptr::null::<libc::c_char>()];
        // SAFETY: NUL-terminated path and null-terminated arrays, all
        // alive across the call; on success nothing here runs again.
        return raw(unsafe { libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr()) } as i64);
    }
    // SAFETY: this process has one thread; both sides go on with raw
    // system calls only.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return raw(-1);
    }
    if pid == 0 {
        // The inherited userfaultfd still belongs to the old process's
        // address space: registrations through it would change that one.
        // A fresh context at the same number serves the new process (no
        // mapping changes: descriptor calls and the stack only).
        open_uffd();
        // SAFETY: getpid has no preconditions.
        return i64::from(unsafe { libc::getpid() });
    }
    let mut status = 0;
    // SAFETY: waits for the child just made, then leaves without running
    // exit handlers; the parent reads answers from the new process only.
    unsafe {
        libc::waitpid(pid, &mut status, 0);
        libc::_exit(0)
    }
}
