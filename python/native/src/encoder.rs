//! The encoder: one per framework layer, it turns hooked calls into records through
//! libmsprobe.so's C ABI (values walked by [`crate::values`], stack frames from
//! [`crate::frames`]). The native L0 hooks ([`crate::hooks`]) record through it.

use std::collections::HashSet;
use std::ffi::CString;
use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::abi::{Abi, Rec};
use crate::frames::FrameCache;
use crate::values::{Kind, ValueCtx, Walker};

/// Records hooked calls for one framework.
#[pyclass(frozen, module = "msprobe._fastpath")]
pub struct Encoder {
    /// What the value walk reads (see [`ValueCtx`]).
    pub(crate) ctx: ValueCtx,
    warn: Py<PyAny>,
    frames: FrameCache,
    warned: Mutex<HashSet<String>>,
    /// A list output is split into items like a tuple (MindSpore).
    split_lists: bool,
    /// The module stack of the native L0 hooks (see [`Modules`]).
    modules: Mutex<Modules>,
}

/// The open modules of the native L0 hooks, innermost last, and the construct.json entries
/// (module, parent) noted since the last record: the Python layer's `state.module_stack` and
/// `state.pending`, kept here so that a module call costs no calls back into Python for them.
/// One per process like the Python state; emptied at each step (`reset_modules`).
#[derive(Default)]
pub(crate) struct Modules {
    pub(crate) stack: Vec<String>,
    pub(crate) pending: Vec<(String, Option<String>)>,
}

impl Modules {
    /// `name` starts under the innermost open module (returned) and becomes the innermost;
    /// with `construct`, its entry is noted.
    pub(crate) fn enter(&mut self, name: &str, construct: bool) -> Option<String> {
        let parent = self.stack.last().cloned();
        if construct {
            self.pending.push((name.to_owned(), parent.clone()));
        }
        self.stack.push(name.to_owned());
        parent
    }

    /// A module's record `name` ends: the innermost open module is removed, whichever it is,
    /// as 1.1.1's end hook pops its stack (see `state.pop_module`).
    pub(crate) fn pop(&mut self, _name: &str) {
        self.stack.pop();
    }
}

/// Where a record's construct.json entries come from.
#[derive(Clone, Copy)]
pub(crate) enum Pending<'a, 'py> {
    /// construct.json is not kept.
    No,
    /// The Python layer's `state.pending` list (emptied once noted).
    List(&'a Bound<'py, PyList>),
    /// [`Modules::pending`].
    Native,
}

impl<'a, 'py> Pending<'a, 'py> {
    pub(crate) fn from_list(list: Option<&'a Bound<'py, PyList>>) -> Self {
        list.map_or(Pending::No, Pending::List)
    }
}

