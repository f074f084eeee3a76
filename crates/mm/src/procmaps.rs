//! `/proc/<pid>/maps` lines: parse the kernel's, print the model's, so the
//! two can be compared field by field.

use std::fmt;

use crate::flags::{Prot, VmFlags};

/// One line of `/proc/<pid>/maps`.
///
/// ```
/// use mm::procmaps::MapsEntry;
/// use mm::Prot;
/// let line = "7ffff7fc3000-7ffff7fc5000 r--p 00000000 fd:00 1234   /usr/lib/ld.so";
/// let e = MapsEntry::parse(line).unwrap();
/// assert_eq!((e.start, e.end), (0x7ffff7fc3000, 0x7ffff7fc5000));
/// assert_eq!(e.prot, Prot::READ);
/// assert!(!e.shared);
/// assert_eq!(e.name.as_deref(), Some("/usr/lib/ld.so"));
/// assert_eq!(e.perms(), "r--p");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapsEntry {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// Access bits.
    pub prot: Prot,
    /// `s` (mapped shared) rather than `p`.
    pub shared: bool,
    /// File offset in bytes (0 for anonymous memory).
    pub offset: u64,
    /// Device of the file, as printed (`"00:00"` for anonymous memory).
    pub dev: String,
    /// Inode of the file (0 for anonymous memory).
    pub inode: u64,
    /// Path, or a bracketed name such as `[heap]`; `None` for anonymous
    /// memory.
    pub name: Option<String>,
}

impl MapsEntry {
    /// Parse one line.
    pub fn parse(line: &str) -> Result<MapsEntry, String> {
        let bad = |what: &str| format!("bad maps line ({what}): {line:?}");
        let mut rest = line.trim_end_matches('\n');
        let mut field = || -> Result<&str, String> {
            let r = rest.trim_start();
            let end = r.find(' ').unwrap_or(r.len());
            let (f, tail) = r.split_at(end);
            rest = tail;
            if f.is_empty() {
                Err(bad("missing field"))
            } else {
                Ok(f)
            }
        };
        let range = field()?;
        let perms = field()?.as_bytes().to_vec();
        let offset = field()?;
        let dev = field()?.to_string();
        let inode = field()?;
        let name = rest.trim_start();
        let (s, e) = range.split_once('-').ok_or_else(|| bad("range"))?;
        let hex = |t: &str| u64::from_str_radix(t, 16).map_err(|_| bad("hex number"));
        if perms.len() != 4 {
            return Err(bad("permissions"));
        }
        let mut prot = Prot::NONE;
        if perms[0] == b'r' {
            prot |= Prot::READ;
        }
        if perms[1] == b'w' {
            prot |= Prot::WRITE;
        }
        if perms[2] == b'x' {
            prot |= Prot::EXEC;
        }
        Ok(MapsEntry {
            start: hex(s)?,
            end: hex(e)?,
            prot,
            shared: perms[3] == b's',
            offset: hex(offset)?,
            dev,
            inode: inode.parse().map_err(|_| bad("inode"))?,
            name: (!name.is_empty()).then(|| name.to_string()),
        })
    }

    /// The four permission characters, e.g. `r-xp`.
    pub fn perms(&self) -> String {
        let c = |p: Prot, ch: char| if self.prot.contains(p) { ch } else { '-' };
        format!(
            "{}{}{}{}",
            c(Prot::READ, 'r'),
            c(Prot::WRITE, 'w'),
            c(Prot::EXEC, 'x'),
            if self.shared { 's' } else { 'p' }
        )
    }

    /// Whether two lines agree on what the differential test compares:
    /// range, permissions, shared/private, offset and name.
    pub fn same_mapping(&self, other: &MapsEntry) -> bool {
        self.start == other.start
            && self.end == other.end
            && self.prot == other.prot
            && self.shared == other.shared
            && self.offset == other.offset
            && self.name == other.name
    }
}

impl fmt::Display for MapsEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:08x}-{:08x} {} {:08x} {} {}",
            self.start,
            self.end,
            self.perms(),
            self.offset,
            self.dev,
            self.inode
        )?;
        if let Some(n) = &self.name {
            write!(f, " {n}")?;
        }
        Ok(())
    }
}

