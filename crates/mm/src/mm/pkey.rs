//! Protection keys: `pkey_alloc`, `pkey_mprotect`, `pkey_free`, and the
//! allocation map the execute-only key also comes from.
//!
//! The model follows x86: with protection keys (`Layout::exec_only_pkey`,
//! the CPU's `OSPKE`) an address space has 16 keys, key 0 allocated from
//! the start and the execute-only key taken from the same map on first
//! use. Without them there is one key, and the kernel never initialises
//! the map: it starts empty with the execute-only key read as 0. That
//! gives the answers the running kernel gives on such a CPU: the first
//! `pkey_alloc` takes key 0, fails to program the (missing) PKRU register
//! with `EINVAL` and cannot give the key back (key 0 counts as the
//! execute-only key, which is never "allocated"); every later one fails
//! with `ENOSPC`; `pkey_free` and `pkey_mprotect` with any key but -1 fail
//! with `EINVAL`.

use crate::flags::Prot;
use crate::layout::Layout;
use crate::Errno;

use super::{Mm, State};

/// `PKEY_DISABLE_ACCESS | PKEY_DISABLE_WRITE`: the access rights x86
/// accepts.
const PKEY_ACCESS_MASK: u64 = 0x3;

/// The allocation map and execute-only key of a new address space
/// (`init_new_context`).
pub(crate) fn initial(layout: &Layout) -> (u16, i32) {
    if layout.exec_only_pkey {
        (0x1, -1)
    } else {
        (0, 0)
    }
}

/// `arch_max_pkey`: 16 keys with protection keys, else 1.
fn max_pkey(layout: &Layout) -> u32 {
    if layout.exec_only_pkey {
        16
    } else {
        1
    }
}

impl Mm {
    /// `pkey_alloc(flags, access_rights)`: the lowest free protection key.
    ///
    /// `EINVAL` for any flag or for rights beyond `PKEY_DISABLE_ACCESS |
    /// PKEY_DISABLE_WRITE`; `ENOSPC` when every key is taken (16 with
    /// protection keys, counting key 0 and the execute-only key). Without
    /// protection keys (`Layout::exec_only_pkey` false) the first call
    /// fails with `EINVAL` and every later one with `ENOSPC`, as x86 does
    /// (see the module notes in the docs).
    ///
    /// ```
    /// use mm::{Errno, Layout, Mm, Policy};
    /// let pku = Layout { exec_only_pkey: true, ..Layout::default() };
    /// let mm = Mm::new(Policy::shared_default(), pku);
    /// assert_eq!(mm.pkey_alloc(0, 0), Ok(1));
    /// assert_eq!(mm.pkey_alloc(0, 4), Err(Errno::EINVAL));
    /// let plain = Mm::default();
    /// assert_eq!(plain.pkey_alloc(0, 0), Err(Errno::EINVAL));
    /// assert_eq!(plain.pkey_alloc(0, 0), Err(Errno::ENOSPC));
    /// ```
    pub fn pkey_alloc(&self, flags: u64, access_rights: u64) -> Result<u64, Errno> {
        if flags != 0 || access_rights & !PKEY_ACCESS_MASK != 0 {
            return Err(Errno::EINVAL);
        }
        let mut st = self.state.write();
        let key = st.mm_pkey_alloc(&self.layout).ok_or(Errno::ENOSPC)?;
        if !self.layout.exec_only_pkey {
            // arch_set_user_pkey_access has no PKRU to program; the key
            // goes back only if it counts as allocated, which key 0 does
            // not (it reads as the execute-only key).
            st.mm_pkey_free(&self.layout, i32::from(key));
            return Err(Errno::EINVAL);
        }
        Ok(u64::from(key))
    }

    /// `pkey_free(pkey)`: give a key back. `EINVAL` unless `pkey` is
    /// allocated; key 0 is, and may be freed; the execute-only key is
    /// not. Mappings keep the key they carry.
    ///
    /// ```
    /// use mm::{Errno, Layout, Mm, Policy};
    /// let pku = Layout { exec_only_pkey: true, ..Layout::default() };
    /// let mm = Mm::new(Policy::shared_default(), pku);
    /// let k = mm.pkey_alloc(0, 0).unwrap() as i32;
    /// assert_eq!(mm.pkey_free(k), Ok(()));
    /// assert_eq!(mm.pkey_free(k), Err(Errno::EINVAL));
    /// ```
    pub fn pkey_free(&self, pkey: i32) -> Result<(), Errno> {
        let mut st = self.state.write();
        if st.mm_pkey_free(&self.layout, pkey) {
            Ok(())
        } else {
            Err(Errno::EINVAL)
        }
    }

    /// `pkey_mprotect(addr, len, prot, pkey)`: [`mprotect`](Mm::mprotect)
    /// that also gives the range key `pkey` (-1: as `mprotect` does).
    /// The key must be allocated (`EINVAL`, checked after the arguments:
    /// a zero length succeeds whatever the key). The key is part of the
    /// VMA flags, so it splits and merges like a protection. Without
    /// protection keys every VMA keeps key 0.
    ///
    /// ```
    /// use mm::{Errno, Layout, MapFlags, Mm, Policy, Prot};
    /// let pku = Layout { exec_only_pkey: true, ..Layout::default() };
    /// let mm = Mm::new(Policy::shared_default(), pku);
    /// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    /// let a = mm.mmap(0, 8192, Prot::READ, anon, None, 0).unwrap();
    /// assert_eq!(mm.pkey_mprotect(a, 4096, Prot::READ, 5), Err(Errno::EINVAL));
    /// let k = mm.pkey_alloc(0, 0).unwrap() as i32;
    /// mm.pkey_mprotect(a, 4096, Prot::READ, k).unwrap();
    /// assert_eq!(mm.find_vma(a).unwrap().flags().pkey(), k as u8);
    /// assert_eq!(mm.map_count(), 2);
    /// ```
    pub fn pkey_mprotect(&self, addr: u64, len: u64, prot: Prot, pkey: i32) -> Result<(), Errno> {
        self.do_mprotect_pkey(addr, len, prot, pkey)
    }
}

