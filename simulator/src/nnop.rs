//! nnopbase objects (tensors, scalars, arrays, lists) and the aclOpExecutor life cycle.
//!
//! Every object handle is an opaque token from a counter (never reused), so a stale handle is
//! detected instead of dereferenced.
use crate::consts::*;
use crate::dtype::DType;
use crate::errmsg::fail;
use crate::ops::{Op, SV};
use crate::tensor::TView;
use crate::trace::{Arg, Role};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

#[derive(Clone, Debug)]
pub struct TensorObj {
    pub view: TView,
    pub format: i32,
    pub storage: Vec<i64>,
}

#[derive(Clone, Debug)]
pub struct ScalarObj {
    pub dtype: DType,
    pub value: f64,
    /// The exact value of an integer scalar (`value` rounds an int64 beyond 2^53).
    pub int: Option<i64>,
}

#[derive(Clone, Debug)]
pub enum Obj {
    Tensor(TensorObj),
    Scalar(ScalarObj),
    IntArray(Vec<i64>),
    FloatArray(Vec<f32>),
    BoolArray(Vec<bool>),
    TensorList(Vec<usize>),
    ScalarList(Vec<usize>),
}

#[derive(Clone, Debug)]
pub enum SlotVal {
    /// tensor handle (0 = NULL optional) and the executor's copy of its view
    T(usize, Option<TView>),
    /// list handle and the element copies
    L(usize, Vec<(usize, TView)>),
}

#[derive(Clone, Debug)]
pub struct Slot {
    pub role: Role,
    pub name: &'static str,
    pub val: SlotVal,
}

#[derive(Clone, Debug)]
pub struct Executor {
    pub op_name: &'static str,
    pub op: Op,
    pub slots: Vec<Slot>,
    pub ws: u64,
    pub repeatable: bool,
}

pub struct Store {
    pub objs: HashMap<usize, Obj>,
    pub execs: HashMap<usize, Executor>,
}

static NEXT: AtomicUsize = AtomicUsize::new(0x7c00_0000_1000);

fn new_handle() -> usize {
    NEXT.fetch_add(0x40, Ordering::Relaxed)
}

pub fn store() -> MutexGuard<'static, Store> {
    static S: OnceLock<Mutex<Store>> = OnceLock::new();
    S.get_or_init(|| Mutex::new(Store { objs: HashMap::new(), execs: HashMap::new() }))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

pub fn add(o: Obj) -> usize {
    let h = new_handle();
    store().objs.insert(h, o);
    h
}

pub fn get(h: usize) -> Option<Obj> {
    store().objs.get(&h).cloned()
}

pub fn tensor(h: usize) -> Option<TensorObj> {
    if let Some(shape) = crate::tensor::take_kernel_shape(h) {
        set_view_shape(h, &shape);
    }
    match store().objs.get(&h) {
        Some(Obj::Tensor(t)) => Some(t.clone()),
        _ => None,
    }
}

/// Sets a live tensor's view shape (contiguous strides, offset kept): what an operator whose output
/// shape depends on the data (aclnnNonzero) does once it has run, for `aclGetViewShape` after the
/// client's stream sync. A tensor destroyed meanwhile is left alone (false).
pub fn set_view_shape(h: usize, shape: &[i64]) -> bool {
    match store().objs.get_mut(&h) {
        Some(Obj::Tensor(t)) => {
            t.view.strides = crate::tensor::contiguous_strides(shape);
            t.view.shape = shape.to_vec();
            true
        }
        _ => false,
    }
}

/// Destroy an object; lists also destroy their element tensors (as nnopbase does).
pub fn destroy(h: usize, want: fn(&Obj) -> bool) -> i32 {
    if h == 0 {
        return ACLNN_SUCCESS; // destroying NULL is a no-op
    }
    crate::tensor::take_kernel_shape(h); // a handle reused later must not inherit it
    let mut s = store();
    match s.objs.get(&h) {
        Some(o) if want(o) => {}
        _ => return fail(ACLNN_ERR_PARAM_INVALID, format!("object {h:#x} is not a live object of the expected type")),
    }
    if let Some(Obj::TensorList(v)) | Some(Obj::ScalarList(v)) = s.objs.remove(&h) {
        for e in v {
            s.objs.remove(&e);
        }
    }
    ACLNN_SUCCESS
}

/// Builder used by the phase-1 FFI functions.
pub struct Args {
    pub slots: Vec<Slot>,
}

impl Default for Args {
    fn default() -> Self {
        Self::new()
    }
}

