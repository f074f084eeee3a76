//! The recorder follows threads and forked children, and writes an event
//! for every call the model is gaining, with its arguments (structures and
//! strings read from the caller's memory) and the kernel's result.
//!
//! This test records itself: run with the argument [`TRACEE`], the binary
//! is the traced program (a thread and a forked child that each `mmap` and
//! `madvise`, then the main thread's `mlock` family, `mseal`, VMA name,
//! protection keys and userfaultfd registration), which exits with status
//! [`STATUS`]. Without it, it records that program and checks the trace.
//! It has its own `main` (`harness = false`): libtest's threads would be
//! part of the recording.

use vmtrace::format::{Event, Hex, Ret};

/// The argument that makes this binary the traced program.
const TRACEE: &str = "--vmtrace-follow-tracee";
/// The traced program's exit status.
const STATUS: i32 = 7;
/// Lengths that tell the mappings apart in the trace.
const THREAD_LEN: u64 = 0x13000;
const CHILD_LEN: u64 = 0x17000;
const MAIN_LEN: u64 = 0x1d000;
const UFFD_LEN: u64 = 0x5000;
/// The name given with `PR_SET_VMA_ANON_NAME`.
const NAME: &[u8] = b"vmtrace-follow\0";

fn main() {
    if std::env::args().nth(1).as_deref() == Some(TRACEE) {
        tracee();
    }
    recorder_side();
    println!("follow: ok");
}

/// A raw system call with five arguments; returns the kernel's result (`-errno` on failure).
fn sys(nr: libc::c_long, a: [u64; 5]) -> i64 {
    sys6(nr, [a[0], a[1], a[2], a[3], a[4], 0])
}

/// [`sys`] with six arguments.
fn sys6(nr: libc::c_long, a: [u64; 6]) -> i64 {
    // SAFETY: every call below passes pointers to memory this program
    // mapped or owns for the duration of the call (or deliberately bad
    // ones, which the kernel checks and refuses with EFAULT); none of the
    // calls touches memory Rust code holds references into.
    let r = unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]) };
    if r == -1 {
        -i64::from(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    } else {
        r
    }
}

/// `mmap` of `len` bytes of private anonymous memory, read-write.
fn map(len: u64) -> u64 {
    let prot = (libc::PROT_READ | libc::PROT_WRITE) as u64;
    let flags = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64;
    let addr = sys6(libc::SYS_mmap, [0, len, prot, flags, u64::MAX, 0]);
    assert!(addr > 0, "mmap: {addr}");
    addr as u64
}

/// The traced program. Never returns.
fn tracee() -> ! {
    let willneed = libc::MADV_WILLNEED as u64;
    std::thread::spawn(move || {
        let a = map(THREAD_LEN);
        sys(libc::SYS_madvise, [a, THREAD_LEN, willneed, 0, 0]);
    })
    .join()
    .unwrap();
    // SAFETY: the child makes raw system calls only (no allocation, no
    // lock another thread could hold) and leaves with exit_group.
    let child = unsafe { libc::fork() };
    if child == 0 {
        let a = map(CHILD_LEN);
        sys(libc::SYS_madvise, [a, CHILD_LEN, willneed, 0, 0]);
        sys(libc::SYS_exit_group, [0; 5]);
    }
    assert!(child > 0);
    let mut status = 0;
    // SAFETY: `status` is a valid int for the call.
    unsafe { libc::waitpid(child, &mut status, 0) };

    let a = map(MAIN_LEN);
    let page = 0x1000;
    sys(
        libc::SYS_madvise,
        [a, MAIN_LEN, libc::MADV_NOHUGEPAGE as u64, 0, 0],
    );
    sys(libc::SYS_mlock, [a, page, 0, 0, 0]);
    sys(libc::SYS_mlock2, [a + page, page, 1, 0, 0]);
    sys(libc::SYS_munlock, [a, 2 * page, 0, 0, 0]);
    // Flags 0: EINVAL (locking the whole test binary is not the point).
    sys(libc::SYS_mlockall, [0; 5]);
    sys(libc::SYS_munlockall, [0; 5]);
    sys(462, [a + MAIN_LEN - page, page, 0, 0, 0]);
    let set_vma = 0x5356_4d41;
    sys(libc::SYS_prctl, [set_vma, 0, a, page, NAME.as_ptr() as u64]);
    sys(libc::SYS_prctl, [set_vma, 0, a, page, 0]);
    let key = sys(libc::SYS_pkey_alloc, [0, 0, 0, 0, 0]);
    // Key 1 when this CPU has none to give: the kernel refuses it.
    let key = if key > 0 { key as u64 } else { 1 };
    sys(libc::SYS_pkey_mprotect, [a, page, 1, key, 0]);
    sys(libc::SYS_pkey_free, [key, 0, 0, 0, 0]);

    // userfaultfd: register part of a mapping, unregister it, and pass a
    // structure that cannot be read; a registration number on a pipe is
    // no registration.
    let uffd = sys(libc::SYS_userfaultfd, [libc::O_CLOEXEC as u64, 0, 0, 0, 0]);
    if uffd >= 0 {
        let fd = uffd as u64;
        let mut api = [0xaa_u64, 0, 0]; // UFFD_API, features, ioctls
        sys(
            libc::SYS_ioctl,
            [fd, 0xc018_aa3f, api.as_mut_ptr() as u64, 0, 0],
        );
        let u = map(UFFD_LEN);
        let mut reg = [u + page, page, 1, 0]; // range, MODE_MISSING, ioctls
        sys(
            libc::SYS_ioctl,
            [fd, 0xc020_aa00, reg.as_mut_ptr() as u64, 0, 0],
        );
        let range = [u + page, page];
        sys(
            libc::SYS_ioctl,
            [fd, 0x8010_aa01, range.as_ptr() as u64, 0, 0],
        );
        sys(libc::SYS_ioctl, [fd, 0xc020_aa00, 0x10, 0, 0]);
    }
    let mut pipe = [0i32; 2];
    sys(libc::SYS_pipe2, [pipe.as_mut_ptr() as u64, 0, 0, 0, 0]);
    let mut reg = [0u64; 4];
    sys(
        libc::SYS_ioctl,
        [pipe[0] as u64, 0xc020_aa00, reg.as_mut_ptr() as u64, 0, 0],
    );
    std::process::exit(STATUS);
}

