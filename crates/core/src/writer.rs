//! The background writer: tensor files, the journal, and dump.json / stack.json / construct.json.
//!
//! Capturing threads hand finished records to one writer thread through a bounded crossbeam
//! channel, and wake it only when needed (see [`Doorbell`]). A thread that must wait for the
//! files (a synchronous `stop()`, a flush) does not wake the writer and sleep until it replies:
//! it takes the writer's state and does the queued work itself (see [`Writer::sync`]), which
//! spares it two thread wake-ups per stop. Tensor files are written outside the state's lock,
//! so that caller and the writer thread write them side by side. Tensor bytes in flight are capped
//! by a [`Budget`] that either blocks the capturing thread or drops (and counts) data. Each
//! record is formatted once, into exactly the text it will have inside dump.json, and appended
//! to the process's [`journal`](crate::journal) before its tensor files are written; journal
//! writes are batched while more records are queued and reach the file as soon as the queue is
//! empty. A killed process therefore leaves what [`recover_dir`] needs to rebuild its JSON files. The
//! JSON files are created with msprobe's skeleton when a step directory opens, kept open, and
//! written in place (extended when they only gained entries, see [`JsonFiles`]) by the writer
//! whenever it runs out of work, and at stop, step end and exit.
//!
//! The journal format is in [`crate::journal`].

use crate::budget::Budget;
use crate::fsutil;
use crate::header::Header;
use crate::journal::{self, Journal};
use crate::json::{self, Json};
use crate::record::TensorFile;
use crossbeam_channel::{bounded, Receiver, Sender};
use indexmap::IndexMap;
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

pub const TENSOR_DIR: &str = "dump_tensor_data";

/// A record ready for disk.
pub struct Finished {
    pub name: String,
    pub body: Json,
    pub files: Vec<TensorFile>,
    pub stack: Option<Vec<String>>,
    pub parent: Option<Option<String>>,
    /// Budget bytes to release once the files are written.
    pub reserved: u64,
}

enum Msg {
    Open { dir: PathBuf, header: Header },
    Record { dir: PathBuf, rec: Finished },
    Write { dir: PathBuf, close: bool },
    Construct { dir: PathBuf, name: String, parent: Option<String> },
}

/// Counters shared with the recorder for the run summary.
#[derive(Default, Debug)]
pub struct Counters {
    pub records: AtomicU64,
    pub files: AtomicU64,
    pub bytes: AtomicU64,
    pub dropped: AtomicU64,
    pub errors: AtomicU64,
    /// A step directory could not be created: the recorder turns capture off.
    pub dir_failed: AtomicBool,
}

/// The state of one rank directory: each record's final text (as it appears inside dump.json)
/// in completion order, plus stack.json and construct.json values.
#[derive(Default)]
pub struct DirState {
    pub header: Option<Header>,
    /// Changed since the JSON files were last written.
    pub dirty: bool,
    pub records: IndexMap<String, String>,
    pub stack: IndexMap<String, String>,
    pub construct: IndexMap<String, String>,
    /// Per JSON file ([`JSON_FILES`] order): an entry already in the map got a new value since
    /// the last write, so the file is rewritten whole instead of extended.
    replaced: [bool; 3],
}

/// Depth of a record body inside dump.json (`{"data": {"name": body}}`).
const RECORD_DEPTH: usize = 2;

fn pretty(v: &Json, depth: usize) -> String {
    let mut s = String::with_capacity(4096);
    v.write_pretty_at(&mut s, depth);
    s
}

impl DirState {
    /// Adds a record's formatted body; a second record with the same name merges into the first
    /// key by key (msprobe does this for ops whose inputs and outputs are collected at different
    /// times).
    pub fn add_text(&mut self, name: &str, text: String) {
        self.dirty = true;
        let merged = match self.records.get(name) {
            Some(old) => match (json::parse(old), json::parse(&text)) {
                (Ok(Json::Object(mut old)), Ok(Json::Object(new))) => {
                    for (k, v) in new {
                        match old.iter_mut().find(|(ok, _)| *ok == k) {
                            Some(slot) => slot.1 = v,
                            None => old.push((k, v)),
                        }
                    }
                    pretty(&Json::Object(old), RECORD_DEPTH)
                }
                _ => text,
            },
            None => text,
        };
        if self.records.insert(name.to_string(), merged).is_some() {
            self.replaced[0] = true;
        }
    }

    /// Sets a stack.json value.
    pub fn set_stack(&mut self, name: String, text: String) {
        self.set(1, name, text);
    }

    /// Sets a construct.json value (a module's parent is set when it starts and again with its
    /// record: the same value is no change).
    pub fn set_construct(&mut self, name: String, text: String) {
        self.set(2, name, text);
    }

    fn set(&mut self, file: usize, name: String, text: String) {
        let map = if file == 1 { &mut self.stack } else { &mut self.construct };
        match map.get(&name) {
            Some(old) if *old == text => return,
            Some(_) => self.replaced[file] = true,
            None => {}
        }
        map.insert(name, text);
        self.dirty = true;
    }

    /// Adds a record body.
    pub fn add(&mut self, name: &str, body: &Json, stack: Option<&[String]>, parent: Option<&Option<String>>) {
        self.add_text(name, pretty(body, RECORD_DEPTH));
        if let Some(frames) = stack {
            self.set_stack(name.to_string(), stack_text(frames));
        }
        if let Some(p) = parent {
            self.set_construct(name.to_string(), parent_text(p));
        }
    }

    /// The map a JSON file ([`JSON_FILES`] order) holds, and its depth in the file.
    fn map(&self, file: usize) -> (&IndexMap<String, String>, usize) {
        match file {
            0 => (&self.records, 1),
            1 => (&self.stack, 0),
            _ => (&self.construct, 0),
        }
    }

    /// What comes before the map in a JSON file: dump.json's header fields.
    fn head(&self, file: usize) -> String {
        if file != 0 {
            return String::new();
        }
        let h = self.header.clone().unwrap_or_default();
        let mut out = String::with_capacity(128);
        out.push_str("{\n");
        out.push_str(&format!(" \"task\": {},\n", Json::str(h.task).to_compact()));
        out.push_str(&format!(" \"level\": {},\n", Json::str(h.level).to_compact()));
        out.push_str(&format!(
            " \"dump_data_dir\": {},\n",
            h.dump_data_dir.map(Json::str).unwrap_or(Json::Null).to_compact()
        ));
        out.push_str(" \"data\": ");
        out
    }

    /// The whole text of a JSON file ([`JSON_FILES`] order).
    fn text(&self, file: usize) -> String {
        let (map, depth) = self.map(file);
        let head = self.head(file);
        let size: usize = map.iter().map(|(k, v)| k.len() + v.len() + 8).sum();
        let mut out = String::with_capacity(head.len() + size + 16);
        out.push_str(&head);
        write_map(&mut out, map, depth);
        out.push_str(tail(file));
        out
    }

    /// The texts of dump.json, stack.json and construct.json, in [`JSON_FILES`] order.
    fn texts(&self) -> [String; 3] {
        [self.text(0), self.text(1), self.text(2)]
    }

    /// Writes dump.json, stack.json and construct.json into `dir`, each through a temporary and
    /// a rename (recovery, and directories whose files could not be kept open).
    pub fn write_files(&self, dir: &Path) -> std::io::Result<()> {
        for (name, text) in JSON_FILES.iter().zip(self.texts()) {
            fsutil::replace_file(&dir.join(name), text.as_bytes())?;
        }
        Ok(())
    }
}

