//! The bookkeeping of the pinned host memory that the async copies land in (issue #21).
//!
//! Pinning host memory (`aclrtMallocHost`) is a driver call on a real device (page locking, a
//! device mapping): tens of µs, far more than the copy of a KiB tensor. So the copies never pin per
//! tensor: small buffers are carved from chunks pinned once and reused (first fit, freed ranges
//! coalesced), large ones get their own pinning and are kept for the next copy of the same size
//! (training repeats its shapes every step). Everything pinned, in use or kept, stays under the
//! `MSPROBE_QUEUE_MB` cap; kept large buffers and wholly free chunks are unpinned to make room.
//!
//! This module only keeps the books; pinning and unpinning are the caller's closures, so the logic
//! is safe Rust and unit-tested without a device.
use std::collections::BTreeMap;

/// Largest chunk pinned at once.
const CHUNK_MAX: u64 = 4 << 20;
/// Buffers are rounded up to this many bytes.
pub(crate) const ROUND: u64 = 512;

struct Chunk {
    base: usize,
    size: u64,
    /// Free ranges: offset → length, never adjacent (coalesced).
    free: BTreeMap<u64, u64>,
    used: u64,
}

impl Chunk {
    fn take(&mut self, n: u64) -> Option<usize> {
        let (&off, &len) = self.free.iter().find(|(_, &len)| len >= n)?;
        self.free.remove(&off);
        if len > n {
            self.free.insert(off + n, len - n);
        }
        self.used += n;
        Some(self.base + off as usize)
    }

    fn put(&mut self, off: u64, n: u64) {
        let (mut start, mut len) = (off, n);
        if let Some((&o, &l)) = self.free.range(..off).next_back() {
            if o + l == off {
                self.free.remove(&o);
                start = o;
                len += l;
            }
        }
        if let Some(&l) = self.free.get(&(off + n)) {
            self.free.remove(&(off + n));
            len += l;
        }
        self.free.insert(start, len);
        self.used = self.used.saturating_sub(n);
    }
}

/// How a request was served.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Take {
    /// From memory already pinned.
    Reused(usize),
    /// After pinning more.
    Pinned(usize),
    /// Not now: everything the cap allows is in use.
    Full,
    /// Pinning failed.
    Failed,
}

pub(crate) struct Pool {
    chunks: Vec<Chunk>,
    /// Large buffers kept for reuse, by size.
    kept: BTreeMap<u64, Vec<usize>>,
    kept_bytes: u64,
    large_in_use: u64,
}

impl Pool {
    pub(crate) const fn new() -> Self {
        Pool { chunks: Vec::new(), kept: BTreeMap::new(), kept_bytes: 0, large_in_use: 0 }
    }

    /// Pinned bytes held: chunks, large buffers in use and kept.
    pub(crate) fn held(&self) -> u64 {
        self.chunks.iter().map(|c| c.size).sum::<u64>() + self.large_in_use + self.kept_bytes
    }

    /// Bytes in buffers handed out and not yet returned.
    pub(crate) fn in_use(&self) -> u64 {
        self.chunks.iter().map(|c| c.used).sum::<u64>() + self.large_in_use
    }

    /// The chunk size under `cap`: at most an eighth of it, so that fragmentation in a few chunks
    /// never blocks the cap.
    fn chunk_size(cap: u64) -> u64 {
        (cap / 8 / ROUND * ROUND).min(CHUNK_MAX)
    }

    /// A buffer of `n` bytes (a multiple of [`ROUND`]) under `cap`.
    pub(crate) fn take(
        &mut self,
        n: u64,
        cap: u64,
        pin: &mut dyn FnMut(u64) -> Option<usize>,
        unpin: &mut dyn FnMut(usize),
    ) -> Take {
        let chunk = Self::chunk_size(cap);
        let small = n <= chunk / 2;
        if small {
            if let Some(p) = self.chunks.iter_mut().find_map(|c| c.take(n)) {
                return Take::Reused(p);
            }
        } else if let Some(p) = self.kept.get_mut(&n).and_then(Vec::pop) {
            if self.kept.get(&n).is_some_and(Vec::is_empty) {
                self.kept.remove(&n);
            }
            self.kept_bytes -= n;
            self.large_in_use += n;
            return Take::Reused(p);
        }
        let need = if small { chunk } else { n };
        self.make_room(need, cap, unpin);
        if self.held() + need > cap {
            return Take::Full;
        }
        let Some(base) = pin(need) else { return Take::Failed };
        if small {
            // A new chunk holds any small buffer (n ≤ need / 2).
            let mut c = Chunk { base, size: need, free: BTreeMap::from([(0, need)]), used: 0 };
            let p = c.take(n);
            self.chunks.push(c);
            p.map_or(Take::Failed, Take::Pinned)
        } else {
            self.large_in_use += n;
            Take::Pinned(base)
        }
    }