/// Records the tracee and checks its trace.
fn recorder_side() {
    let exe = std::env::current_exe().unwrap();
    let command = [exe.to_string_lossy().into_owned(), TRACEE.to_string()];
    let trace = match vmtrace::record(&command) {
        Ok(t) => t,
        Err(e) if e.contains("ptrace") => {
            eprintln!("follow: skipped, ptrace is not permitted here: {e}");
            return;
        }
        Err(e) => panic!("recording failed: {e}"),
    };
    assert_eq!(trace.status, format!("exit {STATUS}"));
    let ev = &trace.events;
    let (root, leader) = ev
        .iter()
        .find_map(|e| match e {
            Event::Exec { space, pid, .. } => Some((*space, *pid)),
            _ => None,
        })
        .unwrap();
    let mmap_of = |want: u64| {
        ev.iter()
            .find_map(|e| match *e {
                Event::Mmap {
                    space,
                    pid,
                    len: Hex(len),
                    fd: -1,
                    ret,
                    ..
                } if len == want => Some((space, pid, ret.0 as u64)),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no anonymous mmap of {want:#x} in the trace"))
    };
    let madvised = |space: usize, pid: i32, addr: u64| {
        ev.iter().any(|e| {
            matches!(*e, Event::Madvise { space: s, pid: p, addr: Hex(a), ret: Ret(0), .. }
                if (s, p, a) == (space, pid, addr))
        })
    };

    // The thread shares the address space under its own task id.
    let (main_space, main_pid, main_addr) = mmap_of(MAIN_LEN);
    assert_eq!(main_space, root);
    let (space, pid, addr) = mmap_of(THREAD_LEN);
    assert_eq!(
        space, root,
        "the thread's mapping is in the process's space"
    );
    assert_ne!(pid, main_pid, "the thread is a task of its own");
    assert!(madvised(space, pid, addr));
    // The child got a space of its own, forked from the process's.
    let (space, pid, addr) = mmap_of(CHILD_LEN);
    assert!(
        ev.contains(&Event::Fork {
            parent: root,
            space,
            pid
        }),
        "no fork event for the child's space {space} (pid {pid})"
    );
    assert!(pid != leader && pid != main_pid);
    assert!(madvised(space, pid, addr));

    // The main thread's calls, each with its arguments and result.
    let ours: Vec<&Event> = ev
        .iter()
        .filter(|e| e.owner() == (root, main_pid))
        .collect();
    let find = |name: &str| {
        ours.iter()
            .copied()
            .filter(|e| e.name() == Some(name))
            .collect::<Vec<_>>()
    };
    let page = 0x1000;
    // (The C library may make madvise calls of its own.)
    assert!(find("madvise").contains(&&Event::Madvise {
        space: root,
        pid: main_pid,
        addr: Hex(main_addr),
        len: Hex(MAIN_LEN),
        advice: Hex(libc::MADV_NOHUGEPAGE as u64),
        ret: Ret(0)
    }));
    assert!(
        matches!(find("mlock")[..], [Event::Mlock { addr: Hex(a), len: Hex(0x1000), ret: Ret(0), .. }] if *a == main_addr)
    );
    assert!(
        matches!(find("mlock2")[..], [Event::Mlock2 { addr: Hex(a), flags: Hex(1), ret: Ret(0), .. }] if *a == main_addr + page)
    );
    assert!(matches!(
        find("munlock")[..],
        [Event::Munlock {
            len: Hex(0x2000),
            ret: Ret(0),
            ..
        }]
    ));
    assert!(matches!(
        find("mlockall")[..],
        [Event::Mlockall {
            flags: Hex(0),
            ret: Ret(-22),
            ..
        }]
    ));
    assert!(matches!(
        find("munlockall")[..],
        [Event::Munlockall { ret: Ret(0), .. }]
    ));
    assert!(
        matches!(find("mseal")[..], [Event::Mseal { addr: Hex(a), len: Hex(0x1000), flags: Hex(0), .. }] if *a == main_addr + MAIN_LEN - page)
    );
    match find("prctl(PR_SET_VMA_ANON_NAME)")[..] {
        [Event::SetVmaAnonName {
            name: Some(named),
            name_ptr: Hex(p),
            ..
        }, Event::SetVmaAnonName {
            name: None,
            name_ptr: Hex(0),
            ..
        }] => {
            assert_eq!(named, "vmtrace-follow");
            assert_ne!(*p, 0);
        }
        ref other => panic!("PR_SET_VMA_ANON_NAME events: {other:?}"),
    }
    let alloc = find("pkey_alloc");
    assert!(matches!(alloc[..], [Event::PkeyAlloc { .. }]));
    let key = match alloc[0].ret() {
        Some(Ret(k)) if k > 0 => k as i32,
        _ => 1,
    };
    assert!(
        matches!(find("pkey_mprotect")[..], [Event::PkeyMprotect { prot: Hex(1), pkey, .. }] if *pkey == key)
    );
    assert!(matches!(find("pkey_free")[..], [Event::PkeyFree { pkey, .. }] if *pkey == key));

    let registers = find("ioctl(UFFDIO_REGISTER)");
    let unregisters = find("ioctl(UFFDIO_UNREGISTER)");
    if registers.is_empty() {
        // userfaultfd refused (unprivileged, or no such system call): the
        // tracee made no registration on one, and the pipe's is none.
        eprintln!("follow: userfaultfd is not available here; its events were not checked");
        assert!(unregisters.is_empty());
    } else {
        let (_, _, u) = mmap_of(UFFD_LEN);
        match registers[..] {
            [Event::UffdRegister {
                addr: Hex(a),
                len: Hex(0x1000),
                mode: Hex(1),
                unreadable: false,
                ret: Ret(0),
                ..
            }, Event::UffdRegister {
                arg: Hex(0x10),
                unreadable: true,
                ret: Ret(-14),
                ..
            }] => assert_eq!(*a, u + page),
            ref other => panic!("UFFDIO_REGISTER events: {other:?}"),
        }
        assert!(
            matches!(unregisters[..], [Event::UffdUnregister { addr: Hex(a), len: Hex(0x1000), unreadable: false, ret: Ret(0), .. }] if *a == u + page)
        );
    }

    // The replay reports each as not modelled (until the model has it),
    // the thread's and the child's too, and counts them by name.
    let outcome =
        vmtrace::replay(&trace, mm::IndexKind::Maple, &vmtrace::Limits::default()).unwrap();
    let mut expected = std::collections::BTreeMap::new();
    for e in ev {
        if let Some((name, _)) = e.unmodelled() {
            *expected.entry(name).or_insert(0) += 1;
        }
    }
    assert_eq!(outcome.not_modelled, expected);
    let count = |name| ev.iter().filter(|e| e.name() == Some(name)).count();
    assert!(count("madvise") >= 3);
    assert_eq!(count("prctl(PR_SET_VMA_ANON_NAME)"), 2);
    assert_eq!(outcome.notes.len(), expected.values().sum::<usize>());
}
