//! Recovery after a kill (`msprobe recover`): the journals found under a dump path are replayed
//! into their runs' rank directories, whose dump.json, stack.json and construct.json are rebuilt
//! (what the files already hold, plus every journaled record), and the tensor files its records
//! name are checked (one cut short by the kill is removed and counted, as is one that never
//! reached disk). The journal format is in [`crate::journal`].
//!
//! It cannot hurt, whatever a journal holds:
//! - a journal whose process still runs is left alone, and one that was replayed is removed;
//! - a directory is written in place only when it is the run's own: the one the journal names
//!   by device and inode (found also after a later run moved it aside to `rank.replaced-*`), or
//!   one the run never got to create (missing, or empty). Another run's directory of the same
//!   name is never touched: the records go to a new directory beside it,
//!   `{rank}.recovered-{pid}`;
//! - directory names must be `step{N}/rank{R}`, tensor file names single plain components, no
//!   symbolic link is followed (every component is checked, files are opened `O_NOFOLLOW`);
//! - every entry is checked (CRC, then parsed as JSON of its kind) and written in its canonical
//!   form, and each file's text is parsed again before it is written, so the output is valid JSON;
//! - the only files removed are the run's own: its JSON files' temporaries
//!   (`.dump.json.tmp{pid}`) and tensor files it cut short, in its own directories.

use crate::fsutil;
use crate::header::Header;
use crate::journal::{self, Identity};
use crate::json::{self, Json};
use crate::writer::{pretty, DirState, JsonFile, RECORD_DEPTH, TENSOR_DIR};
use indexmap::IndexMap;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// At most this many missing tensor files are named in [`Recovered::missing`].
const NAMED_MISSING: usize = 20;

/// What [`recover_dir`] did.
#[derive(Debug, Default, PartialEq)]
pub struct Recovered {
    /// Journals replayed (and removed).
    pub journals: usize,
    /// Journals left alone because their process still runs.
    pub running: usize,
    /// Files named like journals that are not journals of this format (left alone).
    pub unusable: usize,
    pub dirs: usize,
    pub records: usize,
    /// Unreadable journal stretches at the end of a journal: a write cut by the kill.
    pub torn_lines: usize,
    /// Entries skipped as damaged: unreadable stretches amid readable entries, and entries whose
    /// CRC holds but whose content is not what their kind must hold.
    pub damaged: usize,
    /// Tensor files named by recovered records that never reached disk, or were cut short by
    /// the kill (and removed).
    pub missing_files: usize,
    /// The first of them, relative to the dump path.
    pub missing: Vec<String>,
    /// Directories whose records went beside them (`{rank}.recovered-{pid}`): the directory
    /// under the journaled name is not the run's.
    pub beside: Vec<PathBuf>,
    /// Directories that could not be written (the journal is kept).
    pub failed: Vec<String>,
    /// Records written from their planned form (`P` entry: a launch whose device statistics
    /// never completed before the kill): their statistics are null, never invented. Uncertain.
    pub planned_only: usize,
}

/// Rebuilds dump.json, stack.json and construct.json from every journal found under `root`
/// (which must be a directory, not a link to one).
pub fn recover_dir(root: &Path) -> io::Result<Recovered> {
    recover_dir_with(root, &mut |_, _| {})
}

