//! The `execl` program model: what one `execl` of a dynamically linked
//! program does to the address-space model, from the kernel's ELF loader
//! through the dynamic loader's start-up, and an idle population of such
//! processes that keeps libc's reverse map at a chosen size.
//!
//! One exec, in the order the kernel and glibc's `ld.so` issue the calls
//! (as `strace` of `/usr/bin/true` shows on x86-64 Debian 12):
//!
//! 1. The kernel builds a new address space and tears the old one down
//!    (`exec_mmap`: the old `mm` goes through `exit_mmap`); `load_elf_binary`
//!    maps the stack, the executable's four `PT_LOAD` segments at the
//!    non-randomised PIE base, and ld.so's four segments top-down
//!    ([`Mm::exec`]).
//! 2. ld.so relocates itself, writing its RELRO page (a copy-on-write
//!    fault: the VMA gets its anon_vma).
//! 3. It maps `/etc/ld.so.cache` to find libc.
//! 4. It maps libc's whole span read-only at a free address, overlays the
//!    other three segments with `MAP_FIXED`, zeroes the tail of the last
//!    file page (a write fault) and maps the rest of the bss anonymously.
//! 5. Relocation writes libc's and the executable's RELRO pages; then the
//!    three RELRO regions are `mprotect`ed read-only (libc, executable,
//!    ld.so), each splitting its object's writable segment in two.
//! 6. It unmaps the cache; `malloc`'s first `brk` grows the heap, and its
//!    first write faults the heap's first page.
//!
//! Every process maps the same four [`File`]s (one `Arc` each, shared by
//! all workers and the idle population), so every mapping, split and
//! unmap above lands in the same files' reverse maps, which is what makes
//! `execl` the benchmark of the i_mmap lock. After step 5 each of the
//! executable, ld.so and libc is mapped by exactly five file VMAs
//! (`r--`, `r-x`, `r--`, RELRO `r--`, `rw-`), as in `/proc/<pid>/maps`.
//!
//! The layouts are constants taken from `readelf -lW` of the real files
//! on x86-64 Debian 12 (glibc 2.36, coreutils 9.1); the benchmark reads no
//! file at run time.

use std::sync::Arc;

use mm::{Access, File, FileMode, Image, MapFlags, Mm, Policy, Prot, Segment, PAGE_SIZE};

/// Libc file VMAs held by idle processes unless `--resident-vmas` says
/// otherwise: the size at which libc's i_mmap lock dominates exec-heavy
/// kernels on large machines.
pub const DEFAULT_RESIDENT_VMAS: usize = 6000;

/// `--resident-vmas` with `--quick`.
pub const QUICK_RESIDENT_VMAS: usize = 500;

/// Largest `--resident-vmas` accepted (20 000 idle processes).
pub const MAX_RESIDENT_VMAS: usize = 100_000;

/// File VMAs each exec leaves on each of the executable, ld.so and libc.
pub const VMAS_PER_OBJECT: usize = 5;

/// Where a position-independent executable is loaded with address-space
/// randomisation off (`ELF_ET_DYN_BASE` on x86-64).
pub const PIE_BASE: u64 = 0x5555_5555_4000;

/// The initial stack: `setup_arg_pages` expands the argument page by
/// 128 KiB, so a fresh process's `[stack]` spans 132 KiB.
const STACK_SIZE: u64 = 0x21000;

/// glibc `malloc`'s first `sbrk`: 128 KiB of top pad plus its request
/// rounded to a page, the 132 KiB `[heap]` of a fresh process.
const HEAP_GROWTH: u64 = 0x21000;

const R: Prot = Prot::READ;
const RX: Prot = Prot::READ.union(Prot::EXEC);
const RW: Prot = Prot::READ.union(Prot::WRITE);

/// One `PT_LOAD` program header.
#[derive(Debug, Clone, Copy)]
struct Load {
    offset: u64,
    vaddr: u64,
    filesz: u64,
    memsz: u64,
    prot: Prot,
}

