//! anon_vma chains and the end-only locking rule, counted with the calling
//! thread's lock statistics.

use std::sync::Arc;

use mm::lockstat::{self, LockClass};
use mm::{Access, MapFlags, Mm, Policy, Prot, PAGE_SIZE};

const HEAP: u64 = 0x5555_5555_8000;

fn mm(rule: bool) -> Mm {
    std::sync::Arc::new(Policy {
        anon_rule: rule,
        ..Policy::default()
    })
    .mm()
}

/// anon_vma lock acquisitions `f` makes on this thread.
fn anon_locks(f: impl FnOnce()) -> u64 {
    let before = lockstat::thread_snapshot();
    f();
    lockstat::thread_snapshot()
        .since(&before)
        .class(LockClass::AnonVma)
        .acquisitions
}

/// A parent with a faulted heap and a forked child, as aim7's tasks, and
/// the child's break after its first own allocation.
///
/// The inherited heap VMA cannot grow in place (its chain is not singular:
/// the kernel's `is_mergeable_anon_vma` keeps forked VMAs from merging),
/// so the child's first `brk` makes a VMA of its own, whose first write
/// fault gives it an anon_vma of its own: that VMA is the one that then
/// grows and shrinks at its end.
fn parent_and_child(rule: bool) -> (Mm, Mm, u64) {
    let parent = mm(rule);
    parent.set_brk_base(HEAP);
    let base = parent.brk(0);
    assert_eq!(parent.brk(base + 4 * PAGE_SIZE), base + 4 * PAGE_SIZE);
    parent.fault(base, Access::Write).unwrap();
    let child = parent.fork();
    let top = base + 5 * PAGE_SIZE;
    assert_eq!(child.brk(top), top);
    assert_eq!(
        child.map_count(),
        2,
        "the inherited heap does not grow in place"
    );
    let n = anon_locks(|| {
        child.fault(top - PAGE_SIZE, Access::Write).unwrap();
    });
    assert_eq!(n, 1, "anon_vma_prepare links the new VMA");
    (parent, child, top)
}

/// Grow the task's own heap VMA by a page (writing it) and shrink it
/// back, ten times: every growth and every shrink must take `expected`
/// anon_vma locks.
fn grow_and_shrink(rule: bool, expected: u64) {
    let (_parent, child, top) = parent_and_child(rule);
    for _ in 0..10 {
        let n = anon_locks(|| {
            assert_eq!(child.brk(top + PAGE_SIZE), top + PAGE_SIZE);
            child.fault(top, Access::Write).unwrap();
        });
        assert_eq!(n, expected, "growth, rule {rule}");
        let n = anon_locks(|| assert_eq!(child.brk(top), top));
        assert_eq!(n, expected, "shrink, rule {rule}");
    }
    child.validate().unwrap();
}

#[test]
fn end_only_heap_growth_and_shrink_take_no_lock_with_the_rule() {
    grow_and_shrink(true, 0);
}

#[test]
fn without_the_rule_every_growth_and_shrink_takes_the_lock_once() {
    grow_and_shrink(false, 1);
}

#[test]
fn fork_chains_the_child_to_the_parent_anon_vma() {
    let (parent, child, _) = parent_and_child(true);
    let p = parent.find_vma(HEAP).unwrap();
    let c = child.find_vma(HEAP).unwrap();
    let (pl, cl) = (p.anon().unwrap(), c.anon().unwrap());
    assert!(!pl.inherited());
    assert!(cl.inherited());
    assert_eq!(cl.chain().len(), 2);
    assert!(Arc::ptr_eq(&cl.chain()[1], &pl.anon_vma));
    assert!(Arc::ptr_eq(cl.anon_vma.parent().unwrap(), &pl.anon_vma));
    assert!(Arc::ptr_eq(cl.anon_vma.root(), &pl.anon_vma));
    // The parent's anon_vma finds both VMAs; the child's only its own.
    let range = (HEAP >> 12, (HEAP >> 12) + 3);
    assert_eq!(pl.anon_vma.entries(), vec![range, range]);
    assert_eq!(cl.anon_vma.entries(), vec![range]);
    drop(child);
    assert_eq!(pl.anon_vma.entries(), vec![range], "exit unlinks the child");
}