/// Parse a whole `/proc/<pid>/maps` text.
pub fn parse(text: &str) -> Result<Vec<MapsEntry>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(MapsEntry::parse)
        .collect()
}

/// One mapping of `/proc/<pid>/smaps`: its maps line, its `VmFlags:` and
/// whether it holds anonymous pages (which means it has an anon_vma).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmapsEntry {
    /// The header line.
    pub maps: MapsEntry,
    /// Its `VmFlags:` as raw bits, whether [`VmFlags`] names them or not
    /// (`[vvar]`'s `pf io`, say), so that a model built from it starts
    /// with the kernel's flags.
    pub flags: VmFlags,
    /// `Anonymous:` was non-zero.
    pub has_anon_pages: bool,
}

/// Parse a whole `/proc/<pid>/smaps` text.
pub fn parse_smaps(text: &str) -> Result<Vec<SmapsEntry>, String> {
    let mut out: Vec<SmapsEntry> = Vec::new();
    for line in text.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && !first.ends_with(':') {
            out.push(SmapsEntry {
                maps: MapsEntry::parse(line)?,
                flags: VmFlags::empty(),
                has_anon_pages: false,
            });
        } else if let Some(cur) = out.last_mut() {
            if let Some(rest) = line.strip_prefix("VmFlags:") {
                // Every bit the kernel printed, named in `VmFlags` or not:
                // a model built from this map keeps the real flags (e.g.
                // `pf io dd` of `[vvar]`) so they can be compared later.
                // A name this table lacks (a newer kernel's) is skipped
                // here, so recording still works; the differential test
                // reads flags with the strict `parse_smaps_vmflags`.
                cur.flags = VmFlags::from_smaps_names(rest.split_whitespace());
            } else if let Some(rest) = line.strip_prefix("Anonymous:") {
                let kb = rest.trim().trim_end_matches("kB").trim();
                cur.has_anon_pages = kb.parse::<u64>().map(|k| k > 0).unwrap_or(false);
            }
        }
    }
    Ok(out)
}

/// The `VmFlags:` mnemonics of `/proc/<pid>/smaps` on x86-64 Linux 6.18,
/// by `vm_flags` bit number (`include/linux/mm.h`), in the order the
/// kernel prints them (ascending bit). `""` marks a bit the kernel never
/// prints there (the protection-key bits, shown as `ProtectionKey:`); a
/// bit missing from the table prints as `??`, as the kernel's does.
///
/// Some entries depend on the kernel's configuration: `sd` needs
/// `CONFIG_MEM_SOFT_DIRTY` (without it `VM_SOFTDIRTY` is 0 and never
/// set), `ss` `CONFIG_X86_USER_SHADOW_STACK`, `ui`
/// `CONFIG_HAVE_ARCH_USERFAULTFD_MINOR`.
pub const VM_FLAG_MNEMONICS: [(u32, &str); 40] = [
    (0, "rd"),  // VM_READ
    (1, "wr"),  // VM_WRITE
    (2, "ex"),  // VM_EXEC
    (3, "sh"),  // VM_SHARED
    (4, "mr"),  // VM_MAYREAD
    (5, "mw"),  // VM_MAYWRITE
    (6, "me"),  // VM_MAYEXEC
    (7, "ms"),  // VM_MAYSHARE
    (8, "gd"),  // VM_GROWSDOWN
    (9, "um"),  // VM_UFFD_MISSING
    (10, "pf"), // VM_PFNMAP
    (11, "gu"), // VM_MAYBE_GUARD (6.18 and its stable backports)
    (12, "uw"), // VM_UFFD_WP
    (13, "lo"), // VM_LOCKED
    (14, "io"), // VM_IO
    (15, "sr"), // VM_SEQ_READ
    (16, "rr"), // VM_RAND_READ
    (17, "dc"), // VM_DONTCOPY
    (18, "de"), // VM_DONTEXPAND
    (19, "lf"), // VM_LOCKONFAULT
    (20, "ac"), // VM_ACCOUNT
    (21, "nr"), // VM_NORESERVE
    (22, "ht"), // VM_HUGETLB
    (23, "sf"), // VM_SYNC
    (24, "ar"), // VM_ARCH_1 (VM_PAT on x86)
    (25, "wf"), // VM_WIPEONFORK
    (26, "dd"), // VM_DONTDUMP
    (27, "sd"), // VM_SOFTDIRTY
    (28, "mm"), // VM_MIXEDMAP
    (29, "hg"), // VM_HUGEPAGE
    (30, "nh"), // VM_NOHUGEPAGE
    (31, "mg"), // VM_MERGEABLE
    (32, ""),   // VM_PKEY_BIT0
    (33, ""),   // VM_PKEY_BIT1
    (34, ""),   // VM_PKEY_BIT2
    (35, ""),   // VM_PKEY_BIT3
    (37, "ss"), // VM_SHADOW_STACK
    (40, "dp"), // VM_DROPPABLE
    (41, "ui"), // VM_UFFD_MINOR (bit 38 in older kernels)
    (42, "sl"), // VM_SEALED
];