    /// Unpins kept large buffers (largest first), then wholly free chunks, until `need` fits.
    fn make_room(&mut self, need: u64, cap: u64, unpin: &mut dyn FnMut(usize)) {
        while self.held() + need > cap {
            let Some(mut e) = self.kept.last_entry() else { break };
            let size = *e.key();
            if let Some(p) = e.get_mut().pop() {
                self.kept_bytes -= size;
                unpin(p);
            }
            if e.get().is_empty() {
                e.remove();
            }
        }
        while self.held() + need > cap {
            let Some(i) = self.chunks.iter().position(|c| c.used == 0) else { break };
            unpin(self.chunks.swap_remove(i).base);
        }
    }

    /// Returns a buffer handed out by [`Pool::take`] with the same `n`.
    pub(crate) fn put(&mut self, p: usize, n: u64) {
        if let Some(c) = self.chunks.iter_mut().find(|c| p >= c.base && p < c.base + c.size as usize) {
            c.put((p - c.base) as u64, n);
            return;
        }
        self.large_in_use = self.large_in_use.saturating_sub(n);
        self.kept_bytes += n;
        self.kept.entry(n).or_default().push(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fake pinning: addresses far apart, a log of what is pinned.
    struct Fake {
        next: usize,
        live: BTreeMap<usize, u64>,
        pins: u32,
    }

    impl Fake {
        fn take(&mut self, pool: &mut Pool, n: u64, cap: u64) -> Take {
            let live = std::cell::RefCell::new(std::mem::take(&mut self.live));
            let (mut next, mut pins) = (self.next, self.pins);
            let r = pool.take(
                n,
                cap,
                &mut |sz| {
                    let p = next;
                    next += 1 << 30;
                    pins += 1;
                    live.borrow_mut().insert(p, sz);
                    Some(p)
                },
                &mut |p| {
                    live.borrow_mut().remove(&p).expect("unpinned twice or never pinned");
                },
            );
            self.live = live.into_inner();
            (self.next, self.pins) = (next, pins);
            r
        }
    }

    fn addr(t: Take) -> usize {
        match t {
            Take::Reused(p) | Take::Pinned(p) => p,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn small_buffers_share_a_chunk_and_are_reused() {
        let (mut pool, mut f) = (Pool::new(), Fake { next: 1 << 30, live: BTreeMap::new(), pins: 0 });
        let cap = 64 << 20;
        let a = addr(f.take(&mut pool, 1024, cap));
        let b = addr(f.take(&mut pool, 2048, cap));
        assert_eq!(f.pins, 1);
        assert_eq!(b, a + 1024);
        pool.put(a, 1024);
        pool.put(b, 2048);
        assert_eq!(pool.in_use(), 0);
        // coalesced: one 3 KiB request fits where the two were
        assert_eq!(addr(f.take(&mut pool, 3072, cap)), a);
        assert_eq!(f.pins, 1);
        assert!(pool.held() <= cap);
    }

    #[test]
    fn the_cap_holds_and_room_is_made() {
        let (mut pool, mut f) = (Pool::new(), Fake { next: 1 << 30, live: BTreeMap::new(), pins: 0 });
        let cap = 1 << 20; // chunks of 128 KiB, large above 64 KiB
        let big = addr(f.take(&mut pool, 600 << 10, cap));
        assert_eq!(f.take(&mut pool, 600 << 10, cap), Take::Full);
        pool.put(big, 600 << 10);
        // kept, so the same size is served without pinning
        assert!(matches!(f.take(&mut pool, 600 << 10, cap), Take::Reused(p) if p == big));
        pool.put(big, 600 << 10);
        // another size evicts the kept one
        let other = addr(f.take(&mut pool, 700 << 10, cap));
        assert!(!f.live.contains_key(&big));
        pool.put(other, 700 << 10);
        let mut small = Vec::new();
        while let Take::Reused(p) | Take::Pinned(p) = f.take(&mut pool, 8192, cap) {
            small.push(p);
            assert!(pool.held() <= cap);
        }
        assert_eq!(small.len() as u64, cap / 8192, "the kept large buffer was unpinned for chunks");
        for p in small {
            pool.put(p, 8192);
        }
        // free chunks are unpinned for a large buffer
        addr(f.take(&mut pool, 900 << 10, cap));
        assert!(pool.held() <= cap);
        assert_eq!(f.live.values().sum::<u64>(), pool.held());
    }
}