#[test]
fn inserts_start_moves_and_imports_take_the_lock_even_with_the_rule() {
    let rw = Prot::READ | Prot::WRITE;
    let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    let m = mm(true);
    let a = m.mmap(0, 8 * PAGE_SIZE, rw, anon, None, 0).unwrap();
    // Insert: the first write fault links the VMA.
    assert_eq!(
        anon_locks(|| {
            m.fault(a, Access::Write).unwrap();
        }),
        1
    );
    // Changing the middle splits twice (as the kernel's two split_vma
    // calls do), each inserting a piece.
    assert_eq!(
        anon_locks(|| m
            .mprotect(a + 2 * PAGE_SIZE, 2 * PAGE_SIZE, Prot::READ)
            .unwrap()),
        2
    );
    assert_eq!(m.map_count(), 3);
    // Merging back imports the neighbours' pages: their entries go.
    assert_eq!(
        anon_locks(|| m.mprotect(a + 2 * PAGE_SIZE, 2 * PAGE_SIZE, rw).unwrap()),
        1
    );
    assert_eq!(m.map_count(), 1);
    // Unmapping the front moves the start: rekeyed under the lock.
    assert_eq!(anon_locks(|| m.munmap(a, PAGE_SIZE).unwrap()), 1);
    // Unmapping the back only moves the end: no lock.
    assert_eq!(
        anon_locks(|| m.munmap(a + 7 * PAGE_SIZE, PAGE_SIZE).unwrap()),
        0
    );
    // A flags-only change of the whole VMA touches no entry.
    assert_eq!(
        anon_locks(|| m
            .mprotect(a + PAGE_SIZE, 6 * PAGE_SIZE, Prot::READ)
            .unwrap()),
        0
    );
    let v = m.find_vma(a + PAGE_SIZE).unwrap();
    let first = (a >> 12) + 1;
    assert_eq!(
        v.anon().unwrap().anon_vma.entries(),
        vec![(first, first + 5)]
    );
    m.validate().unwrap();
}

/// Threads whose first write faults race on one VMA (as malloc1's threads
/// do once their mappings merge) each prepare a link, and only the first
/// installed is linked: the neighbour's anon_vma, which every racer
/// picks, ends up with exactly one entry for the VMA, however the race
/// went. A loser's link that was linked too would show as a second entry.
#[test]
fn racing_first_faults_link_one_entry_for_the_vma() {
    const THREADS: usize = 4;
    let rounds = if cfg!(miri) { 2 } else { 200 };
    let mm = mm(true);
    let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    let rw = Prot::READ | Prot::WRITE;
    let len = THREADS as u64 * PAGE_SIZE;
    // The neighbour: faulted, so it has the anon_vma the racers reuse.
    let below = mm.mmap(0, len, rw, anon, None, 0).unwrap();
    mm.fault(below, Access::Write).unwrap();
    let shared = mm.find_vma(below).unwrap().anon().unwrap().anon_vma.clone();
    let barrier = std::sync::Barrier::new(THREADS);
    for round in 0..rounds {
        // Right above the neighbour; executable too, so it stays a VMA of
        // its own (no merge) that may still take the neighbour's anon_vma.
        let at = below + len;
        let got = mm
            .mmap(at, len, rw | Prot::EXEC, anon | MapFlags::FIXED, None, 0)
            .unwrap();
        assert_eq!(got, at);
        std::thread::scope(|s| {
            for t in 0..THREADS as u64 {
                let (mm, barrier) = (&mm, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    mm.fault(at + t * PAGE_SIZE, Access::Write).unwrap();
                });
            }
        });
        let vma = mm.find_vma(at).unwrap();
        let link = vma.anon().expect("the faults gave the VMA a link");
        assert!(
            Arc::ptr_eq(&link.anon_vma, &shared),
            "round {round}: the racers reuse the neighbour's anon_vma"
        );
        let first = at >> 12;
        assert_eq!(
            shared.entries(),
            vec![(below >> 12, (below >> 12) + 3), (first, first + 3)],
            "round {round}: one entry per VMA"
        );
        mm.munmap(at, len).unwrap();
    }
}
