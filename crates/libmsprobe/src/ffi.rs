//! The C ABI (`include/msprobe.h`): how the Python layers (and any other client) submit records.
//!
//! Every exported function catches panics and reports failure through its return value; none
//! of them aborts the host process. Record handles are opaque heap pointers: NULL means "not
//! recording" and every record function accepts it as a no-op, so callers can skip work early.
//! A handle must be used by one thread at a time and ended (or aborted) exactly once.

// C entry points take raw pointers by design: each one is checked for NULL and dereferenced
// under a SAFETY comment that states the header's contract.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use crate::session::{forked_child, install, recorder};
use msprobe_core::config;
use msprobe_core::dtype::DType;
use msprobe_core::json::Json;
use msprobe_core::layout;
use msprobe_core::record::{group_leaf, value_leaf, RecordBuilder, TensorRef};
use msprobe_core::recorder::Recorder;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Once};
use std::time::Instant;

/// Return codes.
pub const MSPROBE_OK: c_int = 0;
pub const MSPROBE_ALREADY: c_int = 1;
pub const MSPROBE_ERR_CONFIG: c_int = -1;
pub const MSPROBE_ERR_ARG: c_int = -2;
pub const MSPROBE_ERR_STATE: c_int = -3;
pub const MSPROBE_ERR_PANIC: c_int = -4;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_error(msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

/// Runs `f`, turning a panic into `on_panic` plus one logged warning.
fn guard<T>(on_panic: T, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(_) => {
            static WARNED: Once = Once::new();
            WARNED.call_once(|| log::warn!("internal error in msprobe (panic caught); the call was ignored"));
            set_error("internal error (panic caught)");
            on_panic
        }
    }
}

/// Borrows a C string; `None` for NULL or invalid UTF-8.
///
/// The lifetime is whatever the caller infers, `'static` included: copy the result before it
/// goes into anything that outlives the call (a [`Json`] string borrows only `'static` text,
/// so `Json::str(s)` with a borrowed `s` would keep a dangling pointer).
///
/// # Safety
/// `p` must be NULL or point to a NUL-terminated string valid for `'a`.
unsafe fn cstr<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-null and NUL-terminated per this function's contract.
    unsafe { CStr::from_ptr(p) }.to_str().ok()
}

/// The process that initialised the recorder: a forked child never touches the writer (whose
/// thread it does not have).
static INIT_PID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

extern "C" fn at_exit() {
    let _ = catch_unwind(|| {
        if INIT_PID.load(std::sync::atomic::Ordering::Relaxed) != std::process::id() {
            return;
        }
        if let Some(s) = recorder().and_then(|r| r.finish()) {
            log_summary(&s);
        }
    });
}

/// Logs the one-block run summary.
pub fn log_summary(s: &msprobe_core::recorder::Summary) {
    log::info!("run summary:\n{s}");
}

/// Initialises the process's recorder from defaults, `MSPROBE_CONFIG`, `MSPROBE_*` variables
/// and `args_json` (a JSON object of explicit arguments, or NULL). Returns 0, 1 if already
/// initialised, or -1 with the reason in [`msprobe_last_error`] (also logged once).
#[no_mangle]
pub extern "C" fn msprobe_init(args_json: *const c_char) -> c_int {
    guard(MSPROBE_ERR_PANIC, || {
        msprobe_core::logging::init();
        if recorder().is_some() {
            return MSPROBE_ALREADY;
        }
        // SAFETY: the header documents args_json as NULL or a NUL-terminated string.
        let args_text = unsafe { cstr(args_json) };
        // Bounded like a config file (size, nesting): a huge or deeply nested argument object
        // is one error line, never a stack overflow.
        let args = match args_text.map(config::parse_json) {
            None => None,
            Some(Ok(v)) => Some(v),
            Some(Err(why)) => {
                let e = config::ConfigError {
                    source: config::Source::Argument,
                    key: "args_json".into(),
                    value: config::clip_text(args_text.unwrap_or_default()),
                    allowed: format!("the argument object is refused: {why}"),
                };
                log::error!("{e}");
                set_error(&e.to_string());
                return MSPROBE_ERR_CONFIG;
            }
        };
        let env = |k: &str| std::env::var(k).ok();
        match config::load(&env, args.as_ref()) {
            Ok(cfg) => {
                if install(Recorder::new(cfg)) {
                    INIT_PID.store(std::process::id(), std::sync::atomic::Ordering::Relaxed);
                    static AT_EXIT: Once = Once::new();
                    // SAFETY: at_exit and forked_child are plain extern "C" fns that never unwind.
                    AT_EXIT.call_once(|| unsafe {
                        libc::atexit(at_exit);
                        libc::pthread_atfork(None, None, Some(forked_child));
                    });
                    MSPROBE_OK
                } else {
                    MSPROBE_ALREADY
                }
            }
            Err(e) => {
                log::error!("{e}");
                set_error(&e.to_string());
                MSPROBE_ERR_CONFIG
            }
        }
    })
}

