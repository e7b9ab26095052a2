//! Side tables of nnopbase objects and executors.
//!
//! nnopbase gives no element accessors for lists and its shape getters allocate with C++
//! `new[]`, so the interposer records what it needs when objects are created
//! (`aclCreateTensor`, `aclCreateScalar`, arrays, lists), follows address re-binding
//! (`aclSet*TensorAddr`, `aclSetRawTensorAddr`, `aclInitTensor`) and forgets objects when they
//! are destroyed. Executors map to their op and bound arguments; ordinary executors are dropped
//! after their launch (their pointers are recycled), repeatable ones when destroyed.

use msprobe_core::json::Json;
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, MutexGuard};

/// A tensor view over device storage.
#[derive(Clone, Debug)]
pub struct TensorMeta {
    pub dtype: i32,
    pub shape: Vec<i64>,
    /// Element strides; `None` = row-major.
    pub strides: Option<Vec<i64>>,
    /// Element offset of the view in its storage.
    pub offset: i64,
    /// Storage base address (device).
    pub addr: usize,
}

pub enum Obj {
    Tensor(TensorMeta),
    /// A host value (already a msprobe leaf).
    Value(Json),
    List(Vec<usize>),
    /// What an aclop tensor descriptor's setters said about its data (no getters exist).
    Desc(DescInfo),
}

/// Where an aclop input's data lives, from `aclSetTensorPlaceMent` / `aclSetTensorConst`.
#[derive(Clone, Debug, Default)]
pub struct DescInfo {
    /// `aclMemType`: 0 device (the default), 1 host, 2 host (compile-independent).
    pub placement: i32,
    /// Const data (the library keeps its own copy, as do we).
    pub const_data: Option<Vec<u8>>,
}

impl DescInfo {
    /// The data buffer holds a host address.
    pub fn host(&self) -> bool {
        self.placement == cann_abi::memtype::ACL_MEMTYPE_HOST
            || self.placement == cann_abi::memtype::ACL_MEMTYPE_HOST_COMPILE_INDEPENDENT
    }
}

/// Whether a tensor is read, written, or both by the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    In,
    Out,
    InOut,
}

/// One phase-1 argument as bound to an executor.
#[derive(Clone, Debug)]
pub enum Bound {
    Tensor(usize, Role),
    List(usize, Role),
    Value(Json),
}

#[derive(Clone, Debug)]
pub struct ExecState {
    pub args: Vec<Bound>,
    pub repeatable: bool,
}

static OBJECTS: LazyLock<Mutex<HashMap<usize, Obj>>> = LazyLock::new(Default::default);
static EXECUTORS: LazyLock<Mutex<HashMap<usize, ExecState>>> = LazyLock::new(Default::default);

pub fn objects() -> MutexGuard<'static, HashMap<usize, Obj>> {
    OBJECTS.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn executors() -> MutexGuard<'static, HashMap<usize, ExecState>> {
    EXECUTORS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Re-binds a tensor's storage address.
pub fn set_addr(tensor: usize, addr: usize) {
    if let Some(Obj::Tensor(t)) = objects().get_mut(&tensor) {
        t.addr = addr;
    }
}

/// Re-binds element `i` of a tensor list.
pub fn set_list_addr(list: usize, i: usize, addr: usize) {
    let mut objs = objects();
    let elem = match objs.get(&list) {
        Some(Obj::List(v)) => v.get(i).copied(),
        _ => None,
    };
    if let Some(Obj::Tensor(t)) = elem.and_then(|e| objs.get_mut(&e)) {
        t.addr = addr;
    }
}

/// Forgets an object; a list also forgets its elements (nnopbase destroys them with it).
pub fn forget(ptr: usize) {
    let mut objs = objects();
    if let Some(Obj::List(elems)) = objs.remove(&ptr) {
        for e in elems {
            objs.remove(&e);
        }
    }
}

pub fn tensor(ptr: usize) -> Option<TensorMeta> {
    match objects().get(&ptr) {
        Some(Obj::Tensor(t)) => Some(t.clone()),
        _ => None,
    }
}

pub fn list(ptr: usize) -> Option<Vec<usize>> {
    match objects().get(&ptr) {
        Some(Obj::List(v)) => Some(v.clone()),
        _ => None,
    }
}

pub fn value(ptr: usize) -> Option<Json> {
    match objects().get(&ptr) {
        Some(Obj::Value(v)) => Some(v.clone()),
        _ => None,
    }
}
