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
//! `S` a stack.json value, `C` a construct.json value. The CRC covers the kind and everything
//! after the CRC field, text included. NUL bytes between entries are padding. A kill can cut
//! an entry anywhere; an entry that does not check out is skipped by the reader, which looks
//! for the next one byte by byte, so one damaged entry costs only itself.

use crate::header::Header;
use crate::json::{self, Json};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// File names of journals start with this.
pub const PREFIX: &str = ".msprobe-journal-";
/// The first bytes of a journal of this format.
pub const MAGIC: &str = "msprobe-journal 2 ";
/// The header block is padded with NULs to a multiple of this.
pub const HEADER_ALIGN: usize = 4096;
/// Longest entry head line the reader accepts (kind, CRC, length, two JSON strings).
const MAX_HEAD: usize = 1 << 16;

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

    /// The header block that opens a journal.
    pub fn header_block(&self) -> Vec<u8> {
        let mut out = format!("{MAGIC}{}\n", self.to_json().to_compact()).into_bytes();
        out.resize(out.len().div_ceil(HEADER_ALIGN) * HEADER_ALIGN, 0);
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

/// Appends one entry (see the module docs) to `out`.
pub fn entry(out: &mut Vec<u8>, kind: char, dir: &str, name: &str, text: &str) {
    debug_assert!(kind.is_ascii());
    let start = out.len();
    out.extend_from_slice(&[kind as u8, b' ']);
    out.extend_from_slice(b"00000000 ");
    let rest = out.len();
    out.extend_from_slice(text.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(Json::str(dir.to_string()).to_compact().as_bytes());
    out.push(b' ');
    out.extend_from_slice(Json::str(name.to_string()).to_compact().as_bytes());
    out.push(b'\n');
    out.extend_from_slice(text.as_bytes());
    out.push(b'\n');
    let crc = crc_of(kind as u8, &out[rest..]);
    out[start + 2..start + 10].copy_from_slice(format!("{crc:08x}").as_bytes());
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

/// Reads a journal's bytes: its identity and every entry that checks out.
pub fn parse(bytes: &[u8]) -> Parsed {
    let mut out = Parsed::default();
    let mut pos = 0;
    if let Some(rest) = bytes.strip_prefix(MAGIC.as_bytes()) {
        if let Some(nl) = rest.iter().take(MAX_HEAD).position(|&c| c == b'\n') {
            let v = std::str::from_utf8(&rest[..nl]).ok().and_then(|t| json::parse(t).ok());
            out.identity = v.as_ref().and_then(Identity::from_json);
            pos = MAGIC.len() + nl + 1;
        }
    }
    // Start of the unreadable stretch being skipped, if any.
    let mut bad: Option<usize> = None;
    while pos < bytes.len() {
        if bytes[pos] == 0 {
            // Text never holds a NUL: an unreadable stretch that runs into one was cut by the kill
            // (a slot written in part, the rest of it still zero).
            if bad.take().is_some() {
                out.torn += 1;
            }
            pos += 1;
            continue;
        }
        match read_entry(&bytes[pos..]) {
            Some((mut e, n)) => {
                if bad.take().is_some() {
                    out.damaged += 1;
                }
                e.at = pos;
                out.entries.push(e);
                pos += n;
            }
            None => {
                bad.get_or_insert(pos);
                pos += 1;
            }
        }
    }
    if bad.is_some() {
        out.torn += 1;
    }
    out
}

/// Reads the journal at `path` (not following a link).
pub fn read(path: &Path) -> std::io::Result<Parsed> {
    Ok(parse(&crate::fsutil::read_nofollow(path)?))
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

/// The open journal of one dump path, written by the writer thread.
pub struct Journal {
    path: PathBuf,
    file: BufWriter<std::fs::File>,
    /// Length of the header block.
    header_len: u64,
    /// A directory's JSON files could not be written: the journal is kept until exit and after.
    keep: bool,
}

impl Journal {
    /// Creates this process's journal in `root` (never an existing file: a journal left by an
    /// earlier, killed process with the same pid is left for `msprobe recover`).
    pub fn create(root: &Path, identity: &Identity) -> std::io::Result<Journal> {
        let pid = std::process::id();
        let mut n = 0;
        loop {
            let name = if n == 0 { format!("{PREFIX}{pid}") } else { format!("{PREFIX}{pid}-{n}") };
            let path = root.join(name);
            match crate::fsutil::create_new(&path) {
                Ok(f) => {
                    let mut file = BufWriter::with_capacity(1 << 16, f);
                    let head = identity.header_block();
                    file.write_all(&head)?;
                    file.flush()?;
                    return Ok(Journal { path, file, header_len: head.len() as u64, keep: false });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 100 => n += 1,
                Err(e) => return Err(e),
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `entries` (made with [`entry`]). Buffered: see [`Journal::flush`].
    pub fn append(&mut self, entries: &[u8]) -> std::io::Result<()> {
        self.file.write_all(entries)
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }

    /// Keeps the journal for `msprobe recover` (a directory's JSON files could not be written).
    pub fn keep(&mut self) {
        self.keep = true;
    }

    /// Empties the journal (back to its header): every directory it covered is written and
    /// closed.
    pub fn clear(&mut self) -> std::io::Result<()> {
        use std::io::{Seek, SeekFrom};
        if self.keep {
            return Ok(());
        }
        self.file.flush()?;
        let f = self.file.get_mut();
        f.set_len(self.header_len)?;
        f.seek(SeekFrom::Start(self.header_len))?;
        Ok(())
    }

    /// Removes the journal at a clean exit (unless it must be kept).
    pub fn remove(mut self) {
        if self.clear().is_ok() && !self.keep {
            let _ = std::fs::remove_file(&self.path);
        }
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
        let mut j = Journal::create(root.path(), &id).unwrap();
        let mut e = Vec::new();
        entry(&mut e, 'D', "step0/rank", "", &dir_text(&h("statistics"), Some((1, 2))));
        entry(&mut e, 'R', "step0/rank", "Torch.add.0.forward", "{\"x\": 1}");
        entry(&mut e, 'R', "step1/rank", "Torch.add.0.forward", "{\"x\": 2}");
        entry(&mut e, 'C', "step0/rank", "Module.a.A.forward.0", "null");
        j.append(&e).unwrap();
        j.flush().unwrap();
        let path = j.path.clone();
        // A kill in the middle of the next entry.
        let mut torn = Vec::new();
        entry(&mut torn, 'R', "step0/rank", "Torch.mul.0.forward", "{\"y\": 2}");
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(&torn[..torn.len() - 4]).unwrap();
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
        assert_eq!(parse_dir_text(&r.entries[0].text), Some((h("statistics"), Some((1, 2)))));
        // Emptied back to its header; removed at a clean exit, unless it must be kept.
        j.clear().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), HEADER_ALIGN as u64);
        j.append(&e).unwrap();
        j.flush().unwrap();
        assert_eq!(read(&path).unwrap().entries.len(), 4);
        j.remove();
        assert!(!path.exists());
        let mut k = Journal::create(root.path(), &id).unwrap();
        k.keep();
        let kp = k.path.clone();
        k.remove();
        assert!(kp.exists(), "a journal that must be kept stays");
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
