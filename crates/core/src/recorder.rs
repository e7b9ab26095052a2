//! A capture session: configuration, step/rank state, per-name counters, filters, and the
//! hand-off of finished records to the writer. One per process, shared by every capture path.

use crate::budget::Budget;
use crate::config::{Config, Level, OnFull, Task};
use crate::fsutil;
use crate::header::Header;
use crate::journal::{self, Identity, OpenSink, Sink};
use crate::naming;
use crate::record::{ByteBudget, LeafOptions, RecordBuilder};
use crate::writer::{parent_text, stack_text, Finished, Journaled, Writer, RECORD_DEPTH, TENSOR_DIR};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

thread_local! {
    /// A capturing thread's scratch buffers: a record's text, and its journal entries.
    static SCRATCH: std::cell::RefCell<(String, Vec<u8>)> = const { std::cell::RefCell::new((String::new(), Vec::new())) };
}

/// Runs `f` with this thread's scratch buffers (record text, journal entries), both emptied;
/// fresh buffers if the thread's are already borrowed (a hook re-entered while formatting).
fn with_scratch<R>(f: impl FnOnce(&mut String, &mut Vec<u8>) -> R) -> R {
    SCRATCH.with(|scratch| {
        let mut fresh = Default::default();
        let mut guard = scratch.try_borrow_mut();
        let (buf, entries): &mut (String, Vec<u8>) = match guard.as_deref_mut() {
            Ok(s) => s,
            Err(_) => &mut fresh,
        };
        buf.clear();
        entries.clear();
        f(buf, entries)
    })
}

impl ByteBudget for Budget {
    fn would_admit(&self, n: u64) -> bool {
        Budget::would_admit(self, n)
    }
    fn buffer(&self, n: usize) -> Vec<u8> {
        self.take_buffer(n)
    }
    fn recycle(&self, b: Vec<u8>) {
        self.give_buffer(b)
    }
}

#[derive(Default)]
struct State {
    step: u64,
    rank: Option<u64>,
    counters: HashMap<String, u64>,
    /// Inside the [scope[0], scope[1]] range.
    in_scope: bool,
    /// mix: inside a Cell/Module whose name contains a `list` entry (msprobe 1.1.1's
    /// `MixRangeScope.in_list`; [`Recorder::module_span`], [`Recorder::scope_module`]): every
    /// record passes.
    in_list: bool,
    /// The layer reports Cell/Module begin and end for the scope too ([`Recorder::scope_module`]):
    /// the range follows msprobe 1.1.1's module range scopes (see there).
    modules: bool,
    /// The rank directory of the current step, once opened.
    dir: Option<PathBuf>,
    /// The dump root exists (created at the first start).
    root_ok: bool,
    /// The dump directory could not be created: capture stays off.
    failed: bool,
}

/// Totals for the run summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Records written (in dump.json, with all their tensor files or, see `without_files`, none).
    pub records: u64,
    pub tensors: u64,
    pub files: u64,
    pub bytes: u64,
    /// Records lost whole (not in dump.json): their directory could not be created, or they
    /// ended after the session finished.
    pub dropped: u64,
    /// Records written without their tensor files because the writer's queue was full
    /// (`on_queue_full` drop); their leaves keep their statistics and have no `data_name`.
    pub without_files: u64,
    /// Tensor files not written (those of `without_files` records, and tensors too large for
    /// their file format), and their tensor data bytes.
    pub files_dropped: u64,
    pub bytes_dropped: u64,
    pub filtered: u64,
    pub errors: u64,
    pub capture_ms: u64,
    /// Records that could not be journaled (the journal could not be created, or is full):
    /// written to the JSON files, but a kill before that loses them.
    pub unjournaled: u64,
    /// Tensor files not written because of write errors (disk full: every file after the
    /// first failure), and their bytes; see `writer::Counters::files_lost`.
    pub files_lost: u64,
    pub bytes_lost: u64,
}

impl std::fmt::Display for Summary {
    /// The recorder's lines of the run summary block.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            concat!(
                "  records: {} ({} tensors, {} tensor files, {} bytes written)\n",
                "  records dropped: {}, filtered out: {}, write errors: {}\n",
                "  records written without their tensor files (writer queue full): {}; ",
                "tensor files not written: {} ({} tensor bytes)\n",
                "  time in capture: {} ms"
            ),
            self.records,
            self.tensors,
            self.files,
            self.bytes,
            self.dropped,
            self.filtered,
            self.errors,
            self.without_files,
            self.files_dropped,
            self.bytes_dropped,
            self.capture_ms
        )?;
        write!(f, "\n  tensor files lost to write errors: {} ({} bytes)", self.files_lost, self.bytes_lost)?;
        if self.unjournaled > 0 {
            write!(f, "\n  records not in the crash journal (a kill would have lost them): {}", self.unjournaled)?;
        }
        Ok(())
    }
}

