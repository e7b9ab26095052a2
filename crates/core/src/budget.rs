//! The byte budget between capture and the writer: a cap on tensor bytes queued for the writer
//! thread, which either blocks the capturing thread or drops (and counts) data when reached.
//!
//! Capture paths reserve a tensor file's bytes while building its record (through the record's
//! `ByteBudget`, which the recorder implements with this); the writer releases them once the
//! file is on disk, and a record dropped on the way gives them back itself. The budget also
//! pools the written buffers, so encoding the next tensor file reuses memory instead of
//! faulting in fresh pages.

use std::sync::{Condvar, Mutex};

/// Cap on tensor bytes queued for the writer, plus a pool of written buffers handed back to
/// capturing threads: reusing them avoids page-faulting fresh memory for every tensor file.
pub struct Budget {
    cap: u64,
    drop_when_full: bool,
    used: Mutex<Usage>,
    freed: Condvar,
    pool: Mutex<Vec<Vec<u8>>>,
}

#[derive(Default)]
struct Usage {
    bytes: u64,
    /// Threads blocked in `reserve`: a release wakes them (a system call) only when there are.
    waiting: u32,
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
            pool: Mutex::new(Vec::new()),
        }
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

    /// Reserves `n` bytes; blocks (or refuses, in drop mode) while the cap is reached. A single
    /// reservation larger than the cap is admitted when nothing else is in flight.
    pub fn reserve(&self, n: u64) -> bool {
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if used.bytes == 0 || used.bytes + n <= self.cap {
                used.bytes += n;
                return true;
            }
            if self.drop_when_full {
                return false;
            }
            used.waiting += 1;
            used = self.freed.wait(used).unwrap_or_else(|e| e.into_inner());
            used.waiting -= 1;
        }
    }

    pub fn release(&self, n: u64) {
        if n == 0 {
            return;
        }
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        used.bytes = used.bytes.saturating_sub(n);
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
}
