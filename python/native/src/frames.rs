//! stack.json frames: msprobe 1.1.1 calls `inspect.stack()` per record (half its cost). We walk
//! `f_back` from the hook's caller and format each call site once, as msprobe's
//! `File {path}, line {n}, in {func}, \n {source}`. Frames without source text are skipped, as
//! msprobe does.

use std::collections::HashMap;
use std::ffi::{c_int, c_void, CStr, CString};
use std::sync::{Mutex, OnceLock};

use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;

/// CPython's frame accessors outside the stable ABI this module is built for
/// (`PyFrame_GetBack`, 3.9+; `PyFrame_GetLasti`, 3.11+), looked up in the running interpreter.
/// They read what the `f_back` and `f_lasti` attributes return, without an attribute lookup
/// and an int object per frame (the walk is most of a record's stack cost). None on an
/// interpreter without them: the walk then reads the attributes.
struct FrameApi {
    back: unsafe extern "C" fn(*mut ffi::PyFrameObject) -> *mut ffi::PyFrameObject,
    lasti: unsafe extern "C" fn(*mut ffi::PyFrameObject) -> c_int,
}

fn frame_api() -> Option<&'static FrameApi> {
    static API: OnceLock<Option<FrameApi>> = OnceLock::new();
    API.get_or_init(|| {
        // SAFETY: dlsym with RTLD_DEFAULT and NUL-terminated names only reads them; the symbols,
        // when the interpreter exports them, are the documented C API functions of these exact
        // signatures.
        unsafe {
            let back = libc::dlsym(libc::RTLD_DEFAULT, c"PyFrame_GetBack".as_ptr());
            let lasti = libc::dlsym(libc::RTLD_DEFAULT, c"PyFrame_GetLasti".as_ptr());
            if back.is_null() || lasti.is_null() {
                return None;
            }
            Some(FrameApi {
                back: std::mem::transmute::<
                    *mut c_void,
                    unsafe extern "C" fn(*mut ffi::PyFrameObject) -> *mut ffi::PyFrameObject,
                >(back),
                lasti: std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*mut ffi::PyFrameObject) -> c_int>(
                    lasti,
                ),
            })
        }
    })
    .as_ref()
}

/// Formatted frames by (code object address, bytecode offset): the offset is a plain integer
/// on the frame, while `f_lineno` decodes the line table, so the line is computed only when a
/// key is new. Entries are never removed: the strings are leaked so their pointers stay valid
/// without holding the lock, and the code objects are kept alive so an address is never reused
/// for another function. The size is bounded by the number of distinct call sites that reach
/// hooked code.
pub struct FrameCache {
    map: Mutex<HashMap<(usize, i64), Option<&'static CStr>>>,
    keep: Mutex<Vec<Py<PyAny>>>,
    getline: Py<PyAny>,
    /// Frames of files under this prefix (the layer's own code) are left out.
    skip: Option<String>,
    /// `types.FrameType`: only frame objects are walked through the C functions.
    frame_type: Py<PyAny>,
}

impl FrameCache {
    pub fn new(getline: Py<PyAny>, skip: Option<String>, frame_type: Py<PyAny>) -> Self {
        FrameCache { map: Mutex::new(HashMap::new()), keep: Mutex::new(Vec::new()), getline, skip, frame_type }
    }

