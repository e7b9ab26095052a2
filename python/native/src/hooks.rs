//! L0 module hooks, natively: the twin of the Python `module_hooks._LeanHooks` (same calls into
//! torch, same records, same order), without the interpreter between them. At L0 the hooks' own
//! Python (bookkeeping objects, closures, attribute lookups) cost as much as the records.
//!
//! Per module call: the forward pre-hook numbers the record, notes its parent and clones the
//! tensor inputs that require grad, hooking the clones' gradients; the forward hook records
//! and does the same for the outputs. The backward record starts when the output gradients are
//! there and ends when the input gradients are (at once when no input requires grad).
//!
//! Errors never reach the hooked program: a hook that fails logs once and leaves the module's
//! values as they are.

use std::ffi::CString;
use std::sync::{Mutex, MutexGuard};

use pyo3::exceptions::{PyAttributeError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::encoder::{Encoder, Pending};

/// What the hooks call in torch and in the layer, looked up once by the Python side.
pub struct Env {
    /// construct.json is kept (`state.construct`, fixed by the level before hooks are set).
    pub construct: bool,
    pub is_grad_enabled: Py<PyAny>,
    pub tensor_type: Py<PyAny>,
    /// `torch.autograd.graph.register_multi_grad_hook`.
    pub multi_grad_hook: Py<PyAny>,
    pub zeros: Py<PyAny>,
}

impl Env {
    fn clone_ref(&self, py: Python<'_>) -> Env {
        Env {
            construct: self.construct,
            is_grad_enabled: self.is_grad_enabled.clone_ref(py),
            tensor_type: self.tensor_type.clone_ref(py),
            multi_grad_hook: self.multi_grad_hook.clone_ref(py),
            zeros: self.zeros.clone_ref(py),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One forward call of a module: where its tensor inputs and outputs sit, and the output
/// gradients once they are there (its records' names: `LeanHooks::last`).
#[pyclass(frozen, module = "msprobe._fastpath")]
pub struct Call {
    n_in: usize,
    io: Mutex<CallIo>,
}

#[derive(Default)]
struct CallIo {
    /// Tensor input positions; None: no input requires grad.
    in_idx: Option<Vec<usize>>,
    /// (shape, dtype, device) per tensor input.
    in_meta: Vec<(Py<PyAny>, Py<PyAny>, Py<PyAny>)>,
    /// The tensor inputs that require grad (the first position of each distinct tensor).
    grad_idx: Vec<usize>,
    /// Per argument position, the first position holding the same tensor object (the module
    /// gets one clone per distinct tensor, so `attn(x, x, x)` still sees `q is k is v`).
    alias: Vec<usize>,
    n_out: usize,
    out_idx: Vec<usize>,
    grad_out: Option<Py<PyTuple>>,
}

/// The L0 hooks of one module (`Module.{path}.{Class}.`).
#[pyclass(frozen, module = "msprobe._fastpath")]
pub struct LeanHooks {
    enc: Py<Encoder>,
    fwd_key: CString,
    bwd_key: CString,
    fwd_name: String,
    bwd_name: String,
    env: Env,
    /// Open forward calls, innermost last (None: begun while capture was off).
    calls: Mutex<Vec<Option<Py<Call>>>>,
    /// Open backward records (name, parent), innermost last.
    bwd: Mutex<Vec<(String, Option<String>)>>,
    /// (name, parent) of this module's latest forward or backward start: its records are named
    /// after it, as 1.1.1 names them after `module.mindstudio_reserved_name` (see `_LeanHooks.last`).
    last: Mutex<(String, Option<String>)>,
}

/// A gradient hook's callable: which gradients arrived for which call.
#[pyclass(frozen, module = "msprobe._fastpath")]
pub struct GradDone {
    hooks: Py<LeanHooks>,
    call: Py<Call>,
    kind: Done,
}

#[derive(Clone, Copy)]
enum Done {
    /// The gradient of a module's only argument (a tensor hook: one tensor).
    Arg,
    /// The gradient of the one tensor input that requires grad among several arguments.
    Input,
    /// The inputs' gradients (a multi-grad hook: a sequence).
    Inputs,
    Output,
    Outputs,
}

#[pymethods]
impl GradDone {
    fn __call__(&self, py: Python<'_>, grads: &Bound<'_, PyAny>) {
        let hooks = self.hooks.get();
        let call = self.call.bind(py);
        let res = hooks.guarded(py, || match self.kind {
            Done::Arg => PyTuple::new(py, [grads]).and_then(|g| hooks.backward_record(py, call, &g)),
            Done::Input => hooks.inputs_done(py, call, vec![grads.clone()]),
            Done::Inputs => grads
                .try_iter()
                .and_then(|it| it.collect::<PyResult<Vec<_>>>())
                .and_then(|g| hooks.inputs_done(py, call, g)),
            Done::Output => hooks.outputs_done(py, call, vec![grads.clone()]),
            Done::Outputs => grads
                .try_iter()
                .and_then(|it| it.collect::<PyResult<Vec<_>>>())
                .and_then(|g| hooks.outputs_done(py, call, g)),
        });
        hooks.report(py, res);
    }
}

#[pymethods]
impl LeanHooks {
    /// The L0 hooks of the module whose records are named `Module.{path}.{Class}.` (`prefix`),
    /// recording through `encoder`. `state` is the layer's hooking state, read once
    /// (`construct`: construct.json is kept; the module stack is the encoder's own); the rest are
    /// torch's functions the hooks call.
    #[new]
    fn py_new(
        encoder: &Bound<'_, Encoder>,
        prefix: &str,
        state: Py<PyAny>,
        is_grad_enabled: Py<PyAny>,
        tensor_type: Py<PyAny>,
        multi_grad_hook: Py<PyAny>,
        zeros: Py<PyAny>,
    ) -> PyResult<LeanHooks> {
        let py = encoder.py();
        let construct = state.bind(py).getattr("construct")?.is_truthy()?;
        let env = Env { construct, is_grad_enabled, tensor_type, multi_grad_hook, zeros };
        LeanHooks::new(encoder.clone().unbind(), prefix, &env, py)
    }

    /// Forward pre-hook: returns the new positional arguments (clones) or None.
    fn pre<'py>(slf: &Bound<'py, Self>, _module: &Bound<'py, PyAny>, args: &Bound<'py, PyTuple>) -> Option<Py<PyAny>> {
        let h = slf.get();
        let py = slf.py();
        let res = h.guarded(py, || h.pre_inner(slf, args));
        h.report(py, res).flatten()
    }

    /// Forward hook (with kwargs): records the call; returns the new output (clones) or None.
    fn post<'py>(
        slf: &Bound<'py, Self>,
        _module: &Bound<'py, PyAny>,
        args: &Bound<'py, PyAny>,
        kwargs: &Bound<'py, PyAny>,
        output: &Bound<'py, PyAny>,
    ) -> Option<Py<PyAny>> {
        let h = slf.get();
        let py = slf.py();
        let res = h.guarded(py, || h.post_inner(slf, args, kwargs, output));
        h.report(py, res).flatten()
    }
}

impl LeanHooks {
    pub fn new(enc: Py<Encoder>, prefix: &str, env: &Env, py: Python<'_>) -> PyResult<LeanHooks> {
        let key = |d: &str| {
            CString::new(format!("{prefix}{d}.")).map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
        };
        Ok(LeanHooks {
            enc,
            fwd_key: key("forward")?,
            bwd_key: key("backward")?,
            fwd_name: format!("{prefix}forward."),
            bwd_name: format!("{prefix}backward."),
            env: env.clone_ref(py),
            calls: Mutex::new(Vec::new()),
            bwd: Mutex::new(Vec::new()),
            last: Mutex::new((String::new(), None)),
        })
    }

    fn enc(&self) -> &Encoder {
        self.enc.get()
    }

    /// Runs `f`; a panic becomes an error (reported like the others).
    fn guarded<T>(&self, _py: Python<'_>, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
            .unwrap_or_else(|_| Err(pyo3::exceptions::PyRuntimeError::new_err("internal error (a panic)")))
    }

    /// The value, or None with one warning per message: the module runs on as without hooks.
    fn report<T>(&self, py: Python<'_>, res: PyResult<T>) -> Option<T> {
        match res {
            Ok(v) => Some(v),
            Err(e) => {
                if !crate::encoder::resurface_interrupt(py, &e) {
                    self.enc().warn_once(py, format!("an L0 hook failed and was skipped: {e}"));
                }
                None
            }
        }
    }

    fn grad_enabled(&self, py: Python<'_>) -> PyResult<bool> {
        self.env.is_grad_enabled.bind(py).call0()?.is_truthy()
    }

    fn is_tensor(&self, v: &Bound<'_, PyAny>) -> PyResult<bool> {
        v.is_instance(self.env.tensor_type.bind(v.py()))
    }

    fn requires_grad(&self, v: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.is_tensor(v)? && v.getattr(intern!(v.py(), "requires_grad"))?.is_truthy()?)
    }

    /// The next record name from `key` with its parent noted (the module stack's `enter`, as
    /// `state.enter_module` in the Python hooks), or None when capture is off (nothing is
    /// counted then).
    fn enter(&self, key: &CString, prefix: &str) -> Option<(String, Option<String>)> {
        let abi = &self.enc().ctx.abi;
        if !abi.enabled() {
            return None;
        }
        let name = format!("{prefix}{}", abi.next(key));
        let parent = self.enc().modules().enter(&name, self.env.construct);
        *lock(&self.last) = (name.clone(), parent.clone());
        Some((name, parent))
    }

    fn pop_module(&self, name: &str) {
        self.enc().modules().pop(name);
    }

    /// Where a record's construct.json entries come from.
    fn pending(&self) -> Pending<'static, 'static> {
        if self.env.construct {
            Pending::Native
        } else {
            Pending::No
        }
    }

    fn done(&self, slf: &Bound<'_, Self>, call: &Py<Call>, kind: Done) -> PyResult<Py<GradDone>> {
        let py = slf.py();
        Py::new(py, GradDone { hooks: slf.clone().unbind(), call: call.clone_ref(py), kind })
    }

    fn pre_inner<'py>(&self, slf: &Bound<'py, Self>, args: &Bound<'py, PyTuple>) -> PyResult<Option<Py<PyAny>>> {
        let py = slf.py();
        if self.enter(&self.fwd_key, &self.fwd_name).is_none() {
            lock(&self.calls).push(None); // capture off: the module runs exactly as without hooks
            return Ok(None);
        }
        let call = Py::new(py, Call { n_in: args.len(), io: Mutex::new(CallIo::default()) })?;
        lock(&self.calls).push(Some(call.clone_ref(py)));
        if !self.grad_enabled(py)? {
            return Ok(None);
        }
        if args.len() == 1 {
            // The common case, without the bookkeeping below.
            let a = args.get_item(0)?;
            if !self.requires_grad(&a)? {
                return Ok(None);
            }
            {
                let mut io = lock(&call.get().io);
                io.in_idx = Some(vec![0]);
                io.grad_idx = vec![0];
            }
            let new = a.call_method0(intern!(py, "clone"))?;
            on_grad(&new, self.done(slf, &call, Done::Arg)?.bind(py).as_any())?;
            return Ok(Some(PyTuple::new(py, [new])?.into_any().unbind()));
        }
        let items: Vec<Bound<'py, PyAny>> = args.iter().collect();
        let alias: Vec<usize> =
            items.iter().enumerate().map(|(i, a)| items[..i].iter().position(|b| b.is(a)).unwrap_or(i)).collect();
        let mut grad_idx = Vec::new();
        let mut idx = Vec::new();
        for (i, a) in items.iter().enumerate() {
            if self.is_tensor(a)? {
                idx.push(i);
                if alias[i] == i && a.getattr(intern!(py, "requires_grad"))?.is_truthy()? {
                    grad_idx.push(i);
                }
            }
        }
        if grad_idx.is_empty() {
            return Ok(None);
        }
        let mut new: Vec<Bound<'py, PyAny>> = Vec::with_capacity(items.len());
        let mut meta = Vec::with_capacity(idx.len());
        for (i, a) in items.iter().enumerate() {
            if alias[i] != i {
                let first = new[alias[i]].clone();
                new.push(first);
            } else if self.is_tensor(a)? {
                new.push(a.call_method0(intern!(py, "clone"))?);
            } else {
                new.push(a.clone());
            }
            if self.is_tensor(a)? {
                meta.push((
                    a.getattr(intern!(py, "shape"))?.unbind(),
                    a.getattr(intern!(py, "dtype"))?.unbind(),
                    a.getattr(intern!(py, "device"))?.unbind(),
                ));
            }
        }
        let hooked: Vec<Bound<'py, PyAny>> = grad_idx.iter().map(|&i| new[i].clone()).collect();
        {
            let mut io = lock(&call.get().io);
            io.in_idx = Some(idx);
            io.grad_idx = grad_idx;
            io.in_meta = meta;
            io.alias = alias;
        }
        self.grads_hook(py, hooked, self.done(slf, &call, Done::Input)?, self.done(slf, &call, Done::Inputs)?)?;
        Ok(Some(PyTuple::new(py, new)?.into_any().unbind()))
    }

    fn post_inner<'py>(
        &self,
        slf: &Bound<'py, Self>,
        args: &Bound<'py, PyAny>,
        kwargs: &Bound<'py, PyAny>,
        output: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Py<PyAny>>> {
        let py = slf.py();
        let Some(call) = lock(&self.calls).pop().flatten() else { return Ok(None) };
        let c = call.get();
        // The hook's caller, torch's `_call_impl` (this function has no Python frame).
        // SAFETY: called with the GIL held from Python code, so the current frame is a live
        // frame object (or NULL); the borrowed reference is turned into an owned one at once.
        let frame = unsafe {
            let f = pyo3::ffi::PyEval_GetFrame();
            if f.is_null() {
                py.None().into_bound(py)
            } else {
                Bound::from_borrowed_ptr(py, f.cast::<pyo3::ffi::PyObject>())
            }
        };
        let kwargs = kwargs.cast::<PyDict>().ok();
        // construct entries for filtered-out records too, as 1.1.1
        let enc = self.enc();
        let (name, parent) = lock(&self.last).clone();
        enc.whole(py, &name, parent.as_deref(), self.pending(), |w| {
            enc.call_sections(w, args, kwargs, output, &frame, Some("_call_impl"))
        });
        self.pop_module(&name);
        if !self.grad_enabled(py)? {
            return Ok(None);
        }
        if self.is_tensor(output)? {
            if !output.getattr(intern!(py, "requires_grad"))?.is_truthy()? {
                return Ok(None);
            }
            {
                let mut io = lock(&c.io);
                io.n_out = 1;
                io.out_idx = vec![0];
            }
            let new = output.call_method0(intern!(py, "clone"))?;
            on_grad(&new, self.done(slf, &call, Done::Output)?.bind(py).as_any())?;
            return Ok(Some(new.unbind()));
        }
        // As 1.1.1 (torch's BackwardHook on what its filter lets through): a tensor or a tuple
        // gets a backward record; in a tuple the tensors at its top level are hooked, other
        // items (None, a nested tuple) stay and get null gradients (MultiheadAttention's
        // `(out, None)`, LSTM's `(out, (h, c))`).
        let Ok(tuple) = output.cast::<PyTuple>() else { return Ok(None) };
        if tuple.is_empty() {
            return Ok(None);
        }
        let items: Vec<Bound<'py, PyAny>> = tuple.iter().collect();
        let mut out_idx = Vec::new();
        for (i, o) in items.iter().enumerate() {
            if self.requires_grad(o)? {
                out_idx.push(i);
            }
        }
        if out_idx.is_empty() {
            return Ok(None);
        }
        let clones = items
            .iter()
            .map(|o| if self.is_tensor(o)? { o.call_method0(intern!(py, "clone")) } else { Ok(o.clone()) })
            .collect::<PyResult<Vec<_>>>()?;
        let new = if output.get_type().is(py.get_type::<PyTuple>()) {
            PyTuple::new(py, &clones)?.into_any()
        } else {
            // A namedtuple keeps its type, as torch's BackwardHook does; one that cannot be
            // rebuilt stays as it is, without a backward record.
            match output.get_type().call1(PyTuple::new(py, &clones)?) {
                Ok(v) => v,
                Err(_) => return Ok(None),
            }
        };
        let hooked: Vec<Bound<'py, PyAny>> = out_idx.iter().map(|&i| clones[i].clone()).collect();
        {
            let mut io = lock(&c.io);
            io.n_out = items.len();
            io.out_idx = out_idx;
        }
        self.grads_hook(py, hooked, self.done(slf, &call, Done::Output)?, self.done(slf, &call, Done::Outputs)?)?;
        Ok(Some(new.unbind()))
    }

    /// Calls `many` with the gradients w.r.t. `tensors` (fresh clones) once this backward has
    /// computed them (None for the others), like the single node of torch's
    /// BackwardHookFunction; one tensor takes a plain tensor hook calling `one`.
    fn grads_hook<'py>(
        &self,
        py: Python<'py>,
        tensors: Vec<Bound<'py, PyAny>>,
        one: Py<GradDone>,
        many: Py<GradDone>,
    ) -> PyResult<()> {
        if tensors.len() == 1 {
            return on_grad(&tensors[0], one.bind(py).as_any());
        }
        let kw = PyDict::new(py);
        kw.set_item("mode", "all")?;
        self.env.multi_grad_hook.bind(py).call((PyList::new(py, tensors)?, many), Some(&kw))?;
        Ok(())
    }

    fn outputs_done<'py>(
        &self,
        py: Python<'py>,
        call: &Bound<'py, Call>,
        grads: Vec<Bound<'py, PyAny>>,
    ) -> PyResult<()> {
        let c = call.get();
        let (n_out, out_idx) = {
            let io = lock(&c.io);
            (io.n_out, io.out_idx.clone())
        };
        let packed = if n_out > 1 { pack(py, n_out, &out_idx, grads)? } else { PyTuple::new(py, grads)? };
        let no_inputs = {
            let mut io = lock(&c.io);
            io.grad_out = Some(packed.unbind());
            io.in_idx.is_none()
        };
        if let Some(entry) = self.enter(&self.bwd_key, &self.bwd_name) {
            lock(&self.bwd).push(entry);
        }
        if no_inputs {
            let none: Vec<Bound<'py, PyAny>> = (0..c.n_in).map(|_| py.None().into_bound(py)).collect();
            self.backward_record(py, call, &PyTuple::new(py, none)?)?;
        }
        Ok(())
    }

    /// torch's node materialises the gradients it does not get (inputs without grad, or not
    /// reached) as zeros; so do we.
    fn inputs_done<'py>(
        &self,
        py: Python<'py>,
        call: &Bound<'py, Call>,
        grads: Vec<Bound<'py, PyAny>>,
    ) -> PyResult<()> {
        let c = call.get();
        // Copied out: no lock is held while Python runs.
        let (idx, grad_idx, meta, alias) = {
            let io = lock(&c.io);
            let meta: Vec<_> =
                io.in_meta.iter().map(|(s, d, v)| (s.clone_ref(py), d.clone_ref(py), v.clone_ref(py))).collect();
            (io.in_idx.clone().unwrap_or_default(), io.grad_idx.clone(), meta, io.alias.clone())
        };
        let mut full = Vec::with_capacity(idx.len());
        for (&i, (shape, dtype, device)) in idx.iter().zip(&meta) {
            // an argument repeated (the same tensor object) shares its first position's gradient
            let src = alias.get(i).copied().unwrap_or(i);
            let got = grad_idx.iter().position(|&g| g == src).and_then(|k| grads.get(k)).filter(|g| !g.is_none());
            full.push(match got {
                Some(g) => g.clone(),
                None => {
                    let kw = PyDict::new(py);
                    kw.set_item("dtype", dtype.bind(py))?;
                    kw.set_item("device", device.bind(py))?;
                    self.env.zeros.bind(py).call((shape.bind(py),), Some(&kw))?
                }
            });
        }
        self.backward_record(py, call, &pack(py, c.n_in, &idx, full)?)
    }

    fn backward_record<'py>(
        &self,
        py: Python<'py>,
        call: &Bound<'py, Call>,
        grad_in: &Bound<'py, PyTuple>,
    ) -> PyResult<()> {
        if lock(&self.bwd).pop().is_none() {
            return Ok(());
        }
        let (name, parent) = lock(&self.last).clone();
        let grad_out = lock(&call.get().io).grad_out.as_ref().map(|g| g.clone_ref(py));
        let grad_out = match grad_out {
            Some(g) => g.into_bound(py),
            None => PyTuple::empty(py),
        };
        let enc = self.enc();
        enc.whole(py, &name, parent.as_deref(), self.pending(), |w| {
            enc.grad_sections(w, grad_out.as_any(), grad_in.as_any())
        });
        self.pop_module(&name);
        Ok(())
    }
}

