//! The work behind the queue: creating and opening rank directories, journaling and storing
//! each record, handing back its tensor files to be written outside the lock, and writing,
//! refreshing and closing the JSON files. Whoever holds the lock does this (see `Shared`): the
//! writer thread, or a caller waiting for the files.

use super::dir_state::{parent_text, pretty, stack_text, DirState, RECORD_DEPTH};
use super::finished::{Counters, Finished, Journaled, TENSOR_DIR};
use super::in_place::JsonFiles;
use super::journaling::{dir_entry, Journals};
use super::json_files::JsonFile;
use crate::budget::Budget;
use crate::fsutil;
use crate::header::Header;
use crate::journal::{self, Sink};
use crate::json::{self, Json};
use crate::record::TensorFile;
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// What the handle sends the worker, handled in the order sent.
pub(super) enum Msg {
    Open {
        dir: PathBuf,
        header: Header,
    },
    /// `journaled`: the capturing thread journaled the record (its texts and where they went).
    Record {
        dir: PathBuf,
        rec: Finished,
        journaled: Option<Journaled>,
    },
    /// Journal entries a capturing thread appended outside a record message (a planned record).
    Span {
        dir: PathBuf,
        span: crate::journal::Appended,
    },
    /// The recorder's journal of a dump path, which its capturing threads append to.
    Journal {
        root: PathBuf,
        sink: Arc<dyn Sink>,
    },
    Write {
        dir: PathBuf,
        close: bool,
    },
    Construct {
        dir: PathBuf,
        name: String,
        parent: Option<String>,
    },
}

struct OpenDir {
    state: DirState,
    /// dump_tensor_data exists.
    tensor_dir: Option<PathBuf>,
    /// The JSON files, open since the directory opened (None: they could not be, and are
    /// written through temporaries instead).
    files: Option<JsonFiles>,
    /// Records stored in `state` since the directory opened, and how many of them the last
    /// successful write of dump.json held: those are counted as records, the rest as dropped
    /// when the directory closes.
    added: u64,
    covered: u64,
}

impl OpenDir {
    /// dump.json was written with everything `state` holds: its new records are counted.
    fn covered(&mut self, counters: &Counters) {
        counters.records.fetch_add(self.added - self.covered, Relaxed);
        self.covered = self.added;
    }
}

/// The writer's state behind its lock: the open directories and what it knows of others, and
/// the journal of each dump path.
pub(super) struct Worker {
    dirs: HashMap<PathBuf, OpenDir>,
    /// Headers of directories already closed (step ended), for records that finish late.
    closed: HashMap<PathBuf, Header>,
    /// Directories this process created (an existing one from an earlier run is moved aside).
    claimed: HashSet<PathBuf>,
    /// Directories that could not be created: their records are dropped (counted).
    failed: HashSet<PathBuf>,
    /// The journal of each dump path (one per process).
    journals: Journals,
    counters: Arc<Counters>,
    budget: Arc<Budget>,
}

/// The dump path of a `{root}/step{N}/rank{R}` directory.
fn root_of(dir: &Path) -> &Path {
    dir.parent().and_then(Path::parent).unwrap_or(Path::new("."))
}

/// `step{N}/rank{R}`: the directory as journal entries name it (relative to the dump path).
fn rel_of(dir: &Path) -> String {
    dir.strip_prefix(root_of(dir)).unwrap_or(dir).to_string_lossy().into_owned()
}

/// Counts a write error (`what`, under dump path `root`) and logs it. The first storage failure
/// (disk full, over quota, read-only, I/O error: `fsutil::is_storage_failure`) stops capture,
/// with one message naming the dump path and the error; after it, errors are only counted (each
/// write left would fail the same way). Of other errors the first few are logged.
pub(super) fn report(counters: &Counters, root: &Path, what: &str, e: &std::io::Error) {
    let n = counters.errors.fetch_add(1, Relaxed);
    if fsutil::is_storage_failure(e) {
        if !counters.storage_failed.swap(true, Relaxed) {
            log::error!(
                "cannot write to the dump path {} ({what}): {e}. Capture is off; the job continues uncaptured. The dump's JSON files stay valid; the run summary counts what was lost.",
                root.display()
            );
        }
    } else if counters.storage_failed.load(Relaxed) {
    } else if n < 5 {
        log::error!("writer: {what}: {e}");
    } else if n == 5 {
        log::error!("writer: more errors; only counting them from now on");
    }
}

