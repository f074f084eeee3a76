//! Property tests of the address-space model's contract, independent of
//! the kernel: a refused call changes nothing, every step leaves valid
//! VMAs, and both VMA indexes give the same map.

use mm::{Access, Advice, Errno, IndexKind, Layout, MapFlags, Mm, MremapFlags, Policy, Prot};
use proptest::prelude::*;

const PAGE: u64 = 4096;
/// A private window of the model's address space the ops stay near.
const BASE: u64 = 0x1000_0000_0000;
const WINDOW_PAGES: u64 = 64;

#[derive(Debug, Clone)]
enum Op {
    Mmap {
        page: u64,
        pages: u64,
        prot: u32,
        flags: u32,
    },
    Munmap {
        page: u64,
        pages: u64,
    },
    Mprotect {
        page: u64,
        pages: u64,
        prot: u32,
    },
    Mremap {
        page: u64,
        old: u64,
        new: u64,
        flags: u32,
        to: u64,
    },
    Brk {
        pages: i64,
    },
    Fault {
        page: u64,
        write: bool,
    },
    // madvise / mlock (issue 14)
    Madvise {
        page: u64,
        pages: u64,
        advice: i32,
    },
    Mlock {
        page: u64,
        pages: u64,
        flags: u32,
    },
    Munlock {
        page: u64,
        pages: u64,
    },
    Mlockall {
        flags: u32,
    },
    Munlockall,
}

fn addr(page: u64) -> u64 {
    BASE + page * PAGE
}

fn op() -> impl Strategy<Value = Op> {
    let page = 0..WINDOW_PAGES;
    let pages = 0..8u64;
    let prot = prop_oneof![0..8u32, Just(0x10u32), Just(0x0100_0000u32)];
    let flags = prop_oneof![
        Just(0x22u32),      // private anonymous
        Just(0x32u32),      // ... fixed
        Just(0x10_0022u32), // ... fixed_noreplace
        Just(0x21u32),      // shared anonymous
        Just(0x0122u32),    // grows-down
        Just(0x4022u32),    // noreserve
        Just(0x20u32),      // no type: EINVAL
        Just(0x8022u32),    // populate
    ];
    prop_oneof![
        (page.clone(), pages.clone(), prot.clone(), flags).prop_map(
            |(page, pages, prot, flags)| Op::Mmap {
                page,
                pages,
                prot,
                flags
            }
        ),
        (page.clone(), pages.clone()).prop_map(|(page, pages)| Op::Munmap { page, pages }),
        (page.clone(), pages.clone(), prot).prop_map(|(page, pages, prot)| Op::Mprotect {
            page,
            pages,
            prot
        }),
        (page.clone(), pages.clone(), pages, 0..8u32, page.clone()).prop_map(
            |(page, old, new, flags, to)| Op::Mremap {
                page,
                old,
                new,
                flags,
                to
            }
        ),
        (-4i64..8).prop_map(|pages| Op::Brk { pages }),
        (page.clone(), any::<bool>()).prop_map(|(page, write)| Op::Fault { page, write }),
        madvise_mlock_op(),
    ]
}

/// The madvise and mlock-family calls, valid and not.
fn madvise_mlock_op() -> impl Strategy<Value = Op> {
    let page = 0..WINDOW_PAGES;
    let pages = 0..8u64;
    let advice = prop_oneof![
        4 => 0..26i32,
        1 => Just(102i32),
        1 => Just(103i32),
        1 => Just(-1i32),
    ];
    prop_oneof![
        4 => (page.clone(), pages.clone(), advice)
            .prop_map(|(page, pages, advice)| Op::Madvise { page, pages, advice }),
        2 => (page.clone(), pages.clone(), 0..3u32)
            .prop_map(|(page, pages, flags)| Op::Mlock { page, pages, flags }),
        1 => (page, pages).prop_map(|(page, pages)| Op::Munlock { page, pages }),
        1 => (0..9u32).prop_map(|flags| Op::Mlockall { flags }),
        1 => Just(Op::Munlockall),
    ]
}