/// The JSON files of a rank directory.
const JSON_FILES: [&str; 3] = ["dump.json", "stack.json", "construct.json"];

/// The JSON files of an open directory, kept open from the start of the step and written in
/// place, as msprobe does. A file whose entries were only added to since its last write is
/// extended: the new entries and the closing brackets are written over the old closing brackets,
/// leaving exactly the bytes a whole rewrite would. So the writer thread can keep the files
/// current while it idles ([`Worker::refresh`]) and a waiting `stop()` writes only what came
/// since. A kill during a write can leave a file cut short; the journal is complete, and
/// `msprobe recover` rebuilds the files from it.
struct JsonFiles {
    files: [std::fs::File; 3],
    /// Bytes in each file now.
    lens: [u64; 3],
    /// Entries of each file's map on disk, and where its closing brackets start; None until
    /// the first whole write (files found on disk, of a step re-opened, are rewritten first).
    written: Option<[(usize, u64); 3]>,
}

/// What follows the map in a JSON file ([`JSON_FILES`] order): dump.json's closing bracket.
fn tail(file: usize) -> &'static str {
    if file == 0 {
        "\n}"
    } else {
        ""
    }
}

/// Bytes after the last entry of a file: the map's closing bracket and what follows the map.
fn closing_len(entries: usize, depth: usize, tail: &str) -> u64 {
    (if entries == 0 { 1 } else { depth + 2 }) as u64 + tail.len() as u64
}

impl JsonFiles {
    /// Creates the files of `dir` with the texts of `state` (msprobe's skeleton files at
    /// `start()`), or opens them as they are when they exist (a closed step re-opened).
    fn open(dir: &Path, state: &DirState) -> std::io::Result<JsonFiles> {
        let mut files = Vec::with_capacity(3);
        let mut lens = [0u64; 3];
        let mut written = Some([(0usize, 0u64); 3]);
        for (i, name) in JSON_FILES.iter().enumerate() {
            let path = dir.join(name);
            let f = match fsutil::create_new(&path) {
                Ok(mut f) => {
                    let text = state.text(i);
                    f.write_all(text.as_bytes())?;
                    lens[i] = text.len() as u64;
                    let (map, depth) = state.map(i);
                    if let Some(w) = written.as_mut() {
                        w[i] = (map.len(), lens[i] - closing_len(map.len(), depth, tail(i)));
                    }
                    f
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let f = fsutil::open_existing(&path)?;
                    lens[i] = f.metadata()?.len();
                    written = None;
                    f
                }
                Err(e) => return Err(e),
            };
            files.push(f);
        }
        let files: [std::fs::File; 3] = files.try_into().expect("three files");
        Ok(JsonFiles { files, lens, written })
    }

    /// Brings the files up to `state`: each file that changed is extended with its new
    /// entries, or rewritten whole when an entry already written changed. With `whole` false
    /// such files are left for a later write (the writer's idle refreshes only extend, so a
    /// step with many merged records is not rewritten again and again); returns whether every
    /// file is current.
    fn write(&mut self, state: &mut DirState, whole: bool) -> std::io::Result<bool> {
        use std::os::unix::fs::FileExt;
        // Until this write succeeds the files are in an unknown state: rewritten whole next time.
        let Some(mut written) = self.written.take().or(whole.then_some([(usize::MAX, 0); 3])) else {
            return Ok(false);
        };
        let mut current = true;
        for (i, file) in self.files.iter().enumerate() {
            let (map, depth) = state.map(i);
            let end = tail(i);
            let (done, at) = written[i];
            let replaced = state.replaced[i] || done > map.len();
            let n = map.len();
            if done == n && !replaced {
                continue;
            }
            if !replaced {
                let mut out = String::with_capacity(
                    map.iter().skip(done).map(|(k, v)| k.len() + v.len() + 8).sum::<usize>() + 16,
                );
                write_entries(&mut out, map, done, depth);
                write_close(&mut out, n, depth);
                out.push_str(end);
                file.write_all_at(out.as_bytes(), at)?;
                self.lens[i] = at + out.len() as u64;
            } else if whole {
                let text = state.text(i);
                let len = text.len() as u64;
                file.write_all_at(text.as_bytes(), 0)?;
                if len < self.lens[i] {
                    file.set_len(len)?;
                }
                self.lens[i] = len;
                state.replaced[i] = false;
            } else {
                current = false;
                continue;
            }
            written[i] = (n, self.lens[i] - closing_len(n, depth, end));
        }
        self.written = Some(written);
        Ok(current)
    }
}

/// A stack.json value (depth 1).
fn stack_text(frames: &[String]) -> String {
    pretty(&Json::Array(frames.iter().map(|f| Json::str(f.clone())).collect()), 1)
}

/// A construct.json value.
fn parent_text(p: &Option<String>) -> String {
    p.clone().map(Json::str).unwrap_or(Json::Null).to_compact()
}

fn write_map(out: &mut String, map: &IndexMap<String, String>, depth: usize) {
    out.push('{');
    write_entries(out, map, 0, depth);
    write_close(out, map.len(), depth);
}

/// The entries of `map` from position `from` on, as [`write_map`] writes them.
fn write_entries(out: &mut String, map: &IndexMap<String, String>, from: usize, depth: usize) {
    for (i, (k, v)) in map.iter().enumerate().skip(from) {
        if i > 0 {
            out.push(',');
        }
        out.push('\n');
        out.extend(std::iter::repeat_n(' ', depth + 1));
        out.push_str(&Json::str(k.clone()).to_compact());
        out.push_str(": ");
        out.push_str(v);
    }
}

/// The closing bracket of a map of `entries` entries, as [`write_map`] writes it.
fn write_close(out: &mut String, entries: usize, depth: usize) {
    if entries > 0 {
        out.push('\n');
        out.extend(std::iter::repeat_n(' ', depth));
    }
    out.push('}');
}

struct OpenDir {
    state: DirState,
    /// dump_tensor_data exists.
    tensor_dir: Option<PathBuf>,
    /// The JSON files, open since the directory opened (None: they could not be, and are
    /// written through temporaries instead).
    files: Option<JsonFiles>,
}

struct Worker {
    dirs: HashMap<PathBuf, OpenDir>,
    /// Headers of directories already closed (step ended), for records that finish late.
    closed: HashMap<PathBuf, Header>,
    /// Directories this process created (an existing one from an earlier run is moved aside).
    claimed: HashSet<PathBuf>,
    /// Directories that could not be created: their records are dropped (counted).
    failed: HashSet<PathBuf>,
    /// The journal of each dump path (one per process), created with its first directory.
    journals: HashMap<PathBuf, Journal>,
    counters: Arc<Counters>,
    budget: Arc<Budget>,
}

/// The dump path of a `{root}/step{N}/rank{R}` directory.
fn root_of(dir: &Path) -> &Path {
    dir.parent().and_then(Path::parent).unwrap_or(Path::new("."))
}

/// Counts a write error and logs the first few.
fn report(counters: &Counters, what: &str, e: &dyn std::fmt::Display) {
    let n = counters.errors.fetch_add(1, Relaxed);
    if n < 5 {
        log::error!("writer: {what}: {e}");
    } else if n == 5 {
        log::error!("writer: more errors; only counting them from now on");
    }
}

