//! Replay: rebuild each recorded address space in the model, replay every
//! call, and compare results and final maps with the kernel's.
//!
//! A trace is untrusted input (people replay traces others recorded), so
//! what a replay may build is bounded by [`Limits`]: the address spaces it
//! builds, the VMAs they hold together, and how deep a chain of forks
//! goes. Without them a short trace could ask for unbounded memory: each
//! fork event (a few dozen bytes) copies its parent's every VMA, and each
//! level of a fork chain lengthens every anonymous VMA's anon_vma chain.
//! Within the limits, memory grows with the VMAs held and time with the
//! trace's events times the VMAs each call covers; nothing is sized by a
//! number the trace states (a `MAP_POPULATE` of a terabyte marks VMAs,
//! not pages, and a thread is only a number on an event).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt::Write as _;
use std::sync::Arc;

use mm::procmaps::{MapsEntry, SmapsEntry};
use mm::{Access, File, FileMode, IndexKind, Layout, Mm, Policy, VmFlags};

use crate::format::{Event, Hex, Ret, Trace};

/// What a replay found.
#[derive(Debug, Default)]
pub struct Outcome {
    /// System calls replayed, by name.
    pub calls: BTreeMap<&'static str, usize>,
    /// Address spaces built (one per exec, one per fork).
    pub spaces: usize,
    /// Every difference, one message each (a message may span lines).
    /// Here and in `notes` and `model_maps`, control characters other
    /// than newlines (which a trace could carry in a name) are escaped.
    pub diffs: Vec<String>,
    /// Things worth knowing that are not differences (calls the model
    /// does not implement).
    pub notes: Vec<String>,
    /// The calls counted in `notes`, by name (`madvise`,
    /// `prctl(PR_SET_VMA_ANON_NAME)`, `ioctl(UFFDIO_REGISTER)`, ...).
    pub not_modelled: BTreeMap<String, usize>,
    /// Final maps compared.
    pub finals: usize,
    /// Address spaces the trace built but never gave a final map for (a
    /// trace that ends early): nothing checks how they ended.
    pub unfinished: Vec<usize>,
    /// Each address space's final map in the model, as
    /// `/proc/<pid>/maps` text, by space number.
    pub model_maps: Vec<(usize, String)>,
}

impl Outcome {
    /// Total number of replayed calls.
    pub fn total_calls(&self) -> usize {
        self.calls.values().sum()
    }
}

/// What a replay may build; exceeding any of them stops the replay with a
/// [`LimitExceeded`] (see the module docs for why each is needed).
///
/// The defaults are far above any recorded program so far (the committed
/// traces build at most seven address spaces of a few hundred VMAs). The
/// costliest trace they admit (a 31-deep fork chain, then forks of its
/// last space, each copying 330 anonymous VMAs, until the VMA limit)
/// peaks at 680 MB and stops after 6 to 7.5 s (2-vCPU VM, docs/RESULTS.md "Issue
/// 15"); a trace with no fork costs the model at most `max_vmas` VMAs, and
/// its time grows with its events times the VMAs each call covers.
///
/// ```
/// let limits = vmtrace::Limits { max_spaces: 16, ..vmtrace::Limits::default() };
/// assert_eq!(limits.max_spaces, 16);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Address spaces built (one per exec, one per fork).
    pub max_spaces: usize,
    /// VMAs held by all address spaces together, at any point.
    pub max_vmas: usize,
    /// Forks in a row without an exec between them (a child of the
    /// command's first address space is at depth 1).
    pub max_fork_depth: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_spaces: 4096,
            max_vmas: 1 << 18,
            max_fork_depth: 32,
        }
    }
}

/// A replay stopped because the trace asks for more than [`Limits`]
/// allows; the message names the event, the limit and the option that
/// raises it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitExceeded(pub String);

impl std::fmt::Display for LimitExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LimitExceeded {}

