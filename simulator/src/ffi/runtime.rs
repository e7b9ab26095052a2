//! ACL runtime (libascendcl): init, devices, contexts, streams, events, memory, callbacks.
use super::{guard, put};
use crate::consts::*;
use crate::errmsg::fail;
use crate::mem::{self, Side};
use crate::stream;
use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::os::raw::{c_char, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

type AclError = i32;
static INIT: AtomicBool = AtomicBool::new(false);

thread_local! {
    static CUR_DEV: Cell<i32> = const { Cell::new(-1) };
    static CUR_CTX: Cell<usize> = const { Cell::new(0) };
}

fn device_count() -> u32 {
    crate::env_num("CANNSIM_DEVICE_COUNT", 8u32).max(1)
}
fn ctx_for(dev: i32) -> usize {
    0x00c7_0000 + dev as usize * 0x100
}
fn contexts() -> &'static Mutex<HashSet<usize>> {
    static C: OnceLock<Mutex<HashSet<usize>>> = OnceLock::new();
    C.get_or_init(|| Mutex::new(HashSet::new()))
}
fn host_allocs() -> &'static Mutex<HashMap<usize, usize>> {
    static H: OnceLock<Mutex<HashMap<usize, usize>>> = OnceLock::new();
    H.get_or_init(|| Mutex::new(HashMap::new()))
}

#[no_mangle]
pub extern "C" fn aclInit(_config_path: *const c_char) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        crate::stats::init();
        if INIT.swap(true, Ordering::SeqCst) {
            return fail(ACL_ERROR_REPEAT_INITIALIZE, "aclInit was already called");
        }
        crate::simlog!("aclInit");
        ACL_SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn aclFinalize() -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if !INIT.swap(false, Ordering::SeqCst) {
            return fail(ACL_ERROR_REPEAT_FINALIZE, "aclFinalize without aclInit");
        }
        let _ = stream::synchronize_all(None);
        ACL_SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn aclGetRecentErrMsg() -> *const c_char {
    guard(std::ptr::null(), crate::errmsg::last_ptr)
}

#[no_mangle]
pub extern "C" fn aclrtGetSocName() -> *const c_char {
    static S: &std::ffi::CStr = c"Ascend910B1";
    S.as_ptr()
}

#[no_mangle]
pub extern "C" fn aclrtSetDevice(device_id: i32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if device_id < 0 || device_id as u32 >= device_count() {
            return fail(
                ACL_ERROR_RT_INVALID_DEVICEID,
                format!("device id {device_id} out of range [0,{})", device_count()),
            );
        }
        CUR_DEV.with(|d| d.set(device_id));
        CUR_CTX.with(|c| c.set(ctx_for(device_id)));
        ACL_SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn aclrtResetDevice(device_id: i32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if device_id < 0 || device_id as u32 >= device_count() {
            return fail(ACL_ERROR_RT_INVALID_DEVICEID, format!("device id {device_id} out of range"));
        }
        let _ = stream::synchronize_all(None);
        ACL_SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn aclrtResetDeviceForce(device_id: i32) -> AclError {
    aclrtResetDevice(device_id)
}

#[no_mangle]
pub extern "C" fn aclrtGetDevice(device_id: *mut i32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if device_id.is_null() {
            return fail(ACL_ERROR_INVALID_PARAM, "deviceId is NULL");
        }
        let d = CUR_DEV.with(|d| d.get());
        if d < 0 {
            return fail(ACL_ERROR_RT_CONTEXT_NULL, "no device set on this thread (call aclrtSetDevice)");
        }
        put(device_id, d);
        ACL_SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn aclrtGetDeviceCount(count: *mut u32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if put(count, device_count()) {
            ACL_SUCCESS
        } else {
            fail(ACL_ERROR_INVALID_PARAM, "count is NULL")
        }
    })
}

#[no_mangle]
pub extern "C" fn aclrtGetRunMode(mode: *mut i32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if put(mode, 1) {
            ACL_SUCCESS
        } else {
            fail(ACL_ERROR_INVALID_PARAM, "runMode is NULL")
        }
    })
}

