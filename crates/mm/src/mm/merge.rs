//! When neighbouring VMAs become one, as Linux's `mm/vma.c` decides it.
//!
//! Two VMAs merge when they touch, have equal flags (ignoring soft-dirty
//! and the sticky `VM_MAYBE_GUARD`, which the merged VMA keeps if either
//! side had it),
//! map the same file (or none) at contiguous page offsets, neither is a
//! special mapping, and their anon_vmas agree: equal, or only one has one
//! and the other side was never forked from a parent whose pages it still
//! shares (`vma_had_uncowed_parents`). A VMA's page offset matters even for
//! anonymous memory: it starts as the page number of the first address, so
//! a VMA moved by `mremap` after its first write no longer merges with
//! mappings made next to it.

use std::sync::Arc;

use crate::anon::{AnonLink, AnonVma};
use crate::file::File;
use crate::flags::{VmFlags, PAGE_SHIFT};
use crate::vma::Vma;

use super::State;

/// The sticky flags (`VM_STICKY`) of the VMAs a merge joins: the merged
/// VMA keeps them.
fn sticky<'a>(vmas: impl IntoIterator<Item = &'a Arc<Vma>>) -> VmFlags {
    vmas.into_iter()
        .fold(VmFlags::empty(), |f, v| f | (v.flags() & VmFlags::STICKY))
}

/// `VM_SPECIAL` as far as the model keeps it: never merged.
fn special(flags: VmFlags) -> bool {
    flags.contains(VmFlags::DONTEXPAND)
}

fn same_file(a: Option<&Arc<File>>, b: Option<&Arc<File>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        _ => false,
    }
}

fn pages(start: u64, end: u64) -> u64 {
    (end - start) >> PAGE_SHIFT
}

/// `is_mergeable_vma`: flags, file and anonymous name agree.
fn mergeable_vma(
    tgt: &Vma,
    flags: VmFlags,
    file: Option<&Arc<File>>,
    name: Option<&Arc<str>>,
) -> bool {
    tgt.flags().merge_key() == flags.merge_key()
        && same_file(tgt.file(), file)
        && !special(tgt.flags())
        && tgt.anon_name() == name.map(|n| &**n)
}

/// `is_mergeable_anon_vma`: `src` is the anon_vma the merged range brings,
/// `src_inherited` whether the VMA it comes from shares a parent's pages.
fn mergeable_anon(tgt: Option<&AnonLink>, src: Option<&AnonLink>, src_inherited: bool) -> bool {
    match (tgt, src) {
        (None, Some(_)) => !src_inherited,
        (Some(t), None) => !t.inherited(),
        _ => AnonLink::same(tgt, src),
    }
}

/// Whether `prev` and `next` could share one anon_vma when a merge joins
/// both to the range between them.
fn anon_compatible(prev: &Vma, next: &Vma) -> bool {
    prev.anon().is_none() || next.anon().is_none() || AnonLink::same(prev.anon(), next.anon())
}

/// A range about to be mapped (or moved, or grown) and what it would hold.
pub(crate) struct Proposal<'a> {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) flags: VmFlags,
    pub(crate) file: Option<&'a Arc<File>>,
    pub(crate) pgoff: u64,
    pub(crate) anon: Option<AnonLink>,
}

impl State {
    /// `vma_merge_new_range`: merge a range that no VMA covers yet with the
    /// VMA ending at its start and/or the one starting at its end. With
    /// `just_expand` only the left neighbour is considered (`brk`).
    /// Returns the VMA that now covers the range.
    pub(crate) fn merge_new(&mut self, p: &Proposal<'_>, just_expand: bool) -> Option<Arc<Vma>> {
        self.merge_new_named(p, None, just_expand)
    }

    /// [`merge_new`](Self::merge_new) for a range that brings the
    /// anonymous name `name` (an `mremap` of a named VMA).
    pub(crate) fn merge_new_named(
        &mut self,
        p: &Proposal<'_>,
        name: Option<&Arc<str>>,
        just_expand: bool,
    ) -> Option<Arc<Vma>> {
        if special(p.flags) {
            return None;
        }
        let prev = self.ending_at(p.start).filter(|prev| {
            mergeable_vma(prev, p.flags, p.file, name)
                && mergeable_anon(prev.anon(), p.anon.as_ref(), false)
                && prev.pgoff() + pages(prev.start(), prev.end()) == p.pgoff
        });
        let next = if just_expand {
            None
        } else {
            self.starting_at(p.end).filter(|next| {
                mergeable_vma(next, p.flags, p.file, name)
                    && mergeable_anon(next.anon(), p.anon.as_ref(), false)
                    && next.pgoff() == p.pgoff + pages(p.start, p.end)
                    && prev.as_ref().is_none_or(|prev| anon_compatible(prev, next))
            })
        };
        if prev.is_none() && next.is_none() {
            return None;
        }
        let start = prev.as_ref().map_or(p.start, |v| v.start());
        let end = next.as_ref().map_or(p.end, |v| v.end());
        let pgoff = prev.as_ref().map_or(p.pgoff, |v| v.pgoff());
        let anon = prev
            .as_ref()
            .and_then(|v| v.anon().cloned())
            .or_else(|| next.as_ref().and_then(|v| v.anon().cloned()))
            .or_else(|| p.anon.clone());
        let old: Vec<Arc<Vma>> = prev.into_iter().chain(next).collect();
        let flags = p.flags | sticky(&old);
        let merged = Vma::new(start, end, flags, pgoff, p.file.cloned(), anon).named(name.cloned());
        self.commit(&old, vec![merged]).pop()
    }