/// Counts tensor files that will not be written.
fn lose(counters: &Counters, files: &[TensorFile]) {
    counters.files_lost.fetch_add(files.len() as u64, Relaxed);
    counters.bytes_lost.fetch_add(files.iter().map(|f| f.bytes.len() as u64).sum(), Relaxed);
}

/// `path` relative to the dump path `root`, for messages.
fn rel<'a>(path: &'a Path, root: &Path) -> std::path::Display<'a> {
    path.strip_prefix(root).unwrap_or(path).display()
}

/// The tensor files of one record, written outside the worker's lock: each file stands alone
/// (its record is already journaled and in the JSON state), so the writer thread and a caller
/// waiting in `stop()` write files side by side instead of one after the other.
pub(super) struct FileJob {
    tdir: PathBuf,
    files: Vec<TensorFile>,
    reserved: u64,
}

impl FileJob {
    /// Writes the files; one that fails is removed (never an empty or cut-short file) and
    /// counted as lost, as is every file once the storage failed (not even created). The
    /// record keeps its dump.json entry: its statistics came from memory.
    pub(super) fn run(self, counters: &Counters, budget: &Budget) {
        let root = self.tdir.ancestors().nth(3).unwrap_or(Path::new("."));
        for f in &self.files {
            if counters.storage_failed.load(Relaxed) {
                lose(counters, std::slice::from_ref(f));
                continue;
            }
            // One O_EXCL create + write: never replaces a file. A file cut short by a kill is
            // detected and removed by `msprobe recover` (see `recover::complete`).
            let path = self.tdir.join(&f.name);
            let res = fsutil::create_new(&path).and_then(|mut h| {
                let written = h.write_all(&f.bytes);
                if written.is_err() {
                    let _ = std::fs::remove_file(&path);
                }
                written
            });
            match res {
                Ok(()) => {
                    counters.files.fetch_add(1, Relaxed);
                    counters.bytes.fetch_add(f.bytes.len() as u64, Relaxed);
                }
                Err(e) => {
                    lose(counters, std::slice::from_ref(f));
                    report(counters, root, &format!("writing {}", rel(&path, root)), &e);
                }
            }
        }
        budget.release(self.reserved);
        for f in self.files {
            budget.give_buffer(f.bytes);
        }
    }
}

impl Worker {
    pub(super) fn new(counters: Arc<Counters>, budget: Arc<Budget>) -> Worker {
        Worker {
            dirs: HashMap::new(),
            closed: HashMap::new(),
            claimed: HashSet::new(),
            failed: HashSet::new(),
            journals: Journals::default(),
            counters,
            budget,
        }
    }

    /// Reports an error writing in `dir` (a rank directory).
    fn error(&self, dir: &Path, what: &str, e: &std::io::Error) {
        report(&self.counters, root_of(dir), what, e);
    }

    /// The storage failed: nothing new is written.
    fn storage_failed(&self) -> bool {
        self.counters.storage_failed.load(Relaxed)
    }

    /// A record that will not be written: dropped, counted, its budget given back.
    fn drop_record(&self, rec: Finished) {
        self.counters.dropped.fetch_add(1, Relaxed);
        lose(&self.counters, &rec.files);
        self.budget.release(rec.reserved);
        for f in rec.files {
            self.budget.give_buffer(f.bytes);
        }
    }

    /// Creates `dir` (`{root}/step{N}/rank{R}`, made by the recorder, whose root exists). An
    /// existing directory from an earlier run is moved aside first.
    fn create(&mut self, dir: &Path) -> bool {
        if self.claimed.contains(dir) {
            return true;
        }
        let (Some(rank), Some(step)) = (dir.file_name(), dir.parent().and_then(|p| p.file_name())) else {
            return false;
        };
        let root = root_of(dir);
        move_aside_if_used(dir);
        match fsutil::create_dirs(root, &[&step.to_string_lossy(), &rank.to_string_lossy()]) {
            Ok(_) => {
                self.claimed.insert(dir.to_path_buf());
                true
            }
            Err(e) => {
                if fsutil::is_storage_failure(&e) {
                    self.error(dir, &format!("creating {}", rel(dir, root)), &e);
                } else if self.failed.iter().any(|d| root_of(d) == root) {
                    // Once per dump root: each later step's directory there fails alike (its
                    // records are dropped and counted in the run summary).
                    log::debug!("cannot create the dump directory {}: {e}", dir.display());
                } else {
                    log::error!(
                        "cannot create the dump directory {}: {e}. Capture is off; the job continues. Set MSPROBE_DUMP_PATH (or dump_path) to a writable directory.",
                        dir.display()
                    );
                }
                self.counters.dir_failed.store(true, Relaxed);
                self.failed.insert(dir.to_path_buf());
                self.journals.closed(dir);
                false
            }
        }
    }

