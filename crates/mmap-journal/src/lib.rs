//! The crash journal in a shared file mapping ([`MmapSink`], a [`Sink`] of `msprobe-core`):
//! a capturing thread appends its record's entries with two atomic operations and a copy into
//! the mapping, no system call, and the entries are then in the file's page cache, where the
//! death of the process (any signal, SIGKILL included) cannot take them. Only a machine crash
//! can: `MSPROBE_JOURNAL_SYNC=step` writes the journal to disk at each step end and stop
//! (`fdatasync`, on the writer thread), `=record` after every record (`msync`, on the capturing
//! thread: a system call per record).
//!
//! How it works:
//! - one mapping of up to 1 TiB of address space (less if the process may not have that much;
//!   pages cost only when touched), over the journal file;
//! - appenders reserve their bytes with one `fetch_add` on a word holding the next offset and
//!   the number of appends in progress, copy, and count themselves out;
//! - the file is allocated ahead of the appends (`fallocate`) by whichever appender first needs
//!   more (under a lock; the occasional system call), so a store into the mapping never needs a
//!   block the file system does not have (which would be a SIGBUS). A file system that cannot
//!   `fallocate` gets the plain-file journal instead. When the disk is full the journal stops
//!   (the records are counted as not journaled) and capture goes on;
//! - the writer thread gives back what closed directories no longer need (`FALLOC_FL_PUNCH_HOLE`,
//!   recording how far in the header's release mark, which `msprobe recover` starts reading at),
//!   and starts over from the header when nothing is needed and no append is in progress.
//!
//! This crate holds all the unsafe code of the journal; the core sees it only through the safe
//! `Sink` trait.

use msprobe_core::journal::{self, Appended, FileSink, Identity, Sink};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex};

/// Largest mapping tried (address space only).
const MAX_MAP: u64 = 1 << 40;
/// Smallest mapping accepted.
const MIN_MAP: u64 = 64 << 20;
/// The file is allocated ahead of the appends by at least this.
const GROW_MIN: u64 = 4 << 20;
/// The writer thread keeps this much of the file allocated and mapped ahead of the appends.
const AHEAD: u64 = 4 << 20;
/// Space is given back in steps of at least this.
const PUNCH_MIN: u64 = 1 << 20;

/// The kernel's page size, read once. msync and madvise take page-aligned addresses (EINVAL
/// otherwise: a record-synced journal would silently not be synced), and aarch64 kernels run
/// with 4, 16 or 64 KiB pages (64 KiB on RHEL-family aarch64 builds), so it is not assumed.
fn page() -> u64 {
    static PAGE: AtomicU64 = AtomicU64::new(0);
    let p = PAGE.load(Relaxed);
    if p != 0 {
        return p;
    }
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let p = if n > 0 { n as u64 } else { 4096 };
    PAGE.store(p, Relaxed);
    p
}
/// The reservation word: appends in progress above this bit, the next offset below.
const INFLIGHT_SHIFT: u32 = 48;
const ONE_INFLIGHT: u64 = 1 << INFLIGHT_SHIFT;
const OFFSET_MASK: u64 = ONE_INFLIGHT - 1;

/// When the journal is written to disk (against a machine crash).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncPolicy {
    /// Never by us (the kernel writes the page cache back within about 30 s).
    None,
    /// `fdatasync` when a step's files are written (step end, a waiting stop, exit).
    Step,
    /// `msync` of each record's bytes before its hooked call returns.
    Record,
}

impl SyncPolicy {
    /// `MSPROBE_JOURNAL_SYNC`: `none` (default), `step` or `record`.
    pub fn from_env() -> SyncPolicy {
        match std::env::var("MSPROBE_JOURNAL_SYNC").ok().as_deref().map(str::trim) {
            None | Some("") | Some("none") => SyncPolicy::None,
            Some("step") => SyncPolicy::Step,
            Some("record") => SyncPolicy::Record,
            Some(other) => {
                log::warn!("MSPROBE_JOURNAL_SYNC={other:?} is not one of none, step, record; using none");
                SyncPolicy::None
            }
        }
    }
}

/// A journal in a shared file mapping (see the crate docs).
pub struct MmapSink {
    path: PathBuf,
    file: File,
    /// Length of the header block: the first entry's offset.
    base: u64,
    /// The mapping: `cap` bytes from `map`, over the file from offset 0.
    map: *mut u8,
    cap: u64,
    /// (appends in progress << 48) | offset of the next append.
    word: AtomicU64,
    /// Bytes `[0, allocated)` of the file have their blocks: stores there cannot fault.
    allocated: AtomicU64,
    /// Pages before this are in the page tables, writable (`prepare`): stores there take no
    /// page fault. Writer thread only.
    populated: AtomicU64,
    /// Held while the file is allocated further, or the journal starts over.
    grow: Mutex<()>,
    /// No more appends (the disk is full, or the mapping is used up).
    broken: AtomicBool,
    /// The OS error of the allocation that failed (0: none).
    errno: std::sync::atomic::AtomicI32,
    /// The file's blocks before this were given back (a page boundary; writer thread only).
    released: AtomicU64,
    sync: SyncPolicy,
}