/// [`recover_dir`], calling `progress(done, total)` in journal bytes before the first journal and
/// after each one (a progress bar: one journal per process, so a multi-rank dump moves per rank).
pub fn recover_dir_with(root: &Path, progress: &mut dyn FnMut(u64, u64)) -> io::Result<Recovered> {
    if !fsutil::is_real_dir(root) {
        // Say which of the two it is: a mistyped path is not a refused link.
        let why = match std::fs::symlink_metadata(root) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => "does not exist",
            Ok(m) if m.file_type().is_symlink() => "is a symbolic link (not followed)",
            _ => "is not a directory",
        };
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} {why}", root.display())));
    }
    // One recover per dump at a time: two at once raced (one failed midway, the other took the
    // first's freshly written directories for another run's and wrote the steps again beside them).
    // The lock is the directory's own (flock), released when this returns or the process dies.
    let _lock = lock_dir(root)?;
    let mut journals = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            // The entry's own type: a link is neither a directory nor a file here.
            let ft = entry.file_type()?;
            if ft.is_dir() {
                pending.push(entry.path());
            } else if entry.file_name().to_string_lossy().starts_with(journal::PREFIX) {
                if ft.is_file() {
                    journals.push(entry.path());
                } else {
                    // a link or a FIFO is never read: said, not skipped silently
                    log::warn!("{} is not a regular file: not replayed", entry.path().display());
                }
            }
        }
    }
    journals.sort();
    let size = |j: &Path| std::fs::symlink_metadata(j).map(|m| m.len()).unwrap_or(0);
    let total: u64 = journals.iter().map(|j| size(j)).sum();
    let mut done = 0;
    progress(done, total);
    let mut out = Recovered::default();
    for j in journals {
        recover_journal(&j, &mut out)?;
        done += size(&j);
        progress(done.min(total), total);
    }
    Ok(out)
}

/// An exclusive lock on directory `root` (waiting up to 2 s), or an error saying another recover
/// holds it.
fn lock_dir(root: &Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW).open(root)?;
    // A bounded wait, never an indefinite one: a lock is also held for a moment by a child this
    // process forks before it execs (the descriptor is close-on-exec), e.g. another thread's.
    for _ in 0..40 {
        match dir.try_lock() {
            Ok(()) => return Ok(dir),
            Err(std::fs::TryLockError::WouldBlock) => std::thread::sleep(std::time::Duration::from_millis(50)),
            Err(std::fs::TryLockError::Error(e)) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::WouldBlock,
        format!("another msprobe recover is working on {}: run one at a time", root.display()),
    ))
}

/// The journaled state of one directory.
#[derive(Default)]
struct Plan {
    header: Option<Header>,
    /// (device, inode) of the directory the run created.
    id: Option<(u64, u64)>,
    /// (kind, name, canonical text), in journal order.
    entries: Vec<(char, String, String)>,
}

/// An entry's text in canonical form if it is what its kind holds: a record body (object), a
/// stack.json value (list) or a construct.json value (string or null).
fn canonical(kind: char, text: &str) -> Option<String> {
    let v = json::parse(text).ok()?;
    match (kind, &v) {
        ('R' | 'P', Json::Object(_)) => Some(pretty(&v, RECORD_DEPTH)),
        ('S', Json::Array(_)) => Some(pretty(&v, 1)),
        ('C', Json::Str(_) | Json::Null) => Some(v.to_compact()),
        _ => None,
    }
}

fn recover_journal(path: &Path, out: &mut Recovered) -> io::Result<()> {
    let parsed = journal::read(path)?;
    let Some(id) = parsed.identity else {
        log::warn!("{} is not a journal of this version; left as it is", path.display());
        out.unusable += 1;
        return Ok(());
    };
    if id.is_running() {
        log::warn!("{}: process {} is still running; its journal is left alone", path.display(), id.pid);
        out.running += 1;
        return Ok(());
    }
    let root = path.parent().unwrap_or(Path::new("."));
    // The dump was moved or copied: directories cannot be recognised by their inodes.
    let moved = id.root.is_some() && journal::file_id(root) != id.root;
    out.torn_lines += parsed.torn;
    out.damaged += parsed.damaged;
    let mut plans: IndexMap<String, Plan> = IndexMap::new();
    for e in parsed.entries {
        if !journal::valid_dir(&e.dir) {
            out.damaged += 1;
            continue;
        }
        if e.kind == 'D' {
            match journal::parse_dir_text(&e.text) {
                Some((h, fid)) => {
                    let plan = plans.entry(e.dir).or_default();
                    plan.header = Some(h);
                    plan.id = fid.or(plan.id);
                }
                None => out.damaged += 1,
            }
            continue;
        }
        match canonical(e.kind, &e.text) {
            Some(text) => plans.entry(e.dir).or_default().entries.push((e.kind, e.name, text)),
            None => out.damaged += 1,
        }
    }
    out.journals += 1;
    let mut ok = true;
    for (rel, plan) in plans {
        if let Err(e) = recover_one(root, &rel, plan, &id, moved, out) {
            log::error!("cannot recover {rel} under {}: {e}", root.display());
            out.failed.push(format!("{}: {e}", root.join(&rel).display()));
            ok = false;
        }
    }
    if ok {
        // Replayed: a later `recover` must not replay it over what later runs write.
        std::fs::remove_file(path)?;
    }
    Ok(())
}