/// Apply `op`; `Err` carries the errno of a refused call. A fault is
/// made inside `guard` ([`Mm::fault_in`]) when one is given.
fn apply(mm: &Mm, op: &Op, heap: u64, guard: Option<&maple::Guard>) -> Result<u64, Errno> {
    match *op {
        Op::Mmap {
            page,
            pages,
            prot,
            flags,
        } => mm.mmap(
            addr(page),
            pages * PAGE,
            Prot::from_bits_retain(prot),
            MapFlags::from_bits_retain(flags),
            None,
            0,
        ),
        Op::Munmap { page, pages } => mm.munmap(addr(page), pages * PAGE).map(|_| 0),
        Op::Mprotect { page, pages, prot } => mm
            .mprotect(addr(page), pages * PAGE, Prot::from_bits_retain(prot))
            .map(|_| 0),
        Op::Mremap {
            page,
            old,
            new,
            flags,
            to,
        } => mm.mremap(
            addr(page),
            old * PAGE,
            new * PAGE,
            MremapFlags::from_bits_retain(flags),
            addr(to + WINDOW_PAGES),
        ),
        Op::Brk { pages } => {
            let want = heap.wrapping_add_signed(pages * PAGE as i64);
            let got = mm.brk(want);
            if got == want {
                Ok(got)
            } else {
                Err(Errno::ENOMEM)
            }
        }
        Op::Fault { page, write } => {
            let access = if write { Access::Write } else { Access::Read };
            match guard {
                Some(g) => mm.fault_in(g, addr(page), access),
                None => mm.fault(addr(page), access),
            }
            .map(|_| 0)
            .map_err(|e| e.errno())
        }
        Op::Madvise {
            page,
            pages,
            advice,
        } => mm
            .madvise(addr(page), pages * PAGE, Advice(advice))
            .map(|_| 0),
        Op::Mlock { page, pages, flags } => mm.mlock2(addr(page), pages * PAGE, flags).map(|_| 0),
        Op::Munlock { page, pages } => mm.munlock(addr(page), pages * PAGE).map(|_| 0),
        Op::Mlockall { flags } => mm.mlockall(flags).map(|_| 0),
        Op::Munlockall => mm.munlockall().map(|_| 0),
    }
}

/// The map without inode numbers (each model numbers its files itself).
fn shape(mm: &Mm) -> Shape {
    mm.maps()
        .into_iter()
        .map(|e| (e.start, e.end, e.perms(), e.offset, e.name))
        .collect()
}

type Shape = Vec<(u64, u64, String, u64, Option<String>)>;

/// Every page outside `touched` is mapped alike (or unmapped) in both maps.
fn same_outside(before: &Shape, after: &Shape, touched: &[(u64, u64)]) -> Result<(), String> {
    let at = |m: &Shape, a: u64| {
        m.iter().find(|e| e.0 <= a && a < e.1).map(|e| {
            // A file page's offset is fixed; an anonymous page has none
            // to compare (its VMA's extent may change on a split).
            let file = e.4.as_ref().is_some_and(|n| !n.starts_with('['));
            (
                e.2.clone(),
                if file { e.3 + (a - e.0) } else { 0 },
                e.4.clone(),
            )
        })
    };
    for page in 0..4 * WINDOW_PAGES {
        let a = addr(page);
        if touched.iter().any(|&(s, e)| s <= a && a < e) {
            continue;
        }
        if at(before, a) != at(after, a) {
            return Err(format!(
                "page {a:#x} changed outside the call's range: {:?} -> {:?}",
                at(before, a),
                at(after, a)
            ));
        }
    }
    Ok(())
}

