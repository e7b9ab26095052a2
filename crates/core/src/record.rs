//! Building one dump.json record: sections, nested containers, tensor and value leaves.
//!
//! A capture path opens a record, selects a section (`input_args`, `input_kwargs`, `output`, or
//! for backward records `input`/`output`), and adds leaves, opening lists and dicts as the
//! framework value nests. The builder computes each tensor's statistics and CRC immediately (the
//! caller's memory is only borrowed), encodes the tensor file for the tensor task, and names it
//! by its position: `{record}.{input|kwargs|output}.{path}.{ext}` (msprobe-format.md §4.1).

use crate::config::{DataMode, SummaryMode, Task};
use crate::dtype::{DType, Dialect};
use crate::json::{Json, Text};
use crate::naming;
use crate::stats::{self, Stat, Stats};
use crate::tensorfile::{self, FileFormat};

/// Options that shape every leaf of a session.
#[derive(Clone, Debug)]
pub struct LeafOptions {
    pub task: Task,
    pub summary_mode: SummaryMode,
    pub dialect: Dialect,
    pub format: FileFormat,
    pub data_mode: DataMode,
}

/// A tensor handed to the recorder: contiguous little-endian host bytes.
#[derive(Clone, Copy, Debug)]
pub struct TensorRef<'a> {
    pub dtype: DType,
    pub shape: &'a [i64],
    pub data: &'a [u8],
    /// PyTorch's `requires_grad`; `None` omits the key (MindSpore never has it).
    pub requires_grad: Option<bool>,
    /// Overrides the leaf `type` (e.g. `torch.nn.parameter.Parameter` is still `torch.Tensor`
    /// in 1.1.1, so callers rarely need this).
    pub type_name: Option<&'a str>,
}

/// A finished tensor file waiting for the writer.
#[derive(Debug)]
pub struct TensorFile {
    pub name: String,
    pub bytes: Vec<u8>,
}

/// Why a builder call was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildError {
    NoSection,
    UnknownSection(String),
    NothingToClose,
    SizeMismatch {
        expected: u128,
        got: usize,
    },
    /// Statistics handed over by the caller, but the session needs the data (md5, tensor task).
    StatsNeedData,
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuildError::NoSection => write!(f, "no section selected (call section first)"),
            BuildError::UnknownSection(s) => {
                write!(f, "unknown section '{s}' (input_args, input_kwargs, output, output_fields, input, parameters)")
            }
            BuildError::NothingToClose => write!(f, "close without an open list or dict"),
            BuildError::SizeMismatch { expected, got } => write!(f, "tensor needs {expected} bytes, got {got}"),
            BuildError::StatsNeedData => {
                write!(f, "precomputed statistics need task statistics, summary_mode statistics")
            }
        }
    }
}

impl std::error::Error for BuildError {}

#[derive(Clone)]
struct Open {
    /// Key in the parent object (None in a list or at the section root).
    key: Option<String>,
    /// This container's component of the file-name path.
    path: Option<String>,
    value: Json,
}

#[derive(Clone)]
struct Section {
    key: String,
    category: &'static str,
    skipped: bool,
    stack: Vec<Open>,
}

/// Where a record's tensor files get their buffers, and whether the writer's queue would take
/// them. A record reserves its files' bytes only when it ends, all at once (see
/// [`crate::budget`]); while it is built it holds nothing.
pub trait ByteBudget {
    /// Whether a record whose tensor files total `n` bytes would be admitted now; `false` (drop
    /// mode, queue full) drops the record's tensor files, all of them (the leaves keep their
    /// statistics and lose `data_name`).
    fn would_admit(&self, _n: u64) -> bool {
        true
    }
    /// A buffer to encode a file into (recycled by the writer where possible).
    fn buffer(&self, _n: usize) -> Vec<u8> {
        Vec::new()
    }
    /// Takes back the buffer of a file that will not be written.
    fn recycle(&self, _b: Vec<u8>) {}
}

/// The budget of a leaf that has no file.
struct NoBudget;

impl ByteBudget for NoBudget {}

/// One record under construction.
pub struct RecordBuilder {
    pub name: String,
    backward: bool,
    opts: LeafOptions,
    body: Vec<(Text, Json)>,
    section: Option<Section>,
    pub files: Vec<TensorFile>,
    pub stack: Option<Vec<String>>,
    pub parent: Option<Option<String>>,
    pub tensors: u64,
    /// Bytes of `files`: what the record reserves from the writer's budget when it ends.
    pub file_bytes: u64,
    /// Tensor data bytes behind `files` (counted as dropped if the files are).
    data_bytes: u64,
    /// The record's tensor files were dropped (drop mode, queue full): all of them, and none of
    /// its leaves names a file.
    pub files_dropped: bool,
    /// Tensor files of this record not written (dropped with the record's files, or a tensor
    /// too large for its file format), and their tensor data bytes.
    pub dropped_files: u64,
    pub dropped_bytes: u64,
    /// The rank directory the record belongs to (fixed when it began).
    pub target: std::path::PathBuf,
    /// Tensor leaves whose statistics are still on the device (see
    /// [`add_tensor_pending`](RecordBuilder::add_tensor_pending)).
    pub pending: u32,
}

/// The `Max` of a leaf whose statistics are pending; its `Min` holds the slot number.
const PENDING_MARK: &str = "\u{1}pending";
/// As [`PENDING_MARK`], for a bool tensor: its Max/Min values are any / all as 1.0/0.0, written as
/// msprobe writes a bool tensor's (`true`/`false`, no Mean/Norm).
const PENDING_BOOL_MARK: &str = "\u{1}pending-bool";
/// The `Max` of a leaf whose data is still on its way to the host; its `Min` holds the slot number.
const PENDING_DATA_MARK: &str = "\u{1}pending-data";

/// Whether a record name is a backward record (`...backward` API or `...backward.N` module).
pub fn is_backward_name(name: &str) -> bool {
    let mut it = name.rsplit('.');
    let last = it.next().unwrap_or("");
    last == "backward" || (last.bytes().all(|b| b.is_ascii_digit()) && it.next() == Some("backward"))
}

fn stat_json(s: Stat) -> Json {
    match s {
        Stat::Null => Json::Null,
        Stat::Bool(b) => Json::Bool(b),
        Stat::Int(i) => Json::Int(i),
        Stat::Float(f) => Json::Float(f),
    }
}