/// Where a directory's records go: the directory, whether it is the run's own (its files may
/// be read, merged, and its own temporaries and cut tensor files removed), whether it is beside.
struct Target {
    dir: PathBuf,
    own: bool,
}

fn mkdir(p: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new().mode(fsutil::DIR_MODE).create(p)
}

/// A new directory `{base}.recovered-{pid}[-k]`.
fn beside(base: &Path, pid: u32) -> io::Result<PathBuf> {
    let name = base.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    for k in 0..1000 {
        let n = if k == 0 { format!("{name}.recovered-{pid}") } else { format!("{name}.recovered-{pid}-{k}") };
        let p = base.with_file_name(n);
        match mkdir(&p) {
            Ok(()) => return Ok(p),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(io::ErrorKind::AlreadyExists, format!("no free name beside {}", base.display())))
}

fn is_empty_dir(p: &Path) -> bool {
    std::fs::read_dir(p).is_ok_and(|mut d| d.next().is_none())
}

/// The run's directory `rel` (`step{N}/rank{R}`) under `root`, or where its records go instead.
fn resolve(root: &Path, rel: &str, plan: &Plan, id: &Identity, moved: bool) -> io::Result<Target> {
    let (step, rank) = rel.split_once('/').expect("checked by valid_dir");
    let step_path = root.join(step);
    match std::fs::symlink_metadata(&step_path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let dir = fsutil::create_dirs(root, &[step, rank])?;
            return Ok(Target { dir, own: true });
        }
        Err(e) => return Err(e),
        Ok(m) if !m.file_type().is_dir() => {
            // A link or a file in the way: never written through.
            let side = beside(&step_path, id.pid)?;
            mkdir(&side.join(rank))?;
            return Ok(Target { dir: side.join(rank), own: false });
        }
        Ok(_) => {}
    }
    let path = step_path.join(rank);
    let meta = match std::fs::symlink_metadata(&path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            mkdir(&path)?;
            return Ok(Target { dir: path, own: true });
        }
        Err(e) => return Err(e),
        Ok(m) => m,
    };
    if meta.file_type().is_dir() {
        if is_empty_dir(&path) {
            return Ok(Target { dir: path, own: true });
        }
        match (plan.id, moved) {
            (Some(fid), false) => {
                if (meta.dev(), meta.ino()) == fid {
                    return Ok(Target { dir: path, own: true });
                }
                // Moved aside by a later run of the same dump path?
                let prefix = format!("{rank}.replaced-");
                for e in std::fs::read_dir(&step_path)?.flatten() {
                    let Ok(m) = std::fs::symlink_metadata(e.path()) else { continue };
                    if m.file_type().is_dir()
                        && e.file_name().to_string_lossy().starts_with(&prefix)
                        && (m.dev(), m.ino()) == fid
                    {
                        return Ok(Target { dir: e.path(), own: true });
                    }
                }
            }
            (_, true) if consistent(&path, plan) => return Ok(Target { dir: path, own: true }),
            _ => {}
        }
    }
    let side = beside(&path, id.pid)?;
    Ok(Target { dir: side, own: false })
}

/// In a moved or copied dump, whether `dir` can be the run's: its dump.json is missing or
/// cut short, or holds only records the journal has, with the same text.
fn consistent(dir: &Path, plan: &Plan) -> bool {
    let Some(v) = fsutil::read_nofollow(&dir.join(JsonFile::Dump.name()))
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|t| json::parse(&t).ok())
    else {
        return true;
    };
    let Some(Json::Object(data)) = v.get("data") else { return true };
    data.iter().all(|(k, body)| {
        let text = pretty(body, RECORD_DEPTH);
        plan.entries.iter().any(|(kind, n, t)| *kind == 'R' && n == k && *t == text)
    })
}