/// The tensor files of one record, written outside the worker's lock: each file stands alone
/// (its record is already journaled and in the JSON state), so the writer thread and a caller
/// waiting in `stop()` write files side by side instead of one after the other.
struct FileJob {
    tdir: PathBuf,
    files: Vec<TensorFile>,
    reserved: u64,
}

impl FileJob {
    fn run(self, counters: &Counters, budget: &Budget) {
        let mut ok = true;
        for f in &self.files {
            // One O_EXCL create + write: never replaces a file. A file cut short by a kill is
            // detected and removed by `recover_dir` (see `complete`).
            match fsutil::create_new(&self.tdir.join(&f.name)).and_then(|mut h| h.write_all(&f.bytes)) {
                Ok(()) => {
                    counters.files.fetch_add(1, Relaxed);
                    counters.bytes.fetch_add(f.bytes.len() as u64, Relaxed);
                }
                Err(e) => {
                    ok = false;
                    report(counters, &format!("cannot write {}", f.name), &e);
                }
            }
        }
        budget.release(self.reserved);
        for f in self.files {
            budget.give_buffer(f.bytes);
        }
        if ok {
            counters.records.fetch_add(1, Relaxed);
        }
    }
}

impl Worker {
    fn error(&self, what: &str, e: &dyn std::fmt::Display) {
        report(&self.counters, what, e);
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
        let root = dir.parent().and_then(Path::parent).unwrap_or(Path::new("."));
        move_aside_if_used(dir);
        match fsutil::create_dirs(root, &[&step.to_string_lossy(), &rank.to_string_lossy()]) {
            Ok(_) => {
                self.claimed.insert(dir.to_path_buf());
                true
            }
            Err(e) => {
                log::error!(
                    "cannot create the dump directory {}: {e}. Capture is off; the job continues. Set MSPROBE_DUMP_PATH (or dump_path) to a writable directory.",
                    dir.display()
                );
                self.counters.dir_failed.store(true, Relaxed);
                self.failed.insert(dir.to_path_buf());
                false
            }
        }
    }

    fn open(&mut self, dir: PathBuf, header: Header) {
        if self.dirs.contains_key(&dir) || !self.create(&dir) {
            return;
        }
        // The JSON files start as msprobe's skeleton; records reach them at the next write
        // (writer idle, stop, step end, exit), and the journal before that: after a kill,
        // `msprobe recover` turns the journal into the files.
        let state = DirState { header: Some(header.clone()), dirty: true, ..Default::default() };
        let root = root_of(&dir).to_path_buf();
        if let std::collections::hash_map::Entry::Vacant(slot) = self.journals.entry(root) {
            match Journal::create(slot.key()) {
                Ok(j) => {
                    slot.insert(j);
                }
                Err(e) => {
                    let what = format!("cannot create the journal in {}", slot.key().display());
                    self.error(&what, &e)
                }
            }
        }
        let files = match JsonFiles::open(&dir, &state) {
            Ok(f) => Some(f),
            Err(e) => {
                // Not fatal: each write then goes through a temporary (and reports its errors).
                log::warn!("cannot keep the JSON files of {} open: {e}", dir.display());
                None
            }
        };
        self.dirs.insert(dir, OpenDir { state, tensor_dir: None, files });
    }

    /// Re-opens a closed directory for a record that began before its step ended: the written
    /// files are read back (and re-journaled) so nothing already dumped is lost.
    fn reopen(&mut self, dir: PathBuf, header: Header) {
        self.open(dir.clone(), header);
        let mut entries = Vec::new();
        let od = self.dirs.get_mut(&dir).expect("just opened");
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok().and_then(|t| json::parse(&t).ok());
        if let Some(Json::Object(recs)) = read("dump.json").as_ref().and_then(|d| d.get("data")).cloned() {
            for (name, body) in recs {
                let text = pretty(&body, RECORD_DEPTH);
                journal::entry(&mut entries, 'R', &name, &text);
                od.state.records.insert(name.into_owned(), text);
            }
        }
        for (file, kind) in [("stack.json", 'S'), ("construct.json", 'C')] {
            if let Some(Json::Object(kv)) = read(file) {
                for (name, v) in kv {
                    let text = if kind == 'S' { pretty(&v, 1) } else { v.to_compact() };
                    journal::entry(&mut entries, kind, &name, &text);
                    if kind == 'S' {
                        od.state.stack.insert(name.into_owned(), text);
                    } else {
                        od.state.construct.insert(name.into_owned(), text);
                    }
                }
            }
        }
        if let Err(e) = self.journal(&dir, &entries, true) {
            self.error("cannot append to the journal", &e);
        }
    }

    /// Appends `entries` of `dir` to its journal (`flush`: and pushes them to the file).
    fn journal(&mut self, dir: &Path, entries: &[u8], flush: bool) -> std::io::Result<()> {
        let Some(j) = self.journals.get_mut(root_of(dir)) else { return Ok(()) };
        let Some(header) = self.dirs.get(dir).and_then(|od| od.state.header.as_ref()) else { return Ok(()) };
        j.append(dir, header, entries)?;
        if flush {
            j.flush()?;
        }
        Ok(())
    }

