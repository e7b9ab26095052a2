//! HCCL (libhccl / libhcomm): communicators and collectives, ordered on streams.
use super::{cstr, guard, put, slice_to_vec};
use crate::consts::*;
use crate::dtype::DType;
use crate::errmsg::fail;
use crate::hccl::{self, Comm};
use crate::mem;
use crate::tensor::TView;
use crate::trace::{Arg, Role};
use std::collections::HashMap;
use std::os::raw::{c_char, c_void};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

type HcclResult = i32;
type H = *mut c_void;

struct CommH {
    comm: Mutex<Comm>,
    err: AtomicI32,
    rank: u32,
    nranks: u32,
    name: std::ffi::CString,
}

fn comms() -> &'static Mutex<HashMap<usize, Arc<CommH>>> {
    static C: OnceLock<Mutex<HashMap<usize, Arc<CommH>>>> = OnceLock::new();
    C.get_or_init(|| Mutex::new(HashMap::new()))
}

fn register(c: Comm, out: *mut H) -> HcclResult {
    let name = std::ffi::CString::new(c.name.trim_start_matches('/')).unwrap_or_default();
    let ch = Arc::new(CommH { rank: c.rank, nranks: c.nranks, comm: Mutex::new(c), err: AtomicI32::new(0), name });
    let h = Arc::as_ptr(&ch) as usize;
    comms().lock().unwrap().insert(h, ch);
    put(out, h as H);
    HCCL_SUCCESS
}

fn get(comm: H) -> Result<Arc<CommH>, i32> {
    if comm.is_null() {
        return Err(fail(HCCL_E_PTR, "comm is NULL"));
    }
    comms()
        .lock()
        .unwrap()
        .get(&(comm as usize))
        .cloned()
        .ok_or_else(|| fail(HCCL_E_PARA, format!("{comm:p} is not a live HcclComm")))
}

#[no_mangle]
pub extern "C" fn HcclGetRootInfo(root_info: *mut c_void) -> HcclResult {
    guard(HCCL_E_INTERNAL, || {
        if root_info.is_null() {
            return fail(HCCL_E_PTR, "rootInfo is NULL");
        }
        // SAFETY: HcclRootInfo is a 4108-byte struct owned by the caller.
        let b = unsafe { std::slice::from_raw_parts_mut(root_info as *mut u8, hccl::ROOT_INFO_BYTES) };
        hccl::make_root_info(b);
        HCCL_SUCCESS
    })
}

fn init_root(n_ranks: u32, root_info: *const c_void, rank: u32, comm: *mut H) -> HcclResult {
    if root_info.is_null() || comm.is_null() {
        return fail(HCCL_E_PTR, "rootInfo or comm is NULL");
    }
    let Some(b) = slice_to_vec(root_info as *const u8, hccl::ROOT_INFO_BYTES) else { return HCCL_E_PTR };
    let Some(name) = hccl::parse_root_info(&b) else {
        return fail(HCCL_E_PARA, "rootInfo was not produced by HcclGetRootInfo");
    };
    match Comm::join(&name, n_ranks, rank) {
        Ok(c) => register(c, comm),
        Err(e) => e,
    }
}

#[no_mangle]
pub extern "C" fn HcclCommInitRootInfo(n_ranks: u32, root_info: *const c_void, rank: u32, comm: *mut H) -> HcclResult {
    guard(HCCL_E_INTERNAL, || init_root(n_ranks, root_info, rank, comm))
}
#[no_mangle]
pub extern "C" fn HcclCommInitRootInfoConfig(
    n_ranks: u32,
    root_info: *const c_void,
    rank: u32,
    _config: *const c_void,
    comm: *mut H,
) -> HcclResult {
    guard(HCCL_E_INTERNAL, || init_root(n_ranks, root_info, rank, comm))
}

fn init_cluster(cluster_info: *const c_char, rank: u32, comm: *mut H) -> HcclResult {
    let Some(path) = cstr(cluster_info) else { return fail(HCCL_E_PTR, "clusterInfo is NULL") };
    if comm.is_null() {
        return fail(HCCL_E_PTR, "comm is NULL");
    }
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => return fail(HCCL_E_OPEN_FILE_FAILURE, format!("cannot read rank table {path}: {e}")),
    };
    let n = text.matches("\"rank_id\"").count() as u32;
    if n == 0 {
        return fail(HCCL_E_PARA, format!("rank table {path} lists no rank_id"));
    }
    let canon = std::fs::canonicalize(&path).map(|p| p.display().to_string()).unwrap_or(path);
    let name = format!("/cannsim-ct-{:08x}", crc32fast::hash(format!("{canon}\n{text}").as_bytes()));
    match Comm::join(&name, n, rank) {
        Ok(c) => register(c, comm),
        Err(e) => e,
    }
}
const HCCL_E_OPEN_FILE_FAILURE: i32 = 10;