/// What `dir`'s JSON files already hold (the run's own directory): records its writer put
/// there before the kill, including any the journal no longer holds.
fn merge_existing(dir: &Path, state: &mut DirState) {
    let read = |f: JsonFile| {
        fsutil::read_nofollow(&dir.join(f.name()))
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|t| json::parse(&t).ok())
    };
    if let Some(Json::Object(recs)) = read(JsonFile::Dump).as_ref().and_then(|d| d.get("data")).cloned() {
        for (name, body) in recs {
            state.add_text(&name, pretty(&body, RECORD_DEPTH));
        }
    }
    if let Some(Json::Object(kv)) = read(JsonFile::Stack) {
        for (name, v) in kv {
            if matches!(v, Json::Array(_)) {
                state.set_stack(name.into_owned(), pretty(&v, 1));
            }
        }
    }
    if let Some(Json::Object(kv)) = read(JsonFile::Construct) {
        for (name, v) in kv {
            if matches!(v, Json::Str(_) | Json::Null) {
                state.set_construct(name.into_owned(), v.to_compact());
            }
        }
    }
}

fn recover_one(root: &Path, rel: &str, plan: Plan, id: &Identity, moved: bool, out: &mut Recovered) -> io::Result<()> {
    let target = resolve(root, rel, &plan, id, moved)?;
    let mut header = plan.header.clone().unwrap_or_else(|| Header {
        task: id.task.clone(),
        level: id.level.clone(),
        dump_data_dir: (id.task == "tensor")
            .then(|| format!("{}/{rel}/{TENSOR_DIR}", id.dump_path.trim_end_matches('/'))),
    });
    if !target.own {
        // The records' tensor files (if any) are in the directory they were written to.
        header.dump_data_dir = header.dump_data_dir.map(|_| target.dir.join(TENSOR_DIR).to_string_lossy().into_owned());
        out.beside.push(target.dir.clone());
        log::warn!(
            "{} is not the directory the killed run (pid {}) wrote; its records are recovered into {}",
            root.join(rel).display(),
            id.pid,
            target.dir.display()
        );
    }
    let mut state = DirState::default();
    state.header = Some(header);
    if target.own {
        merge_existing(&target.dir, &mut state);
    }
    let mut n = 0;
    // A planned record (`P`, journaled at the launch) stands in for its record only when the
    // record itself never came; when it did, the record takes the plan's place, so records keep
    // their launch order (completions are journaled later than the launches that follow them).
    let planned: std::collections::HashSet<String> =
        plan.entries.iter().filter(|(k, _, _)| *k == 'P').map(|(_, n, _)| n.clone()).collect();
    let mut ended: std::collections::HashMap<String, Vec<String>> = Default::default();
    for (k, name, text) in &plan.entries {
        if *k == 'R' && planned.contains(name) {
            ended.entry(name.clone()).or_default().push(text.clone());
        }
    }
    for (kind, name, text) in plan.entries {
        match kind {
            'R' if planned.contains(&name) => {}
            'R' => {
                state.add_text(&name, text);
                n += 1;
            }
            'P' => match ended.remove(&name) {
                Some(texts) => {
                    for t in texts {
                        state.add_text(&name, t);
                    }
                    n += 1;
                }
                None if state.records.contains_key(&name) => {}
                None => {
                    state.add_text(&name, text);
                    n += 1;
                    out.planned_only += 1;
                }
            },
            'S' => state.set_stack(name, text),
            _ => state.set_construct(name, text),
        }
    }
    write_checked(&target.dir, &state)?;
    if target.own {
        for f in JsonFile::ALL {
            // The killed run's own temporaries (`fsutil::Replacement`), and nothing else.
            let tmp = target.dir.join(format!(".{}{}{}", f.name(), fsutil::TMP_MARK, id.pid));
            if std::fs::symlink_metadata(&tmp).is_ok_and(|m| m.file_type().is_file()) {
                std::fs::remove_file(&tmp)?;
            }
        }
        check_tensor_files(root, &target.dir, &state, out);
    }
    out.dirs += 1;
    out.records += n;
    Ok(())
}