impl RecordBuilder {
    pub fn new(name: String, opts: LeafOptions) -> RecordBuilder {
        RecordBuilder {
            backward: is_backward_name(&name),
            name,
            opts,
            body: Vec::new(),
            section: None,
            files: Vec::new(),
            stack: None,
            parent: None,
            tensors: 0,
            file_bytes: 0,
            data_bytes: 0,
            files_dropped: false,
            dropped_files: 0,
            dropped_bytes: 0,
            target: std::path::PathBuf::new(),
            pending: 0,
        }
    }

    /// Drops the record's tensor files, those made so far and any added later (drop mode, the
    /// writer's queue is full): the leaves keep their statistics and lose `data_name`, so the
    /// record is written whole, without files, and never names a file that is not on disk.
    pub fn drop_files(&mut self, budget: &dyn ByteBudget) {
        self.files_dropped = true;
        if self.files.is_empty() {
            return;
        }
        let files = std::mem::take(&mut self.files);
        {
            let names: std::collections::HashSet<&str> = files.iter().map(|f| f.name.as_str()).collect();
            for (_, v) in &mut self.body {
                strip_data_names(v, &names);
            }
            if let Some(s) = &mut self.section {
                for o in &mut s.stack {
                    strip_data_names(&mut o.value, &names);
                }
            }
        }
        self.dropped_files += files.len() as u64;
        self.dropped_bytes += std::mem::take(&mut self.data_bytes);
        self.file_bytes = 0;
        for f in files {
            budget.recycle(f.bytes);
        }
    }

    fn finish_section(&mut self) {
        if let Some(mut s) = self.section.take() {
            while s.stack.len() > 1 {
                let top = s.stack.pop().expect("len > 1");
                Self::attach(&mut s.stack, top);
            }
            if !s.skipped {
                let root = s.stack.pop().expect("section root");
                match self.body.iter_mut().find(|(k, _)| *k == s.key) {
                    Some(slot) => slot.1 = root.value,
                    None => self.body.push((s.key.into(), root.value)),
                }
            }
        }
    }

    fn attach(stack: &mut [Open], child: Open) {
        let parent = stack.last_mut().expect("a parent container");
        match &mut parent.value {
            Json::Array(a) => a.push(child.value),
            Json::Object(o) => o.push((child.key.unwrap_or_default().into(), child.value)),
            _ => unreachable!("containers are arrays or objects"),
        }
    }

    /// Selects a section; returns `Ok(false)` when data_mode filters it out (leaves added to it
    /// are ignored, so callers may skip the work).
    pub fn section(&mut self, key: &str) -> Result<bool, BuildError> {
        self.finish_section();
        if key == "input" {
            // only a backward record has an `input` (gradient) section, whatever its name says:
            // 1.1.1 names a module's backward record after the module's latest start, which
            // checkpoint's recomputation makes a forward name (`Module.a.Tanh.forward.1`)
            self.backward = true;
        }
        let (category, is_input, root) = match (key, self.backward) {
            ("input_args", _) => ("input", true, Json::Array(vec![])),
            ("input_kwargs", _) => ("kwargs", true, Json::Object(vec![])),
            ("input", true) => ("input", true, Json::Array(vec![])),
            ("output", _) => ("output", false, Json::Array(vec![])),
            // a namedtuple output, written as msprobe does: `output` is a dict keyed by field
            ("output_fields", false) => ("output", false, Json::Object(vec![])),
            ("parameters", false) => ("parameters", true, Json::Object(vec![])),
            _ => return Err(BuildError::UnknownSection(key.to_string())),
        };
        let dm = &self.opts.data_mode;
        let dir_ok = if self.backward { dm.backward } else { dm.forward };
        let side_ok = if is_input { dm.input } else { dm.output };
        let skipped = !(dir_ok && side_ok);
        self.section = Some(Section {
            key: if key == "output_fields" { "output".to_string() } else { key.to_string() },
            category,
            skipped,
            stack: vec![Open { key: None, path: None, value: root }],
        });
        Ok(!skipped)
    }

    /// Whether leaves added now are kept.
    pub fn active(&self) -> bool {
        matches!(&self.section, Some(s) if !s.skipped)
    }

    /// The key a new child gets in the current container (None in a list), and its position.
    fn child_slot(&self, key: Option<&str>) -> Result<(Option<String>, usize), BuildError> {
        let s = self.section.as_ref().ok_or(BuildError::NoSection)?;
        let top = s.stack.last().expect("section root");
        Ok(match &top.value {
            Json::Object(o) => (Some(key.map(str::to_string).unwrap_or_else(|| o.len().to_string())), o.len()),
            Json::Array(a) => (None, a.len()),
            _ => unreachable!(),
        })
    }

    /// A child's component of tensor file names (its key, or its position in a list). Only
    /// the tensor task names files, so other tasks skip making it.
    fn path_part(&self, key: &Option<String>, index: usize) -> Option<String> {
        (self.opts.task == Task::Tensor).then(|| key.clone().unwrap_or_else(|| index.to_string()))
    }

    fn push_leaf(&mut self, key: Option<String>, v: Json) {
        let s = self.section.as_mut().expect("checked by child_slot");
        let top = s.stack.last_mut().expect("section root");
        match &mut top.value {
            Json::Array(a) => a.push(v),
            Json::Object(o) => o.push((key.unwrap_or_default().into(), v)),
            _ => unreachable!(),
        }
    }

    /// Opens a nested list (`dict = false`) or dict under `key` (ignored inside lists).
    pub fn open(&mut self, key: Option<&str>, dict: bool) -> Result<(), BuildError> {
        let (k, index) = self.child_slot(key)?;
        let path = self.path_part(&k, index);
        let s = self.section.as_mut().expect("checked");
        let value = if dict { Json::Object(vec![]) } else { Json::Array(vec![]) };
        s.stack.push(Open { key: k, path, value });
        Ok(())
    }

    pub fn close(&mut self) -> Result<(), BuildError> {
        let s = self.section.as_mut().ok_or(BuildError::NoSection)?;
        if s.stack.len() < 2 {
            return Err(BuildError::NothingToClose);
        }
        let top = s.stack.pop().expect("len >= 2");
        Self::attach(&mut s.stack, top);
        Ok(())
    }

    /// Adds a non-tensor leaf (already in msprobe's form, e.g. `{"type": "int", "value": 3}` or
    /// `null`).
    pub fn add_value(&mut self, key: Option<&str>, leaf: Json) -> Result<(), BuildError> {
        let (k, _) = self.child_slot(key)?;
        if self.active() {
            self.push_leaf(k, leaf);
        }
        Ok(())
    }