#[no_mangle]
pub extern "C" fn aclrtSynchronizeDevice() -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        crate::stats::wait(crate::stats::Wait::Device);
        match stream::synchronize_all(None) {
            Ok(()) => ACL_SUCCESS,
            Err(e) => e,
        }
    })
}

#[no_mangle]
pub extern "C" fn aclrtSynchronizeDeviceWithTimeout(timeout: i32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        crate::stats::wait(crate::stats::Wait::Device);
        let t = if timeout < 0 { None } else { Some(Duration::from_millis(timeout as u64)) };
        match stream::synchronize_all(t) {
            Ok(()) => ACL_SUCCESS,
            Err(e) => e,
        }
    })
}

#[no_mangle]
pub extern "C" fn aclrtGetMemInfo(_attr: i32, free: *mut usize, total: *mut usize) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if free.is_null() || total.is_null() {
            return fail(ACL_ERROR_INVALID_PARAM, "free/total is NULL");
        }
        let t = mem::total_bytes();
        put(total, t);
        put(free, t.saturating_sub(mem::used_bytes()));
        ACL_SUCCESS
    })
}

// ------------------------------------------------------------------ contexts

#[no_mangle]
pub extern "C" fn aclrtCreateContext(context: *mut *mut c_void, device_id: i32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if context.is_null() {
            return fail(ACL_ERROR_INVALID_PARAM, "context is NULL");
        }
        if device_id < 0 || device_id as u32 >= device_count() {
            return fail(ACL_ERROR_RT_INVALID_DEVICEID, format!("device id {device_id} out of range"));
        }
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);
        let h = 0x00c8_0000_0000 + N.fetch_add(1, Ordering::Relaxed) * 0x100;
        contexts().lock().unwrap().insert(h);
        put(context, h as *mut c_void);
        CUR_DEV.with(|d| d.set(device_id));
        CUR_CTX.with(|c| c.set(h));
        ACL_SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn aclrtDestroyContext(context: *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if context.is_null() {
            return fail(ACL_ERROR_INVALID_PARAM, "context is NULL");
        }
        if !contexts().lock().unwrap().remove(&(context as usize)) {
            return fail(ACL_ERROR_RT_PARAM_INVALID, "unknown context");
        }
        ACL_SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn aclrtSetCurrentContext(context: *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        let h = context as usize;
        if h == 0 {
            return fail(ACL_ERROR_INVALID_PARAM, "context is NULL");
        }
        let known = contexts().lock().unwrap().contains(&h);
        let default_dev = (0..device_count() as i32).find(|&d| ctx_for(d) == h);
        if !known && default_dev.is_none() {
            return fail(ACL_ERROR_RT_PARAM_INVALID, "unknown context");
        }
        if let Some(d) = default_dev {
            CUR_DEV.with(|c| c.set(d));
        }
        CUR_CTX.with(|c| c.set(h));
        ACL_SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn aclrtGetCurrentContext(context: *mut *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if context.is_null() {
            return fail(ACL_ERROR_INVALID_PARAM, "context is NULL");
        }
        let h = CUR_CTX.with(|c| c.get());
        if h == 0 {
            return fail(ACL_ERROR_RT_CONTEXT_NULL, "no current context");
        }
        put(context, h as *mut c_void);
        ACL_SUCCESS
    })
}

// ------------------------------------------------------------------ memory

fn malloc_impl(dev_ptr: *mut *mut c_void, size: usize, policy: u32) -> AclError {
    if dev_ptr.is_null() {
        return fail(ACL_ERROR_INVALID_PARAM, "devPtr is NULL");
    }
    if size == 0 {
        return fail(ACL_ERROR_INVALID_PARAM, "size is 0");
    }
    if policy & 0xff > 7 {
        return fail(ACL_ERROR_INVALID_PARAM, format!("invalid malloc policy {policy:#x}"));
    }
    match mem::alloc(size) {
        Ok(a) => {
            put(dev_ptr, a as *mut c_void);
            ACL_SUCCESS
        }
        Err(e) => fail(e, format!("device allocation of {size} bytes failed")),
    }
}

