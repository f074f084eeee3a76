//! TEMPORARY: replaced by the augmented rbtree + list + vmacache index.
use std::collections::BTreeMap;
use std::sync::Arc;

use maple::MapleTree;

use super::VmaIndex;
use crate::vma::Vma;

/// Temporary.
#[derive(Default)]
pub struct LegacyIndex {
    map: BTreeMap<u64, Arc<Vma>>,
}

impl LegacyIndex {
    /// An empty index.
    pub fn new() -> LegacyIndex {
        LegacyIndex::default()
    }
}

impl VmaIndex for LegacyIndex {
    fn name(&self) -> &'static str {
        "legacy"
    }
    fn len(&self) -> usize {
        self.map.len()
    }
    fn find(&self, addr: u64) -> Option<Arc<Vma>> {
        self.find_next(addr).filter(|v| v.start() <= addr)
    }
    fn find_next(&self, addr: u64) -> Option<Arc<Vma>> {
        self.map.range(addr.saturating_add(1)..).next().map(|(_, v)| v.clone())
    }
    fn find_prev(&self, addr: u64) -> Option<Arc<Vma>> {
        self.map.values().filter(|v| v.start() < addr).last().cloned()
    }
    fn overlapping(&self, start: u64, end: u64, out: &mut Vec<Arc<Vma>>) {
        out.extend(self.map.range(start.saturating_add(1)..).map(|(_, v)| v).take_while(|v| v.start() < end).cloned());
    }
    fn replace(&mut self, old: &[Arc<Vma>], new: &[Arc<Vma>]) {
        for o in old { self.map.remove(&o.end()); }
        for n in new { self.map.insert(n.end(), n.clone()); }
    }
    fn gap_highest(&self, low: u64, high: u64, len: u64) -> Option<u64> {
        let mut top = high;
        for v in self.map.values().rev() {
            if v.start() >= top { top = top.min(v.start()); continue; }
            if v.end() < top && top - v.end().max(low) >= len && top >= low + len { return Some(top); }
            top = top.min(v.start());
            if top < low { return None; }
        }
        (top >= low && top - low >= len).then_some(top)
    }
    fn gap_lowest(&self, low: u64, high: u64, len: u64) -> Option<u64> {
        let mut bot = low;
        for v in self.map.values() {
            if v.end() <= bot { continue; }
            if v.start() > bot && v.start().min(high) >= bot + len { return Some(bot); }
            bot = bot.max(v.end());
        }
        (high >= bot && high - bot >= len).then_some(bot)
    }
    fn for_each(&self, f: &mut dyn FnMut(&Arc<Vma>)) {
        self.map.values().for_each(f)
    }
    fn lockless(&self) -> Option<Arc<MapleTree<Arc<Vma>>>> {
        None
    }
    fn validate(&self) -> Result<(), String> {
        Ok(())
    }
}