    /// Journals and stores a record; its tensor files are returned to be written (by whoever
    /// handles the message, after releasing the lock).
    fn record(&mut self, dir: PathBuf, rec: Finished) -> Option<FileJob> {
        if self.failed.contains(&dir) {
            self.counters.dropped.fetch_add(1, Relaxed);
            self.budget.release(rec.reserved);
            return None;
        }
        if !self.dirs.contains_key(&dir) {
            match self.closed.get(&dir).cloned() {
                Some(h) => self.reopen(dir.clone(), h),
                None => self.open(dir.clone(), Header::default()),
            }
            if !self.dirs.contains_key(&dir) {
                // It could not be created (logged once): the record is lost, and counted.
                self.counters.dropped.fetch_add(1, Relaxed);
                self.budget.release(rec.reserved);
                return None;
            }
        }
        // The journal line goes first: a record whose data reached disk is always journaled.
        // The record is formatted once: this text goes to the journal and, later, into dump.json.
        let text = pretty(&rec.body, RECORD_DEPTH);
        let mut entry = Vec::with_capacity(text.len() + 64);
        journal::entry(&mut entry, 'R', &rec.name, &text);
        let stack = rec.stack.as_deref().map(stack_text);
        if let Some(st) = &stack {
            journal::entry(&mut entry, 'S', &rec.name, st);
        }
        let parent = rec.parent.as_ref().map(parent_text);
        if let Some(p) = &parent {
            journal::entry(&mut entry, 'C', &rec.name, p);
        }
        // Files follow their journal entry: a record whose data reached disk is journaled.
        if let Err(e) = self.journal(&dir, &entry, !rec.files.is_empty()) {
            self.error("cannot append to the journal", &e);
        }
        let od = self.dirs.get_mut(&dir).expect("opened above");
        od.state.add_text(&rec.name, text);
        if let Some(st) = stack {
            od.state.set_stack(rec.name.clone(), st);
        }
        if let Some(p) = parent {
            od.state.set_construct(rec.name.clone(), p);
        }
        if rec.files.is_empty() {
            self.budget.release(rec.reserved);
            self.counters.records.fetch_add(1, Relaxed);
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
                self.error("cannot create dump_tensor_data", &e);
                self.budget.release(rec.reserved);
                for f in rec.files {
                    self.budget.give_buffer(f.bytes);
                }
                None
            }
        }
    }

    fn construct(&mut self, dir: PathBuf, name: String, parent: Option<String>) {
        if !self.dirs.contains_key(&dir) {
            return;
        }
        let text = parent_text(&parent);
        let mut entry = Vec::new();
        journal::entry(&mut entry, 'C', &name, &text);
        if let Err(e) = self.journal(&dir, &entry, false) {
            self.error("cannot append to the journal", &e);
        }
        let od = self.dirs.get_mut(&dir).expect("checked above");
        od.state.set_construct(name, text);
    }

    /// Pushes batched journal entries to the file (done whenever the queue runs empty).
    fn flush_journals(&mut self) {
        for j in self.journals.values_mut() {
            let _ = j.flush();
        }
    }

    fn write(&mut self, dir: &Path, close: bool) {
        self.flush_journals();
        let Some(od) = self.dirs.get_mut(dir) else { return };
        // Nothing changed since the last write (e.g. step end right after stop): keep the files.
        let res = match (&mut od.files, od.state.dirty) {
            (_, false) => Ok(()),
            (Some(f), true) => f.write(&mut od.state, true).map(drop),
            (None, true) => od.state.write_files(dir),
        };
        od.state.dirty = false;
        if let Err(e) = res {
            self.error(&format!("cannot write the JSON files in {}", dir.display()), &e);
            if let Some(j) = self.journals.get_mut(root_of(dir)) {
                j.keep();
            }
        }
        if close {
            if let Some(od) = self.dirs.remove(dir) {
                if let Some(h) = od.state.header {
                    self.closed.insert(dir.to_path_buf(), h);
                }
            }
            // Every directory of this dump path is written and closed: the journal holds
            // nothing that is not in JSON files, and starts over.
            let root = root_of(dir);
            if !self.dirs.keys().any(|d| root_of(d) == root) {
                if let Some(Err(e)) = self.journals.get_mut(root).map(Journal::clear) {
                    self.error("cannot empty the journal", &e);
                }
            }
        }
    }

    /// Brings the kept-open JSON files of every open directory up to date; the writer thread
    /// does this when it runs out of work, so that a waiting `stop()` has only the records
    /// since to write. Must not run while tensor files are being written (the JSON files would
    /// name files not yet on disk).
    fn refresh(&mut self) {
        let Worker { dirs, journals, counters, .. } = self;
        for (dir, od) in dirs.iter_mut() {
            let Some(f) = od.files.as_mut() else { continue };
            if !od.state.dirty {
                continue;
            }
            match f.write(&mut od.state, false) {
                Ok(current) => od.state.dirty = !current,
                Err(e) => {
                    report(counters, &format!("cannot write the JSON files in {}", dir.display()), &e);
                    if let Some(j) = journals.get_mut(root_of(dir)) {
                        j.keep();
                    }
                    // Later writes go through temporaries, at stop and step end only.
                    od.files = None;
                }
            }
        }
    }

    /// Handles one message; a record's tensor files come back to be written after the lock is
    /// released (see [`Shared::handle`]).
    fn handle(&mut self, msg: Msg) -> Option<FileJob> {
        match msg {
            Msg::Open { dir, header } => self.open(dir, header),
            Msg::Record { dir, rec } => return self.record(dir, rec),
            Msg::Write { dir, close } => self.write(&dir, close),
            Msg::Construct { dir, name, parent } => self.construct(dir, name, parent),
        }
        None
    }

    /// Finishes every open directory (the process is ending).
    fn close_all(&mut self) {
        let dirs: Vec<PathBuf> = self.dirs.keys().cloned().collect();
        for d in dirs {
            self.write(&d, true);
        }
        for (_, j) in self.journals.drain() {
            j.remove();
        }
    }
}

/// What the writer thread and a waiting caller share: the queue and the state behind it.
/// Messages are taken from the queue only while holding `worker`, so they are handled in the
/// order they were sent whoever handles them.
///
/// Tensor files are written after the lock is released ([`FileJob`]); `jobs` counts those being
/// written, and whatever must see them on disk (JSON files, a waiting caller's return) waits
/// until it is 0 first.
struct Shared {
    rx: Receiver<Msg>,
    worker: Mutex<Worker>,
    jobs: Mutex<usize>,
    jobs_done: Condvar,
    counters: Arc<Counters>,
    budget: Arc<Budget>,
}

impl Shared {
    fn worker(&self) -> std::sync::MutexGuard<'_, Worker> {
        // A panic while handling a message (caught at the FFI edge) leaves the state usable:
        // each message is handled on its own.
        self.worker.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Handles `m` under the lock `w`; tensor files it produced are returned, counted in `jobs`,
    /// for the caller to write with [`Shared::write_files`] once it has dropped `w`.
    fn handle(&self, w: &mut Worker, m: Msg) -> Option<FileJob> {
        if let Msg::Write { .. } = m {
            self.wait_for_files();
        }
        let job = w.handle(m)?;
        *self.jobs.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        Some(job)
    }

    fn write_files(&self, job: FileJob) {
        job.run(&self.counters, &self.budget);
        let mut n = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        *n -= 1;
        if *n == 0 {
            self.jobs_done.notify_all();
        }
    }

    /// Returns when no tensor file is being written. Called holding the worker lock, so no new
    /// file job can start meanwhile; the running ones do not need that lock to finish.
    fn wait_for_files(&self) {
        let n = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        drop(self.jobs_done.wait_while(n, |n| *n > 0).unwrap_or_else(|e| e.into_inner()));
    }

    /// Handles everything queued, in order, writing tensor files as it goes (beside the writer
    /// thread, if it is working too), and returns holding the lock once the queue is empty, the
    /// journal entries are in their files and no tensor file is being written.
    fn drain(&self) -> std::sync::MutexGuard<'_, Worker> {
        'relock: loop {
            let mut w = self.worker();
            while let Ok(m) = self.rx.try_recv() {
                if let Some(job) = self.handle(&mut w, m) {
                    drop(w);
                    self.write_files(job);
                    continue 'relock;
                }
            }
            w.flush_journals();
            self.wait_for_files();
            return w;
        }
    }

    /// The writer thread.
    fn run(&self, bell: &Doorbell) {
        /// Messages handled per hold of the lock, so a waiting caller gets in soon.
        const BATCH: usize = 64;
        let mut worked = false;
        loop {
            let mut w = self.worker();
            let mut idle = false;
            let mut files = None;
            for _ in 0..BATCH {
                match self.rx.try_recv() {
                    Ok(m) => {
                        worked = true;
                        files = self.handle(&mut w, m);
                        if files.is_some() {
                            break;
                        }
                    }
                    Err(crossbeam_channel::TryRecvError::Empty) => {
                        idle = true;
                        break;
                    }
                    Err(crossbeam_channel::TryRecvError::Disconnected) => {
                        // The process is ending.
                        self.wait_for_files();
                        w.close_all();
                        return;
                    }
                }
            }
            if let Some(job) = files {
                drop(w);
                self.write_files(job);
                continue;
            }
            if idle {
                // Journal entries reach the file before we wait, and then the JSON files.
                w.flush_journals();
                if *self.jobs.lock().unwrap_or_else(|e| e.into_inner()) == 0 {
                    w.refresh();
                }
                drop(w);
                bell.sleep(!std::mem::take(&mut worked), &self.rx);
            }
        }
    }
}