#[no_mangle]
pub extern "C" fn aclrtMalloc(dev_ptr: *mut *mut c_void, size: usize, policy: u32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || malloc_impl(dev_ptr, size, policy))
}
#[no_mangle]
pub extern "C" fn aclrtMallocAlign32(dev_ptr: *mut *mut c_void, size: usize, policy: u32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || malloc_impl(dev_ptr, size, policy))
}
#[no_mangle]
pub extern "C" fn aclrtMallocCached(dev_ptr: *mut *mut c_void, size: usize, policy: u32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || malloc_impl(dev_ptr, size, policy))
}

#[no_mangle]
pub extern "C" fn aclrtFree(dev_ptr: *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if dev_ptr.is_null() {
            return fail(ACL_ERROR_INVALID_PARAM, "devPtr is NULL");
        }
        match mem::free(dev_ptr as usize) {
            Ok(()) => ACL_SUCCESS,
            Err(_) => fail(ACL_ERROR_RT_PARAM_INVALID, format!("{dev_ptr:p} is not a device allocation")),
        }
    })
}

#[no_mangle]
pub extern "C" fn aclrtMallocHost(host_ptr: *mut *mut c_void, size: usize) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if host_ptr.is_null() {
            return fail(ACL_ERROR_INVALID_PARAM, "hostPtr is NULL");
        }
        if size == 0 {
            return fail(ACL_ERROR_INVALID_PARAM, "size is 0");
        }
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: posix_memalign with a valid out-pointer, power-of-two alignment.
        if unsafe { libc::posix_memalign(&mut p, 64, size) } != 0 {
            return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "host allocation failed");
        }
        {
            let mut h = host_allocs().lock().unwrap();
            h.insert(p as usize, size);
            crate::stats::pinned_mem(h.values().sum());
        }
        crate::stats::pinned_alloc();
        put(host_ptr, p);
        ACL_SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn aclrtFreeHost(host_ptr: *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if host_ptr.is_null() {
            return fail(ACL_ERROR_INVALID_PARAM, "hostPtr is NULL");
        }
        if host_allocs().lock().unwrap().remove(&(host_ptr as usize)).is_none() {
            return fail(ACL_ERROR_RT_PARAM_INVALID, "not allocated by aclrtMallocHost");
        }
        // SAFETY: allocated by posix_memalign in aclrtMallocHost and removed from the set.
        unsafe { libc::free(host_ptr) };
        ACL_SUCCESS
    })
}

/// Resolve the sides of a copy from its kind, validating the pointers.
fn sides(dst: usize, src: usize, kind: i32) -> Result<(Side, Side), i32> {
    let dd = mem::is_device(dst);
    let sd = mem::is_device(src);
    let (ds, ss) = match kind {
        ACL_MEMCPY_HOST_TO_HOST => (Side::Host, Side::Host),
        ACL_MEMCPY_HOST_TO_DEVICE | ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE => (Side::Device, Side::Host),
        ACL_MEMCPY_DEVICE_TO_HOST => (Side::Host, Side::Device),
        ACL_MEMCPY_DEVICE_TO_DEVICE | ACL_MEMCPY_INNER_DEVICE_TO_DEVICE | ACL_MEMCPY_INTER_DEVICE_TO_DEVICE => {
            (Side::Device, Side::Device)
        }
        ACL_MEMCPY_DEFAULT => (if dd { Side::Device } else { Side::Host }, if sd { Side::Device } else { Side::Host }),
        _ => return Err(fail(ACL_ERROR_INVALID_PARAM, format!("invalid memcpy kind {kind}"))),
    };
    if (ds == Side::Device) != dd {
        return Err(fail(
            ACL_ERROR_RT_PARAM_INVALID,
            format!(
                "dst {dst:#x} is {} memory but kind {kind} needs {:?} memory",
                if dd { "device" } else { "host" },
                ds
            ),
        ));
    }
    if (ss == Side::Device) != sd {
        return Err(fail(
            ACL_ERROR_RT_PARAM_INVALID,
            format!(
                "src {src:#x} is {} memory but kind {kind} needs {:?} memory",
                if sd { "device" } else { "host" },
                ss
            ),
        ));
    }
    Ok((ds, ss))
}

