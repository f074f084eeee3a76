//! The semaphore's wait queue, and the NUMA-aware policy that decides who
//! gets the lock next.
//!
//! Waiters are kept in one FIFO per node (the `rwsem` kind puts everyone
//! in queue 0, which makes it one FIFO). Arrival numbers (`seq`) give the
//! global order across queues. The policy, applied by the releasing
//! thread (or by a thread that finds the lock free as it queues, standing
//! in for the holder that just left):
//!
//! - disengaged (the `rwsem` kind always; the `numa` kind until it has
//!   seen contention): the oldest waiter, i.e. strict FIFO;
//! - engaged: the oldest waiter on the releasing thread's node, unless
//!   [`MAX_LOCAL_HANDOFFS`] hand-offs in a row have stayed on one node
//!   while a waiter on another node was queued: then the oldest remote
//!   waiter. Passing the lock within a node keeps the protected data in
//!   that node's caches; the bound keeps remote waiters' delay finite.
//!
//! "Under load" is a busy period: the queue engages once
//! [`ENGAGE_AFTER`] threads have queued since it was last empty, and
//! disengages when it drains. Occasional single waiters stay FIFO.
//!
//! A reader chosen by the policy is granted together with the readers
//! right behind it in its queue (a batch); a writer alone.

use std::collections::VecDeque;
use std::sync::Arc;

use super::rwsem::Slot;

/// At most this many consecutive hand-offs stay on one node while a waiter
/// on another node is queued.
pub const MAX_LOCAL_HANDOFFS: u32 = 64;

/// Threads queued within one busy period before the `numa` kind switches
/// from FIFO to per-node hand-off.
pub const ENGAGE_AFTER: u32 = 4;

/// What a waiter waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Want {
    Read,
    Write,
}

pub(crate) struct Waiter {
    pub(crate) want: Want,
    seq: u64,
    pub(crate) slot: Arc<Slot>,
}

/// The waiters of one lock. Lives under the lock's queue mutex.
pub(crate) struct WaitQueue {
    /// `queues[node]`; always one queue for the `rwsem` kind.
    queues: Vec<VecDeque<Waiter>>,
    len: usize,
    next_seq: u64,
    numa: bool,
    /// Enqueues since the queue was last empty.
    busy: u32,
    /// Consecutive grants to the releasing thread's own node.
    streak: u32,
    limit: u32,
}

/// A grant decision: which queue, what for, how many waiters it takes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Choice {
    queue: usize,
    pub(crate) want: Want,
    pub(crate) count: usize,
}

