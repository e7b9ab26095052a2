//! The remaining link-time C names of MindSpore 2.10's Ascend plugin closure (`real-clients.md` §4.3):
//! peer access, VMM, the `rt*` driver-runtime layer, profiling (`Msprof*`, `aclprof*`), the `mm*`
//! OS-abstraction layer, logging (`Alog*`) and the driver HAL registration calls.
//!
//! Behaviour is the host-side part of the real functions; what cannot exist on a CPU (launching device
//! binaries, IPC/VMM mappings of device memory, pinning host memory for the device) fails with
//! `ACL_ERROR_RT_FEATURE_NOT_SUPPORT` (207000) and an error message, never silently.
use super::{cstr, guard, put};
use crate::consts::*;
use crate::errmsg::fail;
use std::os::raw::{c_char, c_int, c_void};

type AclError = i32;

fn not_supported(what: &str) -> AclError {
    fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, format!("{what} is not supported by the CPU simulator"))
}

fn device_count() -> u32 {
    crate::env_num("CANNSIM_DEVICE_COUNT", 8u32).max(1)
}

// ---- peer access -------------------------------------------------------------------------------

#[no_mangle]
pub extern "C" fn aclrtDeviceCanAccessPeer(can: *mut i32, dev: i32, peer: i32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        let n = device_count() as i32;
        if dev < 0 || dev >= n || peer < 0 || peer >= n {
            return fail(ACL_ERROR_RT_INVALID_DEVICEID, format!("device id {dev}/{peer} out of range"));
        }
        if !put(can, i32::from(dev != peer)) {
            return fail(ACL_ERROR_INVALID_PARAM, "canAccessPeer is NULL");
        }
        ACL_SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn aclrtDeviceEnablePeerAccess(peer: i32, flags: u32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if flags != 0 {
            return fail(ACL_ERROR_INVALID_PARAM, "flags must be 0");
        }
        if peer < 0 || peer as u32 >= device_count() {
            return fail(ACL_ERROR_RT_INVALID_DEVICEID, format!("peer device id {peer} out of range"));
        }
        ACL_SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn aclrtDeviceGetBareTgid(pid: *mut i32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if put(pid, std::process::id() as i32) {
            ACL_SUCCESS
        } else {
            fail(ACL_ERROR_INVALID_PARAM, "pid is NULL")
        }
    })
}

/// `aclrtGetResInCurrentThread(aclrtDevResLimitType type, uint32_t *value)`: 0 = cube cores, 1 = vector cores
/// (the Ascend910B1 figures).
#[no_mangle]
pub extern "C" fn aclrtGetResInCurrentThread(kind: i32, value: *mut u32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        let v = match kind {
            0 => 24,
            1 => 48,
            _ => return fail(ACL_ERROR_INVALID_PARAM, format!("resource type {kind} is invalid")),
        };
        if put(value, v) {
            ACL_SUCCESS
        } else {
            fail(ACL_ERROR_INVALID_PARAM, "value is NULL")
        }
    })
}

// ---- VMM and IPC: device virtual memory management does not exist in the simulator -----------------