/// The calling thread's last error message (empty if none). Valid until the next failing call.
#[no_mangle]
pub extern "C" fn msprobe_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

fn with_recorder(f: impl FnOnce(&Recorder) -> c_int) -> c_int {
    guard(MSPROBE_ERR_PANIC, || match recorder() {
        Some(r) => f(&r),
        None => {
            set_error("msprobe_init was not called or failed");
            MSPROBE_ERR_STATE
        }
    })
}

/// Turns capture on for the current step; returns 1 if capturing, 0 if the step or rank is
/// not selected.
#[no_mangle]
pub extern "C" fn msprobe_start() -> c_int {
    with_recorder(|r| r.start() as c_int)
}

/// Capture off; the step's JSON files are written in the background.
#[no_mangle]
pub extern "C" fn msprobe_stop() -> c_int {
    with_recorder(|r| {
        r.stop(false);
        MSPROBE_OK
    })
}

/// Capture off; returns once the step's JSON files and all queued data are on disk (msprobe's
/// `stop()`). Cheaper than `msprobe_stop` + `msprobe_flush`: the calling thread does the
/// writing itself instead of waking the writer thread and waiting for it.
#[no_mangle]
pub extern "C" fn msprobe_stop_wait() -> c_int {
    with_recorder(|r| {
        r.stop(true);
        MSPROBE_OK
    })
}

#[no_mangle]
pub extern "C" fn msprobe_step() -> c_int {
    with_recorder(|r| {
        r.step();
        MSPROBE_OK
    })
}

/// Writes the JSON files of the current step and waits until all queued data is on disk.
#[no_mangle]
pub extern "C" fn msprobe_flush() -> c_int {
    with_recorder(|r| {
        r.flush();
        MSPROBE_OK
    })
}

/// Ends the session (also done at process exit) and logs the run summary.
#[no_mangle]
pub extern "C" fn msprobe_finish() -> c_int {
    with_recorder(|r| {
        if let Some(s) = r.finish() {
            log_summary(&s);
        }
        MSPROBE_OK
    })
}

/// 1 while capture is on.
#[no_mangle]
pub extern "C" fn msprobe_is_enabled() -> c_int {
    guard(0, || recorder().map(|r| r.is_enabled() as c_int).unwrap_or(0))
}

/// 1 once the configured step list is exhausted (the caller may unhook).
#[no_mangle]
pub extern "C" fn msprobe_steps_done() -> c_int {
    with_recorder(|r| r.finished_steps() as c_int)
}

#[no_mangle]
pub extern "C" fn msprobe_current_step() -> i64 {
    guard(-1, || recorder().map(|r| r.current_step() as i64).unwrap_or(-1))
}

/// Sets the rank (distributed jobs): the directory becomes `rank{N}`.
#[no_mangle]
pub extern "C" fn msprobe_set_rank(rank: i64) -> c_int {
    with_recorder(|r| {
        if rank < 0 {
            set_error("rank must be >= 0");
            return MSPROBE_ERR_ARG;
        }
        r.set_rank(rank as u64);
        MSPROBE_OK
    })
}

/// The next index of a per-step counter (`"Functional.linear."`), from 0; -1 on error.
#[no_mangle]
pub extern "C" fn msprobe_next_index(key: *const c_char) -> i64 {
    guard(-1, || {
        // SAFETY: key is NULL or a NUL-terminated string (header contract).
        let Some(k) = (unsafe { cstr(key) }) else { return -1 };
        recorder().map(|r| r.next_index(k) as i64).unwrap_or(-1)
    })
}

/// An open record. Opaque to C.
pub struct MsprobeRecord {
    b: RecordBuilder,
    rec: Arc<Recorder>,
    t0: Instant,
}