/// The mnemonic the kernel prints for `vm_flags` bit `bit` (`None`: it
/// prints nothing for it; `Some("??")`: a bit it has no name for).
///
/// ```
/// use mm::procmaps::vm_flag_mnemonic;
/// assert_eq!(vm_flag_mnemonic(20), Some("ac"));
/// assert_eq!(vm_flag_mnemonic(32), None); // a protection-key bit
/// assert_eq!(vm_flag_mnemonic(42), Some("sl"));
/// assert_eq!(vm_flag_mnemonic(36), Some("??"));
/// ```
pub fn vm_flag_mnemonic(bit: u32) -> Option<&'static str> {
    let name = VM_FLAG_MNEMONICS
        .iter()
        .find(|&&(b, _)| b == bit)
        .map_or("??", |&(_, n)| n);
    (!name.is_empty()).then_some(name)
}

/// The mnemonics `/proc/<pid>/smaps` prints for raw `vm_flags` bits, in
/// its order. Works on raw bits, not [`VmFlags`], so a bit the model's
/// flag type has no name for yet still prints as the kernel would.
///
/// ```
/// use mm::procmaps::vm_flags_mnemonics;
/// use mm::VmFlags;
/// let stack = VmFlags::STACK.bits();
/// assert_eq!(vm_flags_mnemonics(stack), ["rd", "wr", "mr", "mw", "me", "gd", "ac"]);
/// ```
pub fn vm_flags_mnemonics(bits: u64) -> Vec<&'static str> {
    (0..64)
        .filter(|b| bits & (1u64 << b) != 0)
        .filter_map(vm_flag_mnemonic)
        .collect()
}

/// The whole `VmFlags:` line as the kernel writes it (each mnemonic
/// followed by a space), without the newline.
///
/// ```
/// use mm::procmaps::smaps_vmflags_line;
/// assert_eq!(smaps_vmflags_line(0x73), "VmFlags: rd wr mr mw me ");
/// ```
pub fn smaps_vmflags_line(bits: u64) -> String {
    let mut s = String::from("VmFlags: ");
    for n in vm_flags_mnemonics(bits) {
        s.push_str(n);
        s.push(' ');
    }
    s
}

/// The raw `vm_flags` bits a `VmFlags:` line names. A name the table does
/// not know (including `??`, which stands for no bit in particular) is an
/// error rather than skipped: a flag nobody understands must not vanish
/// from a comparison.
///
/// ```
/// use mm::procmaps::vm_flags_from_mnemonics;
/// assert_eq!(vm_flags_from_mnemonics("rd wr mr mw me ac".split(' ')), Ok(0x100073));
/// assert!(vm_flags_from_mnemonics(["zz"]).is_err());
/// ```
pub fn vm_flags_from_mnemonics<'a>(
    names: impl IntoIterator<Item = &'a str>,
) -> Result<u64, String> {
    let mut bits = 0;
    for n in names {
        let bit = VM_FLAG_MNEMONICS
            .iter()
            .find(|&&(_, m)| !m.is_empty() && m == n)
            .map(|&(b, _)| b)
            .ok_or_else(|| format!("unknown VmFlags mnemonic {n:?}"))?;
        bits |= 1u64 << bit;
    }
    Ok(bits)
}