impl Args {
    pub fn new() -> Args {
        Args { slots: Vec::new() }
    }
    /// Add a tensor argument (handle may be 0 for an optional NULL tensor).
    pub fn t(&mut self, role: Role, name: &'static str, h: usize) -> Result<&mut Self, i32> {
        let v = if h == 0 {
            None
        } else {
            Some(
                tensor(h)
                    .ok_or_else(|| fail(ACLNN_ERR_PARAM_INVALID, format!("{name}: {h:#x} is not a live aclTensor")))?
                    .view,
            )
        };
        self.slots.push(Slot { role, name, val: SlotVal::T(h, v) });
        Ok(self)
    }
    pub fn list(&mut self, role: Role, name: &'static str, h: usize) -> Result<&mut Self, i32> {
        let els = match get(h) {
            Some(Obj::TensorList(v)) => v,
            _ => return Err(fail(ACLNN_ERR_PARAM_NULLPTR, format!("{name}: not a live aclTensorList"))),
        };
        let mut out = Vec::new();
        for e in els {
            out.push((
                e,
                tensor(e).ok_or_else(|| fail(ACLNN_ERR_PARAM_INVALID, "tensor list element destroyed"))?.view,
            ));
        }
        self.slots.push(Slot { role, name, val: SlotVal::L(h, out) });
        Ok(self)
    }
}

fn slot_values(slots: &[Slot]) -> Vec<SV> {
    slots
        .iter()
        .map(|s| match &s.val {
            SlotVal::T(_, v) => SV::T(v.clone()),
            SlotVal::L(_, v) => SV::L(v.iter().map(|(_, t)| t.clone()).collect()),
        })
        .collect()
}

/// Phase 1: validate, create the executor, return (handle, workspace size).
pub fn create_executor(op_name: &'static str, op: Op, args: Args) -> Result<(usize, u64), i32> {
    let ws = op.validate(&slot_values(&args.slots))?;
    let h = new_handle();
    store().execs.insert(h, Executor { op_name, op, slots: args.slots, ws, repeatable: false });
    Ok((h, ws))
}

pub fn set_repeatable(h: usize) -> i32 {
    match store().execs.get_mut(&h) {
        Some(e) => {
            e.repeatable = true;
            ACLNN_SUCCESS
        }
        None => fail(ACLNN_ERR_PARAM_INVALID, format!("executor {h:#x} is not live")),
    }
}

pub fn destroy_executor(h: usize) -> i32 {
    match store().execs.remove(&h) {
        Some(_) => ACLNN_SUCCESS,
        None => fail(ACLNN_ERR_PARAM_INVALID, format!("executor {h:#x} is not live")),
    }
}

pub fn executor_live(h: usize) -> bool {
    store().execs.contains_key(&h)
}

pub fn live_executor_count() -> usize {
    store().execs.len()
}

#[derive(Clone, Copy)]
pub enum Which {
    All,
    Input,
    Output,
}

fn pick(e: &Executor, which: Which, index: usize) -> Option<usize> {
    e.slots
        .iter()
        .enumerate()
        .filter(|(_, s)| match which {
            Which::All => true,
            Which::Input => s.role != Role::Output,
            Which::Output => s.role != Role::Input,
        })
        .nth(index)
        .map(|(i, _)| i)
}

/// aclSet{Input,Output,}TensorAddr: update the tensor object and the executor's slot.
pub fn set_tensor_addr(exec: usize, which: Which, index: usize, tensor: usize, addr: usize) -> i32 {
    let mut s = store();
    if let Some(Obj::Tensor(t)) = s.objs.get_mut(&tensor) {
        t.view.addr = addr;
    }
    let Some(e) = s.execs.get_mut(&exec) else {
        return fail(ACLNN_ERR_PARAM_INVALID, format!("executor {exec:#x} is not live"));
    };
    let Some(i) = pick(e, which, index) else {
        return fail(ACLNN_ERR_PARAM_INVALID, format!("tensor index {index} out of range"));
    };
    match &mut e.slots[i].val {
        SlotVal::T(h, Some(v)) => {
            v.addr = addr;
            if tensor != 0 {
                *h = tensor;
            }
            ACLNN_SUCCESS
        }
        _ => fail(ACLNN_ERR_PARAM_INVALID, format!("argument {index} is not a (non-NULL) tensor")),
    }
}

