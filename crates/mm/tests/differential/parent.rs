//! The parent side: spawn children, build models, generate, compare,
//! shrink, report.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use mm::call::{self, Call};
use mm::procmaps::{self, MapsEntry};
use mm::FileMode;
use mm::{File, Image, IndexKind, Layout, Mm, Policy, Prot, Segment, PAGE_SIZE};

use super::child::{
    record, CMD_WORDS, EXEC_READY, FILE_FD0, OP_EXEC, OP_FORK, READY_MAGIC, READY_WORDS,
};
use super::gen::{FileInfo, Gen, Rng, Step};

/// `VMSCALE_DIFF_STATS=1`: count results per call kind and errno.
static STATS: AtomicBool = AtomicBool::new(false);
static STATS_MAP: Mutex<std::collections::BTreeMap<String, u64>> =
    Mutex::new(std::collections::BTreeMap::new());

/// The private window: 64 GiB at 16 TiB, far below the program (at
/// 0x555555554000 without randomisation) and the libraries (below
/// 0x7ffff7fff000).
const WINDOW: u64 = 0x1000_0000_0000;
const WINDOW_LEN: u64 = 64 << 30;

/// What every case shares: the executable, the test files, the layout.
struct Setup {
    exe: PathBuf,
    dir: PathBuf,
    /// Path, size, opened for writing.
    files: Vec<(String, u64, bool)>,
    layout: Layout,
    /// The temp directory's filesystem places file mappings with
    /// `thp_get_unmapped_area` (ext4, xfs, btrfs).
    huge_align: bool,
    /// The tiny static program `Step::Exec` runs.
    tiny: Tiny,
}

/// Whether the filesystem holding `dir` aligns large file mappings.
fn fs_huge_align(dir: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return true;
    };
    // SAFETY: statfs fills the zeroed struct we own; `c` is NUL-terminated.
    let magic = unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        if libc::statfs(c.as_ptr(), &mut st) != 0 {
            return true;
        }
        st.f_type as u64
    };
    // ext2/3/4, xfs, btrfs use thp_get_unmapped_area.
    matches!(magic, 0xef53 | 0x5846_5342 | 0x9123_683e)
}

/// Whether this process (and so its child) holds CAP_SYS_RAWIO.
fn has_cap_sys_rawio() -> bool {
    has_cap(17)
}

/// Whether this process (and so its child) holds capability `bit`.
fn has_cap(bit: u32) -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << bit) != 0)
}

fn read_sysctl(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The model's layout for this machine: x86-64 with randomisation off and
/// an 8 MiB stack rlimit (what the child runs with), and the machine's
/// real sysctls.
fn real_layout() -> Layout {
    let mut l = Layout::x86_64(8 << 20);
    if let Some(v) = read_sysctl("/proc/sys/vm/mmap_min_addr") {
        // The kernel's effective minimum is max(this, CONFIG_LSM_MMAP_MIN_ADDR);
        // Setup::new probes it.
        l.mmap_min_addr = v;
        l.dac_mmap_min_addr = v;
    }
    if let Some(v) = read_sysctl("/proc/sys/vm/max_map_count") {
        l.max_map_count = v as usize;
    }
    if let Some(v) = read_sysctl("/proc/sys/vm/overcommit_memory") {
        l.overcommit_never = v == 2;
    }
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
    if let Some(gap) = cmdline
        .split_whitespace()
        .find_map(|w| w.strip_prefix("stack_guard_gap="))
        .and_then(|v| v.parse::<u64>().ok())
    {
        l.stack_guard_gap = gap * PAGE_SIZE;
        l.mmap_base = mm::layout::mmap_base(l.task_size, l.stack_rlimit, l.stack_guard_gap);
    }
    l.thp_align = std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists();
    l.cap_sys_rawio = has_cap_sys_rawio();
    // mlock: CAP_IPC_LOCK (bit 14) and RLIMIT_MEMLOCK, inherited by the child.
    l.cap_ipc_lock = has_cap(14);
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut rl) } == 0 {
        l.memlock_rlimit = rl.rlim_cur;
    }
    // With protection keys enabled, PROT_EXEC-only mappings get a key.
    l.exec_only_pkey = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "ospke"));
    // CONFIG_ANON_VMA_NAME: naming nothing succeeds where names exist.
    // SAFETY: PR_SET_VMA_ANON_NAME of an empty range changes nothing.
    l.anon_vma_name = unsafe { libc::prctl(0x5356_4d41, 0, 0, 0, 0) } == 0;
    l
}