impl WaitQueue {
    pub(crate) fn new(numa: bool) -> Self {
        WaitQueue {
            queues: vec![VecDeque::new()],
            len: 0,
            next_seq: 0,
            numa,
            busy: 0,
            streak: 0,
            limit: MAX_LOCAL_HANDOFFS,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn engaged(&self) -> bool {
        self.numa && self.busy >= ENGAGE_AFTER
    }

    pub(crate) fn set_limit(&mut self, limit: u32) {
        self.limit = limit;
    }

    /// Queue a waiter of `node` (ignored unless `numa`; `node` comes from
    /// `topology::current_node`, always below `MAX_NODES`, so the table
    /// stays bounded).
    pub(crate) fn push(&mut self, want: Want, node: usize, slot: Arc<Slot>) {
        let q = if self.numa { node } else { 0 };
        if q >= self.queues.len() {
            self.queues.resize_with(q + 1, VecDeque::new);
        }
        self.queues[q].push_back(Waiter {
            want,
            seq: self.next_seq,
            slot,
        });
        self.next_seq += 1;
        self.len += 1;
        self.busy = self.busy.saturating_add(1);
    }

    /// The queue whose front waiter is oldest, among those `keep` allows.
    fn oldest(&self, keep: impl Fn(usize) -> bool) -> Option<usize> {
        self.queues
            .iter()
            .enumerate()
            .filter(|&(i, _)| keep(i))
            .filter_map(|(i, q)| q.front().map(|w| (w.seq, i)))
            .min()
            .map(|(_, i)| i)
    }

    /// Who gets the lock next if the thread releasing it runs on `node`.
    pub(crate) fn choose(&self, node: usize) -> Option<Choice> {
        let queue = if self.engaged() {
            let local = self.queues.get(node).is_some_and(|q| !q.is_empty());
            let remote = self.oldest(|i| i != node);
            match (local, remote) {
                (true, Some(r)) if self.streak >= self.limit => r,
                (true, _) => node,
                (false, r) => r?,
            }
        } else {
            self.oldest(|_| true)?
        };
        let q = &self.queues[queue];
        let want = q.front()?.want;
        let count = match want {
            Want::Write => 1,
            Want::Read => q.iter().take_while(|w| w.want == Want::Read).count(),
        };
        Some(Choice { queue, want, count })
    }

    /// Remove the waiters of `choice` (made by `choose(node)` on this very
    /// queue state) and hand back their slots to be woken.
    pub(crate) fn take(&mut self, choice: Choice, node: usize, out: &mut Vec<Arc<Slot>>) {
        let remote_waiting = self.oldest(|i| i != node).is_some();
        let q = &mut self.queues[choice.queue];
        for _ in 0..choice.count {
            if let Some(w) = q.pop_front() {
                out.push(w.slot);
                self.len -= 1;
            }
        }
        // The streak counts only hand-offs that kept a remote waiter
        // waiting: with no one remote, staying local delays nobody.
        self.streak = if self.engaged() && choice.queue == node && remote_waiting {
            self.streak.saturating_add(1)
        } else {
            0
        };
        self.end_busy_period_if_empty();
    }

    /// A drained queue ends its busy period (see the module docs).
    fn end_busy_period_if_empty(&mut self) {
        if self.len == 0 {
            self.busy = 0;
            self.streak = 0;
        }
    }

    /// The first waiter of `choice` (made by `choose` on this very queue
    /// state), left in the queue.
    pub(crate) fn front(&self, choice: Choice) -> Option<&Arc<Slot>> {
        self.queues.get(choice.queue)?.front().map(|w| &w.slot)
    }

    /// Removes the waiter holding `slot` (a woken writer that took the
    /// lock itself), wherever it is.
    pub(crate) fn remove(&mut self, slot: &Arc<Slot>) {
        for q in &mut self.queues {
            if let Some(i) = q.iter().position(|w| Arc::ptr_eq(&w.slot, slot)) {
                q.remove(i);
                self.len -= 1;
                self.end_busy_period_if_empty();
                return;
            }
        }
    }

    /// Whether the policy can pick someone other than the oldest waiter:
    /// engaged, with waiters of more than one node queued. Only then does
    /// the `numa` kind need to enforce its pick by handing the lock over;
    /// otherwise its pick is FIFO's and it serves the queue as `rwsem`
    /// does. (On a one-node machine it never reorders.)
    pub(crate) fn can_reorder(&self) -> bool {
        self.engaged() && self.queues.iter().filter(|q| !q.is_empty()).count() > 1
    }

    /// Whether a writer waits at the front of a queue (with
    /// [`can_reorder`](WaitQueue::can_reorder), the `numa` kind then hands
    /// it the lock, and new readers must not slip past it).
    pub(crate) fn writer_waiting(&self) -> bool {
        self.queues
            .iter()
            .any(|q| q.front().is_some_and(|w| w.want == Want::Write))
    }

    /// Whether a queued writer has waited past the timeout: then nobody
    /// may slip past it (the semaphore's hand-off bit).
    pub(crate) fn handoff_waiting(&self) -> bool {
        self.queues
            .iter()
            .flatten()
            .any(|w| w.want == Want::Write && w.slot.wants_handoff())
    }
}
