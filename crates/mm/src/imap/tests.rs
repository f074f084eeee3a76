//! Unit tests of every design through the crate-private change API, and
//! the shuttle model of the `distributed` and `adaptive` protocols.

use std::collections::BTreeSet;
use std::ops::ControlFlow;
use std::sync::Arc;

use super::*;
use crate::flags::VmFlags;
use crate::policy::{AdaptiveConfig, Policy};
use crate::File;

fn vma(file: &Arc<File>, pgoff: u64, pages: u64) -> Arc<Vma> {
    let start = 0x10_0000 + (pgoff << 12);
    Arc::new(Vma::new(
        start,
        start + (pages << 12),
        VmFlags::READ,
        pgoff,
        Some(Arc::clone(file)),
        None,
    ))
}

fn config(design: ImapDesign, topology: &str) -> Policy {
    Policy {
        imap: design,
        topology: Some(Arc::new(topology.parse().unwrap())),
        adaptive: AdaptiveConfig {
            convert_after: 1,
            revert_window: Some(4),
        },
        ..Policy::default()
    }
}

fn link(map: &IMap, v: &Arc<Vma>, hint: Option<u32>) {
    map.update(&[], &[Link { vma: v, hint }]);
}

fn ids(map: &IMap, first: u64, last: u64) -> BTreeSet<usize> {
    let mut out = BTreeSet::new();
    let _ = map.visit_overlap(first, last, |v| {
        assert!(out.insert(Arc::as_ptr(v) as usize), "visited twice");
        ControlFlow::Continue(())
    });
    out
}

fn id(v: &Arc<Vma>) -> usize {
    Arc::as_ptr(v) as usize
}

#[test]
fn every_design_links_finds_and_unlinks() {
    let file = File::new("lib", 1 << 30);
    for design in ImapDesign::ALL {
        let map = IMap::new(&Arc::new(config(design, "4x2")));
        let a = vma(&file, 0, 4); // pages 0..=3
        let b = vma(&file, 2, 4); // 2..=5
        let c = vma(&file, 100, 1); // 100
        link(&map, &a, Some(0));
        link(&map, &b, Some(3));
        link(&map, &c, None);
        map.validate().unwrap();
        assert_eq!(map.count(), 3, "{design}");
        assert_eq!(ids(&map, 3, 3), [id(&a), id(&b)].into(), "{design}");
        assert_eq!(ids(&map, 4, 99), [id(&b)].into(), "{design}");
        assert_eq!(ids(&map, 6, 99), BTreeSet::new(), "{design}");
        assert_eq!(ids(&map, 0, u64::MAX).len(), 3, "{design}");
        assert_eq!(ids(&map, 5, 4), BTreeSet::new(), "empty range, {design}");
        // Split: b is replaced by two pieces, which keep its group.
        let b1 = vma(&file, 2, 1);
        let b2 = vma(&file, 3, 3);
        let g = b.imap_group();
        map.update(
            &[&b],
            &[
                Link {
                    vma: &b1,
                    hint: g.map(|g| g as u32),
                },
                Link {
                    vma: &b2,
                    hint: g.map(|g| g as u32),
                },
            ],
        );
        assert_eq!(b.imap_group(), None);
        assert_eq!(b1.imap_group(), g);
        assert_eq!(b2.imap_group(), g);
        map.validate().unwrap();
        assert_eq!(ids(&map, 5, 5), [id(&b2)].into(), "{design}");
        map.update(&[&a, &b1, &b2, &c], &[]);
        assert!(!map.is_mapped(), "{design}");
        map.validate().unwrap();
    }
}

#[test]
fn groups_follow_the_topology_and_the_grouping() {
    let one = |design, topo: &str, by| {
        let mut c = config(design, topo);
        c.group_by = by;
        IMap::new(&Arc::new(c.clone())).nr_groups()
    };
    assert_eq!(one(ImapDesign::Single, "12x32", GroupBy::Auto), 1);
    assert_eq!(one(ImapDesign::Split, "12x32", GroupBy::Auto), 12);
    assert_eq!(one(ImapDesign::Distributed, "1x8", GroupBy::Auto), 8);
    assert_eq!(one(ImapDesign::Distributed, "1x8", GroupBy::Cpus(3)), 3);
    assert_eq!(one(ImapDesign::SplitLocked, "2x8", GroupBy::Cpus(4)), 4);
    assert_eq!(one(ImapDesign::SplitLocked, "2x8", GroupBy::Node), 2);
}

#[test]
fn placement_local_uses_the_bound_cpu_and_least_populated_balances() {
    let file = File::new("lib", 1 << 30);
    let topo: Arc<Topology> = Arc::new("4x2".parse().unwrap());
    let mut c = config(ImapDesign::Distributed, "4x2");
    c.topology = Some(Arc::clone(&topo));
    let map = IMap::new(&Arc::new(c.clone()));
    topology::bind(&topo, 5, false).unwrap(); // node 2
    let v = vma(&file, 0, 1);
    link(&map, &v, None);
    topology::unbind();
    assert_eq!(v.imap_group(), Some(2));

    c.placement = Placement::LeastPopulated;
    let map = IMap::new(&Arc::new(c.clone()));
    let vs: Vec<_> = (0..8).map(|i| vma(&file, i, 1)).collect();
    for v in &vs {
        link(&map, v, None);
    }
    for g in 0..4 {
        assert_eq!(map.group_population(g), 2);
    }
    map.validate().unwrap();
    map.update(&vs.iter().collect::<Vec<_>>(), &[]);
}