/// Starts a record; NULL when capture is off or the name is filtered out.
#[no_mangle]
pub extern "C" fn msprobe_record_begin(name: *const c_char) -> *mut MsprobeRecord {
    guard(std::ptr::null_mut(), || {
        let Some(rec) = recorder() else { return std::ptr::null_mut() };
        if !rec.is_enabled() {
            return std::ptr::null_mut();
        }
        let t0 = Instant::now();
        // SAFETY: name is NULL or a NUL-terminated string (header contract).
        let Some(name) = (unsafe { cstr(name) }) else { return std::ptr::null_mut() };
        match rec.begin(name) {
            Some(b) => Box::into_raw(Box::new(MsprobeRecord { b, rec: rec.clone(), t0 })),
            None => std::ptr::null_mut(),
        }
    })
}

/// Runs `f` on a live record handle; NULL is a no-op returning 0.
fn with_record(r: *mut MsprobeRecord, f: impl FnOnce(&mut MsprobeRecord) -> c_int) -> c_int {
    if r.is_null() {
        return MSPROBE_OK;
    }
    guard(MSPROBE_ERR_PANIC, || {
        // SAFETY: non-null handles come from msprobe_record_begin and are used by one thread
        // until msprobe_record_end/abort (header contract), so the pointer is live and unique.
        let rec = unsafe { &mut *r };
        f(rec)
    })
}

fn fail(e: impl std::fmt::Display) -> c_int {
    set_error(&e.to_string());
    MSPROBE_ERR_ARG
}

/// Selects a section: "input_args", "input_kwargs", "output", "input" (backward), or
/// "parameters". Returns 1 if kept, 0 if data_mode drops it, <0 on error.
#[no_mangle]
pub extern "C" fn msprobe_record_section(r: *mut MsprobeRecord, section: *const c_char) -> c_int {
    with_record(r, |m| {
        // SAFETY: section is a NUL-terminated string (header contract).
        let Some(s) = (unsafe { cstr(section) }) else { return fail("section is NULL") };
        match m.b.section(s) {
            Ok(kept) => kept as c_int,
            Err(e) => fail(e),
        }
    })
}

/// Opens a nested list (`is_dict` = 0) or dict under `key` (NULL inside lists).
#[no_mangle]
pub extern "C" fn msprobe_record_open(r: *mut MsprobeRecord, key: *const c_char, is_dict: c_int) -> c_int {
    with_record(r, |m| {
        // SAFETY: key is NULL or a NUL-terminated string (header contract).
        let k = unsafe { cstr(key) };
        m.b.open(k, is_dict != 0).map(|_| MSPROBE_OK).unwrap_or_else(fail)
    })
}

#[no_mangle]
pub extern "C" fn msprobe_record_close(r: *mut MsprobeRecord) -> c_int {
    with_record(r, |m| m.b.close().map(|_| MSPROBE_OK).unwrap_or_else(fail))
}

/// A tensor view in host memory (see include/msprobe.h).
#[repr(C)]
pub struct MsprobeTensor {
    pub dtype: i32,
    pub ndim: i32,
    pub shape: *const i64,
    pub strides: *const i64,
    pub offset: i64,
    pub data: *const u8,
    pub storage_bytes: u64,
    pub requires_grad: i32,
    pub type_name: *const c_char,
}

/// Adds a tensor leaf: statistics (and CRC / file) are computed before this returns, so the
/// memory is only borrowed for the duration of the call.
#[no_mangle]
pub extern "C" fn msprobe_record_add_tensor(
    r: *mut MsprobeRecord,
    key: *const c_char,
    t: *const MsprobeTensor,
) -> c_int {
    with_record(r, |m| {
        // SAFETY: t is NULL or points to a caller-owned MsprobeTensor for this call (header contract).
        let (t, dtype, shape, strides) = match unsafe { descriptor(t) } {
            Ok(d) => d,
            Err(rc) => return rc,
        };
        if (t.storage_bytes > 0 && t.data.is_null()) || t.storage_bytes > isize::MAX as u64 {
            return fail("bad tensor descriptor");
        }
        let storage: &[u8] = if t.storage_bytes == 0 {
            &[]
        } else {
            // SAFETY: data points to storage_bytes readable bytes (header contract); the slice
            // does not outlive this call.
            unsafe { std::slice::from_raw_parts(t.data, t.storage_bytes as usize) }
        };
        // SAFETY: type_name and key are NULL or NUL-terminated strings (header contract).
        let (type_name, key) = unsafe { (cstr(t.type_name), cstr(key)) };
        add_view(m, key, t, dtype, shape, strides, t.offset, storage, type_name)
    })
}

