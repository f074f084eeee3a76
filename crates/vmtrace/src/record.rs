//! `vmbench record`: run a command under `ptrace` and write down its
//! address spaces and every call that changes them.
//!
//! The tracer steps every task from system call to system call. At the
//! entry of each call it records, it reads `/proc/<pid>/smaps` to learn
//! what a system-call trace cannot show (which VMAs got an anon_vma from a
//! write fault, how far a stack grew) and records the change as a `sync`
//! event; at the exit it records the call with its arguments and result.
//! Arguments that live in the caller's memory (a `PR_SET_VMA_ANON_NAME`
//! name, a userfaultfd registration's structure) are read at the entry,
//! through `/proc/<pid>/mem`, as the kernel reads them. Fork, vfork,
//! clone, exec and exit events track which tasks share an address space.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::fs;
use std::io;

use mm::procmaps::{self, SmapsEntry};
use mm::VmFlags;

use crate::format::{
    Event, FileInfo, Hex, Ret, SmapsLine, Sysctl, Trace, ANON_NAME_READ, FORMAT, VERSION,
};
use crate::ptrace::{self, event, Pid, Status, SyscallInfo};

/// Highest user address plus one (x86-64, 4-level page tables); mappings
/// above it (`[vsyscall]`) are not VMAs.
const TASK_SIZE: u64 = mm::layout::TASK_SIZE_X86_64;

/// `prctl(PR_SET_VMA, ...)`: options on VMAs.
const PR_SET_VMA: u64 = 0x5356_4d41;
/// Its one option so far: name anonymous VMAs.
const PR_SET_VMA_ANON_NAME: u64 = 0;
/// `mseal` (x86-64; `libc` does not name it yet).
const SYS_MSEAL: i64 = 462;
/// `_IOWR(0xAA, 0x00, struct uffdio_register)`.
const UFFDIO_REGISTER: u32 = 0xc020_aa00;
/// `_IOR(0xAA, 0x01, struct uffdio_range)`.
const UFFDIO_UNREGISTER: u32 = 0x8010_aa01;
/// What `/proc/<pid>/fd/N` reads for a userfaultfd, made either by the
/// `userfaultfd` system call or by `/dev/userfaultfd`'s
/// `USERFAULTFD_IOC_NEW`.
const USERFAULTFD_LINK: &str = "anon_inode:[userfaultfd]";

/// How the recorder treats a system call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Not interesting.
    Ignore,
    /// One of the calls the model replays.
    Replayed,
    /// A call with an event of its own that the model is gaining
    /// (`madvise`, the `mlock` family, `mseal`, VMA names, protection
    /// keys).
    Vma,
    /// An `ioctl` whose number is a userfaultfd registration: recorded
    /// when the descriptor is a userfaultfd.
    Uffd,
    /// Changes VMAs in ways the model does not implement.
    Unmodelled(&'static str),
    /// Creates a task.
    Clone,
    /// Replaces the address space.
    Exec,
}

fn kind(nr: u64, args: &[u64; 6]) -> Kind {
    let Ok(nr) = i64::try_from(nr) else {
        return Kind::Ignore;
    };
    match nr {
        libc::SYS_mmap
        | libc::SYS_munmap
        | libc::SYS_mprotect
        | libc::SYS_mremap
        | libc::SYS_brk => Kind::Replayed,
        // With key -1, pkey_mprotect is mprotect.
        libc::SYS_pkey_mprotect if args[3] as i32 == -1 => Kind::Replayed,
        libc::SYS_pkey_mprotect
        | libc::SYS_pkey_alloc
        | libc::SYS_pkey_free
        | libc::SYS_madvise
        | libc::SYS_mlock
        | libc::SYS_mlock2
        | libc::SYS_munlock
        | libc::SYS_mlockall
        | libc::SYS_munlockall
        | SYS_MSEAL => Kind::Vma,
        libc::SYS_prctl if args[0] == PR_SET_VMA && args[1] == PR_SET_VMA_ANON_NAME => Kind::Vma,
        libc::SYS_prctl if args[0] == PR_SET_VMA => Kind::Unmodelled("prctl(PR_SET_VMA)"),
        libc::SYS_ioctl if matches!(args[1] as u32, UFFDIO_REGISTER | UFFDIO_UNREGISTER) => {
            Kind::Uffd
        }
        libc::SYS_shmat => Kind::Unmodelled("shmat"),
        libc::SYS_shmdt => Kind::Unmodelled("shmdt"),
        libc::SYS_remap_file_pages => Kind::Unmodelled("remap_file_pages"),
        libc::SYS_process_madvise => Kind::Unmodelled("process_madvise"),
        libc::SYS_clone | libc::SYS_clone3 | libc::SYS_fork | libc::SYS_vfork => Kind::Clone,
        libc::SYS_execve | libc::SYS_execveat => Kind::Exec,
        _ => Kind::Ignore,
    }
}

/// What the recorder reads from the task at a call's entry, for the
/// event it writes at the exit.
#[derive(Debug, Clone, Default)]
enum Extra {
    /// Nothing.
    #[default]
    None,
    /// For `mmap` of a file: its index in the file table and its size.
    File(usize, u64),
    /// For `PR_SET_VMA_ANON_NAME`: the name (see
    /// [`Event::SetVmaAnonName`]).
    Name(Option<String>),
    /// For a userfaultfd registration: the words of its structure
    /// (`start`, `len` and, for `UFFDIO_REGISTER`, `mode`), or `None`
    /// when they could not be read.
    Uffd(Option<[u64; 3]>),
}