/// The parts of an ELF object that its mappings depend on.
#[derive(Debug, Clone, Copy)]
struct Elf {
    path: &'static str,
    /// File size in bytes.
    size: u64,
    /// The four `PT_LOAD` headers: `r--`, `r-x`, `r--`, `rw-`.
    loads: [Load; 4],
    /// `PT_GNU_RELRO`: `(vaddr, memsz)`, at the start of the `rw-` load.
    relro: (u64, u64),
}

const fn load(offset: u64, vaddr: u64, filesz: u64, memsz: u64, prot: Prot) -> Load {
    Load {
        offset,
        vaddr,
        filesz,
        memsz,
        prot,
    }
}

/// `/usr/bin/true` (coreutils 9.1, 35 664 bytes).
const TRUE: Elf = Elf {
    path: "/usr/bin/true",
    size: 35_664,
    loads: [
        load(0x0, 0x0, 0x1290, 0x1290, R),
        load(0x2000, 0x2000, 0x3d59, 0x3d59, RX),
        load(0x6000, 0x6000, 0x1b60, 0x1b60, R),
        load(0x7d70, 0x8d70, 0x470, 0x608, RW),
    ],
    relro: (0x8d70, 0x290),
};

/// `ld-linux-x86-64.so.2` (glibc 2.36, 215 000 bytes).
const LD_SO: Elf = Elf {
    path: "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
    size: 215_000,
    loads: [
        load(0x0, 0x0, 0xd58, 0xd58, R),
        load(0x1000, 0x1000, 0x25111, 0x25111, RX),
        load(0x27000, 0x27000, 0x9c7c, 0x9c7c, R),
        load(0x31900, 0x31900, 0x2810, 0x29d8, RW),
    ],
    relro: (0x31900, 0x1700),
};

/// `libc.so.6` (glibc 2.36, 1 926 232 bytes). Its segments leave no
/// holes, so ld.so needs no `PROT_NONE` fill between them.
const LIBC: Elf = Elf {
    path: "/usr/lib/x86_64-linux-gnu/libc.so.6",
    size: 1_926_232,
    loads: [
        load(0x0, 0x0, 0x25388, 0x25388, R),
        load(0x26000, 0x26000, 0x1550fc, 0x1550fc, RX),
        load(0x17c000, 0x17c000, 0x52c31, 0x52c31, R),
        load(0x1cf8d0, 0x1cf8d0, 0x4f98, 0x12680, RW),
    ],
    relro: (0x1cf8d0, 0x3730),
};

/// `/etc/ld.so.cache` of the same system, in bytes.
const LD_SO_CACHE: (&str, u64) = ("/etc/ld.so.cache", 33_763);

const fn page_down(x: u64) -> u64 {
    x & !(PAGE_SIZE - 1)
}

const fn page_up(x: u64) -> u64 {
    page_down(x + PAGE_SIZE - 1)
}

impl Elf {
    /// Bytes from the first segment's page to the end of the last one's
    /// memory image: what ld.so reserves with its first `mmap`.
    const fn span(&self) -> u64 {
        let last = &self.loads[3];
        last.vaddr + last.memsz - page_down(self.loads[0].vaddr)
    }

    /// The RELRO region ld.so makes read-only, page-rounded as glibc's
    /// `_dl_protect_relro` rounds it (both ends down), relative to the
    /// load address.
    const fn relro_pages(&self) -> (u64, u64) {
        let (vaddr, size) = self.relro;
        (page_down(vaddr), page_down(vaddr + size))
    }

    /// Start of each of the object's five file VMAs after the RELRO
    /// split, relative to the load address.
    fn vma_starts(&self) -> [u64; VMAS_PER_OBJECT] {
        let l = &self.loads;
        [
            page_down(l[0].vaddr),
            page_down(l[1].vaddr),
            page_down(l[2].vaddr),
            page_down(l[3].vaddr),
            self.relro_pages().1,
        ]
    }

    /// The segments as [`Mm::exec`] takes them, at `base`.
    fn segments(&self, file: &Arc<File>, base: u64) -> Vec<Segment> {
        self.loads
            .iter()
            .map(|l| Segment {
                file: Arc::clone(file),
                offset: l.offset,
                vaddr: base + l.vaddr,
                filesz: l.filesz,
                memsz: l.memsz,
                prot: l.prot,
            })
            .collect()
    }
}