// SAFETY: `map` is a shared mapping owned by the sink for its whole life (unmapped in Drop);
// threads write only into the disjoint byte ranges they reserved through `word`, and the writer
// thread gives back (punches) only ranges no append can still be writing (see `release`).
unsafe impl Send for MmapSink {}
// SAFETY: as above; every other field is atomic or behind a mutex.
unsafe impl Sync for MmapSink {}

fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
}

impl MmapSink {
    /// Creates this process's journal in `root` as a shared mapping; a file system that cannot
    /// allocate files ahead (`fallocate`) gets the plain-file journal instead.
    pub fn open(root: &Path, identity: &Identity) -> std::io::Result<Arc<dyn Sink>> {
        let (file, path, base) = journal::create_file(root, identity)?;
        match MmapSink::map(file, path.clone(), base, SyncPolicy::from_env()) {
            Ok(s) => Ok(Arc::new(s)),
            Err((file, e)) => {
                log::debug!("the journal {} cannot be mapped ({e}); it is written with write(2)", path.display());
                Ok(Arc::new(FileSink::from_file(file, path, base)))
            }
        }
    }

    fn map(file: File, path: PathBuf, base: u64, sync: SyncPolicy) -> Result<MmapSink, (File, std::io::Error)> {
        let fd = file.as_raw_fd();
        let first = base + GROW_MIN;
        // SAFETY: fallocate on a file descriptor we own; no memory is passed.
        if unsafe { libc::fallocate(fd, 0, 0, first as libc::off_t) } != 0 {
            return Err((file, errno()));
        }
        let mut cap = MAX_MAP;
        let map = loop {
            // SAFETY: a new shared mapping of our own file; no existing memory is affected.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    cap as usize,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED | libc::MAP_NORESERVE,
                    fd,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                break p.cast::<u8>();
            }
            let e = errno();
            if cap <= MIN_MAP {
                return Err((file, e));
            }
            cap /= 2;
        };
        Ok(MmapSink {
            path,
            file,
            base,
            map,
            cap,
            word: AtomicU64::new(base),
            allocated: AtomicU64::new(first),
            populated: AtomicU64::new(0),
            grow: Mutex::new(()),
            broken: AtomicBool::new(false),
            errno: std::sync::atomic::AtomicI32::new(0),
            released: AtomicU64::new(base),
            sync,
        })
    }

    /// Allocates the file up to at least `end`; false when it cannot be (the disk is full).
    #[cold]
    fn grow_to(&self, end: u64) -> bool {
        let _g = self.grow.lock().unwrap_or_else(|e| e.into_inner());
        let cur = self.allocated.load(Acquire);
        if end <= cur {
            return true;
        }
        // A fixed step: offsets only grow (space below is given back), so a step proportional
        // to them would allocate ever more ahead of what is live.
        let new = (end + GROW_MIN).next_multiple_of(1 << 20).min(self.cap);
        // SAFETY: fallocate on our own descriptor; no memory is passed.
        let rc = unsafe { libc::fallocate(self.file.as_raw_fd(), 0, cur as libc::off_t, (new - cur) as libc::off_t) };
        if rc != 0 {
            // Said once, by the recorder (as the dump path's storage failure when it is one).
            let e = errno();
            log::debug!("the crash journal {} cannot grow ({e})", self.path.display());
            self.errno.store(e.raw_os_error().unwrap_or(0), Relaxed);
            return false;
        }
        self.allocated.store(new, Release);
        true
    }

    /// Gives back the file's blocks of `[from, to)` (they read as zeros after).
    fn punch(&self, from: u64, to: u64) {
        if to > from {
            let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
            // SAFETY: fallocate on our own descriptor; no memory is passed. The range holds
            // only entries no append is writing (see `release`).
            unsafe { libc::fallocate(self.file.as_raw_fd(), mode, from as libc::off_t, (to - from) as libc::off_t) };
        }
    }

    /// Sets the header's release mark (one aligned 8-byte store: a kill cannot tear it).
    fn set_mark(&self, low: u64) {
        // SAFETY: `base - 8` is 8-aligned (base is a multiple of 4096), inside the mapping and
        // the allocated file (the header block); only the writer thread stores there, and
        // through this atomic view only.
        let mark = unsafe { AtomicU64::from_ptr(self.map.add((self.base - journal::LOW_LEN as u64) as usize).cast()) };
        mark.store(low.to_le(), Release);
    }
}