    /// The file stem of the next child: `{record}.{category}.{path}`.
    fn data_stem(&self, last: &str) -> String {
        let s = self.section.as_ref().expect("section open");
        let mut stem = format!("{}.{}", self.name, s.category);
        for o in s.stack.iter().skip(1) {
            if let Some(p) = &o.path {
                stem.push('.');
                stem.push_str(p);
            }
        }
        stem.push('.');
        stem.push_str(last);
        stem
    }

    /// Adds a tensor leaf: statistics, CRC and (tensor task) its file.
    pub fn add_tensor(&mut self, key: Option<&str>, t: &TensorRef, budget: &dyn ByteBudget) -> Result<(), BuildError> {
        self.add_tensor_leaf(key, t, None, budget)
    }

    /// [`add_tensor`](Self::add_tensor), with Mean and Norm as the framework computed them
    /// (`mean_norm`, e.g. torch's own reductions, as msprobe 1.1.1 writes them): a float
    /// accumulation in another order differs in the last bits, and relatively much for a mean
    /// near zero, which msprobe's compare flags. Used only where ours are floats (non-empty,
    /// not 0-d); everything else (Max/Min, the `*_except_inf_nan` keys, CRC, files) from the data.
    pub fn add_tensor_with_mean_norm(
        &mut self,
        key: Option<&str>,
        t: &TensorRef,
        mean_norm: (f64, f64),
        budget: &dyn ByteBudget,
    ) -> Result<(), BuildError> {
        check_size(t)?;
        let mut st = self.stats_of(t);
        if let (Stat::Float(_), Stat::Float(_)) = (st.mean, st.norm) {
            st.mean = Stat::Float(mean_norm.0);
            st.norm = Stat::Float(mean_norm.1);
        }
        self.add_tensor_leaf(key, t, Some(st), budget)
    }

    /// Whether leaves need nothing but statistics (statistics task, statistics summary mode):
    /// then a framework may reduce a device tensor itself and hand over the four values
    /// ([`add_tensor_pending`](Self::add_tensor_pending)) instead of copying it to the host.
    pub fn stats_only(&self) -> bool {
        self.opts.task == Task::Statistics && self.opts.summary_mode == SummaryMode::Statistics
    }

    /// Adds a tensor leaf whose statistics a framework is still reducing on the device: they
    /// arrive later, in a batch, as slot `slot` ([`fill_pending`](Self::fill_pending)); the
    /// record must not end before. Only when [`stats_only`](Self::stats_only).
    pub fn add_tensor_pending(&mut self, key: Option<&str>, t: &TensorRef, slot: u64) -> Result<(), BuildError> {
        if !self.stats_only() {
            return Err(BuildError::StatsNeedData);
        }
        let st = Stats {
            max: Stat::Null,
            min: Stat::Int(slot as i128),
            mean: Stat::Null,
            norm: Stat::Null,
            max_except_inf_nan: None,
            min_except_inf_nan: None,
        };
        let before = self.tensors;
        self.add_tensor_leaf(key, t, Some(st), &NoBudget)?;
        if self.tensors > before {
            // The leaf was kept (its section is active): mark it.
            if let Some(Json::Object(leaf)) = self.last_leaf_mut() {
                let mark = if t.dtype == DType::Bool { PENDING_BOOL_MARK } else { PENDING_MARK };
                if let Some(slot) = leaf.iter_mut().find(|(k, _)| k == "Max") {
                    slot.1 = Json::str(mark);
                }
                self.pending += 1;
            }
        }
        Ok(())
    }

    /// The leaf pushed last into the open container.
    fn last_leaf_mut(&mut self) -> Option<&mut Json> {
        let s = self.section.as_mut()?;
        match &mut s.stack.last_mut()?.value {
            Json::Array(a) => a.last_mut(),
            Json::Object(o) => o.last_mut().map(|(_, v)| v),
            _ => None,
        }
    }

    /// Fills the pending leaves (in the open section and the closed ones) whose slot `get`
    /// knows; returns how many are still pending.
    pub fn fill_pending(&mut self, get: &mut dyn FnMut(u64) -> Option<Stats>) -> u32 {
        fn walk(v: &mut Json, get: &mut dyn FnMut(u64) -> Option<Stats>, filled: &mut u32, dialect: Dialect) {
            match v {
                Json::Array(a) => a.iter_mut().for_each(|c| walk(c, get, filled, dialect)),
                Json::Object(o) => {
                    let (slot, bool_) = match (marked_slot(o, PENDING_MARK), marked_slot(o, PENDING_BOOL_MARK)) {
                        (Some(s), _) => (s, false),
                        (None, Some(s)) => (s, true),
                        (None, None) => return o.iter_mut().for_each(|(_, c)| walk(c, get, filled, dialect)),
                    };
                    let Some(mut st) = get(slot) else { return };
                    if bool_ {
                        st = bool_stats(&st);
                    }
                    set_stats(o, &st);
                    push_except(o, &st, dialect);
                    *filled += 1;
                }
                _ => {}
            }
        }
        if self.pending == 0 {
            return 0;
        }
        let (mut filled, dialect) = (0, self.opts.dialect);
        for (_, v) in self.body.iter_mut() {
            walk(v, get, &mut filled, dialect);
        }
        if let Some(s) = self.section.as_mut() {
            for f in s.stack.iter_mut() {
                walk(&mut f.value, get, &mut filled, dialect);
            }
        }
        self.pending = self.pending.saturating_sub(filled);
        self.pending
    }

    fn add_tensor_leaf(
        &mut self,
        key: Option<&str>,
        t: &TensorRef,
        given: Option<Stats>,
        budget: &dyn ByteBudget,
    ) -> Result<(), BuildError> {
        let (k, index) = self.child_slot(key)?;
        if !self.active() {
            return Ok(());
        }
        let st = match given {
            Some(st) => st,
            None => {
                check_size(t)?;
                self.stats_of(t)
            }
        };
        let mut leaf = self.leaf_head(t, &st);
        self.tensors += 1;
        let name = self.file_name(&k, index);
        self.push_data(&mut leaf, name, t, budget);
        self.push_leaf(k, Json::Object(leaf));
        Ok(())
    }

    /// The statistics of `t` as the dump's dialect writes them: msprobe 1.1.1's MindSpore processor
    /// also gives a complex tensor's Norm (`np.linalg.norm` of |x|), its PyTorch one does not.
    fn stats_of(&self, t: &TensorRef) -> Stats {
        let mut st = stats::tensor_stats(t.dtype, t.shape.is_empty(), t.data);
        if self.opts.dialect == Dialect::MindSpore && !t.shape.is_empty() {
            if let Some(norm) = stats::complex_norm(t.dtype, t.data) {
                st.norm = Stat::Float(norm);
            }
        }
        st
    }