/// `(values at idx, None elsewhere)`, `n` long.
fn pack<'py>(
    py: Python<'py>,
    n: usize,
    idx: &[usize],
    values: Vec<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyTuple>> {
    let mut out: Vec<Bound<'py, PyAny>> = (0..n).map(|_| py.None().into_bound(py)).collect();
    for (&i, v) in idx.iter().zip(values) {
        if i < n {
            out[i] = v;
        }
    }
    PyTuple::new(py, out)
}

/// `t.register_hook(hook)` for a tensor that has no hook yet (our fresh clones), without the
/// RemovableHandle that register_hook builds in Python (most of its cost; ours are never
/// removed): the hook dict, then its link to the grad_fn, as register_hook does.
fn on_grad(t: &Bound<'_, PyAny>, hook: &Bound<'_, PyAny>) -> PyResult<()> {
    let py = t.py();
    let d = PyDict::new(py);
    let direct = (|| -> PyResult<()> {
        t.setattr(intern!(py, "_backward_hooks"), &d)?;
        t.getattr(intern!(py, "grad_fn"))?.call_method1(intern!(py, "_register_hook_dict"), (t,))?;
        d.set_item(0, hook)
    })();
    match direct {
        Ok(()) => Ok(()),
        Err(e) if e.is_instance_of::<PyAttributeError>(py) || e.is_instance_of::<PyTypeError>(py) => {
            // A torch without these internals.
            t.setattr(intern!(py, "_backward_hooks"), py.None())?;
            t.call_method1(intern!(py, "register_hook"), (hook,))?;
            Ok(())
        }
        Err(e) => Err(e),
    }
}