#[no_mangle]
pub extern "C" fn HcclCommInitClusterInfo(cluster_info: *const c_char, rank: u32, comm: *mut H) -> HcclResult {
    guard(HCCL_E_INTERNAL, || init_cluster(cluster_info, rank, comm))
}
#[no_mangle]
pub extern "C" fn HcclCommInitClusterInfoConfig(
    cluster_info: *const c_char,
    rank: u32,
    _config: *mut c_void,
    comm: *mut H,
) -> HcclResult {
    guard(HCCL_E_INTERNAL, || init_cluster(cluster_info, rank, comm))
}

#[no_mangle]
pub extern "C" fn HcclGetRankId(comm: H, rank: *mut u32) -> HcclResult {
    guard(HCCL_E_INTERNAL, || match get(comm) {
        Ok(c) => {
            if put(rank, c.rank) {
                HCCL_SUCCESS
            } else {
                fail(HCCL_E_PTR, "rank is NULL")
            }
        }
        Err(e) => e,
    })
}
#[no_mangle]
pub extern "C" fn HcclGetRankSize(comm: H, size: *mut u32) -> HcclResult {
    guard(HCCL_E_INTERNAL, || match get(comm) {
        Ok(c) => {
            if put(size, c.nranks) {
                HCCL_SUCCESS
            } else {
                fail(HCCL_E_PTR, "rankSize is NULL")
            }
        }
        Err(e) => e,
    })
}
#[no_mangle]
pub extern "C" fn HcclGetCommName(comm: H, name: *mut c_char) -> HcclResult {
    guard(HCCL_E_INTERNAL, || {
        let c = match get(comm) {
            Ok(c) => c,
            Err(e) => return e,
        };
        if name.is_null() {
            return fail(HCCL_E_PTR, "commName is NULL");
        }
        let b = c.name.as_bytes_with_nul();
        let n = b.len().min(128);
        // SAFETY: the caller provides a buffer of COMM_NAME_MAX_LENGTH (128) bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(b.as_ptr(), name.cast::<u8>(), n);
            *name.add(n - 1) = 0;
        }
        HCCL_SUCCESS
    })
}
#[no_mangle]
pub extern "C" fn HcclCommDestroy(comm: H) -> HcclResult {
    guard(HCCL_E_INTERNAL, || {
        if comm.is_null() {
            return fail(HCCL_E_PTR, "comm is NULL");
        }
        match comms().lock().unwrap().remove(&(comm as usize)) {
            Some(_) => HCCL_SUCCESS,
            None => fail(HCCL_E_PARA, "not a live HcclComm"),
        }
    })
}
#[no_mangle]
pub extern "C" fn HcclGetCommAsyncError(comm: H, async_error: *mut i32) -> HcclResult {
    guard(HCCL_E_INTERNAL, || match get(comm) {
        Ok(c) => {
            if put(async_error, c.err.load(Ordering::Acquire)) {
                HCCL_SUCCESS
            } else {
                fail(HCCL_E_PTR, "asyncError is NULL")
            }
        }
        Err(e) => e,
    })
}
#[no_mangle]
pub extern "C" fn HcclGetErrorString(code: i32) -> *const c_char {
    let s: &'static std::ffi::CStr = match code {
        0 => c"success",
        1 => c"parameter error",
        2 => c"empty pointer",
        3 => c"memory error",
        4 => c"internal error",
        5 => c"not support feature",
        6 => c"not found specific resource",
        7 => c"resource unavailable",
        8 => c"call system interface error",
        9 => c"timeout",
        10 => c"open file fail",
        21 => c"error cqe (remote rank failed)",
        _ => c"unknown error",
    };
    s.as_ptr()
}
#[no_mangle]
pub extern "C" fn HcclSetConfig(_config: i32, _value: i64) -> HcclResult {
    HCCL_SUCCESS
}
#[no_mangle]
pub extern "C" fn HcclGroupStart() -> HcclResult {
    HCCL_SUCCESS
}
#[no_mangle]
pub extern "C" fn HcclGroupEnd() -> HcclResult {
    HCCL_SUCCESS
}
#[no_mangle]
pub extern "C" fn HcclCommInitAll(_ndev: u32, _devices: *mut i32, _comms: *mut H) -> HcclResult {
    fail(HCCL_E_NOT_SUPPORT, "HcclCommInitAll (several ranks in one process) is not supported by the simulator")
}

