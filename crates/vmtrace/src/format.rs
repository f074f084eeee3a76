//! The trace file: a versioned JSON document, written one event per line
//! so that a trace can be read (and diffed) by eye.
//!
//! Addresses, lengths and flag words are hexadecimal strings (`"0x7fff"`);
//! a system call's result is a hexadecimal value or a negative errno name
//! (`"-ENOMEM"`, or `"-95"` for one without a name here).

use std::fmt::{self, Write as _};
use std::path::Path;

use mm::Call;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The `format` field of every trace.
pub const FORMAT: &str = "vmscale-trace";
/// The version this build writes and reads.
pub const VERSION: u32 = 1;

/// A 64-bit value written as a hexadecimal string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Hex(pub u64);

impl Serialize for Hex {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{:#x}", self.0))
    }
}

impl<'de> Deserialize<'de> for Hex {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Hex, D::Error> {
        let text = String::deserialize(d)?;
        let digits = text
            .strip_prefix("0x")
            .ok_or_else(|| D::Error::custom(format!("{text:?} is not a 0x-prefixed number")))?;
        u64::from_str_radix(digits, 16)
            .map(Hex)
            .map_err(|_| D::Error::custom(format!("{text:?} is not a hexadecimal number")))
    }
}

/// Errno names used in traces (the x86-64 values).
const ERRNO_NAMES: &[(i64, &str)] = &[
    (1, "EPERM"),
    (2, "ENOENT"),
    (4, "EINTR"),
    (9, "EBADF"),
    (11, "EAGAIN"),
    (12, "ENOMEM"),
    (13, "EACCES"),
    (14, "EFAULT"),
    (16, "EBUSY"),
    (17, "EEXIST"),
    (19, "ENODEV"),
    (22, "EINVAL"),
    (26, "ETXTBSY"),
    (38, "ENOSYS"),
    (75, "EOVERFLOW"),
    (95, "EOPNOTSUPP"),
];

/// A system call's raw result: a value, or `-errno` (-4095..=-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ret(pub i64);

impl Ret {
    /// The errno, if the call failed.
    pub fn errno(self) -> Option<i64> {
        (-4095..=-1).contains(&self.0).then_some(-self.0)
    }
}

impl fmt::Display for Ret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.errno() {
            Some(e) => match ERRNO_NAMES.iter().find(|(n, _)| *n == e) {
                Some((_, name)) => write!(f, "-{name}"),
                None => write!(f, "-{e}"),
            },
            None => write!(f, "{:#x}", self.0 as u64),
        }
    }
}

impl Serialize for Ret {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Ret {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Ret, D::Error> {
        let text = String::deserialize(d)?;
        let bad = || D::Error::custom(format!("{text:?} is not a system call result"));
        if let Some(hex) = text.strip_prefix("0x") {
            let v = u64::from_str_radix(hex, 16).map_err(|_| bad())?;
            return Ok(Ret(v as i64));
        }
        let err = text.strip_prefix('-').ok_or_else(bad)?;
        let code = match ERRNO_NAMES.iter().find(|(_, n)| *n == err) {
            Some((code, _)) => *code,
            None => err.parse::<i64>().map_err(|_| bad())?,
        };
        if !(1..=4095).contains(&code) {
            return Err(bad());
        }
        Ok(Ret(-code))
    }
}

/// A whole trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// Always [`FORMAT`].
    pub format: String,
    /// Always [`VERSION`] for traces this build reads.
    pub version: u32,
    /// The recorded command line.
    pub command: Vec<String>,
    /// `uname -r` of the recording machine.
    pub kernel: String,
    /// How the command ended: `"exit 0"`, `"signal 9"`.
    pub status: String,
    /// System-wide settings the model's layout takes.
    pub sysctl: Sysctl,
    /// Every mapped file, referred to by index from the events.
    pub files: Vec<FileInfo>,
    /// What happened, in the order the tracer saw it.
    pub events: Vec<Event>,
}

/// The sysctls (and kernel features) that decide placement and limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sysctl {
    /// `vm.mmap_min_addr`.
    pub mmap_min_addr: Hex,
    /// `vm.max_map_count`.
    pub max_map_count: u64,
    /// `vm.legacy_va_layout` was non-zero (bottom-up allocation).
    pub legacy_va_layout: bool,
    /// `vm.overcommit_memory`.
    pub overcommit_memory: u32,
    /// The kernel has transparent huge pages (large anonymous mappings
    /// are 2 MiB aligned).
    pub thp: bool,
    /// The CPU has protection keys enabled (`ospke` in `/proc/cpuinfo`), so
    /// a `PROT_EXEC`-only mapping gets the execute-only key. Traces made
    /// before this field was recorded were made on such a machine.
    #[serde(default = "yes")]
    pub exec_only_pkey: bool,
    /// The traced command held `CAP_SYS_RAWIO` (it may map below
    /// `mmap_min_addr`). Defaults as for `exec_only_pkey`.
    #[serde(default = "yes")]
    pub cap_sys_rawio: bool,
}

