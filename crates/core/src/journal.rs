//! The crash journal: one file per process and dump path, `{dump_path}/.msprobe-journal-{pid}`,
//! holding every record (and stack.json / construct.json value) of the directories the process
//! has open, so that `msprobe recover` can rebuild their JSON files after a kill.
//!
//! One file per process, not one per step directory: a step then costs no journal create and
//! no unlink, which is a third of a short step's file-system work (and on network file
//! systems, where creating a file costs milliseconds, most of it). It is removed at a clean exit.
//!
//! Format (version 2). The file opens with a header block naming the run (its [`Identity`]):
//! `msprobe-journal 2 {identity as JSON}\n`, padded with NUL bytes to a multiple of
//! [`HEADER_ALIGN`]. Entries follow, each one self-contained:
//!
//! ```text
//! {kind} {crc32 as 8 hex digits} {text length} {directory as JSON} {name as JSON}\n{text}\n
//! ```
//!
//! The directory is relative to the dump path (`step3/rank0`). Kinds: `D` a directory opened
//! (its text: the dump.json header fields, and, once the directory exists, its `dev`/`ino`: the
//! run's own directory is recognised by them, see `recover`), `R` a record body as in dump.json,
//! `P` a record's planned body (journaled at the launch when the record ends later on another
//! thread, L2 device statistics; `recover` writes it only if that record's `R` never came),
//! `S` a stack.json value, `C` a construct.json value. The CRC covers the kind and everything
//! after the CRC field, text included. NUL bytes between entries are padding. A kill can cut
//! an entry anywhere; an entry that does not check out is skipped by the reader, which looks
//! for the next one byte by byte, so one damaged entry costs only itself.

use crate::header::Header;
use crate::json::{self, Json};
use std::io::Write;
use std::path::{Path, PathBuf};

/// File names of journals start with this.
pub const PREFIX: &str = ".msprobe-journal-";
/// The first bytes of a journal of this format.
pub const MAGIC: &str = "msprobe-journal 2 ";
/// The header block is padded with NULs to a multiple of this.
pub const HEADER_ALIGN: usize = 4096;
/// Longest entry head line the reader accepts (kind, CRC, length, two JSON strings).
const MAX_HEAD: usize = 1 << 16;
/// The header block ends with the release mark: a little-endian u64, the offset before which
/// nothing is needed any more (its space was given back, see [`Sink::release`]); 0 means the
/// end of the header block. One aligned 8-byte store updates it, so a kill never tears it.
pub const LOW_LEN: usize = 8;

/// The length of the header block of a journal starting with `head` (None: not a journal of
/// this format, or `head` does not reach the end of its identity line).
pub fn header_len(head: &[u8]) -> Option<usize> {
    let rest = head.strip_prefix(MAGIC.as_bytes())?;
    let nl = rest.iter().take(MAX_HEAD).position(|&c| c == b'\n')?;
    Some((MAGIC.len() + nl + 1 + LOW_LEN).div_ceil(HEADER_ALIGN) * HEADER_ALIGN)
}

/// The run a journal belongs to: which process (pid, and its start as the kernel counts it, on
/// which boot), when it started, and which dump path it wrote (with the directory's device and
/// inode, which tell whether the dump was moved or copied since).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Identity {
    pub pid: u32,
    /// Wall-clock start of the journal, ns since the Unix epoch.
    pub start_ns: u64,
    /// The process's start time in clock ticks since boot (`/proc/PID/stat`, field 22).
    pub proc_start: Option<u64>,
    pub boot_id: Option<String>,
    pub dump_path: String,
    /// (device, inode) of the dump path.
    pub root: Option<(u64, u64)>,
    pub task: String,
    pub level: String,
}

/// The start time (field 22 of `/proc/PID/stat`) of process `pid`, if it runs.
fn proc_start_of(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after its end.
    stat.rsplit_once(')')?.1.split_whitespace().nth(19)?.parse().ok()
}

fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok().map(|s| s.trim().to_string())
}

/// (device, inode) of `p`, not following a link.
pub fn file_id(p: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(p).ok().map(|m| (m.dev(), m.ino()))
}