/// An empty address space on `index` with room for `max_map_count` VMAs.
fn new_mm(index: IndexKind, max_map_count: usize) -> Mm {
    let policy = std::sync::Arc::new(Policy {
        index,
        ..Policy::default()
    });
    let layout = Layout {
        max_map_count,
        ..Layout::default()
    };
    Mm::new(&policy, layout)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("MM_PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256),
        ..ProptestConfig::default()
    })]

    /// A refused call leaves the map exactly as it was, every step leaves
    /// a valid map, and the maple and legacy indexes agree throughout;
    /// so does a maple address space whose faults are made inside one
    /// grace period held across the whole sequence (`fault_in`).
    /// The one documented exception is Linux's own: `mprotect` changes
    /// VMAs in address order and stops at a hole or a refused VMA, so a
    /// failed `mprotect` may have changed VMAs inside its range, and only
    /// there.
    #[test]
    fn refused_calls_change_nothing(ops in proptest::collection::vec(op(), 1..60), max in 6usize..40) {
        let maple = new_mm(IndexKind::Maple, max);
        let legacy = new_mm(IndexKind::Legacy, max);
        let guarded = new_mm(IndexKind::Maple, max);
        let mut guard = maple::pin();
        let heap = BASE + 2 * WINDOW_PAGES * PAGE + (1 << 30);
        maple.set_brk_base(heap);
        legacy.set_brk_base(heap);
        guarded.set_brk_base(heap);
        for op in &ops {
            let before = shape(&maple);
            let brk_before = maple.brk_value();
            let r = apply(&maple, op, heap, None);
            let r2 = apply(&legacy, op, heap, None);
            let r3 = apply(&guarded, op, heap, Some(&guard));
            guard.repin();
            prop_assert_eq!(r, r2, "indexes disagree on {:?}", op);
            prop_assert_eq!(r, r3, "fault and fault_in disagree on {:?}", op);
            maple.validate().map_err(TestCaseError::fail)?;
            legacy.validate().map_err(TestCaseError::fail)?;
            guarded.validate().map_err(TestCaseError::fail)?;
            prop_assert_eq!(shape(&maple), shape(&legacy), "maps differ after {:?}", op);
            prop_assert_eq!(shape(&maple), shape(&guarded), "maps differ after {:?}", op);
            if r.is_err() {
                prop_assert_eq!(maple.brk_value(), brk_before);
                match op {
                    Op::Mprotect { page, pages, prot } => {
                        // PROT_GROWSDOWN extends the range down to the
                        // start of the grows-down VMA.
                        let lo = if prot & 0x0100_0000 != 0 { 0 } else { addr(*page) };
                        let hi = addr(*page) + pages * PAGE;
                        same_outside(&before, &shape(&maple), &[(lo, hi)]).map_err(|e| TestCaseError::fail(format!("{op:?}: {r:?}: {e}")))?;
                    }
                    Op::Mremap { page, old, new, to, .. } => {
                        // Linux unmaps the MREMAP_FIXED target and the
                        // shrunk tail before it checks the source VMA.
                        let src = (addr(*page), addr(*page) + old * PAGE);
                        let dst = (addr(to + WINDOW_PAGES), addr(to + WINDOW_PAGES) + new * PAGE);
                        same_outside(&before, &shape(&maple), &[src, dst]).map_err(TestCaseError::fail)?;
                    }
                    Op::Fault { .. } => {}
                    // madvise, mlock and munlock walk their range in
                    // address order and keep what they changed before a
                    // hole or a refusing VMA, as the kernel does.
                    Op::Madvise { page, pages, .. }
                    | Op::Mlock { page, pages, .. }
                    | Op::Munlock { page, pages } => {
                        let range = (addr(*page), addr(*page) + pages * PAGE);
                        same_outside(&before, &shape(&maple), &[range]).map_err(TestCaseError::fail)?;
                    }
                    _ => prop_assert_eq!(&before, &shape(&maple), "failed {:?} changed the map", op),
                }
            }
        }
    }
}

/// Every VMA's bounds, flags and anon_vma presence: what a refused call
/// must leave alone.
fn full_state(mm: &Mm) -> Vec<(u64, u64, u64, bool)> {
    mm.vmas()
        .iter()
        .map(|v| (v.start(), v.end(), v.flags().bits(), v.anon().is_some()))
        .collect()
}

/// A madvise or mlock-family call with a bad argument.
fn bad_call() -> impl Strategy<Value = (u64, u64, u32)> {
    // (page, kind, value)
    (0..WINDOW_PAGES, 0..8u64, any::<u32>())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("MM_PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256),
        ..ProptestConfig::default()
    })]

    /// madvise, mlock2 and mlockall refuse bad arguments with the
    /// kernel's errno before they look at the map, and change nothing:
    /// no VMA, flag or anon_vma.
    #[test]
    fn bad_lock_and_advice_arguments_change_nothing(
        ops in proptest::collection::vec(op(), 1..40),
        bad in bad_call(),
    ) {
        let mm = new_mm(IndexKind::Maple, 64);
        let heap = BASE + 2 * WINDOW_PAGES * PAGE + (1 << 30);
        mm.set_brk_base(heap);
        for op in &ops {
            let _ = apply(&mm, op, heap, None);
        }
        let before = full_state(&mm);
        let (page, kind, value) = bad;
        let a = addr(page);
        let (got, want) = match kind {
            0 => (mm.madvise(a + 1 + u64::from(value % 4095), PAGE, Advice::DONTFORK), Errno::EINVAL),
            1 => (mm.madvise(a, PAGE, Advice(26 + (value % 76) as i32)), Errno::EINVAL),
            2 => (mm.madvise(a, u64::MAX - u64::from(value % 4095), Advice::DONTNEED), Errno::EINVAL),
            3 => (mm.madvise(u64::MAX - 4095, PAGE * 2, Advice::DONTFORK), Errno::EINVAL),
            4 => (mm.mlock2(a, PAGE, value | 2), Errno::EINVAL),
            5 => (mm.mlockall(value & !7 | 8), Errno::EINVAL),
            6 => (mm.mlockall(4), Errno::EINVAL),
            _ => (mm.munlock(u64::MAX - 4095, PAGE * 2), Errno::EINVAL),
        };
        prop_assert_eq!(got, Err(want));
        prop_assert_eq!(full_state(&mm), before);
    }
}