// ---------------------------------------------------------------- collectives

fn dt(v: i32) -> Result<DType, i32> {
    DType::from_hccl(v).ok_or_else(|| fail(HCCL_E_NOT_SUPPORT, format!("unsupported HcclDataType {v}")))
}
fn red(op: i32) -> Result<i32, i32> {
    if (0..=3).contains(&op) {
        Ok(op)
    } else {
        Err(fail(HCCL_E_PARA, format!("invalid HcclReduceOp {op}")))
    }
}
fn dev(p: *const c_void, bytes: usize, what: &str) -> Result<usize, i32> {
    if p.is_null() {
        return Err(fail(HCCL_E_PTR, format!("{what} is NULL")));
    }
    if bytes > 0 && mem::lookup(p as usize, bytes).is_none() {
        return Err(fail(HCCL_E_PARA, format!("{what} {p:p} (+{bytes} bytes) is not device memory")));
    }
    Ok(p as usize)
}
fn view(addr: usize, d: DType, n: usize) -> TView {
    TView::contiguous(addr, d, vec![n as i64])
}
fn io_args(send: Option<(usize, usize)>, recv: Option<(usize, usize)>, d: DType) -> Vec<Arg> {
    match (send, recv) {
        (Some(s), Some(r)) if s.0 == r.0 && s.1 == r.1 => {
            vec![Arg { role: Role::InOut, name: "buf".into(), view: view(s.0, d, s.1), index: 0, list_index: None }]
        }
        (s, r) => s
            .map(|s| Arg {
                role: Role::Input,
                name: "sendBuf".into(),
                view: view(s.0, d, s.1),
                index: 0,
                list_index: None,
            })
            .into_iter()
            .chain(r.map(|r| Arg {
                role: Role::Output,
                name: "recvBuf".into(),
                view: view(r.0, d, r.1),
                index: 1,
                list_index: None,
            }))
            .collect(),
    }
}

fn enqueue(
    name: &'static str,
    comm: H,
    stream: H,
    args: Vec<Arg>,
    f: impl FnOnce(&mut Comm) -> Result<(), i32> + Send + 'static,
) -> HcclResult {
    let ch = match get(comm) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let e = ch.err.load(Ordering::Acquire);
    if e != 0 {
        return fail(e, format!("{name}: communicator has a pending asynchronous error {e}"));
    }
    let Some(st) = crate::stream::get(stream as usize) else {
        return fail(HCCL_E_PARA, format!("{name}: invalid stream"));
    };
    let sid = st.id;
    let r = st.submit(Box::new(move || {
        if ch.err.load(Ordering::Acquire) != 0 {
            return Err(ACL_ERROR_RT_INTERNAL_ERROR);
        }
        let mut c = ch.comm.lock().unwrap_or_else(|p| p.into_inner());
        let r = crate::trace::run_traced(name, sid, &args, || f(&mut c));
        if let Err(e) = r {
            ch.err.store(e, Ordering::Release);
            return Err(ACL_ERROR_RT_INTERNAL_ERROR);
        }
        Ok(())
    }));
    match r {
        Ok(()) => HCCL_SUCCESS,
        Err(_) => HCCL_E_INTERNAL,
    }
}

fn reduce_chunk(acc: &mut [u8], r: usize, b: &[u8], d: DType, op: i32) {
    if r == 0 {
        acc.copy_from_slice(b)
    } else {
        let _ = hccl::reduce_into(acc, b, d, op);
    }
}