#[no_mangle]
pub extern "C" fn aclrtReserveMemAddress(
    _p: *mut *mut c_void,
    _size: usize,
    _align: usize,
    _expect: *mut c_void,
    _flags: u64,
) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || not_supported("aclrtReserveMemAddress (VMM)"))
}
#[no_mangle]
pub extern "C" fn aclrtReleaseMemAddress(_p: *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || not_supported("aclrtReleaseMemAddress (VMM)"))
}
#[no_mangle]
pub extern "C" fn aclrtMallocPhysical(
    _h: *mut *mut c_void,
    _size: usize,
    _prop: *const c_void,
    _flags: u64,
) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || not_supported("aclrtMallocPhysical (VMM)"))
}
#[no_mangle]
pub extern "C" fn aclrtFreePhysical(_h: *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || not_supported("aclrtFreePhysical (VMM)"))
}
#[no_mangle]
pub extern "C" fn aclrtMapMem(_p: *mut c_void, _size: usize, _off: usize, _h: *mut c_void, _flags: u64) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || not_supported("aclrtMapMem (VMM)"))
}
#[no_mangle]
pub extern "C" fn aclrtUnmapMem(_p: *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || not_supported("aclrtUnmapMem (VMM)"))
}
#[no_mangle]
pub extern "C" fn aclrtMemExportToShareableHandle(_h: *mut c_void, _t: i32, _f: u64, _out: *mut u64) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || not_supported("aclrtMemExportToShareableHandle (VMM)"))
}
#[no_mangle]
pub extern "C" fn aclrtMemImportFromShareableHandle(_s: u64, _dev: i32, _h: *mut *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || not_supported("aclrtMemImportFromShareableHandle (VMM)"))
}
#[no_mangle]
pub extern "C" fn aclrtMemSetPidToShareableHandle(_s: u64, _pids: *mut i32, _n: usize) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || not_supported("aclrtMemSetPidToShareableHandle (VMM)"))
}
#[no_mangle]
pub extern "C" fn rtIpcSetMemoryName(_p: *const c_void, _size: u64, _name: *mut c_char, _len: u32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || not_supported("rtIpcSetMemoryName"))
}
#[no_mangle]
pub extern "C" fn rtIpcOpenMemory(_p: *mut *mut c_void, _name: *const c_char) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || not_supported("rtIpcOpenMemory"))
}
#[no_mangle]
pub extern "C" fn rtSetIpcMemPid(_name: *const c_char, _pids: *mut i32, _n: c_int) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || not_supported("rtSetIpcMemPid"))
}
#[no_mangle]
pub extern "C" fn halHostRegister(_src: *mut c_void, _size: u64, _flag: u32, _dev: u32, _dst: *mut *mut c_void) -> i32 {
    guard(ACL_ERROR_INTERNAL_ERROR, || not_supported("halHostRegister"))
}
#[no_mangle]
pub extern "C" fn halHostUnregister(_src: *mut c_void, _dev: u32) -> i32 {
    guard(ACL_ERROR_INTERNAL_ERROR, || not_supported("halHostUnregister"))
}

// ---- rt* (driver runtime) ------------------------------------------------------------------------

#[no_mangle]
pub extern "C" fn rtGetSocVersion(ver: *mut c_char, max_len: u32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        let s = SOC_NAME.as_bytes();
        if ver.is_null() || (max_len as usize) <= s.len() {
            return fail(ACL_ERROR_RT_PARAM_INVALID, "rtGetSocVersion: buffer NULL or too small");
        }
        // SAFETY: the caller passes a buffer of max_len bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(s.as_ptr(), ver.cast::<u8>(), s.len());
            *ver.add(s.len()) = 0;
        }
        ACL_SUCCESS
    })
}
#[no_mangle]
pub extern "C" fn rtSetSocVersion(ver: *const c_char) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || match cstr(ver) {
        Some(_) => ACL_SUCCESS,
        None => fail(ACL_ERROR_RT_PARAM_INVALID, "rtSetSocVersion: NULL"),
    })
}
#[no_mangle]
pub extern "C" fn rtGetDeviceIDs(ids: *mut u32, len: u32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if ids.is_null() {
            return fail(ACL_ERROR_RT_PARAM_INVALID, "rtGetDeviceIDs: NULL");
        }
        for i in 0..len.min(device_count()) {
            // SAFETY: the caller passes an array of len entries.
            unsafe { *ids.add(i as usize) = i };
        }
        ACL_SUCCESS
    })
}
#[no_mangle]
pub extern "C" fn rtGetStreamId(stream: *mut c_void, id: *mut i32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if put(id, (stream as usize & 0xffff) as i32) {
            ACL_SUCCESS
        } else {
            fail(ACL_ERROR_RT_PARAM_INVALID, "rtGetStreamId: NULL")
        }
    })
}
#[no_mangle]
pub extern "C" fn rtGetPairDevicesInfo(_dev: u32, _other: u32, _kind: i32, val: *mut i64) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if put(val, 0) {
            ACL_SUCCESS
        } else {
            fail(ACL_ERROR_RT_PARAM_INVALID, "val is NULL")
        }
    })
}
#[no_mangle]
pub extern "C" fn rtGetC2cCtrlAddr(addr: *mut u64, len: *mut u32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        put(addr, 0);
        put(len, 0);
        ACL_SUCCESS
    })
}
#[no_mangle]
pub extern "C" fn rtCtxGetOverflowAddr(addr: *mut *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        put(addr, std::ptr::null_mut());
        ACL_SUCCESS
    })
}
/// Registering a device binary gives a handle; launching from it is impossible on the CPU.
#[no_mangle]
pub extern "C" fn rtDevBinaryRegister(bin: *const c_void, handle: *mut *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if bin.is_null() || !put(handle, bin as *mut c_void) {
            return fail(ACL_ERROR_RT_PARAM_INVALID, "rtDevBinaryRegister: NULL");
        }
        ACL_SUCCESS
    })
}
#[no_mangle]
pub extern "C" fn rtRegisterAllKernel(bin: *const c_void, handle: *mut *mut c_void) -> AclError {
    rtDevBinaryRegister(bin, handle)
}
#[no_mangle]
pub extern "C" fn rtDevBinaryUnRegister(_handle: *mut c_void) -> AclError {
    ACL_SUCCESS
}
#[no_mangle]
pub extern "C" fn rtFunctionRegister(
    _h: *mut c_void,
    _stub: *const c_void,
    _name: *const c_char,
    _dev_func: *const c_void,
    _mode: u32,
) -> AclError {
    ACL_SUCCESS
}
macro_rules! no_device_code {
    ($($name:ident),*) => {
        $(
            /// Launches a device binary: impossible on the CPU simulator.
            #[no_mangle]
            pub extern "C" fn $name(_a: *mut c_void, _b: *mut c_void, _c: *mut c_void, _d: *mut c_void, _e: *mut c_void, _f: *mut c_void) -> AclError {
                guard(ACL_ERROR_INTERNAL_ERROR, || not_supported(concat!(stringify!($name), " (device binary launch)")))
            }
        )*
    };
}
no_device_code!(
    rtKernelLaunch,
    rtKernelLaunchWithFlagV2,
    rtKernelLaunchWithHandleV2,
    rtLaunch,
    rtAicpuKernelLaunchWithFlag,
    rtAicpuKernelLaunchExWithArgs
);