fn yes() -> bool {
    true
}

/// A file the traced processes mapped, one per path and open mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileInfo {
    /// The path as `/proc/<pid>/maps` shows it.
    pub path: String,
    /// Size in bytes when first seen.
    pub size: Hex,
    /// Opened for reading.
    pub read: bool,
    /// Opened for writing.
    pub write: bool,
    /// On a `noexec` mount.
    pub noexec: bool,
    /// On a filesystem that places large file mappings 2 MiB-aligned
    /// (ext4, xfs, btrfs). Traces made before this field was recorded
    /// mapped files on ext4.
    #[serde(default = "yes")]
    pub huge_align: bool,
}

/// One mapping of `/proc/<pid>/smaps`, reduced to what the model needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmapsLine {
    /// The header line, as in `/proc/<pid>/maps`.
    pub map: String,
    /// The `VmFlags:` names.
    pub vmflags: String,
    /// `Anonymous:` was non-zero (the VMA has an anon_vma).
    pub anon: bool,
}

/// Something the tracer saw. `space` numbers an address space: threads
/// and `CLONE_VM` children share their parent's, a forked child gets a
/// new one, and so does a task that execs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "ev", rename_all = "snake_case", deny_unknown_fields)]
pub enum Event {
    /// A task exec'd (or the command started): a fresh address space.
    Exec {
        /// The new address space.
        space: usize,
        /// The task.
        pid: i32,
        /// The program, as `/proc/<pid>/exe` names it.
        exe: String,
        /// `RLIMIT_STACK` soft limit (`0xffffffffffffffff`: unlimited).
        stack_rlimit: Hex,
        /// `mm->start_brk` (field 47 of `/proc/<pid>/stat`); the break
        /// starts there.
        start_brk: Hex,
        /// `mm->start_stack` (field 28 of `/proc/<pid>/stat`).
        start_stack: Hex,
        /// The files of `smaps`, as indexes into [`Trace::files`].
        files: Vec<usize>,
        /// The map right after exec, before the first system call.
        smaps: Vec<SmapsLine>,
    },
    /// A child without `CLONE_VM`: a copy of its parent's address space.
    Fork {
        /// The parent's address space.
        parent: usize,
        /// The child's new address space.
        space: usize,
        /// The child task.
        pid: i32,
    },
    /// Hidden state that changed since the space's previous snapshot,
    /// read from `smaps` at a system call's entry: VMAs that gained or
    /// lost anonymous pages (by start address), and grows-down VMAs'
    /// extents when a stack grew.
    Sync {
        /// The address space.
        space: usize,
        /// The task whose entry this was.
        pid: i32,
        /// VMAs that now hold anonymous pages (and did not before).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        anon_add: Vec<Hex>,
        /// VMAs that no longer do (or are gone).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        anon_del: Vec<Hex>,
        /// Every grows-down VMA as `[start, end]`, when they changed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stacks: Option<Vec<[Hex; 2]>>,
    },
    /// `mmap(addr, len, prot, flags, fd, off)`.
    Mmap {
        /// The address space.
        space: usize,
        /// The calling task.
        pid: i32,
        /// Hint or fixed address.
        addr: Hex,
        /// Length in bytes.
        len: Hex,
        /// `PROT_*` bits.
        prot: Hex,
        /// `MAP_*` bits.
        flags: Hex,
        /// The file descriptor argument.
        fd: i32,
        /// File offset in bytes.
        off: Hex,
        /// The file `fd` named (index into [`Trace::files`]), unless the
        /// mapping is anonymous or `fd` named no file.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        file: Option<usize>,
        /// The file's size at the call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        file_size: Option<Hex>,
        /// The kernel's result.
        ret: Ret,
    },
    /// `munmap(addr, len)`.
    Munmap {
        /// The address space.
        space: usize,
        /// The calling task.
        pid: i32,
        /// Start.
        addr: Hex,
        /// Length in bytes.
        len: Hex,
        /// The kernel's result.
        ret: Ret,
    },
    /// `mprotect(addr, len, prot)` (or `pkey_mprotect` with key -1).
    Mprotect {
        /// The address space.
        space: usize,
        /// The calling task.
        pid: i32,
        /// Start.
        addr: Hex,
        /// Length in bytes.
        len: Hex,
        /// `PROT_*` bits.
        prot: Hex,
        /// The kernel's result.
        ret: Ret,
    },
    /// `mremap(addr, old_len, new_len, flags, new_addr)`.
    Mremap {
        /// The address space.
        space: usize,
        /// The calling task.
        pid: i32,
        /// Start of the old mapping.
        addr: Hex,
        /// Its length.
        old_len: Hex,
        /// The new length.
        new_len: Hex,
        /// `MREMAP_*` bits.
        flags: Hex,
        /// Target address for `MREMAP_FIXED`.
        new_addr: Hex,
        /// The kernel's result.
        ret: Ret,
    },
    /// `brk(addr)`.
    Brk {
        /// The address space.
        space: usize,
        /// The calling task.
        pid: i32,
        /// Requested break (0 asks for the current one).
        addr: Hex,
        /// The kernel's result: the break after the call.
        ret: Ret,
    },
    /// A call that can change VMAs but that the model does not implement
    /// (`madvise` with a flag-changing advice, `mlock`, `shmat`, ...).
    Other {
        /// The address space.
        space: usize,
        /// The calling task.
        pid: i32,
        /// System call name.
        name: String,
        /// Its six raw arguments.
        args: Vec<Hex>,
        /// The kernel's result.
        ret: Ret,
    },
    /// The map of an address space as a task left it (exit or exec); the
    /// last one of each space is compared with the model's.
    Final {
        /// The address space.
        space: usize,
        /// The task.
        pid: i32,
        /// `/proc/<pid>/maps` lines.
        maps: Vec<String>,
    },
}

