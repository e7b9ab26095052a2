//! acltdt (libacl_tdt_channel): host <-> device tensor channels. MindSpore creates channels at device init
//! and runs receiver threads that block in `acltdtReceiveTensor` (print / summary / mbuf channels).
//!
//! Channels are in-process queues of datasets: `acltdtSendTensor` enqueues a copy of the dataset's items
//! (blocking while the channel is at capacity), `acltdtReceiveTensor` blocks until a dataset arrives, the
//! timeout (ms; -1 = forever) expires (207013, queue empty) or the channel is stopped / destroyed (507000).
//! Nothing on the simulated device sends, so receivers simply wait, as on hardware without print ops.
use super::{cstr, guard, put, slice_to_vec};
use crate::consts::*;
use crate::errmsg::fail;
use std::collections::{HashMap, VecDeque};
use std::os::raw::{c_char, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

type AclError = i32;
use crate::consts::{ACL_ERROR_RT_QUEUE_EMPTY, ACL_ERROR_RT_QUEUE_FULL};

#[derive(Clone, Default)]
struct Item {
    tensor_type: i32,
    dims: Vec<i64>,
    dtype: i32,
    data: Vec<u8>,
}
#[derive(Default)]
struct Dataset {
    items: Vec<usize>,
    name: std::ffi::CString,
}
struct ChanState {
    queue: VecDeque<Vec<Item>>,
    stopped: bool,
}
struct Channel {
    capacity: usize,
    st: Mutex<ChanState>,
    cv: Condvar,
}

#[derive(Default)]
struct Tables {
    channels: HashMap<usize, Arc<Channel>>,
    datasets: HashMap<usize, Dataset>,
    items: HashMap<usize, Item>,
}
fn tables() -> &'static Mutex<Tables> {
    static T: OnceLock<Mutex<Tables>> = OnceLock::new();
    T.get_or_init(Default::default)
}
static NEXT: AtomicUsize = AtomicUsize::new(0x00d7_0000_0040);
fn handle() -> usize {
    NEXT.fetch_add(0x40, Ordering::Relaxed)
}

fn create_channel(name: *const c_char, capacity: usize) -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        if cstr(name).is_none() {
            fail(ACL_ERROR_INVALID_PARAM, "acltdtCreateChannel: name is NULL");
            return std::ptr::null_mut();
        }
        let h = handle();
        let ch = Channel {
            capacity: capacity.max(1),
            st: Mutex::new(ChanState { queue: VecDeque::new(), stopped: false }),
            cv: Condvar::new(),
        };
        tables().lock().unwrap().channels.insert(h, Arc::new(ch));
        h as *mut c_void
    })
}
#[no_mangle]
pub extern "C" fn acltdtCreateChannel(_device_id: u32, name: *const c_char) -> *mut c_void {
    create_channel(name, 128)
}
#[no_mangle]
pub extern "C" fn acltdtCreateChannelWithCapacity(
    _device_id: u32,
    name: *const c_char,
    capacity: usize,
) -> *mut c_void {
    create_channel(name, capacity)
}
fn channel(h: *const c_void) -> Option<Arc<Channel>> {
    tables().lock().unwrap().channels.get(&(h as usize)).cloned()
}
fn stop(ch: &Channel) {
    ch.st.lock().unwrap().stopped = true;
    ch.cv.notify_all();
}
#[no_mangle]
pub extern "C" fn acltdtStopChannel(h: *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || match channel(h) {
        Some(ch) => {
            stop(&ch);
            ACL_SUCCESS
        }
        None => fail(ACL_ERROR_INVALID_PARAM, "acltdtStopChannel: unknown channel"),
    })
}
#[no_mangle]
pub extern "C" fn acltdtDestroyChannel(h: *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || match tables().lock().unwrap().channels.remove(&(h as usize)) {
        Some(ch) => {
            stop(&ch);
            ACL_SUCCESS
        }
        None => fail(ACL_ERROR_INVALID_PARAM, "acltdtDestroyChannel: unknown channel"),
    })
}
#[no_mangle]
pub extern "C" fn acltdtCleanChannel(h: *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || match channel(h) {
        Some(ch) => {
            ch.st.lock().unwrap().queue.clear();
            ch.cv.notify_all();
            ACL_SUCCESS
        }
        None => fail(ACL_ERROR_INVALID_PARAM, "acltdtCleanChannel: unknown channel"),
    })
}
#[no_mangle]
pub extern "C" fn acltdtQueryChannelSize(h: *const c_void, size: *mut usize) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || match channel(h) {
        Some(ch) => {
            let n = ch.st.lock().unwrap().queue.len();
            if put(size, n) {
                ACL_SUCCESS
            } else {
                fail(ACL_ERROR_INVALID_PARAM, "size is NULL")
            }
        }
        None => fail(ACL_ERROR_INVALID_PARAM, "acltdtQueryChannelSize: unknown channel"),
    })
}