fn memcpy_check(
    dst: *mut c_void,
    dest_max: usize,
    src: *const c_void,
    count: usize,
    kind: i32,
) -> Result<(Side, Side), i32> {
    if dst.is_null() || src.is_null() {
        return Err(fail(ACL_ERROR_INVALID_PARAM, "dst or src is NULL"));
    }
    if count > dest_max {
        return Err(fail(ACL_ERROR_INVALID_PARAM, format!("count {count} > destMax {dest_max}")));
    }
    let (ds, ss) = sides(dst as usize, src as usize, kind)?;
    if ds == Side::Device && mem::lookup(dst as usize, count).is_none() {
        return Err(fail(ACL_ERROR_RT_PARAM_INVALID, "dst range exceeds its device allocation"));
    }
    if ss == Side::Device && mem::lookup(src as usize, count).is_none() {
        return Err(fail(ACL_ERROR_RT_PARAM_INVALID, "src range exceeds its device allocation"));
    }
    Ok((ds, ss))
}

#[no_mangle]
pub extern "C" fn aclrtMemcpy(
    dst: *mut c_void,
    dest_max: usize,
    src: *const c_void,
    count: usize,
    kind: i32,
) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        let (ds, ss) = match memcpy_check(dst, dest_max, src, count, kind) {
            Ok(x) => x,
            Err(e) => return e,
        };
        // Synchronous, and deliberately does not wait for pending stream work (as on hardware).
        match mem::copy(dst as usize, ds, src as usize, ss, count) {
            Ok(()) => {
                crate::stats::copy(ds == Side::Device, ss == Side::Device, false, count);
                ACL_SUCCESS
            }
            Err(e) => fail(e, "memcpy failed"),
        }
    })
}

#[no_mangle]
pub extern "C" fn aclrtMemcpyAsync(
    dst: *mut c_void,
    dest_max: usize,
    src: *const c_void,
    count: usize,
    kind: i32,
    stream: *mut c_void,
) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        let (ds, ss) = match memcpy_check(dst, dest_max, src, count, kind) {
            Ok(x) => x,
            Err(e) => return e,
        };
        let Some(s) = stream::get(stream as usize) else { return fail(ACL_ERROR_INVALID_PARAM, "invalid stream") };
        let (d, sr) = (dst as usize, src as usize);
        match s.submit(Box::new(move || mem::copy(d, ds, sr, ss, count))) {
            Ok(()) => {
                crate::stats::copy(ds == Side::Device, ss == Side::Device, true, count);
                ACL_SUCCESS
            }
            Err(e) => e,
        }
    })
}

#[no_mangle]
pub extern "C" fn aclrtMemcpy2d(
    dst: *mut c_void,
    dpitch: usize,
    src: *const c_void,
    spitch: usize,
    width: usize,
    height: usize,
    kind: i32,
) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if dst.is_null() || src.is_null() {
            return fail(ACL_ERROR_INVALID_PARAM, "dst or src is NULL");
        }
        if width > dpitch || width > spitch {
            return fail(ACL_ERROR_INVALID_PARAM, "width exceeds pitch");
        }
        let (ds, ss) = match sides(dst as usize, src as usize, kind) {
            Ok(x) => x,
            Err(e) => return e,
        };
        for r in 0..height {
            if let Err(e) = mem::copy(dst as usize + r * dpitch, ds, src as usize + r * spitch, ss, width) {
                return fail(e, "memcpy2d out of range");
            }
        }
        crate::stats::copy(ds == Side::Device, ss == Side::Device, false, width * height);
        ACL_SUCCESS
    })
}

