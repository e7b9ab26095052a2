//! HCCL across processes on one machine, through a POSIX shared-memory segment.
//!
//! Layout: a header, one slot per rank (control words + a `CHUNK`-byte data buffer) for the
//! collectives, and one single-producer/single-consumer mailbox per ordered rank pair for Send/Recv.
//! A collective is a sequence of *steps*: every rank posts a chunk into its slot, waits until every
//! rank has posted, reads what it needs, and marks the step consumed. Waits spin-then-sleep, check
//! that peers are alive (`kill(pid, 0)`) and give up after `CANNSIM_HCCL_TIMEOUT_S`.
use crate::consts::*;
use crate::dtype::DType;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub const ROOT_INFO_BYTES: usize = 4108;
const MAGIC: &[u8; 16] = b"CANNSIM-HCCL-V1\0";
pub const CHUNK: usize = 1 << 20;
pub const P2P_CHUNK: usize = 256 << 10;
const HDR: usize = 4096;
const SLOT_CTRL: usize = 64;
const MAX_RANKS: usize = 64;

#[repr(C)]
struct SlotCtrl {
    pid: AtomicU32,
    joined: AtomicU32,
    posted: AtomicU64,
    consumed: AtomicU64,
    len: AtomicU64,
    more: AtomicU32,
    left: AtomicU32,
}

#[repr(C)]
struct Mbox {
    posted: AtomicU64,
    consumed: AtomicU64,
    len: AtomicU64,
}

pub struct Comm {
    pub rank: u32,
    pub nranks: u32,
    base: usize,
    size: usize,
    step: u64,
    p2p_sent: Vec<u64>,
    p2p_recv: Vec<u64>,
    pub name: String,
    pub async_error: i32,
}

// SAFETY: the shared mapping is only accessed through atomics and per-step protocol ownership.
unsafe impl Send for Comm {}

fn seg_size(n: usize) -> usize {
    HDR + n * (SLOT_CTRL + CHUNK) + n * n * (64 + P2P_CHUNK)
}

/// Root info blob: magic, shm name, nranks left to the init call.
pub fn make_root_info(buf: &mut [u8]) {
    static CNT: AtomicU32 = AtomicU32::new(0);
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let name =
        format!("/cannsim-hccl-{}-{}-{:x}", std::process::id(), CNT.fetch_add(1, Ordering::Relaxed), t & 0xffff_ffff);
    buf.fill(0);
    buf[..16].copy_from_slice(MAGIC);
    buf[16..16 + name.len()].copy_from_slice(name.as_bytes());
}

pub fn parse_root_info(buf: &[u8]) -> Option<String> {
    if &buf[..16] != MAGIC {
        return None;
    }
    let end = buf[16..].iter().position(|&b| b == 0)? + 16;
    String::from_utf8(buf[16..end].to_vec()).ok()
}

pub fn timeout() -> Duration {
    Duration::from_secs_f64(crate::env_num("CANNSIM_HCCL_TIMEOUT_S", 30.0f64))
}

/// Is the process alive? (A zombie, i.e. exited but not yet reaped, counts as dead.)
fn pid_alive(pid: u32) -> bool {
    if pid == 0 {
        return true;
    }
    // SAFETY: kill with signal 0 only checks for existence.
    let r = unsafe { libc::kill(pid as i32, 0) };
    if r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(st) => {
            !matches!(st.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next()), Some('Z') | Some('X'))
        }
        Err(_) => true,
    }
}