impl Identity {
    /// This process writing the dump at `root` with `header`'s task and level.
    pub fn of_this_process(root: &Path, header: &Header) -> Identity {
        let start_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Identity {
            pid: std::process::id(),
            start_ns,
            proc_start: proc_start_of("self"),
            boot_id: boot_id(),
            dump_path: root.to_string_lossy().into_owned(),
            root: file_id(root),
            task: header.task.clone(),
            level: header.level.clone(),
        }
    }

    fn to_json(&self) -> Json {
        let num = |v: Option<u64>| v.map(|v| Json::Int(v as i128)).unwrap_or(Json::Null);
        Json::Object(vec![
            ("pid".into(), Json::Int(self.pid as i128)),
            ("start_ns".into(), Json::Int(self.start_ns as i128)),
            ("proc_start".into(), num(self.proc_start)),
            ("boot_id".into(), self.boot_id.clone().map(Json::str).unwrap_or(Json::Null)),
            ("dump_path".into(), Json::str(self.dump_path.clone())),
            ("root_dev".into(), num(self.root.map(|r| r.0))),
            ("root_ino".into(), num(self.root.map(|r| r.1))),
            ("task".into(), Json::str(self.task.clone())),
            ("level".into(), Json::str(self.level.clone())),
        ])
    }

    fn from_json(v: &Json) -> Option<Identity> {
        let int = |k: &str| match v.get(k) {
            Some(Json::Int(i)) if *i >= 0 && *i <= u64::MAX as i128 => Some(*i as u64),
            _ => None,
        };
        let s = |k: &str| v.get(k).and_then(Json::as_str).map(str::to_string);
        Some(Identity {
            pid: u32::try_from(int("pid")?).ok()?,
            start_ns: int("start_ns")?,
            proc_start: int("proc_start"),
            boot_id: s("boot_id"),
            dump_path: s("dump_path")?,
            root: int("root_dev").zip(int("root_ino")),
            task: s("task")?,
            level: s("level")?,
        })
    }

    /// The header block that opens a journal: the identity line, NUL padding, and in its last
    /// 8 bytes the release mark (see [`Sink::release`]), 0 here.
    pub fn header_block(&self) -> Vec<u8> {
        let mut out = format!("{MAGIC}{}\n", self.to_json().to_compact()).into_bytes();
        out.resize((out.len() + LOW_LEN).div_ceil(HEADER_ALIGN) * HEADER_ALIGN, 0);
        out
    }

    /// Whether the process that wrote the journal still runs (same pid, same start, same boot).
    pub fn is_running(&self) -> bool {
        match (self.proc_start, &self.boot_id) {
            (Some(start), Some(boot)) => {
                boot_id().as_ref() == Some(boot) && proc_start_of(&self.pid.to_string()) == Some(start)
            }
            _ => false,
        }
    }
}

/// The dump.json header fields of a `D` entry, and the directory's (device, inode) once it
/// exists.
pub fn dir_text(h: &Header, id: Option<(u64, u64)>) -> String {
    let mut kv = vec![
        ("task".into(), Json::str(h.task.clone())),
        ("level".into(), Json::str(h.level.clone())),
        ("dump_data_dir".into(), h.dump_data_dir.clone().map(Json::str).unwrap_or(Json::Null)),
    ];
    if let Some((dev, ino)) = id {
        kv.push(("dev".into(), Json::Int(dev as i128)));
        kv.push(("ino".into(), Json::Int(ino as i128)));
    }
    Json::Object(kv).to_compact()
}

/// A `D` entry's text, read back: the header and the directory's (device, inode) if given.
/// None when it is not such an object.
pub fn parse_dir_text(text: &str) -> Option<(Header, Option<(u64, u64)>)> {
    let v = json::parse(text).ok()?;
    let s = |k: &str| v.get(k).and_then(Json::as_str).map(str::to_string);
    let dump_data_dir = match v.get("dump_data_dir") {
        Some(Json::Null) | None => None,
        Some(Json::Str(d)) => Some(d.to_string()),
        Some(_) => return None,
    };
    let int = |k: &str| match v.get(k) {
        Some(Json::Int(i)) if *i >= 0 && *i <= u64::MAX as i128 => Some(*i as u64),
        _ => None,
    };
    Some((Header { task: s("task")?, level: s("level")?, dump_data_dir }, int("dev").zip(int("ino"))))
}