    fn open(&mut self, dir: PathBuf, header: Header) {
        if self.dirs.contains_key(&dir) || self.storage_failed() {
            return;
        }
        if let Err(e) = self.journals.ensure(&dir, &header) {
            self.error(&dir, "creating the journal", &e);
        }
        // The directory is journaled before it is created and again, with its device and
        // inode, once it exists (or is opened again): `msprobe recover` completes it after a
        // kill at any point of its creation, and recognises it as this run's (never another
        // run's of the same name).
        if !self.claimed.contains(&dir) {
            self.journal(&dir, &dir_entry(&rel_of(&dir), &header, None), true);
        }
        if !self.create(&dir) {
            return;
        }
        self.journal(&dir, &dir_entry(&rel_of(&dir), &header, journal::file_id(&dir)), true);
        // The JSON files start as msprobe's skeleton; records reach them at the next write
        // (writer idle, stop, step end, exit), and the journal before that: after a kill,
        // `msprobe recover` turns the journal into the files.
        let state = DirState { header: Some(header.clone()), dirty: true, ..Default::default() };
        let files = match JsonFiles::open(&dir, &state) {
            Ok(f) => Some(f),
            Err(e) if fsutil::is_storage_failure(&e) => {
                // Not even the skeleton fits: capture stops, and the directory this process
                // created (now empty) goes too; its records are dropped, and counted.
                self.error(&dir, &format!("creating the JSON files in {}", rel(&dir, root_of(&dir))), &e);
                if self.claimed.remove(&dir) && std::fs::remove_dir(&dir).is_ok() {
                    let _ = dir.parent().map(std::fs::remove_dir);
                }
                self.failed.insert(dir);
                return;
            }
            Err(e) => {
                // Not fatal: each write then goes through a temporary (and reports its errors).
                log::warn!("cannot keep the JSON files of {} open: {e}", dir.display());
                None
            }
        };
        self.dirs.insert(dir, OpenDir { state, tensor_dir: None, files, added: 0, covered: 0 });
    }

    /// Re-opens a closed directory for a record that began before its step ended: the written
    /// files are read back (and re-journaled) so nothing already dumped is lost.
    fn reopen(&mut self, dir: PathBuf, header: Header) {
        self.open(dir.clone(), header);
        let mut entries = Vec::new();
        let rel = rel_of(&dir);
        let Some(od) = self.dirs.get_mut(&dir) else { return };
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok().and_then(|t| json::parse(&t).ok());
        if let Some(Json::Object(recs)) = read("dump.json").as_ref().and_then(|d| d.get("data")).cloned() {
            for (name, body) in recs {
                let text = pretty(&body, RECORD_DEPTH);
                journal::entry(&mut entries, 'R', &rel, &name, &text);
                od.state.records.insert(name.into_owned(), text);
            }
        }
        for (file, kind) in [("stack.json", 'S'), ("construct.json", 'C')] {
            if let Some(Json::Object(kv)) = read(file) {
                for (name, v) in kv {
                    let text = if kind == 'S' { pretty(&v, 1) } else { v.to_compact() };
                    journal::entry(&mut entries, kind, &rel, &name, &text);
                    if kind == 'S' {
                        od.state.stack.insert(name.into_owned(), text);
                    } else {
                        od.state.construct.insert(name.into_owned(), text);
                    }
                }
            }
        }
        self.journal(&dir, &entries, true);
    }

    /// Appends `entries` of `dir` to its journal (the writer's own; capturing threads append
    /// their records themselves). Unbuffered: `_now` only says the entries must not wait.
    fn journal(&mut self, dir: &Path, entries: &[u8], _now: bool) {
        if let Err(e) = self.journals.append(dir, entries) {
            self.error(dir, "appending to the journal", &e);
        }
    }

