//! Regressions found by the differential test, kept as plain unit tests
//! so that they also run where no Linux kernel is at hand.

use std::sync::Arc;

use crate::file::FileMode;
use crate::{Access, File, Layout, MapFlags, Mm, MremapFlags, Prot, PAGE_SIZE};

const P: u64 = PAGE_SIZE;
const BASE: u64 = 0x1000_0000_0000;

fn anon() -> MapFlags {
    MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED
}

fn mm_with(layout: Layout) -> Mm {
    Mm::new(crate::policy::Policy::shared_default(), layout)
}

fn ranges(mm: &Mm) -> Vec<(u64, u64)> {
    mm.vmas().iter().map(|v| (v.start(), v.end())).collect()
}

#[test]
fn fixed_move_takes_every_vma_in_the_range() {
    // Linux 6.17+: MREMAP_FIXED with equal lengths moves a range spanning
    // several VMAs, keeping their layout.
    let mm = Mm::default();
    let rw = Prot::READ | Prot::WRITE;
    mm.mmap(BASE, 4 * P, rw, anon(), None, 0).unwrap();
    mm.mmap(BASE + 4 * P, 4 * P, Prot::READ, anon(), None, 0)
        .unwrap();
    let to = BASE + 64 * P;
    let flags = MremapFlags::MAYMOVE | MremapFlags::FIXED;
    assert_eq!(mm.mremap(BASE + 2 * P, 4 * P, 4 * P, flags, to), Ok(to));
    assert_eq!(
        ranges(&mm),
        vec![
            (BASE, BASE + 2 * P),
            (BASE + 6 * P, BASE + 8 * P),
            (to, to + 2 * P),
            (to + 2 * P, to + 4 * P)
        ]
    );
    // A range that starts in a hole is refused.
    assert_eq!(
        mm.mremap(BASE + 3 * P, 4 * P, 4 * P, flags, to + 32 * P),
        Err(crate::Errno::EFAULT)
    );
}

#[test]
fn heap_is_what_strictly_overlaps_the_break() {
    let mm = Mm::default();
    mm.set_brk_base(0x5555_0000_0000);
    let brk = mm.brk(0x5555_0000_0000 + 2 * P);
    // A mapping starting exactly at the break is not the heap.
    mm.mmap(brk, P, Prot::READ, anon(), None, 0).unwrap();
    let names: Vec<Option<String>> = mm.maps().into_iter().map(|e| e.name).collect();
    assert_eq!(names, vec![Some("[heap]".to_string()), None]);
}

#[test]
fn write_fault_past_eof_still_prepares_the_anon_vma() {
    // do_cow_fault prepares the anon_vma before it finds the page is past
    // the end of the file; the anon_vma then stops merges.
    let mm = Mm::default();
    let f = File::new("/tmp/f", 2 * P);
    let fixed = MapFlags::PRIVATE | MapFlags::FIXED;
    let rw = Prot::READ | Prot::WRITE;
    mm.mmap(BASE, 4 * P, rw, fixed, Some(&f), 0).unwrap();
    assert_eq!(
        mm.fault(BASE + 3 * P, Access::Write),
        Err(crate::FaultError::Bus)
    );
    assert!(mm.find_vma(BASE).unwrap().anon().is_some());
}

#[test]
fn exec_only_mappings_get_the_execute_only_key() {
    let layout = Layout {
        exec_only_pkey: true,
        ..Layout::default()
    };
    let mm = mm_with(layout);
    mm.mmap(BASE, 4 * P, Prot::EXEC, anon(), None, 0).unwrap();
    // Same access bits, but PROT_EXEC|PROT_READ drops back to key 0 ...
    mm.mprotect(BASE, P, Prot::EXEC | Prot::READ).unwrap();
    mm.mprotect(BASE, P, Prot::EXEC).unwrap();
    assert_eq!(mm.map_count(), 1);
    // ... and a PROT_EXEC|PROT_SEM mapping has key 0, so it splits when
    // made exactly PROT_EXEC.
    let sem = Prot::from_bits_retain(Prot::EXEC.bits() | 8);
    mm.mmap(BASE + 8 * P, 4 * P, sem, anon(), None, 0).unwrap();
    mm.mprotect(BASE + 8 * P, P, Prot::EXEC).unwrap();
    assert_eq!(mm.map_count(), 3);
}

#[test]
fn hints_round_up_to_the_effective_minimum() {
    let layout = Layout {
        mmap_min_addr: 0x10000,
        dac_mmap_min_addr: 0x1000,
        ..Layout::default()
    };
    let mm = mm_with(layout);
    let a = mm
        .mmap(
            0x2000,
            P,
            Prot::READ,
            MapFlags::PRIVATE | MapFlags::ANONYMOUS,
            None,
            0,
        )
        .unwrap();
    assert_eq!(a, 0x10000);
    // Below the sysctl, only CAP_SYS_RAWIO may map.
    assert_eq!(
        mm.mmap(0, P, Prot::READ, anon(), None, 0),
        Err(crate::Errno::EPERM)
    );
}