#[test]
fn split_and_merge_round_trip() {
    let mm = Mm::default();
    let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    let rw = Prot::READ | Prot::WRITE;
    let a = mm.mmap(0, 8 * PAGE, rw, anon, None, 0).unwrap();
    mm.mprotect(a + 2 * PAGE, 2 * PAGE, Prot::READ).unwrap();
    assert_eq!(mm.map_count(), 3);
    mm.mprotect(a + 2 * PAGE, 2 * PAGE, rw).unwrap();
    assert_eq!(mm.map_count(), 1);
    mm.munmap(a + 3 * PAGE, PAGE).unwrap();
    assert_eq!(mm.map_count(), 2);
    // Refilling the hole merges all three again.
    mm.mmap(a + 3 * PAGE, PAGE, rw, anon | MapFlags::FIXED, None, 0)
        .unwrap();
    assert_eq!(mm.map_count(), 1);
    mm.validate().unwrap();
}

#[test]
fn first_write_fault_gives_an_anon_vma_and_blocks_unrelated_merges() {
    let mm = Mm::default();
    let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    let rw = Prot::READ | Prot::WRITE;
    let a = mm
        .mmap(BASE, PAGE, rw, anon | MapFlags::FIXED, None, 0)
        .unwrap();
    assert!(mm.find_vma(a).unwrap().anon().is_none());
    mm.fault(a, Access::Write).unwrap();
    assert!(mm.find_vma(a).unwrap().anon().is_some());
    // A read fault never needs one.
    let b = mm
        .mmap(BASE + 4 * PAGE, PAGE, rw, anon | MapFlags::FIXED, None, 0)
        .unwrap();
    mm.fault(b, Access::Read).unwrap();
    assert!(mm.find_vma(b).unwrap().anon().is_none());
}

#[test]
fn fork_copies_and_exit_empties() {
    let parent = Mm::default();
    let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    let a = parent
        .mmap(0, 4 * PAGE, Prot::READ | Prot::WRITE, anon, None, 0)
        .unwrap();
    parent.fault(a, Access::Write).unwrap();
    let child = parent.fork();
    assert_eq!(child.maps(), parent.maps());
    let (p, c) = (parent.find_vma(a).unwrap(), child.find_vma(a).unwrap());
    assert!(!p.anon().unwrap().inherited());
    assert!(c.anon().unwrap().inherited());
    child.exit();
    assert_eq!(child.map_count(), 0);
    assert_eq!(parent.map_count(), 1);
}

#[test]
fn an_exit_unlinks_each_file_vma_from_its_own_file() {
    use std::sync::Arc;
    // exec and exit remove every VMA of a process in one edit; here the
    // VMAs of three files alternate, and each file's map must lose exactly
    // the exiting process's VMAs of that file.
    let files: Vec<Arc<mm::File>> = (0..3)
        .map(|i| mm::File::new(format!("/lib/lib{i}.so"), 64 * PAGE))
        .collect();
    let private = MapFlags::PRIVATE | MapFlags::FIXED;
    let (mm, other) = (Mm::default(), Mm::default());
    for i in 0..12u64 {
        let file = &files[(i % 3) as usize];
        for space in [&mm, &other] {
            space
                .mmap(
                    BASE + 2 * i * PAGE,
                    PAGE,
                    Prot::READ,
                    private,
                    Some(file),
                    i * PAGE,
                )
                .unwrap();
        }
    }
    let held = |file: &Arc<mm::File>, by: &[&Mm]| -> (usize, usize) {
        let vmas: Vec<usize> = by
            .iter()
            .flat_map(|m| m.vmas())
            .filter(|v| v.file().is_some_and(|f| Arc::ptr_eq(f, file)))
            .map(|v| Arc::as_ptr(&v) as usize)
            .collect();
        let entries = file.imap().entries();
        let ours = entries
            .iter()
            .filter(|e| vmas.contains(&(Arc::as_ptr(&e.vma) as usize)))
            .count();
        (entries.len(), ours)
    };
    let child = mm.fork();
    for file in &files {
        assert_eq!(held(file, &[&mm, &other, &child]), (12, 12));
    }
    child.exit();
    for file in &files {
        assert_eq!(held(file, &[&mm, &other]), (8, 8));
    }
    mm.exit();
    for file in &files {
        assert_eq!(held(file, &[&other]), (4, 4));
    }
    drop(other);
    assert!(files.iter().all(|f| !f.imap().is_mapped()));
}

