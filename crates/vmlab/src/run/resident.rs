//! The resident population: the VMAs a real process already has before a
//! workload starts, so that every lookup and every index update works on
//! an index of realistic size rather than on a nearly empty one.
//!
//! A dynamically linked process has a few hundred VMAs, most of them
//! shared-library segments. The population imitates that: groups of five
//! file segments (`r--`, `r-x`, `r--`, RELRO `r--`, `rw-`) of one library
//! file plus an anonymous `rw-` area (its bss), placed top-down from
//! `mmap_base` as the kernel would place them. No two neighbours can merge
//! (they differ in protection, file or page offset), so the map holds
//! exactly the requested number of VMAs; the setup checks that.

use std::sync::Arc;

use mm::{File, MapFlags, Mm, Prot, PAGE_SIZE};

/// Resident VMAs per address space unless `--resident` says otherwise:
/// about what `/proc/<pid>/maps` of a desktop program shows.
pub const DEFAULT_RESIDENT: usize = 300;

/// VMAs per simulated library: five file segments and a bss.
const GROUP: usize = 6;

/// Protections of the five file segments of a library, in file order.
const SEGMENTS: [Prot; 5] = [
    Prot::READ,
    Prot::READ.union(Prot::EXEC),
    Prot::READ,
    Prot::READ,
    Prot::READ.union(Prot::WRITE),
];

/// Maps `count` resident VMAs into `mm` (which must be empty) and checks
/// that exactly `count` VMAs result.
pub fn populate(mm: &Mm, count: usize) -> Result<(), String> {
    let private = MapFlags::PRIVATE;
    let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    let mut file: Option<Arc<File>> = None;
    for i in 0..count {
        let (lib, slot) = (i / GROUP, i % GROUP);
        // Segment lengths vary (1 to 5 pages) so gaps and sizes are not
        // all alike, as in a real map.
        let pages = 1 + ((i * 7) % 5) as u64;
        let result = if slot < SEGMENTS.len() {
            if slot == 0 {
                let size = 5 * 5 * PAGE_SIZE;
                file = Some(File::new(format!("/usr/lib/libresident{lib}.so"), size));
            }
            // Each segment starts 5 pages further into the file, so a
            // segment placed below its predecessor never continues it.
            mm.mmap(
                0,
                pages * PAGE_SIZE,
                SEGMENTS[slot],
                private,
                file.as_ref(),
                slot as u64 * 5 * PAGE_SIZE,
            )
        } else {
            mm.mmap(
                0,
                pages * PAGE_SIZE,
                Prot::READ | Prot::WRITE,
                anon,
                None,
                0,
            )
        };
        result.map_err(|e| format!("mapping resident VMA {i} failed: {e}"))?;
    }
    let got = mm.map_count();
    if got != count {
        return Err(format!(
            "resident population has {got} VMAs, expected {count} (neighbours merged?)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mm::{IndexKind, Policy};

    #[test]
    fn population_has_the_requested_size_on_both_indexes() {
        for index in IndexKind::ALL {
            let mm = std::sync::Arc::new(Policy {
                index,
                ..Policy::default()
            })
            .mm();
            populate(&mm, 301).unwrap();
            mm.validate().unwrap();
        }
    }
}