#[no_mangle]
pub extern "C" fn HcclAllReduce(
    send_buf: H,
    recv_buf: H,
    count: u64,
    data_type: i32,
    op: i32,
    comm: H,
    stream: H,
) -> HcclResult {
    guard(HCCL_E_INTERNAL, || {
        let r = (|| -> Result<HcclResult, i32> {
            let (d, op) = (dt(data_type)?, red(op)?);
            let (n, bytes) = (count as usize, count as usize * d.size());
            let (s, rv) = (dev(send_buf, bytes, "sendBuf")?, dev(recv_buf, bytes, "recvBuf")?);
            Ok(enqueue("HcclAllReduce", comm, stream, io_args(Some((s, n)), Some((rv, n)), d), move |c| {
                let mine = mem::read(s, bytes)?;
                let mut acc = vec![0u8; bytes];
                c.agree("HcclAllReduce", bytes as u64)?;
                c.exchange("HcclAllReduce", &mine, |r, off, b| {
                    reduce_chunk(&mut acc[off..off + b.len()], r, b, d, op)
                })?;
                mem::write(rv, &acc)
            }))
        })();
        r.unwrap_or_else(|e| e)
    })
}

#[no_mangle]
pub extern "C" fn HcclReduce(
    send_buf: H,
    recv_buf: H,
    count: u64,
    data_type: i32,
    op: i32,
    root: u32,
    comm: H,
    stream: H,
) -> HcclResult {
    guard(HCCL_E_INTERNAL, || {
        let r = (|| -> Result<HcclResult, i32> {
            let (d, op) = (dt(data_type)?, red(op)?);
            let ch = get(comm)?;
            if root >= ch.nranks {
                return Err(fail(HCCL_E_PARA, format!("root {root} >= rank size {}", ch.nranks)));
            }
            let (n, bytes) = (count as usize, count as usize * d.size());
            let s = dev(send_buf, bytes, "sendBuf")?;
            let is_root = ch.rank == root;
            let rv = if is_root { Some(dev(recv_buf, bytes, "recvBuf")?) } else { None };
            Ok(enqueue("HcclReduce", comm, stream, io_args(Some((s, n)), rv.map(|r| (r, n)), d), move |c| {
                let mine = mem::read(s, bytes)?;
                let mut acc = vec![0u8; bytes];
                c.agree("HcclReduce", bytes as u64)?;
                c.exchange("HcclReduce", &mine, |r, off, b| {
                    if is_root {
                        reduce_chunk(&mut acc[off..off + b.len()], r, b, d, op)
                    }
                })?;
                if let Some(rv) = rv {
                    mem::write(rv, &acc)?;
                }
                Ok(())
            }))
        })();
        r.unwrap_or_else(|e| e)
    })
}

#[no_mangle]
pub extern "C" fn HcclBroadcast(buf: H, count: u64, data_type: i32, root: u32, comm: H, stream: H) -> HcclResult {
    guard(HCCL_E_INTERNAL, || {
        let r = (|| -> Result<HcclResult, i32> {
            let d = dt(data_type)?;
            let ch = get(comm)?;
            if root >= ch.nranks {
                return Err(fail(HCCL_E_PARA, format!("root {root} >= rank size {}", ch.nranks)));
            }
            let (n, bytes) = (count as usize, count as usize * d.size());
            let b = dev(buf, bytes, "buf")?;
            let is_root = ch.rank == root;
            let args = if is_root { io_args(Some((b, n)), None, d) } else { io_args(None, Some((b, n)), d) };
            Ok(enqueue("HcclBroadcast", comm, stream, args, move |c| {
                let mine = if is_root { mem::read(b, bytes)? } else { Vec::new() };
                let mut out = vec![0u8; bytes];
                c.agree("HcclBroadcast", bytes as u64)?;
                c.exchange("HcclBroadcast", &mine, |r, off, x| {
                    if r == root as usize {
                        out[off..off + x.len()].copy_from_slice(x)
                    }
                })?;
                if !is_root {
                    mem::write(b, &out)?;
                }
                Ok(())
            }))
        })();
        r.unwrap_or_else(|e| e)
    })
}

#[no_mangle]
pub extern "C" fn HcclAllGather(
    send_buf: H,
    recv_buf: H,
    send_count: u64,
    data_type: i32,
    comm: H,
    stream: H,
) -> HcclResult {
    guard(HCCL_E_INTERNAL, || {
        let r = (|| -> Result<HcclResult, i32> {
            let d = dt(data_type)?;
            let ch = get(comm)?;
            let (n, bytes) = (send_count as usize, send_count as usize * d.size());
            let nr = ch.nranks as usize;
            let s = dev(send_buf, bytes, "sendBuf")?;
            let rv = dev(recv_buf, bytes * nr, "recvBuf")?;
            Ok(enqueue("HcclAllGather", comm, stream, io_args(Some((s, n)), Some((rv, n * nr)), d), move |c| {
                let mine = mem::read(s, bytes)?;
                let mut out = vec![0u8; bytes * nr];
                c.agree("HcclAllGather", bytes as u64)?;
                c.exchange("HcclAllGather", &mine, |r, off, x| {
                    out[r * bytes + off..r * bytes + off + x.len()].copy_from_slice(x)
                })?;
                mem::write(rv, &out)
            }))
        })();
        r.unwrap_or_else(|e| e)
    })
}