const AWAKE: u8 = 0;
const NAP: u8 = 1;
const DEEP: u8 = 2;
/// How long the writer naps after work before it looks at the queue again. Short: a waiting
/// `stop()` does whatever is still queued itself (A/B on the PyTorch MLP: 100 µs gave 3–7%
/// shorter dumped steps than waking per message, 1 ms gave 5% longer ones; 30 µs left 0.7–1.0
/// records per L1 stop instead of 1.8–2.1, median stop 38–56 µs instead of 67–107, with no more
/// CPU time for the process). The nap's timer wakes only the writer's own core.
const NAP_TIME: std::time::Duration = std::time::Duration::from_micros(30);
/// Queued messages that wake a napping writer at once.
const WAKE_LEN: usize = 32;

/// Wakes the writer only when needed. Waking a thread costs the capturing thread a futex call
/// (and, on a VM, an inter-processor interrupt) per message when the writer sleeps between
/// records, which is most of the time. So while capture is busy the writer naps for
/// [`NAP_TIME`] after each batch and is rung only for what must not wait: stop, step end, a
/// flush, records with tensor files (their bytes count against the budget), or a long queue.
/// After a nap with nothing to do it sleeps until the next message rings.
struct Doorbell {
    state: std::sync::atomic::AtomicU8,
    /// Set by `Writer::shutdown` before its last ring: the writer must not sleep again.
    closed: AtomicBool,
    rung: Mutex<bool>,
    cv: Condvar,
}

impl Doorbell {
    fn new() -> Doorbell {
        Doorbell {
            state: std::sync::atomic::AtomicU8::new(AWAKE),
            closed: AtomicBool::new(false),
            rung: Mutex::new(false),
            cv: Condvar::new(),
        }
    }

    /// Writer side: naps (or sleeps, `deep`) until rung, unless `rx` already has messages.
    fn sleep<T>(&self, deep: bool, rx: &Receiver<T>) {
        use std::sync::atomic::Ordering::SeqCst;
        let mut rung = self.rung.lock().unwrap_or_else(|e| e.into_inner());
        *rung = false;
        self.state.store(if deep { DEEP } else { NAP }, SeqCst);
        // A sender pushes, then reads the state (SeqCst both): either it sees us asleep and
        // rings, or we see its message here.
        if rx.is_empty() && !self.closed.load(SeqCst) {
            rung = if deep {
                self.cv.wait_while(rung, |r| !*r).unwrap_or_else(|e| e.into_inner())
            } else {
                self.cv.wait_timeout_while(rung, NAP_TIME, |r| !*r).unwrap_or_else(|e| e.into_inner()).0
            };
        }
        *rung = false;
        self.state.store(AWAKE, SeqCst);
    }

    /// Sender side, after a send: rings when the writer must come now.
    fn after_send(&self, urgent: bool, queued: usize) {
        let st = self.state.load(std::sync::atomic::Ordering::SeqCst);
        if st == DEEP || (st == NAP && (urgent || queued >= WAKE_LEN)) {
            self.ring();
        }
    }

    fn ring(&self) {
        *self.rung.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cv.notify_one();
    }
}

/// The sending end and the shared state, once the thread runs.
struct Link {
    tx: Sender<Msg>,
    shared: Arc<Shared>,
}

/// The handle capture paths use. The thread starts with the first message.
pub struct Writer {
    link: Mutex<Option<Link>>,
    bell: Arc<Doorbell>,
    /// Set by `shutdown`: later messages are dropped (counted) instead of starting a new thread.
    stopped: std::sync::atomic::AtomicBool,
    thread: Mutex<Option<JoinHandle<()>>>,
    pub budget: Arc<Budget>,
    pub counters: Arc<Counters>,
    /// Messages sent so far, and how many of them a waiting write ([`Writer::sync`]) had
    /// handled when it last returned: equal means nothing was sent since.
    sent: AtomicU64,
    synced: AtomicU64,
}

impl Writer {
    pub fn new(budget: Budget) -> Writer {
        Writer {
            link: Mutex::new(None),
            bell: Arc::new(Doorbell::new()),
            stopped: std::sync::atomic::AtomicBool::new(false),
            thread: Mutex::new(None),
            budget: Arc::new(budget),
            counters: Arc::new(Counters::default()),
            sent: AtomicU64::new(0),
            synced: AtomicU64::new(0),
        }
    }

    /// A sender to the writer, started here on first use; None once shut down.
    fn sender(&self) -> Option<Sender<Msg>> {
        let mut link = self.link.lock().unwrap_or_else(|e| e.into_inner());
        if self.stopped.load(Relaxed) {
            return None;
        }
        if link.is_none() {
            let (s, r) = bounded::<Msg>(4096);
            let worker = Worker {
                dirs: HashMap::new(),
                closed: HashMap::new(),
                claimed: HashSet::new(),
                failed: HashSet::new(),
                journals: HashMap::new(),
                counters: self.counters.clone(),
                budget: self.budget.clone(),
            };
            let shared = Arc::new(Shared {
                rx: r,
                worker: Mutex::new(worker),
                jobs: Mutex::new(0),
                jobs_done: Condvar::new(),
                counters: self.counters.clone(),
                budget: self.budget.clone(),
            });
            let (bell, sh) = (self.bell.clone(), shared.clone());
            let handle = std::thread::Builder::new().name("msprobe-writer".into()).spawn(move || sh.run(&bell));
            match handle {
                Ok(h) => {
                    *self.thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(h);
                    *link = Some(Link { tx: s, shared });
                }
                Err(e) => {
                    log::error!("cannot start the writer thread: {e}");
                    return None;
                }
            }
        }
        link.as_ref().map(|l| l.tx.clone())
    }

    /// The writer's shared state if it runs (nothing was sent otherwise).
    fn shared(&self) -> Option<Arc<Shared>> {
        self.link.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(|l| l.shared.clone())
    }

    fn send(&self, m: Msg) {
        let urgent = match &m {
            Msg::Record { rec, .. } => !rec.files.is_empty(),
            Msg::Open { .. } | Msg::Construct { .. } => false,
            Msg::Write { .. } => true,
        };
        self.send_as(m, urgent);
    }

    /// Sends `m`, ringing a napping writer when `urgent`.
    fn send_as(&self, m: Msg, urgent: bool) {
        self.sent.fetch_add(1, Relaxed);
        let Some(tx) = self.sender() else {
            self.counters.dropped.fetch_add(1, Relaxed);
            return;
        };
        if tx.is_full() {
            self.bell.ring();
        }
        if tx.send(m).is_err() {
            self.counters.errors.fetch_add(1, Relaxed);
        }
        self.bell.after_send(urgent, tx.len());
    }

    /// Whether a step directory could not be created (capture must stop).
    pub fn dir_failed(&self) -> bool {
        self.counters.dir_failed.load(Relaxed)
    }

    /// Opens `{root}/step{N}/rank{R}`: the writer creates it (the root must exist).
    pub fn open(&self, dir: PathBuf, header: Header) {
        self.send(Msg::Open { dir, header });
    }

    pub fn record(&self, dir: PathBuf, rec: Finished) {
        self.send(Msg::Record { dir, rec });
    }