pub struct Recorder {
    cfg: Config,
    opts: LeafOptions,
    enabled: AtomicBool,
    state: Mutex<State>,
    writer: Writer,
    tensors: AtomicU64,
    filtered: AtomicU64,
    without_files: AtomicU64,
    files_dropped: AtomicU64,
    bytes_dropped: AtomicU64,
    capture_ns: AtomicU64,
    finished: AtomicBool,
    /// Opens the crash journal at the first start.
    open_sink: OpenSink,
    /// The crash journal, which `end` appends each record to before handing it to the writer.
    sink: OnceLock<Arc<dyn Sink>>,
    unjournaled: AtomicU64,
    planned_unjournaled: AtomicU64,
    /// Records begun and not yet ended or aborted ([`Recorder::quiesce`] waits for them).
    inflight: AtomicU64,
    /// The session is ending (`quiesce`, `finish`): capture is not turned on again.
    closing: AtomicBool,
    /// L2 whose capture window the API opens and closes (`PrecisionDebugger(level="L2")`): a step
    /// end leaves capture as it was instead of turning it on.
    api_window: AtomicBool,
}

impl Recorder {
    /// A recorder whose crash journal is a plain file (one `write` per record).
    pub fn new(cfg: Config) -> Recorder {
        Recorder::with_journal(cfg, journal::FileSink::open)
    }