/// A validated tensor descriptor: the struct, its dtype, shape and optional strides.
type Descriptor<'a> = (&'a MsprobeTensor, DType, &'a [i64], Option<&'a [i64]>);

/// Validates a descriptor and borrows its shape and strides.
///
/// # Safety
/// `t` is NULL or points to a `MsprobeTensor` whose `shape`/`strides` (when non-NULL) hold
/// `ndim` values, all valid for `'a`.
unsafe fn descriptor<'a>(t: *const MsprobeTensor) -> Result<Descriptor<'a>, c_int> {
    if t.is_null() {
        return Err(fail("tensor is NULL"));
    }
    // SAFETY: non-null and valid for 'a per the contract.
    let t = unsafe { &*t };
    let Some(dtype) = DType::from_acl(t.dtype) else {
        return Err(fail(format!("unsupported dtype {}", t.dtype)));
    };
    if t.ndim < 0 || t.ndim > 64 || (t.ndim > 0 && t.shape.is_null()) {
        return Err(fail("bad tensor descriptor"));
    }
    let nd = t.ndim as usize;
    // SAFETY: shape/strides hold ndim i64s per the contract.
    let (shape, strides) = unsafe {
        let shape: &[i64] = if nd == 0 { &[] } else { std::slice::from_raw_parts(t.shape, nd) };
        let strides =
            if t.strides.is_null() || nd == 0 { None } else { Some(std::slice::from_raw_parts(t.strides, nd)) };
        (shape, strides)
    };
    Ok((t, dtype, shape, strides))
}

