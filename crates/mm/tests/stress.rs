//! Randomized stress of the fault path against a concurrent writer.
//!
//! Faulting threads take the lockless path while one thread changes the
//! map (mprotect, munmap, mmap) and validates it after every step. Each
//! churned page carries a state word the writer updates around each call
//! (`changing`, then the final state); a fault whose page had the same
//! final state before and after it must have seen exactly that state:
//! never a successful write to a page that was read-only or unmapped the
//! whole time, never a refused write to a page writable the whole time.
//!
//! The writer faults first, so it is the address space's one lockless
//! reader and its writes start in place (no grace period); each faulting
//! thread joins after its own delay, in the middle of the churn, which is
//! when the maple index must switch to RCU writes (`index/sharing.rs`).
//!
//! Even-numbered faulting threads fault inside one grace period they hold
//! across their loop (`Mm::fault_in`, announcing a quiescent state every
//! 64 faults), odd-numbered ones with `Mm::fault`; the first to join is a
//! guarded one, so the switch to RCU writes happens under its admission.
//!
//! `MM_STRESS_SECS` (default 2) sets the duration; `MM_STRESS_THREADS`
//! the number of faulting threads (default 2).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mm::{Access, FaultError, IndexKind, MapFlags, Policy, Prot};

mod common;
use common::{env, Rng};

const PAGE: u64 = 4096;
const BASE: u64 = 0x2000_0000_0000;
const PAGES: u64 = 64;
const CHANGING: u64 = 2;
const WRITABLE: u64 = 1;

fn run(index: IndexKind) {
    let secs = env("MM_STRESS_SECS", 2);
    let threads = env("MM_STRESS_THREADS", 2);
    let mm = Arc::new(
        Arc::new(Policy {
            index,
            ..Policy::default()
        })
        .mm(),
    );
    let shared = MapFlags::SHARED | MapFlags::ANONYMOUS | MapFlags::FIXED;
    let rw = Prot::READ | Prot::WRITE;
    mm.mmap(BASE, PAGES * PAGE, rw, shared, None, 0).unwrap();
    // A stable region beside it that nobody changes.
    let stable = BASE + 2 * PAGES * PAGE;
    mm.mmap(stable, PAGES * PAGE, rw, shared, None, 0).unwrap();
    // The writer claims the lockless path before anyone else.
    assert!(mm.fault(stable, Access::Write).is_ok());
    let state: Arc<Vec<AtomicU64>> =
        Arc::new((0..PAGES).map(|_| AtomicU64::new(WRITABLE)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let faulters: Vec<_> = (0..threads)
        .map(|t| {
            let (mm, state, stop) = (mm.clone(), state.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut rng = Rng(t + 1);
                // Join the churn late, one thread after another.
                std::thread::sleep(Duration::from_millis(20 + 40 * t));
                let mut checked = 0u64;
                let guarded = t % 2 == 0;
                let mut guard = maple::pin();
                let fault = |guard: &maple::Guard, addr, access| {
                    if guarded {
                        mm.fault_in(guard, addr, access)
                    } else {
                        mm.fault(addr, access)
                    }
                };
                let mut round = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    round += 1;
                    if round % 64 == 0 {
                        guard.repin();
                        guard.flush();
                    }
                    let p = rng.next() % PAGES;
                    let s1 = state[p as usize].load(Ordering::SeqCst);
                    let r = fault(&guard, BASE + p * PAGE + rng.next() % PAGE, Access::Write);
                    let s2 = state[p as usize].load(Ordering::SeqCst);
                    if s1 == s2 && s1 & CHANGING == 0 {
                        checked += 1;
                        let writable = s1 & WRITABLE != 0;
                        assert_eq!(r.is_ok(), writable, "page {p}: state {s1:#x}, fault {r:?}");
                    }
                    let q = rng.next() % PAGES;
                    assert!(fault(&guard, stable + q * PAGE, Access::Write).is_ok());
                    assert_eq!(
                        fault(&guard, BASE + 4 * PAGES * PAGE, Access::Read),
                        Err(FaultError::Segv)
                    );
                }
                checked
            })
        })
        .collect();
    let mut rng = Rng(99);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut steps = 0u64;
    while Instant::now() < deadline {
        let p = rng.next() % PAGES;
        let n = 1 + rng.next() % 4;
        let n = n.min(PAGES - p);
        let range = p as usize..(p + n) as usize;
        let version = (steps + 1) << 2;
        for s in &state[range.clone()] {
            s.store(version | CHANGING, Ordering::SeqCst);
        }
        let addr = BASE + p * PAGE;
        let writable = match rng.next() % 4 {
            0 => {
                mm.munmap(addr, n * PAGE).unwrap();
                false
            }
            1 => {
                mm.mmap(addr, n * PAGE, rw, shared, None, 0).unwrap();
                true
            }
            2 => {
                // Fails with ENOMEM where part of the range is unmapped;
                // the pages before the hole still change, so such a step
                // leaves its pages "changing" (unchecked) from now on.
                if mm.mprotect(addr, n * PAGE, Prot::READ).is_err() {
                    steps += 1;
                    continue;
                }
                false
            }
            _ => {
                if mm.mprotect(addr, n * PAGE, rw).is_err() {
                    steps += 1;
                    continue;
                }
                true
            }
        };
        for s in &state[range] {
            s.store(version | u64::from(writable), Ordering::SeqCst);
        }
        mm.validate().unwrap();
        steps += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let checked: u64 = faulters.into_iter().map(|h| h.join().unwrap()).sum();
    eprintln!("stress {index}: {steps} writer steps, {checked} checked faults");
    assert!(steps > 0 && checked > 0);
}

#[test]
fn faults_race_map_changes_maple() {
    run(IndexKind::Maple);
}

#[test]
fn faults_race_map_changes_legacy() {
    run(IndexKind::Legacy);
}