#[test]
fn large_file_mappings_align_to_their_offset() {
    let mm = Mm::default();
    let f: Arc<File> = File::with_mode("/tmp/big", 8 << 20, FileMode::default());
    let a = mm
        .mmap(0, 2 << 20, Prot::READ, MapFlags::PRIVATE, Some(&f), 0)
        .unwrap();
    assert_eq!(a % (2 << 20), 0);
}

#[test]
fn a_locked_mapping_is_populated_and_keeps_its_accounting() {
    // MAP_LOCKED populates like MAP_POPULATE: the private writable VMA
    // gets an anon_vma, so dropping write later keeps VM_ACCOUNT
    // (smaps `ac`), as Linux 6.18 shows.
    use crate::VmFlags;
    let mm = Mm::default();
    let rwx = Prot::READ | Prot::WRITE | Prot::EXEC;
    mm.mmap(BASE, 15 * P, rwx, anon() | MapFlags::LOCKED, None, 0)
        .unwrap();
    mm.mprotect(BASE + 13 * P, 2 * P, Prot::NONE).unwrap();
    let v = mm.find_vma(BASE + 13 * P).unwrap();
    assert!(v.anon().is_some());
    assert!(v.flags().contains(VmFlags::ACCOUNT | VmFlags::LOCKED));
}

#[test]
fn a_locked_mapping_turning_writable_is_populated() {
    // PROT_NONE and locked: nothing to populate, no anon_vma. Made
    // writable, it is populated (copy-on-write broken now), so it has an
    // anon_vma and keeps VM_ACCOUNT when write goes again.
    use crate::VmFlags;
    let mm = Mm::default();
    mm.mmap(BASE, 7 * P, Prot::NONE, anon() | MapFlags::LOCKED, None, 0)
        .unwrap();
    assert!(mm.find_vma(BASE).unwrap().anon().is_none());
    mm.mprotect(BASE, 5 * P, Prot::WRITE).unwrap();
    assert!(mm.find_vma(BASE).unwrap().anon().is_some());
    mm.mprotect(BASE, 4 * P, Prot::EXEC).unwrap();
    let v = mm.find_vma(BASE).unwrap();
    assert_eq!(v.end(), BASE + 4 * P);
    assert!(v.flags().contains(VmFlags::ACCOUNT));
    // Unlocked, the same steps drop VM_ACCOUNT: no anon_vma.
    let mm = Mm::default();
    mm.mmap(BASE, 7 * P, Prot::NONE, anon(), None, 0).unwrap();
    mm.mprotect(BASE, 5 * P, Prot::WRITE).unwrap();
    mm.mprotect(BASE, 4 * P, Prot::EXEC).unwrap();
    assert!(!mm
        .find_vma(BASE)
        .unwrap()
        .flags()
        .contains(VmFlags::ACCOUNT));
}

#[test]
fn a_mapping_over_existing_vmas_replaces_them_whole() {
    // `mmap_region` leaves what it unmaps in the maple tree for the new
    // VMA's store to overwrite (`replace_before_overwrite`); after the
    // call nothing of the old VMAs may remain, on either index, whether
    // the new VMA is stored alone or merged with a neighbour.
    use crate::policy::Policy;
    for index in crate::IndexKind::ALL {
        let mm = Arc::new(Policy {
            index,
            ..Policy::default()
        })
        .mm();
        let rw = Prot::READ | Prot::WRITE;
        mm.mmap(BASE, 16 * P, Prot::READ, anon(), None, 0).unwrap();
        mm.mmap(BASE + 20 * P, 4 * P, Prot::READ, anon(), None, 0)
            .unwrap();
        let old = mm.find_vma(BASE).unwrap();
        // Into the middle of one VMA: it is split around the new one.
        mm.mmap(BASE + 4 * P, 4 * P, rw, anon(), None, 0).unwrap();
        assert_eq!(
            ranges(&mm),
            [
                (BASE, BASE + 4 * P),
                (BASE + 4 * P, BASE + 8 * P),
                (BASE + 8 * P, BASE + 16 * P),
                (BASE + 20 * P, BASE + 24 * P)
            ],
            "{index}"
        );
        mm.validate().unwrap();
        // The index let go of the VMA it replaced (this is the last
        // reference; an exclusive write releases at once).
        assert_eq!(Arc::strong_count(&old), 1, "{index}");
        // Over two VMAs and the hole between them, merging with the VMA
        // on its left (same flags, adjacent).
        mm.mmap(BASE + 8 * P, 14 * P, rw, anon(), None, 0).unwrap();
        assert_eq!(
            ranges(&mm),
            [
                (BASE, BASE + 4 * P),
                (BASE + 4 * P, BASE + 22 * P),
                (BASE + 22 * P, BASE + 24 * P)
            ],
            "{index}"
        );
        mm.validate().unwrap();
        assert_eq!(mm.map_count(), 3, "{index}");
        let prot: Vec<Prot> = mm.vmas().iter().map(|v| v.prot()).collect();
        assert_eq!(prot, [Prot::READ, rw, Prot::READ], "{index}");
    }
}
