//! Randomized multi-threaded stress of the file reverse maps, with the
//! invariant checker run after every step, for every i_mmap design on
//! several topologies (the host's and emulated ones).
//!
//! Worker threads, each bound to a different (virtual) CPU so that local
//! placement spreads VMAs over groups, own a few address spaces and take
//! random steps on them: file `mmap` (placed, or `MAP_FIXED` over other
//! mappings), `munmap`, `mprotect` splits and merges, `mremap` moves and
//! resizes, `fork`, `exec`, `exit`, and dropping an address space. All of
//! them map the same two files. A walker thread meanwhile runs overlap
//! queries on both files. After every round of steps (one per worker, run
//! concurrently) the workers stop at a barrier and one checks, for each
//! file, that:
//!
//! - every file VMA of every live address space is in exactly one group
//!   of its file's map, keyed by its own page-offset range, in the group
//!   it records, and nothing else is in the map;
//! - the map's own invariants hold (`IMap::validate`: tree structure,
//!   groups, counters);
//! - overlap queries over random ranges return exactly what a brute-force
//!   scan of the live address spaces returns.
//!
//! `MM_IMAP_STRESS_STEPS` (default 300) sets the rounds per configuration,
//! `MM_IMAP_STRESS_SEED` the seed.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};

use mm::policy::{AdaptiveConfig, GroupBy, ImapDesign, Placement, Policy};
use mm::topology::{self, Topology};
use mm::{Access, File, Image, MapFlags, Mm, MremapFlags, Prot, Segment, Vma};

mod common;
use common::{env, Rng};

const PAGE: u64 = 4096;
const WORKERS: usize = 3;
const FILE_PAGES: u64 = 256;

fn id(v: &Arc<Vma>) -> usize {
    Arc::as_ptr(v) as usize
}

fn range_of(v: &Vma) -> (u64, u64) {
    (v.pgoff(), v.pgoff() + v.len() / PAGE - 1)
}

/// One random step on `mms` (this worker's address spaces).
fn step(rng: &mut Rng, mms: &mut Vec<Mm>, files: &[Arc<File>]) {
    if mms.is_empty() {
        mms.push(files[0].policy().mm());
    }
    let at = rng.below(mms.len() as u64) as usize;
    let file = &files[rng.below(files.len() as u64) as usize];
    let prots = [
        Prot::READ,
        Prot::READ | Prot::EXEC,
        Prot::READ | Prot::WRITE,
    ];
    let prot = prots[rng.below(3) as usize];
    let pages = 1 + rng.below(16);
    let pgoff = rng.below(FILE_PAGES - pages);
    // A random address near the mappings this address space has.
    let vmas = mms[at].vmas();
    let near = match vmas.get(rng.below(vmas.len() as u64 + 1) as usize) {
        Some(v) => v.start() + rng.below(v.len() / PAGE + 2) * PAGE,
        None => 0x7f00_0000_0000,
    };
    let mm = &mms[at];
    // Failures (ENOMEM for an mremap that cannot grow, EINVAL for a bad
    // combination) are part of the test: a failed call must leave the
    // maps, and the reverse maps, as they were.
    match rng.below(100) {
        0..=24 => {
            let flags = if rng.below(2) == 0 {
                MapFlags::PRIVATE
            } else {
                MapFlags::SHARED
            };
            let _ = mm.mmap(0, pages * PAGE, prot, flags, Some(file), pgoff);
        }
        25..=34 => {
            let flags = MapFlags::PRIVATE | MapFlags::FIXED;
            let _ = mm.mmap(near, pages * PAGE, prot, flags, Some(file), pgoff);
        }
        35..=49 => {
            let _ = mm.munmap(near, pages * PAGE);
        }
        50..=69 => {
            let _ = mm.mprotect(near, pages * PAGE, prot);
        }
        70..=79 => {
            if let Some(v) = vmas.get(rng.below(vmas.len() as u64) as usize) {
                let new_len = (1 + rng.below(12)) * PAGE;
                let _ = mm.mremap(v.start(), v.len(), new_len, MremapFlags::MAYMOVE, 0);
            }
        }
        80..=85 => {
            if mms.len() < 3 {
                let child = mm.fork();
                mms.push(child);
            }
        }
        86..=89 => {
            let seg = |f: &Arc<File>, vaddr: u64, prot| Segment {
                file: Arc::clone(f),
                offset: vaddr,
                vaddr: 0x40_0000 + vaddr,
                filesz: 3 * PAGE,
                memsz: 5 * PAGE,
                prot,
            };
            let image = Image {
                segments: vec![
                    seg(file, 0, Prot::READ | Prot::EXEC),
                    seg(file, 8 * PAGE, Prot::READ),
                ],
                interp: Vec::new(),
                stack_size: 8 * PAGE,
            };
            let _ = mm.exec(&image);
        }
        90..=92 => mm.exit(),
        93..=94 => {
            // A write fault gives a private writable VMA its anon_vma
            // (anon_vma_prepare); later edits and forks carry the chains.
            let _ = mm.fault(near, Access::Write);
            let _ = mm.mmap(
                0,
                pages * PAGE,
                Prot::READ | Prot::WRITE,
                MapFlags::PRIVATE | MapFlags::ANONYMOUS,
                None,
                0,
            );
        }
        _ => {
            mms.swap_remove(at);
        }
    }
}