impl Comm {
    /// Join (creating if needed) the segment `name` as `rank` of `nranks`.
    pub fn join(name: &str, nranks: u32, rank: u32) -> Result<Comm, i32> {
        if nranks == 0 || nranks as usize > MAX_RANKS || rank >= nranks {
            return Err(crate::errmsg::fail(HCCL_E_PARA, format!("bad rank {rank} / nranks {nranks}")));
        }
        let size = seg_size(nranks as usize);
        let cname = std::ffi::CString::new(name).map_err(|_| HCCL_E_PARA)?;
        // SAFETY: valid C string; standard shm_open flags.
        let fd = unsafe { libc::shm_open(cname.as_ptr(), libc::O_CREAT | libc::O_RDWR, 0o600) };
        if fd < 0 {
            return Err(crate::errmsg::fail(
                HCCL_E_SYSCALL,
                format!("shm_open({name}) failed: {}", std::io::Error::last_os_error()),
            ));
        }
        // SAFETY: fd is valid; every rank truncates to the same size (idempotent).
        let ok = unsafe { libc::ftruncate(fd, size as libc::off_t) } == 0;
        let p = if ok {
            // SAFETY: mapping the shm fd with the size set above.
            unsafe {
                libc::mmap(std::ptr::null_mut(), size, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
            }
        } else {
            libc::MAP_FAILED
        };
        // SAFETY: closing our fd; the mapping stays valid.
        unsafe { libc::close(fd) };
        if p == libc::MAP_FAILED {
            return Err(crate::errmsg::fail(HCCL_E_SYSCALL, format!("mapping {name} failed")));
        }
        let mut c = Comm {
            rank,
            nranks,
            base: p as usize,
            size,
            step: 0,
            p2p_sent: vec![0; nranks as usize],
            p2p_recv: vec![0; nranks as usize],
            name: name.to_string(),
            async_error: 0,
        };
        let me = c.slot(rank as usize);
        if me.joined.swap(1, Ordering::AcqRel) != 0
            && pid_alive(me.pid.load(Ordering::Acquire))
            && me.pid.load(Ordering::Acquire) != std::process::id()
        {
            return Err(crate::errmsg::fail(HCCL_E_PARA, format!("rank {rank} already joined communicator {name}")));
        }
        me.pid.store(std::process::id(), Ordering::Release);
        let deadline = Instant::now() + timeout();
        for r in 0..nranks as usize {
            let mut spins = 0u32;
            while c.slot(r).joined.load(Ordering::Acquire) == 0 {
                if Instant::now() > deadline {
                    return Err(crate::errmsg::fail(
                        HCCL_E_TIMEOUT,
                        format!("HcclCommInit: rank {r} did not join communicator {name} within {:?}", timeout()),
                    ));
                }
                backoff(&mut spins);
            }
        }
        // All ranks have the segment mapped: remove the name.
        if rank == 0 {
            // SAFETY: unlinking a name we created; mappings stay valid.
            unsafe { libc::shm_unlink(cname.as_ptr()) };
        }
        c.step = 0;
        Ok(c)
    }

    fn slot(&self, r: usize) -> &SlotCtrl {
        // SAFETY: r < nranks (callers), the control block lies inside the mapping and is only used via atomics.
        unsafe { &*((self.base + HDR + r * (SLOT_CTRL + CHUNK)) as *const SlotCtrl) }
    }
    fn slot_data(&self, r: usize) -> usize {
        self.base + HDR + r * (SLOT_CTRL + CHUNK) + SLOT_CTRL
    }
    fn mbox(&self, src: usize, dst: usize) -> (&Mbox, usize) {
        let n = self.nranks as usize;
        let off = HDR + n * (SLOT_CTRL + CHUNK) + (src * n + dst) * (64 + P2P_CHUNK);
        // SAFETY: inside the mapping; accessed via atomics only.
        (unsafe { &*((self.base + off) as *const Mbox) }, self.base + off + 64)
    }

    fn wait(&self, what: &str, peer: usize, cond: impl Fn() -> bool) -> Result<(), i32> {
        let deadline = Instant::now() + timeout();
        let mut spins = 0u32;
        while !cond() {
            let pid = self.slot(peer).pid.load(Ordering::Acquire);
            let check = spins >= 1000 && spins & 15 == 0;
            if check && (!pid_alive(pid) || self.slot(peer).left.load(Ordering::Acquire) != 0) {
                let m = format!("cannsim HCCL: {what}: peer rank {peer} (pid {pid}) of communicator {} has died or left (rank {} waiting)", self.name, self.rank);
                eprintln!("[cannsim] {m}");
                return Err(crate::errmsg::fail(HCCL_E_REMOTE, m));
            }
            if Instant::now() > deadline {
                let m = format!("cannsim HCCL: {what}: timed out after {:?} waiting for rank {peer} (pid {pid}) of communicator {} (rank {} waiting)", timeout(), self.name, self.rank);
                eprintln!("[cannsim] {m}");
                return Err(crate::errmsg::fail(HCCL_E_TIMEOUT, m));
            }
            backoff(&mut spins);
        }
        Ok(())
    }

    /// One collective step: post `data` (with `more` flag), then call `read` with every rank's
    /// (data, more) once all have posted. Returns whether any rank had more.
    fn step(&mut self, what: &str, data: &[u8], more: bool, mut read: impl FnMut(usize, &[u8])) -> Result<bool, i32> {
        assert!(data.len() <= CHUNK);
        let n = self.nranks as usize;
        let s = self.step + 1;
        // Our buffer is free once every rank consumed the previous step.
        for r in 0..n {
            self.wait(what, r, || self.slot(r).consumed.load(Ordering::Acquire) >= s - 1)?;
        }
        let me = self.slot(self.rank as usize);
        // SAFETY: our own slot buffer, CHUNK bytes, not read by peers until `posted` is published.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.slot_data(self.rank as usize) as *mut u8, data.len())
        };
        me.len.store(data.len() as u64, Ordering::Relaxed);
        me.more.store(more as u32, Ordering::Relaxed);
        me.posted.store(s, Ordering::Release);
        let mut any_more = false;
        for r in 0..n {
            self.wait(what, r, || self.slot(r).posted.load(Ordering::Acquire) >= s)?;
            let len = self.slot(r).len.load(Ordering::Relaxed) as usize;
            any_more |= self.slot(r).more.load(Ordering::Relaxed) != 0;
            // SAFETY: rank r published `len` bytes for step s and will not overwrite them before we consume.
            let buf = unsafe { std::slice::from_raw_parts(self.slot_data(r) as *const u8, len.min(CHUNK)) };
            read(r, buf);
        }
        me.consumed.store(s, Ordering::Release);
        self.step = s;
        Ok(any_more)
    }