    /// `vma_merge_existing_range`: after giving `[start, end)` of `middle`
    /// the flags `flags` and the anonymous name `name`, merge that part
    /// with `prev` (the VMA before it) and/or the VMA after `middle`. Only
    /// a range touching one of `middle`'s ends can merge. Returns the VMA
    /// now covering the range.
    pub(crate) fn merge_existing_named(
        &mut self,
        middle: &Arc<Vma>,
        prev: Option<&Arc<Vma>>,
        start: u64,
        end: u64,
        flags: VmFlags,
        name: Option<&Arc<str>>,
    ) -> Option<Arc<Vma>> {
        let left_side = start == middle.start();
        let right_side = end == middle.end();
        if special(flags) || (!left_side && !right_side) {
            return None;
        }
        let file = middle.file();
        let pgoff = middle.pgoff_at(start);
        let anon = middle.anon();
        let inherited = anon.is_some_and(|a| a.inherited());
        let prev = prev.filter(|prev| {
            left_side
                && prev.end() == start
                && mergeable_vma(prev, flags, file, name)
                && mergeable_anon(prev.anon(), anon, inherited)
                && prev.pgoff() + pages(prev.start(), prev.end()) == pgoff
        });
        let next = if right_side {
            self.starting_at(middle.end()).filter(|next| {
                mergeable_vma(next, flags, file, name)
                    && mergeable_anon(next.anon(), anon, inherited)
                    && next.pgoff() == pgoff + pages(start, end)
                    && prev.is_none_or(|prev| anon_compatible(prev, next))
            })
        } else {
            None
        };
        let pick_anon = |target: &Vma| target.anon().cloned().or_else(|| anon.cloned());
        let flags = flags | sticky(prev.into_iter().chain(next.as_ref()));
        let (old, new, merged_at) = match (prev, next) {
            (None, None) => return None,
            (Some(prev), Some(next)) => {
                let a = prev
                    .anon()
                    .cloned()
                    .or_else(|| next.anon().cloned())
                    .or_else(|| anon.cloned());
                let v = Vma::new(
                    prev.start(),
                    next.end(),
                    flags,
                    prev.pgoff(),
                    file.cloned(),
                    a,
                )
                .named(name.cloned());
                (vec![Arc::clone(prev), Arc::clone(middle), next], vec![v], 0)
            }
            (Some(prev), None) => {
                let v = Vma::new(
                    prev.start(),
                    end,
                    flags,
                    prev.pgoff(),
                    file.cloned(),
                    pick_anon(prev),
                )
                .named(name.cloned());
                let mut new = vec![v];
                if !right_side {
                    new.push(middle.resized(end, middle.end()));
                }
                (vec![Arc::clone(prev), Arc::clone(middle)], new, 0)
            }
            (None, Some(next)) => {
                let v = Vma::new(
                    start,
                    next.end(),
                    flags,
                    pgoff,
                    file.cloned(),
                    pick_anon(&next),
                )
                .named(name.cloned());
                let mut new = Vec::new();
                if !left_side {
                    new.push(middle.resized(middle.start(), start));
                }
                new.push(v);
                let at = new.len() - 1;
                (vec![Arc::clone(middle), next], new, at)
            }
        };
        let mut committed = self.commit(&old, new);
        Some(committed.swap_remove(merged_at))
    }

    /// `find_mergeable_anon_vma`: an anon_vma a neighbour could share with
    /// `vma` (touching, same file and flags but for access bits, contiguous
    /// offsets, and not itself shared with a parent).
    pub(crate) fn mergeable_anon_vma(&self, vma: &Vma) -> Option<Arc<AnonVma>> {
        if let Some(next) = self.starting_at(vma.end()) {
            if anon_vma_compatible(vma, &next) {
                if let Some(a) = reusable_anon_vma(&next) {
                    return Some(a);
                }
            }
        }
        let prev = self.ending_at(vma.start())?;
        if anon_vma_compatible(&prev, vma) {
            return reusable_anon_vma(&prev);
        }
        None
    }
}

/// `anon_vma_compatible`: `a` and the VMA `b` right after it could share
/// an anon_vma (touching, same file and flags but for access bits,
/// contiguous offsets).
pub(crate) fn anon_vma_compatible(a: &Vma, b: &Vma) -> bool {
    a.end() == b.start()
        && same_file(a.file(), b.file())
        && ((a.flags() ^ b.flags()) - VmFlags::ACCESS - VmFlags::SOFTDIRTY - VmFlags::STICKY)
            .is_empty()
        && b.pgoff() == a.pgoff() + pages(a.start(), a.end())
}

/// `reusable_anon_vma`: `old`'s anon_vma, unless it is shared with a
/// parent (then a neighbour must not take it).
pub(crate) fn reusable_anon_vma(old: &Vma) -> Option<Arc<AnonVma>> {
    old.anon()
        .filter(|l| !l.inherited())
        .map(|l| Arc::clone(&l.anon_vma))
}
