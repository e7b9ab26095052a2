//! stack.json frames: msprobe 1.1.1 calls `inspect.stack()` per record (half its cost). We walk
//! `f_back` from the hook's caller and format each call site once, as msprobe's
//! `File {path}, line {n}, in {func}, \n {source}`. Frames without source text are skipped, as
//! msprobe does.

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::sync::Mutex;

use pyo3::intern;
use pyo3::prelude::*;

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
}

impl FrameCache {
    pub fn new(getline: Py<PyAny>, skip: Option<String>) -> Self {
        FrameCache { map: Mutex::new(HashMap::new()), keep: Mutex::new(Vec::new()), getline, skip }
    }

    /// The formatted frames from `frame` outwards (innermost first). The lock is taken once for
    /// the lookups and never held while Python runs (linecache may release the GIL).
    pub fn frames<'py>(&self, frame: &Bound<'py, PyAny>) -> PyResult<Vec<&'static CStr>> {
        let py = frame.py();
        let mut frames = Vec::with_capacity(32);
        let mut keys = Vec::with_capacity(32);
        let mut f = frame.clone();
        while !f.is_none() {
            let code = f.getattr(intern!(py, "f_code"))?;
            let lasti: i64 = f.getattr(intern!(py, "f_lasti"))?.extract().unwrap_or(-1);
            keys.push((code.as_ptr() as usize, lasti));
            let back = f.getattr(intern!(py, "f_back"))?;
            frames.push(f);
            f = back;
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