/// The CRC of an entry: its kind byte, then everything after the CRC field.
fn crc_of(kind: u8, rest: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&[kind]);
    h.update(rest);
    h.finalize()
}

/// Appends one entry (see the module docs) to `out`. Runs on capturing threads for every
/// record: no allocation.
pub fn entry(out: &mut Vec<u8>, kind: char, dir: &str, name: &str, text: &str) {
    debug_assert!(kind.is_ascii());
    let start = out.len();
    out.extend_from_slice(&[kind as u8, b' ']);
    out.extend_from_slice(b"00000000 ");
    let rest = out.len();
    out.extend_from_slice(itoa::Buffer::new().format(text.len()).as_bytes());
    out.push(b' ');
    for (i, s) in [dir, name].into_iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        // Names are plain ASCII but for rare exceptions: written as they are, quoted.
        if s.bytes().all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\') {
            out.push(b'"');
            out.extend_from_slice(s.as_bytes());
            out.push(b'"');
        } else {
            let mut q = String::new();
            json::write_string(&mut q, s);
            out.extend_from_slice(q.as_bytes());
        }
    }
    out.push(b'\n');
    out.extend_from_slice(text.as_bytes());
    out.push(b'\n');
    let crc = crc_of(kind as u8, &out[rest..]);
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for i in 0..8 {
        out[start + 2 + i] = HEX[(crc >> (28 - 4 * i)) as usize & 0xf];
    }
}

/// One journal entry, read back.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub kind: char,
    /// The directory, relative to the dump path, as written (not yet checked).
    pub dir: String,
    pub name: String,
    pub text: String,
    /// Where it starts in the file.
    pub at: usize,
}

/// What a journal holds.
#[derive(Debug, Default)]
pub struct Parsed {
    /// None: the file does not open with a header of this format.
    pub identity: Option<Identity>,
    /// Entries whose CRC checks out, in file order.
    pub entries: Vec<Entry>,
    /// Unreadable stretches that end the file or run into NUL bytes: writes cut by the kill.
    pub torn: usize,
    /// Unreadable stretches followed directly by a readable entry: damage.
    pub damaged: usize,
}

/// The end of the JSON string starting at `s[0] == '"'`: the index after its closing quote.
fn json_string_end(s: &[u8]) -> Option<usize> {
    if s.first() != Some(&b'"') {
        return None;
    }
    let mut i = 1;
    while i < s.len() {
        match s[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            b'\n' => return None,
            _ => i += 1,
        }
    }
    None
}

fn json_string(s: &[u8]) -> Option<String> {
    match json::parse(std::str::from_utf8(s).ok()?).ok()? {
        Json::Str(s) => Some(s.into_owned()),
        _ => None,
    }
}

/// Reads the entry at `b[0]`; returns it and its length in bytes.
fn read_entry(b: &[u8]) -> Option<(Entry, usize)> {
    let kind = *b.first()?;
    if !kind.is_ascii_uppercase() || b.get(1) != Some(&b' ') || b.get(10) != Some(&b' ') {
        return None;
    }
    let crc = u32::from_str_radix(std::str::from_utf8(b.get(2..10)?).ok()?, 16).ok()?;
    let rest = 11;
    let digits = b[rest..].iter().take(21).position(|&c| c == b' ')?;
    let len: usize = std::str::from_utf8(&b[rest..rest + digits]).ok()?.parse().ok()?;
    let d0 = rest + digits + 1;
    let d1 = d0 + json_string_end(&b[d0..b.len().min(d0 + MAX_HEAD)])?;
    if b.get(d1) != Some(&b' ') {
        return None;
    }
    let n0 = d1 + 1;
    let n1 = n0 + json_string_end(&b[n0..b.len().min(n0 + MAX_HEAD)])?;
    if b.get(n1) != Some(&b'\n') {
        return None;
    }
    let t0 = n1 + 1;
    let t1 = t0.checked_add(len)?;
    if b.get(t1) != Some(&b'\n') {
        return None;
    }
    if crc_of(kind, &b[rest..=t1]) != crc {
        return None;
    }
    let e = Entry {
        kind: kind as char,
        dir: json_string(&b[d0..d1])?,
        name: json_string(&b[n0..n1])?,
        text: std::str::from_utf8(&b[t0..t1]).ok()?.to_string(),
        at: 0,
    };
    Some((e, t1 + 1))
}

