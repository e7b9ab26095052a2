//! HCCL wrappers: collectives captured like kernels (send buffers before, receive buffers
//! after, sizes from count × HcclDataType), and the rank learned from communicator init.

use super::activation::{self, capturing};
use super::capture::{launch, KArg};
use super::meta::{Role, TensorMeta};
use super::table::cann_table;
use cann_abi::dtype::ACL_DT_UNDEFINED;
use cann_abi::status::HCCL_E_NOT_SUPPORT;
use msprobe_core::json::Json;
use msprobe_core::record::value_leaf;
use std::ffi::c_void;

fn flat(addr: *const c_void, count: u64, hccl_dtype: i32, role: Role) -> KArg {
    if addr.is_null() {
        return KArg::Missing(role);
    }
    let t = TensorMeta {
        dtype: cann_abi::hccl::to_acl(hccl_dtype).unwrap_or(ACL_DT_UNDEFINED),
        shape: vec![count as i64],
        strides: None,
        offset: 0,
        addr: addr as usize,
    };
    KArg::Tensor(t, role)
}

fn int(v: i64) -> KArg {
    KArg::Value(value_leaf("int", Json::Int(v as i128)))
}

fn rank_size(comm: *mut c_void) -> u64 {
    crate::device::hccl_rank_size(comm).unwrap_or(1) as u64
}

/// Calls the real function in `$slot` (signature `$ty`) directly, or captures it as `$op`.
macro_rules! collective {
    ($slot:ident, $ty:ty, $op:expr, $stream:expr, $args:expr, ($($a:expr),*)) => {{
        // SAFETY: the slot holds the real HCCL function of this name, with signature $ty.
        let f: $ty = unsafe { $slot.get::<$ty>() };
        if capturing() {
            // SAFETY: the caller's arguments, unchanged.
            launch("Hccl", || ($op.to_string(), $args), $stream, || unsafe { f($($a),*) }, None)
        } else {
            // SAFETY: as above.
            unsafe { f($($a),*) }
        }
    }};
}

type P = *mut c_void;

unsafe extern "C" fn all_reduce(send: P, recv: P, count: u64, dt: i32, op: i32, comm: P, stream: P) -> i32 {
    type F = unsafe extern "C" fn(P, P, u64, i32, i32, P, P) -> i32;
    let args =
        || vec![flat(send, count, dt, Role::In), flat(recv, count, dt, Role::Out), int(count as i64), int(op as i64)];
    collective!(ALL_REDUCE, F, "AllReduce", stream, args(), (send, recv, count, dt, op, comm, stream))
}

unsafe extern "C" fn reduce(send: P, recv: P, count: u64, dt: i32, op: i32, root: u32, comm: P, stream: P) -> i32 {
    type F = unsafe extern "C" fn(P, P, u64, i32, i32, u32, P, P) -> i32;
    // Only the root's receive buffer is written (unknown rank: recorded).
    let args = || {
        let mut v = vec![flat(send, count, dt, Role::In)];
        if crate::device::hccl_rank_id(comm).is_none_or(|r| r == root) {
            v.push(flat(recv, count, dt, Role::Out));
        }
        v.extend([int(count as i64), int(op as i64), int(root as i64)]);
        v
    };
    collective!(REDUCE, F, "Reduce", stream, args(), (send, recv, count, dt, op, root, comm, stream))
}

unsafe extern "C" fn broadcast(buf: P, count: u64, dt: i32, root: u32, comm: P, stream: P) -> i32 {
    type F = unsafe extern "C" fn(P, u64, i32, u32, P, P) -> i32;
    // The root's buffer is read, every other rank's written (unknown rank: both).
    let args = || {
        let role = match crate::device::hccl_rank_id(comm) {
            Some(r) if r == root => Role::In,
            Some(_) => Role::Out,
            None => Role::InOut,
        };
        vec![flat(buf, count, dt, role), int(count as i64), int(root as i64)]
    };
    collective!(BROADCAST, F, "Broadcast", stream, args(), (buf, count, dt, root, comm, stream))
}

unsafe extern "C" fn all_gather(send: P, recv: P, count: u64, dt: i32, comm: P, stream: P) -> i32 {
    type F = unsafe extern "C" fn(P, P, u64, i32, P, P) -> i32;
    let args =
        || vec![flat(send, count, dt, Role::In), flat(recv, count * rank_size(comm), dt, Role::Out), int(count as i64)];
    collective!(ALL_GATHER, F, "AllGather", stream, args(), (send, recv, count, dt, comm, stream))
}

