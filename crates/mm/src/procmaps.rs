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
    /// The flags the model keeps.
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
                cur.flags = VmFlags::from_smaps_names(rest.split_whitespace());
            } else if let Some(rest) = line.strip_prefix("Anonymous:") {
                let kb = rest.trim().trim_end_matches("kB").trim();
                cur.has_anon_pages = kb.parse::<u64>().map(|k| k > 0).unwrap_or(false);
            }
        }
    }
    Ok(out)
}