    /// Check that every rank is running the same collective (`what`) with the same `value`
    /// (e.g. the byte count). All ranks see the same posts, so they fail (or succeed) together.
    pub fn agree(&mut self, what: &str, value: u64) -> Result<(), i32> {
        let mut post = [0u8; 16];
        post[..8].copy_from_slice(&(crc32fast::hash(what.as_bytes()) as u64).to_le_bytes());
        post[8..].copy_from_slice(&value.to_le_bytes());
        let mut seen = Vec::new();
        self.step(what, &post, false, |r, b| seen.push((r, b.to_vec())))?;
        if let Some((r, b)) = seen.iter().find(|(_, b)| b.as_slice() != post) {
            let v = if b.len() == 16 { u64::from_le_bytes(b[8..].try_into().unwrap()) } else { 0 };
            let same_op = b.len() == 16 && b[..8] == post[..8];
            let m = format!(
                "cannsim HCCL: {what}: rank {} and rank {r} disagree ({}; {} vs {})",
                self.rank,
                if same_op { "different sizes" } else { "different collectives" },
                value,
                v
            );
            eprintln!("[cannsim] {m}");
            return Err(crate::errmsg::fail(HCCL_E_PARA, m));
        }
        Ok(())
    }

    pub fn barrier(&mut self) -> Result<(), i32> {
        self.step("HcclBarrier", &[], false, |_, _| {}).map(|_| ())
    }

    /// Exchange variable-length byte streams: rank r contributes `mine`; `sink(r, offset, bytes)` is
    /// called for every piece of every rank's stream.
    pub fn exchange(&mut self, what: &str, mine: &[u8], mut sink: impl FnMut(usize, usize, &[u8])) -> Result<(), i32> {
        let mut off = 0usize;
        let mut offs = vec![0usize; self.nranks as usize];
        loop {
            let end = (off + CHUNK).min(mine.len());
            let more = end < mine.len();
            let any = self.step(what, &mine[off..end], more, |r, b| {
                sink(r, offs[r], b);
                offs[r] += b.len();
            })?;
            off = end;
            if !any {
                return Ok(());
            }
        }
    }

