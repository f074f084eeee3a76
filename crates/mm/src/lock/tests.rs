//! Unit tests of the lock kinds, small enough for Miri (which runs them to
//! check `cell.rs`: `cargo +nightly miri test -p mm --lib lock::`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::{LockKind, RwSem};
use crate::lockstat::LockClass;

#[cfg(miri)]
const ROUNDS: usize = 20;
#[cfg(not(miri))]
const ROUNDS: usize = 2000;

#[test]
fn guards_give_access_and_release() {
    for kind in LockKind::ALL {
        let mut sem = RwSem::new(kind, LockClass::IMmap, vec![1u32]);
        {
            let a = sem.read();
            let b = sem.try_read().expect("readers share");
            assert_eq!(a[0] + b[0], 2);
            assert!(sem.try_write().is_none(), "{kind}: writer beside readers");
        }
        sem.write().push(2);
        {
            let w = sem.try_write().expect("free after release");
            assert!(sem.try_read().is_none(), "{kind}: reader beside writer");
            assert_eq!(*w, [1, 2]);
        }
        sem.get_mut().push(3);
        assert!(format!("{sem:?}").contains("[1, 2, 3]"));
        let w = sem.write();
        assert!(format!("{sem:?}").contains("<locked>"));
        drop(w);
        assert_eq!(sem.into_inner(), [1, 2, 3]);
    }
}

#[test]
fn panicking_holder_releases() {
    for kind in LockKind::ALL {
        let sem = Arc::new(RwSem::new(kind, LockClass::IMmap, 0u32));
        let s2 = Arc::clone(&sem);
        let r = std::thread::spawn(move || {
            let mut g = s2.write();
            *g = 1;
            panic!("holder dies");
        })
        .join();
        assert!(r.is_err());
        assert_eq!(*sem.try_read().expect("released by unwinding"), 1);
        *sem.write() = 2;
        assert_eq!(*sem.read(), 2);
    }
}

#[test]
fn writers_and_readers_exclude() {
    for kind in LockKind::ALL {
        // (counter, its copy): a reader seeing them differ saw a writer
        // half-way.
        let sem = RwSem::new(kind, LockClass::IMmap, (0usize, 0usize));
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..ROUNDS {
                        let mut g = sem.write();
                        g.0 += 1;
                        std::hint::black_box(&mut *g);
                        g.1 += 1;
                    }
                });
            }
            s.spawn(|| {
                for _ in 0..ROUNDS {
                    let g = sem.read();
                    assert_eq!(g.0, g.1, "{kind}: torn read");
                }
            });
        });
        assert_eq!(*sem.read(), (2 * ROUNDS, 2 * ROUNDS));
    }
}

#[test]
fn sleeping_writer_is_handed_the_lock() {
    for kind in [LockKind::Rwsem, LockKind::Numa] {
        let sem = Arc::new(RwSem::new(kind, LockClass::IMmap, 0u32));
        let r = sem.read();
        let s2 = Arc::clone(&sem);
        let writer = std::thread::spawn(move || *s2.write() = 7);
        while sem.queued_waiters() == 0 {
            std::thread::yield_now();
        }
        // The queued writer blocks new readers (hand-off) ...
        assert!(
            sem.try_read().is_none(),
            "{kind}: reader overtook a queued writer"
        );
        // ... and gets the lock when the last reader leaves.
        drop(r);
        writer.join().unwrap();
        assert_eq!(*sem.read(), 7);
        assert_eq!(sem.queued_waiters(), 0);
    }
}

#[test]
fn queued_readers_are_woken_together() {
    let sem = Arc::new(RwSem::new(LockKind::Rwsem, LockClass::IMmap, 0u32));
    let inside = Arc::new(AtomicUsize::new(0));
    let w = sem.write();
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (s, inside) = (Arc::clone(&sem), Arc::clone(&inside));
            std::thread::spawn(move || {
                let g = s.read();
                inside.fetch_add(1, Ordering::SeqCst);
                // Wait, holding the read lock, until all three hold it at
                // once: only granting the queued readers together lets
                // this finish.
                while inside.load(Ordering::SeqCst) < 3 {
                    std::thread::yield_now();
                }
                *g
            })
        })
        .collect();
    while sem.queued_waiters() < 3 {
        std::thread::yield_now();
    }
    drop(w);
    for r in readers {
        assert_eq!(r.join().unwrap(), 0);
    }
}

/// A semaphore that starts a cache line, as `mmap_lock` does, has the line
/// to its state word and wait queue: what the fast paths read (the enum's
/// tag, the classes, the recorder's fields) and the value lie outside it
/// (see `rwsem::RawRwSem`).
#[test]
fn a_line_aligned_rwsem_keeps_its_word_apart() {
    use super::rwsem::{span, RawRwSem};
    use super::Raw;
    #[repr(align(128))]
    struct Aligned(RwSem<[u8; 40]>);
    // The enum's tag is a niche of a field, not a word of its own before
    // the semaphore.
    assert_eq!(std::mem::size_of::<Raw>(), std::mem::size_of::<RawRwSem>());
    for kind in [LockKind::Rwsem, LockKind::Numa] {
        let lock = Aligned(RwSem::new(kind, LockClass::MmapLock, [0u8; 40]));
        let sem = &lock.0;
        let Raw::Sem(raw) = &sem.raw else {
            panic!("{kind:?} is not a semaphore");
        };
        let (word, read) = raw.layout();
        assert_eq!(word % 64, 0, "{kind:?}: the word starts the line");
        let outside = |(at, len): (usize, usize)| at + len <= word || at >= word + 64;
        let value = sem.read();
        let fields = [
            span(&sem.kind),
            span(&sem.class),
            span(&sem.group),
            span(&sem.id),
            (value.as_ptr() as usize, value.len()),
        ];
        for field in fields.into_iter().chain(read) {
            assert!(
                outside(field),
                "{kind:?}: {field:?} shares the word's line at {word:#x}"
            );
        }
    }
}