    /// Journals and stores a record; its tensor files are returned to be written (by whoever
    /// handles the message, after releasing the lock).
    fn record(&mut self, dir: PathBuf, rec: Finished, journaled: Option<Journaled>) -> Option<FileJob> {
        if let Some(j) = &journaled {
            self.journals.processed(&dir, j.span);
        }
        if self.failed.contains(&dir) || self.storage_failed() {
            // Its directory could not be created, or the storage failed (capture is off): the
            // record is lost, and counted.
            if self.failed.contains(&dir) {
                self.journals.closed(&dir);
            }
            self.drop_record(rec);
            return None;
        }
        if !self.dirs.contains_key(&dir) {
            match self.closed.get(&dir).cloned() {
                Some(h) => self.reopen(dir.clone(), h),
                None => self.open(dir.clone(), Header::default()),
            }
            if !self.dirs.contains_key(&dir) {
                // It could not be created (logged once): the record is lost, and counted.
                self.drop_record(rec);
                return None;
            }
        }
        // The journal entries go first: a record whose data reached disk is always journaled.
        // The record is formatted once: this text goes to the journal and, later, into dump.json.
        // A recorder's capturing thread formatted and journaled it before handing it over.
        let (text, stack, parent) = match journaled {
            Some(j) => (j.text, j.stack, j.parent),
            None => {
                let text = pretty(&rec.body, RECORD_DEPTH);
                let rel = rel_of(&dir);
                let mut entry = Vec::with_capacity(text.len() + 64);
                journal::entry(&mut entry, 'R', &rel, &rec.name, &text);
                let stack = rec.stack.as_deref().map(stack_text);
                if let Some(st) = &stack {
                    journal::entry(&mut entry, 'S', &rel, &rec.name, st);
                }
                let parent = rec.parent.as_ref().map(parent_text);
                if let Some(p) = &parent {
                    journal::entry(&mut entry, 'C', &rel, &rec.name, p);
                }
                self.journal(&dir, &entry, !rec.files.is_empty());
                (text, stack, parent)
            }
        };
        let od = self.dirs.get_mut(&dir).expect("opened above");
        od.state.add_text(&rec.name, text);
        od.added += 1;
        if let Some(st) = stack {
            od.state.set_stack(rec.name.clone(), st);
        }
        if let Some(p) = parent {
            od.state.set_construct(rec.name.clone(), p);
        }
        if rec.files.is_empty() {
            self.budget.release(rec.reserved);
            return None;
        }
        let tdir = match od.tensor_dir.clone() {
            Some(t) => Ok(t),
            None => fsutil::create_dirs(&dir, &[TENSOR_DIR]),
        };
        match tdir {
            Ok(tdir) => {
                od.tensor_dir = Some(tdir.clone());
                Some(FileJob { tdir, files: rec.files, reserved: rec.reserved })
            }
            Err(e) => {
                // The record keeps its entry (its statistics are from memory); its files are lost.
                self.error(&dir, &format!("creating {}", rel(&dir.join(TENSOR_DIR), root_of(&dir))), &e);
                lose(&self.counters, &rec.files);
                self.budget.release(rec.reserved);
                for f in rec.files {
                    self.budget.give_buffer(f.bytes);
                }
                None
            }
        }
    }

    fn construct(&mut self, dir: PathBuf, name: String, parent: Option<String>) {
        if !self.dirs.contains_key(&dir) || self.storage_failed() {
            return;
        }
        let text = parent_text(&parent);
        let mut entry = Vec::new();
        journal::entry(&mut entry, 'C', &rel_of(&dir), &name, &text);
        self.journal(&dir, &entry, false);
        let od = self.dirs.get_mut(&dir).expect("checked above");
        od.state.set_construct(name, text);
    }

    pub(super) fn write(&mut self, dir: &Path, close: bool) {
        let Some(od) = self.dirs.get_mut(dir) else { return };
        // Nothing changed since the last write (e.g. step end right after stop): keep the files.
        let mut dump_written = false;
        let mut res = match (&mut od.files, od.state.dirty) {
            (_, false) => Ok(()),
            (Some(f), true) => f.write(&mut od.state, true).map(drop),
            (None, true) => replace_files(&od.state, dir, &mut dump_written),
        };
        let mut discarded = false;
        if let (Err(e), Some(f)) = (&res, od.files.as_mut()) {
            // The disk is full and the JSON files lack records: the journal holds the same
            // texts (every record stored was journaled, unless the journal's own write failed),
            // so giving its space back makes room for them. It is given back once they are
            // written anyway; if they still do not fit, they are lost (counted) and the files
            // keep what they had.
            if fsutil::is_out_of_space(e) && self.journals.discard(dir) {
                discarded = true;
                res = f.write(&mut od.state, true).map(drop);
            }
        }
        if dump_written || od.files.as_ref().is_some_and(|f| f.is_current(JsonFile::Dump, &od.state)) {
            od.covered(&self.counters);
        }
        // A failed write is tried again at the next (stop, step end, exit).
        od.state.dirty = res.is_err();
        match res {
            Ok(()) => self.journals.checkpoint(dir),
            Err(e) => {
                self.error(dir, &format!("writing the JSON files in {}", rel(dir, root_of(dir))), &e);
                if !discarded {
                    self.journals.keep(dir);
                }
            }
        }
        if close {
            if let Some(od) = self.dirs.remove(dir) {
                // Records that no write of dump.json held are lost.
                self.counters.dropped.fetch_add(od.added - od.covered, Relaxed);
                if let Some(h) = od.state.header {
                    self.closed.insert(dir.to_path_buf(), h);
                }
            }
            // Its entries are in its JSON files: their space is given back (and the journal
            // starts over when it holds nothing else).
            self.journals.closed(dir);
        }
    }