/// Reads a journal's bytes (the whole file): its identity and every entry that checks out.
pub fn parse(bytes: &[u8]) -> Parsed {
    let start = match header_len(bytes) {
        Some(hl) if hl <= bytes.len() => {
            let low = u64::from_le_bytes(bytes[hl - LOW_LEN..hl].try_into().expect("8 bytes"));
            usize::try_from(low).map_or(bytes.len(), |l| l.clamp(hl, bytes.len()))
        }
        _ => 0,
    };
    parse_from(bytes, &bytes[start.min(bytes.len())..], start)
}

/// Reads the identity from `head` (the file's first bytes) and the entries from `body`, which
/// starts at offset `at` of the file.
fn parse_from(head: &[u8], body: &[u8], at: usize) -> Parsed {
    let mut out = Parsed::default();
    if let Some(rest) = head.strip_prefix(MAGIC.as_bytes()) {
        if let Some(nl) = rest.iter().take(MAX_HEAD).position(|&c| c == b'\n') {
            let v = std::str::from_utf8(&rest[..nl]).ok().and_then(|t| json::parse(t).ok());
            out.identity = v.as_ref().and_then(Identity::from_json);
        }
    }
    let bytes = body;
    let mut pos = 0;
    // The unreadable stretch being skipped, if any: whether it holds a NUL. Text never holds one,
    // so a stretch with a NUL in it is a slot the kill cut while it was being copied in (the copy
    // need not run front to back: memcpy may store a slot's last bytes before its middle, leaving
    // written bytes on both sides of zeros): torn. A stretch without one, followed by a good
    // entry, was written whole and changed since: damaged.
    let mut bad: Option<bool> = None;
    while pos < bytes.len() {
        if bytes[pos] == 0 {
            if let Some(nul) = bad.as_mut() {
                *nul = true;
            }
            pos += 1;
            continue;
        }
        match read_entry(&bytes[pos..]) {
            Some((mut e, n)) => {
                match bad.take() {
                    Some(true) => out.torn += 1,
                    Some(false) => out.damaged += 1,
                    None => {}
                }
                e.at = at + pos;
                out.entries.push(e);
                pos += n;
            }
            None => {
                // A stretch that starts right after a NUL is the rest of a slot cut mid-copy too.
                bad.get_or_insert(pos > 0 && bytes[pos - 1] == 0);
                pos += 1;
            }
        }
    }
    if bad.is_some() {
        out.torn += 1;
    }
    out
}

/// Reads the journal at `path` (not following a link), from its release mark on: what came
/// before it was given back (and reads as zeros).
pub fn read(path: &Path) -> std::io::Result<Parsed> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = crate::fsutil::open_read_nofollow(path)?;
    let len = f.metadata()?.len();
    let mut head = Vec::new();
    (&mut f).take((MAX_HEAD + HEADER_ALIGN) as u64).read_to_end(&mut head)?;
    let start = match header_len(&head) {
        Some(hl) if hl <= head.len() => {
            let low = u64::from_le_bytes(head[hl - LOW_LEN..hl].try_into().expect("8 bytes"));
            low.clamp(hl as u64, len)
        }
        _ => 0,
    };
    f.seek(SeekFrom::Start(start))?;
    let mut body = Vec::new();
    f.read_to_end(&mut body)?;
    Ok(parse_from(&head, &body, start as usize))
}

/// A directory name of a journal entry (`step{N}/rank` or `step{N}/rank{R}`), checked: the
/// only form the recorder writes, so a name from a journal can never leave the dump path.
pub fn valid_dir(rel: &str) -> bool {
    let digits =
        |s: &str, empty_ok: bool| (empty_ok || !s.is_empty()) && s.len() <= 19 && s.bytes().all(|b| b.is_ascii_digit());
    match rel.split_once('/') {
        Some((step, rank)) => {
            step.strip_prefix("step").is_some_and(|n| digits(n, false))
                && rank.strip_prefix("rank").is_some_and(|n| digits(n, true))
        }
        None => false,
    }
}