#[test]
fn adaptive_converts_under_contention_and_back_when_quiet() {
    let file = File::new("lib", 1 << 30);
    let mut c = config(ImapDesign::Adaptive, "2x2");
    c.adaptive = AdaptiveConfig {
        convert_after: 1,
        revert_window: Some(3),
    };
    let map = Arc::new(IMap::new(&Arc::new(c.clone())));
    let kept = vma(&file, 7, 1);
    link(&map, &kept, Some(1));
    assert_eq!(map.mode(), ImapDesign::Adaptive);
    // Hold a walk (the central lock, shared) while another thread links:
    // its try-lock fails, which with convert_after = 1 converts the map.
    let other = vma(&file, 9, 1);
    std::thread::scope(|s| {
        let (m, o) = (&*map, &other);
        let _ = map.visit_all(|_| {
            s.spawn(move || link(m, o, Some(0)));
            while m.adaptive_failures() == 0 {
                std::thread::yield_now();
            }
            ControlFlow::Break(())
        });
    });
    assert_eq!(map.conversions(), 1);
    assert_eq!(map.mode(), ImapDesign::Distributed);
    map.validate().unwrap();
    assert_eq!(ids(&map, 0, 100), [id(&kept), id(&other)].into());
    // Three uncontended changes convert it back.
    let more: Vec<_> = (20..23).map(|p| vma(&file, p, 1)).collect();
    for v in &more {
        link(&map, v, None);
    }
    assert_eq!(map.conversions(), 2);
    assert_eq!(map.mode(), ImapDesign::Adaptive);
    map.validate().unwrap();
    assert_eq!(map.count(), 5);
    assert_eq!(ids(&map, 0, u64::MAX).len(), 5);
}

#[test]
fn the_address_space_keeps_the_map_in_step() {
    use crate::{MapFlags, Mm, Prot};
    for design in ImapDesign::ALL {
        let file = Arc::new(config(design, "3x1")).file("lib", 1 << 24);
        let mm = Mm::default();
        let a = mm
            .mmap(0, 16 << 12, Prot::READ, MapFlags::PRIVATE, Some(&file), 0)
            .unwrap();
        assert_eq!(file.imap().count(), 1);
        mm.mprotect(a + (4 << 12), 4 << 12, Prot::READ | Prot::EXEC)
            .unwrap();
        assert_eq!(file.imap().count(), 3, "split in three, {design}");
        let groups: BTreeSet<_> = file.imap().entries().iter().map(|e| e.group).collect();
        assert_eq!(groups.len(), 1, "the pieces stay in one group, {design}");
        mm.mprotect(a + (4 << 12), 4 << 12, Prot::READ).unwrap();
        assert_eq!(file.imap().count(), 1, "merged back, {design}");
        let child = mm.fork();
        assert_eq!(file.imap().count(), 2);
        let e = file.imap().entries();
        assert_eq!(
            e[0].group, e[1].group,
            "fork goes next to its parent, {design}"
        );
        mm.munmap(a, 8 << 12).unwrap();
        assert_eq!(file.imap().count(), 2);
        assert_eq!(ids(file.imap(), 0, 7).len(), 1, "only the child maps 0..8");
        mm.validate().unwrap();
        child.exit();
        drop(mm);
        assert!(!file.imap().is_mapped(), "{design}");
        file.imap().validate().unwrap();
    }
}

/// The shuttle model: changes in two groups, whole-file walks and (for
/// `adaptive`, with conversion after one failed try-lock and back after
/// one quiet change) conversions, in every interleaving shuttle's random
/// scheduler tries. Checks that a walk never sees a VMA twice, always sees
/// the VMA nobody removes, and that the end state holds exactly the VMAs
/// linked and not unlinked.
#[cfg(vmscale_shuttle)]
mod shuttle_model {
    use super::*;
    use crate::policy::AdaptiveConfig;
    use shuttle::sync::Arc as SArc;
    use shuttle::thread;

    fn model(design: ImapDesign) {
        let file = File::new("lib", 1 << 30);
        let mut c = config(design, "2x1");
        c.adaptive = AdaptiveConfig {
            convert_after: 1,
            revert_window: Some(1),
        };
        let map = SArc::new(IMap::new(&Arc::new(c.clone())));
        let kept = vma(&file, 0, 1);
        link(&map, &kept, Some(0));
        let a = vma(&file, 1, 2);
        let b = vma(&file, 2, 2);
        let handles: Vec<_> = [(a.clone(), 0u32), (b.clone(), 1u32)]
            .into_iter()
            .map(|(v, g)| {
                let map = SArc::clone(&map);
                thread::spawn(move || {
                    link(&map, &v, Some(g));
                    map.update(&[&v], &[]);
                    link(&map, &v, Some(g));
                })
            })
            .collect();
        let walker = {
            let map = SArc::clone(&map);
            let kept = kept.clone();
            thread::spawn(move || {
                for _ in 0..2 {
                    let seen = ids(&map, 0, u64::MAX);
                    assert!(seen.contains(&id(&kept)), "a walk lost a VMA");
                }
            })
        };
        for h in handles {
            h.join().unwrap();
        }
        walker.join().unwrap();
        map.validate().unwrap();
        assert_eq!(ids(&map, 0, u64::MAX), [id(&kept), id(&a), id(&b)].into());
        map.update(&[&kept, &a, &b], &[]);
        assert!(!map.is_mapped());
    }

    #[test]
    fn shuttle_distributed() {
        shuttle::check_random(|| model(ImapDesign::Distributed), 2000);
    }

    #[test]
    fn shuttle_adaptive() {
        shuttle::check_random(|| model(ImapDesign::Adaptive), 3000);
    }

    #[test]
    fn shuttle_split_locked() {
        shuttle::check_random(|| model(ImapDesign::SplitLocked), 1000);
    }
}