/// The program every `execl` worker runs, and the files it maps.
///
/// One `Program` serves a whole run: its files are the `Arc`s that every
/// exec of every worker, and every idle process, maps.
#[derive(Debug)]
pub struct Program {
    /// The executable and ld.so live in the image's segments.
    image: Image,
    ld_so_cache: Arc<File>,
    libc: Arc<File>,
    policy: Arc<Policy>,
}

/// An address space after an exec, and where its libraries landed.
#[derive(Debug)]
pub struct Process {
    mm: Mm,
    ld_so_base: u64,
    libc_base: u64,
}

impl Process {
    /// The address space.
    pub fn mm(&self) -> &Mm {
        &self.mm
    }

    /// Where ld.so was loaded (the `AT_BASE` the kernel passes it).
    #[cfg(test)]
    pub fn ld_so_base(&self) -> u64 {
        self.ld_so_base
    }

    /// Where ld.so loaded libc.
    #[cfg(test)]
    pub fn libc_base(&self) -> u64 {
        self.libc_base
    }

    /// Ends the process: its address space is torn down (`exit_mmap`),
    /// removing its VMAs from the files' reverse maps.
    pub fn exit(self) {
        self.mm.exit();
    }
}

/// Opened read-only, as the loader opens programs and libraries.
fn read_only() -> FileMode {
    FileMode {
        read: true,
        write: false,
        ..FileMode::default()
    }
}

impl Program {
    /// The program with fresh files; its address spaces use `index`.
    #[cfg(test)]
    pub fn new(index: mm::IndexKind) -> Program {
        Program::with_policy(&Arc::new(Policy {
            index,
            ..Policy::default()
        }))
    }

    /// The program, its files and address spaces made under `policy`.
    pub fn with_policy(policy: &Arc<Policy>) -> Program {
        let open = |elf: &Elf| policy.file_with_mode(elf.path, elf.size, read_only());
        let exe = open(&TRUE);
        let ld_so = open(&LD_SO);
        let image = Image {
            segments: TRUE.segments(&exe, PIE_BASE),
            interp: LD_SO.segments(&ld_so, 0),
            stack_size: STACK_SIZE,
        };
        Program {
            ld_so_cache: policy.file_with_mode(LD_SO_CACHE.0, LD_SO_CACHE.1, read_only()),
            libc: open(&LIBC),
            image,
            policy: Arc::clone(policy),
        }
    }

    /// The executable.
    #[cfg(test)]
    pub fn exe(&self) -> &Arc<File> {
        &self.image.segments[0].file
    }

    /// The dynamic loader.
    #[cfg(test)]
    pub fn ld_so(&self) -> &Arc<File> {
        &self.image.interp[0].file
    }

    /// The loader's cache of library paths.
    #[cfg(test)]
    pub fn ld_so_cache(&self) -> &Arc<File> {
        &self.ld_so_cache
    }

    /// The C library.
    #[cfg(test)]
    pub fn libc(&self) -> &Arc<File> {
        &self.libc
    }

    /// Execs the program: `old` (the caller's current process, if any) is
    /// torn down and a new address space runs the program up to `main`.
    /// Errors name the call that failed.
    pub fn exec(&self, old: Option<Process>) -> Result<Process, String> {
        self.exec_replacing(old.map(|p| p.mm))
    }

    /// Execs the program in a freshly forked child: `forked` (the copy of
    /// its parent's address space that `fork` gave the child) is torn down
    /// and a new address space runs the program up to `main`, as a shell
    /// or `make` starts a command. Errors name the call that failed.
    pub fn exec_forked(&self, forked: Mm) -> Result<Process, String> {
        self.exec_replacing(Some(forked))
    }