/// Up to `len` bytes of `pid`'s memory at `addr`, read through
/// `/proc/<pid>/mem` (which, unlike `PTRACE_PEEKDATA`, reads up to an
/// unmapped page without failing on the bytes before it). Fewer bytes
/// come back when the range runs into memory that cannot be read.
fn read_mem(pid: Pid, addr: u64, len: usize) -> Vec<u8> {
    use std::os::unix::fs::FileExt as _;
    let mut buf = vec![0; len];
    let Ok(mem) = fs::File::open(format!("/proc/{pid}/mem")) else {
        return Vec::new();
    };
    let mut got = 0;
    while got < len {
        match mem.read_at(&mut buf[got..], addr.wrapping_add(got as u64)) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    buf.truncate(got);
    buf
}

/// The name a `PR_SET_VMA_ANON_NAME` call passes, as the kernel reads it:
/// the bytes up to the NUL, or all `ANON_NAME_READ` of them when none is
/// a NUL. `None` when the memory ends before either (the kernel's
/// `EFAULT`).
fn anon_name(bytes: &[u8]) -> Option<String> {
    let text = match bytes.iter().position(|&b| b == 0) {
        Some(nul) => &bytes[..nul],
        None if bytes.len() == ANON_NAME_READ => bytes,
        None => return None,
    };
    Some(String::from_utf8_lossy(text).into_owned())
}

/// Little-endian 64-bit words of `bytes`, if it holds `N` of them.
fn words<const N: usize>(bytes: &[u8]) -> Option<[u64; N]> {
    let mut out = [0; N];
    for (i, w) in out.iter_mut().enumerate() {
        *w = u64::from_le_bytes(bytes.get(i * 8..i * 8 + 8)?.try_into().ok()?);
    }
    Some(out)
}

/// A call seen at its entry, waiting for its exit.
#[derive(Debug, Clone)]
struct Pending {
    nr: u64,
    args: [u64; 6],
    kind: Kind,
    /// What was read at the entry.
    extra: Extra,
}

#[derive(Debug)]
struct Task {
    space: usize,
    pending: Option<Pending>,
    /// `clone` flags of a task-creating call in progress.
    clone_flags: Option<u64>,
    /// The initial `SIGSTOP` of an auto-attached child has been seen.
    started: bool,
}

/// What the previous snapshot of an address space showed.
#[derive(Debug, Default)]
struct Space {
    anon: BTreeSet<u64>,
    stacks: Vec<[Hex; 2]>,
}

/// The tracer's state.
struct Recorder {
    trace: Trace,
    file_ids: HashMap<(String, bool, bool, bool), usize>,
    tasks: HashMap<Pid, Task>,
    spaces: Vec<Space>,
    /// Children whose first stop came before their parent's event.
    early: HashSet<Pid>,
    /// The task inside a memory call, per address space.
    busy: HashMap<usize, Pid>,
    /// Tasks stopped at the entry of a memory call, waiting for `busy`.
    waiting: HashMap<usize, VecDeque<Pid>>,
}

/// Whether the filesystem of a `/proc/<pid>/mountinfo` line places large
/// file mappings with `thp_get_unmapped_area` (2 MiB-aligned).
fn mount_huge_aligns(line: &str) -> bool {
    line.split(" - ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .is_some_and(|fs| matches!(fs, "ext2" | "ext3" | "ext4" | "xfs" | "btrfs"))
}

/// [`mount_huge_aligns`] for the mount holding `path`: the mount whose
/// mount point (field 5) is the longest prefix of the path.
fn huge_align_fs(mountinfo: &str, path: &str) -> bool {
    mountinfo
        .lines()
        .filter_map(|l| Some((l.split_whitespace().nth(4)?, l)))
        .filter(|(mnt, _)| {
            path.strip_prefix(mnt)
                .is_some_and(|rest| *mnt == "/" || rest.is_empty() || rest.starts_with('/'))
        })
        .max_by_key(|(mnt, _)| mnt.len())
        .is_none_or(|(_, l)| mount_huge_aligns(l))
}

fn read(path: &str) -> io::Result<String> {
    fs::read_to_string(path)
}

fn sysctl(name: &str) -> Result<u64, String> {
    let path = format!("/proc/sys/vm/{name}");
    read(&path)
        .map_err(|e| format!("reading {path}: {e}"))?
        .trim()
        .parse()
        .map_err(|e| format!("parsing {path}: {e}"))
}

/// The header lines of an `smaps` text (the `maps` lines).
fn header_lines(smaps: &str) -> Vec<String> {
    smaps
        .lines()
        .filter(|l| {
            let first = l.split_whitespace().next().unwrap_or("");
            first.contains('-') && !first.ends_with(':')
        })
        .map(normalize)
        .collect()
}

/// A maps line with the column padding before the name collapsed (the
/// fields are unchanged; traces are smaller and easier to read).
fn normalize(line: &str) -> String {
    procmaps::MapsEntry::parse(line)
        .map(|e| e.to_string())
        .unwrap_or_else(|_| line.trim_end().to_string())
}

/// Anonymous-page VMAs and grows-down VMAs of a parsed `smaps`.
fn hidden_state(entries: &[SmapsEntry]) -> (BTreeSet<u64>, Vec<[Hex; 2]>) {
    let user = entries.iter().filter(|e| e.maps.start < TASK_SIZE);
    let anon = user
        .clone()
        .filter(|e| e.has_anon_pages)
        .map(|e| e.maps.start)
        .collect();
    let stacks = user
        .filter(|e| e.flags.contains(VmFlags::GROWSDOWN))
        .map(|e| [Hex(e.maps.start), Hex(e.maps.end)])
        .collect();
    (anon, stacks)
}

/// Fields of `/proc/<pid>/stat`, numbered as in `proc(5)` (1-based).
fn stat_field(stat: &str, n: usize) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(n.checked_sub(3)?)?.parse().ok()
}

impl Recorder {
    fn new(command: &[String]) -> Result<Recorder, String> {
        let cap_eff = read("/proc/self/status")
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("CapEff:"))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0);
        let memlock_rlimit = ptrace::memlock_rlimit().map(Hex);
        let anon_vma_name = ptrace::kernel_names_anon_vmas();
        let sysctl = Sysctl {
            mmap_min_addr: Hex(sysctl("mmap_min_addr")?),
            max_map_count: sysctl("max_map_count")?,
            legacy_va_layout: sysctl("legacy_va_layout")? != 0,
            overcommit_memory: sysctl("overcommit_memory")? as u32,
            thp: std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists(),
            exec_only_pkey: read("/proc/cpuinfo")
                .unwrap_or_default()
                .split_whitespace()
                .any(|f| f == "ospke"),
            // The traced command runs with this process's capabilities.
            cap_sys_rawio: cap_eff & (1 << 17) != 0,
            cap_ipc_lock: cap_eff & (1 << 14) != 0,
            memlock_rlimit,
            anon_vma_name,
        };
        let kernel = read("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        Ok(Recorder {
            trace: Trace {
                format: FORMAT.into(),
                version: VERSION,
                command: command.to_vec(),
                kernel,
                status: String::new(),
                sysctl,
                files: Vec::new(),
                events: Vec::new(),
            },
            file_ids: HashMap::new(),
            tasks: HashMap::new(),
            spaces: Vec::new(),
            early: HashSet::new(),
            busy: HashMap::new(),
            waiting: HashMap::new(),
        })
    }

    fn new_space(&mut self) -> usize {
        self.spaces.push(Space::default());
        self.spaces.len() - 1
    }

    /// The file-table index of `path` opened with this mode.
    fn file_id(&mut self, path: &str, size: u64, mode: (bool, bool, bool, bool)) -> usize {
        let (read, write, noexec, huge_align) = mode;
        let key = (path.to_string(), read, write, noexec);
        if let Some(&id) = self.file_ids.get(&key) {
            return id;
        }
        self.trace.files.push(FileInfo {
            path: path.to_string(),
            size: Hex(size),
            read,
            write,
            noexec,
            huge_align,
        });
        let id = self.trace.files.len() - 1;
        self.file_ids.insert(key, id);
        id
    }

    /// The file behind `fd` of `pid`: path, size, open mode and whether
    /// its mount is `noexec`. `None` if `fd` is not open.
    fn resolve_fd(&mut self, pid: Pid, fd: i32) -> Option<(usize, u64)> {
        if fd < 0 {
            return None;
        }
        let link = format!("/proc/{pid}/fd/{fd}");
        let path = fs::read_link(&link).ok()?.to_string_lossy().into_owned();
        let size = fs::metadata(&link).map(|m| m.len()).unwrap_or(0);
        let info = read(&format!("/proc/{pid}/fdinfo/{fd}")).unwrap_or_default();
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_string())
        };
        let flags = field("flags:")
            .and_then(|f| u64::from_str_radix(&f, 8).ok())
            .unwrap_or(0);
        let (read_ok, write_ok) = match flags & libc::O_ACCMODE as u64 {
            0 => (true, false),
            1 => (false, true),
            _ => (true, true),
        };
        // The file's mount: its options (field 6) and, after the " - "
        // separator, its filesystem type.
        let mountinfo = read(&format!("/proc/{pid}/mountinfo")).unwrap_or_default();
        let mount = field("mnt_id:").and_then(|id| {
            mountinfo
                .lines()
                .find(|l| l.split_whitespace().next() == Some(id.as_str()))
                .map(str::to_string)
        });
        let noexec = mount.as_deref().is_some_and(|l| {
            l.split_whitespace()
                .nth(5)
                .is_some_and(|o| o.split(',').any(|o| o == "noexec"))
        });
        let huge_align = mount.as_deref().is_none_or(mount_huge_aligns);
        let mode = (read_ok, write_ok, noexec, huge_align);
        Some((self.file_id(&path, size, mode), size))
    }

    /// Record the map of a task that just exec'd (or started).
    fn capture_exec(&mut self, pid: Pid, space: usize) -> Result<(), String> {
        let text = read(&format!("/proc/{pid}/smaps"))
            .map_err(|e| format!("reading smaps of {pid}: {e}"))?;
        let entries = procmaps::parse_smaps(&text)?;
        let stat = read(&format!("/proc/{pid}/stat"))
            .map_err(|e| format!("reading stat of {pid}: {e}"))?;
        let start_stack = stat_field(&stat, 28).ok_or("no startstack in /proc/<pid>/stat")?;
        let start_brk = stat_field(&stat, 47).ok_or("no start_brk in /proc/<pid>/stat")?;
        let limits = read(&format!("/proc/{pid}/limits"))
            .map_err(|e| format!("reading limits of {pid}: {e}"))?;
        let stack_rlimit = limits
            .lines()
            .find_map(|l| l.strip_prefix("Max stack size"))
            .and_then(|rest| rest.split_whitespace().next())
            .map(|soft| {
                if soft == "unlimited" {
                    Ok(u64::MAX)
                } else {
                    soft.parse()
                }
            })
            .ok_or("no stack limit in /proc/<pid>/limits")?
            .map_err(|e| format!("bad stack limit: {e}"))?;
        let exe = fs::read_link(format!("/proc/{pid}/exe"))
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut files = Vec::new();
        for e in &entries {
            let Some(name) = e.maps.name.as_deref() else {
                continue;
            };
            if name.starts_with('[') {
                continue;
            }
            let size = fs::metadata(name)
                .map(|m| m.len())
                .unwrap_or(e.maps.offset + (e.maps.end - e.maps.start));
            // The kernel opened the program and its interpreter read-only.
            let huge_align = huge_align_fs(
                &read(&format!("/proc/{pid}/mountinfo")).unwrap_or_default(),
                name,
            );
            let id = self.file_id(name, size, (true, false, false, huge_align));
            if !files.contains(&id) {
                files.push(id);
            }
        }
        let mut smaps = Vec::new();
        let headers = header_lines(&text);
        let vmflags: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("VmFlags:"))
            .map(str::trim)
            .collect();
        for (i, (map, e)) in headers.into_iter().zip(&entries).enumerate() {
            smaps.push(SmapsLine {
                map,
                vmflags: vmflags.get(i).copied().unwrap_or("").to_string(),
                anon: e.has_anon_pages,
            });
        }
        let (anon, stacks) = hidden_state(&entries);
        self.spaces[space] = Space { anon, stacks };
        self.trace.events.push(Event::Exec {
            space,
            pid,
            exe,
            stack_rlimit: Hex(stack_rlimit),
            start_brk: Hex(start_brk),
            start_stack: Hex(start_stack),
            files,
            smaps,
        });
        Ok(())
    }

    /// Read the task's `smaps` and record what changed in its space's
    /// hidden state. Returns the `smaps` text (if the task was readable).
    fn sync(&mut self, pid: Pid, space: usize) -> Option<String> {
        let text = read(&format!("/proc/{pid}/smaps")).ok()?;
        let entries = procmaps::parse_smaps(&text).ok()?;
        let (anon, stacks) = hidden_state(&entries);
        let old = &mut self.spaces[space];
        let anon_add: Vec<Hex> = anon.difference(&old.anon).map(|&a| Hex(a)).collect();
        let anon_del: Vec<Hex> = old.anon.difference(&anon).map(|&a| Hex(a)).collect();
        let stacks_changed = stacks != old.stacks;
        if !anon_add.is_empty() || !anon_del.is_empty() || stacks_changed {
            self.trace.events.push(Event::Sync {
                space,
                pid,
                anon_add,
                anon_del,
                stacks: stacks_changed.then(|| stacks.clone()),
            });
        }
        self.spaces[space] = Space { anon, stacks };
        Some(text)
    }

    /// Record the map of `pid`'s address space as it is now.
    fn capture_final(&mut self, pid: Pid, space: usize) {
        if let Some(text) = self.sync(pid, space) {
            self.trace.events.push(Event::Final {
                space,
                pid,
                maps: header_lines(&text),
            });
        }
    }

    /// A system-call stop. Returns whether to resume the task now: a task
    /// entering a memory call while another task of its address space is
    /// inside one waits, so calls are recorded in the order they ran.
    fn on_syscall(&mut self, pid: Pid) -> Result<bool, String> {
        let Some(task) = self.tasks.get_mut(&pid) else {
            return Ok(true);
        };
        let space = task.space;
        match ptrace::syscall_info(pid) {
            Ok(SyscallInfo::Entry { arch, nr, args }) => {
                if arch != ptrace::ARCH_X86_64 {
                    return Err(format!(
                        "task {pid} made a system call with calling convention {arch:#x}; \
                         only 64-bit x86-64 programs can be recorded"
                    ));
                }
                let mut kind = kind(nr, &args);
                if kind == Kind::Uffd && !is_userfaultfd(pid, args[0]) {
                    kind = Kind::Ignore;
                }
                task.pending = Some(Pending {
                    nr,
                    args,
                    kind,
                    extra: Extra::None,
                });
                match kind {
                    Kind::Ignore => {}
                    // The old address space ends here if the exec works.
                    Kind::Exec => self.capture_final(pid, space),
                    Kind::Replayed | Kind::Vma | Kind::Uffd | Kind::Unmodelled(_) | Kind::Clone => {
                        match self.busy.get(&space) {
                            Some(&other) if other != pid => {
                                self.waiting.entry(space).or_default().push_back(pid);
                                return Ok(false);
                            }
                            _ => self.start_call(pid, space),
                        }
                    }
                }
            }
            Ok(SyscallInfo::Exit { rval }) => {
                if let Some(p) = task.pending.take() {
                    self.on_exit(pid, space, &p, Ret(rval));
                }
                self.release(space, pid);
            }
            Ok(SyscallInfo::Other) => {}
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
            Err(e) => return Err(format!("PTRACE_GET_SYSCALL_INFO on {pid}: {e}")),
        }
        Ok(true)
    }

    /// Let `pid`, stopped at the entry of a memory call, run it: mark its
    /// space busy and take what must be read at entry (the hidden state,
    /// `clone` flags, the file behind an `mmap` descriptor).
    fn start_call(&mut self, pid: Pid, space: usize) {
        self.busy.insert(space, pid);
        let Some(task) = self.tasks.get_mut(&pid) else {
            return;
        };
        let Some(Pending { nr, args, kind, .. }) = task.pending.clone() else {
            return;
        };
        match nr as i64 {
            libc::SYS_clone => task.clone_flags = Some(args[0]),
            libc::SYS_fork => task.clone_flags = Some(0),
            libc::SYS_vfork => task.clone_flags = Some((libc::CLONE_VM | libc::CLONE_VFORK) as u64),
            // `struct clone_args` starts with the flags.
            libc::SYS_clone3 => task.clone_flags = ptrace::peek(pid, args[0]).ok(),
            _ => {}
        }
        self.sync(pid, space);
        let extra = match nr as i64 {
            libc::SYS_mmap if args[3] & libc::MAP_ANONYMOUS as u64 == 0 => {
                match self.resolve_fd(pid, args[4] as i32) {
                    Some((id, size)) => Extra::File(id, size),
                    None => Extra::None,
                }
            }
            libc::SYS_prctl if kind == Kind::Vma && args[4] == 0 => Extra::Name(None),
            libc::SYS_prctl if kind == Kind::Vma => {
                Extra::Name(anon_name(&read_mem(pid, args[4], ANON_NAME_READ)))
            }
            libc::SYS_ioctl if kind == Kind::Uffd => {
                let register = args[1] as u32 == UFFDIO_REGISTER;
                let bytes = read_mem(pid, args[2], if register { 24 } else { 16 });
                Extra::Uffd(if register {
                    words::<3>(&bytes)
                } else {
                    words::<2>(&bytes).map(|[start, len]| [start, len, 0])
                })
            }
            _ => Extra::None,
        };
        if let Some(p) = self.tasks.get_mut(&pid).and_then(|t| t.pending.as_mut()) {
            p.extra = extra;
        }
    }

    /// `pid` left its memory call (or its clone copied the address space,
    /// or it died): let the next waiting task of `space` run its call.
    fn release(&mut self, space: usize, pid: Pid) {
        if let Some(queue) = self.waiting.get_mut(&space) {
            queue.retain(|&w| w != pid);
        }
        if self.busy.get(&space) != Some(&pid) {
            return;
        }
        self.busy.remove(&space);
        while let Some(next) = self.waiting.get_mut(&space).and_then(|q| q.pop_front()) {
            if self.tasks.get(&next).is_some_and(|t| t.space == space) {
                self.start_call(next, space);
                resume(next, 0);
                return;
            }
        }
    }

    fn on_exit(&mut self, pid: Pid, space: usize, p: &Pending, ret: Ret) {
        let a = p.args.map(Hex);
        let ev = match (p.kind, p.nr as i64) {
            (Kind::Replayed, libc::SYS_mmap) => Event::Mmap {
                space,
                pid,
                addr: a[0],
                len: a[1],
                prot: Hex(a[2].0 & 0xffff_ffff),
                flags: Hex(a[3].0 & 0xffff_ffff),
                fd: a[4].0 as i32,
                off: a[5],
                file: match p.extra {
                    Extra::File(id, _) => Some(id),
                    _ => None,
                },
                file_size: match p.extra {
                    Extra::File(_, size) => Some(Hex(size)),
                    _ => None,
                },
                ret,
            },
            (Kind::Replayed, libc::SYS_munmap) => Event::Munmap {
                space,
                pid,
                addr: a[0],
                len: a[1],
                ret,
            },
            (Kind::Replayed, libc::SYS_mprotect | libc::SYS_pkey_mprotect) => Event::Mprotect {
                space,
                pid,
                addr: a[0],
                len: a[1],
                prot: Hex(a[2].0 & 0xffff_ffff),
                ret,
            },
            (Kind::Replayed, libc::SYS_mremap) => Event::Mremap {
                space,
                pid,
                addr: a[0],
                old_len: a[1],
                new_len: a[2],
                flags: Hex(a[3].0 & 0xffff_ffff),
                new_addr: a[4],
                ret,
            },
            (Kind::Replayed, libc::SYS_brk) => Event::Brk {
                space,
                pid,
                addr: a[0],
                ret,
            },
            (Kind::Vma, libc::SYS_madvise) => Event::Madvise {
                space,
                pid,
                addr: a[0],
                len: a[1],
                advice: Hex(a[2].0 & 0xffff_ffff),
                ret,
            },
            (Kind::Vma, libc::SYS_mlock) => Event::Mlock {
                space,
                pid,
                addr: a[0],
                len: a[1],
                ret,
            },
            (Kind::Vma, libc::SYS_mlock2) => Event::Mlock2 {
                space,
                pid,
                addr: a[0],
                len: a[1],
                flags: Hex(a[2].0 & 0xffff_ffff),
                ret,
            },
            (Kind::Vma, libc::SYS_munlock) => Event::Munlock {
                space,
                pid,
                addr: a[0],
                len: a[1],
                ret,
            },
            (Kind::Vma, libc::SYS_mlockall) => Event::Mlockall {
                space,
                pid,
                flags: Hex(a[0].0 & 0xffff_ffff),
                ret,
            },
            (Kind::Vma, libc::SYS_munlockall) => Event::Munlockall { space, pid, ret },
            // mseal's flags are an unsigned long: all 64 bits count.
            (Kind::Vma, SYS_MSEAL) => Event::Mseal {
                space,
                pid,
                addr: a[0],
                len: a[1],
                flags: a[2],
                ret,
            },
            (Kind::Vma, libc::SYS_prctl) => Event::SetVmaAnonName {
                space,
                pid,
                addr: a[2],
                len: a[3],
                name_ptr: a[4],
                name: match &p.extra {
                    Extra::Name(name) => name.clone(),
                    _ => None,
                },
                ret,
            },
            // pkey_alloc's arguments and pkey_mprotect's prot are unsigned
            // longs: all 64 bits count (the int arguments above are cut to
            // 32 bits, as the kernel cuts them).
            (Kind::Vma, libc::SYS_pkey_alloc) => Event::PkeyAlloc {
                space,
                pid,
                flags: a[0],
                access_rights: a[1],
                ret,
            },
            (Kind::Vma, libc::SYS_pkey_mprotect) => Event::PkeyMprotect {
                space,
                pid,
                addr: a[0],
                len: a[1],
                prot: a[2],
                pkey: a[3].0 as i32,
                ret,
            },
            (Kind::Vma, libc::SYS_pkey_free) => Event::PkeyFree {
                space,
                pid,
                pkey: a[0].0 as i32,
                ret,
            },
            (Kind::Uffd, _) => {
                let read = match p.extra {
                    Extra::Uffd(words) => words,
                    _ => None,
                };
                let [addr, len, mode] = read.unwrap_or_default().map(Hex);
                let fd = a[0].0 as i32;
                if a[1].0 as u32 == UFFDIO_REGISTER {
                    Event::UffdRegister {
                        space,
                        pid,
                        fd,
                        arg: a[2],
                        addr,
                        len,
                        mode,
                        unreadable: read.is_none(),
                        ret,
                    }
                } else {
                    Event::UffdUnregister {
                        space,
                        pid,
                        fd,
                        arg: a[2],
                        addr,
                        len,
                        unreadable: read.is_none(),
                        ret,
                    }
                }
            }
            (Kind::Unmodelled(name), _) => Event::Other {
                space,
                pid,
                name: name.to_string(),
                args: a.to_vec(),
                ret,
            },
            _ => return,
        };
        self.trace.events.push(ev);
    }

    fn on_event(&mut self, pid: Pid, ev: i32) -> Result<(), String> {
        let Some(task) = self.tasks.get_mut(&pid) else {
            return Ok(());
        };
        let space = task.space;
        match ev {
            event::FORK | event::VFORK | event::CLONE => {
                let child =
                    ptrace::event_msg(pid).map_err(|e| format!("PTRACE_GETEVENTMSG: {e}"))? as Pid;
                let flags = task.clone_flags.take().unwrap_or(match ev {
                    event::FORK => 0,
                    _ => libc::CLONE_VM as u64,
                });
                let child_space = if flags & libc::CLONE_VM as u64 != 0 {
                    space
                } else {
                    let s = self.new_space();
                    self.spaces[s] = Space {
                        anon: self.spaces[space].anon.clone(),
                        stacks: self.spaces[space].stacks.clone(),
                    };
                    self.trace.events.push(Event::Fork {
                        parent: space,
                        space: s,
                        pid: child,
                    });
                    s
                };
                // The address space has been copied: other tasks may go on.
                self.release(space, pid);
                let started = self.early.remove(&child);
                self.tasks.insert(
                    child,
                    Task {
                        space: child_space,
                        pending: None,
                        clone_flags: None,
                        started,
                    },
                );
                if started {
                    resume(child, 0);
                }
            }
            event::EXEC => {
                let former =
                    ptrace::event_msg(pid).map_err(|e| format!("PTRACE_GETEVENTMSG: {e}"))? as Pid;
                if former != pid {
                    // A non-leader thread exec'd and took the leader's id.
                    if let Some(t) = self.tasks.remove(&former) {
                        self.tasks.insert(pid, t);
                    }
                }
                let s = self.new_space();
                if let Some(t) = self.tasks.get_mut(&pid) {
                    t.space = s;
                }
                self.capture_exec(pid, s)?;
            }
            event::EXIT => {
                self.capture_final(pid, space);
                self.release(space, pid);
            }
            _ => {}
        }
        Ok(())
    }

    /// A task is gone: it holds and waits for nothing any more.
    fn forget(&mut self, pid: Pid) {
        if let Some(t) = self.tasks.remove(&pid) {
            self.release(t.space, pid);
        }
    }

    /// The tracing loop, from the stopped root task until every traced
    /// task is gone. Returns how the root ended.
    fn run(&mut self, root: Pid) -> Result<String, String> {
        let mut root_status = String::from("unknown");
        ptrace::set_options(root, ptrace::OPTIONS)
            .map_err(|e| format!("PTRACE_SETOPTIONS: {e}"))?;
        let space = self.new_space();
        self.capture_exec(root, space)?;
        self.tasks.insert(
            root,
            Task {
                space,
                pending: None,
                clone_flags: None,
                started: true,
            },
        );
        resume(root, 0);
        while !self.tasks.is_empty() {
            let (pid, status) = match ptrace::wait_any() {
                Ok(r) => r,
                Err(e) if e.raw_os_error() == Some(libc::ECHILD) => break,
                Err(e) => return Err(format!("waitpid: {e}")),
            };
            match status {
                Status::Exited(code) => {
                    self.forget(pid);
                    if pid == root {
                        root_status = format!("exit {code}");
                    }
                }
                Status::Signaled(sig) => {
                    self.forget(pid);
                    if pid == root {
                        root_status = format!("signal {sig}");
                    }
                }
                Status::Syscall => {
                    if self.on_syscall(pid)? {
                        resume(pid, 0);
                    }
                }
                Status::Event(ev) => {
                    self.on_event(pid, ev)?;
                    resume(pid, 0);
                }
                Status::Signal(sig) => match self.tasks.get_mut(&pid) {
                    None => {
                        // A new child stopped before its parent's clone
                        // event: hold it until the event says whose it is.
                        self.early.insert(pid);
                    }
                    Some(t) if !t.started && sig == libc::SIGSTOP => {
                        t.started = true;
                        resume(pid, 0);
                    }
                    Some(_) => {
                        let deliver = if ptrace::has_siginfo(pid) { sig } else { 0 };
                        resume(pid, deliver);
                    }
                },
            }
        }
        Ok(root_status)
    }
}