// ---- profiling: never enabled in the simulator ----------------------------------------------------

#[no_mangle]
pub extern "C" fn aclprofSetConfig(_cfg: i32, _v: *const c_char, _len: usize) -> AclError {
    ACL_SUCCESS
}
#[no_mangle]
pub extern "C" fn MsprofRegisterCallback(_module: u32, _cb: *mut c_void) -> i32 {
    0
}
#[no_mangle]
pub extern "C" fn MsprofRegTypeInfo(_level: u16, _type_id: u32, _name: *const c_char) -> i32 {
    0
}
#[no_mangle]
pub extern "C" fn MsprofReportApi(_agent: u32, _api: *const c_void) -> i32 {
    0
}
#[no_mangle]
pub extern "C" fn MsprofReportCompactInfo(_agent: u32, _data: *const c_void, _len: u32) -> i32 {
    0
}
#[no_mangle]
pub extern "C" fn MsprofReportAdditionalInfo(_agent: u32, _data: *const c_void, _len: u32) -> i32 {
    0
}
/// A stable 64-bit hash of the string (FNV-1a), as the id profiling records would refer to.
#[no_mangle]
pub extern "C" fn MsprofGetHashId(s: *const c_char, len: usize) -> u64 {
    if s.is_null() {
        return 0;
    }
    // SAFETY: the caller passes `len` readable bytes.
    let b = unsafe { std::slice::from_raw_parts(s.cast::<u8>(), len) };
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &c| (h ^ c as u64).wrapping_mul(0x100_0000_01b3))
}
#[no_mangle]
pub extern "C" fn MsprofSysCycleTime() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_RAW, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

// ---- mmpa (OS abstraction) -----------------------------------------------------------------------

const EN_OK: i32 = 0;
const EN_ERROR: i32 = -1;
const EN_INVALID_PARAM: i32 = -2;