/// Writes the three JSON files of `state` into `dir` (through a temporary and a rename), each
/// checked to parse first; a file that already holds that text is left as it is.
fn write_checked(dir: &Path, state: &DirState) -> io::Result<()> {
    for (file, text) in JsonFile::ALL.into_iter().zip(state.texts()) {
        if let Err(e) = json::parse(&text) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} would not be valid JSON: {e}", file.name()),
            ));
        }
        let path = dir.join(file.name());
        if fsutil::read_nofollow(&path).is_ok_and(|b| b == text.as_bytes()) {
            continue;
        }
        fsutil::replace_file(&path, text.as_bytes())?;
    }
    Ok(())
}

/// A tensor file name from a journal that may be looked up: one plain component, as the
/// recorder names tensor files.
fn safe_file_name(n: &str) -> bool {
    crate::naming::sanitize_component(n) == n && !n.starts_with('.') && (n.ends_with(".pt") || n.ends_with(".npy"))
}

/// Counts (and names) the tensor files named by the records of `state` that are missing or
/// cut short; those cut short are removed (not data that reached disk). Only regular files in
/// the directory's own `dump_tensor_data` are looked at.
fn check_tensor_files(root: &Path, dir: &Path, state: &DirState, out: &mut Recovered) {
    let mut names = Vec::new();
    for body in state.records.values() {
        if let Ok(v) = json::parse(body) {
            data_names(&v, &mut names);
        }
    }
    let tdir = dir.join(TENSOR_DIR);
    let tdir_ok = fsutil::is_real_dir(&tdir);
    for n in &names {
        let p = tdir.join(n);
        let whole = safe_file_name(n)
            && tdir_ok
            && match std::fs::symlink_metadata(&p) {
                Ok(m) if m.file_type().is_file() => {
                    let whole = complete_file(n, &p);
                    if !whole {
                        let _ = std::fs::remove_file(&p);
                    }
                    whole
                }
                _ => false,
            };
        if !whole {
            out.missing_files += 1;
            if out.missing.len() < NAMED_MISSING {
                out.missing.push(p.strip_prefix(root).unwrap_or(&p).to_string_lossy().into_owned());
            }
        }
    }
}

/// Whether the tensor file at `p` is whole (see [`complete`]); reads its head and tail only.
fn complete_file(name: &str, p: &Path) -> bool {
    let Ok(mut f) = fsutil::open_read_nofollow(p) else { return false };
    let Ok(len) = f.metadata().map(|m| m.len()) else { return false };
    let mut head = vec![0u8; len.min(1 << 16) as usize];
    if f.read_exact(&mut head).is_err() {
        return false;
    }
    let mut tail = vec![0u8; len.min(22) as usize];
    if f.seek(SeekFrom::Start(len - tail.len() as u64)).and_then(|_| f.read_exact(&mut tail)).is_err() {
        return false;
    }
    complete(name, &head, &tail, len)
}

/// Whether a tensor file is whole from its first bytes `head`, its last bytes `tail` and its
/// length: a `.pt` zip ends with its end-of-central-directory record; a `.npy` holds exactly
/// the bytes its header announces.
fn complete(name: &str, head: &[u8], tail: &[u8], len: u64) -> bool {
    if name.ends_with(".pt") {
        return len >= 22 && tail.len() >= 22 && tail[tail.len() - 22..].starts_with(&0x06054b50u32.to_le_bytes());
    }
    if name.ends_with(".npy") {
        if head.len() < 10 || !head.starts_with(b"\x93NUMPY") {
            return false;
        }
        let hl = u16::from_le_bytes([head[8], head[9]]) as usize;
        let Some(header) = head.get(10..10 + hl).and_then(|h| std::str::from_utf8(h).ok()) else { return false };
        let item: u64 = header
            .split("'descr': '")
            .nth(1)
            .and_then(|d| d.get(2..).and_then(|t| t.split('\'').next()))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let dims = header.split("'shape': (").nth(1).and_then(|t| t.split(')').next()).unwrap_or("");
        let numel = dims.split(',').filter_map(|x| x.trim().parse::<u64>().ok()).try_fold(1u64, u64::checked_mul);
        return numel.and_then(|n| n.checked_mul(item)).and_then(|b| b.checked_add(10 + hl as u64)) == Some(len);
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
mod tests;
