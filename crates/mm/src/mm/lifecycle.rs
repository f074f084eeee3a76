//! `fork`, `exit` and `exec`: whole address spaces at once.

use std::sync::Arc;

use crate::file::File;
use crate::flags::{page_align, MapFlags, Prot, VmFlags, PAGE_SHIFT, PAGE_SIZE};
use crate::vma::Vma;
use crate::Errno;

use super::{Mm, State};

/// One loadable segment of a program image (an ELF `PT_LOAD` header).
#[derive(Debug, Clone)]
pub struct Segment {
    /// The file the segment comes from.
    pub file: Arc<File>,
    /// Byte offset of the segment in the file.
    pub offset: u64,
    /// Address of the segment, relative to the image's load address.
    pub vaddr: u64,
    /// Bytes backed by the file.
    pub filesz: u64,
    /// Bytes in memory; the part past `filesz` is zero-filled (bss).
    pub memsz: u64,
    /// Access bits.
    pub prot: Prot,
}

/// What `exec` maps: the program's segments at their addresses, the
/// dynamic loader's segments wherever top-down allocation puts them, a
/// stack, and a heap starting after the program.
#[derive(Debug, Clone, Default)]
pub struct Image {
    /// The program's segments, at absolute addresses.
    pub segments: Vec<Segment>,
    /// The interpreter's (dynamic loader's) segments, relative to its
    /// load address; empty for a static program.
    pub interp: Vec<Segment>,
    /// Initial stack size in bytes.
    pub stack_size: u64,
}

impl Mm {
    /// `fork`: a new address space with a copy of every VMA (but those
    /// marked `VM_DONTCOPY` by `MADV_DONTFORK`). A VMA with an anon_vma
    /// gets a new anon_vma in the child, chained to the parent's, which is
    /// what later stops it merging with VMAs that do not share that
    /// history; a `VM_WIPEONFORK` VMA comes back empty instead, with no
    /// anon_vma (and no guard markers). The child's VMAs are unlocked and
    /// it keeps no `mlockall(MCL_FUTURE)` default.
    ///
    /// ```
    /// use mm::{Access, Advice, MapFlags, Mm, Prot};
    /// let parent = Mm::default();
    /// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    /// let a = parent.mmap(0, 3 * 4096, Prot::READ | Prot::WRITE, anon, None, 0).unwrap();
    /// parent.fault(a, Access::Write).unwrap();
    /// parent.madvise(a, 4096, Advice::DONTFORK).unwrap();
    /// parent.madvise(a + 8192, 4096, Advice::WIPEONFORK).unwrap();
    /// let child = parent.fork();
    /// assert!(child.find_vma(a).unwrap().start() == a + 4096); // not copied
    /// assert!(child.find_vma(a + 4096).unwrap().anon().is_some());
    /// assert!(child.find_vma(a + 8192).unwrap().anon().is_none()); // wiped
    /// ```
    ///
    /// ```
    /// use mm::{MapFlags, Mm, Prot};
    /// let parent = Mm::default();
    /// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    /// parent.mmap(0, 4096, Prot::READ, anon, None, 0).unwrap();
    /// let child = parent.fork();
    /// assert_eq!(child.maps(), parent.maps());
    /// ```
    pub fn fork(&self) -> Mm {
        let st = self.state.write();
        let mut vmas = Vec::with_capacity(st.index.len());
        // A child's file VMA goes into its parent VMA's i_mmap group.
        let mut hints = Vec::with_capacity(st.index.len());
        let mut guards = super::madvise::Guards::default();
        st.index.for_each(&mut |v| {
            if v.flags().contains(VmFlags::DONTCOPY) {
                return;
            }
            hints.push(v.imap_group().and_then(|g| u32::try_from(g).ok()));
            // A VM_WIPEONFORK VMA comes back empty: no anon_vma, no page
            // tables (so no guard markers either).
            let wipe = v.flags().contains(VmFlags::WIPEONFORK);
            let anon = v.anon().filter(|_| !wipe).map(|l| l.fork(v.pages()));
            if !wipe {
                for (s, e) in st.guards.within(v.start(), v.end()) {
                    guards.insert(s, e);
                }
            }
            // The child keeps the VMA's name; it drops the lock flags and
            // its userfaultfd registration (the model's context has no
            // UFFD_FEATURE_EVENT_FORK, see uffd.rs).
            vmas.push(Arc::new(
                Vma::new(
                    v.start(),
                    v.end(),
                    v.flags() - VmFlags::LOCKED_MASK - VmFlags::UFFD_MASK,
                    v.pgoff(),
                    v.file().cloned(),
                    anon,
                )
                .named(v.name_arc()),
            ));
        });
        Mm::with_state(
            &self.policy,
            self.layout.clone(),
            |index| State {
                index,
                start_brk: st.start_brk,
                brk: st.brk,
                start_stack: st.start_stack,
                max_map_count: 0,
                policy: Arc::clone(&st.policy),
                pkey_map: st.pkey_map,
                exec_only_pkey: st.exec_only_pkey,
                // The child's mm_init keeps no VM_LOCKED default.
                def_flags: VmFlags::empty(),
                guards,
                // Counted by `with_state` from the VMAs.
                locked_vm: 0,
            },
            &vmas,
            &hints,
        )
    }