fn memset_check(dev_ptr: *mut c_void, max_count: usize, count: usize) -> Result<(), i32> {
    if dev_ptr.is_null() {
        return Err(fail(ACL_ERROR_INVALID_PARAM, "devPtr is NULL"));
    }
    if count > max_count {
        return Err(fail(ACL_ERROR_INVALID_PARAM, format!("count {count} > maxCount {max_count}")));
    }
    if mem::lookup(dev_ptr as usize, count).is_none() {
        return Err(fail(ACL_ERROR_RT_PARAM_INVALID, "devPtr range is not device memory"));
    }
    Ok(())
}

#[no_mangle]
pub extern "C" fn aclrtMemset(dev_ptr: *mut c_void, max_count: usize, value: i32, count: usize) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if let Err(e) = memset_check(dev_ptr, max_count, count) {
            return e;
        }
        match mem::fill(dev_ptr as usize, value as u8, count) {
            Ok(()) => ACL_SUCCESS,
            Err(e) => e,
        }
    })
}

#[no_mangle]
pub extern "C" fn aclrtMemsetAsync(
    dev_ptr: *mut c_void,
    max_count: usize,
    value: i32,
    count: usize,
    stream: *mut c_void,
) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if let Err(e) = memset_check(dev_ptr, max_count, count) {
            return e;
        }
        let Some(s) = stream::get(stream as usize) else { return fail(ACL_ERROR_INVALID_PARAM, "invalid stream") };
        let d = dev_ptr as usize;
        match s.submit(Box::new(move || mem::fill(d, value as u8, count))) {
            Ok(()) => ACL_SUCCESS,
            Err(e) => e,
        }
    })
}

// ------------------------------------------------------------------ streams

#[no_mangle]
pub extern "C" fn aclrtCreateStream(st: *mut *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if st.is_null() {
            return fail(ACL_ERROR_INVALID_PARAM, "stream is NULL");
        }
        put(st, stream::create() as *mut c_void);
        ACL_SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn aclrtCreateStreamWithConfig(st: *mut *mut c_void, _priority: u32, _flag: u32) -> AclError {
    aclrtCreateStream(st)
}

#[no_mangle]
pub extern "C" fn aclrtDestroyStream(st: *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if st.is_null() {
            return fail(ACL_ERROR_INVALID_PARAM, "stream is NULL");
        }
        match stream::destroy(st as usize, false) {
            Ok(()) => ACL_SUCCESS,
            Err(e) => fail(e, "unknown stream"),
        }
    })
}

#[no_mangle]
pub extern "C" fn aclrtDestroyStreamForce(st: *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if st.is_null() {
            return fail(ACL_ERROR_INVALID_PARAM, "stream is NULL");
        }
        match stream::destroy(st as usize, true) {
            Ok(()) => ACL_SUCCESS,
            Err(e) => fail(e, "unknown stream"),
        }
    })
}

fn sync_stream(st: *mut c_void, t: Option<Duration>) -> AclError {
    crate::stats::wait(crate::stats::Wait::Stream);
    let Some(s) = stream::get(st as usize) else {
        return fail(ACL_ERROR_INVALID_PARAM, format!("invalid stream {st:p}"));
    };
    match s.synchronize(t) {
        Ok(()) => ACL_SUCCESS,
        Err(e) => e, // the failed task's message is the thread's (stream::report)
    }
}

#[no_mangle]
pub extern "C" fn aclrtSynchronizeStream(st: *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || sync_stream(st, None))
}

#[no_mangle]
pub extern "C" fn aclrtSynchronizeStreamWithTimeout(st: *mut c_void, timeout: i32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if timeout < -1 {
            return fail(ACL_ERROR_INVALID_PARAM, "timeout must be >= -1");
        }
        sync_stream(st, if timeout == -1 { None } else { Some(Duration::from_millis(timeout as u64)) })
    })
}