unsafe extern "C" fn reduce_scatter(send: P, recv: P, count: u64, dt: i32, op: i32, comm: P, stream: P) -> i32 {
    type F = unsafe extern "C" fn(P, P, u64, i32, i32, P, P) -> i32;
    let args = || {
        vec![
            flat(send, count * rank_size(comm), dt, Role::In),
            flat(recv, count, dt, Role::Out),
            int(count as i64),
            int(op as i64),
        ]
    };
    collective!(REDUCE_SCATTER, F, "ReduceScatter", stream, args(), (send, recv, count, dt, op, comm, stream))
}

unsafe extern "C" fn send(buf: P, count: u64, dt: i32, peer: u32, comm: P, stream: P) -> i32 {
    type F = unsafe extern "C" fn(P, u64, i32, u32, P, P) -> i32;
    let args = || vec![flat(buf, count, dt, Role::In), int(count as i64), int(peer as i64)];
    collective!(SEND, F, "Send", stream, args(), (buf, count, dt, peer, comm, stream))
}

unsafe extern "C" fn recv(buf: P, count: u64, dt: i32, peer: u32, comm: P, stream: P) -> i32 {
    type F = unsafe extern "C" fn(P, u64, i32, u32, P, P) -> i32;
    let args = || vec![flat(buf, count, dt, Role::Out), int(count as i64), int(peer as i64)];
    collective!(RECV, F, "Recv", stream, args(), (buf, count, dt, peer, comm, stream))
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn all_to_all(
    send: P,
    send_count: u64,
    send_dt: i32,
    recv: P,
    recv_count: u64,
    recv_dt: i32,
    comm: P,
    stream: P,
) -> i32 {
    type F = unsafe extern "C" fn(P, u64, i32, P, u64, i32, P, P) -> i32;
    let args = || {
        let n = rank_size(comm);
        vec![
            flat(send, send_count * n, send_dt, Role::In),
            flat(recv, recv_count * n, recv_dt, Role::Out),
            int(send_count as i64),
            int(recv_count as i64),
        ]
    };
    collective!(
        ALL_TO_ALL,
        F,
        "AlltoAll",
        stream,
        args(),
        (send, send_count, send_dt, recv, recv_count, recv_dt, comm, stream)
    )
}

/// Elements a V-collective buffer spans: max over ranks of displacement + count.
fn v_extent(counts: *const c_void, displs: *const c_void, n: u64) -> u64 {
    if counts.is_null() || displs.is_null() {
        return 0;
    }
    // SAFETY: HCCL's V collectives pass uint64_t[rankSize] arrays for counts and displacements.
    let (c, d) = unsafe {
        (
            std::slice::from_raw_parts(counts as *const u64, n as usize),
            std::slice::from_raw_parts(displs as *const u64, n as usize),
        )
    };
    c.iter().zip(d).map(|(c, d)| c + d).max().unwrap_or(0)
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn all_to_all_v(
    send: P,
    send_counts: P,
    sdispls: P,
    send_dt: i32,
    recv: P,
    recv_counts: P,
    rdispls: P,
    recv_dt: i32,
    comm: P,
    stream: P,
) -> i32 {
    type F = unsafe extern "C" fn(P, P, P, i32, P, P, P, i32, P, P) -> i32;
    let args = || {
        let n = rank_size(comm);
        vec![
            flat(send, v_extent(send_counts, sdispls, n), send_dt, Role::In),
            flat(recv, v_extent(recv_counts, rdispls, n), recv_dt, Role::Out),
        ]
    };
    collective!(
        ALL_TO_ALL_V,
        F,
        "AlltoAllV",
        stream,
        args(),
        (send, send_counts, sdispls, send_dt, recv, recv_counts, rdispls, recv_dt, comm, stream)
    )
}

unsafe extern "C" fn barrier(comm: P, stream: P) -> i32 {
    type F = unsafe extern "C" fn(P, P) -> i32;
    collective!(BARRIER, F, "Barrier", stream, Vec::new(), (comm, stream))
}

fn learn_rank(rank: u32) {
    if capturing() {
        if let Some(l2) = activation::l2() {
            l2.recorder.set_rank(rank as u64);
        }
    }
}

/// Communicator initialisers: the real call, then the rank argument becomes the dump's rank.
macro_rules! init_hook {
    ($fn:ident, $slot:ident, ($($a:ident: $t:ty),*), $rank:ident) => {
        unsafe extern "C" fn $fn($($a: $t),*) -> i32 {
            type F = unsafe extern "C" fn($($t),*) -> i32;
            // SAFETY: the slot holds the real HCCL initialiser of this name, with signature F.
            let f: F = unsafe { $slot.get::<F>() };
            // SAFETY: the caller's arguments, unchanged.
            let rc = unsafe { f($($a),*) };
            if rc == 0 {
                learn_rank($rank);
            }
            rc
        }
    };
}
init_hook!(init_root_info, INIT_ROOT_INFO, (n: u32, root: *const c_void, rank: u32, comm: *mut P), rank);
init_hook!(init_root_info_config, INIT_ROOT_INFO_CONFIG, (n: u32, root: *const c_void, rank: u32, cfg: *const c_void, comm: *mut P), rank);
init_hook!(init_cluster_info, INIT_CLUSTER_INFO, (cluster: *const c_void, rank: u32, comm: *mut P), rank);

cann_table! {
    /// Wraps an HCCL function. The collectives and point-to-point calls are also exported for
    /// clients that link libhccl; the communicator initialisers only reach clients through dlsym
    /// (HCCL declares them weak: a client may test them for NULL).
    pub(crate) fn wrap {
        export fn HcclAllReduce(send: P, recv: P, count: u64, dt: i32, op: i32, comm: P, stream: P) -> i32 = ALL_REDUCE: all_reduce, missing HCCL_E_NOT_SUPPORT;
        export fn HcclReduce(send: P, recv: P, count: u64, dt: i32, op: i32, root: u32, comm: P, stream: P) -> i32 = REDUCE: reduce, missing HCCL_E_NOT_SUPPORT;
        export fn HcclBroadcast(buf: P, count: u64, dt: i32, root: u32, comm: P, stream: P) -> i32 = BROADCAST: broadcast, missing HCCL_E_NOT_SUPPORT;
        export fn HcclAllGather(send: P, recv: P, count: u64, dt: i32, comm: P, stream: P) -> i32 = ALL_GATHER: all_gather, missing HCCL_E_NOT_SUPPORT;
        export fn HcclReduceScatter(send: P, recv: P, count: u64, dt: i32, op: i32, comm: P, stream: P) -> i32 = REDUCE_SCATTER: reduce_scatter, missing HCCL_E_NOT_SUPPORT;
        export fn HcclSend(buf: P, count: u64, dt: i32, peer: u32, comm: P, stream: P) -> i32 = SEND: send, missing HCCL_E_NOT_SUPPORT;
        export fn HcclRecv(buf: P, count: u64, dt: i32, peer: u32, comm: P, stream: P) -> i32 = RECV: recv, missing HCCL_E_NOT_SUPPORT;
        export fn HcclAlltoAll(send: P, send_count: u64, send_dt: i32, recv: P, recv_count: u64, recv_dt: i32, comm: P, stream: P) -> i32 = ALL_TO_ALL: all_to_all, missing HCCL_E_NOT_SUPPORT;
        export fn HcclAlltoAllV(send: P, send_counts: P, sdispls: P, send_dt: i32, recv: P, recv_counts: P, rdispls: P, recv_dt: i32, comm: P, stream: P) -> i32 = ALL_TO_ALL_V: all_to_all_v, missing HCCL_E_NOT_SUPPORT;
        export fn HcclBarrier(comm: P, stream: P) -> i32 = BARRIER: barrier, missing HCCL_E_NOT_SUPPORT;
        lookup fn HcclCommInitRootInfo(n: u32, root: *const c_void, rank: u32, comm: *mut P) -> i32 = INIT_ROOT_INFO: init_root_info, missing HCCL_E_NOT_SUPPORT;
        lookup fn HcclCommInitRootInfoConfig(n: u32, root: *const c_void, rank: u32, cfg: *const c_void, comm: *mut P) -> i32 = INIT_ROOT_INFO_CONFIG: init_root_info_config, missing HCCL_E_NOT_SUPPORT;
        lookup fn HcclCommInitClusterInfo(cluster: *const c_void, rank: u32, comm: *mut P) -> i32 = INIT_CLUSTER_INFO: init_cluster_info, missing HCCL_E_NOT_SUPPORT;
    }
}