#[no_mangle]
pub extern "C" fn mmGetEnv(name: *const c_char, value: *mut c_char, len: u32) -> i32 {
    guard(EN_ERROR, || {
        let Some(n) = cstr(name) else { return EN_INVALID_PARAM };
        if value.is_null() || len == 0 {
            return EN_INVALID_PARAM;
        }
        let Some(v) = std::env::var_os(&n) else { return EN_ERROR };
        let b = std::os::unix::ffi::OsStrExt::as_bytes(v.as_os_str());
        if b.len() >= len as usize {
            return EN_ERROR;
        }
        // SAFETY: the caller passes a buffer of len bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(b.as_ptr(), value.cast::<u8>(), b.len());
            *value.add(b.len()) = 0;
        }
        EN_OK
    })
}
#[no_mangle]
pub extern "C" fn mmGetPid() -> i32 {
    std::process::id() as i32
}
#[no_mangle]
pub extern "C" fn mmMkdir(path: *const c_char, mode: u32) -> i32 {
    if path.is_null() {
        return EN_INVALID_PARAM;
    }
    // SAFETY: NUL-terminated path from the caller.
    if unsafe { libc::mkdir(path, mode as libc::mode_t) } == 0 {
        EN_OK
    } else {
        EN_ERROR
    }
}
#[no_mangle]
pub extern "C" fn mmOpen2(path: *const c_char, flags: i32, mode: u32) -> i32 {
    if path.is_null() {
        return EN_INVALID_PARAM;
    }
    // SAFETY: NUL-terminated path from the caller.
    let fd = unsafe { libc::open(path, flags, mode as libc::c_uint) };
    if fd < 0 {
        EN_ERROR
    } else {
        fd
    }
}
/// `mmDladdr(void *addr, mmDlInfo *info)`: mmDlInfo has the layout of glibc's `Dl_info`.
#[no_mangle]
pub extern "C" fn mmDladdr(addr: *mut c_void, info: *mut libc::Dl_info) -> i32 {
    if info.is_null() {
        return EN_INVALID_PARAM;
    }
    // SAFETY: out-pointer of Dl_info layout.
    if unsafe { libc::dladdr(addr, info) } != 0 {
        EN_OK
    } else {
        EN_ERROR
    }
}
/// CPU description queries are not provided (callers treat EN_ERROR as "unknown").
#[no_mangle]
pub extern "C" fn mmGetCpuInfo(info: *mut *mut c_void, count: *mut i32) -> i32 {
    put(info, std::ptr::null_mut());
    put(count, 0);
    EN_ERROR
}
#[no_mangle]
pub extern "C" fn mmCpuInfoFree(_info: *mut c_void, _count: i32) -> i32 {
    EN_OK
}

// ---- logging (slog): debug logging is off ----------------------------------------------------------

#[no_mangle]
pub extern "C" fn AlogCheckDebugLevel(_module: c_int, _level: c_int) -> c_int {
    0
}
/// `AlogRecord(moduleId, type, level, fmt, ...)`: variadic in C; the records are dropped.
#[no_mangle]
pub extern "C" fn AlogRecord(_module: u32, _kind: u32, _level: u32, _fmt: *const c_char) {}

// ---- external allocators (acl_rt_allocator): registered per stream for op workspaces ----------------
//
// A description holds the client's allocator object and callbacks; `aclrtAllocatorRegister` binds it to a
// stream. The simulator's kernels need no device workspace beyond what aclnn reports, so the registered
// allocator is recorded and never called.

#[derive(Default, Clone, Copy)]
struct AllocDesc {
    obj: usize,
    alloc: usize,
    free: usize,
    advise: usize,
    get_addr: usize,
}
fn alloc_descs() -> &'static std::sync::Mutex<std::collections::HashMap<usize, AllocDesc>> {
    static D: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<usize, AllocDesc>>> =
        std::sync::OnceLock::new();
    D.get_or_init(Default::default)
}
fn stream_allocators() -> &'static std::sync::Mutex<std::collections::HashMap<usize, AllocDesc>> {
    static D: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<usize, AllocDesc>>> =
        std::sync::OnceLock::new();
    D.get_or_init(Default::default)
}
static ALLOC_NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0x00a1_0000_0040);