    /// The formatted frames from `frame` outwards (innermost first). The lock is taken once for
    /// the lookups and never held while Python runs (linecache may release the GIL).
    pub fn frames<'py>(&self, frame: &Bound<'py, PyAny>) -> PyResult<Vec<&'static CStr>> {
        let py = frame.py();
        let mut frames = Vec::with_capacity(32);
        let mut keys = Vec::with_capacity(32);
        match frame_api() {
            Some(api) if frame.get_type().is(self.frame_type.bind(py)) => walk_c(api, frame, &mut frames, &mut keys),
            _ => {
                let mut f = frame.clone();
                while !f.is_none() {
                    let code = f.getattr(intern!(py, "f_code"))?;
                    let lasti: i64 = f.getattr(intern!(py, "f_lasti"))?.extract().unwrap_or(-1);
                    keys.push((code.as_ptr() as usize, lasti));
                    let back = f.getattr(intern!(py, "f_back"))?;
                    frames.push(f);
                    f = back;
                }
            }
        }
        let mut found: Vec<Option<Option<&'static CStr>>> = {
            let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
            keys.iter().map(|k| map.get(k).copied()).collect()
        };
        for (i, (f, key)) in frames.iter().zip(&keys).enumerate() {
            if found[i].is_some() {
                continue;
            }
            let code = f.getattr(intern!(py, "f_code"))?;
            let line: i64 = f.getattr(intern!(py, "f_lineno"))?.extract().unwrap_or(0);
            let s = self.format(&code, line)?;
            self.keep.lock().unwrap_or_else(|e| e.into_inner()).push(code.clone().unbind());
            self.map.lock().unwrap_or_else(|e| e.into_inner()).insert(*key, s);
            found[i] = Some(s);
        }
        Ok(found.into_iter().flatten().flatten().collect())
    }

    fn format(&self, code: &Bound<'_, PyAny>, line: i64) -> PyResult<Option<&'static CStr>> {
        let py = code.py();
        let file = code.getattr(intern!(py, "co_filename"))?;
        if let Some(skip) = &self.skip {
            if file.extract::<&str>().is_ok_and(|f| f.starts_with(skip.as_str())) {
                return Ok(None);
            }
        }
        let src = self.getline.bind(py).call1((&file, line))?;
        let src: String = src.extract()?;
        let src = src.trim();
        if src.is_empty() {
            return Ok(None);
        }
        let file: String = file.extract()?;
        let func: String = code.getattr(intern!(py, "co_name"))?.extract()?;
        let s = format!("File {file}, line {line}, in {func}, \n {src}");
        Ok(CString::new(s).ok().map(|c| &*Box::leak(c.into_boxed_c_str())))
    }
}

/// The frames from `frame` (a frame object) outwards and their cache keys, as the attribute walk
/// gives them, through the C functions.
fn walk_c<'py>(
    api: &FrameApi,
    frame: &Bound<'py, PyAny>,
    frames: &mut Vec<Bound<'py, PyAny>>,
    keys: &mut Vec<(usize, i64)>,
) {
    let py = frame.py();
    let mut f = frame.clone();
    loop {
        let fp = f.as_ptr().cast::<ffi::PyFrameObject>();
        // SAFETY: `f` is a live frame object (checked type for the first, and PyFrame_GetBack
        // returns frame objects), kept alive by the Bound for these calls. PyFrame_GetCode and
        // PyFrame_GetBack return new references (the code never NULL, the back frame NULL at the
        // outermost frame), owned by the Bounds made from them.
        let (code, lasti, back) = unsafe {
            let code = Bound::from_owned_ptr(py, ffi::PyFrame_GetCode(fp).cast::<ffi::PyObject>());
            let lasti = (api.lasti)(fp);
            let back = (api.back)(fp);
            (code, lasti, (!back.is_null()).then(|| Bound::from_owned_ptr(py, back.cast::<ffi::PyObject>())))
        };
        // The code object stays alive while its frame (in `frames`) does.
        keys.push((code.as_ptr() as usize, lasti as i64));
        frames.push(f);
        match back {
            Some(b) => f = b,
            None => break,
        }
    }
}

/// The caller of the innermost frame of function `func` at or above `frame` (msprobe's module
/// stacks start at the caller of torch's `Module._call_impl`), or `frame` when there is none.
pub fn caller_of<'py>(frame: &Bound<'py, PyAny>, func: &str) -> PyResult<Bound<'py, PyAny>> {
    let py = frame.py();
    let mut f = frame.clone();
    while !f.is_none() {
        let back = f.getattr(intern!(py, "f_back"))?;
        if f.getattr(intern!(py, "f_code"))?.getattr(intern!(py, "co_name"))?.extract::<&str>()? == func {
            return Ok(back);
        }
        f = back;
    }
    Ok(frame.clone())
}