/// One address space of the replay.
struct Space {
    mm: Mm,
    /// Forks since the last exec.
    depth: usize,
    /// VMAs (by start) that the kernel showed with anonymous pages.
    anon: BTreeSet<u64>,
    /// Grows-down VMAs as the kernel showed them.
    stacks: Vec<[Hex; 2]>,
    /// Hidden-state problems already reported, so each is said once.
    reported: HashSet<(u64, &'static str)>,
    /// The last recorded final map: event index, task, lines.
    last_final: Option<(usize, i32, Vec<String>)>,
}

/// Replay `trace` on models using `index`, within `limits`.
///
/// ```
/// let text = std::fs::read_to_string(concat!(
///     env!("CARGO_MANIFEST_DIR"),
///     "/tests/fixtures/ls.json"
/// ))
/// .unwrap();
/// let trace = vmtrace::Trace::parse(&text).unwrap();
/// let outcome = vmtrace::replay(&trace, mm::IndexKind::Maple, &vmtrace::Limits::default()).unwrap();
/// assert!(outcome.finals > 0 && outcome.total_calls() > 0);
/// ```
pub fn replay(trace: &Trace, index: IndexKind, limits: &Limits) -> Result<Outcome, LimitExceeded> {
    let mut out = Outcome::default();
    // VMAs held by every space together, kept up to date after each event.
    let mut vmas: usize = 0;
    // Every address space and file of the replay under one policy.
    let policy = Arc::new(Policy {
        index,
        ..Policy::default()
    });
    let files: Vec<Arc<File>> = trace
        .files
        .iter()
        .map(|f| {
            let mode = FileMode {
                read: f.read,
                write: f.write,
                noexec: f.noexec,
                huge_align: f.huge_align,
            };
            policy.file_with_mode(f.path.clone(), f.size.0, mode)
        })
        .collect();
    let mut spaces: BTreeMap<usize, Space> = BTreeMap::new();
    let mut missing: HashSet<usize> = HashSet::new();
    for (i, ev) in trace.events.iter().enumerate() {
        let (space_id, pid) = ev.owner();
        match ev {
            Event::Exec {
                stack_rlimit,
                start_brk,
                start_stack,
                files: exec_files,
                smaps,
                ..
            } => {
                let mut layout = Layout::x86_64(stack_rlimit.0);
                // The kernel's effective minimum is the larger of the sysctl
                // and CONFIG_LSM_MMAP_MIN_ADDR (65536 on Debian's kernels,
                // the layout's default); the sysctl alone decides EPERM.
                layout.dac_mmap_min_addr = trace.sysctl.mmap_min_addr.0;
                layout.mmap_min_addr = layout.mmap_min_addr.max(trace.sysctl.mmap_min_addr.0);
                layout.cap_sys_rawio = trace.sysctl.cap_sys_rawio;
                layout.cap_ipc_lock = trace.sysctl.cap_ipc_lock;
                if let Some(limit) = trace.sysctl.memlock_rlimit {
                    layout.memlock_rlimit = limit.0;
                }
                layout.anon_vma_name = trace.sysctl.anon_vma_name;
                layout.exec_only_pkey = trace.sysctl.exec_only_pkey;
                layout.max_map_count = trace.sysctl.max_map_count as usize;
                layout.bottom_up = trace.sysctl.legacy_va_layout;
                layout.overcommit_never = trace.sysctl.overcommit_memory == 2;
                layout.thp_align = trace.sysctl.thp;
                let mut entries = Vec::new();
                let mut anon = BTreeSet::new();
                let mut stacks = Vec::new();
                let mut bad = None;
                for line in smaps {
                    match MapsEntry::parse(&line.map) {
                        Ok(maps) => {
                            let flags = VmFlags::from_smaps_names(line.vmflags.split_whitespace());
                            if maps.start < mm::layout::TASK_SIZE_X86_64 {
                                if line.anon {
                                    anon.insert(maps.start);
                                }
                                if flags.contains(VmFlags::GROWSDOWN) {
                                    stacks.push([Hex(maps.start), Hex(maps.end)]);
                                }
                            }
                            entries.push(SmapsEntry {
                                maps,
                                flags,
                                has_anon_pages: line.anon,
                            })
                        }
                        Err(e) => bad = Some(e),
                    }
                }
                let exec_files: Vec<Arc<File>> =
                    exec_files.iter().map(|&f| Arc::clone(&files[f])).collect();
                let built = match bad {
                    Some(e) => Err(e),
                    None => Mm::from_smaps(
                        &policy,
                        layout,
                        &entries,
                        start_brk.0,
                        start_brk.0,
                        start_stack.0,
                        &exec_files,
                    )
                    .map_err(|e| format!("the model refused the map: {e}")),
                };
                match built {
                    Ok(mm) => {
                        out.spaces += 1;
                        if out.spaces > limits.max_spaces {
                            return Err(too_many_spaces(i, limits));
                        }
                        missing.remove(&space_id);
                        vmas += mm.map_count();
                        let replaced = spaces.insert(
                            space_id,
                            Space {
                                mm,
                                depth: 0,
                                anon,
                                stacks,
                                reported: HashSet::new(),
                                last_final: None,
                            },
                        );
                        vmas -= replaced.map_or(0, |s| s.mm.map_count());
                        check_vmas(vmas, i, limits)?;
                    }
                    Err(e) => {
                        out.diffs.push(format!(
                            "event {i} [pid {pid}, space {space_id}]: exec: cannot build the address space: {e}"
                        ));
                        if let Some(old) = spaces.remove(&space_id) {
                            vmas -= old.mm.map_count();
                        }
                        missing.insert(space_id);
                    }
                }
                continue;
            }
            Event::Fork { parent, .. } => {
                let Some(p) = spaces.get(parent) else {
                    missing.insert(space_id);
                    out.diffs.push(format!(
                        "event {i} [pid {pid}]: fork from address space {parent}, which the replay does not have"
                    ));
                    continue;
                };
                if out.spaces >= limits.max_spaces {
                    return Err(too_many_spaces(i, limits));
                }
                if p.depth >= limits.max_fork_depth {
                    return Err(LimitExceeded(format!(
                        "event {i}: fork {} deep without an exec, over the limit of {} \
                         (--max-fork-depth)",
                        p.depth + 1,
                        limits.max_fork_depth
                    )));
                }
                // Checked before the copy is made, so the limit bounds
                // what is allocated.
                check_vmas(vmas + p.mm.map_count(), i, limits)?;
                let child = Space {
                    mm: p.mm.fork(),
                    depth: p.depth + 1,
                    anon: p.anon.clone(),
                    stacks: p.stacks.clone(),
                    reported: HashSet::new(),
                    last_final: None,
                };
                out.spaces += 1;
                vmas += child.mm.map_count();
                if let Some(old) = spaces.insert(space_id, child) {
                    vmas -= old.mm.map_count();
                }
                continue;
            }
            _ => {}
        }
        let Some(space) = spaces.get_mut(&space_id) else {
            if missing.insert(space_id) {
                out.diffs.push(format!(
                    "event {i}: address space {space_id} was never built; its events are skipped"
                ));
            }
            continue;
        };
        let before = space.mm.map_count();
        match ev {
            Event::Sync {
                anon_add,
                anon_del,
                stacks,
                ..
            } => {
                for a in anon_del {
                    space.anon.remove(&a.0);
                }
                space.anon.extend(anon_add.iter().map(|a| a.0));
                if let Some(s) = stacks {
                    space.stacks = s.clone();
                }
                settle(space, i, pid, &mut out.diffs);
            }
            Event::Final { maps, .. } => {
                space.last_final = Some((i, pid, maps.clone()));
            }
            // Exec and fork were handled above: the rest are calls.
            _ => {
                if let Some((call, kernel)) = ev.call() {
                    let model = call.apply(&space.mm, |_| recorded_file(ev, &files));
                    let model = Ret(mm::call::raw(model));
                    *out.calls.entry(call.name()).or_default() += 1;
                    if kernel != model {
                        out.diffs.push(format!(
                            "event {i} [pid {pid}, space {space_id}]: {call}: kernel {kernel}, model {model}"
                        ));
                    }
                } else if let Some((name, text)) = ev.unmodelled() {
                    let ret = ev.ret().unwrap_or(Ret(0));
                    out.notes.push(format!(
                        "event {i} [pid {pid}, space {space_id}]: {text} = {ret} is not modelled"
                    ));
                    *out.not_modelled
                        .entry(name.escape_debug().to_string())
                        .or_default() += 1;
                }
            }
        }
        vmas = vmas - before + space.mm.map_count();
        check_vmas(vmas, i, limits)?;
    }
    for (id, space) in &spaces {
        out.model_maps.push((*id, space.mm.proc_maps()));
        let Some((i, pid, lines)) = &space.last_final else {
            out.unfinished.push(*id);
            continue;
        };
        out.finals += 1;
        if let Some(d) = compare_maps(lines, &space.mm) {
            out.diffs.push(format!(
                "final map of space {id} (pid {pid}, event {i}) differs (- kernel, + model):\n{d}"
            ));
        }
    }
    // Messages quote the trace (map lines, file names, call names): a
    // hostile one must not reach a terminal's escape sequences.
    for text in out
        .diffs
        .iter_mut()
        .chain(&mut out.notes)
        .chain(out.model_maps.iter_mut().map(|(_, m)| m))
    {
        if text.chars().any(|c| c.is_control() && c != '\n') {
            *text = escape_controls(text);
        }
    }
    Ok(out)
}

/// `text` with its control characters other than newlines escaped.
fn escape_controls(text: &str) -> String {
    let mut clean = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() && c != '\n' {
            clean.extend(c.escape_default());
        } else {
            clean.push(c);
        }
    }
    clean
}