fn live_all(all: &[Arc<Mutex<Vec<Mm>>>]) -> Vec<Arc<Vma>> {
    let mut out = Vec::new();
    for owner in all {
        for mm in owner.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            out.extend(mm.vmas());
        }
    }
    out
}

/// Every VMA with an anon_vma is linked, with its page range, into the
/// tree of every anon_vma on its chain, and those trees hold nothing
/// else.
fn check_anon(live: &[Arc<Vma>], what: &str) {
    let mut expected: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
    let mut anons = BTreeMap::new();
    for v in live {
        if let Some(link) = v.anon() {
            assert_eq!(
                link.chain()[0].id(),
                link.anon_vma.id(),
                "{what}: chain head"
            );
            for a in link.chain() {
                expected.entry(a.id()).or_default().push(range_of(v));
                anons.insert(a.id(), Arc::clone(a));
            }
        }
    }
    for (id, a) in anons {
        let mut want = expected.remove(&id).unwrap_or_default();
        want.sort_unstable();
        let mut got = a.entries();
        got.sort_unstable();
        assert_eq!(got, want, "{what}: anon_vma {id} entries");
    }
}

/// The invariant checker: see the module docs.
fn check(files: &[Arc<File>], all: &[Arc<Mutex<Vec<Mm>>>], rng: &mut Rng, what: &str) {
    let mut live: Vec<Arc<Vma>> = Vec::new();
    for owner in all {
        for mm in owner.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            mm.validate()
                .unwrap_or_else(|e| panic!("{what}: address space: {e}"));
            live.extend(mm.vmas().into_iter().filter(|v| v.file().is_some()));
        }
    }
    check_anon(&live_all(all), what);
    for file in files {
        let map = file.imap();
        map.validate()
            .unwrap_or_else(|e| panic!("{what}: {}: {e}", file.name()));
        let expected: BTreeMap<usize, &Arc<Vma>> = live
            .iter()
            .filter(|v| Arc::ptr_eq(v.file().unwrap(), file))
            .map(|v| (id(v), v))
            .collect();
        let entries = map.entries();
        let mut seen = BTreeSet::new();
        for e in &entries {
            assert!(seen.insert(id(&e.vma)), "{what}: a VMA is in the map twice");
            assert!(
                expected.contains_key(&id(&e.vma)),
                "{what}: the map holds a VMA no live address space has"
            );
            assert_eq!((e.first, e.last), range_of(&e.vma), "{what}: wrong range");
            assert!(e.group < map.nr_groups(), "{what}: group out of range");
            assert_eq!(Some(e.group), e.vma.imap_group(), "{what}: group record");
        }
        assert_eq!(
            seen.len(),
            expected.len(),
            "{what}: live VMAs missing from the map"
        );
        assert_eq!(map.count(), expected.len(), "{what}: count");
        assert_eq!(map.is_mapped(), !expected.is_empty(), "{what}: is_mapped");
        for _ in 0..8 {
            let first = rng.below(FILE_PAGES + 8);
            let last = first + rng.below(40);
            let mut got = BTreeSet::new();
            let _ = map.visit_overlap(first, last, |v| {
                assert!(got.insert(id(v)), "{what}: query visited a VMA twice");
                ControlFlow::Continue(())
            });
            let want: BTreeSet<usize> = expected
                .values()
                .filter(|v| {
                    let (f, l) = range_of(v);
                    f <= last && l >= first
                })
                .map(|v| id(v))
                .collect();
            assert_eq!(got, want, "{what}: overlap [{first}, {last}]");
        }
    }
}