impl Event {
    /// Whether this is one of the replayed system calls.
    pub fn is_call(&self) -> bool {
        self.call().is_some()
    }

    /// The address space and the task the event belongs to (for a fork,
    /// the child's).
    pub fn owner(&self) -> (usize, i32) {
        match *self {
            Event::Exec { space, pid, .. }
            | Event::Fork { space, pid, .. }
            | Event::Sync { space, pid, .. }
            | Event::Mmap { space, pid, .. }
            | Event::Munmap { space, pid, .. }
            | Event::Mprotect { space, pid, .. }
            | Event::Mremap { space, pid, .. }
            | Event::Brk { space, pid, .. }
            | Event::Other { space, pid, .. }
            | Event::Final { space, pid, .. } => (space, pid),
        }
    }

    /// The replayed system call this event records, as the model takes
    /// it, with the kernel's result. An `mmap`'s `fd` is the traced
    /// process's: the file it named is the event's `file`.
    ///
    /// ```
    /// use vmtrace::format::{Event, Hex, Ret};
    /// let ev = Event::Munmap { space: 0, pid: 7, addr: Hex(0x1000), len: Hex(4096), ret: Ret(0) };
    /// let (call, ret) = ev.call().unwrap();
    /// assert_eq!((call.to_string(), ret), ("munmap(0x1000, 4096)".to_string(), Ret(0)));
    /// ```
    pub fn call(&self) -> Option<(Call, Ret)> {
        let call = match *self {
            Event::Mmap {
                addr: Hex(addr),
                len: Hex(len),
                prot: Hex(prot),
                flags: Hex(flags),
                fd,
                off: Hex(off),
                ret,
                ..
            } => (Call::mmap(addr, len, prot, flags, fd, off), ret),
            Event::Munmap {
                addr: Hex(addr),
                len: Hex(len),
                ret,
                ..
            } => (Call::munmap(addr, len), ret),
            Event::Mprotect {
                addr: Hex(addr),
                len: Hex(len),
                prot: Hex(prot),
                ret,
                ..
            } => (Call::mprotect(addr, len, prot), ret),
            Event::Mremap {
                addr: Hex(addr),
                old_len: Hex(old_len),
                new_len: Hex(new_len),
                flags: Hex(flags),
                new_addr: Hex(new_addr),
                ret,
                ..
            } => (Call::mremap(addr, old_len, new_len, flags, new_addr), ret),
            Event::Brk {
                addr: Hex(addr),
                ret,
                ..
            } => (Call::brk(addr), ret),
            _ => return None,
        };
        Some(call)
    }
}

impl Trace {
    /// Read and check a trace file. Errors are one line, naming the file.
    pub fn load(path: &Path) -> Result<Trace, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read trace {}: {e}", path.display()))?;
        Trace::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parse and check a trace's text. Errors are one line.
    ///
    /// ```
    /// let e = vmtrace::Trace::parse("{}").unwrap_err();
    /// assert!(e.starts_with("not a valid trace"), "{e}");
    /// ```
    pub fn parse(text: &str) -> Result<Trace, String> {
        // serde quotes the offending text, which is the trace's own: its
        // control characters are escaped so the error stays one line and
        // cannot drive the terminal it is printed on.
        let trace: Trace = serde_json::from_str(text)
            .map_err(|e| format!("not a valid trace: {}", e.to_string().escape_debug()))?;
        if trace.format != FORMAT {
            return Err(format!("not a vmscale trace (format {:?})", trace.format));
        }
        if trace.version != VERSION {
            return Err(format!(
                "trace version {} is not supported (this build reads version {VERSION})",
                trace.version
            ));
        }
        trace.check()?;
        Ok(trace)
    }

