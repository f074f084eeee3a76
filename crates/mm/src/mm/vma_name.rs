//! `prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, addr, len, name)`: names on
//! anonymous VMAs.

use std::sync::Arc;

use crate::flags::rounded_range;
use crate::Errno;

use super::mprotect::Holes;
use super::{Mm, State};

/// Most bytes of a name, its terminating NUL included
/// (`ANON_VMA_NAME_MAX_LEN`).
pub(crate) const ANON_NAME_MAX: usize = 80;

impl Mm {
    /// `prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, addr, len, name)`: name
    /// the anonymous VMAs in `[addr, addr + len)` (`None`, a NULL pointer,
    /// clears the name). `name` is the C string's bytes up to, not
    /// including, its NUL (bytes after a NUL are ignored).
    ///
    /// A kernel built without `CONFIG_ANON_VMA_NAME`
    /// (`Layout::anon_vma_name` false) refuses every such call with
    /// `EINVAL`, as the running kernel of this project does. Otherwise,
    /// in the kernel's order: `EINVAL` for a name of 80 bytes or more or
    /// with a byte outside printable ASCII or one of `` \`$[] ``; `EINVAL`
    /// for an unaligned address or a length that wraps; a zero length
    /// succeeds; then the VMAs are named in address order, splitting and
    /// merging (VMAs merge only with equal names): a file mapping other
    /// than shared anonymous memory stops the walk with `EBADF` (the
    /// VMAs before it keep their new name), and a hole anywhere in the
    /// range gives `ENOMEM` at the end, the mapped parts named.
    ///
    /// ```
    /// use mm::{Errno, Layout, MapFlags, Mm, Policy, Prot};
    /// let layout = Layout { anon_vma_name: true, ..Layout::default() };
    /// let mm = Mm::new(Policy::shared_default(), layout);
    /// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    /// let a = mm.mmap(0, 2 * 4096, Prot::READ, anon, None, 0).unwrap();
    /// mm.set_vma_anon_name(a, 4096, Some(b"jit")).unwrap();
    /// assert!(mm.proc_maps().contains("[anon:jit]"));
    /// assert_eq!(mm.set_vma_anon_name(a, 4096, Some(b"a$b")), Err(Errno::EINVAL));
    /// mm.set_vma_anon_name(a, 4096, None).unwrap();
    /// assert_eq!(mm.map_count(), 1);
    /// // Without CONFIG_ANON_VMA_NAME:
    /// let plain = Mm::new(Policy::shared_default(),
    ///                     Layout { anon_vma_name: false, ..Layout::default() });
    /// assert_eq!(plain.set_vma_anon_name(0, 0, None), Err(Errno::EINVAL));
    /// ```
    pub fn set_vma_anon_name(&self, addr: u64, len: u64, name: Option<&[u8]>) -> Result<(), Errno> {
        if !self.layout.anon_vma_name {
            return Err(Errno::EINVAL);
        }
        let name: Option<Arc<str>> = match name {
            None => None,
            Some(bytes) => {
                let bytes = bytes.split(|&b| b == 0).next().unwrap_or(&[]);
                if bytes.len() >= ANON_NAME_MAX || !bytes.iter().all(|&b| valid_name_byte(b)) {
                    return Err(Errno::EINVAL);
                }
                // Printable ASCII is UTF-8.
                Some(Arc::from(String::from_utf8_lossy(bytes).as_ref()))
            }
        };
        let Some(end) = rounded_range(addr, len)? else {
            return Ok(());
        };
        self.state.write().set_anon_name(addr, end, name)
    }
}

/// `is_valid_name_char`: printable ASCII but for `\`, `` ` ``, `$`, `[`
/// and `]`.
fn valid_name_byte(b: u8) -> bool {
    (0x20..0x7f).contains(&b) && !b"\\`$[]".contains(&b)
}