    fn exec_replacing(&self, old: Option<Mm>) -> Result<Process, String> {
        // The kernel allocates the new mm before it drops the old one
        // (`bprm_mm_init`, then `exec_mmap`).
        let mm = self.policy.mm();
        if let Some(old) = old {
            old.exit();
        }
        mm.exec(&self.image)
            .map_err(|e| format!("exec of {} failed: {e}", TRUE.path))?;
        // Mm::exec places the interpreter top-down from mmap_base in an
        // address space holding only the stack (above mmap_base) and the
        // executable (far below), so its base is known, as AT_BASE tells
        // the real loader. Were it elsewhere, ld.so's first write below
        // would fault on nothing and stop the run; the unit tests check
        // the whole layout.
        let ld_so_base = mm
            .layout()
            .mmap_base
            .checked_sub(page_up(LD_SO.span()))
            .ok_or("mmap_base too low for ld.so")?;
        let mut process = Process {
            mm,
            ld_so_base,
            libc_base: 0,
        };
        self.start(&mut process)?;
        Ok(process)
    }

    /// ld.so's work from its own relocation to `main`'s first `malloc`.
    fn start(&self, p: &mut Process) -> Result<(), String> {
        let mm = &p.mm;
        write_fault(mm, p.ld_so_base + LD_SO.relro.0, "ld.so RELRO")?;
        let cache = mm
            .mmap(
                0,
                LD_SO_CACHE.1,
                Prot::READ,
                MapFlags::PRIVATE,
                Some(&self.ld_so_cache),
                0,
            )
            .map_err(|e| format!("mmap of {} failed: {e}", LD_SO_CACHE.0))?;
        p.libc_base = map_library(mm, &LIBC, &self.libc)?;
        write_fault(mm, p.libc_base + LIBC.relro.0, "libc RELRO")?;
        write_fault(mm, PIE_BASE + TRUE.relro.0, "executable RELRO")?;
        for (elf, base) in [
            (&LIBC, p.libc_base),
            (&TRUE, PIE_BASE),
            (&LD_SO, p.ld_so_base),
        ] {
            protect_relro(mm, elf, base)?;
        }
        mm.munmap(cache, LD_SO_CACHE.1)
            .map_err(|e| format!("munmap of {} failed: {e}", LD_SO_CACHE.0))?;
        let start = mm.brk(0);
        let grown = mm.brk(start + HEAP_GROWTH);
        if grown != start + HEAP_GROWTH {
            return Err(format!("brk to {:#x} refused", start + HEAP_GROWTH));
        }
        write_fault(mm, start, "heap")
    }

    /// Builds idle processes whose libc mappings total exactly `vmas`
    /// file VMAs: each idle process is a finished exec (five libc VMAs);
    /// for a remainder, the last one unmaps its upper libc VMAs. Checks
    /// the total through the VMAs' files.
    pub fn idle_population(&self, vmas: usize) -> Result<Vec<Process>, String> {
        let processes = vmas.div_ceil(VMAS_PER_OBJECT);
        let mut idle = Vec::with_capacity(processes);
        for i in 0..processes {
            let p = self
                .exec(None)
                .map_err(|e| format!("idle process {i}: {e}"))?;
            let keep = (vmas - i * VMAS_PER_OBJECT).min(VMAS_PER_OBJECT);
            if keep < VMAS_PER_OBJECT {
                let from = p.libc_base + LIBC.vma_starts()[keep];
                let end = p.libc_base + page_up(LIBC.span());
                p.mm.munmap(from, end - from)
                    .map_err(|e| format!("idle process {i}: munmap of libc's tail failed: {e}"))?;
            }
            idle.push(p);
        }
        let got: usize = idle.iter().map(|p| self.libc_vmas(p.mm())).sum();
        if got != vmas {
            return Err(format!(
                "idle processes map {got} libc VMAs, expected {vmas}"
            ));
        }
        Ok(idle)
    }

    /// How many of `mm`'s VMAs map this program's libc.
    pub fn libc_vmas(&self, mm: &Mm) -> usize {
        count_vmas_of(mm, &self.libc)
    }
}

/// How many of `mm`'s VMAs map `file` (the same `Arc`).
pub fn count_vmas_of(mm: &Mm, file: &Arc<File>) -> usize {
    mm.vmas()
        .iter()
        .filter(|v| v.file().is_some_and(|f| Arc::ptr_eq(f, file)))
        .count()
}