#[test]
fn exec_maps_an_image() {
    use mm::{File, Image, Segment};
    let exe = File::new("/usr/bin/prog", 0x5000);
    let ld = File::new("/usr/lib/ld.so", 0x3000);
    let mm = Mm::default();
    let seg = |file: &std::sync::Arc<File>, offset, vaddr, filesz, memsz, prot| Segment {
        file: file.clone(),
        offset,
        vaddr,
        filesz,
        memsz,
        prot,
    };
    let image = Image {
        segments: vec![
            seg(&exe, 0, 0x400000, 0x1000, 0x1000, Prot::READ),
            seg(
                &exe,
                0x1000,
                0x401000,
                0x2000,
                0x2000,
                Prot::READ | Prot::EXEC,
            ),
            seg(
                &exe,
                0x3000,
                0x403000,
                0x1800,
                0x4000,
                Prot::READ | Prot::WRITE,
            ),
        ],
        interp: vec![
            seg(&ld, 0, 0, 0x1000, 0x1000, Prot::READ),
            seg(&ld, 0x1000, 0x1000, 0x2000, 0x2000, Prot::READ | Prot::EXEC),
        ],
        stack_size: 132 * 1024,
    };
    mm.exec(&image).unwrap();
    let names: Vec<_> = mm
        .maps()
        .into_iter()
        .map(|e| e.name.unwrap_or_default())
        .collect();
    assert!(
        names.iter().filter(|n| *n == "/usr/bin/prog").count() == 3,
        "{names:?}"
    );
    assert!(names.iter().any(|n| n == "/usr/lib/ld.so"), "{names:?}");
    assert!(names.iter().any(|n| n == "[stack]"), "{names:?}");
    // The heap starts after the bss.
    assert_eq!(mm.brk(0), 0x407000);
    mm.validate().unwrap();
}

/// A segment whose address, file end or memory end wraps past 2^64 is
/// refused with EINVAL (it used to overflow: a panic in debug builds, a
/// wrapped mapping in release). Found by the `mm_calls` fuzz target.
#[test]
fn exec_refuses_segments_whose_addresses_wrap() {
    use mm::{File, Image, Segment};
    use std::sync::Arc;
    let exe = File::new("/usr/bin/prog", 1 << 20);
    let seg = |vaddr: u64, filesz: u64, memsz: u64| Segment {
        file: Arc::clone(&exe),
        offset: 0,
        vaddr,
        filesz,
        memsz,
        prot: Prot::READ,
    };
    let cases = [
        (seg(0x400000, u64::MAX, u64::MAX), false),
        (seg(0x400000, 0x1000, u64::MAX - 0x1000), false),
        (seg(u64::MAX - 0x800, 0x1000, 0x1000), false),
        // The interpreter's span (vaddr + memsz) and its placement.
        (seg(u64::MAX - 0x800, 0x1000, 0x1000), true),
        (seg(0x1000, 0x1000, u64::MAX), true),
    ];
    for (s, interp) in cases {
        let mm = Mm::default();
        let image = if interp {
            Image {
                interp: vec![s],
                stack_size: PAGE,
                ..Image::default()
            }
        } else {
            Image {
                segments: vec![s],
                stack_size: PAGE,
                ..Image::default()
            }
        };
        assert_eq!(mm.exec(&image), Err(Errno::EINVAL));
        mm.validate().unwrap();
    }
}

#[test]
fn max_map_count_refuses_splits() {
    let mm = new_mm(IndexKind::Maple, 1);
    let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    let a = mm.mmap(0, 3 * PAGE, Prot::READ, anon, None, 0).unwrap();
    let before = mm.maps();
    assert_eq!(mm.munmap(a + PAGE, PAGE), Err(Errno::ENOMEM));
    assert_eq!(mm.mprotect(a + PAGE, PAGE, Prot::NONE), Err(Errno::ENOMEM));
    assert_eq!(mm.maps(), before);
}

/// An operation with arbitrary arguments, to look for panics and overflow
/// at the edges of the address space.
#[derive(Debug, Clone)]
enum Wild {
    Mmap(u64, u64, u32, u32, u64),
    Munmap(u64, u64),
    Mprotect(u64, u64, u32),
    Mremap(u64, u64, u64, u32, u64),
    Brk(u64),
    Fault(u64, u8),
    Madvise(u64, u64, i32),
    Mlock(u64, u64, u32),
    Munlock(u64, u64),
    Mlockall(u32),
}

fn edge() -> impl Strategy<Value = u64> {
    prop_oneof![
        any::<u64>(),
        Just(0u64),
        Just(u64::MAX),
        Just(u64::MAX - 4095),
        Just(0x7fff_ffff_f000u64),
        Just(0x7fff_ffff_e000u64),
        (0u64..64).prop_map(|p| BASE + p * PAGE),
        (0u64..64).prop_map(|p| p * PAGE),
    ]
}