impl State {
    /// The `madvise_walk_vmas` of the naming call.
    fn set_anon_name(&mut self, start: u64, end: u64, name: Option<Arc<str>>) -> Result<(), Errno> {
        let hole = self.walk_vmas(start, end, Holes::Skip, |st, v, prev, s, e| {
            if v.file().is_some_and(|f| !f.is_shmem_zero()) {
                return Err(Errno::EBADF);
            }
            if v.anon_name() == name.as_deref() {
                return Ok(v);
            }
            let flags = v.flags();
            st.modify_named(&v, prev, s, e, flags, name.clone())
        })?;
        if hole {
            Err(Errno::ENOMEM)
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Errno, File, Layout, MapFlags, Mm, MremapFlags, Policy, Prot};

    const P: u64 = 4096;
    const ANON: MapFlags = MapFlags::PRIVATE.union(MapFlags::ANONYMOUS);

    fn named_mm() -> Mm {
        let layout = Layout {
            anon_vma_name: true,
            ..Layout::default()
        };
        Mm::new(Policy::shared_default(), layout)
    }

    fn names(mm: &Mm) -> Vec<(u64, u64, Option<String>)> {
        mm.vmas()
            .iter()
            .map(|v| (v.start(), v.end(), v.anon_name().map(str::to_string)))
            .collect()
    }

    #[test]
    fn names_split_merge_and_print() {
        let mm = named_mm();
        let b = mm.mmap(0, 4 * P, Prot::READ, ANON, None, 0).unwrap();
        mm.set_vma_anon_name(b + P, P, Some(b"one")).unwrap();
        mm.set_vma_anon_name(b + 2 * P, P, Some(b"one\0ignored"))
            .unwrap();
        assert_eq!(
            names(&mm),
            vec![
                (b, b + P, None),
                (b + P, b + 3 * P, Some("one".into())),
                (b + 3 * P, b + 4 * P, None)
            ]
        );
        assert!(mm.proc_maps().contains("[anon:one]"));
        let shared = MapFlags::SHARED | MapFlags::ANONYMOUS;
        let s = mm.mmap(0, P, Prot::READ, shared, None, 0).unwrap();
        mm.set_vma_anon_name(s, P, Some(b"shm")).unwrap();
        assert!(mm.proc_maps().contains("[anon_shmem:shm]"));
        // Carried through mremap moves and fork.
        let fixed = MremapFlags::MAYMOVE | MremapFlags::FIXED;
        let to = mm.mremap(b + P, 2 * P, 2 * P, fixed, b + 40 * P).unwrap();
        assert_eq!(mm.find_vma(to).unwrap().anon_name(), Some("one"));
        assert_eq!(mm.fork().proc_maps(), mm.proc_maps());
        // A new mapping next to a named one does not merge with it.
        let fixed_map = ANON | MapFlags::FIXED;
        mm.mmap(to + 2 * P, P, Prot::READ, fixed_map, None, 0)
            .unwrap();
        assert_eq!(mm.find_vma(to).unwrap().end(), to + 2 * P);
    }

    #[test]
    fn names_come_back_from_smaps() {
        let mm = named_mm();
        let b = mm.mmap(0, 2 * P, Prot::READ, ANON, None, 0).unwrap();
        mm.set_vma_anon_name(b, P, Some(b"n")).unwrap();
        let shared = MapFlags::SHARED | MapFlags::ANONYMOUS;
        let s = mm.mmap(0, P, Prot::READ, shared, None, 0).unwrap();
        mm.set_vma_anon_name(s, P, Some(b"s")).unwrap();
        let entries: Vec<crate::procmaps::SmapsEntry> = mm
            .maps()
            .into_iter()
            .zip(mm.vmas())
            .map(|(maps, v)| crate::procmaps::SmapsEntry {
                maps,
                flags: v.flags(),
                has_anon_pages: false,
            })
            .collect();
        let layout = mm.layout().clone();
        let copy =
            Mm::from_smaps(Policy::shared_default(), layout, &entries, 0, 0, 0, &[]).unwrap();
        assert_eq!(names(&copy), names(&mm));
        assert!(copy
            .find_vma(s)
            .unwrap()
            .file()
            .is_some_and(|f| f.is_shmem_zero()));
        let shape = |m: &Mm| -> Vec<(u64, u64, Option<String>)> {
            m.maps()
                .into_iter()
                .map(|e| (e.start, e.end, e.name))
                .collect()
        };
        assert_eq!(shape(&copy), shape(&mm));
    }

    #[test]
    fn errors_in_order() {
        let mm = named_mm();
        let b = mm.mmap(0, 2 * P, Prot::READ, ANON, None, 0).unwrap();
        let before = names(&mm);
        let long = [b'a'; 80];
        assert_eq!(mm.set_vma_anon_name(b, P, Some(&long)), Err(Errno::EINVAL));
        assert_eq!(mm.set_vma_anon_name(b, P, Some(&long[..79])), Ok(()));
        mm.set_vma_anon_name(b, P, None).unwrap();
        for bad in [&b"a]"[..], b"[", b"\\", b"`", b"$", b"\x7f", b"\t"] {
            assert_eq!(
                mm.set_vma_anon_name(b + 1, 0, Some(bad)),
                Err(Errno::EINVAL)
            );
        }
        assert_eq!(
            mm.set_vma_anon_name(b + 1, P, Some(b"x")),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            mm.set_vma_anon_name(b, u64::MAX, Some(b"x")),
            Err(Errno::EINVAL)
        );
        assert_eq!(mm.set_vma_anon_name(b, 0, Some(b"x")), Ok(()));
        assert_eq!(names(&mm), before);
        // A hole: the mapped parts are named, then ENOMEM.
        assert_eq!(
            mm.set_vma_anon_name(b, 4 * P, Some(b"x")),
            Err(Errno::ENOMEM)
        );
        assert_eq!(mm.find_vma(b).unwrap().anon_name(), Some("x"));
        assert_eq!(
            mm.set_vma_anon_name(b + 10 * P, P, Some(b"x")),
            Err(Errno::ENOMEM)
        );
        // A file mapping stops the walk with EBADF.
        let file = File::new("/data", P);
        let fixed = MapFlags::PRIVATE | MapFlags::FIXED;
        mm.mmap(b + 2 * P, P, Prot::READ, fixed, Some(&file), 0)
            .unwrap();
        assert_eq!(
            mm.set_vma_anon_name(b, 3 * P, Some(b"y")),
            Err(Errno::EBADF)
        );
        assert_eq!(mm.find_vma(b).unwrap().anon_name(), Some("y"));
    }
}
