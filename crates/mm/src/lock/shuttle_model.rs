//! Shuttle models of the lock kinds: the real `RwSem` code, with shuttle's
//! atomics, mutex, park and unpark, under randomised and PCT schedules.
//! Run with `RUSTFLAGS="--cfg vmscale_shuttle" cargo test -p mm --lib shuttle`.
//! Shuttle reports a deadlock if every thread is parked, so each scenario
//! finishing also checks that no wake-up is lost.

use std::sync::Arc;

use shuttle::sync::atomic::{AtomicUsize, Ordering};
use shuttle::thread;

use super::{LockKind, RwSem};
use crate::lockstat::LockClass;

/// Writers and readers of one lock, each checking on entry that nobody
/// incompatible is inside: `inside` counts readers, `WRITER_IN` marks a
/// writer. Every thread finishes and every write is kept.
fn exclusion(kind: LockKind, writers: usize, readers: usize) {
    const WRITER_IN: usize = 1 << 20;
    let sem = Arc::new(RwSem::new(kind, LockClass::IMmap, 0usize));
    let inside = Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::new();
    for _ in 0..writers {
        let (sem, inside) = (Arc::clone(&sem), Arc::clone(&inside));
        threads.push(thread::spawn(move || {
            for _ in 0..2 {
                let mut g = sem.write();
                let was = inside.fetch_add(WRITER_IN, Ordering::SeqCst);
                assert_eq!(was, 0, "writer entered beside {was:#x}");
                *g += 1;
                inside.fetch_sub(WRITER_IN, Ordering::SeqCst);
            }
        }));
    }
    for _ in 0..readers {
        let (sem, inside) = (Arc::clone(&sem), Arc::clone(&inside));
        threads.push(thread::spawn(move || {
            for _ in 0..2 {
                let g = sem.read();
                let was = inside.fetch_add(1, Ordering::SeqCst);
                assert!(was < WRITER_IN, "reader entered beside a writer");
                let _ = *g;
                inside.fetch_sub(1, Ordering::SeqCst);
            }
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(*sem.read(), 2 * writers);
}

/// A writer that has queued behind a reader keeps later readers out while
/// the lock is read-held: they queue behind it, and it gets the lock
/// before them when the reader leaves. (A reader that arrives once the lock
/// is free may take it before the woken writer runs, as in the kernel; so
/// the late reader here is checked only once it has queued.)
fn writer_handoff(kind: LockKind) {
    let sem = Arc::new(RwSem::new(kind, LockClass::IMmap, 0usize));
    let r = sem.read();
    let writer = {
        let sem = Arc::clone(&sem);
        thread::spawn(move || *sem.write() = 1)
    };
    while sem.queued_waiters() == 0 {
        thread::yield_now();
    }
    assert!(
        sem.try_read().is_none(),
        "a reader overtook the queued writer"
    );
    let late_reader = {
        let sem = Arc::clone(&sem);
        // Queues behind the writer, so it must see the write.
        thread::spawn(move || assert_eq!(*sem.read(), 1))
    };
    while sem.queued_waiters() < 2 {
        thread::yield_now();
    }
    drop(r);
    writer.join().unwrap();
    late_reader.join().unwrap();
}

/// A reader's `try_read` adds itself to the word before it looks, and
/// takes the add back out when a writer holds the lock. A release that
/// comes in between finds a reader counted, so it cannot serve the writer
/// queued behind it; the take-back must serve it instead, since a failed
/// `try_read` has no release of its own to come. Every thread finishes.
fn try_read_backs_out_beside_a_release(kind: LockKind) {
    let sem = Arc::new(RwSem::new(kind, LockClass::IMmap, 0usize));
    let w = sem.write();
    let writer = {
        let sem = Arc::clone(&sem);
        thread::spawn(move || *sem.write() += 1)
    };
    while sem.queued_waiters() == 0 {
        thread::yield_now();
    }
    let reader = {
        let sem = Arc::clone(&sem);
        thread::spawn(move || {
            let _ = sem.try_read().map(|g| *g);
        })
    };
    drop(w);
    writer.join().unwrap();
    reader.join().unwrap();
    assert_eq!(*sem.read(), 1);
}

#[test]
fn shuttle_lock_try_read_backs_out() {
    for kind in [LockKind::Rwsem, LockKind::Numa] {
        shuttle::check_random(move || try_read_backs_out_beside_a_release(kind), 3000);
        shuttle::check_pct(move || try_read_backs_out_beside_a_release(kind), 3000, 3);
    }
}

#[test]
fn shuttle_lock_exclusion_random() {
    for kind in LockKind::ALL {
        shuttle::check_random(move || exclusion(kind, 2, 2), 3000);
    }
}

#[test]
fn shuttle_lock_exclusion_pct() {
    for kind in LockKind::ALL {
        shuttle::check_pct(move || exclusion(kind, 2, 1), 3000, 3);
    }
}

/// Five contenders so that the `numa` kind's per-node queueing engages.
#[test]
fn shuttle_lock_numa_engaged_random() {
    shuttle::check_random(|| exclusion(LockKind::Numa, 4, 1), 2000);
}

/// Writers on two nodes (model threads report a node of their own through
/// `sync::set_node`), enough of them to engage the `numa` kind's per-node
/// queueing with waiters of both nodes queued: its releases then hand the
/// lock over (and set `HANDOFF`) to enforce a pick out of FIFO order, and
/// serve the queue as `rwsem` does once one node's waiters are left.
/// Every thread finishes (no wake-up or hand-off is lost in the switch
/// between the two) and every write is kept. (Instrumented once: the
/// 4000 schedules make about 14,000 out-of-order picks.)
fn two_nodes(writers: usize) {
    const ROUNDS: usize = 4;
    let sem = Arc::new(RwSem::new(LockKind::Numa, LockClass::IMmap, 0usize));
    let threads: Vec<_> = (0..writers)
        .map(|i| {
            let sem = Arc::clone(&sem);
            thread::spawn(move || {
                crate::sync::set_node(i % 2);
                for _ in 0..ROUNDS {
                    *sem.write() += 1;
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(*sem.read(), ROUNDS * writers);
}

#[test]
fn shuttle_lock_numa_two_nodes() {
    shuttle::check_random(|| two_nodes(6), 2000);
    shuttle::check_pct(|| two_nodes(6), 2000, 3);
}

#[test]
fn shuttle_lock_writer_handoff() {
    for kind in [LockKind::Rwsem, LockKind::Numa] {
        shuttle::check_random(move || writer_handoff(kind), 2000);
        shuttle::check_pct(move || writer_handoff(kind), 2000, 3);
    }
}