/// Each mapping of a `/proc/<pid>/smaps` text with its raw `vm_flags`
/// bits (as far as `VmFlags:` shows them), for comparing flag by flag.
///
/// ```
/// use mm::procmaps::parse_smaps_vmflags;
/// let text = "00400000-00401000 r-xp 00000000 08:01 12 /bin/x\n\
///             Size:                  4 kB\n\
///             VmFlags: rd ex mr mw me \n";
/// let v = parse_smaps_vmflags(text).unwrap();
/// assert_eq!(v[0].0.start, 0x400000);
/// assert_eq!(v[0].1, 0x75);
/// ```
pub fn parse_smaps_vmflags(text: &str) -> Result<Vec<(MapsEntry, u64)>, String> {
    let mut out: Vec<(MapsEntry, u64)> = Vec::new();
    for line in text.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && !first.ends_with(':') {
            out.push((MapsEntry::parse(line)?, 0));
        } else if let Some(rest) = line.strip_prefix("VmFlags:") {
            let cur = out.last_mut().ok_or("VmFlags: before any mapping")?;
            cur.1 = vm_flags_from_mnemonics(rest.split_whitespace())?;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod vmflags_tests {
    use super::*;

    #[test]
    fn mnemonics_round_trip_in_kernel_order() {
        let all: u64 = VM_FLAG_MNEMONICS
            .iter()
            .map(|&(b, _)| 1u64 << b)
            .fold(0, |a, b| a | b);
        let names = vm_flags_mnemonics(all);
        // Ascending bit order, protection-key bits not printed.
        assert_eq!(names.first(), Some(&"rd"));
        assert_eq!(names.last(), Some(&"sl"));
        assert_eq!(names.len(), VM_FLAG_MNEMONICS.len() - 4);
        let back = vm_flags_from_mnemonics(names.iter().copied()).unwrap();
        assert_eq!(back, all & !VmFlags::PKEY_MASK.bits());
    }

    #[test]
    fn matches_a_line_this_kernel_printed() {
        // madvise(DONTFORK, DONTDUMP, HUGEPAGE, MERGEABLE, SEQUENTIAL)
        // then mlock2(MLOCK_ONFAULT) on private anonymous memory, as
        // Linux 6.18 showed it.
        let line = "rd wr mr mw me lo sr dc lf ac dd hg mg";
        let bits = vm_flags_from_mnemonics(line.split(' ')).unwrap();
        assert_eq!(vm_flags_mnemonics(bits).join(" "), line);
        let sealed = "rd wr mr mw me um uw rr ac wf nh sl";
        let bits = vm_flags_from_mnemonics(sealed.split(' ')).unwrap();
        assert_eq!(smaps_vmflags_line(bits), format!("VmFlags: {sealed} "));
        let minor = "rd wr sh mr mw me ms um nr ui sl";
        let bits = vm_flags_from_mnemonics(minor.split(' ')).unwrap();
        assert_eq!(vm_flags_mnemonics(bits).join(" "), minor);
    }

    #[test]
    fn smaps_keeps_flags_vmflags_has_no_name_for() {
        let text = "7ffff7fc4000-7ffff7fc8000 r--p 00000000 00:00 0   [vvar]\n\
                    VmFlags: rd mr pf io de dd zz \n";
        let e = &parse_smaps(text).unwrap()[0];
        // pf io de dd kept as bits; the unknown `zz` skipped.
        assert_eq!(
            vm_flags_mnemonics(e.flags.bits()),
            ["rd", "mr", "pf", "io", "de", "dd"]
        );
        assert!(parse_smaps_vmflags(text).is_err());
    }

    #[test]
    fn unnamed_bits_print_as_the_kernel_does() {
        assert_eq!(vm_flags_mnemonics(1 << 36), ["??"]);
        assert!(vm_flags_mnemonics(VmFlags::PKEY_MASK.bits()).is_empty());
        assert!(vm_flags_from_mnemonics(["??"]).is_err());
    }
}