#[no_mangle]
pub extern "C" fn aclrtAllocatorCreateDesc() -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        let h = ALLOC_NEXT.fetch_add(0x40, std::sync::atomic::Ordering::Relaxed);
        alloc_descs().lock().unwrap().insert(h, AllocDesc::default());
        h as *mut c_void
    })
}
#[no_mangle]
pub extern "C" fn aclrtAllocatorDestroyDesc(desc: *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || match alloc_descs().lock().unwrap().remove(&(desc as usize)) {
        Some(_) => ACL_SUCCESS,
        None => fail(ACL_ERROR_INVALID_PARAM, "aclrtAllocatorDestroyDesc: unknown allocator description"),
    })
}
fn set_desc(desc: *mut c_void, v: *mut c_void, f: impl FnOnce(&mut AllocDesc, usize)) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if v.is_null() {
            return fail(ACL_ERROR_INVALID_PARAM, "allocator description: NULL value");
        }
        match alloc_descs().lock().unwrap().get_mut(&(desc as usize)) {
            Some(d) => {
                f(d, v as usize);
                ACL_SUCCESS
            }
            None => fail(ACL_ERROR_INVALID_PARAM, "unknown allocator description"),
        }
    })
}
#[no_mangle]
pub extern "C" fn aclrtAllocatorSetObjToDesc(desc: *mut c_void, obj: *mut c_void) -> AclError {
    set_desc(desc, obj, |d, v| d.obj = v)
}
#[no_mangle]
pub extern "C" fn aclrtAllocatorSetAllocFuncToDesc(desc: *mut c_void, f: *mut c_void) -> AclError {
    set_desc(desc, f, |d, v| d.alloc = v)
}
#[no_mangle]
pub extern "C" fn aclrtAllocatorSetFreeFuncToDesc(desc: *mut c_void, f: *mut c_void) -> AclError {
    set_desc(desc, f, |d, v| d.free = v)
}
#[no_mangle]
pub extern "C" fn aclrtAllocatorSetAllocAdviseFuncToDesc(desc: *mut c_void, f: *mut c_void) -> AclError {
    set_desc(desc, f, |d, v| d.advise = v)
}
#[no_mangle]
pub extern "C" fn aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc: *mut c_void, f: *mut c_void) -> AclError {
    set_desc(desc, f, |d, v| d.get_addr = v)
}
#[no_mangle]
pub extern "C" fn aclrtAllocatorRegister(stream: *mut c_void, desc: *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        let Some(d) = alloc_descs().lock().unwrap().get(&(desc as usize)).copied() else {
            return fail(ACL_ERROR_INVALID_PARAM, "aclrtAllocatorRegister: unknown allocator description");
        };
        if d.obj == 0 || d.alloc == 0 || d.free == 0 || d.get_addr == 0 {
            return fail(
                ACL_ERROR_INVALID_PARAM,
                "aclrtAllocatorRegister: obj, alloc, free and getAddrFromBlock must be set",
            );
        }
        stream_allocators().lock().unwrap().insert(stream as usize, d);
        ACL_SUCCESS
    })
}
#[no_mangle]
pub extern "C" fn aclrtAllocatorUnregister(stream: *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        stream_allocators().lock().unwrap().remove(&(stream as usize));
        ACL_SUCCESS
    })
}

// ---- HCCL entry points beyond the simulated collectives -----------------------------------------------
// MindSpore's HCCL adapter resolves these at communicator init; the simulator reports them unsupported
// (HCCL_E_NOT_SUPPORT) when called.

/// Which `HcclCommConfig` fields the library understands (0: the base fields only).
#[no_mangle]
pub extern "C" fn HcclGetCommConfigCapability() -> u32 {
    0
}
macro_rules! hccl_not_supported {
    ($($name:ident),*) => {
        $(
            /// Not simulated: returns HCCL_E_NOT_SUPPORT.
            #[no_mangle]
            pub extern "C" fn $name(_a: usize, _b: usize, _c: usize, _d: usize, _e: usize, _f: usize, _g: usize, _h: usize) -> i32 {
                crate::simlog!(concat!(stringify!($name), " is not supported by the simulator"));
                HCCL_E_NOT_SUPPORT
            }
        )*
    };
}
hccl_not_supported!(
    HcclAllGatherV,
    HcclAllToAll,
    HcclAlltoAllVC,
    HcclBatchISendIRecv,
    HcclBatchSendRecv,
    HcclCommActivateCommMemory,
    HcclCommDeactivateCommMemory,
    HcclCommResume,
    HcclCommSetMemoryRange,
    HcclCommUnsetMemoryRange,
    HcclCommWorkingDevNicSet,
    HcclCreateSubCommConfig,
    HcclReduceScatterV,
    HcclScatter,
    HcclZeroCopyActivateCommMemory,
    HcclZeroCopyDeactivateCommMemory,
    HcclZeroCopySetMemoryRange,
    HcclZeroCopyUnsetMemoryRange
);

// ---- torch_npu 2.14 link-time names (`real-clients.md` §3.3) --------------------------------------