    /// A tensor leaf's keys up to its data: type, dtype, shape, the statistics, requires_grad
    /// (PyTorch), the `*_except_inf_nan` keys.
    fn leaf_head(&self, t: &TensorRef, st: &Stats) -> Vec<(Text, Json)> {
        // Room for every key a leaf can have: no reallocation as the optional ones are pushed.
        let mut leaf: Vec<(Text, Json)> = Vec::with_capacity(11);
        leaf.extend([
            (
                "type".into(),
                match t.type_name {
                    Some(n) => Json::str(n.to_string()),
                    None => Json::str(match self.opts.dialect {
                        Dialect::PyTorch => "torch.Tensor",
                        Dialect::MindSpore => "mindspore.Tensor",
                    }),
                },
            ),
            ("dtype".into(), Json::str(t.dtype.name(self.opts.dialect))),
            ("shape".into(), Json::Array(t.shape.iter().map(|&d| Json::Int(d as i128)).collect())),
            ("Max".into(), stat_json(st.max)),
            ("Min".into(), stat_json(st.min)),
            ("Mean".into(), stat_json(st.mean)),
            ("Norm".into(), stat_json(st.norm)),
        ]);
        if self.opts.dialect == Dialect::PyTorch {
            if let Some(rg) = t.requires_grad {
                leaf.push(("requires_grad".into(), Json::Bool(rg)));
            }
        }
        push_except(&mut leaf, st, self.opts.dialect);
        leaf
    }

    /// The tensor file name of the child `k`/`index` of the open container (tensor task only).
    fn file_name(&self, k: &Option<String>, index: usize) -> Option<String> {
        let path = self.path_part(k, index)?;
        Some(naming::sanitize_file_name(&self.data_stem(&path), self.opts.format.ext()))
    }

    /// The leaf's data keys: the tensor file `name` (tensor task; made from `t.data`, or dropped
    /// and counted) or the md5 summary's CRC.
    fn push_data(
        &mut self,
        leaf: &mut Vec<(Text, Json)>,
        name: Option<String>,
        t: &TensorRef,
        budget: &dyn ByteBudget,
    ) {
        if let Some(name) = name {
            let ext = format!(".{}", self.opts.format.ext());
            let file_stem = name.strip_suffix(&ext).unwrap_or(&name).to_string();
            let approx = t.data.len() as u64 + 1024;
            if !self.files_dropped && !budget.would_admit(self.file_bytes + approx) {
                // Sure to be refused at the end: stop copying (the record keeps its statistics).
                self.drop_files(budget);
            }
            let bytes = if !self.files_dropped {
                let buf = budget.buffer(approx as usize);
                match self.opts.format {
                    FileFormat::Pt => tensorfile::encode_pt_into(buf, &file_stem, t.dtype, t.shape, t.data),
                    FileFormat::Npy => {
                        let mut buf = buf;
                        tensorfile::encode_npy_into(&mut buf, t.dtype, t.shape, t.data);
                        Some(buf)
                    }
                }
            } else {
                None
            };
            match bytes {
                Some(b) => {
                    leaf.push(("data_name".into(), Json::str(name.clone())));
                    self.file_bytes += b.len() as u64;
                    self.data_bytes += t.data.len() as u64;
                    self.files.push(TensorFile { name, bytes: b });
                }
                None => {
                    self.dropped_files += 1;
                    self.dropped_bytes += t.data.len() as u64;
                }
            }
        } else if self.opts.summary_mode == SummaryMode::Md5 {
            leaf.push(("md5".into(), Json::str(stats::crc32_hex(t.dtype, t.data))));
        }
    }

    /// Adds a tensor leaf whose data a framework is still copying to the host (a non-blocking
    /// copy into pinned memory, issue #21): statistics, CRC and file come later with the data,
    /// as slot `slot` ([`fill_pending_data`](Self::fill_pending_data)); the record must not end
    /// before. Any task. `t.data` is not read.
    pub fn add_tensor_pending_data(&mut self, key: Option<&str>, t: &TensorRef, slot: u64) -> Result<(), BuildError> {
        let (k, index) = self.child_slot(key)?;
        if !self.active() {
            return Ok(());
        }
        let mut leaf = self.leaf_head(t, &Stats::null());
        for (key, v) in leaf.iter_mut() {
            match key.as_ref() {
                "Max" => *v = Json::str(PENDING_DATA_MARK),
                "Min" => *v = Json::Int(slot as i128),
                _ => {}
            }
        }
        if let Some(name) = self.file_name(&k, index) {
            // The file's name is fixed now (it depends on where the leaf is); removed again if
            // the file is never made.
            leaf.push(("data_name".into(), Json::str(name)));
        }
        self.tensors += 1;
        self.pending += 1;
        self.push_leaf(k, Json::Object(leaf));
        Ok(())
    }

    /// Completes the pending-data leaf of slot `slot` from its host copy `t` (its dtype and shape
    /// as added), with the framework's Mean and Norm if given (as
    /// [`add_tensor_with_mean_norm`](Self::add_tensor_with_mean_norm)). Ok(false): no such leaf
    /// in this record.
    pub fn fill_pending_data(
        &mut self,
        slot: u64,
        t: &TensorRef,
        mean_norm: Option<(f64, f64)>,
        budget: &dyn ByteBudget,
    ) -> Result<bool, BuildError> {
        if self.pending == 0 {
            return Ok(false);
        }
        let Some(leaf) = self.pending_data_leaf(slot) else { return Ok(false) };
        check_size(t)?;
        let name = take_data_name(leaf);
        let mut st = self.stats_of(t);
        if let (Some((mean, norm)), Stat::Float(_), Stat::Float(_)) = (mean_norm, st.mean, st.norm) {
            st.mean = Stat::Float(mean);
            st.norm = Stat::Float(norm);
        }
        let mut tail = Vec::new();
        push_except(&mut tail, &st, self.opts.dialect);
        self.push_data(&mut tail, name, t, budget);
        let leaf = self.pending_data_leaf(slot).expect("found above");
        set_stats(leaf, &st);
        leaf.extend(tail);
        self.pending -= 1;
        Ok(true)
    }

    /// Slots of the pending-data leaves, in leaf order.
    pub fn pending_data_slots(&self) -> Vec<u64> {
        fn walk(v: &Json, out: &mut Vec<u64>) {
            match v {
                Json::Array(a) => a.iter().for_each(|c| walk(c, out)),
                Json::Object(o) => match marked_slot(o, PENDING_DATA_MARK) {
                    Some(slot) => out.push(slot),
                    None => o.iter().for_each(|(_, c)| walk(c, out)),
                },
                _ => {}
            }
        }
        let mut out = Vec::new();
        if self.pending > 0 {
            self.body.iter().for_each(|(_, v)| walk(v, &mut out));
            if let Some(s) = &self.section {
                s.stack.iter().for_each(|f| walk(&f.value, &mut out));
            }
        }
        out
    }