    pub fn send(&mut self, data: &[u8], dst: usize) -> Result<(), i32> {
        let me = self.rank as usize;
        let mut off = 0;
        loop {
            let (mb, buf) = self.mbox(me, dst);
            let seq = self.p2p_sent[dst];
            self.wait("HcclSend", dst, || mb.consumed.load(Ordering::Acquire) >= seq)?;
            let end = (off + P2P_CHUNK).min(data.len());
            // SAFETY: the mailbox buffer is ours until we publish `posted`.
            unsafe { std::ptr::copy_nonoverlapping(data[off..end].as_ptr(), buf as *mut u8, end - off) };
            mb.len.store((end - off) as u64, Ordering::Relaxed);
            mb.posted.store(seq + 1, Ordering::Release);
            self.p2p_sent[dst] = seq + 1;
            off = end;
            if off >= data.len() {
                return Ok(());
            }
        }
    }

    pub fn recv(&mut self, out: &mut [u8], src: usize) -> Result<(), i32> {
        let me = self.rank as usize;
        let mut off = 0;
        loop {
            let (mb, buf) = self.mbox(src, me);
            let seq = self.p2p_recv[src];
            self.wait("HcclRecv", src, || mb.posted.load(Ordering::Acquire) > seq)?;
            let len = (mb.len.load(Ordering::Relaxed) as usize).min(out.len() - off);
            // SAFETY: the sender published `len` bytes and waits for `consumed` before reuse.
            unsafe { std::ptr::copy_nonoverlapping(buf as *const u8, out[off..].as_mut_ptr(), len) };
            mb.consumed.store(seq + 1, Ordering::Release);
            self.p2p_recv[src] = seq + 1;
            off += len;
            if off >= out.len() {
                return Ok(());
            }
        }
    }
}

impl Drop for Comm {
    fn drop(&mut self) {
        self.slot(self.rank as usize).left.store(1, Ordering::Release);
        // SAFETY: unmapping our own mapping of the segment.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.size) };
    }
}

fn backoff(spins: &mut u32) {
    *spins += 1;
    if *spins < 100 {
        std::hint::spin_loop();
    } else if *spins < 1000 {
        std::thread::yield_now();
    } else {
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Element-wise reduction of `src` into `acc` (both little-endian `dt` elements).
pub fn reduce_into(acc: &mut [u8], src: &[u8], dt: DType, op: i32) -> Result<(), i32> {
    let es = dt.size();
    for i in 0..acc.len() / es {
        let (a, b) = (&acc[i * es..(i + 1) * es], &src[i * es..(i + 1) * es]);
        if dt.is_float() {
            let (x, y) = (dt.get(a), dt.get(b));
            let r = match op {
                0 => x + y,
                1 => x * y,
                2 => x.max(y),
                3 => x.min(y),
                _ => return Err(HCCL_E_PARA),
            };
            dt.put(&mut acc[i * es..(i + 1) * es], r);
        } else {
            let (x, y) = (dt.get_i64(a), dt.get_i64(b));
            let r = match op {
                0 => x.wrapping_add(y),
                1 => x.wrapping_mul(y),
                2 => x.max(y),
                3 => x.min(y),
                _ => return Err(HCCL_E_PARA),
            };
            let le = r.to_le_bytes();
            acc[i * es..(i + 1) * es].copy_from_slice(&le[..es]);
        }
    }
    Ok(())
}

#[cfg(test)]
mod t {
    use super::*;
    #[test]
    fn root_info_and_single_rank() {
        let mut b = vec![0u8; ROOT_INFO_BYTES];
        make_root_info(&mut b);
        let name = parse_root_info(&b).unwrap();
        let mut c = Comm::join(&name, 1, 0).unwrap();
        let mut got = Vec::new();
        c.exchange("t", &vec![7u8; CHUNK + 10], |_, off, d| got.push((off, d.len()))).unwrap();
        assert_eq!(got, vec![(0, CHUNK), (CHUNK, 10)]);
        c.barrier().unwrap();
        let mut acc = 1f32.to_le_bytes().to_vec();
        reduce_into(&mut acc, &2f32.to_le_bytes(), DType::F32, 0).unwrap();
        assert_eq!(acc, 3f32.to_le_bytes());
    }
}