impl Setup {
    fn new() -> std::io::Result<Setup> {
        let exe = std::env::current_exe()?;
        let dir = std::env::temp_dir().join(format!("vmscale-diff-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let dir = dir.canonicalize()?;
        // Sizes: whole pages, a partial last page, one large enough for
        // 2 MiB-aligned file mappings, and one opened read-only.
        let specs: [(u64, bool); 4] = [
            (16 * PAGE_SIZE, true),
            (3 * PAGE_SIZE + 100, true),
            (600 * PAGE_SIZE, true),
            (8 * PAGE_SIZE, false),
        ];
        let mut files = Vec::new();
        for (i, &(size, writable)) in specs.iter().enumerate() {
            let path = dir.join(format!("file{i}"));
            let f = std::fs::File::create(&path)?;
            f.set_len(size)?;
            files.push((path.to_string_lossy().into_owned(), size, writable));
        }
        let huge_align = fs_huge_align(&dir);
        let tiny = Tiny::write(&dir)?;
        let mut setup = Setup {
            tiny,
            huge_align,
            exe,
            dir,
            files,
            layout: real_layout(),
        };
        setup.probe_min_addr();
        Ok(setup)
    }

    /// The kernel rounds a hint below its effective `mmap_min_addr` up to
    /// it, which may exceed the sysctl (`CONFIG_LSM_MMAP_MIN_ADDR`): ask a
    /// throw-away child where a one-page mapping hinted at one page goes.
    fn probe_min_addr(&mut self) {
        let Ok(mut child) = Child::spawn(self) else {
            return;
        };
        // PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS
        let probe = Call::mmap(PAGE_SIZE, PAGE_SIZE, 0x1, 0x22, -1, 0);
        if let Ok(a) = child.call(&probe) {
            if a > 0 && (a as u64) < (1 << 32) {
                self.layout.mmap_min_addr = a as u64;
            }
        }
    }

    fn file_spec(&self) -> String {
        self.files
            .iter()
            .map(|(p, _, w)| format!("{}{p}\n", if *w { "w:" } else { "r:" }))
            .collect()
    }

    fn gen_files(&self) -> Vec<FileInfo> {
        self.files
            .iter()
            .map(|&(_, size, _)| FileInfo { size })
            .collect()
    }

    /// Fresh model files (a model's `File`s carry identity for merging,
    /// so each case gets its own).
    fn model_files(&self) -> Vec<Arc<File>> {
        self.files
            .iter()
            .map(|(p, size, w)| {
                File::with_mode(
                    p.clone(),
                    *size,
                    FileMode {
                        read: true,
                        write: *w,
                        noexec: false,
                        huge_align: self.huge_align,
                    },
                )
            })
            .collect()
    }
}

/// The tiny static program `Step::Exec` runs, written by the test itself
/// (no compiler needed): an x86-64 `ET_EXEC` ELF file with a text segment
/// (headers and code, `r-x`), a data segment whose memory runs two pages
/// past its 8 file bytes (so the loader maps a bss), and a
/// `PT_GNU_STACK` asking for a non-executable stack. It writes
/// `EXEC_READY` to stdout, waits for input or its end, and exits.
struct Tiny {
    path: String,
    size: u64,
}

const TINY_TEXT: u64 = 0x40_0000;
const TINY_DATA: u64 = 0x40_1000;
/// File offset of the data segment.
const TINY_DATA_OFF: u64 = 0x1000;
const TINY_DATA_MEMSZ: u64 = 0x2800;
/// Program headers: two `PT_LOAD` and `PT_GNU_STACK`.
const TINY_PHNUM: u64 = 3;

impl Tiny {
    /// The code: `write(1, TINY_DATA, 8); read(0, bss, 8); exit(0)`.
    fn code() -> Vec<u8> {
        let mut c = Vec::new();
        let mov = |c: &mut Vec<u8>, op: u8, v: u32| {
            c.push(op);
            c.extend_from_slice(&v.to_le_bytes());
        };
        // mov eax, imm32 (b8) / edi (bf) / esi (be) / edx (ba)
        mov(&mut c, 0xb8, 1);
        mov(&mut c, 0xbf, 1);
        mov(&mut c, 0xbe, TINY_DATA as u32);
        mov(&mut c, 0xba, 8);
        c.extend_from_slice(&[0x0f, 0x05]); // syscall (write)
        c.extend_from_slice(&[0x31, 0xc0, 0x31, 0xff]); // xor eax, eax; xor edi, edi
        mov(&mut c, 0xbe, (TINY_DATA + PAGE_SIZE) as u32);
        mov(&mut c, 0xba, 8);
        c.extend_from_slice(&[0x0f, 0x05]); // syscall (read)
        mov(&mut c, 0xb8, 60);
        c.extend_from_slice(&[0x31, 0xff, 0x0f, 0x05]); // xor edi, edi; syscall (exit)
        c
    }

    /// Bytes of the text segment: ELF header, program headers, code.
    fn text_len() -> u64 {
        64 + 56 * TINY_PHNUM + Self::code().len() as u64
    }

    fn elf() -> Vec<u8> {
        let mut f = Vec::new();
        let u16le = |f: &mut Vec<u8>, v: u16| f.extend_from_slice(&v.to_le_bytes());
        let u32le = |f: &mut Vec<u8>, v: u32| f.extend_from_slice(&v.to_le_bytes());
        let u64le = |f: &mut Vec<u8>, v: u64| f.extend_from_slice(&v.to_le_bytes());
        // e_ident: magic, 64-bit, little-endian, version 1, System V.
        f.extend_from_slice(&[0x7f, b'E', b'L', b'F', 2, 1, 1, 0]);
        f.extend_from_slice(&[0; 8]);
        u16le(&mut f, 2); // ET_EXEC
        u16le(&mut f, 0x3e); // EM_X86_64
        u32le(&mut f, 1);
        u64le(&mut f, TINY_TEXT + 64 + 56 * TINY_PHNUM); // e_entry
        u64le(&mut f, 64); // e_phoff
        u64le(&mut f, 0); // e_shoff
        u32le(&mut f, 0); // e_flags
        u16le(&mut f, 64); // e_ehsize
        u16le(&mut f, 56); // e_phentsize
        u16le(&mut f, TINY_PHNUM as u16);
        u16le(&mut f, 64); // e_shentsize
        u16le(&mut f, 0); // e_shnum
        u16le(&mut f, 0); // e_shstrndx
        let phdr = |f: &mut Vec<u8>, ty: u32, flags: u32, off: u64, va: u64, fsz: u64, msz: u64| {
            u32le(f, ty);
            u32le(f, flags);
            u64le(f, off);
            u64le(f, va);
            u64le(f, va);
            u64le(f, fsz);
            u64le(f, msz);
            u64le(f, if ty == 1 { PAGE_SIZE } else { 16 });
        };
        let text = Self::text_len();
        // PT_LOAD r-x, PT_LOAD rw-, PT_GNU_STACK rw-.
        phdr(&mut f, 1, 5, 0, TINY_TEXT, text, text);
        phdr(&mut f, 1, 6, TINY_DATA_OFF, TINY_DATA, 8, TINY_DATA_MEMSZ);
        phdr(&mut f, 0x6474_e551, 6, 0, 0, 0, 0);
        f.extend_from_slice(&Self::code());
        f.resize(TINY_DATA_OFF as usize, 0);
        f.extend_from_slice(&EXEC_READY.to_ne_bytes());
        f
    }

    fn write(dir: &std::path::Path) -> std::io::Result<Tiny> {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("tiny-static");
        let bytes = Self::elf();
        std::fs::write(&path, &bytes)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        Ok(Tiny {
            path: path.to_string_lossy().into_owned(),
            size: bytes.len() as u64,
        })
    }

    /// What the model maps for it (a fresh `File`, as each case's files
    /// are fresh). The initial stack: the pages holding the strings exec
    /// copies (the path twice, as `argv[0]` and as the name of the
    /// executable, no environment, below one pointer-sized word at the
    /// top), plus the 128 KiB the kernel adds below them.
    fn image(&self) -> Image {
        let file = File::with_mode(
            self.path.clone(),
            self.size,
            FileMode {
                read: true,
                write: false,
                noexec: false,
                huge_align: false,
            },
        );
        let strings = 8 + 2 * (self.path.len() as u64 + 1);
        Image {
            segments: vec![
                Segment {
                    file: Arc::clone(&file),
                    offset: 0,
                    vaddr: TINY_TEXT,
                    filesz: Self::text_len(),
                    memsz: Self::text_len(),
                    prot: Prot::READ | Prot::EXEC,
                },
                Segment {
                    file,
                    offset: TINY_DATA_OFF,
                    vaddr: TINY_DATA,
                    filesz: 8,
                    memsz: TINY_DATA_MEMSZ,
                    prot: Prot::READ | Prot::WRITE,
                },
            ],
            interp: Vec::new(),
            stack_size: strings.next_multiple_of(PAGE_SIZE) + (128 << 10),
        }
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The model file that descriptor `fd` names in every child.
fn model_file(files: &[Arc<File>], fd: i32) -> Option<Arc<File>> {
    let i = usize::try_from(fd.checked_sub(FILE_FD0)?).ok()?;
    files.get(i).cloned()
}

/// A running child.
struct Child {
    proc: std::process::Child,
    /// `None` once dropped (which ends every process of the chain).
    stdin: Option<std::process::ChildStdin>,
    stdout: std::process::ChildStdout,
    pid: u32,
    brk0: u64,
}

impl Child {
    fn spawn(setup: &Setup) -> Result<Child, String> {
        let mut cmd = Command::new(&setup.exe);
        cmd.env("VMSCALE_DIFF_CHILD", "1")
            .env("VMSCALE_DIFF_FILES", setup.file_spec())
            .env("VMSCALE_DIFF_EXEC", &setup.tiny.path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut rl = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the struct we own.
        unsafe { libc::getrlimit(libc::RLIMIT_STACK, &mut rl) };
        let want = 8u64 << 20;
        let rl = libc::rlimit {
            rlim_cur: want.min(rl.rlim_max),
            rlim_max: rl.rlim_max,
        };
        // SAFETY: the closure runs between fork and exec and makes only
        // async-signal-safe system calls (personality, setrlimit).
        unsafe {
            cmd.pre_exec(move || {
                let cur = libc::personality(0xffff_ffff);
                if libc::personality((cur as libc::c_ulong) | 0x0040000) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::setrlimit(libc::RLIMIT_STACK, &rl) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut proc = cmd.spawn().map_err(|e| format!("spawn child: {e}"))?;
        let stdin = proc.stdin.take().expect("piped stdin");
        let mut stdout = proc.stdout.take().expect("piped stdout");
        let pid = proc.id();
        let mut bytes = [0u8; READY_WORDS * 8];
        stdout
            .read_exact(&mut bytes)
            .map_err(|e| format!("child did not report ready: {e}"))?;
        let w = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[i * 8..i * 8 + 8]);
            u64::from_ne_bytes(b)
        };
        if w(0) != READY_MAGIC {
            return Err("bad ready record from child".into());
        }
        let nfiles = w(3) as usize;
        let numbered = (0..nfiles).all(|i| w(4 + i) as i64 == i64::from(FILE_FD0) + i as i64);
        if nfiles != setup.files.len() || !numbered {
            return Err("child could not open its files as the calls number them".into());
        }
        Ok(Child {
            proc,
            stdin: Some(stdin),
            stdout,
            pid,
            brk0: w(1),
        })
    }

    fn call(&mut self, call: &Call) -> Result<i64, String> {
        self.send(&record(call), &call.to_string())
    }

    /// Send one command record; the raw answer.
    fn send(&mut self, rec: &[u64; CMD_WORDS], what: &str) -> Result<i64, String> {
        let mut bytes = [0u8; CMD_WORDS * 8];
        for (i, w) in rec.iter().enumerate() {
            bytes[i * 8..i * 8 + 8].copy_from_slice(&w.to_ne_bytes());
        }
        self.stdin
            .as_mut()
            .ok_or("child closed")?
            .write_all(&bytes)
            .map_err(|e| format!("child died? {e}"))?;
        let mut r = [0u8; 8];
        self.stdout
            .read_exact(&mut r)
            .map_err(|e| format!("child died during {what}: {e}"))?;
        Ok(i64::from_ne_bytes(r))
    }

    fn proc_file(&self, name: &str) -> Result<String, String> {
        std::fs::read_to_string(format!("/proc/{}/{name}", self.pid))
            .map_err(|e| format!("read /proc/{}/{name}: {e}", self.pid))
    }

    /// The map with each mapping's raw `vm_flags` (as `VmFlags:` shows
    /// them), from one read of `smaps`.
    fn smaps_flags(&self) -> Result<Vec<(MapsEntry, u64)>, String> {
        procmaps::parse_smaps_vmflags(&self.proc_file("smaps")?)
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        // End of input ends the process serving commands (a forked one
        // too: its waiting parent then leaves, and so on up the chain)
        // and the exec'd program; kill only what is still there after.
        drop(self.stdin.take());
        for _ in 0..20_000 {
            if !matches!(self.proc.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        let _ = self.proc.kill();
        let _ = self.proc.wait();
    }
}

/// A child and the models built from its initial state.
struct Pair {
    child: Child,
    models: Vec<Mm>,
    files: Vec<Arc<File>>,
    start_brk: u64,
}

impl Pair {
    fn start(setup: &Setup) -> Result<Pair, String> {
        let child = Child::spawn(setup)?;
        let smaps = procmaps::parse_smaps(&child.proc_file("smaps")?)?;
        let stat = child.proc_file("stat")?;
        let tail = &stat[stat.rfind(')').ok_or("bad stat")? + 1..];
        let fields: Vec<&str> = tail.split_whitespace().collect();
        // Field n of proc(5) is fields[n - 3].
        let field = |n: usize| -> Result<u64, String> {
            fields
                .get(n - 3)
                .and_then(|f| f.parse().ok())
                .ok_or_else(|| format!("bad stat field {n}"))
        };
        let start_stack = field(28)?;
        let start_brk = field(47)?;
        let files = setup.model_files();
        let mut models = Vec::new();
        for kind in IndexKind::ALL {
            let policy = Arc::new(Policy {
                index: kind,
                ..Policy::default()
            });
            let layout = setup.layout.clone();
            let mm = Mm::from_smaps(
                &policy,
                layout,
                &smaps,
                start_brk,
                child.brk0,
                start_stack,
                &files,
            )
            .map_err(|e| format!("Mm::from_smaps: {e}"))?;
            models.push(mm);
        }
        Ok(Pair {
            child,
            models,
            files,
            start_brk,
        })
    }
}

/// Which lines of a map the test compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum View {
    /// While the child serves calls: all but its own stack (which the
    /// model never changes, and the kernel may grow) and what lies above
    /// the address space (`[vsyscall]`).
    Calls,
    /// After an exec: all but the vDSO's mappings (`[vvar]`,
    /// `[vvar_vclock]`, `[vdso]`: `Mm::exec` does not model them) and
    /// `[vsyscall]`. The new `[stack]` is compared.
    Exec,
}

fn comparable<T>(maps: Vec<(MapsEntry, T)>, task_size: u64, view: View) -> Vec<(MapsEntry, T)> {
    maps.into_iter()
        .filter(|(e, _)| {
            let name = e.name.as_deref();
            let skip = match view {
                View::Calls => name == Some("[stack]"),
                View::Exec => matches!(name, Some("[vvar]" | "[vvar_vclock]" | "[vdso]")),
            };
            !skip && e.start < task_size
        })
        .collect()
}

fn same_maps<T>(a: &[(MapsEntry, T)], b: &[(MapsEntry, T)]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.0.same_mapping(&y.0))
}

fn line(e: &MapsEntry) -> String {
    format!(
        "{:x}-{:x} {} {:08x} {}",
        e.start,
        e.end,
        e.perms(),
        e.offset,
        e.name.as_deref().unwrap_or("")
    )
}

/// The `vm_flags` bits the test compares: every bit `/proc/<pid>/smaps`
/// prints but one. The kernel prints nothing for the protection-key bits (they
/// are `ProtectionKey:`, absent on a CPU without PKU), so they drop out
/// of both sides alike.
/// `sd` (`VM_SOFTDIRTY`) is left out: a soft-dirty kernel sets it on every
/// new VMA and `clear_refs` clears it, and the model does not track
/// soft-dirty (see the module's documentation).
fn compared_flags(bits: u64) -> u64 {
    bits & !mm::VmFlags::PKEY_MASK.bits() & !mm::VmFlags::SOFTDIRTY.bits()
}

/// The model's map with each VMA's raw flags.
fn model_smaps(mm: &Mm) -> Vec<(MapsEntry, u64)> {
    mm.maps()
        .into_iter()
        .zip(mm.vmas())
        .map(|(e, v)| (e, v.flags().bits()))
        .collect()
}

/// `start_brk` of a process, from `/proc/<pid>/stat` (field 47).
fn stat_start_brk(child: &Child) -> Result<u64, String> {
    let stat = child.proc_file("stat")?;
    let tail = &stat[stat.rfind(')').ok_or("bad stat")? + 1..];
    tail.split_whitespace()
        .nth(47 - 3)
        .and_then(|f| f.parse().ok())
        .ok_or_else(|| "bad stat field 47".to_string())
}

/// A mismatch: at which step, and what differed.
#[derive(Debug, Clone)]
struct Mismatch {
    /// Index of the step after which the mismatch showed (`None`: the
    /// initial map already differed).
    at: Option<usize>,
    report: String,
}

/// The outcome of running a sequence.
struct Run {
    /// Kernel and per-model results of every step run.
    results: Vec<(i64, Vec<i64>)>,
    mismatch: Option<Mismatch>,
}

/// Compare the models with the kernel after a step; `None` if they agree.
/// Maps line by line, then, where the lines agree, `VmFlags` VMA by VMA.
fn compare(
    pair: &Pair,
    setup: &Setup,
    kret: Option<(i64, &[i64])>,
    view: View,
) -> Result<Option<String>, String> {
    let mut report = String::new();
    if let Some((k, ms)) = kret {
        for (mm, &m) in pair.models.iter().zip(ms) {
            if m != k {
                let _ = writeln!(
                    report,
                    "  result: kernel {} but model[{}] {}",
                    result_str(k),
                    mm.index_kind(),
                    result_str(m)
                );
            }
        }
    }
    let task_size = setup.layout.task_size;
    let kmaps = comparable(pair.child.smaps_flags()?, task_size, view);
    if STATS.load(Ordering::Relaxed) {
        // Which flags the comparisons saw (on the kernel's side), per VMA
        // and comparison.
        let mut stats = STATS_MAP.lock().unwrap_or_else(|e| e.into_inner());
        for (_, bits) in &kmaps {
            for n in procmaps::vm_flags_mnemonics(*bits) {
                *stats.entry(format!("VmFlags {n}")).or_default() += 1;
            }
        }
    }
    for mm in &pair.models {
        let mmaps = comparable(model_smaps(mm), task_size, view);
        if !same_maps(&kmaps, &mmaps) {
            let _ = writeln!(report, "  maps differ (model[{}]):", mm.index_kind());
            let klines: Vec<String> = kmaps.iter().map(|(e, _)| line(e)).collect();
            let mlines: Vec<String> = mmaps.iter().map(|(e, _)| line(e)).collect();
            for l in &klines {
                if !mlines.contains(l) {
                    let _ = writeln!(report, "    kernel only: {l}");
                }
            }
            for l in &mlines {
                if !klines.contains(l) {
                    let _ = writeln!(report, "    model only:  {l}");
                }
            }
        } else {
            for ((e, kf), (_, mf)) in kmaps.iter().zip(&mmaps) {
                if compared_flags(*kf) != compared_flags(*mf) {
                    let _ = writeln!(
                        report,
                        "  VmFlags differ (model[{}]) at {}:\n    kernel {}\n    model  {}",
                        mm.index_kind(),
                        line(e),
                        procmaps::smaps_vmflags_line(compared_flags(*kf)),
                        procmaps::smaps_vmflags_line(compared_flags(*mf)),
                    );
                }
            }
        }
        if view == View::Exec {
            // The heap starts, empty, after the program.
            let kbrk = stat_start_brk(&pair.child)?;
            if mm.brk_value() != kbrk {
                let _ = writeln!(
                    report,
                    "  start_brk: kernel {kbrk:#x} but model[{}] {:#x}",
                    mm.index_kind(),
                    mm.brk_value()
                );
            }
        }
        if let Err(e) = mm.validate() {
            let _ = writeln!(report, "  model[{}] invalid: {e}", mm.index_kind());
        }
    }
    Ok((!report.is_empty()).then_some(report))
}

/// Run one step in the child and the models: the kernel's and the
/// models' raw results, and the view to compare after it. A fork answers
/// 0 on both sides when it worked (the new pid is the harness's), an exec
/// 0 when the program runs.
fn run_step(pair: &mut Pair, setup: &Setup, step: &Step) -> Result<(i64, Vec<i64>, View), String> {
    match step {
        Step::Call(call) => {
            let k = pair.child.call(call)?;
            let ms: Vec<i64> = pair
                .models
                .iter()
                .map(|mm| call::raw(call.apply(mm, |fd| model_file(&pair.files, fd))))
                .collect();
            Ok((k, ms, View::Calls))
        }
        Step::Fork => {
            let k = pair.child.send(&[OP_FORK, 0, 0, 0, 0, 0, 0], "fork")?;
            if k <= 0 {
                // The model cannot fail a fork: report the kernel's errno.
                return Ok((k, vec![0; pair.models.len()], View::Calls));
            }
            pair.child.pid = k as u32;
            pair.models = pair.models.iter().map(Mm::fork).collect();
            Ok((0, vec![0; pair.models.len()], View::Calls))
        }
        Step::Exec => {
            let k = pair.child.send(&[OP_EXEC, 0, 0, 0, 0, 0, 0], "exec")?;
            let k = if k as u64 == EXEC_READY { 0 } else { k };
            let image = setup.tiny.image();
            let ms = pair
                .models
                .iter()
                .map(|mm| {
                    mm.exec(&image)
                        .map_or_else(|e| -i64::from(e.code()), |()| 0)
                })
                .collect();
            Ok((k, ms, View::Exec))
        }
    }
}

/// Run `steps` (or generate `n` calls with `gen`, with forks among them
/// and maybe an exec after them) in a fresh child and fresh models,
/// stopping at the first mismatch. Nothing runs after an exec.
fn run(
    setup: &Setup,
    steps: &mut Vec<Step>,
    mut gen: Option<(&mut Gen, usize)>,
) -> Result<Run, String> {
    let pair = Pair::start(setup)?;
    let mut pair = pair;
    if let Some((g, _)) = gen.as_mut() {
        g.brk0 = pair.child.brk0;
        g.start_brk = pair.start_brk;
    }
    let mut results = Vec::new();
    if let Some(report) = compare(&pair, setup, None, View::Calls)? {
        return Ok(Run {
            results,
            mismatch: Some(Mismatch { at: None, report }),
        });
    }
    let mut ncalls = 0;
    let mut i = 0;
    loop {
        if let Some((g, n)) = gen.as_mut() {
            let step = if ncalls < *n {
                g.step(&pair.models[0])
            } else {
                match g.last_step() {
                    Some(s) => s,
                    None => break,
                }
            };
            steps.push(step);
        }
        let Some(&step) = steps.get(i) else {
            break;
        };
        if let Step::Call(_) = step {
            ncalls += 1;
        }
        let (k, ms, view) = run_step(&mut pair, setup, &step)?;
        if let (Some((g, _)), Step::Call(call)) = (gen.as_mut(), &step) {
            record_owned(g, call, k);
        }
        if STATS.load(Ordering::Relaxed) {
            let r = if k < 0 { result_str(k) } else { "ok".into() };
            let name = match &step {
                Step::Call(c) => c.name(),
                Step::Fork => "fork",
                Step::Exec => "exec",
            };
            *STATS_MAP
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(format!("{name} {r}"))
                .or_default() += 1;
        }
        results.push((k, ms.clone()));
        if let Some(report) = compare(&pair, setup, Some((k, &ms)), view)? {
            return Ok(Run {
                results,
                mismatch: Some(Mismatch {
                    at: Some(i),
                    report,
                }),
            });
        }
        i += 1;
        if matches!(step, Step::Exec) {
            break;
        }
    }
    Ok(Run {
        results,
        mismatch: None,
    })
}

/// Ranges the kernel gave to a successful call become the test's own.
fn record_owned(g: &mut Gen, call: &Call, k: i64) {
    if k < 0 {
        return;
    }
    let k = k as u64;
    match call {
        Call::Mmap(c) => g.own(k, k + c.len.next_multiple_of(PAGE_SIZE)),
        Call::Mremap(c) => g.own(k, k + c.new_len.next_multiple_of(PAGE_SIZE)),
        _ => {}
    }
}

/// A raw result as text: an address or value, or the errno's name.
fn result_str(r: i64) -> String {
    if r < 0 && r > -4096 {
        match mm::Errno::from_code((-r) as i32) {
            Some(e) => format!("-{}", e.name()),
            None => format!("-errno{}", -r),
        }
    } else {
        format!("{r:#x}")
    }
}

fn case_seed(seed: u64, case: u64) -> u64 {
    let mut r = Rng::new(seed ^ case.wrapping_mul(0xd1b5_4a32_d192_ed03));
    r.next()
}

fn new_gen(setup: &Setup, seed: u64, case: u64) -> Gen {
    let mut rng = Rng::new(case_seed(seed, case));
    let cluster = rng.pick(&[12, 24, 32, 64]);
    Gen {
        cluster,
        rng,
        window: WINDOW,
        window_len: WINDOW_LEN,
        owned: vec![(WINDOW, WINDOW + WINDOW_LEN)],
        files: setup.gen_files(),
        brk0: 0,
        start_brk: 0,
    }
}

/// Delete steps one at a time while the mismatch persists.
fn shrink(setup: &Setup, mut calls: Vec<Step>) -> Result<Vec<Step>, String> {
    loop {
        let mut progress = false;
        let mut i = 0;
        while i < calls.len() {
            let mut trial = calls.clone();
            trial.remove(i);
            // A trial whose child dies proves nothing: keep the call.
            let mismatch = run(setup, &mut trial, None).ok().and_then(|r| r.mismatch);
            if let Some(m) = mismatch {
                // Keep only what leads to the mismatch.
                let upto = m.at.map_or(0, |a| a + 1);
                trial.truncate(upto);
                calls = trial;
                progress = true;
            } else {
                i += 1;
            }
        }
        if !progress {
            return Ok(calls);
        }
    }
}

fn report_failure(
    setup: &Setup,
    seed: u64,
    case: u64,
    ncalls: usize,
    calls: Vec<Step>,
) -> Result<(), String> {
    let original = calls.len();
    let shrunk = shrink(setup, calls)?;
    let mut shrunk = shrunk;
    let r = run(setup, &mut shrunk, None)?;
    let m = r.mismatch.clone().unwrap_or(Mismatch {
        at: None,
        report: "  (mismatch did not reproduce after shrinking)".into(),
    });
    eprintln!("\n=== differential MISMATCH: seed {seed:#x}, case {case} ===");
    eprintln!(
        "reproduce: VMSCALE_DIFF_SEED={seed:#x} VMSCALE_DIFF_CASE={case} VMSCALE_DIFF_CALLS={ncalls} \
         cargo test -p mm --release --test differential"
    );
    for (i, (path, size, writable)) in setup.files.iter().enumerate() {
        let mode = if *writable { "O_RDWR" } else { "O_RDONLY" };
        eprintln!("fd {}: {path}, {mode}, {size} bytes", FILE_FD0 + i as i32);
    }
    if shrunk.iter().any(|s| matches!(s, Step::Exec)) {
        eprintln!("exec runs {} ({} bytes)", setup.tiny.path, setup.tiny.size);
    }
    eprintln!("shrunk from {original} to {} steps:", shrunk.len());
    for (i, c) in shrunk.iter().enumerate() {
        let (k, ms) = r.results.get(i).cloned().unwrap_or((0, Vec::new()));
        let ms: Vec<String> = ms.iter().map(|&m| result_str(m)).collect();
        let mark = if m.at == Some(i) {
            "  <== MISMATCH"
        } else {
            ""
        };
        eprintln!(
            "  #{i:<3} {c}\n        kernel {}  model {}{mark}",
            result_str(k),
            ms.join(" / ")
        );
    }
    if m.at.is_none() {
        eprintln!("the initial map already differs:");
    }
    eprint!("{}", m.report);
    Ok(())
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    if let Some(hex) = v.strip_prefix("0x") {
        u64::from_str_radix(hex, 16).ok()
    } else {
        v.parse().ok()
    }
}

/// The parent's main; the process exit code.
pub fn main() -> i32 {
    let seed = env_u64("VMSCALE_DIFF_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    let cases = env_u64("VMSCALE_DIFF_CASES").unwrap_or(300);
    let ncalls = env_u64("VMSCALE_DIFF_CALLS").unwrap_or(50) as usize;
    let only = env_u64("VMSCALE_DIFF_CASE");
    let threads = env_u64("VMSCALE_DIFF_THREADS").unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get() as u64)
            .min(4)
    });
    let setup = match Setup::new() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("differential: cannot set up temp files: {e}");
            return 1;
        }
    };
    let l = &setup.layout;
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    println!(
        "differential: Linux {}, seed {seed:#x}, {} cases x {ncalls} calls, {threads} threads \
         (mmap_base {:#x}, mmap_min_addr {:#x}, max_map_count {}, thp_align {})",
        release.trim(),
        if only.is_some() { 1 } else { cases },
        l.mmap_base,
        l.mmap_min_addr,
        l.max_map_count,
        l.thp_align
    );
    STATS.store(
        std::env::var_os("VMSCALE_DIFF_STATS").is_some(),
        Ordering::Relaxed,
    );
    let t0 = Instant::now();
    let case_list: Vec<u64> = match only {
        Some(c) => vec![c],
        None => (0..cases).collect(),
    };
    let next = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let failure: Mutex<Option<(u64, Vec<Step>)>> = Mutex::new(None);
    let error: Mutex<Option<String>> = Mutex::new(None);
    let total_calls = AtomicU64::new(0);
    let new_calls = AtomicU64::new(0);
    let total_forks = AtomicU64::new(0);
    let total_execs = AtomicU64::new(0);
    let forked_cases = AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| loop {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                let Some(&case) = case_list.get(i) else {
                    return;
                };
                let mut g = new_gen(&setup, seed, case);
                let mut calls = Vec::new();
                match run(&setup, &mut calls, Some((&mut g, ncalls))) {
                    Ok(r) => {
                        let ran = &calls[..r.results.len()];
                        let count =
                            |f: fn(&Step) -> bool| ran.iter().filter(|s| f(s)).count() as u64;
                        total_calls
                            .fetch_add(count(|s| matches!(s, Step::Call(_))), Ordering::Relaxed);
                        new_calls.fetch_add(count(is_new_call), Ordering::Relaxed);
                        total_forks
                            .fetch_add(count(|s| matches!(s, Step::Fork)), Ordering::Relaxed);
                        total_execs
                            .fetch_add(count(|s| matches!(s, Step::Exec)), Ordering::Relaxed);
                        if ran.iter().any(|s| matches!(s, Step::Fork)) {
                            forked_cases.fetch_add(1, Ordering::Relaxed);
                        }
                        if let Some(m) = r.mismatch {
                            calls.truncate(m.at.map_or(0, |a| a + 1));
                            let mut f = failure.lock().unwrap_or_else(|e| e.into_inner());
                            if f.as_ref().is_none_or(|(c, _)| case < *c) {
                                *f = Some((case, calls));
                            }
                            stop.store(true, Ordering::Relaxed);
                        }
                    }
                    Err(e) => {
                        *error.lock().unwrap_or_else(|e| e.into_inner()) =
                            Some(format!("case {case}: {e}"));
                        stop.store(true, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let secs = t0.elapsed().as_secs_f64();
    if STATS.load(Ordering::Relaxed) {
        for (k, n) in STATS_MAP.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            println!("  {k:<28} {n}");
        }
    }
    if let Some(e) = error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        eprintln!("differential: harness error: {e}");
        return 1;
    }
    let done = next.load(Ordering::Relaxed).min(case_list.len() as u64);
    if let Some((case, calls)) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        println!(
            "differential: mismatch after {done} cases, {} calls, {secs:.1} s",
            total_calls.load(Ordering::Relaxed)
        );
        if let Err(e) = report_failure(&setup, seed, case, ncalls, calls) {
            eprintln!("differential: harness error while shrinking: {e}");
        }
        return 1;
    }
    let calls = total_calls.load(Ordering::Relaxed);
    println!(
        "differential: OK: {done} cases, {calls} calls ({:.1} % madvise, mlock family, mseal, \
         names, pkeys, userfaultfd), {} forks (in {} cases), {} execs, \
         0 mismatches (maps and VmFlags), {secs:.1} s (seed {seed:#x})",
        100.0 * new_calls.load(Ordering::Relaxed) as f64 / calls.max(1) as f64,
        total_forks.load(Ordering::Relaxed),
        forked_cases.load(Ordering::Relaxed),
        total_execs.load(Ordering::Relaxed),
    );
    0
}

/// Whether a step is one of the calls issue 14 added (everything but
/// mmap, munmap, mprotect, mremap, brk and the write fault).
fn is_new_call(step: &Step) -> bool {
    match step {
        Step::Call(c) => !matches!(
            c,
            Call::Mmap(_)
                | Call::Munmap(_)
                | Call::Mprotect(_)
                | Call::Mremap(_)
                | Call::Brk(_)
                | Call::WriteFault(_)
        ),
        _ => false,
    }
}