fn write_fault(mm: &Mm, addr: u64, what: &str) -> Result<(), String> {
    mm.fault(addr, Access::Write)
        .map(drop)
        .map_err(|e| format!("write fault on {what} at {addr:#x} failed: {e}"))
}

/// Maps a shared library as glibc's `_dl_map_segments` does and returns
/// its load address: the whole span with the first segment's protection,
/// the other segments over it with `MAP_FIXED`, then the bss.
fn map_library(mm: &Mm, elf: &Elf, file: &Arc<File>) -> Result<u64, String> {
    let fail = |what: &str, e: mm::Errno| format!("{what} of {} failed: {e}", elf.path);
    let first = &elf.loads[0];
    let base = mm
        .mmap(
            0,
            elf.span(),
            first.prot,
            MapFlags::PRIVATE | MapFlags::DENYWRITE,
            Some(file),
            page_down(first.offset),
        )
        .map_err(|e| fail("mmap", e))?;
    let fixed = MapFlags::PRIVATE | MapFlags::FIXED | MapFlags::DENYWRITE;
    for l in &elf.loads[1..] {
        let start = page_down(l.vaddr);
        let end = page_up(l.vaddr + l.filesz);
        mm.mmap(
            base + start,
            end - start,
            l.prot,
            fixed,
            Some(file),
            page_down(l.offset),
        )
        .map_err(|e| fail("MAP_FIXED mmap of a segment", e))?;
    }
    // The bss: the rest of the last file page is zeroed in place (a
    // write to a private file page), whole pages come from anonymous
    // memory.
    let last = &elf.loads[3];
    let zero = base + last.vaddr + last.filesz;
    let zero_page = page_up(zero);
    let zero_end = page_up(base + last.vaddr + last.memsz);
    if zero_page > zero {
        write_fault(mm, zero, "the tail of a library's data")?;
    }
    if zero_end > zero_page {
        let anon = MapFlags::PRIVATE | MapFlags::FIXED | MapFlags::ANONYMOUS;
        mm.mmap(zero_page, zero_end - zero_page, last.prot, anon, None, 0)
            .map_err(|e| fail("bss mmap", e))?;
    }
    Ok(base)
}