/// Where a journal's entries went: `[start, end)` of the file. `ok` false: nothing usable was
/// written there (the journal is full or broken), the span is still accounted for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Appended {
    pub start: u64,
    pub end: u64,
    pub ok: bool,
}

/// A process's journal of one dump path. Capturing threads append their records' entries
/// (durable against the death of the process once `append` returns); the writer thread
/// appends directory entries, gives back space ([`Sink::release`]) and ends it.
///
/// Implementations: [`FileSink`] (a plain file, one `write` per append), and, in libmsprobe, a
/// shared file mapping that appends without a system call.
pub trait Sink: Send + Sync {
    /// Appends `bytes` (whole entries made with [`entry`]) as one unit.
    fn append(&self, bytes: &[u8]) -> Appended;
    /// Offset of the first entry (the end of the header block).
    fn base(&self) -> u64;
    /// Every entry before `low` is in the JSON files of a closed directory: the space may be
    /// given back, and the release mark moved there. Returns true when the journal started over
    /// (everything appended was before `low`): later offsets begin at [`Sink::base`] again.
    /// Called by the writer thread only.
    fn release(&self, low: u64) -> bool;
    /// A step's files were written: makes the journal durable against a machine crash, when
    /// configured to.
    fn checkpoint(&self) {}
    /// The writer thread has nothing to do: the journal may make room ahead of the appends, so
    /// that capturing threads neither allocate nor fault.
    fn prepare(&self) {}
    /// The disk is full: gives back the space of every complete entry at once (the JSON files
    /// need it; see `Worker::write`), whether or not the writer has filed them. Returns whether
    /// it did; a journal that cannot do so safely says no.
    fn discard(&self) -> bool {
        false
    }
    fn path(&self) -> &Path;
    /// The file system's error that stopped appends (disk full, I/O error), if that is what
    /// stopped them: the writer reports it as the dump path's storage failure.
    fn failure(&self) -> Option<std::io::Error> {
        None
    }
    /// Ends the journal at a clean exit: removed, unless `keep` (some JSON files could not be
    /// written; `msprobe recover` needs it).
    fn finish(&self, keep: bool);
}

/// Opens a process's journal in a dump path: how a recorder gets its [`Sink`].
pub type OpenSink = fn(&Path, &Identity) -> std::io::Result<std::sync::Arc<dyn Sink>>;