fn deadline(timeout_ms: i32) -> Option<Instant> {
    if timeout_ms < 0 {
        None
    } else {
        Some(Instant::now() + Duration::from_millis(timeout_ms as u64))
    }
}

#[no_mangle]
pub extern "C" fn acltdtSendTensor(h: *const c_void, dataset: *const c_void, timeout_ms: i32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        let Some(ch) = channel(h) else { return fail(ACL_ERROR_INVALID_PARAM, "acltdtSendTensor: unknown channel") };
        let items = {
            let t = tables().lock().unwrap();
            let Some(ds) = t.datasets.get(&(dataset as usize)) else {
                return fail(ACL_ERROR_INVALID_PARAM, "acltdtSendTensor: unknown dataset");
            };
            ds.items.iter().filter_map(|i| t.items.get(i).cloned()).collect::<Vec<_>>()
        };
        let dl = deadline(timeout_ms);
        let mut st = ch.st.lock().unwrap();
        while !st.stopped && st.queue.len() >= ch.capacity {
            st = match dl {
                None => ch.cv.wait(st).unwrap(),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return fail(ACL_ERROR_RT_QUEUE_FULL, "acltdtSendTensor: channel full (timeout)");
                    }
                    ch.cv.wait_timeout(st, d - now).unwrap().0
                }
            };
        }
        if st.stopped {
            return fail(ACL_ERROR_RT_INTERNAL_ERROR, "acltdtSendTensor: channel stopped");
        }
        st.queue.push_back(items);
        ch.cv.notify_all();
        ACL_SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn acltdtReceiveTensor(h: *const c_void, dataset: *mut c_void, timeout_ms: i32) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        let Some(ch) = channel(h) else { return fail(ACL_ERROR_INVALID_PARAM, "acltdtReceiveTensor: unknown channel") };
        if !tables().lock().unwrap().datasets.contains_key(&(dataset as usize)) {
            return fail(ACL_ERROR_INVALID_PARAM, "acltdtReceiveTensor: unknown dataset");
        }
        let dl = deadline(timeout_ms);
        let items = {
            let mut st = ch.st.lock().unwrap();
            loop {
                if st.stopped {
                    return fail(ACL_ERROR_RT_INTERNAL_ERROR, "acltdtReceiveTensor: channel stopped");
                }
                if let Some(x) = st.queue.pop_front() {
                    ch.cv.notify_all();
                    break x;
                }
                st = match dl {
                    None => ch.cv.wait(st).unwrap(),
                    Some(d) => {
                        let now = Instant::now();
                        if now >= d {
                            return ACL_ERROR_RT_QUEUE_EMPTY;
                        }
                        ch.cv.wait_timeout(st, d - now).unwrap().0
                    }
                };
            }
        };
        let mut t = tables().lock().unwrap();
        let ids: Vec<usize> = items
            .into_iter()
            .map(|it| {
                let id = handle();
                t.items.insert(id, it);
                id
            })
            .collect();
        if let Some(ds) = t.datasets.get_mut(&(dataset as usize)) {
            ds.items = ids;
        }
        ACL_SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn acltdtCreateDataset() -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        let h = handle();
        tables().lock().unwrap().datasets.insert(h, Dataset::default());
        h as *mut c_void
    })
}
/// Destroys the dataset only; items added by the caller are destroyed by the caller.
#[no_mangle]
pub extern "C" fn acltdtDestroyDataset(ds: *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || match tables().lock().unwrap().datasets.remove(&(ds as usize)) {
        Some(_) => ACL_SUCCESS,
        None => fail(ACL_ERROR_INVALID_PARAM, "acltdtDestroyDataset: unknown dataset"),
    })
}
#[no_mangle]
pub extern "C" fn acltdtAddDataItem(ds: *mut c_void, item: *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || {
        let mut t = tables().lock().unwrap();
        if !t.items.contains_key(&(item as usize)) {
            return fail(ACL_ERROR_INVALID_PARAM, "acltdtAddDataItem: unknown item");
        }
        match t.datasets.get_mut(&(ds as usize)) {
            Some(d) => {
                d.items.push(item as usize);
                ACL_SUCCESS
            }
            None => fail(ACL_ERROR_INVALID_PARAM, "acltdtAddDataItem: unknown dataset"),
        }
    })
}
#[no_mangle]
pub extern "C" fn acltdtGetDatasetSize(ds: *const c_void) -> usize {
    guard(0, || tables().lock().unwrap().datasets.get(&(ds as usize)).map_or(0, |d| d.items.len()))
}
#[no_mangle]
pub extern "C" fn acltdtGetDatasetName(ds: *const c_void) -> *const c_char {
    guard(std::ptr::null(), || {
        tables().lock().unwrap().datasets.get(&(ds as usize)).map_or(std::ptr::null(), |d| d.name.as_ptr())
    })
}
#[no_mangle]
pub extern "C" fn acltdtGetDataItem(ds: *const c_void, index: usize) -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        tables()
            .lock()
            .unwrap()
            .datasets
            .get(&(ds as usize))
            .and_then(|d| d.items.get(index))
            .map_or(std::ptr::null_mut(), |&i| i as *mut c_void)
    })
}
/// `acltdtCreateDataItem(tdtType, dims, dimNum, dataType, data, size)`: the data is copied.
#[no_mangle]
pub extern "C" fn acltdtCreateDataItem(
    tensor_type: i32,
    dims: *const i64,
    dim_num: usize,
    dtype: i32,
    data: *const c_void,
    size: usize,
) -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        let (Some(dims), Some(data)) = (slice_to_vec(dims, dim_num), slice_to_vec(data as *const u8, size)) else {
            fail(ACL_ERROR_INVALID_PARAM, "acltdtCreateDataItem: NULL dims or data");
            return std::ptr::null_mut();
        };
        let h = handle();
        tables().lock().unwrap().items.insert(h, Item { tensor_type, dims, dtype, data });
        h as *mut c_void
    })
}
#[no_mangle]
pub extern "C" fn acltdtDestroyDataItem(item: *mut c_void) -> AclError {
    guard(ACL_ERROR_INTERNAL_ERROR, || match tables().lock().unwrap().items.remove(&(item as usize)) {
        Some(_) => ACL_SUCCESS,
        None => fail(ACL_ERROR_INVALID_PARAM, "acltdtDestroyDataItem: unknown item"),
    })
}
fn with_item<T>(item: *const c_void, default: T, f: impl FnOnce(&Item) -> T) -> T {
    guard(default, || {
        let t = tables().lock().unwrap();
        match t.items.get(&(item as usize)) {
            Some(i) => f(i),
            None => panic!("unknown item"),
        }
    })
}
#[no_mangle]
pub extern "C" fn acltdtGetTensorTypeFromItem(item: *const c_void) -> i32 {
    with_item(item, -1, |i| i.tensor_type)
}
#[no_mangle]
pub extern "C" fn acltdtGetDataTypeFromItem(item: *const c_void) -> i32 {
    with_item(item, -1, |i| i.dtype)
}
#[no_mangle]
pub extern "C" fn acltdtGetDataSizeFromItem(item: *const c_void) -> usize {
    with_item(item, 0, |i| i.data.len())
}
#[no_mangle]
pub extern "C" fn acltdtGetDataAddrFromItem(item: *const c_void) -> *mut c_void {
    with_item(item, std::ptr::null_mut(), |i| i.data.as_ptr() as *mut c_void)
}
#[no_mangle]
pub extern "C" fn acltdtGetDimNumFromItem(item: *const c_void) -> usize {
    with_item(item, 0, |i| i.dims.len())
}
#[no_mangle]
pub extern "C" fn acltdtGetDimsFromItem(item: *const c_void, dims: *mut i64, num: usize) -> AclError {
    with_item(item, ACL_ERROR_INVALID_PARAM, |i| {
        if dims.is_null() || num < i.dims.len() {
            return fail(ACL_ERROR_INVALID_PARAM, "acltdtGetDimsFromItem: buffer NULL or too small");
        }
        // SAFETY: the caller passes `num` entries.
        unsafe { std::ptr::copy_nonoverlapping(i.dims.as_ptr(), dims, i.dims.len()) };
        ACL_SUCCESS
    })
}
#[no_mangle]
pub extern "C" fn acltdtGetSliceInfoFromItem(
    item: *const c_void,
    slice_num: *mut usize,
    slice_id: *mut usize,
) -> AclError {
    with_item(item, ACL_ERROR_INVALID_PARAM, |_| {
        put(slice_num, 1);
        put(slice_id, 0);
        ACL_SUCCESS
    })
}