fn protect_relro(mm: &Mm, elf: &Elf, base: u64) -> Result<(), String> {
    let (start, end) = elf.relro_pages();
    if end > start {
        mm.mprotect(base + start, end - start, Prot::READ)
            .map_err(|e| format!("RELRO mprotect of {} failed: {e}", elf.path))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mm::IndexKind;

    /// `(start, end, prot)` of `file`'s VMAs in `mm`, relative to `base`.
    fn layout_of(mm: &Mm, file: &Arc<File>, base: u64) -> Vec<(u64, u64, Prot)> {
        mm.vmas()
            .iter()
            .filter(|v| v.file().is_some_and(|f| Arc::ptr_eq(f, file)))
            .map(|v| (v.start() - base, v.end() - base, v.prot()))
            .collect()
    }

    #[test]
    fn one_exec_maps_five_vmas_per_object_as_proc_maps_shows() {
        for index in IndexKind::ALL {
            let program = Program::new(index);
            let p = program.exec(None).unwrap();
            p.mm().validate().unwrap();
            // The maps of a Debian 12 `cat` (same ld.so and libc), taken
            // from /proc/self/maps.
            assert_eq!(
                layout_of(p.mm(), program.libc(), p.libc_base()),
                [
                    (0x0, 0x26000, R),
                    (0x26000, 0x17c000, RX),
                    (0x17c000, 0x1cf000, R),
                    (0x1cf000, 0x1d3000, R),
                    (0x1d3000, 0x1d5000, RW),
                ],
                "{index}"
            );
            assert_eq!(
                layout_of(p.mm(), program.ld_so(), p.ld_so_base()),
                [
                    (0x0, 0x1000, R),
                    (0x1000, 0x27000, RX),
                    (0x27000, 0x31000, R),
                    (0x31000, 0x33000, R),
                    (0x33000, 0x35000, RW),
                ],
                "{index}"
            );
            assert_eq!(
                layout_of(p.mm(), program.exe(), PIE_BASE),
                [
                    (0x0, 0x2000, R),
                    (0x2000, 0x6000, RX),
                    (0x6000, 0x8000, R),
                    (0x8000, 0x9000, R),
                    (0x9000, 0xa000, RW),
                ],
                "{index}"
            );
            // The cache is gone again; libc's bss, the heap and the stack
            // are the anonymous VMAs.
            assert_eq!(count_vmas_of(p.mm(), program.ld_so_cache()), 0);
            let anon: Vec<_> = p
                .mm()
                .vmas()
                .iter()
                .filter(|v| v.file().is_none())
                .map(|v| (v.start(), v.end()))
                .collect();
            let heap = PIE_BASE + 0xa000;
            let top = p.mm().layout().stack_top;
            assert_eq!(
                anon,
                [
                    (heap, heap + HEAP_GROWTH),
                    (p.libc_base() + 0x1d5000, p.libc_base() + 0x1e2000),
                    (top - STACK_SIZE, top),
                ],
                "{index}"
            );
            assert_eq!(p.mm().map_count(), 18, "{index}");
            // Relocated writable data and the heap hold anonymous pages.
            let relro = p.mm().find_vma(p.libc_base() + 0x1cf000).unwrap();
            assert!(relro.anon().is_some());
            assert!(p.mm().find_vma(heap).unwrap().anon().is_some());
        }
    }

    #[test]
    fn exec_from_a_process_builds_the_same_image() {
        let program = Program::new(IndexKind::Maple);
        let first = program.exec(None).unwrap();
        let maps = first.mm().proc_maps();
        let second = program.exec(Some(first)).unwrap();
        assert_eq!(second.mm().proc_maps(), maps);
        assert_eq!(program.libc_vmas(second.mm()), VMAS_PER_OBJECT);
    }

    #[test]
    fn exec_in_a_forked_child_replaces_the_parents_copy() {
        let program = Program::new(IndexKind::Maple);
        let parent = program.exec(None).unwrap();
        let maps = parent.mm().proc_maps();
        let child = parent.mm().fork();
        assert_eq!(program.libc().imap().count(), 2 * VMAS_PER_OBJECT);
        let p = program.exec_forked(child).unwrap();
        assert_eq!(p.mm().proc_maps(), maps);
        // The forked copy's libc VMAs left libc's reverse map; the exec's
        // took their place.
        assert_eq!(program.libc().imap().count(), 2 * VMAS_PER_OBJECT);
        p.exit();
        assert_eq!(program.libc().imap().count(), VMAS_PER_OBJECT);
    }

    #[test]
    fn idle_population_has_the_requested_libc_vmas() {
        let program = Program::new(IndexKind::Legacy);
        for vmas in [0, 1, 4, 5, 12, 23] {
            let idle = program.idle_population(vmas).unwrap();
            let total: usize = idle.iter().map(|p| program.libc_vmas(p.mm())).sum();
            assert_eq!(total, vmas);
            assert_eq!(idle.len(), vmas.div_ceil(VMAS_PER_OBJECT));
            for p in &idle {
                p.mm().validate().unwrap();
            }
        }
    }

    #[test]
    fn layouts_are_consistent() {
        for elf in [TRUE, LD_SO, LIBC] {
            let l = &elf.loads;
            for pair in l.windows(2) {
                // No holes between segments (ld.so would fill them with
                // PROT_NONE, which the model does not do).
                assert_eq!(
                    page_up(pair[0].vaddr + pair[0].filesz),
                    page_down(pair[1].vaddr)
                );
            }
            for x in l {
                // Offset and address agree modulo the page size, as
                // mapping requires.
                assert_eq!(x.offset % PAGE_SIZE, x.vaddr % PAGE_SIZE, "{}", elf.path);
                assert!(x.offset + x.filesz <= elf.size, "{}", elf.path);
            }
            let (start, end) = elf.relro_pages();
            assert_eq!(start, page_down(l[3].vaddr), "{}", elf.path);
            assert!(end > start && end < page_up(l[3].vaddr + l[3].filesz));
        }
    }
}