/// Creates this process's journal file in `root` with its header block (never an existing
/// file: a journal left by an earlier, killed process with the same pid is left for
/// `msprobe recover`). Returns the file, its path and the header's length.
pub fn create_file(root: &Path, identity: &Identity) -> std::io::Result<(std::fs::File, PathBuf, u64)> {
    let pid = std::process::id();
    let mut n = 0;
    loop {
        let name = if n == 0 { format!("{PREFIX}{pid}") } else { format!("{PREFIX}{pid}-{n}") };
        let path = root.join(name);
        match crate::fsutil::create_new_rw(&path) {
            Ok(mut f) => {
                let head = identity.header_block();
                if let Err(e) = f.write_all(&head) {
                    let _ = std::fs::remove_file(&path);
                    return Err(e);
                }
                return Ok((f, path, head.len() as u64));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 100 => n += 1,
            Err(e) => return Err(e),
        }
    }
}

/// A journal in a plain file: each append is one `write` (so it survives the death of the
/// process), under a lock. Space is given back when everything is released (the file is cut
/// back to its header).
pub struct FileSink {
    path: PathBuf,
    base: u64,
    /// The file and the offset its next append goes to.
    file: std::sync::Mutex<(std::fs::File, u64)>,
    broken: std::sync::atomic::AtomicBool,
    /// The OS error of the write that broke it (0: none).
    errno: std::sync::atomic::AtomicI32,
}

impl FileSink {
    pub fn create(root: &Path, identity: &Identity) -> std::io::Result<FileSink> {
        let (file, path, base) = create_file(root, identity)?;
        Ok(FileSink::from_file(file, path, base))
    }

    /// A journal file made by [`create_file`] (`base`: its header's length).
    pub fn from_file(file: std::fs::File, path: PathBuf, base: u64) -> FileSink {
        FileSink {
            path,
            base,
            file: std::sync::Mutex::new((file, base)),
            broken: std::sync::atomic::AtomicBool::new(false),
            errno: std::sync::atomic::AtomicI32::new(0),
        }
    }

    /// [`OpenSink`] for a [`FileSink`].
    pub fn open(root: &Path, identity: &Identity) -> std::io::Result<std::sync::Arc<dyn Sink>> {
        Ok(std::sync::Arc::new(FileSink::create(root, identity)?))
    }
}

impl Sink for FileSink {
    fn append(&self, bytes: &[u8]) -> Appended {
        use std::os::unix::fs::FileExt;
        use std::sync::atomic::Ordering::Relaxed;
        let mut g = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let start = g.1;
        let end = start + bytes.len() as u64;
        g.1 = end;
        let ok = !self.broken.load(Relaxed)
            && match g.0.write_all_at(bytes, start) {
                Ok(()) => true,
                Err(e) => {
                    self.errno.store(e.raw_os_error().unwrap_or(0), Relaxed);
                    false
                }
            };
        if !ok {
            // Later appends would leave a hole a reader skips; none is written any more.
            self.broken.store(true, Relaxed);
        }
        Appended { start, end, ok }
    }

    fn base(&self) -> u64 {
        self.base
    }

    fn release(&self, low: u64) -> bool {
        let mut g = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if low < g.1 || g.1 == self.base {
            return false;
        }
        if g.0.set_len(self.base).is_ok() {
            g.1 = self.base;
            return true;
        }
        false
    }

    fn failure(&self) -> Option<std::io::Error> {
        let n = self.errno.load(std::sync::atomic::Ordering::Relaxed);
        (n != 0).then(|| std::io::Error::from_raw_os_error(n))
    }

    fn discard(&self) -> bool {
        let mut g = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if g.0.set_len(self.base).is_err() {
            return false;
        }
        g.1 = self.base;
        true
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn finish(&self, keep: bool) {
        if !keep {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The writer's account of one journal: which of its bytes are still needed. Every appended
/// span is reported once ([`Space::processed`]); those of a directory still open are needed
/// until it closes. Everything before [`Space::low`] may be given back.
#[derive(Debug)]
pub struct Space {
    /// Every span before this was reported.
    done: u64,
    /// Spans reported past `done` (start → end), not yet contiguous with it.
    ahead: std::collections::BTreeMap<u64, u64>,
    /// Per open directory, the start of its first span.
    open: std::collections::HashMap<PathBuf, u64>,
}

impl Space {
    pub fn new(base: u64) -> Space {
        Space { done: base, ahead: Default::default(), open: Default::default() }
    }

    /// `a` was appended (and is known to the writer); `dir`: the directory it belongs to, which
    /// needs it until it closes.
    pub fn processed(&mut self, a: Appended, dir: Option<&Path>) {
        if let Some(d) = dir {
            let low = self.open.entry(d.to_path_buf()).or_insert(a.start);
            *low = (*low).min(a.start);
        }
        if a.end <= a.start {
            return;
        }
        if a.start <= self.done {
            self.done = self.done.max(a.end);
        } else {
            let e = self.ahead.entry(a.start).or_insert(a.end);
            *e = (*e).max(a.end);
        }
        while let Some((&s, &e)) = self.ahead.first_key_value() {
            if s > self.done {
                break;
            }
            self.done = self.done.max(e);
            self.ahead.pop_first();
        }
    }

    /// `dir` closed: its spans are in its JSON files.
    pub fn closed(&mut self, dir: &Path) {
        self.open.remove(dir);
    }

    /// Everything before this may be given back.
    pub fn low(&self) -> u64 {
        self.open.values().copied().fold(self.done, u64::min)
    }

    /// The journal started over at `base`.
    pub fn reset(&mut self, base: u64) {
        *self = Space::new(base);
    }
}

/// `bytes` (a journal) with its identity changed by `f` (tests: a journal of a process that no
/// longer runs, or of a dump that was moved).
#[cfg(test)]
pub(crate) fn with_identity(bytes: &[u8], f: impl FnOnce(&mut Identity)) -> Vec<u8> {
    let mut id = parse(bytes).identity.expect("a journal");
    f(&mut id);
    let end = bytes.iter().position(|&c| c == b'\n').expect("a header line") + 1;
    let mut out = id.header_block();
    out.extend_from_slice(&bytes[end..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(task: &str) -> Header {
        Header { task: task.into(), level: "L1".into(), dump_data_dir: None }
    }

    #[test]
    fn entries_are_self_contained_and_a_torn_tail_is_counted() {
        let root = tempfile::tempdir().unwrap();
        let id = Identity::of_this_process(root.path(), &h("statistics"));
        let j = FileSink::create(root.path(), &id).unwrap();
        let mut e = Vec::new();
        entry(&mut e, 'D', "step0/rank", "", &dir_text(&h("statistics"), Some((1, 2))));
        entry(&mut e, 'R', "step0/rank", "Torch.add.0.forward", "{\"x\": 1}");
        entry(&mut e, 'R', "step1/rank", "Torch.add.0.forward", "{\"x\": 2}");
        entry(&mut e, 'C', "step0/rank", "Module.a.A.forward.0", "null");
        let a = j.append(&e);
        assert_eq!(a, Appended { start: j.base(), end: j.base() + e.len() as u64, ok: true });
        let path = j.path().to_path_buf();
        // A kill in the middle of the next entry.
        let mut torn = Vec::new();
        entry(&mut torn, 'R', "step0/rank", "Torch.mul.0.forward", "{\"y\": 2}");
        j.append(&torn[..torn.len() - 4]);
        let r = read(&path).unwrap();
        assert_eq!(r.identity.as_ref(), Some(&id));
        assert_eq!((r.torn, r.damaged), (1, 0));
        let got: Vec<_> = r.entries.iter().map(|e| (e.kind, e.dir.as_str(), e.name.as_str())).collect();
        assert_eq!(
            got,
            [
                ('D', "step0/rank", ""),
                ('R', "step0/rank", "Torch.add.0.forward"),
                ('R', "step1/rank", "Torch.add.0.forward"),
                ('C', "step0/rank", "Module.a.A.forward.0")
            ]
        );
        assert_eq!(r.entries[0].at as u64, j.base());
        assert_eq!(parse_dir_text(&r.entries[0].text), Some((h("statistics"), Some((1, 2)))));
        assert_eq!(parse(&std::fs::read(&path).unwrap()).entries, r.entries);
        // Started over once everything is released; removed at a clean exit, unless kept.
        assert!(!j.release(a.end), "not everything is released");
        assert!(j.release(u64::MAX));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), j.base());
        assert_eq!(j.append(&e).start, j.base());
        assert_eq!(read(&path).unwrap().entries.len(), 4);
        j.finish(false);
        assert!(!path.exists());
        let k = FileSink::create(root.path(), &id).unwrap();
        k.finish(true);
        assert!(k.path().exists(), "a journal that must be kept stays");
    }

    #[test]
    fn the_release_mark_skips_what_was_given_back() {
        let mut b = Identity::default().header_block();
        let hl = b.len();
        let mut mark = 0;
        for i in 0..4 {
            if i == 2 {
                mark = b.len();
            }
            entry(&mut b, 'R', "step0/rank", &format!("Torch.add.{i}.forward"), "{}");
        }
        b[hl - LOW_LEN..hl].copy_from_slice(&(mark as u64).to_le_bytes());
        let names = |r: Parsed| r.entries.iter().map(|e| e.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(parse(&b)), ["Torch.add.2.forward", "Torch.add.3.forward"]);
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("j"), &b).unwrap();
        assert_eq!(names(read(&t.path().join("j")).unwrap()), ["Torch.add.2.forward", "Torch.add.3.forward"]);
        // A mark past the end (damage) reads nothing, and never panics.
        b[hl - LOW_LEN..hl].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(parse(&b).entries.is_empty());
    }

    #[test]
    fn space_is_given_back_up_to_the_first_span_still_needed() {
        let span = |s: u64, e: u64| Appended { start: s, end: e, ok: true };
        let mut sp = Space::new(100);
        let (a, b) = (Path::new("step0/rank"), Path::new("step1/rank"));
        sp.processed(span(100, 110), Some(a));
        sp.processed(span(120, 130), Some(b)); // reported before the span before it
        assert_eq!(sp.low(), 100);
        sp.closed(a);
        assert_eq!(sp.low(), 110, "110..120 is not reported yet");
        sp.processed(span(110, 120), None);
        assert_eq!(sp.low(), 120, "step1 is still open");
        sp.closed(b);
        assert_eq!(sp.low(), 130);
        sp.processed(span(130, 130), Some(a)); // nothing written, but the directory is open again
        assert_eq!(sp.low(), 130);
        sp.reset(100);
        assert_eq!(sp.low(), 100);
    }

    #[test]
    fn a_slot_cut_mid_copy_is_torn_not_damaged() {
        // A kill during a copy that stored the slot's head and tail but not its middle, with a later
        // thread's entry complete after it (each append owns its slot): torn, the rest intact.
        let mut b = Identity::default().header_block();
        entry(&mut b, 'R', "step0/rank", "Torch.add.0.forward", "{\"x\": [1, 2, 3]}");
        let s1 = b.len();
        entry(&mut b, 'R', "step0/rank", "Torch.add.1.forward", "{\"x\": [1, 2, 3]}");
        let e1 = b.len();
        entry(&mut b, 'R', "step0/rank", "Torch.add.2.forward", "{\"x\": [1, 2, 3]}");
        for hole in [(s1 + 8, e1 - 8), (s1, e1 - 4), (s1 + 20, s1 + 21)] {
            let mut m = b.clone();
            m[hole.0..hole.1].fill(0);
            let r = parse(&m);
            let names: Vec<_> = r.entries.iter().map(|e| e.name.as_str()).collect();
            assert_eq!(names, ["Torch.add.0.forward", "Torch.add.2.forward"], "hole {hole:?}");
            assert_eq!((r.torn, r.damaged), (1, 0), "hole {hole:?}");
        }
    }

    #[test]
    fn a_damaged_entry_costs_only_itself() {
        let mut b = Identity::default().header_block();
        let mut offsets = Vec::new();
        for i in 0..5 {
            offsets.push(b.len());
            entry(&mut b, 'R', "step0/rank", &format!("Torch.add.{i}.forward"), "{\"x\": [1, 2, 3]}");
        }
        // Every single-byte change of entry 2 loses entry 2 alone.
        for at in offsets[2]..offsets[3] {
            let mut m = b.clone();
            m[at] ^= 0x04;
            let r = parse(&m);
            let names: Vec<_> = r.entries.iter().map(|e| e.name.as_str()).collect();
            assert_eq!(
                names,
                ["Torch.add.0.forward", "Torch.add.1.forward", "Torch.add.3.forward", "Torch.add.4.forward"],
                "flip at {at}"
            );
            assert_eq!((r.torn, r.damaged), (0, 1), "flip at {at}");
        }
        assert!(parse(&b).identity.is_some());
    }

    #[test]
    fn only_step_and_rank_directories_are_valid() {
        for ok in ["step0/rank", "step12/rank3", "step0/rank0"] {
            assert!(valid_dir(ok), "{ok}");
        }
        for bad in [
            "../x",
            "step0/../rank",
            "step0",
            "step0/rank/..",
            "/step0/rank",
            "stepx/rank",
            "step0/rankx",
            "step0/rank/x",
            "",
            "step/rank",
        ] {
            assert!(!valid_dir(bad), "{bad}");
        }
    }

    #[test]
    fn this_process_is_running_and_a_made_up_one_is_not() {
        let id = Identity::of_this_process(Path::new("/tmp"), &h("statistics"));
        assert!(id.is_running());
        assert!(!Identity { proc_start: id.proc_start.map(|s| s + 1), ..id.clone() }.is_running());
        assert!(!Identity { pid: u32::MAX, ..id }.is_running());
    }
}