#[no_mangle]
pub extern "C" fn HcclReduceScatter(
    send_buf: H,
    recv_buf: H,
    recv_count: u64,
    data_type: i32,
    op: i32,
    comm: H,
    stream: H,
) -> HcclResult {
    guard(HCCL_E_INTERNAL, || {
        let r = (|| -> Result<HcclResult, i32> {
            let (d, op) = (dt(data_type)?, red(op)?);
            let ch = get(comm)?;
            let nr = ch.nranks as usize;
            let me = ch.rank as usize;
            let (n, rb) = (recv_count as usize, recv_count as usize * d.size());
            let s = dev(send_buf, rb * nr, "sendBuf")?;
            let rv = dev(recv_buf, rb, "recvBuf")?;
            Ok(enqueue("HcclReduceScatter", comm, stream, io_args(Some((s, n * nr)), Some((rv, n)), d), move |c| {
                let mine = mem::read(s, rb * nr)?;
                let mut acc = vec![0u8; rb];
                let (lo, hi) = (me * rb, (me + 1) * rb);
                c.agree("HcclReduceScatter", rb as u64)?;
                c.exchange("HcclReduceScatter", &mine, |r, off, x| {
                    let (a, b) = (off.max(lo), (off + x.len()).min(hi));
                    if a < b {
                        reduce_chunk(&mut acc[a - lo..b - lo], r, &x[a - off..b - off], d, op);
                    }
                })?;
                mem::write(rv, &acc)
            }))
        })();
        r.unwrap_or_else(|e| e)
    })
}

#[no_mangle]
pub extern "C" fn HcclSend(send_buf: H, count: u64, data_type: i32, dest_rank: u32, comm: H, stream: H) -> HcclResult {
    guard(HCCL_E_INTERNAL, || {
        let r = (|| -> Result<HcclResult, i32> {
            let d = dt(data_type)?;
            let ch = get(comm)?;
            if dest_rank >= ch.nranks || dest_rank == ch.rank {
                return Err(fail(HCCL_E_PARA, format!("invalid destRank {dest_rank}")));
            }
            let (n, bytes) = (count as usize, count as usize * d.size());
            let s = dev(send_buf, bytes, "sendBuf")?;
            Ok(enqueue("HcclSend", comm, stream, io_args(Some((s, n)), None, d), move |c| {
                let data = mem::read(s, bytes)?;
                c.send(&data, dest_rank as usize)
            }))
        })();
        r.unwrap_or_else(|e| e)
    })
}

#[no_mangle]
pub extern "C" fn HcclRecv(recv_buf: H, count: u64, data_type: i32, src_rank: u32, comm: H, stream: H) -> HcclResult {
    guard(HCCL_E_INTERNAL, || {
        let r = (|| -> Result<HcclResult, i32> {
            let d = dt(data_type)?;
            let ch = get(comm)?;
            if src_rank >= ch.nranks || src_rank == ch.rank {
                return Err(fail(HCCL_E_PARA, format!("invalid srcRank {src_rank}")));
            }
            let (n, bytes) = (count as usize, count as usize * d.size());
            let rv = dev(recv_buf, bytes, "recvBuf")?;
            Ok(enqueue("HcclRecv", comm, stream, io_args(None, Some((rv, n)), d), move |c| {
                let mut out = vec![0u8; bytes];
                c.recv(&mut out, src_rank as usize)?;
                mem::write(rv, &out)
            }))
        })();
        r.unwrap_or_else(|e| e)
    })
}

#[no_mangle]
pub extern "C" fn HcclBarrier(comm: H, stream: H) -> HcclResult {
    guard(HCCL_E_INTERNAL, || enqueue("HcclBarrier", comm, stream, Vec::new(), |c| c.barrier()))
}