    /// Writes every pending-data leaf with null statistics and no data (its copy never
    /// arrived); returns how many.
    pub fn null_pending_data(&mut self) -> u32 {
        let mut n = 0;
        for slot in self.pending_data_slots() {
            let md5 = self.opts.task != Task::Tensor && self.opts.summary_mode == SummaryMode::Md5;
            if let Some(leaf) = self.pending_data_leaf(slot) {
                take_data_name(leaf);
                set_stats(leaf, &Stats::null());
                if md5 {
                    leaf.push(("md5".into(), Json::Null));
                }
                n += 1;
            }
        }
        self.pending = self.pending.saturating_sub(n);
        n
    }

    /// The pending-data leaf of `slot`, in the closed sections or the open one.
    fn pending_data_leaf(&mut self, slot: u64) -> Option<&mut Vec<(Text, Json)>> {
        fn find(v: &mut Json, slot: u64) -> Option<&mut Vec<(Text, Json)>> {
            match v {
                Json::Array(a) => a.iter_mut().find_map(|c| find(c, slot)),
                Json::Object(o) => {
                    if let Some(s) = marked_slot(o, PENDING_DATA_MARK) {
                        return (s == slot).then_some(o);
                    }
                    o.iter_mut().find_map(|(_, c)| find(c, slot))
                }
                _ => None,
            }
        }
        let body = &mut self.body;
        let section = &mut self.section;
        body.iter_mut()
            .find_map(|(_, v)| find(v, slot))
            .or_else(|| section.as_mut().and_then(|s| s.stack.iter_mut().find_map(|f| find(&mut f.value, slot))))
    }

    /// Whether `section(key)` would keep its leaves (data_mode), without selecting it: the L2
    /// device-statistics path decides what to reduce before the record's leaves are added.
    pub fn section_active(&self, key: &str) -> bool {
        let backward = self.backward || key == "input"; // see `section`
        let (is_input, output) = match (key, backward) {
            ("input_args" | "input_kwargs" | "parameters", _) | ("input", true) => (true, false),
            ("output" | "output_fields", _) => (false, true),
            _ => return false,
        };
        let dm = &self.opts.data_mode;
        let dir_ok = if backward { dm.backward } else { dm.forward };
        dir_ok && ((is_input && dm.input) || (output && dm.output))
    }

    /// Adds a statistics-task tensor leaf whose statistics were computed elsewhere (on the
    /// device, by the L2 capture): the same keys, in the same order, as [`add_tensor`](Self::add_tensor)
    /// writes for the statistics task and summary mode. Only for that task and mode.
    pub fn add_stats_leaf(
        &mut self,
        key: Option<&str>,
        dtype: DType,
        shape: &[i64],
        st: &Stats,
    ) -> Result<(), BuildError> {
        let (k, _) = self.child_slot(key)?;
        if !self.active() {
            return Ok(());
        }
        let mut leaf: Vec<(Text, Json)> = Vec::with_capacity(9);
        leaf.extend([
            (
                "type".into(),
                Json::str(match self.opts.dialect {
                    Dialect::PyTorch => "torch.Tensor",
                    Dialect::MindSpore => "mindspore.Tensor",
                }),
            ),
            ("dtype".into(), Json::str(dtype.name(self.opts.dialect))),
            ("shape".into(), Json::Array(shape.iter().map(|&d| Json::Int(d as i128)).collect())),
            ("Max".into(), stat_json(st.max)),
            ("Min".into(), stat_json(st.min)),
            ("Mean".into(), stat_json(st.mean)),
            ("Norm".into(), stat_json(st.norm)),
        ]);
        push_except(&mut leaf, st, self.opts.dialect);
        self.tensors += 1;
        self.push_leaf(k, Json::Object(leaf));
        Ok(())
    }

    /// Sets a top-level key of the record outside the sections (e.g. an L2 launch's `status`),
    /// after the open section; data_mode does not filter it.
    pub fn set_key(&mut self, key: &str, v: Json) {
        self.finish_section();
        match self.body.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = v,
            None => self.body.push((key.to_string().into(), v)),
        }
    }

    /// A copy of the record as built so far (name, sections, leaves, target), without its
    /// tensor files, stack and parent: the planned record of a launch whose statistics come
    /// later (device statistics, issue #21), journaled at the launch with them null.
    pub fn planned_copy(&self) -> RecordBuilder {
        let mut planned = RecordBuilder::new(self.name.clone(), self.opts.clone());
        planned.body = self.body.clone();
        planned.section = self.section.clone();
        planned.target = self.target.clone();
        planned.pending = self.pending;
        planned
    }

    /// Closes the open section and returns the body; the builder keeps files, stack and parent.
    pub fn take_body(&mut self) -> Json {
        self.finish_section();
        Json::Object(std::mem::take(&mut self.body))
    }
}

/// `t.data` holds exactly the bytes of `t`'s shape and dtype.
fn check_size(t: &TensorRef) -> Result<(), BuildError> {
    let expected = crate::layout::numel(t.shape) * t.dtype.size() as u128;
    if expected != t.data.len() as u128 {
        return Err(BuildError::SizeMismatch { expected, got: t.data.len() });
    }
    Ok(())
}

/// The `*_except_inf_nan` keys of `st`, in the PyTorch dialect only: msprobe 1.1.1's MindSpore
/// processor never writes them (`MindsporeDataProcessor._analyze_tensor`).
fn push_except(leaf: &mut Vec<(Text, Json)>, st: &Stats, dialect: Dialect) {
    if dialect == Dialect::MindSpore {
        return;
    }
    if let Some(v) = st.max_except_inf_nan {
        leaf.push(("Max_except_inf_nan".into(), stat_json(v)));
    }
    if let Some(v) = st.min_except_inf_nan {
        leaf.push(("Min_except_inf_nan".into(), stat_json(v)));
    }
}

/// Max, Min, Mean and Norm of a leaf set to `st` (the other keys unchanged).
fn set_stats(leaf: &mut [(Text, Json)], st: &Stats) {
    for (k, v) in leaf.iter_mut() {
        match k.as_ref() {
            "Max" => *v = stat_json(st.max),
            "Min" => *v = stat_json(st.min),
            "Mean" => *v = stat_json(st.mean),
            "Norm" => *v = stat_json(st.norm),
            _ => {}
        }
    }
}