/// `void aclAppLog(aclLogLevel logLevel, const char *func, const char *file, uint32_t line, const char *fmt, ...)`.
/// The real function writes to the CANN application log (never to stdout); the simulator writes the
/// record to stderr when `CANNSIM_LOG` is set. Stable Rust cannot define a C-variadic function, so this
/// is defined with the five fixed parameters (the x86-64 / AArch64 calling conventions pass them
/// identically) and the format string is logged without its arguments expanded.
#[no_mangle]
pub extern "C" fn aclAppLog(level: i32, func: *const c_char, file: *const c_char, line: u32, fmt: *const c_char) {
    guard((), || {
        if crate::log_enabled() {
            let lv = match level {
                0 => "DEBUG",
                1 => "INFO",
                2 => "WARNING",
                3 => "ERROR",
                _ => "EVENT",
            };
            crate::simlog!(
                "aclAppLog {lv} {}:{} {}: {}",
                cstr(file).unwrap_or_default(),
                line,
                cstr(func).unwrap_or_default(),
                cstr(fmt).unwrap_or_default()
            );
        }
    })
}

/// `aclError aclGetDeviceCapability(uint32_t deviceId, aclDeviceInfo deviceInfo, int64_t *value)`:
/// AI (cube) cores, vector cores and L2 size of the simulated Ascend910B1.
#[no_mangle]
pub extern "C" fn aclGetDeviceCapability(device_id: u32, info: i32, value: *mut i64) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if device_id >= device_count() {
            return fail(ACL_ERROR_RT_INVALID_DEVICEID, format!("device id {device_id} out of range"));
        }
        let v = match info {
            0 => 24,
            1 => 48,
            2 => 192 << 20,
            _ => return fail(ACL_ERROR_INVALID_PARAM, format!("aclDeviceInfo {info} is invalid")),
        };
        if put(value, v) {
            ACL_SUCCESS
        } else {
            fail(ACL_ERROR_INVALID_PARAM, "value is NULL")
        }
    })
}

/// `aclrtBinaryLoadFromData(const void *data, size_t length, const aclrtBinaryLoadOptions *options,
/// aclrtBinHandle *binHandle)`: device kernel binaries cannot run on the CPU simulator (207000).
#[no_mangle]
pub extern "C" fn aclrtBinaryLoadFromData(
    data: *const c_void,
    length: usize,
    _options: *const c_void,
    bin: *mut *mut c_void,
) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if data.is_null() || length == 0 || bin.is_null() {
            return fail(ACL_ERROR_INVALID_PARAM, "data, length and binHandle must be given");
        }
        not_supported("aclrtBinaryLoadFromData (device kernel binaries)")
    })
}

/// `aclrtBinaryLoadFromFile(const char *binPath, aclrtBinaryLoadOptions *options, aclrtBinHandle *binHandle)`.
#[no_mangle]
pub extern "C" fn aclrtBinaryLoadFromFile(
    path: *const c_char,
    _options: *const c_void,
    bin: *mut *mut c_void,
) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if path.is_null() || bin.is_null() {
            return fail(ACL_ERROR_INVALID_PARAM, "binPath and binHandle must be given");
        }
        not_supported("aclrtBinaryLoadFromFile (device kernel binaries)")
    })
}

/// `aclrtBinaryUnLoad(aclrtBinHandle binHandle)`: no binary is ever loaded, so every handle is invalid.
#[no_mangle]
pub extern "C" fn aclrtBinaryUnLoad(bin: *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if bin.is_null() {
            return fail(ACL_ERROR_INVALID_PARAM, "binHandle is NULL");
        }
        fail(ACL_ERROR_RT_PARAM_INVALID, "binHandle is not a loaded binary")
    })
}

/// `aclrtBinaryGetFunction(const aclrtBinHandle binHandle, const char *kernelName, aclrtFuncHandle *funcHandle)`.
#[no_mangle]
pub extern "C" fn aclrtBinaryGetFunction(bin: *mut c_void, name: *const c_char, func: *mut *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if bin.is_null() || name.is_null() || func.is_null() {
            return fail(ACL_ERROR_INVALID_PARAM, "binHandle, kernelName and funcHandle must be given");
        }
        fail(ACL_ERROR_RT_PARAM_INVALID, "binHandle is not a loaded binary")
    })
}

/// `aclrtGetFunctionAddr(aclrtFuncHandle funcHandle, void **aicAddr, void **aivAddr)`.
#[no_mangle]
pub extern "C" fn aclrtGetFunctionAddr(func: *mut c_void, aic: *mut *mut c_void, aiv: *mut *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        if func.is_null() || aic.is_null() || aiv.is_null() {
            return fail(ACL_ERROR_INVALID_PARAM, "funcHandle, aicAddr and aivAddr must be given");
        }
        fail(ACL_ERROR_RT_PARAM_INVALID, "funcHandle is not a function of a loaded binary")
    })
}