/// aclSetDynamic{Input,Output,}TensorAddr.
pub fn set_dynamic_addr(exec: usize, which: Which, ir: usize, rel: usize, list: usize, addr: usize) -> i32 {
    let mut s = store();
    let el = match s.objs.get(&list) {
        Some(Obj::TensorList(v)) => v.get(rel).copied(),
        _ => None,
    };
    if let Some(el) = el {
        if let Some(Obj::Tensor(t)) = s.objs.get_mut(&el) {
            t.view.addr = addr;
        }
    }
    let Some(e) = s.execs.get_mut(&exec) else {
        return fail(ACLNN_ERR_PARAM_INVALID, format!("executor {exec:#x} is not live"));
    };
    let Some(i) = pick(e, which, ir) else {
        return fail(ACLNN_ERR_PARAM_INVALID, format!("irIndex {ir} out of range"));
    };
    match &mut e.slots[i].val {
        SlotVal::L(_, v) if rel < v.len() => {
            v[rel].1.addr = addr;
            ACLNN_SUCCESS
        }
        _ => fail(ACLNN_ERR_PARAM_INVALID, format!("argument {ir} is not a tensor list with element {rel}")),
    }
}

/// Phase 2: enqueue the executor's kernel on `stream`; frees non-repeatable executors.
pub fn launch(op_name: &str, workspace: usize, ws_size: u64, exec: usize, stream: usize) -> i32 {
    if exec == 0 {
        return fail(ACLNN_ERR_PARAM_NULLPTR, format!("{op_name}: executor is NULL"));
    }
    let e = {
        let mut s = store();
        let e = match s.execs.get(&exec) {
            Some(e) => e.clone(),
            None => {
                return fail(
                    ACLNN_ERR_PARAM_INVALID,
                    format!("{op_name}: executor {exec:#x} is not live (already launched and freed, or destroyed)"),
                )
            }
        };
        if !e.repeatable {
            s.execs.remove(&exec);
        }
        e
    };
    if !op_name.starts_with(e.op_name) || op_name.len() != e.op_name.len() {
        return fail(
            ACLNN_ERR_PARAM_INVALID,
            format!("{op_name}: executor was created by {}GetWorkspaceSize", e.op_name),
        );
    }
    if e.ws > 0 {
        if workspace == 0 {
            return fail(
                ACLNN_ERR_PARAM_NULLPTR,
                format!("{op_name}: workspace is NULL but {} bytes are required", e.ws),
            );
        }
        if ws_size < e.ws {
            return fail(ACLNN_ERR_PARAM_INVALID, format!("{op_name}: workspaceSize {ws_size} < required {}", e.ws));
        }
        if crate::mem::lookup(workspace, e.ws as usize).is_none() {
            return fail(ACLNN_ERR_PARAM_INVALID, format!("{op_name}: workspace {workspace:#x} is not device memory"));
        }
    }
    let Some(st) = crate::stream::get(stream) else {
        return fail(ACLNN_ERR_PARAM_INVALID, format!("{op_name}: invalid stream {stream:#x}"));
    };
    // Resolve the current views: the executor's copy (kept up to date by aclSet*TensorAddr).
    let vals = slot_values(&e.slots);
    let mut args = Vec::new();
    for (si, (slot, v)) in e.slots.iter().zip(&vals).enumerate() {
        match v {
            SV::T(Some(t)) => {
                if let Err(c) = t.check() {
                    return c;
                }
                args.push(Arg {
                    role: slot.role,
                    name: slot.name.to_string(),
                    view: t.clone(),
                    index: si,
                    list_index: None,
                });
            }
            SV::T(None) => {}
            SV::L(ts) => {
                for (i, t) in ts.iter().enumerate() {
                    if let Err(c) = t.check() {
                        return c;
                    }
                    args.push(Arg {
                        role: slot.role,
                        name: format!("{}[{i}]", slot.name),
                        view: t.clone(),
                        index: si,
                        list_index: Some(i),
                    });
                }
            }
        }
    }
    let name = e.op_name;
    let op = e.op;
    // an output whose shape the kernel sets is traced at that shape (the client reads it after its sync)
    let shaped: Vec<(usize, usize)> = match &op {
        Op::Dim(d) => d
            .shaped_slots()
            .into_iter()
            .filter_map(|(slot, h)| args.iter().position(|a| a.index == slot && a.list_index.is_none()).map(|i| (i, h)))
            .collect(),
        _ => Vec::new(),
    };
    let ws = (workspace, e.ws as usize);
    let sid = st.id;
    let r = st.submit(Box::new(move || {
        crate::stream::kernel_delay();
        crate::trace::run_traced_shaped(name, sid, &args, &shaped, || {
            if ws.1 > 0 {
                crate::mem::fill(ws.0, 0xA5, ws.1)?;
            }
            op.exec(&vals)
        })
    }));
    match r {
        Ok(()) => ACLNN_SUCCESS,
        Err(c) => c,
    }
}