    /// `exit_mmap`: unmap everything. The address space stays usable, and
    /// empty.
    pub fn exit(&self) {
        let mut st = self.state.write();
        st.clear();
    }

    /// `exec`: tear the address space down, then map `image` as the ELF
    /// loader does: the program's segments with `MAP_FIXED`, their bss as
    /// anonymous memory, the interpreter top-down from `mmap_base`, a
    /// grows-down stack under `layout.stack_top`, and an empty heap after
    /// the program. Fails (leaving a partly built image, as a failed exec
    /// past the point of no return would kill the process) with the errno
    /// of the first mapping that fails.
    pub fn exec(&self, image: &Image) -> Result<(), Errno> {
        let mut st = self.state.write();
        st.clear();
        let layout = &self.layout;
        // A new mm: no protection keys handed out.
        (st.pkey_map, st.exec_only_pkey) = super::pkey::initial(layout);
        let top = layout.stack_top & !(PAGE_SIZE - 1);
        let stack_size = page_align(image.stack_size.max(PAGE_SIZE)).ok_or(Errno::EINVAL)?;
        let stack_start = top.checked_sub(stack_size).ok_or(Errno::EINVAL)?;
        st.commit(
            &[],
            vec![Vma::new(
                stack_start,
                top,
                VmFlags::STACK,
                stack_start >> PAGE_SHIFT,
                None,
                None,
            )],
        );
        st.start_stack = top - PAGE_SIZE;
        let mut heap = 0;
        for seg in &image.segments {
            heap = heap.max(st.map_segment(self, 0, seg)?);
        }
        if let Some(first) = image.interp.first() {
            let span = image
                .interp
                .iter()
                .map(|s| s.vaddr.checked_add(s.memsz))
                .try_fold(0, |m, end| end.map(|e| e.max(m)))
                .ok_or(Errno::EINVAL)?;
            let span = page_align(span).ok_or(Errno::EINVAL)?;
            let private = MapFlags::PRIVATE;
            let base = st.do_mmap(self, 0, span, first.prot, private, Some(&first.file), 0)?;
            // Keep the reservation's first page range for the first
            // segment and drop the rest; the segments are placed below.
            st.unmap(layout, base, base + span)?;
            for seg in &image.interp {
                st.map_segment(self, base, seg)?;
            }
        }
        st.start_brk = page_align(heap).ok_or(Errno::EINVAL)?;
        st.brk = st.start_brk;
        Ok(())
    }
}

impl State {
    /// Remove every VMA.
    pub(crate) fn clear(&mut self) {
        let all = self.vmas();
        self.commit(&all, Vec::new());
        self.guards = super::madvise::Guards::default();
        self.def_flags = VmFlags::empty();
        self.start_brk = 0;
        self.brk = 0;
    }

    /// Map one segment at `base`; returns the end of its memory image.
    ///
    /// A segment whose addresses wrap is refused with `EINVAL`, as the ELF
    /// loader refuses one that does not fit below `TASK_SIZE`.
    fn map_segment(&mut self, mm: &Mm, base: u64, seg: &Segment) -> Result<u64, Errno> {
        let vaddr = base.checked_add(seg.vaddr).ok_or(Errno::EINVAL)?;
        let start = vaddr & !(PAGE_SIZE - 1);
        let delta = vaddr - start;
        let file_end = vaddr
            .checked_add(seg.filesz)
            .and_then(page_align)
            .ok_or(Errno::EINVAL)?;
        let mem_end = vaddr.checked_add(seg.memsz).ok_or(Errno::EINVAL)?;
        let fixed = MapFlags::PRIVATE | MapFlags::FIXED;
        if file_end > start {
            let off = seg.offset.checked_sub(delta).ok_or(Errno::EINVAL)?;
            self.do_mmap(
                mm,
                start,
                file_end - start,
                seg.prot,
                fixed,
                Some(&seg.file),
                off >> PAGE_SHIFT,
            )?;
        }
        let bss_end = page_align(mem_end).ok_or(Errno::EINVAL)?;
        if bss_end > file_end {
            let anon = fixed | MapFlags::ANONYMOUS;
            self.do_mmap(mm, file_end, bss_end - file_end, seg.prot, anon, None, 0)?;
        }
        Ok(mem_end)
    }
}