/// A bool tensor's statistics from its any / all as 1.0/0.0 (as `tensor_stats`: Max any, Min all,
/// Mean and Norm null, no `*_except_inf_nan`).
fn bool_stats(st: &Stats) -> Stats {
    let b = |s: Stat| match s {
        Stat::Float(f) => Stat::Bool(f != 0.0 && !f.is_nan()),
        Stat::Int(i) => Stat::Bool(i != 0),
        other => other,
    };
    Stats { max: b(st.max), min: b(st.min), ..Stats::null() }
}

/// The slot of a leaf whose `Max` is `mark` (held in its `Min`).
fn marked_slot(leaf: &[(Text, Json)], mark: &str) -> Option<u64> {
    let marked = leaf.iter().any(|(k, v)| k == "Max" && matches!(v, Json::Str(s) if s == mark));
    if !marked {
        return None;
    }
    leaf.iter().find_map(|(k, v)| match (k.as_ref(), v) {
        ("Min", Json::Int(i)) => Some(*i as u64),
        _ => None,
    })
}

/// Removes a leaf's `data_name` and returns it.
fn take_data_name(leaf: &mut Vec<(Text, Json)>) -> Option<String> {
    let i = leaf.iter().position(|(k, _)| k == "data_name")?;
    leaf.remove(i).1.as_str().map(str::to_string)
}

/// Removes the `data_name` of every tensor leaf under `v` that names one of `names`.
fn strip_data_names(v: &mut Json, names: &std::collections::HashSet<&str>) {
    match v {
        Json::Object(kv) => {
            kv.retain(|(k, v)| !(k == "data_name" && v.as_str().is_some_and(|n| names.contains(n))));
            kv.iter_mut().for_each(|(_, v)| strip_data_names(v, names));
        }
        Json::Array(a) => a.iter_mut().for_each(|v| strip_data_names(v, names)),
        _ => {}
    }
}

/// `{"type": T, "value": v}`, msprobe's form for scalars and other non-tensor values.
pub fn value_leaf(type_name: impl Into<Text>, value: Json) -> Json {
    Json::Object(vec![("type".into(), Json::str(type_name)), ("value".into(), value)])
}