#[pymethods]
impl Encoder {
    /// `handle`: ctypes' `CDLL._handle` of libmsprobe.so; `tensor_types`: classes read as
    /// tensors; `dtype_codes`: dtype object → aclDataType number; `strided`: the only layout read
    /// natively (None: any); `fallback(r, key, value, depth)`: the pure-Python encoder;
    /// `warn(msg)`: the layer's logger; `getline(file, line)`: linecache.getline;
    /// `special_keys`: keys whose values go to `fallback`; `stack_skip`: frames of files under
    /// this prefix are left out of stack.json; `split_lists`: see the field;
    /// `mean_norm`, `defer`: see [`ValueCtx`].
    #[new]
    #[pyo3(signature = (handle, kind, tensor_types, dtype_codes, strided, fallback, warn, getline,
                        special_keys=Vec::new(), stack_skip=None, split_lists=false,
                        mean_norm=None, defer=None))]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        py: Python<'_>,
        handle: usize,
        kind: &str,
        tensor_types: Py<PyTuple>,
        dtype_codes: Py<PyDict>,
        strided: Option<Py<PyAny>>,
        fallback: Py<PyAny>,
        warn: Py<PyAny>,
        getline: Py<PyAny>,
        special_keys: Vec<String>,
        stack_skip: Option<String>,
        split_lists: bool,
        mean_norm: Option<Py<PyAny>>,
        defer: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let kind = match kind {
            "torch" => Kind::Torch,
            "asnumpy" => Kind::AsNumpy,
            other => return Err(pyo3::exceptions::PyValueError::new_err(format!("unknown tensor kind {other:?}"))),
        };
        let abi = Abi::load(handle).map_err(pyo3::exceptions::PyOSError::new_err)?;
        let frame_type = py.import("types")?.getattr("FrameType")?.unbind();
        Ok(Encoder {
            ctx: ValueCtx {
                item_sizes: abi.item_sizes(),
                abi,
                kind,
                tensor_types,
                dtype_codes,
                strided,
                fallback,
                special_keys,
                mean_norm,
                defer,
            },
            warn,
            frames: FrameCache::new(getline, stack_skip, frame_type),
            warned: Mutex::new(HashSet::new()),
            split_lists,
            modules: Mutex::new(Modules::default()),
        })
    }

    /// Forward of a wrapped API (L1): takes the next index of `key` (`b"Functional.linear."`),
    /// and when capture is on begins `{key}{n}.forward` with its inputs and the stack from
    /// `frame`. Returns None when capture is off, else `(r, n, kept)` with `r` 0 when the record
    /// is filtered out; finish with [`Encoder::api_end`] or [`Encoder::abort`].
    pub(crate) fn api_begin<'py>(
        &self,
        py: Python<'py>,
        key: &[u8],
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
        frame: &Bound<'py, PyAny>,
    ) -> Option<(usize, i64, bool)> {
        self.guarded(py, None, || {
            let Ok(counter) = CString::new(key) else { return None };
            let n = self.ctx.abi.next(&counter);
            if !self.ctx.abi.enabled() {
                return None;
            }
            let mut name = key.to_vec();
            name.extend_from_slice(format!("{n}.forward").as_bytes());
            let Ok(name) = CString::new(name) else { return Some((0, n, false)) };
            let Some(r) = self.ctx.abi.begin(&name) else { return Some((0, n, false)) };
            let w = Walker { ctx: &self.ctx, py, r };
            match self.inputs(&w, args.as_any(), kwargs).and_then(|kept| self.stack(&w, frame).map(|_| kept)) {
                Ok(kept) => Some((r.0, n, kept)),
                Err(e) => {
                    self.failed(py, r, &e);
                    Some((0, n, false))
                }
            }
        })
    }

    /// The next index of `key` (a module's `b"Module.fc1.Linear.forward"`), or None when capture
    /// is off (nothing is counted then).
    pub(crate) fn index(&self, py: Python<'_>, key: &[u8]) -> Option<i64> {
        self.guarded(py, None, || {
            if !self.ctx.abi.enabled() {
                return None;
            }
            Some(self.ctx.abi.next(&CString::new(key).ok()?))
        })
    }

    /// construct.json entries, when capture is on: `name` under `parent`, then each
    /// `(module, parent)` of `pending` (modules started since the last entry), which is emptied.
    pub(crate) fn construct<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        parent: Option<&str>,
        pending: &Bound<'py, PyList>,
    ) {
        self.note(py, name, parent, pending);
    }

    /// Adds the output of a call begun by [`Encoder::api_begin`] and ends the record (see
    /// [`Encoder::settle`] for one whose sections data_mode all dropped).
    pub(crate) fn api_end<'py>(&self, py: Python<'py>, r: usize, kept: bool, output: &Bound<'py, PyAny>) {
        if r == 0 {
            return;
        }
        self.guarded(py, (), || {
            let w = Walker { ctx: &self.ctx, py, r: Rec(r) };
            let _ = kept;
            let res = self.output(&w, output);
            self.settle(py, w.r, res);
        })
    }

    /// Drops a begun record (the call raised).
    pub(crate) fn abort(&self, r: usize) {
        if r != 0 {
            self.ctx.abi.abort(Rec(r));
        }
    }

    /// A whole forward record at once (module hooks): inputs, output, stack from `frame`, or
    /// from the caller of the innermost frame of function `caller_of` (torch's `_call_impl`)
    /// at or above it. With `pending`, the construct.json entries follow, as
    /// [`Encoder::construct`] (also for a record filtered out). Returns whether the record was
    /// begun (capture on, not filtered out).
    #[pyo3(signature = (name, args, kwargs, output, frame, caller_of=None, parent=None, pending=None))]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn record<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        args: &Bound<'py, PyAny>,
        kwargs: Option<&Bound<'py, PyDict>>,
        output: &Bound<'py, PyAny>,
        frame: &Bound<'py, PyAny>,
        caller_of: Option<&str>,
        parent: Option<&str>,
        pending: Option<&Bound<'py, PyList>>,
    ) -> bool {
        self.whole(py, name, parent, Pending::from_list(pending), |w| {
            self.call_sections(w, args, kwargs, output, frame, caller_of)
        })
    }

    /// Empties the native hooks' module stack (a new step).
    pub(crate) fn reset_modules(&self) {
        *self.modules() = Modules::default();
    }

    /// A backward record: `input` = gradients flowing in, `output` = gradients produced; then
    /// the construct.json entries as [`Encoder::record`]. Returns whether the record was begun.
    #[pyo3(signature = (name, grads_in, grads_out, parent=None, pending=None))]
    pub(crate) fn backward<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        grads_in: &Bound<'py, PyAny>,
        grads_out: &Bound<'py, PyAny>,
        parent: Option<&str>,
        pending: Option<&Bound<'py, PyList>>,
    ) -> bool {
        self.whole(py, name, parent, Pending::from_list(pending), |w| self.grad_sections(w, grads_in, grads_out))
    }
}