fn too_many_spaces(i: usize, limits: &Limits) -> LimitExceeded {
    LimitExceeded(format!(
        "event {i}: the trace builds more than {} address spaces (--max-spaces)",
        limits.max_spaces
    ))
}

fn check_vmas(vmas: usize, i: usize, limits: &Limits) -> Result<(), LimitExceeded> {
    if vmas > limits.max_vmas {
        return Err(LimitExceeded(format!(
            "event {i}: the address spaces would hold {vmas} VMAs together, over the limit of \
             {} (--max-vmas)",
            limits.max_vmas
        )));
    }
    Ok(())
}

/// Bring the model's hidden state in line with what the kernel showed:
/// grow stacks to the recorded extent, and give every VMA the kernel
/// showed with anonymous pages an anon_vma (by a write fault at its
/// start, which runs the model's `anon_vma_prepare`).
fn settle(space: &mut Space, i: usize, pid: i32, diffs: &mut Vec<String>) {
    let mm = &space.mm;
    let mut report = |key: (u64, &'static str), msg: String| {
        if space.reported.insert(key) {
            diffs.push(format!("event {i} [pid {pid}]: {msg}"));
        }
    };
    for &[Hex(start), Hex(end)] in &space.stacks {
        let vma = end
            .checked_sub(1)
            .filter(|_| start < end)
            .and_then(|last| mm.find_vma(last))
            .filter(|v| v.start() < end && v.flags().contains(VmFlags::GROWSDOWN));
        let Some(vma) = vma else {
            report(
                (start, "stack"),
                format!("kernel has a grows-down VMA {start:#x}-{end:#x}, the model does not"),
            );
            continue;
        };
        if vma.start() > start {
            if let Err(e) = mm.fault(start, Access::Write) {
                report(
                    (start, "stack"),
                    format!("kernel's stack grew to {start:#x}; the model's fault there: {e}"),
                );
            }
        } else if vma.start() < start {
            report(
                (start, "stack"),
                format!(
                    "kernel's stack starts at {start:#x}, the model's at {:#x}",
                    vma.start()
                ),
            );
        }
    }
    for &a in &space.anon {
        match mm.find_vma(a).filter(|v| v.start() <= a) {
            Some(v) if v.anon().is_some() || v.is_shared() => {}
            Some(v) => {
                if let Err(e) = mm.fault(a, Access::Write) {
                    report(
                        (a, "anon"),
                        format!(
                            "kernel VMA at {a:#x} has anonymous pages; the model's VMA {:#x}-{:#x} ({:?}) takes no write fault: {e}",
                            v.start(),
                            v.end(),
                            v.prot()
                        ),
                    );
                }
            }
            None => report(
                (a, "anon"),
                format!("kernel VMA at {a:#x} has anonymous pages; the model maps nothing there"),
            ),
        }
    }
}