#[allow(clippy::too_many_arguments)]
fn add_view(
    m: &mut MsprobeRecord,
    key: Option<&str>,
    t: &MsprobeTensor,
    dtype: DType,
    shape: &[i64],
    strides: Option<&[i64]>,
    offset: i64,
    storage: &[u8],
    type_name: Option<&str>,
) -> c_int {
    let data = match layout::gather(dtype.size(), shape, strides, offset, storage) {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    let tr = TensorRef {
        dtype,
        shape,
        data: &data,
        requires_grad: if t.requires_grad < 0 { None } else { Some(t.requires_grad != 0) },
        type_name,
    };
    let rec = m.rec.clone();
    m.b.add_tensor(key, &tr, rec.budget()).map(|_| MSPROBE_OK).unwrap_or_else(fail)
}

/// Adds a tensor whose storage is in Ascend device memory (`data` is a device address): the
/// view's byte span is copied to the host with the real `aclrtMemcpy` (the stream that produced
/// it must be synchronised by the caller), then recorded like a host tensor. Needs CANN loaded.
#[no_mangle]
pub extern "C" fn msprobe_record_add_device_tensor(
    r: *mut MsprobeRecord,
    key: *const c_char,
    t: *const MsprobeTensor,
) -> c_int {
    with_record(r, |m| {
        // SAFETY: t is NULL or points to a caller-owned MsprobeTensor for this call (header contract).
        let (t, dtype, shape, strides) = match unsafe { descriptor(t) } {
            Ok(d) => d,
            Err(rc) => return rc,
        };
        let cs = layout::contiguous_strides(shape);
        let span = match layout::element_span(shape, strides.unwrap_or(&cs), t.offset) {
            Ok(s) => s,
            Err(e) => return fail(e),
        };
        let (lo, hi) = span.unwrap_or((t.offset as u128, t.offset as u128));
        let es = dtype.size();
        let host = match crate::device::copy_to_host(t.data as usize + lo as usize * es, (hi - lo) as usize * es) {
            Ok(h) => h,
            Err(rc) => return fail(format!("aclrtMemcpy device-to-host failed ({rc})")),
        };
        // SAFETY: type_name and key are NULL or NUL-terminated strings (header contract).
        let (type_name, key) = unsafe { (cstr(t.type_name), cstr(key)) };
        add_view(m, key, t, dtype, shape, strides, t.offset - lo as i64, &host, type_name)
    })
}

fn add_leaf(r: *mut MsprobeRecord, key: *const c_char, leaf: impl FnOnce() -> Result<Json, c_int>) -> c_int {
    with_record(r, |m| {
        // SAFETY: key is NULL or a NUL-terminated string (header contract).
        let k = unsafe { cstr(key) };
        if !m.b.active() {
            return m.b.add_value(k, Json::Null).map(|_| MSPROBE_OK).unwrap_or_else(fail);
        }
        match leaf() {
            Ok(v) => m.b.add_value(k, v).map(|_| MSPROBE_OK).unwrap_or_else(fail),
            Err(c) => c,
        }
    })
}

/// The `type` string: the caller's, or a default.
///
/// # Safety
/// `t` is NULL or a NUL-terminated string.
unsafe fn type_or(t: *const c_char, default: &'static str) -> msprobe_core::json::Text {
    // SAFETY: forwarded contract.
    match unsafe { cstr(t) } {
        Some(s) => s.to_string().into(),
        None => default.into(),
    }
}

/// `null` (Python None).
#[no_mangle]
pub extern "C" fn msprobe_record_add_null(r: *mut MsprobeRecord, key: *const c_char) -> c_int {
    add_leaf(r, key, || Ok(Json::Null))
}

/// `{}` (msprobe 1.1.1's leaf for positional dtype/device objects).
#[no_mangle]
pub extern "C" fn msprobe_record_add_empty(r: *mut MsprobeRecord, key: *const c_char) -> c_int {
    add_leaf(r, key, || Ok(Json::Object(vec![])))
}

/// `{"type": type or "bool", "value": v}`.
#[no_mangle]
pub extern "C" fn msprobe_record_add_bool(
    r: *mut MsprobeRecord,
    key: *const c_char,
    type_name: *const c_char,
    v: c_int,
) -> c_int {
    // SAFETY: type_name is NULL or a NUL-terminated string (header contract).
    add_leaf(r, key, || Ok(value_leaf(unsafe { type_or(type_name, "bool") }, Json::Bool(v != 0))))
}

/// `{"type": type or "int", "value": v}`.
#[no_mangle]
pub extern "C" fn msprobe_record_add_int(
    r: *mut MsprobeRecord,
    key: *const c_char,
    type_name: *const c_char,
    v: i64,
) -> c_int {
    // SAFETY: type_name is NULL or a NUL-terminated string (header contract).
    add_leaf(r, key, || Ok(value_leaf(unsafe { type_or(type_name, "int") }, Json::Int(v as i128))))
}

/// `{"type": type or "float", "value": v}`; NaN and infinities are written as msprobe does.
#[no_mangle]
pub extern "C" fn msprobe_record_add_float(
    r: *mut MsprobeRecord,
    key: *const c_char,
    type_name: *const c_char,
    v: f64,
) -> c_int {
    // SAFETY: type_name is NULL or a NUL-terminated string (header contract).
    add_leaf(r, key, || Ok(value_leaf(unsafe { type_or(type_name, "float") }, Json::Float(v))))
}

/// `{"type": type or "str", value_key or "value": v}` (`torch.memory_format` uses "format").
#[no_mangle]
pub extern "C" fn msprobe_record_add_str(
    r: *mut MsprobeRecord,
    key: *const c_char,
    type_name: *const c_char,
    v: *const c_char,
    value_key: *const c_char,
) -> c_int {
    add_leaf(r, key, || {
        // SAFETY: all three are NULL or NUL-terminated strings (header contract).
        let (t, s, vk) = unsafe { (type_or(type_name, "str"), cstr(v), cstr(value_key)) };
        let Some(s) = s else { return Err(fail("value is NULL or not UTF-8")) };
        // `s` and `vk` borrow the caller's strings (unbounded lifetimes from `cstr`): copied.
        let vk: msprobe_core::json::Text = match vk {
            Some(k) => k.to_string().into(),
            None => "value".into(),
        };
        Ok(Json::Object(vec![("type".into(), Json::str(t)), (vk, Json::str(s.to_string()))]))
    })
}

/// `{"type": type, "value": [ints...]}` where `is_null[i]` != 0 writes null (slices, sizes).
#[no_mangle]
pub extern "C" fn msprobe_record_add_ints(
    r: *mut MsprobeRecord,
    key: *const c_char,
    type_name: *const c_char,
    v: *const i64,
    is_null: *const u8,
    n: usize,
) -> c_int {
    add_leaf(r, key, || {
        // SAFETY: v is NULL or points to n i64s, and is_null is NULL or points to n bytes
        // (header contract).
        let (vals, nulls) = unsafe {
            let vals = i64s(v, n, "values")?;
            let nulls: Option<&[u8]> =
                if is_null.is_null() || n == 0 { None } else { Some(std::slice::from_raw_parts(is_null, n)) };
            (vals, nulls)
        };
        let items = vals
            .iter()
            .enumerate()
            .map(|(i, &x)| if nulls.map(|z| z[i] != 0).unwrap_or(false) { Json::Null } else { Json::Int(x as i128) })
            .collect();
        // SAFETY: type_name is NULL or a NUL-terminated string (header contract).
        Ok(value_leaf(unsafe { type_or(type_name, "slice") }, Json::Array(items)))
    })
}

/// `{"type": type_name, "group_ranks": [ranks...], "group_id": md5 of str(ranks)}`: a process
/// group, as msprobe writes `torch.distributed.ProcessGroup` arguments.
#[no_mangle]
pub extern "C" fn msprobe_record_add_group(
    r: *mut MsprobeRecord,
    key: *const c_char,
    type_name: *const c_char,
    ranks: *const i64,
    n: usize,
) -> c_int {
    add_leaf(r, key, || {
        // SAFETY: ranks is NULL or points to n i64s; type_name is NULL or NUL-terminated
        // (header contract).
        let (ranks, t) = unsafe { (i64s(ranks, n, "ranks")?, type_or(type_name, "torch.ProcessGroup")) };
        Ok(group_leaf(t, ranks))
    })
}

/// The caller's `n` integers at `p` (an error, reported, when `p` is NULL and `n` > 0).
///
/// # Safety
/// `p` is NULL or points to `n` i64s valid for `'a`.
unsafe fn i64s<'a>(p: *const i64, n: usize, what: &str) -> Result<&'a [i64], c_int> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(fail(format!("{what} are NULL")));
    }
    // SAFETY: non-null and n long per this function's contract.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// Sets the record's stack.json entry (forward records).
