//! When a sender wakes the writer thread: the doorbell, and the nap and deep sleep of the writer
//! between batches.

use crossbeam_channel::Receiver;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::SeqCst};
use std::sync::{Condvar, Mutex};

/// The writer's states, as senders see them.
const AWAKE: u8 = 0;
const NAP: u8 = 1;
const DEEP: u8 = 2;
/// How long the writer naps after work before it looks at the queue again. Short: a waiting
/// `stop()` does whatever is still queued itself (A/B on the PyTorch MLP: 100 µs gave 3–7%
/// shorter dumped steps than waking per message, 1 ms gave 5% longer ones; 30 µs left 0.7–1.0
/// records per L1 stop instead of 1.8–2.1, median stop 38–56 µs instead of 67–107, with no more
/// CPU time for the process). The nap's timer wakes only the writer's own core.
const NAP_TIME: std::time::Duration = std::time::Duration::from_micros(30);
/// Queued messages that wake a napping writer at once.
const WAKE_LEN: usize = 32;

/// Wakes the writer only when needed. Waking a thread costs the capturing thread a futex call
/// (and, on a VM, an inter-processor interrupt) per message when the writer sleeps between
/// records, which is most of the time. So while capture is busy the writer naps for
/// [`NAP_TIME`] after each batch and is rung only for what must not wait: stop, step end, a
/// flush, records with tensor files (their bytes count against the budget), or a long queue.
/// After a nap with nothing to do it sleeps until the next message rings.
pub(super) struct Doorbell {
    state: AtomicU8,
    /// Set by `Writer::shutdown` before its last ring: the writer must not sleep again.
    closed: AtomicBool,
    rung: Mutex<bool>,
    cv: Condvar,
}

impl Doorbell {
    pub(super) fn new() -> Doorbell {
        Doorbell {
            state: AtomicU8::new(AWAKE),
            closed: AtomicBool::new(false),
            rung: Mutex::new(false),
            cv: Condvar::new(),
        }
    }

    /// Writer side: naps (or sleeps, `deep`) until rung, unless `rx` already has messages.
    pub(super) fn sleep<T>(&self, deep: bool, rx: &Receiver<T>) {
        let mut rung = self.rung.lock().unwrap_or_else(|e| e.into_inner());
        *rung = false;
        self.state.store(if deep { DEEP } else { NAP }, SeqCst);
        // A sender pushes, then reads the state (SeqCst both): either it sees us asleep and
        // rings, or we see its message here.
        if rx.is_empty() && !self.closed.load(SeqCst) {
            rung = if deep {
                self.cv.wait_while(rung, |r| !*r).unwrap_or_else(|e| e.into_inner())
            } else {
                self.cv.wait_timeout_while(rung, NAP_TIME, |r| !*r).unwrap_or_else(|e| e.into_inner()).0
            };
        }
        *rung = false;
        self.state.store(AWAKE, SeqCst);
    }

    /// Sender side, after a send: rings when the writer must come now.
    pub(super) fn after_send(&self, urgent: bool, queued: usize) {
        let st = self.state.load(SeqCst);
        if st == DEEP || (st == NAP && (urgent || queued >= WAKE_LEN)) {
            self.ring();
        }
    }

    pub(super) fn ring(&self) {
        *self.rung.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cv.notify_one();
    }

    /// Whether the writer is working (neither napping nor asleep).
    pub(super) fn is_awake(&self) -> bool {
        self.state.load(SeqCst) == AWAKE
    }

    /// Rings for the last time (`Writer::shutdown`): the writer must not sleep again.
    pub(super) fn close(&self) {
        self.closed.store(true, SeqCst);
        self.ring();
    }
}