    /// Writes the JSON files of `dir`; `close` also ends the directory (step end). A step end
    /// right after a waiting write (`stop()`), with nothing sent since, has nothing left to
    /// write but the journal's reset: it does not ring a napping writer (a thread wake-up,
    /// about 20 µs of the step on this VM), which takes it when its nap ends.
    pub fn write(&self, dir: PathBuf, close: bool) {
        let quiet = close && self.sent.load(Relaxed) == self.synced.load(Relaxed);
        self.send_as(Msg::Write { dir, close }, !quiet);
    }

    /// Adds a construct.json entry on its own (msprobe records a module's parent when the
    /// module starts, before its record completes).
    pub fn construct(&self, dir: PathBuf, name: String, parent: Option<String>) {
        self.send(Msg::Construct { dir, name, parent });
    }

    /// Returns once everything sent so far is on disk. The caller does the queued work itself,
    /// in order, under the writer's lock (waiting only for the message the writer is handling):
    /// waking the writer and sleeping until it replies cost a `stop()` two thread wake-ups,
    /// about as long as writing the step's JSON files.
    pub fn sync(&self) {
        if let Some(shared) = self.shared() {
            let sent = self.sent.load(Relaxed);
            self.call_help(&shared);
            drop(shared.drain());
            self.synced.store(sent, Relaxed);
        }
    }

    /// Rings a napping writer when more than one record and tensor bytes are queued, so that
    /// it writes tensor files beside the waiting caller. Without files there is nothing to
    /// share (the rest is done under one lock) and the ring would only cost the caller.
    fn call_help(&self, shared: &Shared) {
        if shared.rx.len() > 1
            && self.bell.state.load(std::sync::atomic::Ordering::SeqCst) != AWAKE
            && self.budget.in_flight() > 0
        {
            self.bell.ring();
        }
    }

    /// Writes the JSON files of `dir` (`close`: and ends it) after everything queued, and
    /// returns when all of it is on disk. Same as [`write`](Self::write) then
    /// [`sync`](Self::sync), without ringing the writer.
    pub fn write_now(&self, dir: &Path, close: bool) {
        if let Some(shared) = self.shared() {
            let sent = self.sent.load(Relaxed);
            self.call_help(&shared);
            shared.drain().write(dir, close);
            self.synced.store(sent, Relaxed);
        }
    }

    /// Closes every directory and stops the thread.
    pub fn shutdown(&self) {
        let link = {
            let mut g = self.link.lock().unwrap_or_else(|e| e.into_inner());
            self.stopped.store(true, Relaxed);
            g.take()
        };
        drop(link);
        self.bell.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        self.bell.ring();
        if let Some(h) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = h.join();
        }
    }
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

/// What [`recover_dir`] rebuilt.
#[derive(Debug, Default, PartialEq)]
pub struct Recovered {
    pub dirs: usize,
    pub records: usize,
    /// Lines that could not be parsed (a write cut by the kill).
    pub torn_lines: usize,
    /// Tensor files named by recovered records that never reached disk (or were cut short by
    /// the kill and removed).
    pub missing_files: usize,
}

/// Rebuilds dump.json, stack.json and construct.json from every journal found under `root`.
pub fn recover_dir(root: &Path) -> std::io::Result<Recovered> {
    let mut out = Recovered::default();
    let mut pending = vec![root.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            let ft = entry.file_type()?;
            if ft.is_dir() {
                pending.push(entry.path());
            } else if ft.is_file() && is_stale_temporary(&entry.file_name().to_string_lossy()) {
                // A JSON file's temporary left by the killed process (see `Replacement`).
                let _ = std::fs::remove_file(entry.path());
            } else if ft.is_file() && entry.file_name().to_string_lossy().starts_with(journal::PREFIX) {
                let replay = journal::read(&entry.path())?;
                out.torn_lines += replay.torn;
                for (dir, header, entries) in replay.dirs {
                    let (state, n) = replay_dir(header, entries);
                    if !dir.is_dir() {
                        continue;
                    }
                    state.write_files(&dir)?;
                    out.missing_files += check_tensor_files(&dir, &state);
                    out.dirs += 1;
                    out.records += n;
                }
            }
        }
    }
    Ok(out)
}

/// A directory's JSON state from its journal entries, and how many records they hold.
fn replay_dir(header: Header, entries: Vec<journal::Entry>) -> (DirState, usize) {
    let mut state = DirState { header: Some(header), ..Default::default() };
    let mut n = 0;
    for (kind, name, text) in entries {
        match kind {
            'R' => {
                state.add_text(&name, text);
                n += 1;
            }
            'S' => state.set_stack(name, text),
            'C' => state.set_construct(name, text),
            _ => {}
        }
    }
    (state, n)
}

/// Tensor files named by the records of `state` that are missing or cut short (those are
/// removed: not data that reached disk).
fn check_tensor_files(dir: &Path, state: &DirState) -> usize {
    let mut names = Vec::new();
    for body in state.records.values() {
        if let Ok(v) = json::parse(body) {
            data_names(&v, &mut names);
        }
    }
    let mut missing = 0;
    for n in &names {
        let p = dir.join(TENSOR_DIR).join(n);
        match std::fs::read(&p) {
            Ok(bytes) if complete(n, &bytes) => {}
            Ok(_) => {
                let _ = std::fs::remove_file(&p);
                missing += 1;
            }
            Err(_) => missing += 1,
        }
    }
    missing
}

fn is_stale_temporary(name: &str) -> bool {
    JSON_FILES.iter().any(|f| name.starts_with(&format!(".{f}{}", fsutil::TMP_MARK)))
}

/// Whether a tensor file is whole: a `.pt` zip ends with its end-of-central-directory record; a
/// `.npy` holds exactly the bytes its header announces.
fn complete(name: &str, bytes: &[u8]) -> bool {
    if name.ends_with(".pt") {
        return bytes.len() >= 22 && bytes[bytes.len() - 22..].starts_with(&0x06054b50u32.to_le_bytes());
    }
    if name.ends_with(".npy") {
        if bytes.len() < 10 || !bytes.starts_with(b"\x93NUMPY") {
            return false;
        }
        let hl = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        let Some(header) = bytes.get(10..10 + hl).and_then(|h| std::str::from_utf8(h).ok()) else { return false };
        let item: usize = header
            .split("'descr': '")
            .nth(1)
            .and_then(|d| d.get(2..).and_then(|t| t.split('\'').next()))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let dims = header.split("'shape': (").nth(1).and_then(|t| t.split(')').next()).unwrap_or("");
        let numel: usize = dims.split(',').filter_map(|x| x.trim().parse::<usize>().ok()).product();
        return bytes.len() == 10 + hl + numel * item;
    }
    true
}