/// The file an `mmap` event's descriptor named, at the size it had at
/// the call.
fn recorded_file(ev: &Event, files: &[Arc<File>]) -> Option<Arc<File>> {
    let Event::Mmap {
        file: Some(id),
        file_size,
        ..
    } = ev
    else {
        return None;
    };
    let file = Arc::clone(&files[*id]);
    if let Some(size) = file_size {
        file.set_size(size.0);
    }
    Some(file)
}

/// Whether a kernel maps line and a model one agree on range,
/// permissions, offset and name. A file unlinked after it was mapped is
/// shown by the kernel as `path (deleted)`; unlinking is no memory call
/// and the model knows nothing of it, so that suffix alone is not a
/// difference.
fn same_mapping(kernel: &MapsEntry, model: &MapsEntry) -> bool {
    if kernel.same_mapping(model) {
        return true;
    }
    let unlinked = match (&kernel.name, &model.name) {
        (Some(k), Some(m)) => k.strip_suffix(" (deleted)") == Some(m.as_str()),
        _ => false,
    };
    unlinked
        && kernel.same_mapping(&MapsEntry {
            name: kernel.name.clone(),
            ..model.clone()
        })
}

/// Compare a recorded `/proc/<pid>/maps` with the model's, ignoring lines
/// above the user address space (`[vsyscall]`). Returns the differing
/// lines, or `None` when they agree.
fn compare_maps(kernel_lines: &[String], mm: &Mm) -> Option<String> {
    let task_size = mm.layout().task_size;
    let mut kernel = Vec::new();
    let mut out = String::new();
    for l in kernel_lines {
        match MapsEntry::parse(l) {
            Ok(e) if e.start >= task_size => {}
            Ok(e) => kernel.push(e),
            Err(e) => {
                let _ = writeln!(out, "  ? {e}");
            }
        }
    }
    let model = mm.maps();
    let (mut i, mut j) = (0, 0);
    while i < kernel.len() || j < model.len() {
        match (kernel.get(i), model.get(j)) {
            (Some(k), Some(m)) if same_mapping(k, m) => {
                i += 1;
                j += 1;
            }
            (Some(k), Some(m)) if k.start == m.start => {
                let _ = writeln!(out, "  - {k}\n  + {m}");
                i += 1;
                j += 1;
            }
            (Some(k), m) if m.is_none_or(|m| k.start < m.start) => {
                let _ = writeln!(out, "  - {k}");
                i += 1;
            }
            (_, Some(m)) => {
                let _ = writeln!(out, "  + {m}");
                j += 1;
            }
            (None, None) => break,
            (Some(_), None) => unreachable!("covered by the is_none_or arm"),
        }
    }
    (!out.is_empty()).then(|| out.trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unlinked_files_compare_by_path() {
        let k = MapsEntry::parse("7000-8000 rw-s 00000000 fe:00 12 /tmp/x (deleted)").unwrap();
        let m = MapsEntry::parse("7000-8000 rw-s 00000000 00:00 3 /tmp/x").unwrap();
        assert!(same_mapping(&k, &m));
        let moved = MapsEntry::parse("7000-9000 rw-s 00000000 00:00 3 /tmp/x").unwrap();
        assert!(!same_mapping(&k, &moved));
        let other = MapsEntry::parse("7000-8000 rw-s 00000000 00:00 3 /tmp/y").unwrap();
        assert!(!same_mapping(&k, &other));
        assert!(
            !same_mapping(&m, &k),
            "only the kernel's name may carry the suffix"
        );
    }
}