    /// Brings the kept-open JSON files of every open directory up to date; the writer thread
    /// does this when it runs out of work, so that a waiting `stop()` has only the records
    /// since to write. Must not run while tensor files are being written (the JSON files would
    /// name files not yet on disk). Once the storage failed, only stop, step end and exit write.
    pub(super) fn refresh(&mut self) {
        self.journals.prepare();
        let Worker { dirs, journals, counters, .. } = self;
        if counters.storage_failed.load(Relaxed) {
            return;
        }
        for (dir, od) in dirs.iter_mut() {
            let Some(f) = od.files.as_mut() else { continue };
            if !od.state.dirty {
                continue;
            }
            match f.write(&mut od.state, false) {
                Ok(current) => od.state.dirty = !current,
                Err(e) => {
                    let what = format!("writing the JSON files in {}", rel(dir, root_of(dir)));
                    report(counters, root_of(dir), &what, &e);
                    // The files are as they were, and written again at stop, step end or exit
                    // (after a storage failure, only then). After another error, those writes
                    // go through temporaries.
                    if !fsutil::is_storage_failure(&e) {
                        journals.keep(dir);
                        od.files = None;
                    }
                }
            }
            if od.files.as_ref().is_some_and(|f| f.is_current(JsonFile::Dump, &od.state)) {
                od.covered(counters);
            }
        }
    }

    /// Handles one message; a record's tensor files come back to be written after the lock is
    /// released (see `Shared::handle`).
    pub(super) fn handle(&mut self, msg: Msg) -> Option<FileJob> {
        match msg {
            Msg::Open { dir, header } => self.open(dir, header),
            Msg::Record { dir, rec, journaled } => return self.record(dir, rec, journaled),
            Msg::Journal { root, sink } => self.journals.set(root, sink),
            Msg::Span { dir, span } => self.journals.processed(&dir, span),
            Msg::Write { dir, close } => self.write(&dir, close),
            Msg::Construct { dir, name, parent } => self.construct(dir, name, parent),
        }
        None
    }

    /// Finishes every open directory (the process is ending).
    pub(super) fn close_all(&mut self) {
        let dirs: Vec<PathBuf> = self.dirs.keys().cloned().collect();
        for d in dirs {
            self.write(&d, true);
        }
        self.journals.finish();
    }
}

/// Writes the JSON files of `dir` each through a temporary and a rename (files that could not be
/// kept open), up to the first error; `dump_written` tells whether dump.json was.
fn replace_files(state: &DirState, dir: &Path, dump_written: &mut bool) -> std::io::Result<()> {
    for file in JsonFile::ALL {
        fsutil::replace_file(&dir.join(file.name()), state.text(file).as_bytes())?;
        *dump_written |= file == JsonFile::Dump;
    }
    Ok(())
}

/// A rank directory left by an earlier run is renamed, never overwritten or mixed with ours.
fn move_aside_if_used(dir: &Path) {
    let used = std::fs::read_dir(dir).map(|mut it| it.next().is_some()).unwrap_or(false);
    if !used {
        return;
    }
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("rank");
    let aside = dir.with_file_name(format!("{name}.replaced-{secs}-{}", std::process::id()));
    match std::fs::rename(dir, &aside) {
        Ok(()) => log::warn!("{} held a dump from an earlier run; it was moved to {}", dir.display(), aside.display()),
        Err(e) => log::warn!("{} holds a dump from an earlier run and cannot be moved aside ({e})", dir.display()),
    }
}
