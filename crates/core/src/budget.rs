//! The byte budget between capture and the writer: a cap on tensor bytes queued for the writer
//! thread, which either blocks the capturing thread or drops (and counts) data when reached.
//!
//! A record reserves the bytes of all its tensor files at once, when it ends and is handed to
//! the writer (all or nothing); a record being built holds no budget, so nothing that waits can
//! hold bytes another waiter needs. The writer releases them once the files are on disk. In block
//! mode a reservation that does not fit waits its turn: waiters are admitted in arrival order
//! (new reservations queue behind them), each as soon as it fits, and one larger than the cap as
//! soon as nothing else is in flight. Every byte in flight belongs to a record already handed to
//! the writer, which writes it without waiting for any capturing thread, so every wait ends. In
//! drop mode a reservation that does not fit (or, over the cap, finds anything in flight) is
//! refused. The budget also pools the written buffers, so encoding the next tensor file reuses
//! memory instead of faulting in fresh pages.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Condvar, Mutex};

/// Cap on tensor bytes queued for the writer, plus a pool of written buffers handed back to
/// capturing threads: reusing them avoids page-faulting fresh memory for every tensor file.
pub struct Budget {
    cap: u64,
    drop_when_full: bool,
    used: Mutex<Usage>,
    freed: Condvar,
    /// `Usage::bytes`, readable without the lock (a hint for [`Budget::would_admit`]).
    level: AtomicU64,
    pool: Mutex<Vec<Vec<u8>>>,
}

#[derive(Default)]
struct Usage {
    bytes: u64,
    /// Threads blocked in `reserve`: a release wakes them (a system call) only when there are.
    waiting: u32,
    /// Turns handed out to waiting reservations, and the turn admitted next (first come, first
    /// served, so a reservation larger than the cap is not starved by a stream of small ones).
    next_turn: u64,
    serving: u64,
}

impl Usage {
    fn fits(&self, n: u64, cap: u64) -> bool {
        self.bytes == 0 || self.bytes.saturating_add(n) <= cap
    }
}

/// Bytes of idle buffers the pool keeps.
const POOL_BYTES: usize = 128 << 20;

impl Budget {
    pub fn new(cap: u64, drop_when_full: bool) -> Budget {
        Budget {
            cap,
            drop_when_full,
            used: Mutex::new(Usage::default()),
            freed: Condvar::new(),
            level: AtomicU64::new(0),
            pool: Mutex::new(Vec::new()),
        }
    }

    /// Whether data is dropped (rather than waited for) when the cap is reached.
    pub fn drops(&self) -> bool {
        self.drop_when_full
    }

    /// A buffer with at least `n` bytes of capacity when the pool has one.
    pub fn take_buffer(&self, n: usize) -> Vec<u8> {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        match pool.iter().position(|b| b.capacity() >= n) {
            Some(i) => pool.swap_remove(i),
            None => Vec::new(),
        }
    }

    /// Returns a written buffer to the pool (dropped when the pool is full).
    pub fn give_buffer(&self, mut b: Vec<u8>) {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        let held: usize = pool.iter().map(Vec::capacity).sum();
        if held + b.capacity() <= POOL_BYTES {
            b.clear();
            pool.push(b);
        }
    }

    /// Reserves `n` bytes, a whole record's tensor files. In drop mode, refuses (`false`) what
    /// does not fit now. In block mode, waits its turn until it fits, or until nothing else is
    /// in flight when `n` is larger than the cap, and always returns `true`. Callers must hold
    /// no reservation while calling (a record reserves once, when it ends).
    pub fn reserve(&self, n: u64) -> bool {
        if n == 0 {
            return true;
        }
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        if used.waiting == 0 && used.fits(n, self.cap) {
            used.bytes += n;
            self.level.store(used.bytes, Relaxed);
            return true;
        }
        if self.drop_when_full {
            return false;
        }
        let turn = used.next_turn;
        used.next_turn += 1;
        used.waiting += 1;
        while used.serving != turn || !used.fits(n, self.cap) {
            used = self.freed.wait(used).unwrap_or_else(|e| e.into_inner());
        }
        used.serving += 1;
        used.waiting -= 1;
        used.bytes += n;
        self.level.store(used.bytes, Relaxed);
        if used.waiting > 0 {
            // The next in line may fit too.
            self.freed.notify_all();
        }
        true
    }