/// msprobe's leaf for a process group: `{"type": T, "group_ranks": [...], "group_id": md5}`, where
/// group_id is the md5 hex digest of Python's `str(ranks)` (`"[0, 1]"`), so dumps of the same
/// group made by either tool name it alike.
pub fn group_leaf(type_name: impl Into<Text>, ranks: &[i64]) -> Json {
    use md5::{Digest, Md5};
    let text = format!("[{}]", ranks.iter().map(i64::to_string).collect::<Vec<_>>().join(", "));
    let id: String = Md5::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    Json::Object(vec![
        ("type".into(), Json::str(type_name)),
        ("group_ranks".into(), Json::Array(ranks.iter().map(|&r| Json::Int(r as i128)).collect())),
        ("group_id".into(), Json::str(id)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Unlimited;
    impl ByteBudget for Unlimited {}

    fn opts(task: Task, dm: DataMode) -> LeafOptions {
        LeafOptions {
            task,
            summary_mode: SummaryMode::Statistics,
            dialect: Dialect::PyTorch,
            format: FileFormat::Pt,
            data_mode: dm,
        }
    }

    #[test]
    fn nested_paths_name_files_like_msprobe() {
        let mut b = RecordBuilder::new("Module.inner.DictMod.forward.0".into(), opts(Task::Tensor, DataMode::ALL));
        let data = 1.0f32.to_le_bytes();
        let t = TensorRef { dtype: DType::F32, shape: &[1], data: &data, requires_grad: Some(false), type_name: None };
        b.section("input_kwargs").unwrap();
        b.add_tensor(Some("other"), &t, &Unlimited).unwrap();
        b.section("output").unwrap();
        b.open(None, true).unwrap();
        b.open(Some("pair"), true).unwrap();
        b.open(Some("b"), false).unwrap();
        b.add_tensor(None, &t, &Unlimited).unwrap();
        b.close().unwrap();
        b.close().unwrap();
        b.close().unwrap();
        assert_eq!(b.close(), Err(BuildError::NothingToClose));
        let body = b.take_body();
        let files = std::mem::take(&mut b.files);
        let names: Vec<_> = files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            ["Module.inner.DictMod.forward.0.kwargs.other.pt", "Module.inner.DictMod.forward.0.output.0.pair.b.0.pt"]
        );
        let leaf = body.get("output").unwrap();
        let Json::Array(a) = leaf else { panic!() };
        let inner = a[0].get("pair").unwrap().get("b").unwrap();
        let Json::Array(b) = inner else { panic!() };
        assert_eq!(
            b[0].get("data_name").unwrap().as_str(),
            Some("Module.inner.DictMod.forward.0.output.0.pair.b.0.pt")
        );
        // key order of the leaf
        let Json::Object(kv) = &b[0] else { panic!() };
        let keys: Vec<_> = kv.iter().map(|(k, _)| &**k).collect();
        assert_eq!(keys, ["type", "dtype", "shape", "Max", "Min", "Mean", "Norm", "requires_grad", "data_name"]);
    }

    /// Pending leaves (device statistics) are the leaves `add_tensor` would write for the same
    /// bytes once filled, in any slot order, nested or not; a non-finite statistic adds its own
    /// `*_except_inf_nan` key only; tensor task refuses them.
    #[test]
    fn pending_data_leaves_fill_like_host_tensors() {
        // NaN and inf: the except keys come after requires_grad and before data_name/md5.
        let vals = [1.5f32, f32::NAN, f32::INFINITY, 0.25];
        let data: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        let t = TensorRef { dtype: DType::F32, shape: &[4], data: &data, requires_grad: Some(true), type_name: None };
        let meta = TensorRef { data: &[], ..t };
        for task in [Task::Tensor, Task::Statistics] {
            let mut o = opts(task, DataMode::ALL);
            o.summary_mode = SummaryMode::Md5;
            let mut host = RecordBuilder::new("Torch.cat.0.forward".into(), o.clone());
            let mut dev = RecordBuilder::new("Torch.cat.0.forward".into(), o);
            for b in [&mut host, &mut dev] {
                b.section("input_args").unwrap();
                b.open(None, false).unwrap();
            }
            host.add_tensor(None, &t, &Unlimited).unwrap();
            host.add_tensor_with_mean_norm(None, &t, (9.0, 8.0), &Unlimited).unwrap();
            dev.add_tensor_pending_data(None, &meta, 11).unwrap();
            dev.add_tensor_pending_data(None, &meta, 4).unwrap();
            assert_eq!(dev.pending, 2);
            assert_eq!(dev.pending_data_slots(), [11, 4]);
            assert_eq!(dev.fill_pending_data(5, &t, None, &Unlimited), Ok(false));
            // the second first (the list still open), then the first after it is closed
            assert_eq!(dev.fill_pending_data(4, &t, Some((9.0, 8.0)), &Unlimited), Ok(true));
            assert_eq!(dev.fill_pending(&mut |_| None), 1); // statistics slots do not touch them
            for b in [&mut host, &mut dev] {
                b.close().unwrap();
            }
            assert_eq!(dev.fill_pending_data(11, &t, None, &Unlimited), Ok(true));
            assert_eq!((dev.pending, dev.tensors), (0, 2));
            // (Debug: NaN statistics are not equal to themselves)
            assert_eq!(format!("{:?}", dev.take_body()), format!("{:?}", host.take_body()));
            // (the files in any order: the writer writes each by its name)
            let names = |b: &RecordBuilder| {
                let mut v: Vec<_> = b.files.iter().map(|f| (f.name.clone(), f.bytes.clone())).collect();
                v.sort();
                v
            };
            assert!(names(&dev) == names(&host));
            assert_eq!(dev.files.len(), if task == Task::Tensor { 2 } else { 0 });
        }
        // never arrived: null statistics, no file named, md5 null
        let mut o = opts(Task::Tensor, DataMode::ALL);
        o.summary_mode = SummaryMode::Md5;
        let mut b = RecordBuilder::new("Torch.add.0.forward".into(), o);
        b.section("output").unwrap();
        b.add_tensor_pending_data(None, &meta, 0).unwrap();
        assert_eq!(b.null_pending_data(), 1);
        assert_eq!(b.pending, 0);
        let body = format!("{:?}", b.take_body());
        assert!(!body.contains("data_name") && !body.contains("pending"), "{body}");
        // a host copy of another size is refused
        let mut b = RecordBuilder::new("Torch.add.1.forward".into(), opts(Task::Tensor, DataMode::ALL));
        b.section("output").unwrap();
        b.add_tensor_pending_data(None, &meta, 0).unwrap();
        let short = TensorRef { data: &data[..4], ..t };
        assert!(matches!(b.fill_pending_data(0, &short, None, &Unlimited), Err(BuildError::SizeMismatch { .. })));
    }

    #[test]
    fn pending_leaves_fill_like_host_statistics() {
        let vals = [1.5f32, -2.0, 4.0, 0.25];
        let data: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        let t = TensorRef { dtype: DType::F32, shape: &[4], data: &data, requires_grad: Some(true), type_name: None };
        let mut host = RecordBuilder::new("Torch.add.0.forward".into(), opts(Task::Statistics, DataMode::ALL));
        let mut dev = RecordBuilder::new("Torch.add.0.forward".into(), opts(Task::Statistics, DataMode::ALL));
        for b in [&mut host, &mut dev] {
            b.section("input_args").unwrap();
        }
        host.add_tensor(None, &t, &Unlimited).unwrap();
        host.open(None, false).unwrap();
        host.add_tensor(None, &t, &Unlimited).unwrap();
        host.close().unwrap();
        let st = stats::tensor_stats(DType::F32, false, &data);
        dev.add_tensor_pending(None, &t, 7).unwrap();
        dev.open(None, false).unwrap();
        dev.add_tensor_pending(None, &t, 3).unwrap();
        assert_eq!(dev.pending, 2);
        // slot 3 first (inside the still-open list), then 7
        assert_eq!(dev.fill_pending(&mut |s| (s == 3).then(|| st.clone())), 1);
        dev.close().unwrap();
        assert_eq!(dev.fill_pending(&mut |s| (s == 7).then(|| st.clone())), 0);
        assert_eq!(dev.take_body(), host.take_body());
        // Inf max: only Max_except_inf_nan is added
        let mut b = RecordBuilder::new("Torch.add.1.forward".into(), opts(Task::Statistics, DataMode::ALL));
        b.section("output").unwrap();
        b.add_tensor_pending(None, &t, 0).unwrap();
        let inf = Stats {
            max: Stat::Float(f64::INFINITY),
            min: Stat::Float(0.0),
            mean: Stat::Float(f64::INFINITY),
            norm: Stat::Float(f64::INFINITY),
            max_except_inf_nan: Some(Stat::Null),
            min_except_inf_nan: None,
        };
        b.fill_pending(&mut |_| Some(inf.clone()));
        let Json::Array(a) = b.take_body().get("output").cloned().unwrap() else { panic!() };
        let Json::Object(kv) = &a[0] else { panic!() };
        let keys: Vec<_> = kv.iter().map(|(k, _)| &**k).collect();
        assert_eq!(
            keys,
            ["type", "dtype", "shape", "Max", "Min", "Mean", "Norm", "requires_grad", "Max_except_inf_nan"]
        );
        let mut tb = RecordBuilder::new("Torch.add.2.forward".into(), opts(Task::Tensor, DataMode::ALL));
        tb.section("output").unwrap();
        assert_eq!(tb.add_tensor_pending(None, &t, 0), Err(BuildError::StatsNeedData));
    }

    /// A bool tensor's pending leaf, filled with the Max/Min of its float32 cast (what the
    /// device computes), is the leaf `add_tensor` writes for its bytes: any/all, no Mean/Norm.
    #[test]
    fn pending_bool_leaves_fill_like_host_bool_tensors() {
        for (data, shape) in [(vec![1u8, 0, 1], vec![3i64]), (vec![1, 1], vec![2]), (vec![0], vec![])] {
            let t = TensorRef { dtype: DType::Bool, shape: &shape, data: &data, requires_grad: None, type_name: None };
            let mut host = RecordBuilder::new("Torch.eq.0.forward".into(), opts(Task::Statistics, DataMode::ALL));
            let mut dev = RecordBuilder::new("Torch.eq.0.forward".into(), opts(Task::Statistics, DataMode::ALL));
            for b in [&mut host, &mut dev] {
                b.section("output").unwrap();
            }
            host.add_tensor(None, &t, &Unlimited).unwrap();
            dev.add_tensor_pending(None, &t, 5).unwrap();
            let max = data.iter().map(|&b| f64::from(b)).fold(f64::NEG_INFINITY, f64::max);
            let min = data.iter().map(|&b| f64::from(b)).fold(f64::INFINITY, f64::min);
            let mean = max; // anything: a bool leaf has no Mean/Norm
            let cast = Stats {
                max: Stat::Float(max),
                min: Stat::Float(min),
                mean: Stat::Float(mean),
                norm: Stat::Float(mean),
                max_except_inf_nan: None,
                min_except_inf_nan: None,
            };
            assert_eq!(dev.fill_pending(&mut |s| (s == 5).then(|| cast.clone())), 0);
            assert_eq!(dev.take_body(), host.take_body(), "{data:?}");
        }
    }

    #[test]
    fn namedtuple_output_is_a_dict_keyed_by_field() {
        let mut b = RecordBuilder::new("Module.n.Pair.forward.0".into(), opts(Task::Tensor, DataMode::ALL));
        let data = 1.0f32.to_le_bytes();
        let t = TensorRef { dtype: DType::F32, shape: &[1], data: &data, requires_grad: Some(false), type_name: None };
        b.section("output_fields").unwrap();
        b.add_tensor(Some("a"), &t, &Unlimited).unwrap();
        b.add_tensor(Some("b"), &t, &Unlimited).unwrap();
        let body = b.take_body();
        let names: Vec<_> = b.files.iter().map(|f| f.name.clone()).collect();
        assert_eq!(names, ["Module.n.Pair.forward.0.output.a.pt", "Module.n.Pair.forward.0.output.b.pt"]);
        let Json::Object(kv) = body.get("output").unwrap() else { panic!("output is a dict") };
        assert_eq!(kv.iter().map(|(k, _)| &**k).collect::<Vec<_>>(), ["a", "b"]);
        assert!(body.get("output_fields").is_none());
        // only in forward records
        let mut bw = RecordBuilder::new("Module.n.Pair.backward.0".into(), opts(Task::Tensor, DataMode::ALL));
        assert!(bw.section("output_fields").is_err());
    }

    /// A module's backward record named after a recomputed forward (1.1.1's naming under
    /// checkpoint) keeps its gradient `input` section, under data_mode's backward switch.
    #[test]
    fn input_section_makes_a_backward_record_whatever_its_name() {
        let data = 1.0f32.to_le_bytes();
        let t = TensorRef { dtype: DType::F32, shape: &[1], data: &data, requires_grad: Some(false), type_name: None };
        let mut b = RecordBuilder::new("Module.a.Tanh.forward.1".into(), opts(Task::Statistics, DataMode::ALL));
        assert!(b.section_active("input"));
        assert!(b.section("input").unwrap());
        b.add_tensor(None, &t, &Unlimited).unwrap();
        assert!(b.section("output").unwrap());
        b.add_tensor(None, &t, &Unlimited).unwrap();
        let body = b.take_body();
        assert!(body.get("input").is_some() && body.get("output").is_some());
        let fwd_only = DataMode::from_list(&["forward".to_string()]);
        let mut f = RecordBuilder::new("Module.a.Tanh.forward.1".into(), opts(Task::Statistics, fwd_only));
        assert!(!f.section_active("input"));
        assert!(!f.section("input").unwrap());
        assert!(!f.section("output").unwrap());
    }

    /// A record whose files are dropped midway (drop mode, queue full) loses all of them: those
    /// already made (even inside a still-open list) and those added later, and no leaf names a
    /// file; its statistics stay.
    #[test]
    fn dropping_a_records_files_drops_all_of_them_and_their_names() {
        struct Full;
        impl ByteBudget for Full {
            fn would_admit(&self, _: u64) -> bool {
                false
            }
        }
        let mut b = RecordBuilder::new("Torch.cat.0.forward".into(), opts(Task::Tensor, DataMode::ALL));
        let data = [1.0f32, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>();
        let t = TensorRef { dtype: DType::F32, shape: &[2], data: &data, requires_grad: Some(false), type_name: None };
        b.section("input_args").unwrap();
        b.add_tensor(None, &t, &Unlimited).unwrap();
        b.open(None, false).unwrap();
        b.add_tensor(None, &t, &Unlimited).unwrap();
        assert_eq!((b.files.len(), b.file_bytes > 0), (2, true));
        b.add_tensor(None, &t, &Full).unwrap();
        b.close().unwrap();
        b.section("output").unwrap();
        b.add_tensor(None, &t, &Unlimited).unwrap();
        let body = b.take_body();
        assert!(b.files.is_empty() && b.files_dropped && b.file_bytes == 0);
        assert_eq!((b.tensors, b.dropped_files, b.dropped_bytes), (4, 4, 4 * 8));
        let text = body.to_compact();
        assert!(!text.contains("data_name"), "{text}");
        assert_eq!(text.matches("\"Max\":2.0").count(), 4, "{text}");
    }

    #[test]
    fn group_id_is_the_md5_of_the_python_list_text() {
        // Independent truth: Python's hashlib.md5(str(ranks).encode()).hexdigest().
        let id = |ranks: &[i64]| {
            group_leaf("torch.ProcessGroup", ranks).get("group_id").unwrap().as_str().unwrap().to_string()
        };
        assert_eq!(id(&[0, 1]), "264884439b70ab09a86bc848421c6de6");
        assert_eq!(id(&[3]), "f2577a6fc29b900fe7d4c6321346be48");
        assert_eq!(id(&[]), "d751713988987e9331980363e24189ce");
        let leaf = group_leaf("torch.ProcessGroup", &[]);
        let Json::Object(kv) = &leaf else { panic!() };
        let keys: Vec<_> = kv.iter().map(|(k, _)| &**k).collect();
        assert_eq!(keys, ["type", "group_ranks", "group_id"]);
    }

    #[test]
    fn data_mode_drops_sections() {
        let dm = DataMode::from_list(&["input".to_string()]);
        let mut b = RecordBuilder::new("Functional.relu.0.backward".into(), opts(Task::Statistics, dm));
        assert!(b.section("input").unwrap());
        b.add_value(None, Json::Null).unwrap();
        assert!(!b.section("output").unwrap());
        b.add_value(None, Json::Null).unwrap();
        let body = b.take_body();
        assert_eq!(body, Json::Object(vec![("input".into(), Json::Array(vec![Json::Null]))]));
        assert!(is_backward_name("Module.fc1.Linear.backward.0"));
        assert!(!is_backward_name("Module.fc1.Linear.forward.0"));
        // `input` makes a backward record whatever the name (1.1.1's checkpoint naming): the
        // forward-only sections are then unknown
        let mut b = RecordBuilder::new("Functional.relu.0.forward".into(), opts(Task::Statistics, DataMode::ALL));
        assert_eq!(b.section("input"), Ok(true));
        assert_eq!(b.section("output_fields"), Err(BuildError::UnknownSection("output_fields".into())));
    }
}