#[no_mangle]
pub extern "C" fn aclrtStreamQuery(st: *mut c_void, status: *mut i32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if status.is_null() {
            return fail(ACL_ERROR_INVALID_PARAM, "status is NULL");
        }
        let Some(s) = stream::get(st as usize) else { return fail(ACL_ERROR_INVALID_PARAM, "invalid stream") };
        put(status, if s.idle() { 0 } else { 1 });
        ACL_SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn aclrtStreamWaitEvent(st: *mut c_void, event: *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        let Some(s) = stream::get(st as usize) else { return fail(ACL_ERROR_INVALID_PARAM, "invalid stream") };
        let Some(e) = stream::event_get(event as usize) else { return fail(ACL_ERROR_INVALID_PARAM, "invalid event") };
        crate::stats::wait(crate::stats::Wait::StreamWaitEvent);
        match e.stream_wait(&s) {
            Ok(()) => ACL_SUCCESS,
            Err(c) => c,
        }
    })
}

// ------------------------------------------------------------------ events

#[no_mangle]
pub extern "C" fn aclrtCreateEvent(event: *mut *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if event.is_null() {
            return fail(ACL_ERROR_INVALID_PARAM, "event is NULL");
        }
        put(event, stream::event_create() as *mut c_void);
        ACL_SUCCESS
    })
}
#[no_mangle]
pub extern "C" fn aclrtCreateEventWithFlag(event: *mut *mut c_void, _flag: u32) -> AclError {
    aclrtCreateEvent(event)
}
#[no_mangle]
pub extern "C" fn aclrtCreateEventExWithFlag(event: *mut *mut c_void, _flag: u32) -> AclError {
    aclrtCreateEvent(event)
}

#[no_mangle]
pub extern "C" fn aclrtDestroyEvent(event: *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if stream::event_destroy(event as usize) {
            ACL_SUCCESS
        } else {
            fail(ACL_ERROR_INVALID_PARAM, "invalid event")
        }
    })
}

#[no_mangle]
pub extern "C" fn aclrtRecordEvent(event: *mut c_void, st: *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        let Some(e) = stream::event_get(event as usize) else { return fail(ACL_ERROR_INVALID_PARAM, "invalid event") };
        let Some(s) = stream::get(st as usize) else { return fail(ACL_ERROR_INVALID_PARAM, "invalid stream") };
        match e.record(&s) {
            Ok(()) => ACL_SUCCESS,
            Err(c) => c,
        }
    })
}

#[no_mangle]
pub extern "C" fn aclrtResetEvent(event: *mut c_void, _st: *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if stream::event_get(event as usize).is_some() {
            ACL_SUCCESS
        } else {
            fail(ACL_ERROR_INVALID_PARAM, "invalid event")
        }
    })
}

#[no_mangle]
pub extern "C" fn aclrtSynchronizeEvent(event: *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        let Some(e) = stream::event_get(event as usize) else { return fail(ACL_ERROR_INVALID_PARAM, "invalid event") };
        crate::stats::wait(crate::stats::Wait::Event);
        e.wait(None);
        ACL_SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn aclrtQueryEventStatus(event: *mut c_void, status: *mut i32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if status.is_null() {
            return fail(ACL_ERROR_INVALID_PARAM, "status is NULL");
        }
        let Some(e) = stream::event_get(event as usize) else { return fail(ACL_ERROR_INVALID_PARAM, "invalid event") };
        put(
            status,
            if e.is_complete() { ACL_EVENT_RECORDED_STATUS_COMPLETE } else { ACL_EVENT_RECORDED_STATUS_NOT_READY },
        );
        ACL_SUCCESS
    })
}

