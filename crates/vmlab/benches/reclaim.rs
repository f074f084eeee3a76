//! Memory reclamation schemes on the two paths that need one: a lockless
//! reader protecting what it reads (the fault path's `pin`), and a writer
//! replacing an object and retiring the old one (an RCU write's deferred
//! free). crossbeam-epoch (what `maple` uses), pinned per read and held
//! across reads as the lab's workers hold it, against `seize` and hazard
//! pointers (`haphazard`), all in the same run; a plain load with no
//! protection is the floor.
//!
//! Run with `cargo bench -p vmlab --bench reclaim`. Each figure is the
//! median of 7 timed batches of about 0.2 s; the reader is measured alone
//! and beside a writer that replaces the object continuously on another
//! thread (2 threads, so on a 2-core machine each has a core).

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use seize::Guard as _;

const BATCH: u64 = 1 << 16;
const SAMPLES: usize = 7;
const SAMPLE_TIME: Duration = Duration::from_millis(200);

/// One scheme: how a reader reads the shared value, how a writer replaces it.
trait Scheme: Sync {
    const NAME: &'static str;
    /// Per-thread reader state (a hazard pointer, or nothing).
    type Reader;
    fn reader(&self) -> Self::Reader;
    /// One protected read of the current value.
    fn read(&self, r: &mut Self::Reader) -> u64;
    /// Replaces the value with `v`, retiring the old one.
    fn write(&self, v: u64);
}

struct Crossbeam(crossbeam_epoch::Atomic<u64>);

impl Scheme for Crossbeam {
    const NAME: &'static str = "crossbeam-epoch";
    type Reader = ();
    fn reader(&self) {}
    fn read(&self, _: &mut ()) -> u64 {
        let g = crossbeam_epoch::pin();
        let p = self.0.load(Ordering::Acquire, &g);
        // SAFETY: the pointer is never null (set in `main`) and freed only
        // through `defer_destroy`, after `g` is dropped.
        unsafe { *p.deref() }
    }
    fn write(&self, v: u64) {
        crossbeam_write(&self.0, v);
    }
}

/// A crossbeam writer: swap, then defer the free of the old value.
fn crossbeam_write(a: &crossbeam_epoch::Atomic<u64>, v: u64) {
    let g = crossbeam_epoch::pin();
    let old = a.swap(crossbeam_epoch::Owned::new(v), Ordering::AcqRel, &g);
    // SAFETY: `old` is unlinked; readers that hold it are pinned.
    unsafe { g.defer_destroy(old) };
}

/// crossbeam-epoch read as `vmbench`'s workers fault (`Mm::fault_in`):
/// inside one guard held across reads, announcing a quiescent state
/// (repin, then collect) every [`QUIESCE_EVERY`] reads.
struct CrossbeamQsbr(crossbeam_epoch::Atomic<u64>);

/// As the lab's harness quiesces.
const QUIESCE_EVERY: u32 = vmlab::run::harness::Quiescence::EVERY;

impl Scheme for CrossbeamQsbr {
    const NAME: &'static str = "crossbeam-epoch, guard held (QSBR)";
    type Reader = (crossbeam_epoch::Guard, u32);
    fn reader(&self) -> Self::Reader {
        (crossbeam_epoch::pin(), 0)
    }
    fn read(&self, (guard, reads): &mut Self::Reader) -> u64 {
        *reads = reads.wrapping_add(1);
        if *reads % QUIESCE_EVERY == 0 {
            guard.repin();
            guard.flush();
        }
        let p = self.0.load(Ordering::Acquire, guard);
        // SAFETY: never null, and freed only through `defer_destroy`,
        // which waits for this guard's next repin.
        unsafe { *p.deref() }
    }
    fn write(&self, v: u64) {
        crossbeam_write(&self.0, v);
    }
}

struct Seize {
    collector: seize::Collector,
    ptr: AtomicPtr<u64>,
}

impl Scheme for Seize {
    const NAME: &'static str = "seize";
    type Reader = ();
    fn reader(&self) {}
    fn read(&self, _: &mut ()) -> u64 {
        let g = self.collector.enter();
        let p = g.protect(&self.ptr, Ordering::Acquire);
        // SAFETY: never null; retired only through `defer_retire`, and `g`
        // protects it until dropped.
        unsafe { *p }
    }
    fn write(&self, v: u64) {
        let g = self.collector.enter();
        let old = self.ptr.swap(Box::into_raw(Box::new(v)), Ordering::AcqRel);
        // SAFETY: `old` came from `Box::into_raw` and is unlinked.
        unsafe { g.defer_retire(old, seize::reclaim::boxed) };
    }
}