impl Sink for MmapSink {
    fn append(&self, bytes: &[u8]) -> Appended {
        let len = bytes.len() as u64;
        let w = self.word.fetch_add(len + ONE_INFLIGHT, AcqRel);
        let start = w & OFFSET_MASK;
        let end = start + len;
        let ok =
            !self.broken.load(Relaxed) && end <= self.cap && (end <= self.allocated.load(Acquire) || self.grow_to(end));
        if ok {
            // SAFETY: `[start, end)` lies inside the mapping (end <= cap) and the allocated file
            // (end <= allocated), and was reserved for this call alone by the fetch_add above:
            // no other thread writes there, and the writer thread does not give it back before
            // this append is counted out and reported to it.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.map.add(start as usize), bytes.len()) };
            if self.sync == SyncPolicy::Record {
                let from = start / page() * page();
                // SAFETY: msync of pages inside our mapping.
                unsafe { libc::msync(self.map.add(from as usize).cast(), (end - from) as usize, libc::MS_SYNC) };
            }
        } else if !self.broken.swap(true, Relaxed) && end > self.cap {
            log::warn!("the crash journal {} is full; records from now on are not journaled", self.path.display());
        }
        self.word.fetch_sub(ONE_INFLIGHT, Release);
        Appended { start, end, ok }
    }

    fn base(&self) -> u64 {
        self.base
    }

    fn release(&self, low: u64) -> bool {
        let w = self.word.load(Acquire);
        let tail = w & OFFSET_MASK;
        let released = self.released.load(Relaxed);
        if low >= tail && w >> INFLIGHT_SHIFT == 0 && tail > self.base && !self.broken.load(Relaxed) {
            // Nothing is needed and no append is in progress: start over from the header. No
            // append can grow the file meanwhile (the lock); one that reserves after `w` makes
            // the exchange fail, and writes past `tail`, which is not given back.
            let _g = self.grow.lock().unwrap_or_else(|e| e.into_inner());
            self.punch(released, tail);
            let allocated = self.allocated.swap(self.base, AcqRel);
            // The mark first: entries appended after the exchange start at the header's end.
            self.set_mark(0);
            if self.word.compare_exchange(w, self.base, AcqRel, Acquire).is_ok() {
                self.released.store(self.base, Relaxed);
                self.populated.store(0, Relaxed);
                return true;
            }
            // Appends came: `[base, tail)` is given back and stays unused until a start over.
            self.allocated.store(allocated, Release);
            self.set_mark(tail);
            self.released.store(tail, Relaxed);
            return false;
        }
        // Whole pages are given back; readers start at `low` itself (an entry's start).
        let low = low.min(tail);
        let to = low / page() * page();
        if to >= released + PUNCH_MIN {
            self.set_mark(low);
            self.punch(released, to);
            self.released.store(to, Relaxed);
        }
        false
    }

    fn failure(&self) -> Option<std::io::Error> {
        let n = self.errno.load(Relaxed);
        (n != 0).then(|| std::io::Error::from_raw_os_error(n))
    }

    fn discard(&self) -> bool {
        let w = self.word.load(Acquire);
        let tail = w & OFFSET_MASK;
        if w >> INFLIGHT_SHIFT != 0 || tail <= self.base || self.broken.load(Relaxed) {
            // An append is being written: its bytes lie before `tail` and must not be punched.
            return false;
        }
        // Every entry before `tail` is complete. Should an append start meanwhile, `release`
        // gives back only whole pages before `tail`, which the append (past `tail`) never touches.
        self.release(tail);
        true
    }

    fn prepare(&self) {
        if self.broken.load(Relaxed) {
            return;
        }
        let tail = self.word.load(Acquire) & OFFSET_MASK;
        let page = page();
        let want = (tail + AHEAD).next_multiple_of(page).min(self.cap);
        if want > self.allocated.load(Acquire) && !self.grow_to(want) {
            return;
        }
        // A store into a page of the mapping not yet written costs two page faults (read, then
        // write); populating the pages ahead, writable, spares the capturing threads both.
        let from = self.populated.load(Relaxed).max(tail / page * page);
        if want > from {
            // SAFETY: madvise over pages inside our mapping, allocated in the file (want <=
            // allocated); it changes no memory contents. EINVAL on kernels before 5.14: the
            // appends then fault, as without it.
            unsafe {
                libc::madvise(self.map.add(from as usize).cast(), (want - from) as usize, libc::MADV_POPULATE_WRITE)
            };
            self.populated.store(want, Relaxed);
        }
    }

    fn checkpoint(&self) {
        if self.sync == SyncPolicy::Step {
            // SAFETY: fdatasync on our own descriptor.
            unsafe { libc::fdatasync(self.file.as_raw_fd()) };
        }
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn finish(&self, keep: bool) {
        if self.sync != SyncPolicy::None && keep {
            // SAFETY: fdatasync on our own descriptor.
            unsafe { libc::fdatasync(self.file.as_raw_fd()) };
        }
        if !keep {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Drop for MmapSink {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once; no reference into it outlives the
        // sink (appends copy in and return).
        unsafe { libc::munmap(self.map.cast(), self.cap as usize) };
    }
}

#[cfg(test)]
mod tests;