impl State {
    /// `mm_pkey_alloc`: the lowest key not in the map, now in it; `None`
    /// when all are taken.
    pub(crate) fn mm_pkey_alloc(&mut self, layout: &Layout) -> Option<u8> {
        let all = ((1u32 << max_pkey(layout)) - 1) as u16;
        if self.pkey_map == all {
            return None;
        }
        let key = (!self.pkey_map).trailing_zeros();
        self.pkey_map |= 1 << key;
        Some(key as u8)
    }

    /// `mm_pkey_is_allocated`: in range, in the map and not the
    /// execute-only key.
    pub(crate) fn pkey_is_allocated(&self, layout: &Layout, pkey: i32) -> bool {
        (0..max_pkey(layout) as i32).contains(&pkey)
            && pkey != self.exec_only_pkey
            && self.pkey_map & (1 << pkey) != 0
    }

    /// `mm_pkey_free`: whether `pkey` was allocated (and now is not).
    fn mm_pkey_free(&mut self, layout: &Layout, pkey: i32) -> bool {
        if !self.pkey_is_allocated(layout, pkey) {
            return false;
        }
        self.pkey_map &= !(1 << pkey);
        true
    }

    /// `execute_only_pkey`: the key for `PROT_EXEC`-only mappings,
    /// allocated from the map (the lowest free key) on first use; `None`
    /// without protection keys or when no key is free.
    pub(crate) fn execute_only_pkey(&mut self, layout: &Layout) -> Option<u8> {
        if !layout.exec_only_pkey {
            return None;
        }
        if self.exec_only_pkey == -1 {
            self.exec_only_pkey = i32::from(self.mm_pkey_alloc(layout)?);
        }
        u8::try_from(self.exec_only_pkey).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MapFlags, Policy};

    fn pku() -> Mm {
        let l = Layout {
            exec_only_pkey: true,
            ..Layout::default()
        };
        Mm::new(Policy::shared_default(), l)
    }

    #[test]
    fn sixteen_keys_with_zero_and_exec_only_taken() {
        let mm = pku();
        let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
        // The execute-only key comes from the same map: key 1.
        let x = mm.mmap(0, 4096, Prot::EXEC, anon, None, 0).unwrap();
        assert_eq!(mm.find_vma(x).unwrap().flags().pkey(), 1);
        let keys: Vec<u64> = (0..14).map(|_| mm.pkey_alloc(0, 1).unwrap()).collect();
        assert_eq!(keys, (2..16).collect::<Vec<u64>>());
        assert_eq!(mm.pkey_alloc(0, 0), Err(Errno::ENOSPC));
        // The execute-only key cannot be freed or used; key 0 can be.
        assert_eq!(mm.pkey_free(1), Err(Errno::EINVAL));
        assert_eq!(mm.pkey_mprotect(x, 4096, Prot::READ, 1), Err(Errno::EINVAL));
        assert_eq!(mm.pkey_free(16), Err(Errno::EINVAL));
        assert_eq!(mm.pkey_free(-1), Err(Errno::EINVAL));
        assert_eq!(mm.pkey_free(7), Ok(()));
        assert_eq!(mm.pkey_alloc(0, 0), Ok(7));
        assert_eq!(mm.pkey_free(0), Ok(()));
        assert_eq!(mm.pkey_alloc(0, 0), Ok(0));
    }

    #[test]
    fn keys_split_and_merge_like_protections() {
        let mm = pku();
        let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
        let a = mm.mmap(0, 3 * 4096, Prot::READ, anon, None, 0).unwrap();
        let k = mm.pkey_alloc(0, 0).unwrap() as i32;
        mm.pkey_mprotect(a + 4096, 4096, Prot::READ, k).unwrap();
        assert_eq!(mm.map_count(), 3);
        // -1 keeps the key; key 0 takes it away and the VMAs merge back.
        mm.pkey_mprotect(a + 4096, 4096, Prot::READ, -1).unwrap();
        assert_eq!(mm.map_count(), 3);
        mm.pkey_mprotect(a + 4096, 4096, Prot::READ, 0).unwrap();
        assert_eq!(mm.map_count(), 1);
        // A zero length succeeds before the key is looked at.
        assert_eq!(mm.pkey_mprotect(a, 0, Prot::READ, 9), Ok(()));
        assert_eq!(
            mm.pkey_mprotect(a + 1, 4096, Prot::READ, 9),
            Err(Errno::EINVAL)
        );
    }

    #[test]
    fn without_keys_as_the_running_kernel() {
        let mm = Mm::default();
        let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
        let a = mm.mmap(0, 4096, Prot::READ, anon, None, 0).unwrap();
        assert_eq!(mm.pkey_alloc(1, 0), Err(Errno::EINVAL));
        assert_eq!(mm.pkey_alloc(0, 0), Err(Errno::EINVAL));
        assert_eq!(mm.pkey_alloc(0, 3), Err(Errno::ENOSPC));
        for k in -2..18 {
            assert_eq!(mm.pkey_free(k), Err(Errno::EINVAL));
        }
        assert_eq!(mm.pkey_mprotect(a, 4096, Prot::READ, 0), Err(Errno::EINVAL));
        assert_eq!(mm.pkey_mprotect(a, 4096, Prot::READ, -1), Ok(()));
    }
}