/// Deprecated aclrtQueryEvent: aclrtEventStatus {COMPLETE=0, NOT_READY=1}.
#[no_mangle]
pub extern "C" fn aclrtQueryEvent(event: *mut c_void, status: *mut i32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if status.is_null() {
            return fail(ACL_ERROR_INVALID_PARAM, "status is NULL");
        }
        let Some(e) = stream::event_get(event as usize) else { return fail(ACL_ERROR_INVALID_PARAM, "invalid event") };
        put(status, if e.is_complete() { 0 } else { 1 });
        ACL_SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn aclrtEventElapsedTime(ms: *mut f32, start: *mut c_void, end: *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if ms.is_null() {
            return fail(ACL_ERROR_INVALID_PARAM, "ms is NULL");
        }
        let (Some(a), Some(b)) = (stream::event_get(start as usize), stream::event_get(end as usize)) else {
            return fail(ACL_ERROR_INVALID_PARAM, "invalid event");
        };
        match (a.time(), b.time()) {
            (Some(ta), Some(tb)) if a.is_complete() && b.is_complete() => {
                let d = if tb >= ta { (tb - ta).as_secs_f64() * 1e3 } else { -((ta - tb).as_secs_f64() * 1e3) };
                put(ms, d as f32);
                ACL_SUCCESS
            }
            _ => fail(ACL_ERROR_RT_PARAM_INVALID, "both events must be recorded and complete"),
        }
    })
}

// ------------------------------------------------------------------ callbacks and misc

pub type AclrtCallback = Option<extern "C" fn(*mut c_void)>;

#[no_mangle]
pub extern "C" fn aclrtLaunchCallback(
    f: AclrtCallback,
    user_data: *mut c_void,
    block_type: i32,
    st: *mut c_void,
) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        let Some(f) = f else { return fail(ACL_ERROR_INVALID_PARAM, "fn is NULL") };
        if !(0..=1).contains(&block_type) {
            return fail(ACL_ERROR_INVALID_PARAM, "invalid blockType");
        }
        let Some(s) = stream::get(st as usize) else { return fail(ACL_ERROR_INVALID_PARAM, "invalid stream") };
        let ud = user_data as usize;
        // The callback runs on the stream worker in stream order.
        match s.submit(Box::new(move || {
            f(ud as *mut c_void);
            Ok(())
        })) {
            Ok(()) => ACL_SUCCESS,
            Err(e) => e,
        }
    })
}

#[no_mangle]
pub extern "C" fn aclrtSubscribeReport(_thread_id: u64, _st: *mut c_void) -> AclError {
    ACL_SUCCESS
}
#[no_mangle]
pub extern "C" fn aclrtUnSubscribeReport(_thread_id: u64, _st: *mut c_void) -> AclError {
    ACL_SUCCESS
}
#[no_mangle]
pub extern "C" fn aclrtProcessReport(timeout: i32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        let ms = if timeout < 0 { 100 } else { (timeout as u64).min(100) };
        std::thread::sleep(Duration::from_millis(ms));
        ACL_SUCCESS
    })
}

macro_rules! ok_stub {
    ($($name:ident ( $($a:ident : $t:ty),* );)*) => {
        $(
            /// Accepted and ignored by the simulator.
            #[no_mangle]
            #[allow(unused_variables)]
            pub extern "C" fn $name($($a: $t),*) -> AclError { ACL_SUCCESS }
        )*
    };
}

ok_stub! {
    aclrtSetStreamFailureMode(s: *mut c_void, m: u64);
    aclrtSetExceptionInfoCallback(f: *mut c_void);
    aclrtSetOpWaitTimeout(t: u32);
    aclrtSetOpExecuteTimeOut(t: u32);
    aclrtSetDeviceSatMode(m: i32);
    aclrtCtxSetSysParamOpt(o: i32, v: i64);
    aclrtSetSysParamOpt(o: i32, v: i64);
    aclopSetCompileFlag(f: i32);
    aclmdlInitDump();
    aclmdlSetDump(p: *const c_char);
    aclmdlFinalizeDump();
}

// ---- simulator-only introspection: device-traffic counters (stats.rs)