fn data_names(v: &Json, out: &mut Vec<String>) {
    match v {
        Json::Array(a) => a.iter().for_each(|x| data_names(x, out)),
        Json::Object(kv) => {
            for (k, x) in kv {
                match (&**k, x) {
                    ("data_name", Json::Str(s)) => out.push(s.to_string()),
                    _ => data_names(x, out),
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The writer is rung only for urgent messages or after a deep sleep; a lone record must
    /// still reach the journal without any flush, both right after another batch (nap) and
    /// after the writer went back to sleep. Shutdown must not hang either.
    #[test]
    fn lone_records_are_written_without_a_flush() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("step0").join("rank0");
        let w = Writer::new(Budget::new(1 << 20, true));
        let header = Header { task: "statistics".into(), level: "L1".into(), dump_data_dir: None };
        w.open(dir.clone(), header);
        let journal = root.path().join(format!("{}{}", journal::PREFIX, std::process::id()));
        let wait_for = |name: &str| {
            let t0 = std::time::Instant::now();
            while t0.elapsed() < std::time::Duration::from_secs(5) {
                if std::fs::read_to_string(&journal).is_ok_and(|j| j.contains(name)) {
                    return true;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            false
        };
        for (i, pause) in [0u64, 0, 20, 0, 50].iter().enumerate() {
            std::thread::sleep(std::time::Duration::from_millis(*pause));
            let name = format!("Functional.relu.{i}.forward");
            let body = json::parse(r#"{"input_args": [], "output": []}"#).unwrap();
            w.record(
                dir.clone(),
                Finished { name: name.clone(), body, files: vec![], stack: None, parent: None, reserved: 0 },
            );
            assert!(wait_for(&name), "{name} never reached the journal");
        }
        w.shutdown();
    }

    /// One journal per process and dump path: emptied when a step ends (no per-step file), what
    /// it holds mid-step rebuilds that step's JSON files (also from a copy of the dump, since
    /// it names directories relative to the dump path), and it is gone after a clean exit.
    #[test]
    fn the_journal_outlives_steps_and_recovers_the_open_one() {
        let root = tempfile::tempdir().unwrap();
        let journal = root.path().join(format!("{}{}", journal::PREFIX, std::process::id()));
        let w = Writer::new(Budget::new(1 << 20, true));
        let header = Header { task: "statistics".into(), level: "L0".into(), dump_data_dir: None };
        let send = |dir: &Path, name: &str| {
            let body = json::parse(r#"{"input_args": [], "output": []}"#).unwrap();
            let (stack, parent) = (Some(vec!["File a.py, line 1, in f, \n f()".to_string()]), Some(None));
            w.record(
                dir.to_path_buf(),
                Finished { name: name.into(), body, files: vec![], stack, parent, reserved: 0 },
            );
        };
        let (s0, s1) = (root.path().join("step0/rank0"), root.path().join("step1/rank0"));
        w.open(s0.clone(), header.clone());
        send(&s0, "Module.a.A.forward.0");
        w.write_now(&s0, true);
        assert_eq!(std::fs::metadata(&journal).unwrap().len(), 0, "a closed step leaves nothing in the journal");
        w.open(s1.clone(), header.clone());
        send(&s1, "Module.a.A.forward.1");
        send(&s1, "Module.b.B.forward.0");
        w.sync();
        // "Killed" here: a copy of the dump as it is now, recovered.
        let copy = tempfile::tempdir().unwrap();
        for (rel, from) in [("step1/rank0", &s1), ("step0/rank0", &s0)] {
            std::fs::create_dir_all(copy.path().join(rel)).unwrap();
            for f in JSON_FILES {
                std::fs::copy(from.join(f), copy.path().join(rel).join(f)).unwrap();
            }
        }
        std::fs::copy(&journal, copy.path().join(journal.file_name().unwrap())).unwrap();
        // The copy holds what the writer's idle refreshes had written: some first records, or none.
        let early = std::fs::read_to_string(copy.path().join("step1/rank0/dump.json")).unwrap();
        let Some(Json::Object(early)) = json::parse(&early).unwrap().get("data").cloned() else { panic!() };
        let early: Vec<&str> = early.iter().map(|(k, _)| &**k).collect();
        assert!(["Module.a.A.forward.1", "Module.b.B.forward.0"].starts_with(&early), "{early:?}");
        let r = recover_dir(copy.path()).unwrap();
        assert_eq!((r.dirs, r.records, r.torn_lines, r.missing_files), (1, 2, 0, 0));
        let read = |d: &Path, f: &str| json::parse(&std::fs::read_to_string(d.join(f)).unwrap()).unwrap();
        let Some(Json::Object(data)) = read(&copy.path().join("step1/rank0"), "dump.json").get("data").cloned() else {
            panic!()
        };
        let names: Vec<_> = data.iter().map(|(k, _)| &**k).collect();
        assert_eq!(names, ["Module.a.A.forward.1", "Module.b.B.forward.0"]);
        assert_eq!(
            read(&copy.path().join("step1/rank0"), "construct.json").get("Module.b.B.forward.0"),
            Some(&Json::Null)
        );
        assert_eq!(read(&copy.path().join("step1/rank0"), "dump.json").get("level").and_then(Json::as_str), Some("L0"));
        // The closed step is left as it was written.
        assert_eq!(read(&copy.path().join("step0/rank0"), "dump.json"), read(&s0, "dump.json"));
        // A step end right after a waiting stop does not ring a napping writer; it is done before the
        // next step's work: that step's records are alone in the journal.
        w.write_now(&s1, false);
        w.write(s1.clone(), true);
        let s2 = root.path().join("step2/rank0");
        w.open(s2.clone(), header.clone());
        send(&s2, "Module.a.A.forward.2");
        w.sync();
        let replay = journal::read(&journal).unwrap();
        let dirs: Vec<_> = replay.dirs.iter().map(|(d, _, e)| (d.clone(), e.len())).collect();
        assert_eq!(dirs, [(s2.clone(), 3)], "R, S and C of the one record of step 2");
        w.shutdown();
        assert!(!journal.exists(), "the journal is removed at a clean exit");
        assert_eq!(read(&s1, "dump.json"), read(&copy.path().join("step1/rank0"), "dump.json"));
    }

    /// A waiting write (a synchronous `stop()`) handles the queue itself while the writer thread
    /// and other senders are busy: each time it returns, dump.json holds every record its own
    /// thread sent before it, and each sender's records form a prefix in sending order.
    #[test]
    fn a_waiting_write_has_everything_sent_before_it_in_order() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("step0").join("rank0");
        let w = Arc::new(Writer::new(Budget::new(1 << 20, true)));
        let header = Header { task: "statistics".into(), level: "L1".into(), dump_data_dir: None };
        w.open(dir.clone(), header);
        const N: usize = 300;
        fn send(w: &Writer, dir: &Path, s: usize, i: usize) {
            let body = json::parse(r#"{"input_args": [], "output": []}"#).unwrap();
            let name = format!("Functional.s{s}.{i}.forward");
            w.record(dir.to_path_buf(), Finished { name, body, files: vec![], stack: None, parent: None, reserved: 0 });
        }
        // Per sender (2 threads, then this one): how many of its records dump.json holds,
        // checking that they come in sending order.
        let counts = || -> [usize; 3] {
            let v = json::parse(&std::fs::read_to_string(dir.join("dump.json")).unwrap()).unwrap();
            let Some(Json::Object(data)) = v.get("data") else { panic!("no data in dump.json") };
            let mut n = [0usize; 3];
            for (name, _) in data {
                let mut parts = name.split('.').skip(1);
                let s: usize = parts.next().unwrap()[1..].parse().unwrap();
                let i: usize = parts.next().unwrap().parse().unwrap();
                assert_eq!(i, n[s], "sender {s}: {name} out of order");
                n[s] += 1;
            }
            n
        };
        let senders: Vec<_> = (0..2)
            .map(|s| {
                let (w, dir) = (w.clone(), dir.clone());
                std::thread::spawn(move || (0..N).for_each(|i| send(&w, &dir, s, i)))
            })
            .collect();
        let (mut mine, mut last) = (0, [0usize; 3]);
        while mine < 5 || !senders.iter().all(|t| t.is_finished()) {
            send(&w, &dir, 2, mine);
            mine += 1;
            w.write_now(&dir, false);
            let n = counts();
            assert_eq!(n[2], mine, "a record sent before the write is missing");
            assert!(n[0] >= last[0] && n[1] >= last[1], "{n:?} after {last:?}");
            last = n;
        }
        senders.into_iter().for_each(|t| t.join().unwrap());
        w.write_now(&dir, false);
        assert_eq!(counts(), [N, N, mine]);
        w.shutdown();
    }

    /// Tensor files are written outside the worker's lock, by the writer thread and by a waiting
    /// caller side by side; a waiting write still returns only when every file sent before it
    /// is complete on disk and its budget is released.
    #[test]
    fn a_waiting_write_returns_with_every_tensor_file_written() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("step0").join("rank0");
        let w = Writer::new(Budget::new(1 << 30, false));
        w.open(dir.clone(), Header { task: "tensor".into(), level: "L1".into(), dump_data_dir: None });
        let bytes = |r: usize, f: usize| vec![(r * 7 + f) as u8; 1000 + 37 * r + f];
        let mut sent = 0;
        for round in 0..20 {
            let n = 1 + round % 7;
            for r in sent..sent + n {
                let files: Vec<_> =
                    (0..3).map(|f| TensorFile { name: format!("R.{r}.{f}.pt"), bytes: bytes(r, f) }).collect();
                let reserved = files.iter().map(|f| f.bytes.len() as u64).sum();
                assert!(w.budget.reserve(reserved));
                let body = json::parse(r#"{"output": []}"#).unwrap();
                w.record(
                    dir.clone(),
                    Finished { name: format!("R.{r}.forward"), body, files, stack: None, parent: None, reserved },
                );
            }
            sent += n;
            w.write_now(&dir, false);
            for r in 0..sent {
                for f in 0..3 {
                    let got = std::fs::read(dir.join(TENSOR_DIR).join(format!("R.{r}.{f}.pt"))).unwrap();
                    assert!(got == bytes(r, f), "R.{r}.{f}.pt is not complete after the waiting write");
                }
            }
            assert_eq!(w.budget.in_flight(), 0);
            assert_eq!(w.counters.files.load(Relaxed), 3 * sent as u64);
            let v = json::parse(&std::fs::read_to_string(dir.join("dump.json")).unwrap()).unwrap();
            let Some(Json::Object(data)) = v.get("data") else { panic!("no data in dump.json") };
            assert_eq!(data.len(), sent);
        }
        w.shutdown();
        assert_eq!(w.counters.records.load(Relaxed), sent as u64);
    }

    /// The JSON files are created with msprobe's skeleton, rewritten in place, and end up holding
    /// exactly the last texts written, also when a text is shorter than the one before; an
    /// existing file is opened as it is.
    #[test]
    fn json_files_are_rewritten_in_place_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let header = Header { task: "statistics".into(), level: "L0".into(), dump_data_dir: None };
        let mut st = DirState { header: Some(header), ..Default::default() };
        let read = |n: &str| std::fs::read_to_string(dir.path().join(n)).unwrap();
        let mut files = JsonFiles::open(dir.path(), &st).unwrap();
        assert_eq!(json::parse(&read("dump.json")).unwrap().get("data"), Some(&Json::Object(vec![])));
        assert_eq!((read("stack.json").as_str(), read("construct.json").as_str()), ("{}", "{}"));
        let long = "x".repeat(500);
        st.add("Module.a.A.forward.0", &json::parse(r#"{"input_args": []}"#).unwrap(), Some(&[long]), Some(&None));
        files.write(&mut st, true).unwrap();
        let full = st.texts();
        assert_eq!([read("dump.json"), read("stack.json"), read("construct.json")], full);
        let mut short = DirState { header: st.header.clone(), ..Default::default() };
        files.write(&mut short, true).unwrap();
        assert_eq!([read("dump.json"), read("stack.json"), read("construct.json")], short.texts());
        files.write(&mut st, true).unwrap();
        drop(files);
        let again = JsonFiles::open(dir.path(), &short).unwrap();
        assert_eq!(again.lens[0], full[0].len() as u64, "an existing file is kept as it is");
        assert_eq!(read("dump.json"), full[0]);
    }

    #[test]
    fn extended_json_files_equal_whole_rewrites() {
        // Records, stack and construct entries added between writes (none, one or several at a
        // time), some replacing an entry already written (a merged record, a new parent): after
        // every write each file holds exactly the text of a whole rewrite.
        let dir = tempfile::tempdir().unwrap();
        let header =
            Header { task: "tensor".into(), level: "mix".into(), dump_data_dir: Some("dump_tensor_data".into()) };
        let mut st = DirState { header: Some(header), ..Default::default() };
        let read = |n: &str| std::fs::read_to_string(dir.path().join(n)).unwrap();
        let mut files = JsonFiles::open(dir.path(), &st).unwrap();
        let mut rng = fastrand::Rng::with_seed(0x9e37_79b9_7f4a_7c15);
        let mut next = |m: u64| rng.u64(0..m);
        let (mut extended, mut deferred) = (0, 0);
        for round in 0..300 {
            for _ in 0..next(4) {
                let i = next(40);
                let body = format!(r#"{{"input_args": [{{"type": "int", "value": {round}}}], "k{i}": {i}}}"#);
                let frames = ["f".repeat(next(30) as usize)];
                let parent = (next(3) > 0).then(|| format!("Module.p{}", next(5)));
                st.add(&format!("Module.m{i}.forward.0"), &json::parse(&body).unwrap(), Some(&frames), Some(&parent));
            }
            if next(4) == 0 {
                let n = next(40);
                st.set_construct(format!("Module.c{n}"), parent_text(&None));
            }
            // Idle refreshes (extend only) between whole writes (stop, step end).
            let whole = round % 3 == 0;
            let grew = st.replaced == [false; 3];
            let current = files.write(&mut st, whole).unwrap();
            assert!(current || !whole);
            extended += grew as usize;
            deferred += !current as usize;
            let texts = st.texts();
            for (i, name) in JSON_FILES.iter().enumerate() {
                if current || !st.replaced[i] {
                    assert_eq!(read(name), texts[i], "round {round}: {name}");
                }
            }
        }
        assert!(extended > 20 && deferred > 5, "both paths ran ({extended} extending writes, {deferred} deferred)");
    }

    #[test]
    fn truncated_tensor_files_are_detected() {
        use crate::dtype::DType;
        use crate::tensorfile::{encode_npy, encode_pt};
        let npy = encode_npy(DType::F32, &[3, 2], &[0u8; 24]);
        assert!(complete("a.npy", &npy));
        assert!(!complete("a.npy", &npy[..npy.len() - 1]));
        let pt = encode_pt("a", DType::F16, &[4], &[0u8; 8]).unwrap();
        assert!(complete("a.pt", &pt));
        assert!(!complete("a.pt", &pt[..pt.len() - 3]));
    }

    #[test]
    fn merge_same_name_key_by_key() {
        let mut s = DirState::default();
        s.add("Distributed.all_reduce.0.forward", &json::parse(r#"{"input_args": [1]}"#).unwrap(), None, None);
        s.add("Distributed.all_reduce.0.forward", &json::parse(r#"{"output": [2]}"#).unwrap(), None, None);
        assert_eq!(s.records.len(), 1);
        assert_eq!(json::parse(&s.records[0]).unwrap(), json::parse(r#"{"input_args": [1], "output": [2]}"#).unwrap());
    }
}