impl Encoder {
    /// The sections of a forward record ([`Encoder::record`]): inputs, output, stack.
    pub(crate) fn call_sections<'py>(
        &self,
        w: &Walker<'_, 'py>,
        args: &Bound<'py, PyAny>,
        kwargs: Option<&Bound<'py, PyDict>>,
        output: &Bound<'py, PyAny>,
        frame: &Bound<'py, PyAny>,
        caller_of: Option<&str>,
    ) -> PyResult<bool> {
        let kept = self.inputs(w, args, kwargs)?;
        let kept = self.output(w, output)? || kept;
        match caller_of {
            Some(func) => self.stack(w, &crate::frames::caller_of(frame, func)?)?,
            None => self.stack(w, frame)?,
        }
        Ok(kept)
    }

    /// The sections of a backward record ([`Encoder::backward`]).
    pub(crate) fn grad_sections<'py>(
        &self,
        w: &Walker<'_, 'py>,
        grads_in: &Bound<'py, PyAny>,
        grads_out: &Bound<'py, PyAny>,
    ) -> PyResult<bool> {
        let kept = self.items(w, c"input", grads_in)?;
        Ok(self.items(w, c"output", grads_out)? || kept)
    }

    /// The native L0 hooks' module stack (held only for a push, a pop or a take, never while
    /// Python runs).
    pub(crate) fn modules(&self) -> std::sync::MutexGuard<'_, Modules> {
        self.modules.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A record built in one call: begins `name`, lets `build` add its sections (returning
    /// whether any was kept), ends it, then notes the construct.json entries from `pending`
    /// unless it is `Pending::No` (also for a record filtered out). Returns whether the record
    /// was begun.
    ///
    /// A written record carries its own entry (`name` under `parent`), which the writer inserts
    /// with it, in the order [`Encoder::construct`] would: that spares the recorder's lock and a
    /// message per entry, and in the common case (`pending` holds just this record's module)
    /// every separate entry.
    pub(crate) fn whole<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        parent: Option<&str>,
        pending: Pending<'_, 'py>,
        build: impl FnOnce(&Walker<'_, 'py>) -> PyResult<bool>,
    ) -> bool {
        let mut carried = false;
        let begun = self.guarded(py, false, || {
            let Some(r) = self.begin(name) else { return false };
            let w = Walker { ctx: &self.ctx, py, r };
            let res = build(&w);
            let noted = !matches!(pending, Pending::No);
            // an emptied record (data_mode) still carries its construct.json entry
            if let (true, Ok(_), Ok(p)) = (noted, &res, parent.map(CString::new).transpose()) {
                self.ctx.abi.parent(r, p.as_deref());
                carried = true;
            }
            self.settle(py, r, res);
            true
        });
        if !matches!(pending, Pending::No) {
            self.note_after(py, name, parent, carried, pending);
        }
        begun
    }

    /// Section `key` holding one leaf per item of `items` (any iterable); false when data_mode
    /// drops the section.
    pub(crate) fn items<'py>(
        &self,
        w: &Walker<'_, 'py>,
        key: &std::ffi::CStr,
        items: &Bound<'py, PyAny>,
    ) -> PyResult<bool> {
        if !self.ctx.abi.section(w.r, key) {
            return Ok(false);
        }
        w.add_all(items)?;
        Ok(true)
    }

    /// `args`: a tuple or any iterable of positional values.
    pub(crate) fn inputs<'py>(
        &self,
        w: &Walker<'_, 'py>,
        args: &Bound<'py, PyAny>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<bool> {
        let mut kept = self.items(w, c"input_args", args)?;
        if self.ctx.abi.section(w.r, c"input_kwargs") {
            kept = true;
            if let Some(kw) = kwargs {
                w.add_keyed(kw, 0)?;
            }
        }
        Ok(kept)
    }

    /// A tuple output (torch.return_types too) is one leaf per item, as msprobe does.
    /// A namedtuple output is a dict keyed by field, as msprobe writes it (its walk turns a
    /// namedtuple into a dict, and the output tuple is the namedtuple itself).
    pub(crate) fn output<'py>(&self, w: &Walker<'_, 'py>, output: &Bound<'py, PyAny>) -> PyResult<bool> {
        let py = output.py();
        if output.is_instance_of::<PyTuple>() {
            if let Ok(fields) = output.getattr(pyo3::intern!(py, "_fields")) {
                if fields.is_instance_of::<PyTuple>() {
                    if !self.ctx.abi.section(w.r, c"output_fields") {
                        return Ok(false);
                    }
                    for f in fields.try_iter()? {
                        let f = f?;
                        let key = f.str()?;
                        w.add(Some(&key), &output.getattr(key.clone())?, 0)?;
                    }
                    return Ok(true);
                }
            }
        }
        if !self.ctx.abi.section(w.r, c"output") {
            return Ok(false);
        }
        if output.is_instance_of::<PyTuple>() || (self.split_lists && output.is_instance_of::<PyList>()) {
            w.add_all(output)?;
        } else {
            w.add(None, output, 0)?;
        }
        Ok(true)
    }

    pub(crate) fn stack<'py>(&self, w: &Walker<'_, 'py>, frame: &Bound<'py, PyAny>) -> PyResult<()> {
        let frames = self.frames.frames(frame)?;
        self.ctx.abi.stack(w.r, &frames);
        Ok(())
    }

    /// See [`Encoder::construct`]; errors are logged once, never raised.
    pub(crate) fn note(&self, py: Python<'_>, name: &str, parent: Option<&str>, pending: &Bound<'_, PyList>) {
        self.note_after(py, name, parent, false, Pending::List(pending));
    }

    /// [`Encoder::note`] after a record that may already carry `name`'s entry (`carried`):
    /// then neither it nor an equal pending entry is sent again (the same key with the same
    /// value changes nothing in construct.json).
    pub(crate) fn note_after(
        &self,
        py: Python<'_>,
        name: &str,
        parent: Option<&str>,
        carried: bool,
        pending: Pending<'_, '_>,
    ) {
        let res = self.guarded(py, Ok(()), || -> PyResult<()> {
            if !self.ctx.abi.enabled() {
                return Ok(());
            }
            if !carried {
                self.construct_one(name, parent);
            }
            let one = |m: &str, p: Option<&str>| {
                if !(carried && m == name && p == parent) {
                    self.construct_one(m, p);
                }
            };
            match pending {
                Pending::No => {}
                Pending::List(list) => {
                    for item in list.iter() {
                        let (m, p): (String, Option<String>) = item.extract()?;
                        one(&m, p.as_deref());
                    }
                    list.call_method0(pyo3::intern!(py, "clear"))?;
                }
                Pending::Native => {
                    let entries = std::mem::take(&mut self.modules().pending);
                    for (m, p) in &entries {
                        one(m, p.as_deref());
                    }
                }
            }
            Ok(())
        });
        if let Err(e) = res {
            self.warn_once(py, format!("a construct.json entry could not be noted: {e}"));
        }
    }

    pub(crate) fn construct_one(&self, name: &str, parent: Option<&str>) {
        let (Ok(n), Ok(p)) = (CString::new(name), parent.map(CString::new).transpose()) else { return };
        self.ctx.abi.construct(&n, p.as_deref());
    }

    pub(crate) fn begin(&self, name: &str) -> Option<Rec> {
        self.ctx.abi.begin(&CString::new(name).ok()?)
    }

    /// Ends `r` after building it, or aborts it (error). A record whose sections data_mode all
    /// dropped is ended too: as msprobe 1.1.1, it has no dump.json entry (the writer leaves out an
    /// empty record) but keeps its stack.json and construct.json entries.
    pub(crate) fn settle(&self, py: Python<'_>, r: Rec, built: PyResult<bool>) {
        match built {
            Ok(_) => self.ctx.abi.end(r),
            Err(e) => self.failed(py, r, &e),
        }
    }

    /// Runs `f`; a panic (a bug here) gives `default` and one warning instead of an exception in
    /// the hooked program. The record being built is then lost (its handle is not freed).
    pub(crate) fn guarded<T>(&self, py: Python<'_>, default: T, f: impl FnOnce() -> T) -> T {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            Ok(v) => v,
            Err(_) => {
                self.warn_once(py, "msprobe._fastpath hit an internal error (a panic); that record was dropped".into());
                default
            }
        }
    }

    /// Aborts `r` and logs the error once per message; the hooked call goes on.
    pub(crate) fn failed(&self, py: Python<'_>, r: Rec, e: &PyErr) {
        self.ctx.abi.abort(r);
        if resurface_interrupt(py, e) {
            return;
        }
        self.warn_once(py, format!("a record could not be written and was dropped: {e}"));
    }

    pub(crate) fn warn_once(&self, py: Python<'_>, msg: String) {
        let first = self.warned.lock().unwrap_or_else(|p| p.into_inner()).insert(msg.clone());
        if first {
            let _ = self.warn.bind(py).call1((PyString::new(py, &msg),));
        }
    }
}

/// A Ctrl-C (KeyboardInterrupt) that Python raised while our hook ran Python code (the
/// framework's `mean_norm`, a fallback encoder) belongs to the user's program, not to the hook,
/// which drops its record and returns normally: the interrupt is set again, so Python raises it at
/// its next check, in the user's code. Returns whether `e` was one.
pub(crate) fn resurface_interrupt(py: Python<'_>, e: &PyErr) -> bool {
    if !e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) {
        return false;
    }
    // SAFETY: the GIL is held (`py`); PyErr_SetInterrupt only sets the interpreter's
    // pending-SIGINT flag, as the C signal handler does.
    unsafe { pyo3::ffi::PyErr_SetInterrupt() };
    true
}