fn wild() -> impl Strategy<Value = Wild> {
    prop_oneof![
        (edge(), edge(), any::<u32>(), any::<u32>(), edge())
            .prop_map(|(a, l, p, f, o)| Wild::Mmap(a, l, p, f, o)),
        (edge(), edge()).prop_map(|(a, l)| Wild::Munmap(a, l)),
        (edge(), edge(), any::<u32>()).prop_map(|(a, l, p)| Wild::Mprotect(a, l, p)),
        (edge(), edge(), edge(), 0..16u32, edge())
            .prop_map(|(a, o, n, f, t)| Wild::Mremap(a, o, n, f, t)),
        edge().prop_map(Wild::Brk),
        (edge(), 0..3u8).prop_map(|(a, k)| Wild::Fault(a, k)),
        (edge(), edge(), any::<i32>()).prop_map(|(a, l, v)| Wild::Madvise(a, l, v)),
        (edge(), edge(), 0..26i32).prop_map(|(a, l, v)| Wild::Madvise(a, l, v)),
        (edge(), edge(), 0..4u32).prop_map(|(a, l, f)| Wild::Mlock(a, l, f)),
        (edge(), edge()).prop_map(|(a, l)| Wild::Munlock(a, l)),
        (0..9u32).prop_map(Wild::Mlockall),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("MM_PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256),
        ..ProptestConfig::default()
    })]

    /// No argument makes a call panic or leave an invalid map, and both
    /// indexes answer alike.
    #[test]
    fn arbitrary_arguments_never_panic(ops in proptest::collection::vec(wild(), 1..40)) {
        let file = mm::File::new("/tmp/wild", 1 << 20);
        let spaces = [new_mm(IndexKind::Maple, 64), new_mm(IndexKind::Legacy, 64)];
        for mm in &spaces {
            mm.set_brk_base(BASE + (1 << 30));
        }
        for op in &ops {
            let results: Vec<Result<u64, Errno>> = spaces
                .iter()
                .map(|mm| match *op {
                    Wild::Mmap(a, l, p, f, o) => mm.mmap(
                        a,
                        l,
                        Prot::from_bits_retain(p),
                        MapFlags::from_bits_retain(f),
                        Some(&file),
                        o,
                    ),
                    Wild::Munmap(a, l) => mm.munmap(a, l).map(|_| 0),
                    Wild::Mprotect(a, l, p) => {
                        mm.mprotect(a, l, Prot::from_bits_retain(p)).map(|_| 0)
                    }
                    Wild::Mremap(a, o, n, f, t) => {
                        mm.mremap(a, o, n, MremapFlags::from_bits_retain(f), t)
                    }
                    Wild::Brk(a) => Ok(mm.brk(a)),
                    Wild::Fault(a, k) => {
                        let access = [Access::Read, Access::Write, Access::Exec][k as usize];
                        mm.fault(a, access).map(|_| 0).map_err(|e| e.errno())
                    }
                    Wild::Madvise(a, l, v) => mm.madvise(a, l, Advice(v)).map(|_| 0),
                    Wild::Mlock(a, l, f) => mm.mlock2(a, l, f).map(|_| 0),
                    Wild::Munlock(a, l) => mm.munlock(a, l).map(|_| 0),
                    Wild::Mlockall(f) => mm.mlockall(f).map(|_| 0),
                })
                .collect();
            prop_assert_eq!(results[0], results[1], "indexes disagree on {:?}", op);
            for mm in &spaces {
                mm.validate().map_err(TestCaseError::fail)?;
            }
            prop_assert_eq!(shape(&spaces[0]), shape(&spaces[1]));
        }
    }
}

/// The calls of issue 14 item 3 (sealing, names, protection keys,
/// userfaultfd registration), mixed with the map-changing ones.
#[derive(Debug, Clone)]
enum SealOp {
    Base(Op),
    Mseal {
        page: u64,
        pages: u64,
        flags: u64,
    },
    Name {
        page: u64,
        pages: u64,
        name: u8,
    },
    PkeyMprotect {
        page: u64,
        pages: u64,
        prot: u32,
        pkey: i32,
    },
    PkeyAlloc {
        flags: u64,
        rights: u64,
    },
    PkeyFree {
        pkey: i32,
    },
    UffdRegister {
        page: u64,
        pages: u64,
        mode: u64,
    },
    UffdUnregister {
        page: u64,
        pages: u64,
    },
}

/// Names by index: valid, empty, too long, refused characters, NULL.
const NAMES: [Option<&[u8]>; 6] = [
    Some(b"a"),
    Some(b"b c"),
    Some(b""),
    Some(&[b'x'; 80]),
    Some(b"$"),
    None,
];