#[no_mangle]
pub extern "C" fn msprobe_record_set_stack(r: *mut MsprobeRecord, frames: *const *const c_char, n: usize) -> c_int {
    with_record(r, |m| {
        if n > 0 && frames.is_null() {
            return fail("frames is NULL");
        }
        // SAFETY: frames points to n NUL-terminated strings (header contract).
        let list: Vec<String> = (0..n).filter_map(|i| unsafe { cstr(*frames.add(i)) }.map(str::to_string)).collect();
        m.b.stack = Some(list);
        MSPROBE_OK
    })
}

/// Sets the record's construct.json entry: its parent module record, or NULL for null.
#[no_mangle]
pub extern "C" fn msprobe_record_set_parent(r: *mut MsprobeRecord, parent: *const c_char) -> c_int {
    with_record(r, |m| {
        // SAFETY: parent is NULL or a NUL-terminated string (header contract).
        m.b.parent = Some(unsafe { cstr(parent) }.map(str::to_string));
        MSPROBE_OK
    })
}

/// Sets a construct.json entry outside any record (a module's parent, at module start);
/// `parent` NULL writes null.
#[no_mangle]
pub extern "C" fn msprobe_construct_set(name: *const c_char, parent: *const c_char) -> c_int {
    with_recorder(|r| {
        // SAFETY: name and parent are NULL or NUL-terminated strings (header contract).
        let (n, p) = unsafe { (cstr(name), cstr(parent)) };
        let Some(n) = n else { return fail("name is NULL") };
        r.set_construct(n, p);
        MSPROBE_OK
    })
}

/// Finishes the record and hands it to the writer; frees the handle.
#[no_mangle]
pub extern "C" fn msprobe_record_end(r: *mut MsprobeRecord) -> c_int {
    if r.is_null() {
        return MSPROBE_OK;
    }
    guard(MSPROBE_ERR_PANIC, || {
        // SAFETY: r came from Box::into_raw in msprobe_record_begin and is ended once.
        let m = unsafe { Box::from_raw(r) };
        let MsprobeRecord { b, rec, t0 } = *m;
        rec.end(b);
        rec.add_capture_time(t0);
        MSPROBE_OK
    })
}

/// Drops the record without writing it; frees the handle.
#[no_mangle]
pub extern "C" fn msprobe_record_abort(r: *mut MsprobeRecord) {
    if r.is_null() {
        return;
    }
    guard((), || {
        // SAFETY: r came from Box::into_raw in msprobe_record_begin and is released once.
        drop(unsafe { Box::from_raw(r) });
    })
}