/// Whether descriptor `fd` of `pid` is a userfaultfd (so an `ioctl` with
/// a registration's number on it is one). The descriptor table is asked
/// directly rather than tracked through `userfaultfd`, `dup`, `close`,
/// fork and descriptor passing.
fn is_userfaultfd(pid: Pid, fd: u64) -> bool {
    i32::try_from(fd).is_ok_and(|fd| {
        fs::read_link(format!("/proc/{pid}/fd/{fd}"))
            .is_ok_and(|target| target.as_os_str() == USERFAULTFD_LINK)
    })
}

/// Resume a task; one that died meanwhile (`ESRCH`) is reported by
/// `waitpid` later, so errors are ignored.
fn resume(pid: Pid, sig: i32) {
    let _ = ptrace::resume(pid, sig);
}

/// The pid tracing this process, if one is (`TracerPid` in
/// `/proc/self/status`).
fn tracer_pid() -> Option<u32> {
    let status = read("/proc/self/status").ok()?;
    tracer_of(&status)
}

fn tracer_of(status: &str) -> Option<u32> {
    let line = status.lines().find(|l| l.starts_with("TracerPid:"))?;
    let pid: u32 = line["TracerPid:".len()..].trim().parse().ok()?;
    (pid != 0).then_some(pid)
}