fn seal_op() -> impl Strategy<Value = SealOp> {
    let page = 0..WINDOW_PAGES;
    let pages = 0..8u64;
    prop_oneof![
        3 => op().prop_map(SealOp::Base),
        1 => (page.clone(), pages.clone(), prop_oneof![4 => Just(0u64), 1 => Just(1u64)])
            .prop_map(|(page, pages, flags)| SealOp::Mseal { page, pages, flags }),
        1 => (page.clone(), pages.clone(), 0..NAMES.len() as u8)
            .prop_map(|(page, pages, name)| SealOp::Name { page, pages, name }),
        1 => (page.clone(), pages.clone(), 0..8u32, -2..17i32).prop_map(
            |(page, pages, prot, pkey)| SealOp::PkeyMprotect { page, pages, prot, pkey }
        ),
        1 => (0..2u64, 0..5u64).prop_map(|(flags, rights)| SealOp::PkeyAlloc { flags, rights }),
        1 => (-1..17i32).prop_map(|pkey| SealOp::PkeyFree { pkey }),
        1 => (page.clone(), pages.clone(), 0..9u64)
            .prop_map(|(page, pages, mode)| SealOp::UffdRegister { page, pages, mode }),
        1 => (page, pages).prop_map(|(page, pages)| SealOp::UffdUnregister { page, pages }),
    ]
}

fn apply_seal(mm: &Mm, op: &SealOp, heap: u64) -> Result<u64, Errno> {
    let ok = |r: Result<(), Errno>| r.map(|()| 0);
    match *op {
        SealOp::Base(ref op) => apply(mm, op, heap, None),
        SealOp::Mseal { page, pages, flags } => ok(mm.mseal(addr(page), pages * PAGE, flags)),
        SealOp::Name { page, pages, name } => {
            ok(mm.set_vma_anon_name(addr(page), pages * PAGE, NAMES[name as usize]))
        }
        SealOp::PkeyMprotect {
            page,
            pages,
            prot,
            pkey,
        } => ok(mm.pkey_mprotect(addr(page), pages * PAGE, Prot::from_bits_retain(prot), pkey)),
        SealOp::PkeyAlloc { flags, rights } => mm.pkey_alloc(flags, rights),
        SealOp::PkeyFree { pkey } => ok(mm.pkey_free(pkey)),
        SealOp::UffdRegister { page, pages, mode } => {
            ok(mm.uffd_register(addr(page), pages * PAGE, mode))
        }
        SealOp::UffdUnregister { page, pages } => ok(mm.uffd_unregister(addr(page), pages * PAGE)),
    }
}

/// Per page of the window: protection, flags, name, and the file page
/// (what a split leaves alone and any change shows).
type PageState = Option<(mm::VmFlags, Option<String>, Option<u64>)>;

fn pages_of(mm: &Mm) -> Vec<PageState> {
    let vmas = mm.vmas();
    (0..4 * WINDOW_PAGES)
        .map(|p| {
            let a = addr(p);
            vmas.iter()
                .find(|v| v.start() <= a && a < v.end())
                .map(|v| {
                    let file_page = v.file().map(|_| v.pgoff() + ((a - v.start()) / PAGE));
                    (v.flags(), v.anon_name().map(str::to_string), file_page)
                })
        })
        .collect()
}

/// Pages outside `[lo, hi)` are alike in both.
fn alike_outside(
    before: &[PageState],
    after: &[PageState],
    lo: u64,
    hi: u64,
) -> Result<(), String> {
    for (p, (b, a)) in before.iter().zip(after).enumerate() {
        let at = addr(p as u64);
        if (lo..hi).contains(&at) {
            continue;
        }
        if b != a {
            return Err(format!("page {at:#x} changed: {b:?} -> {a:?}"));
        }
    }
    Ok(())
}

