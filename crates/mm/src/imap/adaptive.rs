//! `adaptive`: centralised until contention is seen, then distributed.
//!
//! The map starts as `single` (one tree, one lock: the cheapest design
//! while nobody competes). A change try-locks the lock; each failure is
//! counted, and once [`AdaptiveConfig::convert_after`] have been seen the
//! map converts to `distributed`. With
//! [`AdaptiveConfig::revert_window`] set it converts back after that many
//! consecutive changes found every group lock free.
//!
//! # Why conversion is safe
//!
//! Both modes live under one top-level rwsem whose value says which mode
//! is in force (`State::distributed`):
//!
//! - central mode: a change holds the top lock *exclusive* and edits the
//!   central tree; a walk holds it shared;
//! - distributed mode: a change holds the top lock *shared* and then its
//!   groups' locks (ascending), a walk holds it exclusive;
//! - a conversion, either way, holds it exclusive: no change and no walk is
//!   in flight, so it moves every VMA between the central tree and the
//!   group trees (by the group each VMA recorded when linked) without
//!   anyone seeing a half-moved map.
//!
//! The mode hint (`mode`) only picks which way to lock first: every
//! operation re-reads `State::distributed` under the lock it took and
//! starts again if the mode changed in between, so a stale hint costs a
//! retry, never a wrong tree. The shuttle model in `imap::tests` explores
//! changes, walks and conversions interleaved.

use std::ops::ControlFlow;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::designs::{apply_locked, group_locks, new_tree, Change, EachTree, GroupLocks, Visit};
use super::{sem, tree_insert, tree_visit, Groups, Tree};
use crate::lock::RwSem;
use crate::policy::{AdaptiveConfig, Policy};
use crate::sync::{AtomicU32, Ordering};
use crate::vma::Vma;

const CENTRAL: u32 = 0;
const DISTRIBUTED: u32 = 1;

struct State {
    distributed: bool,
    /// Every VMA in central mode; empty in distributed mode.
    central: Tree,
    /// Every VMA, by group, in distributed mode; empty in central mode.
    groups: GroupLocks,
}

pub(super) struct Adaptive {
    top: RwSem<State>,
    /// `CENTRAL` or `DISTRIBUTED`: a hint, see the module docs.
    mode: AtomicU32,
    /// Failed try-locks in central mode since the last conversion.
    failures: AtomicU32,
    /// Consecutive uncontended changes in distributed mode.
    quiet: AtomicU32,
    conversions: AtomicU64,
    config: AdaptiveConfig,
}

impl Adaptive {
    pub(super) fn new(config: &Policy, nr: usize) -> Adaptive {
        Adaptive {
            top: sem(
                config,
                State {
                    distributed: false,
                    central: new_tree(config),
                    groups: group_locks(config, nr),
                },
            ),
            mode: AtomicU32::new(CENTRAL),
            failures: AtomicU32::new(0),
            quiet: AtomicU32::new(0),
            conversions: AtomicU64::new(0),
            config: config.adaptive,
        }
    }

    pub(super) fn is_distributed(&self) -> bool {
        self.mode.load(Ordering::Acquire) == DISTRIBUTED
    }

    #[cfg(test)]
    pub(super) fn failures(&self) -> u32 {
        self.failures.load(Ordering::Relaxed)
    }

    pub(super) fn conversions(&self) -> u64 {
        self.conversions.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(super) fn update(&self, groups: &Groups, change: &Change<'_>) {
        loop {
            if self.is_distributed() {
                let top = self.top.read();
                if !top.distributed {
                    continue;
                }
                let probe = self.config.revert_window.is_some();
                let contended = apply_locked(groups, &top.groups, change, probe);
                drop(top);
                self.note_distributed(contended);
                return;
            }
            let mut top = match self.top.try_write() {
                Some(t) => t,
                None => {
                    let failures = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
                    if failures >= self.config.convert_after {
                        self.convert(true);
                        continue;
                    }
                    self.top.write()
                }
            };
            if top.distributed {
                continue;
            }
            change.apply(groups, &mut [(None, &mut top.central)]);
            return;
        }
    }

    /// Count a distributed-mode change and convert back to central mode
    /// once a whole window of them met no contention.
    fn note_distributed(&self, contended: bool) {
        let Some(window) = self.config.revert_window else {
            return;
        };
        if contended {
            self.quiet.store(0, Ordering::Relaxed);
        } else if self.quiet.fetch_add(1, Ordering::Relaxed) + 1 >= window {
            self.convert(false);
        }
    }

    /// Move every VMA to the other mode's trees under the top lock held
    /// exclusive; a no-op if another thread converted first.
    fn convert(&self, to_distributed: bool) {
        let mut guard = self.top.write();
        let state = &mut *guard;
        if state.distributed == to_distributed {
            return;
        }
        if to_distributed {
            let mut moving: Vec<Arc<Vma>> = Vec::with_capacity(state.central.len());
            let _ = state.central.visit_all(|e| {
                moving.push(Arc::clone(e.value));
                ControlFlow::Continue(())
            });
            state.central.clear();
            for vma in &moving {
                // The group was recorded (and counted) when the VMA was
                // linked; only the tree changes.
                let g = vma.imap_group().unwrap_or(0).min(state.groups.len() - 1);
                tree_insert(state.groups[g].get_mut(), vma);
            }
        } else {
            for l in state.groups.iter_mut() {
                let tree = l.get_mut();
                let _ = tree.visit_all(|e| {
                    tree_insert(&mut state.central, e.value);
                    ControlFlow::Continue(())
                });
                tree.clear();
            }
        }
        state.distributed = to_distributed;
        self.failures.store(0, Ordering::Relaxed);
        self.quiet.store(0, Ordering::Relaxed);
        self.mode.store(
            if to_distributed { DISTRIBUTED } else { CENTRAL },
            Ordering::Release,
        );
        self.conversions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    pub(super) fn walk(&self, first: u64, last: u64, f: Visit<'_>) -> ControlFlow<()> {
        if !self.is_distributed() {
            let top = self.top.read();
            if !top.distributed {
                return tree_visit(&top.central, first, last, f);
            }
        }
        let mut top = self.top.write();
        visit_state(&mut top, first, last, f)
    }

    pub(super) fn each_tree(&self, f: EachTree<'_>) {
        let mut top = self.top.write();
        let state = &mut *top;
        f(None, &state.central);
        for (g, l) in state.groups.iter_mut().enumerate() {
            f(Some(g), l.get_mut())
        }
    }
}

fn visit_state(state: &mut State, first: u64, last: u64, f: Visit<'_>) -> ControlFlow<()> {
    if !state.distributed {
        return tree_visit(&state.central, first, last, f);
    }
    for l in state.groups.iter_mut() {
        tree_visit(l.get_mut(), first, last, f)?;
    }
    ControlFlow::Continue(())
}