    /// Whether a reservation of `n` bytes would be admitted now in drop mode (always true in
    /// block mode). A hint read without the lock, so a record sure to lose its files in drop
    /// mode stops encoding them; the reservation itself decides.
    pub fn would_admit(&self, n: u64) -> bool {
        if !self.drop_when_full {
            return true;
        }
        let level = self.level.load(Relaxed);
        level == 0 || level.saturating_add(n) <= self.cap
    }

    pub fn release(&self, n: u64) {
        if n == 0 {
            return;
        }
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        used.bytes = used.bytes.saturating_sub(n);
        self.level.store(used.bytes, Relaxed);
        if used.waiting > 0 {
            self.freed.notify_all();
        }
    }

    pub fn in_flight(&self) -> u64 {
        self.used.lock().unwrap_or_else(|e| e.into_inner()).bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// Drop mode refuses what does not fit. In block mode a reservation that does not fit waits
    /// inside `reserve` (seen from its count of waiting threads, taken under the budget's lock,
    /// while its answer has not come) until a release makes room, and is then admitted.
    /// Timeouts only turn a hang into a failure.
    #[test]
    fn budget_blocks_or_drops() {
        let b = Budget::new(100, true);
        assert!(b.reserve(500), "an oversize reservation passes when idle");
        assert!(!b.reserve(1), "drop mode refuses while full");
        b.release(500);
        assert!(b.reserve(60));
        assert!(!b.reserve(60));
        let b = Arc::new(Budget::new(100, false));
        assert!(b.reserve(80));
        let (tx, rx) = std::sync::mpsc::channel();
        let b2 = b.clone();
        let t = std::thread::spawn(move || tx.send(b2.reserve(80)).unwrap());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(got) = rx.try_recv() {
                panic!("reserve returned {got} while the budget was full");
            }
            if b.used.lock().unwrap().waiting == 1 {
                break;
            }
            assert!(Instant::now() < deadline, "reserve never waited for room");
            std::thread::sleep(Duration::from_millis(1));
        }
        // Blocked in `reserve`: nothing is admitted and no answer can come until a release.
        assert_eq!(b.in_flight(), 80, "a waiting reservation holds no bytes");
        assert!(rx.try_recv().is_err(), "reserve returned while the budget was full");
        b.release(80);
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(10)),
            Ok(true),
            "the release did not admit the waiting reservation"
        );
        t.join().unwrap();
        assert_eq!(b.in_flight(), 80);
        assert_eq!(b.used.lock().unwrap().waiting, 0);
    }

    /// Waits `limit` for `cond` on the budget's state (a timeout only turns a hang into a failure).
    fn wait_until(b: &Budget, what: &str, cond: impl Fn(&Usage) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !cond(&b.used.lock().unwrap()) {
            assert!(Instant::now() < deadline, "{what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Block mode admits waiters in arrival order: a reservation larger than the cap waits until
    /// nothing is in flight, and a small one arriving after it waits behind it even though it
    /// would fit (otherwise a stream of small records could keep the big one out forever). The
    /// drop-mode hint follows what is in flight.
    #[test]
    fn block_mode_admits_in_turn_and_over_the_cap_alone() {
        let b = Arc::new(Budget::new(100, false));
        assert!(b.reserve(80));
        let (tx, rx) = std::sync::mpsc::channel();
        let spawn = |n: u64, tag: &'static str| {
            let (b, tx) = (b.clone(), tx.clone());
            std::thread::spawn(move || {
                assert!(b.reserve(n));
                tx.send(tag).unwrap();
            })
        };
        let big = spawn(500, "big");
        wait_until(&b, "the big reservation never waited", |u| u.waiting == 1);
        let small = spawn(10, "small");
        wait_until(&b, "the small reservation did not queue behind the big one", |u| u.waiting == 2);
        assert!(rx.try_recv().is_err(), "admitted while the budget was held");
        b.release(80);
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok("big"), "the big one goes first, alone");
        big.join().unwrap();
        assert_eq!(b.in_flight(), 500);
        assert!(rx.recv_timeout(Duration::from_millis(50)).is_err(), "the small one went in beside the big one");
        b.release(500);
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok("small"));
        small.join().unwrap();
        assert_eq!(b.in_flight(), 10);
        assert!(b.would_admit(1 << 40), "block mode never predicts a drop");
        let d = Budget::new(100, true);
        assert!(d.would_admit(500) && d.reserve(50));
        assert!(d.would_admit(50) && !d.would_admit(51) && !d.reserve(51));
        d.release(50);
        assert!(d.would_admit(500));
    }
}