fn seal_mm(index: IndexKind, max_map_count: usize, pku: bool) -> Mm {
    let policy = std::sync::Arc::new(Policy {
        index,
        ..Policy::default()
    });
    let layout = Layout {
        max_map_count,
        exec_only_pkey: pku,
        anon_vma_name: true,
        ..Layout::default()
    };
    Mm::new(&policy, layout)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("MM_PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256),
        ..ProptestConfig::default()
    })]

    /// With sealing, names, protection keys (with and without PKU) and
    /// userfaultfd in the mix: both indexes agree, every map is valid,
    /// and a refused call changes nothing, page for page (flags and names
    /// included), except where the kernel itself changes part of the
    /// range before failing: a walk that stops at a hole, a sealed or a
    /// file VMA (`mprotect`, `pkey_mprotect`, naming, `madvise`, `mlock`),
    /// a split at
    /// `max_map_count`, and the split an unmap makes at its start before
    /// it meets a sealed VMA (which changes no page).
    #[test]
    fn seal_name_pkey_uffd_refusals_change_nothing(
        ops in proptest::collection::vec(seal_op(), 1..60),
        max in 6usize..40,
        pku in any::<bool>(),
    ) {
        let maple = seal_mm(IndexKind::Maple, max, pku);
        let legacy = seal_mm(IndexKind::Legacy, max, pku);
        let heap = BASE + 2 * WINDOW_PAGES * PAGE + (1 << 30);
        maple.set_brk_base(heap);
        legacy.set_brk_base(heap);
        for op in &ops {
            let before = pages_of(&maple);
            let vmas_before = maple.vmas();
            let r = apply_seal(&maple, op, heap);
            prop_assert_eq!(r, apply_seal(&legacy, op, heap), "indexes disagree on {:?}", op);
            maple.validate().map_err(TestCaseError::fail)?;
            legacy.validate().map_err(TestCaseError::fail)?;
            prop_assert_eq!(pages_of(&maple), pages_of(&legacy), "maps differ after {:?}", op);
            prop_assert_eq!(shape(&maple), shape(&legacy));
            let Err(e) = r else { continue };
            let after = pages_of(&maple);
            let range = |page: u64, pages: u64| (addr(page), addr(page) + pages * PAGE);
            let (lo, hi) = match *op {
                // mseal checks for holes before it changes anything; only
                // a split at max_map_count stops it part-way.
                SealOp::Mseal { page, pages, .. }
                    if e == Errno::ENOMEM
                        && (page..page + pages).all(|p| before.get(p as usize).is_some_and(Option::is_some)) =>
                {
                    range(page, pages)
                }
                SealOp::Name { page, pages, .. } if matches!(e, Errno::ENOMEM | Errno::EBADF) => {
                    range(page, pages)
                }
                SealOp::PkeyMprotect { page, pages, .. } => range(page, pages),
                SealOp::UffdRegister { page, pages, .. } | SealOp::UffdUnregister { page, pages }
                    if e == Errno::ENOMEM => range(page, pages),
                SealOp::Base(Op::Mprotect { page, pages, prot }) => {
                    let lo = if prot & 0x0100_0000 != 0 { 0 } else { addr(page) };
                    (lo, addr(page) + pages * PAGE)
                }
                SealOp::Base(Op::Mremap { page, old, new, to, .. }) => {
                    // The target unmap and the shrunk tail may have gone,
                    // or, for a multi-VMA move, VMAs before a refused one
                    // moved: only the two ranges may differ.
                    let src = range(page, old);
                    let dst = range(to + WINDOW_PAGES, new);
                    alike_outside(&before, &after, src.0.min(dst.0), src.1.max(dst.1))
                        .map_err(TestCaseError::fail)?;
                    continue;
                }
                // madvise (also refused per VMA by a seal) and the mlock
                // family keep what they changed before a hole or a
                // refusing VMA, as in `refused_calls_change_nothing`.
                // MADV_GUARD_INSTALL marks whole VMAs (`VM_MAYBE_GUARD`,
                // no split): the VMAs it met may change.
                SealOp::Base(Op::Madvise { page, pages, advice: 102 }) => {
                    let (lo, hi) = range(page, pages);
                    let met = vmas_before.iter().filter(|v| v.start() < hi && lo < v.end());
                    met.fold((lo, hi), |(l, h), v| (l.min(v.start()), h.max(v.end())))
                }
                SealOp::Base(
                    Op::Madvise { page, pages, .. }
                    | Op::Mlock { page, pages, .. }
                    | Op::Munlock { page, pages },
                ) => range(page, pages),
                SealOp::Base(Op::Brk { .. }) | SealOp::Base(Op::Fault { .. }) => continue,
                _ => (0, 0),
            };
            alike_outside(&before, &after, lo, hi)
                .map_err(|m| TestCaseError::fail(format!("{op:?}: {e:?}: {m}")))?;
        }
    }
}

#[test]
fn sealed_heap_and_names_survive_fork() {
    let mm = seal_mm(IndexKind::Maple, 1000, false);
    let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    let a = mm.mmap(0, 4 * PAGE, Prot::READ, anon, None, 0).unwrap();
    mm.set_vma_anon_name(a, 2 * PAGE, Some(b"n")).unwrap();
    mm.mseal(a + PAGE, PAGE, 0).unwrap();
    let child = mm.fork();
    assert_eq!(child.proc_maps(), mm.proc_maps());
    assert_eq!(child.munmap(a, 4 * PAGE), Err(Errno::EPERM));
    assert!(child.proc_maps().contains("[anon:n]"));
}