/// Returns the steps taken (each followed by the whole check) and the
/// overlap queries the walker checked.
fn run(config: Arc<Policy>, seed: u64, steps: u64) -> (u64, u64) {
    let what = format!(
        "{} on {} ({}, {:?})",
        config.imap,
        config
            .topology
            .as_ref()
            .map_or("host".to_string(), |t| t.to_string()),
        config.group_by,
        config.placement
    );
    let topo = config.topology.clone().unwrap_or_else(topology::host);
    let files: Vec<Arc<File>> = ["libc.so.6", "ld.so"]
        .iter()
        .map(|n| config.file(*n, FILE_PAGES * PAGE))
        .collect();
    let all: Vec<Arc<Mutex<Vec<Mm>>>> = (0..WORKERS).map(|_| Arc::default()).collect();
    let barrier = Barrier::new(WORKERS);
    let done = AtomicUsize::new(0);
    let failure: Mutex<Option<String>> = Mutex::new(None);
    let (taken, queries) = (AtomicUsize::new(0), AtomicUsize::new(0));
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut rng = Rng(seed ^ 0xabcdef);
            while done.load(Ordering::Relaxed) < WORKERS {
                for file in &files {
                    let first = rng.below(FILE_PAGES);
                    let last = first + rng.below(32);
                    let _ = file.imap().visit_overlap(first, last, |v| {
                        let (f, l) = range_of(v);
                        assert!(f <= last && l >= first, "{what}: walk returned a miss");
                        assert!(Arc::ptr_eq(v.file().unwrap(), file), "{what}: wrong file");
                        ControlFlow::Continue(())
                    });
                    queries.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        for w in 0..WORKERS {
            let (all, files, barrier, topo, what, done, failure, taken) = (
                &all, &files, &barrier, &topo, &what, &done, &failure, &taken,
            );
            s.spawn(move || {
                // Spread the workers over the (virtual) CPUs.
                let vcpu = w * topo.nr_cpus() / WORKERS;
                topology::bind(topo, vcpu, false).unwrap();
                let mut rng = Rng(seed.wrapping_mul(31).wrapping_add(w as u64));
                // A panic in a step or a check is caught and recorded, and
                // every worker stops at the next barrier, so a failure fails
                // the test instead of leaving the others waiting for good.
                let guarded = |f: &mut dyn FnMut()| {
                    if let Err(p) = catch_unwind(AssertUnwindSafe(f)) {
                        let msg = p
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_else(|| "panic".to_string());
                        failure
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .get_or_insert(msg);
                    }
                };
                for round in 0..steps {
                    guarded(&mut || {
                        step(
                            &mut rng,
                            &mut all[w].lock().unwrap_or_else(|e| e.into_inner()),
                            files,
                        )
                    });
                    taken.fetch_add(1, Ordering::Relaxed);
                    barrier.wait();
                    if w == 0 && failure.lock().unwrap_or_else(|e| e.into_inner()).is_none() {
                        let what = format!("{what}, round {round}");
                        guarded(&mut || check(files, all, &mut rng, &what));
                    }
                    barrier.wait();
                    if failure.lock().unwrap_or_else(|e| e.into_inner()).is_some() {
                        break;
                    }
                }
                all[w].lock().unwrap_or_else(|e| e.into_inner()).clear();
                topology::unbind();
                done.fetch_add(1, Ordering::Relaxed);
            });
        }
    });
    if let Some(msg) = failure.into_inner().unwrap() {
        panic!("{msg}");
    }
    for f in &files {
        assert!(
            !f.imap().is_mapped(),
            "{what}: VMAs left after every address space went"
        );
        f.imap().validate().unwrap();
    }
    (taken.into_inner() as u64, queries.into_inner() as u64)
}

fn configs() -> Vec<Arc<Policy>> {
    let adaptive = AdaptiveConfig {
        convert_after: 2,
        revert_window: Some(6),
    };
    let mut out = Vec::new();
    for design in ImapDesign::ALL {
        for (topo, group_by, placement) in [
            (None, GroupBy::Auto, Placement::Local),
            (Some("12x32"), GroupBy::Auto, Placement::Local),
            (Some("2x4"), GroupBy::Cpus(3), Placement::LeastPopulated),
        ] {
            out.push(Arc::new(Policy {
                imap: design,
                group_by,
                placement,
                topology: topo.map(|t| Arc::new(t.parse::<Topology>().unwrap())),
                adaptive,
                ..Policy::default()
            }));
        }
    }
    out
}

#[test]
fn every_design_and_topology_keeps_the_reverse_maps_exact() {
    let steps = env("MM_IMAP_STRESS_STEPS", 300);
    let seed = env("MM_IMAP_STRESS_SEED", 0x5eed);
    let (mut taken, mut queries) = (0, 0);
    for (i, config) in configs().into_iter().enumerate() {
        let (t, q) = run(config, seed.wrapping_add(i as u64), steps);
        taken += t;
        queries += q;
    }
    eprintln!("imap stress: {taken} checked steps, {queries} checked queries");
}