    /// Structural checks the replay relies on: file indexes in range.
    fn check(&self) -> Result<(), String> {
        let nfiles = self.files.len();
        for (i, ev) in self.events.iter().enumerate() {
            let bad = match ev {
                Event::Exec { files, .. } => files.iter().any(|&f| f >= nfiles),
                Event::Mmap { file: Some(f), .. } => *f >= nfiles,
                _ => false,
            };
            if bad {
                return Err(format!(
                    "event {i} names a file that is not in the file table"
                ));
            }
        }
        Ok(())
    }

    /// The trace as text: a header, then one event per line.
    pub fn to_text(&self) -> Result<String, serde_json::Error> {
        let mut out = String::new();
        let field = |out: &mut String, name: &str, value: String| {
            let _ = writeln!(out, "  \"{name}\": {value},");
        };
        out.push_str("{\n");
        field(&mut out, "format", serde_json::to_string(&self.format)?);
        field(&mut out, "version", serde_json::to_string(&self.version)?);
        field(&mut out, "command", serde_json::to_string(&self.command)?);
        field(&mut out, "kernel", serde_json::to_string(&self.kernel)?);
        field(&mut out, "status", serde_json::to_string(&self.status)?);
        field(&mut out, "sysctl", serde_json::to_string(&self.sysctl)?);
        out.push_str("  \"files\": [");
        for (i, f) in self.files.iter().enumerate() {
            out.push_str(if i == 0 { "\n    " } else { ",\n    " });
            out.push_str(&serde_json::to_string(f)?);
        }
        out.push_str("\n  ],\n  \"events\": [");
        for (i, e) in self.events.iter().enumerate() {
            out.push_str(if i == 0 { "\n    " } else { ",\n    " });
            out.push_str(&serde_json::to_string(e)?);
        }
        out.push_str("\n  ]\n}\n");
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the `trace_replay` fuzz target: serde quoted an unknown
    /// event name with its newline and control characters into the error.
    #[test]
    fn parse_errors_are_one_line_and_hold_no_control_characters() {
        let text = "{\"format\": \"vmscale-trace\", \"events\": [{\"ev\": \"a\\n\\u001b[31m\"}]}";
        let e = Trace::parse(text).unwrap_err();
        assert!(e.contains("unknown variant"), "{e}");
        assert!(!e.chars().any(char::is_control), "{e:?}");
    }

    #[test]
    fn results_round_trip() {
        for (v, text) in [
            (0, "\"0x0\""),
            (0x7fff_f7ff_f000, "\"0x7ffff7fff000\""),
            (-12, "\"-ENOMEM\""),
            (-200, "\"-200\""),
        ] {
            assert_eq!(serde_json::to_string(&Ret(v)).unwrap(), text);
            assert_eq!(serde_json::from_str::<Ret>(text).unwrap(), Ret(v));
        }
        assert!(serde_json::from_str::<Ret>("\"-0\"").is_err());
        assert!(serde_json::from_str::<Ret>("\"12\"").is_err());
        assert!(serde_json::from_str::<Hex>("\"12\"").is_err());
    }

    #[test]
    fn trace_text_round_trips() {
        let trace = Trace {
            format: FORMAT.into(),
            version: VERSION,
            command: vec!["/bin/true".into()],
            kernel: "6.18".into(),
            status: "exit 0".into(),
            sysctl: Sysctl {
                mmap_min_addr: Hex(4096),
                max_map_count: 65530,
                legacy_va_layout: false,
                overcommit_memory: 0,
                thp: true,
                exec_only_pkey: true,
                cap_sys_rawio: true,
            },
            files: vec![FileInfo {
                path: "/bin/true".into(),
                size: Hex(1000),
                read: true,
                write: false,
                noexec: false,
                huge_align: true,
            }],
            events: vec![
                Event::Brk {
                    space: 0,
                    pid: 7,
                    addr: Hex(0),
                    ret: Ret(0x5555_5555_6000),
                },
                Event::Sync {
                    space: 0,
                    pid: 7,
                    anon_add: vec![Hex(0x1000)],
                    anon_del: vec![],
                    stacks: None,
                },
            ],
        };
        let text = trace.to_text().unwrap();
        let back: Trace = serde_json::from_str(&text).unwrap();
        assert_eq!(back, trace);
        assert_eq!(text.lines().count(), 15, "{text}");
    }
}