/// Drop every `final` event that a later one of the same address space
/// supersedes. Each task records its space's map as it exits, and only
/// the last is compared: a JVM's twenty threads would otherwise write the
/// whole map twenty times.
fn keep_last_finals(events: &mut Vec<Event>) {
    let mut last = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        if let Event::Final { space, .. } = e {
            last.insert(*space, i);
        }
    }
    let mut i = 0;
    events.retain(|e| {
        let keep = match e {
            Event::Final { space, .. } => last.get(space) == Some(&i),
            _ => true,
        };
        i += 1;
        keep
    });
}

/// Run `command` under the tracer and return its trace.
pub fn record(command: &[String]) -> Result<Trace, String> {
    let mut rec = Recorder::new(command)?;
    // A task has one tracer: under another one (a nested record, strace,
    // a debugger) the child's PTRACE_TRACEME is refused, which `spawn`
    // would report as if the program could not be started.
    if let Some(tracer) = tracer_pid() {
        return Err(format!(
            "cannot trace {:?}: this vmbench is itself being traced (by pid {tracer}), and \
             ptrace allows one tracer per task; run record outside the tracer",
            command[0]
        ));
    }
    let root = ptrace::spawn_traced(command).map_err(|e| {
        if e.raw_os_error() == Some(libc::EPERM) {
            format!(
                "cannot trace {:?}: ptrace was refused (EPERM); is ptrace permitted here \
                 (kernel.yama.ptrace_scope, a container's seccomp profile)?",
                command[0]
            )
        } else {
            format!("cannot start {:?}: {e}", command[0])
        }
    })?;
    let (pid, status) = ptrace::wait_any().map_err(|e| format!("waitpid: {e}"))?;
    if pid != root || status != Status::Signal(libc::SIGTRAP) {
        ptrace::kill(root);
        return Err(format!(
            "{:?} did not stop at exec ({status:?}): is ptrace permitted here?",
            command[0]
        ));
    }
    match rec.run(root) {
        Ok(status) => {
            rec.trace.status = status;
            keep_last_finals(&mut rec.trace.events);
            Ok(rec.trace)
        }
        Err(e) => {
            for &pid in rec.tasks.keys() {
                ptrace::kill(pid);
            }
            ptrace::kill(root);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tracer_is_read_from_proc_status() {
        assert_eq!(tracer_of("Name:\tx\nTracerPid:\t0\nUid: 0\n"), None);
        assert_eq!(tracer_of("Name:\tx\nTracerPid:\t4242\n"), Some(4242));
        assert_eq!(tracer_of("Name:\tx\n"), None);
    }

    #[test]
    fn stat_fields_skip_the_command_name() {
        let stat =
            "42 (a (b) c) S 1 42 42 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 9 10 11 12 13 14 999";
        assert_eq!(stat_field(stat, 1), None);
        assert_eq!(stat_field(stat, 4), Some(1));
        assert_eq!(stat_field(stat, 28), Some(999));
    }

    #[test]
    fn calls_are_sorted_by_what_the_model_does_with_them() {
        let nr = |n: i64| n as u64;
        let args = |a: &[u64]| {
            let mut out = [0; 6];
            out[..a.len()].copy_from_slice(a);
            out
        };
        // Every madvise is recorded now, flag-changing or page-dropping.
        for advice in [4, 10, 14, 15, 102, 0x7fff] {
            assert_eq!(
                kind(nr(libc::SYS_madvise), &args(&[0, 4096, advice])),
                Kind::Vma
            );
        }
        for call in [
            libc::SYS_mlock,
            libc::SYS_mlock2,
            libc::SYS_munlock,
            libc::SYS_mlockall,
            libc::SYS_munlockall,
            SYS_MSEAL,
            libc::SYS_pkey_alloc,
            libc::SYS_pkey_free,
        ] {
            assert_eq!(kind(nr(call), &args(&[])), Kind::Vma, "{call}");
        }
        // pkey_mprotect with key -1 is mprotect; with a key it is its own.
        let minus_one = u64::from(u32::MAX);
        assert_eq!(
            kind(nr(libc::SYS_pkey_mprotect), &args(&[0, 4096, 1, minus_one])),
            Kind::Replayed
        );
        assert_eq!(
            kind(nr(libc::SYS_pkey_mprotect), &args(&[0, 4096, 1, 1])),
            Kind::Vma
        );
        // prctl: only PR_SET_VMA, and only its anon-name option has an event.
        assert_eq!(
            kind(
                nr(libc::SYS_prctl),
                &args(&[PR_SET_VMA, 0, 0x1000, 4096, 0])
            ),
            Kind::Vma
        );
        assert_eq!(
            kind(nr(libc::SYS_prctl), &args(&[PR_SET_VMA, 1])),
            Kind::Unmodelled("prctl(PR_SET_VMA)")
        );
        assert_eq!(kind(nr(libc::SYS_prctl), &args(&[15])), Kind::Ignore);
        // ioctl: the two registration numbers (whatever the upper bits
        // of the argument register hold), nothing else.
        assert_eq!(
            kind(nr(libc::SYS_ioctl), &args(&[3, u64::from(UFFDIO_REGISTER)])),
            Kind::Uffd
        );
        assert_eq!(
            kind(
                nr(libc::SYS_ioctl),
                &args(&[3, 0xffff_ffff_0000_0000 | u64::from(UFFDIO_UNREGISTER)])
            ),
            Kind::Uffd
        );
        assert_eq!(kind(nr(libc::SYS_ioctl), &args(&[3, 0x5401])), Kind::Ignore);
        assert_eq!(kind(nr(libc::SYS_mmap), &args(&[])), Kind::Replayed);
        assert_eq!(kind(u64::MAX, &args(&[])), Kind::Ignore);
    }

    #[test]
    fn only_the_last_final_map_of_each_space_is_kept() {
        let fin = |space, pid| Event::Final {
            space,
            pid,
            maps: vec![format!("{pid}")],
        };
        let brk = Event::Brk {
            space: 0,
            pid: 1,
            addr: Hex(0),
            ret: Ret(0x1000),
        };
        let mut events = vec![fin(0, 2), brk.clone(), fin(1, 3), fin(0, 1), fin(1, 4)];
        keep_last_finals(&mut events);
        assert_eq!(events, [brk, fin(0, 1), fin(1, 4)]);
    }

    #[test]
    fn anon_names_are_read_as_the_kernel_reads_them() {
        assert_eq!(anon_name(b"heap\0junk"), Some("heap".into()));
        assert_eq!(anon_name(b"\0"), Some(String::new()));
        // No NUL in the whole limit: the name as read, which the kernel
        // refuses for its length.
        let long = [b'x'; ANON_NAME_READ];
        assert_eq!(anon_name(&long).map(|n| n.len()), Some(ANON_NAME_READ));
        // Memory ended before a NUL: the kernel's EFAULT.
        assert_eq!(anon_name(b"abc"), None);
        assert_eq!(anon_name(b""), None);
        // Bytes that are not UTF-8 stay visible as such.
        assert_eq!(anon_name(b"a\xffb\0"), Some("a\u{fffd}b".into()));
    }

    #[test]
    fn structures_are_read_as_little_endian_words() {
        let mut bytes = Vec::new();
        for w in [0x7000_u64, 0x2000, 1] {
            bytes.extend_from_slice(&w.to_le_bytes());
        }
        assert_eq!(words::<3>(&bytes), Some([0x7000, 0x2000, 1]));
        assert_eq!(words::<2>(&bytes[..16]), Some([0x7000, 0x2000]));
        assert_eq!(words::<3>(&bytes[..20]), None);
    }

    #[test]
    fn memory_is_read_up_to_what_is_mapped() {
        let pid = std::process::id() as Pid;
        let text = b"a string in this process\0";
        let got = read_mem(pid, text.as_ptr() as u64, text.len());
        assert_eq!(got, text);
        // Page 0 is never mapped.
        assert!(read_mem(pid, 0, 16).is_empty());
        assert!(!is_userfaultfd(pid, 0));
        assert!(!is_userfaultfd(pid, u64::MAX));
    }
}