/// `size_t cannsimStatsJson(char *buf, size_t len)`: writes the counters as a NUL-terminated JSON
/// object into `buf` when `len` is large enough; returns the size needed including the NUL.
#[no_mangle]
pub extern "C" fn cannsimStatsJson(buf: *mut c_char, len: usize) -> usize {
    guard(0, || {
        let j = crate::stats::json();
        if !buf.is_null() && len > j.len() {
            // SAFETY: the caller provides `len` (> j.len()) writable bytes at `buf`.
            unsafe {
                std::ptr::copy_nonoverlapping(j.as_ptr(), buf.cast::<u8>(), j.len());
                *buf.add(j.len()) = 0;
            }
        }
        j.len() + 1
    })
}

/// `void cannsimStatsReset(void)`: zero every counter.
#[no_mangle]
pub extern "C" fn cannsimStatsReset() {
    guard((), || crate::stats::reset(crate::mem::used_bytes()))
}

// ---- compile options (libacl_op_compiler): aclSetCompileopt / aclGetCompileoptSize / aclGetCompileopt

/// `aclCompileOpt` values: ACL_PRECISION_MODE = 0 .. ACL_OP_DEBUG_OPTION = 16 in the 8.x headers; later
/// values are accepted too (newer toolkits append options).
const COMPILE_OPTS: i32 = 64;
const ACL_OP_JIT_COMPILE: i32 = 10;

fn compile_opts() -> std::sync::MutexGuard<'static, std::collections::HashMap<i32, String>> {
    static M: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<i32, String>>> =
        std::sync::OnceLock::new();
    M.get_or_init(|| {
        // The Ascend910B defaults: binary (pre-compiled) kernels, no just-in-time compilation.
        std::sync::Mutex::new(std::collections::HashMap::from([(ACL_OP_JIT_COMPILE, "disable".to_string())]))
    })
    .lock()
    .unwrap_or_else(|e| e.into_inner())
}

#[no_mangle]
pub extern "C" fn aclSetCompileopt(opt: i32, value: *const c_char) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if !(0..COMPILE_OPTS).contains(&opt) {
            return fail(ACL_ERROR_INVALID_PARAM, format!("aclCompileOpt {opt} is invalid"));
        }
        let Some(v) = crate::ffi::cstr(value) else { return fail(ACL_ERROR_INVALID_PARAM, "value is NULL") };
        compile_opts().insert(opt, v);
        ACL_SUCCESS
    })
}

/// Size of the option's value including the terminating NUL (0 for an invalid option).
#[no_mangle]
pub extern "C" fn aclGetCompileoptSize(opt: i32) -> usize {
    guard(0, || {
        if !(0..COMPILE_OPTS).contains(&opt) {
            fail(ACL_ERROR_INVALID_PARAM, format!("aclCompileOpt {opt} is invalid"));
            return 0;
        }
        compile_opts().get(&opt).map(|v| v.len()).unwrap_or(0) + 1
    })
}

#[no_mangle]
pub extern "C" fn aclGetCompileopt(opt: i32, value: *mut c_char, length: usize) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if !(0..COMPILE_OPTS).contains(&opt) {
            return fail(ACL_ERROR_INVALID_PARAM, format!("aclCompileOpt {opt} is invalid"));
        }
        let v = compile_opts().get(&opt).cloned().unwrap_or_default();
        if value.is_null() || length < v.len() + 1 {
            return fail(ACL_ERROR_INVALID_PARAM, format!("value buffer of {length} bytes is too small"));
        }
        // SAFETY: the caller provides `length` writable bytes at `value`; we write v.len() + 1 <= length.
        unsafe {
            std::ptr::copy_nonoverlapping(v.as_ptr(), value.cast::<u8>(), v.len());
            *value.add(v.len()) = 0;
        }
        ACL_SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn aclrtGetSysParamOpt(_opt: i32, value: *mut i64) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if put(value, 0) {
            ACL_SUCCESS
        } else {
            fail(ACL_ERROR_INVALID_PARAM, "value is NULL")
        }
    })
}

#[no_mangle]
pub extern "C" fn aclDataTypeSize(data_type: i32) -> usize {
    crate::dtype::acl_dtype_size(data_type)
}

// tdt channels: see ffi/tdt.rs