    /// A recorder whose crash journal `open_sink` opens (libmsprobe's appends to a shared file
    /// mapping, without a system call).
    pub fn with_journal(cfg: Config, open_sink: OpenSink) -> Recorder {
        let opts = LeafOptions {
            task: cfg.task,
            summary_mode: cfg.summary_mode,
            dialect: cfg.dialect,
            format: cfg.tensor_format(),
            data_mode: cfg.data_mode,
        };
        let writer = Writer::new(Budget::new(cfg.queue_bytes, cfg.on_full == OnFull::Drop));
        Recorder {
            cfg,
            opts,
            enabled: AtomicBool::new(false),
            state: Mutex::new(State::default()),
            writer,
            tensors: AtomicU64::new(0),
            filtered: AtomicU64::new(0),
            without_files: AtomicU64::new(0),
            files_dropped: AtomicU64::new(0),
            bytes_dropped: AtomicU64::new(0),
            capture_ns: AtomicU64::new(0),
            finished: AtomicBool::new(false),
            open_sink,
            sink: OnceLock::new(),
            unjournaled: AtomicU64::new(0),
            planned_unjournaled: AtomicU64::new(0),
            inflight: AtomicU64::new(0),
            closing: AtomicBool::new(false),
            api_window: AtomicBool::new(false),
        }
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The hot-path check: one relaxed load.
    #[inline]
    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Relaxed)
    }

    pub fn current_step(&self) -> u64 {
        self.lock().step
    }

    fn selected(&self, st: &State) -> bool {
        let step_ok = self.cfg.step.is_empty() || self.cfg.step.contains(&st.step);
        // A process that is not distributed counts as rank 0 for the rank filter.
        let rank_ok = self.cfg.rank.is_empty() || self.cfg.rank.contains(&st.rank.unwrap_or(0));
        step_ok && rank_ok && !st.failed && !self.writer.failed()
    }

    /// Whether the step list says the run is over (past max(step)).
    pub fn finished_steps(&self) -> bool {
        let st = self.lock();
        matches!(self.cfg.step.max(), Some(m) if st.step > m)
    }

    /// Sets the rank (from the framework or HCCL); the directory becomes `rank{N}`.
    pub fn set_rank(&self, rank: u64) {
        let mut st = self.lock();
        if st.rank != Some(rank) {
            if st.dir.is_some() {
                log::warn!("rank set to {rank} after capture began in this step; the next step uses rank{rank}");
            }
            st.rank = Some(rank);
            crate::logging::set_rank(rank);
        }
    }

    pub fn rank(&self) -> Option<u64> {
        self.lock().rank
    }

    fn dump_data_dir(&self, st: &State) -> Option<String> {
        if self.cfg.task != Task::Tensor {
            return None;
        }
        let base = self.cfg.dump_path.to_string_lossy();
        let base = base.trim_end_matches('/');
        Some(format!("{base}/{}/{}/{TENSOR_DIR}", naming::step_dir(st.step), naming::rank_dir(st.rank)))
    }

    /// Opens the current step's rank directory. The dump root is created here once (so a bad
    /// dump path is reported at the first start, and capture stays off); the step and rank
    /// directories are created by the writer thread, off the hooked thread.
    fn ensure_dir(&self, st: &mut State) -> Option<PathBuf> {
        if let Some(d) = &st.dir {
            return Some(d.clone());
        }
        if st.failed {
            return None;
        }
        if !st.root_ok {
            if let Err(e) = fsutil::create_dirs(&self.cfg.dump_path, &[]) {
                log::error!(
                    "cannot create the dump directory {}: {e}. Capture is off; the job continues. Set MSPROBE_DUMP_PATH (or dump_path) to a writable directory.",
                    self.cfg.dump_path.display()
                );
                st.failed = true;
                self.enabled.store(false, Relaxed);
                return None;
            }
            st.root_ok = true;
            // Where the dump goes, said once, when capture first writes there.
            let shown = std::fs::canonicalize(&self.cfg.dump_path).unwrap_or_else(|_| self.cfg.dump_path.clone());
            log::info!("dump path {}: one directory per step, one per rank inside", shown.display());
            self.open_journal();
        }
        let dir = self.cfg.dump_path.join(naming::step_dir(st.step)).join(naming::rank_dir(st.rank));
        st.dir = Some(dir.clone());
        let header = Header {
            task: self.cfg.task.as_str().into(),
            level: self.cfg.level.as_str().into(),
            dump_data_dir: self.dump_data_dir(st),
        };
        self.writer.open(dir.clone(), header);
        Some(dir)
    }

    /// Opens the crash journal in the dump path (which exists); capture goes on without one.
    fn open_journal(&self) {
        let root = &self.cfg.dump_path;
        let header =
            Header { task: self.cfg.task.as_str().into(), level: self.cfg.level.as_str().into(), dump_data_dir: None };
        match (self.open_sink)(root, &Identity::of_this_process(root, &header)) {
            Ok(sink) => {
                if self.sink.set(sink.clone()).is_ok() {
                    self.writer.journal(root.clone(), sink);
                }
            }
            // A full disk stops capture, with the dump path's one message.
            Err(e) if crate::fsutil::is_storage_failure(&e) => {
                self.writer.report_error(root, "creating the crash journal", &e)
            }
            Err(e) => log::warn!(
                "cannot create the crash journal in {}: {e}. Records are still written, but a kill loses those not yet in the JSON files.",
                root.display()
            ),
        }
    }

    /// Turns capture on for the current step (if the step and rank are selected) and writes
    /// the step's skeleton files.
    pub fn start(&self) -> bool {
        if self.finished.load(Relaxed) || self.closing.load(Relaxed) {
            return false;
        }
        let mut st = self.lock();
        if !self.selected(&st) {
            self.enabled.store(false, Relaxed);
            return false;
        }
        let ok = self.ensure_dir(&mut st).is_some();
        self.enabled.store(ok, Relaxed);
        ok
    }

    /// Turns capture off and writes the JSON files of the current step: in the background, or
    /// (`wait`) before returning, together with everything still queued, as msprobe's `stop()`.
    pub fn stop(&self, wait: bool) {
        self.enabled.store(false, Relaxed);
        if wait {
            self.flush();
        } else if let Some(d) = self.lock().dir.clone() {
            self.writer.write(d, false);
        }
    }

    /// L2 capture from now on follows the API's start()/stop() (see `api_window`).
    pub fn set_api_window(&self) {
        self.api_window.store(true, Relaxed);
    }

    /// Ends the step: writes its JSON files, then resets the counters and the scope range.
    /// Capture stays in the state it was in (on for L2 without start/stop calls, where the step's
    /// filters decide).
    pub fn step(&self) {
        let mut st = self.lock();
        let closing = st.dir.take();
        st.step += 1;
        st.counters.clear();
        st.in_list = false;
        if !st.modules {
            // The name-only range closes with the step. With Cell/Module reports the range is
            // msprobe 1.1.1's scope object, which lives for the whole run (never reset).
            st.in_scope = false;
        }
        if self.cfg.level == Level::L2 && !self.closing.load(Relaxed) && !self.api_window.load(Relaxed) {
            let on = self.selected(&st);
            self.enabled.store(on, Relaxed);
        }
        drop(st);
        if let Some(d) = closing {
            self.writer.write(d, true);
        }
    }

    /// Makes L2 capture (no start/stop calls) follow the step and rank filters.
    pub fn auto_start(&self) -> bool {
        let st = self.lock();
        let on = self.selected(&st) && !self.closing.load(Relaxed);
        self.enabled.store(on, Relaxed);
        on
    }

    /// The next call index for a counter key (`"Functional.linear."`), per step, from 0.
    pub fn next_index(&self, key: &str) -> u64 {
        let mut st = self.lock();
        let c = st.counters.entry(key.to_string()).or_insert(0);
        let n = *c;
        *c += 1;
        n
    }

    /// A module's forward or backward span starts (`begin`, at its pre-hook) or ends (at its
    /// post-hook), `name` being its record name. At level mix with a `list`, msprobe 1.1.1's
    /// `MixRangeScope` keeps one flag: set when a module whose name contains a list entry
    /// starts, cleared when such a module ends; while it is set every record passes the list
    /// (every API inside a listed module is dumped, not only those whose names match). The
    /// flag is one boolean as 1.1.1's, so a listed module ending inside another listed one
    /// clears it for the rest of the outer one too. Elsewhere a no-op. The PyTorch layer reports
    /// through this (its scope range is kept in Python, `state.py`); MindSpore's Cells through
    /// [`Recorder::scope_module`], which also drives the scope range.
    pub fn module_span(&self, name: &str, begin: bool) {
        if self.cfg.level == Level::Mix && !self.cfg.list.is_empty() {
            self.list_span(&mut self.lock(), name, begin);
        }
    }

    fn list_span(&self, st: &mut State, name: &str, begin: bool) {
        if self.cfg.list.iter().any(|l| name.contains(l.as_str())) {
            st.in_list = begin;
        }
    }

    /// msprobe's range/list filter for one record name.
    fn passes_filters(&self, st: &mut State, name: &str) -> bool {
        let mut ok = true;
        if self.cfg.scope.len() == 2 {
            // msprobe 1.1.1's ModuleRangeScope (L0) opens and closes only at module begin/end;
            // APIRangeScope (L1) and MixRangeScope (mix) also at the record names.
            let names = !(st.modules && self.cfg.level == Level::L0);
            if names && name == self.cfg.scope[0] {
                st.in_scope = true;
            }
            ok = st.in_scope;
            if names && name == self.cfg.scope[1] {
                st.in_scope = false;
            }
        }
        if ok && !self.cfg.list.is_empty() {
            ok = st.in_list || self.cfg.list.iter().any(|l| name.contains(l.as_str()));
        }
        ok
    }

    /// A Cell/Module began (`begin`: its forward or backward pre-hook ran; `name` is its record
    /// name, `Cell.fc.Dense.forward.0`) or ended (after its record). msprobe 1.1.1's module range
    /// scopes (L0 `ModuleRangeScope`, mix `MixRangeScope`): the range opens when `scope[0]`
    /// begins, so the calls inside it are in range, and closes when `scope[1]` ends; at mix a
    /// record named `scope[0]` opens it again (the enclosing Cell's record comes after its
    /// children's), and the state is kept across steps, as 1.1.1's scope object is. At mix, a
    /// module whose name contains a `list` entry lets every record inside it pass.
    pub fn scope_module(&self, name: &str, begin: bool) {
        if self.cfg.level == Level::L1 || self.cfg.level == Level::L2 {
            return;
        }
        let mut st = self.lock();
        st.modules = true;
        if self.cfg.scope.len() == 2 {
            if begin && name == self.cfg.scope[0] {
                st.in_scope = true;
            }
            if !begin && name == self.cfg.scope[1] {
                st.in_scope = false;
            }
        }
        if self.cfg.level == Level::Mix {
            self.list_span(&mut st, name, begin);
        }
    }

    /// Starts a record, or `None` when capture is off or the record is filtered out. A record
    /// begun is ended ([`Recorder::end`]) or aborted ([`Recorder::abort`]).
    pub fn begin(&self, name: &str) -> Option<RecordBuilder> {
        if !self.is_enabled() {
            return None;
        }
        // Counted before capture is checked again: `quiesce` turns capture off, then waits for
        // the count, so a record either sees capture off or is waited for.
        self.inflight.fetch_add(1, SeqCst);
        let b = self.begin_counted(name);
        if b.is_none() {
            self.inflight.fetch_sub(1, SeqCst);
        }
        b
    }

    fn begin_counted(&self, name: &str) -> Option<RecordBuilder> {
        if !self.enabled.load(SeqCst) {
            return None;
        }
        let mut st = self.lock();
        if self.writer.failed() {
            // The writer could not create a step directory or the storage failed (and said
            // why): capture is off.
            st.failed = true;
            self.enabled.store(false, Relaxed);
            return None;
        }
        if !self.passes_filters(&mut st, name) {
            self.filtered.fetch_add(1, Relaxed);
            return None;
        }
        let dir = self.ensure_dir(&mut st)?;
        let mut b = RecordBuilder::new(name.to_string(), self.opts.clone());
        b.target = dir;
        Some(b)
    }

    /// Sets a construct.json entry outside a record (module parents at module start).
    pub fn set_construct(&self, name: &str, parent: Option<&str>) {
        if !self.is_enabled() {
            return;
        }
        let dir = self.ensure_dir(&mut self.lock());
        if let Some(dir) = dir {
            self.writer.construct(dir, name.to_string(), parent.map(str::to_string));
        }
    }

    /// The budget tensor leaves reserve from.
    /// The cap on queued tensor bytes (`MSPROBE_QUEUE_MB`).
    pub fn queue_bytes(&self) -> u64 {
        self.cfg.queue_bytes
    }

    pub fn budget(&self) -> &Budget {
        &self.writer.budget
    }

    /// Drops a record begun with [`Recorder::begin`] without writing it.
    pub fn abort(&self, b: RecordBuilder) {
        drop(b);
        self.inflight.fetch_sub(1, SeqCst);
    }

    /// Turns capture off and waits (at most `max`) until every record begun has ended: a
    /// signal's finish does this first, so that no record whose call returns meanwhile is lost.
    pub fn quiesce(&self, max: std::time::Duration) {
        self.closing.store(true, SeqCst);
        self.enabled.store(false, SeqCst);
        let t0 = Instant::now();
        while self.inflight.load(SeqCst) > 0 && t0.elapsed() < max {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }

    /// Hands a finished record to the writer (see `end_counted`).
    pub fn end(&self, b: RecordBuilder) {
        self.end_counted(b);
        self.inflight.fetch_sub(1, SeqCst);
    }

    /// Its tensor files reserve their bytes here, all at once (see [`crate::budget`]): in block
    /// mode this waits for room (for a record larger than the queue, until nothing else is in
    /// flight); in drop mode a record that does not fit is written without its tensor files,
    /// and counted.
    fn end_counted(&self, mut b: RecordBuilder) {
        let budget = &*self.writer.budget;
        let mut reserved = 0;
        if !b.files.is_empty() {
            if budget.reserve(b.file_bytes) {
                reserved = b.file_bytes;
            } else {
                b.drop_files(budget);
            }
        }
        let body = b.take_body();
        self.tensors.fetch_add(b.tensors, Relaxed);
        if b.dropped_files > 0 {
            self.files_dropped.fetch_add(b.dropped_files, Relaxed);
            self.bytes_dropped.fetch_add(b.dropped_bytes, Relaxed);
        }
        if b.files_dropped && self.without_files.fetch_add(1, Relaxed) == 0 {
            log::warn!("writer queue full: records are being written without their tensor files (counted; see the run summary). Raise MSPROBE_QUEUE_MB or set MSPROBE_ON_QUEUE_FULL=block");
        }
        let target = std::mem::take(&mut b.target);
        let rel = target.strip_prefix(&self.cfg.dump_path).ok().and_then(|r| r.to_str());
        let (Some(sink), Some(rel)) = (self.sink.get(), rel) else {
            let rec = Finished {
                name: std::mem::take(&mut b.name),
                body,
                files: std::mem::take(&mut b.files),
                stack: b.stack.take(),
                parent: b.parent.take(),
                reserved,
            };
            // No journal of its own (it could not be created): the writer journals the record.
            self.writer.record(target, rec);
            return;
        };
        // Durable before the hooked call returns: the record's entries go into the journal
        // here, on the capturing thread, formatted once into exactly the texts its JSON files
        // will hold (the writer only files them). Formatted in the thread's scratch buffers,
        // and kept (until the step's files are closed) in strings of their exact length.
        let stack = b.stack.take().map(|f| stack_text(&f));
        let parent = b.parent.take().map(|p| parent_text(&p));
        let (text, span) = with_scratch(|buf, entries| {
            body.write_pretty_at(buf, RECORD_DEPTH);
            journal::entry(entries, 'R', rel, &b.name, buf);
            if let Some(st) = &stack {
                journal::entry(entries, 'S', rel, &b.name, st);
            }
            if let Some(p) = &parent {
                journal::entry(entries, 'C', rel, &b.name, p);
            }
            let span = sink.append(entries);
            (buf.as_str().to_string(), span)
        });
        drop(body);
        if !span.ok {
            self.count_unjournaled(sink.failure());
        }
        let rec = Finished {
            name: std::mem::take(&mut b.name),
            body: crate::json::Json::Null,
            files: std::mem::take(&mut b.files),
            stack: None,
            parent: None,
            reserved,
        };
        self.writer.record_journaled(target, rec, Journaled { text, stack, parent, span });
    }

    /// Journals the planned form of a record that another thread will end later (device
    /// statistics, issue #21): a `P` entry on the launching thread, durable when the hooked call
    /// returns. `msprobe recover` writes it, with its statistics null, only when the record's
    /// own `R` entry never came (counted there as uncertain). Without a journal, nothing to do:
    /// the record is journaled (or counted) when it ends.
    pub fn journal_planned(&self, mut b: RecordBuilder) {
        let body = b.take_body();
        let rel = b.target.strip_prefix(&self.cfg.dump_path).ok().and_then(|r| r.to_str());
        let (Some(sink), Some(rel)) = (self.sink.get(), rel) else { return };
        let span = with_scratch(|buf, entries| {
            body.write_pretty_at(buf, RECORD_DEPTH);
            journal::entry(entries, 'P', rel, &b.name, buf);
            sink.append(entries)
        });
        if !span.ok {
            self.planned_unjournaled.fetch_add(1, Relaxed);
        }
        // The writer accounts for the span (its directory keeps it until the directory closes).
        self.writer.journal_span(b.target.clone(), span);
    }

    /// Planned records (see [`Recorder::journal_planned`]) the journal could not take.
    pub fn planned_unjournaled(&self) -> u64 {
        self.planned_unjournaled.load(Relaxed)
    }

    /// A record could not be journaled, because of `failure` (if the file system said why). A
    /// storage failure (disk full, I/O error) stops capture with the dump path's one message;
    /// another reason is said once.
    fn count_unjournaled(&self, failure: Option<std::io::Error>) {
        let first = self.unjournaled.fetch_add(1, Relaxed) == 0;
        match failure {
            Some(e) if crate::fsutil::is_storage_failure(&e) => {
                self.writer.report_error(&self.cfg.dump_path, "appending to the crash journal", &e)
            }
            Some(e) if first => log::warn!(
                "a record could not be journaled ({e}; see the run summary): a kill before its JSON files are written loses it"
            ),
            _ if first => log::warn!(
                "a record could not be journaled (see the run summary): a kill before its JSON files are written loses it"
            ),
            _ => {}
        }
    }

    /// Adds time spent capturing (for the summary).
    pub fn add_capture_nanos(&self, d: std::time::Duration) {
        self.capture_ns.fetch_add(d.as_nanos() as u64, Relaxed);
    }

    /// Adds time spent capturing since `since` (for the summary).
    pub fn add_capture_time(&self, since: Instant) {
        self.capture_ns.fetch_add(since.elapsed().as_nanos() as u64, Relaxed);
    }

    /// Writes the current JSON files and returns once they and everything queued are on disk.
    pub fn flush(&self) {
        let dir = self.lock().dir.clone();
        match dir {
            Some(d) => self.writer.write_now(&d, false),
            None => self.writer.sync(),
        }
    }

    /// Ends the session: final JSON files, writer stopped. Only the first call does (and
    /// returns) anything, so an explicit finish and the exit hook do not repeat each other.
    pub fn finish(&self) -> Option<Summary> {
        if self.finished.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return None;
        }
        self.closing.store(true, SeqCst);
        self.enabled.store(false, Relaxed);
        let dir = self.lock().dir.take();
        if let Some(d) = dir {
            self.writer.write(d, true);
        }
        self.writer.shutdown();
        Some(self.summary())
    }

    pub fn summary(&self) -> Summary {
        let c = &self.writer.counters;
        Summary {
            records: c.records.load(Relaxed),
            tensors: self.tensors.load(Relaxed),
            files: c.files.load(Relaxed),
            bytes: c.bytes.load(Relaxed),
            dropped: c.dropped.load(Relaxed),
            without_files: self.without_files.load(Relaxed),
            files_dropped: self.files_dropped.load(Relaxed),
            bytes_dropped: self.bytes_dropped.load(Relaxed),
            filtered: self.filtered.load(Relaxed),
            errors: c.errors.load(Relaxed),
            capture_ms: self.capture_ns.load(Relaxed) / 1_000_000,
            unjournaled: self.unjournaled.load(Relaxed),
            files_lost: c.files_lost.load(Relaxed),
            bytes_lost: c.bytes_lost.load(Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Task;
    use crate::dtype::DType;
    use crate::record::TensorRef;

    fn recorder(dir: &std::path::Path, task: Task, queue_bytes: u64) -> Recorder {
        Recorder::new(Config { task, dump_path: dir.to_path_buf(), queue_bytes, ..Config::default() })
    }

    fn tensor_record(rec: &Recorder, name: &str, data: &[u8]) -> RecordBuilder {
        try_tensor_record(rec, name, data).expect("recording")
    }

    /// A record of one f32 tensor, or None when the recorder does not record.
    fn try_tensor_record(rec: &Recorder, name: &str, data: &[u8]) -> Option<RecordBuilder> {
        let mut b = rec.begin(name)?;
        b.section("input_args").unwrap();
        let shape = [(data.len() / 4) as i64];
        let t = TensorRef { dtype: DType::F32, shape: &shape, data, requires_grad: None, type_name: None };
        b.add_tensor(None, &t, rec.budget()).unwrap();
        Some(b)
    }

    /// At mix a listed module's span lets every record inside it pass the list, as 1.1.1's
    /// MixRangeScope; at L1 (and outside the span) only names containing an entry pass.
    #[test]
    fn mix_list_passes_everything_inside_a_listed_module() {
        for (level, inside) in [(Level::Mix, true), (Level::L1, false)] {
            let dir = tempfile::tempdir().unwrap();
            let rec = Recorder::new(Config {
                level,
                list: vec!["block".into()],
                dump_path: dir.path().to_path_buf(),
                ..Config::default()
            });
            rec.start();
            let passes = |n: &str| {
                let mut st = rec.lock();
                rec.passes_filters(&mut st, n)
            };
            assert!(!passes("Functional.linear.0.forward"));
            rec.module_span("Module.head.Linear.forward.0", true); // not listed: no effect
            assert!(!passes("Functional.linear.0.forward"));
            rec.module_span("Module.block.Block.forward.0", true);
            assert_eq!(passes("Functional.linear.1.forward"), inside);
            assert!(passes("Module.block.Block.forward.0"));
            rec.module_span("Module.head.Linear.forward.0", false);
            assert_eq!(passes("Functional.gelu.0.forward"), inside);
            // an inner listed module ends: the one flag is cleared, as in 1.1.1
            rec.module_span("Module.block.fc.Linear.forward.0", true);
            rec.module_span("Module.block.fc.Linear.forward.0", false);
            assert!(!passes("Functional.linear.2.forward"));
            rec.module_span("Module.block.Block.backward.0", true);
            assert_eq!(passes("Functional.linear.1.backward"), inside);
            rec.step();
            assert!(!passes("Functional.linear.3.forward"));
        }
    }

    /// A record is in the journal when `end` returns (the capturing thread appends it; the
    /// writer has not necessarily seen it), with exactly the text dump.json gets; the journal
    /// starts over once every step is written, and is removed at a clean finish.
    #[test]
    fn records_are_journaled_before_end_returns() {
        let t = tempfile::tempdir().unwrap();
        let rec = recorder(t.path(), Task::Statistics, 1 << 30);
        rec.start();
        let journal = || {
            let j = std::fs::read_dir(t.path())
                .unwrap()
                .flatten()
                .find(|e| e.file_name().to_string_lossy().starts_with(crate::journal::PREFIX));
            j.map(|e| e.path())
        };
        let path = journal().expect("created at start");
        for i in 0..50 {
            let name = format!("Torch.add.{i}.forward");
            let mut b = tensor_record(&rec, &name, &(i as f32).to_le_bytes());
            b.stack = Some(vec![format!("File a.py, line {i}, in f, \n f()")]);
            rec.end(b);
            // Its entries, together (the writer may append directory entries around them).
            let r = crate::journal::read(&path).unwrap();
            let mine: Vec<_> = r
                .entries
                .iter()
                .filter(|e| e.name == name)
                .map(|e| (e.kind, e.dir.as_str(), e.name.as_str()))
                .collect();
            assert_eq!(mine, [('R', "step0/rank", name.as_str()), ('S', "step0/rank", name.as_str())]);
            assert_eq!(r.entries.iter().filter(|e| e.kind != 'D').count(), 2 * (i + 1));
        }
        rec.stop(true);
        let text = std::fs::read_to_string(t.path().join("step0/rank/dump.json")).unwrap();
        let r = crate::journal::read(&path).unwrap();
        let last = r.entries.iter().rev().find(|e| e.kind == 'R').unwrap();
        assert!(text.contains(&format!("{}: {}", crate::json::Json::str(last.name.clone()).to_compact(), last.text)));
        rec.step();
        rec.start();
        rec.stop(true);
        rec.step();
        rec.flush();
        let base = std::fs::metadata(&path).unwrap().len();
        assert!(base <= 8192, "every step is written and closed: the journal started over ({base} bytes)");
        let s = rec.finish().unwrap();
        assert_eq!((s.records, s.unjournaled), (50, 0));
        assert!(journal().is_none(), "removed at a clean finish");
    }

    /// msprobe 1.1.1's MixRangeScope with Cell begin/end reports: the range opens at the first
    /// Cell's pre-hook (the calls inside it pass), closes after the last Cell's record, opens again
    /// at the enclosing Cell's record and stays open into the next step; at L0 (ModuleRangeScope)
    /// only the reports move it; without reports the name-only range closes with the step.
    #[test]
    fn module_reports_follow_msprobe_111_range_scopes() {
        let t = tempfile::tempdir().unwrap();
        let scope = vec!["Cell.a.A.forward.0".to_string(), "Cell.a.b.B.forward.0".to_string()];
        let mk = |level: Level| {
            Recorder::new(Config {
                level,
                scope: scope.clone(),
                dump_path: t.path().join(level.as_str()),
                ..Config::default()
            })
        };
        let passes = |rec: &Recorder, name: &str| match rec.begin(name) {
            Some(b) => {
                rec.abort(b);
                true
            }
            None => false,
        };
        let rec = mk(Level::Mix);
        rec.start();
        assert!(!passes(&rec, "Functional.x.0.forward"));
        rec.scope_module("Cell.a.A.forward.0", true);
        assert!(passes(&rec, "Functional.y.0.forward"));
        rec.scope_module("Cell.a.b.B.forward.0", true);
        assert!(passes(&rec, "Cell.a.b.B.forward.0"));
        rec.scope_module("Cell.a.b.B.forward.0", false);
        assert!(!passes(&rec, "Functional.z.0.forward"));
        assert!(passes(&rec, "Cell.a.A.forward.0"), "the enclosing Cell's record opens the range again");
        rec.scope_module("Cell.a.A.forward.0", false);
        assert!(passes(&rec, "Functional.w.0.forward"));
        rec.stop(true);
        rec.step();
        rec.start();
        assert!(passes(&rec, "Functional.v.0.forward"), "the range outlives the step, as 1.1.1's scope object");
        rec.stop(true);

        let rec = mk(Level::L0);
        rec.start();
        rec.scope_module("Cell.a.A.forward.0", true);
        assert!(passes(&rec, "Cell.a.c.C.forward.0"));
        rec.scope_module("Cell.a.b.B.forward.0", false);
        assert!(!passes(&rec, "Cell.a.A.forward.0"), "at L0 record names do not move the range");
        rec.stop(true);

        let rec = mk(Level::Mix);
        rec.start();
        assert!(passes(&rec, "Cell.a.A.forward.0"));
        rec.stop(true);
        rec.step();
        rec.start();
        assert!(!passes(&rec, "Functional.v.0.forward"), "without reports the range closes with the step");
        rec.stop(true);
    }

    /// A record holds no budget while it is built, so aborted records leave nothing behind; one
    /// ended after the session finished is counted as dropped and gives its bytes back.
    #[test]
    fn aborted_and_late_records_leave_no_budget_behind() {
        let t = tempfile::tempdir().unwrap();
        let rec = recorder(t.path(), Task::Tensor, 1 << 20);
        rec.start();
        let data = vec![0u8; 600 << 10];
        for i in 0..5 {
            drop(tensor_record(&rec, &format!("Torch.a.{i}.forward"), &data));
            assert_eq!(rec.budget().in_flight(), 0);
        }
        let b = tensor_record(&rec, "Torch.a.9.forward", &data);
        rec.end(b);
        let late = tensor_record(&rec, "Torch.a.10.forward", &data);
        let s = rec.finish().unwrap();
        assert_eq!((s.records, s.dropped), (1, 0), "{s:?}");
        rec.end(late);
        assert_eq!(rec.budget().in_flight(), 0);
        assert_eq!(rec.summary().dropped, 1);
    }

    #[test]
    fn a_step_directory_that_cannot_be_created_turns_capture_off_and_counts() {
        let t = tempfile::tempdir().unwrap();
        // The writer creates step0/rank asynchronously; a file named step0 makes that fail.
        std::fs::write(t.path().join("step0"), b"in the way").unwrap();
        let rec = recorder(t.path(), Task::Statistics, 1 << 30);
        assert!(rec.start(), "the dump root itself is fine");
        // The writer may already have failed (capture off, nothing begun) or not yet (the record
        // is begun, then dropped and counted).
        let began = try_tensor_record(&rec, "Torch.a.0.forward", &1f32.to_le_bytes()).map(|b| rec.end(b));
        rec.writer.sync();
        assert!(rec.begin("Torch.a.1.forward").is_none(), "capture is off once the writer failed");
        assert!(!rec.is_enabled());
        let s = rec.finish().unwrap();
        assert_eq!((s.records, s.dropped), (0, began.is_some() as u64), "{s:?}");
        assert_eq!(std::fs::read(t.path().join("step0")).unwrap(), b"in the way");
    }

    #[test]
    fn a_record_finishing_after_its_step_ended_keeps_the_step() {
        let t = tempfile::tempdir().unwrap();
        let rec = recorder(t.path(), Task::Statistics, 1 << 30);
        rec.start();
        let data = 1f32.to_le_bytes();
        for i in 0..3 {
            let b = tensor_record(&rec, &format!("Torch.a.{i}.forward"), &data);
            rec.end(b);
        }
        let late = tensor_record(&rec, "Torch.late.0.forward", &data);
        rec.step();
        rec.end(late);
        rec.finish();
        let text = std::fs::read_to_string(t.path().join("step0/rank/dump.json")).unwrap();
        let v = crate::json::parse(&text).unwrap();
        let Some(crate::json::Json::Object(data)) = v.get("data") else { panic!("no data") };
        let names: Vec<&str> = data.iter().map(|(k, _)| &**k).collect();
        assert_eq!(names, ["Torch.a.0.forward", "Torch.a.1.forward", "Torch.a.2.forward", "Torch.late.0.forward"]);
        assert_eq!(v.get("task").and_then(|t| t.as_str()), Some("statistics"));
    }

    #[test]
    fn the_longest_names_still_get_their_files() {
        let t = tempfile::tempdir().unwrap();
        let rec = recorder(t.path(), Task::Tensor, 1 << 30);
        rec.start();
        let name = format!("Module.{}.Linear.forward.0", "m".repeat(300));
        let b = tensor_record(&rec, &name, &1f32.to_le_bytes());
        rec.end(b);
        let s = rec.finish().unwrap();
        assert_eq!((s.files, s.errors), (1, 0));
        let files: Vec<_> = std::fs::read_dir(t.path().join("step0/rank/dump_tensor_data")).unwrap().collect();
        assert_eq!(files.len(), 1);
    }
}