struct Hazard(haphazard::AtomicPtr<u64>);

impl Scheme for Hazard {
    const NAME: &'static str = "haphazard";
    type Reader = haphazard::HazardPointer<'static>;
    fn reader(&self) -> Self::Reader {
        haphazard::HazardPointer::new()
    }
    fn read(&self, hp: &mut Self::Reader) -> u64 {
        let v = *self.0.safe_load(hp).expect("never null");
        hp.reset_protection();
        v
    }
    fn write(&self, v: u64) {
        if let Some(old) = self.0.swap(Box::new(v)) {
            // SAFETY: `old` is unlinked and was allocated as a Box.
            unsafe { old.retire() };
        }
    }
}

/// The floor: a plain acquire load and read, no protection (the value is
/// never freed while this runs: no writer).
struct Unprotected(AtomicPtr<u64>);

impl Scheme for Unprotected {
    const NAME: &'static str = "no protection";
    type Reader = ();
    fn reader(&self) {}
    fn read(&self, _: &mut ()) -> u64 {
        // SAFETY: never null, never freed (no writer runs with this one).
        unsafe { *self.0.load(Ordering::Acquire) }
    }
    fn write(&self, _: u64) {
        unreachable!("no writer runs with the unprotected floor")
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// ns per read, and (with a writer beside it) the writer's ns per
/// replacement.
type Figure = (f64, Option<f64>);

/// Measures reads alone, or beside a writer.
fn measure<S: Scheme>(s: &S, with_writer: bool) -> Figure {
    let stop = AtomicBool::new(false);
    let writes = AtomicU64::new(0);
    std::thread::scope(|t| {
        let writer = with_writer.then(|| {
            t.spawn(|| {
                let start = Instant::now();
                let mut v = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    v += 1;
                    s.write(v);
                }
                writes.store(v, Ordering::Relaxed);
                start.elapsed().as_nanos() as f64
            })
        });
        let mut r = s.reader();
        let mut samples = Vec::new();
        for _ in 0..SAMPLES {
            let start = Instant::now();
            let mut n = 0u64;
            while start.elapsed() < SAMPLE_TIME {
                for _ in 0..BATCH {
                    black_box(s.read(&mut r));
                }
                n += BATCH;
            }
            samples.push(start.elapsed().as_nanos() as f64 / n as f64);
        }
        stop.store(true, Ordering::Relaxed);
        let per_write = writer.map(|w| {
            let ns = w.join().expect("writer");
            ns / writes.load(Ordering::Relaxed).max(1) as f64
        });
        (median(samples), per_write)
    })
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes other
    // flags: only a real benchmark run measures.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let cb = Crossbeam(crossbeam_epoch::Atomic::new(0));
    let qsbr = CrossbeamQsbr(crossbeam_epoch::Atomic::new(0));
    let sz = Seize {
        collector: seize::Collector::new(),
        ptr: AtomicPtr::new(Box::into_raw(Box::new(0))),
    };
    let hz = Hazard(haphazard::AtomicPtr::from(Box::new(0)));
    let floor = Unprotected(AtomicPtr::new(Box::into_raw(Box::new(0))));
    let (f, _) = measure(&floor, false);
    let rows: Vec<(&str, Figure, Figure)> = vec![
        (Crossbeam::NAME, measure(&cb, false), measure(&cb, true)),
        (
            CrossbeamQsbr::NAME,
            measure(&qsbr, false),
            measure(&qsbr, true),
        ),
        (Seize::NAME, measure(&sz, false), measure(&sz, true)),
        (Hazard::NAME, measure(&hz, false), measure(&hz, true)),
    ];
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("reclamation schemes, {threads} CPUs; ns per operation (median of {SAMPLES}); ratio to crossbeam-epoch in the same run");
    println!("plain load, no protection: {f:.2} ns/read");
    println!(
        "| scheme | read alone | ratio | read beside a writer | ratio | write (replace + retire) | ratio |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let (base_alone, base_beside, base_write) =
        (rows[0].1 .0, rows[0].2 .0, rows[0].2 .1.unwrap_or(1.0));
    for (name, alone, beside) in &rows {
        let w = beside.1.unwrap_or(f64::NAN);
        println!(
            "| {name} | {:.2} | {:.2}x | {:.2} | {:.2}x | {w:.1} | {:.2}x |",
            alone.0,
            alone.0 / base_alone,
            beside.0,
            beside.0 / base_beside,
            w / base_write
        );
    }
}