#[allow(clippy::too_many_arguments)]
fn alltoallv(
    name: &'static str,
    send_buf: *const c_void,
    scounts: Vec<u64>,
    sdispls: Vec<u64>,
    st: i32,
    recv_buf: *const c_void,
    rcounts: Vec<u64>,
    rdispls: Vec<u64>,
    rt: i32,
    comm: H,
    stream: H,
) -> Result<HcclResult, i32> {
    let (sd, rd) = (dt(st)?, dt(rt)?);
    if sd.size() != rd.size() {
        return Err(fail(HCCL_E_PARA, "sendType and recvType differ in size"));
    }
    let ch = get(comm)?;
    let nr = ch.nranks as usize;
    let me = ch.rank as usize;
    if scounts.len() != nr || rcounts.len() != nr {
        return Err(fail(HCCL_E_PARA, "count arrays must have rankSize entries"));
    }
    let es = sd.size();
    let s_ext = (0..nr).map(|i| (sdispls[i] + scounts[i]) as usize).max().unwrap_or(0);
    let r_ext = (0..nr).map(|i| (rdispls[i] + rcounts[i]) as usize).max().unwrap_or(0);
    let s = dev(send_buf, s_ext * es, "sendBuf")?;
    let rv = dev(recv_buf, r_ext * es, "recvBuf")?;
    Ok(enqueue(name, comm, stream, io_args(Some((s, s_ext)), Some((rv, r_ext)), sd), move |c| {
        let all = mem::read(s, s_ext * es)?;
        // stream = [count_0..count_{n-1} as u64] ++ segments in destination order
        let mut mine = Vec::new();
        for &k in &scounts {
            mine.extend_from_slice(&k.to_le_bytes());
        }
        for t in 0..nr {
            mine.extend_from_slice(&all[sdispls[t] as usize * es..(sdispls[t] + scounts[t]) as usize * es]);
        }
        let mut streams = vec![Vec::new(); nr];
        c.exchange(name, &mine, |r, _, x| streams[r].extend_from_slice(x))?;
        for (r, stm) in streams.iter().enumerate() {
            let counts: Vec<usize> =
                (0..nr).map(|t| u64::from_le_bytes(stm[t * 8..t * 8 + 8].try_into().unwrap()) as usize).collect();
            if counts[me] != rcounts[r] as usize {
                return Err(fail(
                    HCCL_E_PARA,
                    format!("rank {r} sends {} elements to rank {me}, which expects {}", counts[me], rcounts[r]),
                ));
            }
            let start = nr * 8 + counts[..me].iter().sum::<usize>() * es;
            mem::write(rv + rdispls[r] as usize * es, &stm[start..start + counts[me] * es])?;
        }
        Ok(())
    }))
}

#[no_mangle]
pub extern "C" fn HcclAlltoAllV(
    send_buf: *const c_void,
    send_counts: *const c_void,
    sdispls: *const c_void,
    send_type: i32,
    recv_buf: *const c_void,
    recv_counts: *const c_void,
    rdispls: *const c_void,
    recv_type: i32,
    comm: H,
    stream: H,
) -> HcclResult {
    guard(HCCL_E_INTERNAL, || {
        let n = match get(comm) {
            Ok(c) => c.nranks as usize,
            Err(e) => return e,
        };
        let arr = |p: *const c_void| slice_to_vec(p as *const u64, n);
        let (Some(sc), Some(sdp), Some(rc), Some(rdp)) =
            (arr(send_counts), arr(sdispls), arr(recv_counts), arr(rdispls))
        else {
            return fail(HCCL_E_PTR, "count/displacement array is NULL");
        };
        alltoallv("HcclAlltoAllV", send_buf, sc, sdp, send_type, recv_buf, rc, rdp, recv_type, comm, stream)
            .unwrap_or_else(|e| e)
    })
}

#[no_mangle]
pub extern "C" fn HcclAlltoAll(
    send_buf: *const c_void,
    send_count: u64,
    send_type: i32,
    recv_buf: *const c_void,
    recv_count: u64,
    recv_type: i32,
    comm: H,
    stream: H,
) -> HcclResult {
    guard(HCCL_E_INTERNAL, || {
        let n = match get(comm) {
            Ok(c) => c.nranks as u64,
            Err(e) => return e,
        };
        let sc = vec![send_count; n as usize];
        let sd = (0..n).map(|i| i * send_count).collect();
        let rc = vec![recv_count; n as usize];
        let rd = (0..n).map(|i| i * recv_count).collect();
        alltoallv("HcclAlltoAll", send_buf, sc, sd, send_type, recv_buf, rc, rd, recv_type, comm, stream)
            .unwrap_or_else(|e| e)
    })
}
