//! The crash journal: one append-only file per process and dump path,
//! `{dump_path}/.msprobe-journal-{pid}`, holding every record (and stack.json / construct.json
//! value) the writer has not yet put into its directory's JSON files for good.
//!
//! One file per process, not one per step directory: a step then costs no journal create and
//! no unlink, which is a third of a short step's file-system work (and on network file
//! systems, where creating a file costs milliseconds, most of it). The file is emptied
//! whenever no step directory is open (all written and closed) and removed at a clean exit.
//!
//! Format: entries `K <name as JSON> <byte length>\n<text>\n`. `D` names a directory relative
//! to the dump path (its text is the directory's header: task, level, dump_data_dir); the
//! `R` (record body as in dump.json), `S` (stack.json value) and `C` (construct.json value)
//! entries after it belong to that directory. A kill can tear the last entry only.

use crate::header::Header;
use crate::json::{self, Json};
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Component, Path, PathBuf};

/// File names of journals start with this.
pub const PREFIX: &str = ".msprobe-journal-";

/// Appends one entry: `{kind} {name as JSON} {len}\n{text}\n`.
pub fn entry(out: &mut Vec<u8>, kind: char, name: &str, text: &str) {
    out.extend_from_slice(format!("{kind} {} {}\n", Json::str(name.to_string()).to_compact(), text.len()).as_bytes());
    out.extend_from_slice(text.as_bytes());
    out.push(b'\n');
}

pub fn header_text(h: &Header) -> String {
    Json::Object(vec![
        ("task".into(), Json::str(h.task.clone())),
        ("level".into(), Json::str(h.level.clone())),
        ("dump_data_dir".into(), h.dump_data_dir.clone().map(Json::str).unwrap_or(Json::Null)),
    ])
    .to_compact()
}

/// The header a `D` entry's text names; a field it lacks is the default's.
fn parse_header(text: &str) -> Header {
    let v = json::parse(text).unwrap_or(Json::Null);
    let field = |k: &str| v.get(k).and_then(Json::as_str).map(str::to_string);
    let d = Header::default();
    Header {
        task: field("task").unwrap_or(d.task),
        level: field("level").unwrap_or(d.level),
        dump_data_dir: field("dump_data_dir").or(d.dump_data_dir),
    }
}

/// The open journal of one dump path.
pub struct Journal {
    path: PathBuf,
    root: PathBuf,
    file: BufWriter<std::fs::File>,
    /// The directory the last `D` entry named (entries after it belong to it).
    current: Option<PathBuf>,
    /// A directory's JSON files could not be written: the journal is kept until exit and after.
    keep: bool,
}

impl Journal {
    /// Creates this process's journal in `root` (never an existing file: a journal left by an
    /// earlier, killed process with the same pid is left for `msprobe recover`).
    pub fn create(root: &Path) -> std::io::Result<Journal> {
        let pid = std::process::id();
        let mut n = 0;
        loop {
            let name = if n == 0 { format!("{PREFIX}{pid}") } else { format!("{PREFIX}{pid}-{n}") };
            let path = root.join(name);
            match crate::fsutil::create_new(&path) {
                Ok(f) => {
                    return Ok(Journal {
                        path,
                        root: root.to_path_buf(),
                        file: BufWriter::with_capacity(1 << 16, f),
                        current: None,
                        keep: false,
                    })
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 100 => n += 1,
                Err(e) => return Err(e),
            }
        }
    }

    /// Appends `entries` (made with [`entry`]) of directory `dir`, naming it first when the
    /// entries before were another's. Buffered: see [`Journal::flush`].
    pub fn append(&mut self, dir: &Path, header: &Header, entries: &[u8]) -> std::io::Result<()> {
        if self.current.as_deref() != Some(dir) {
            let rel = dir.strip_prefix(&self.root).unwrap_or(dir);
            let mut d = Vec::new();
            entry(&mut d, 'D', &rel.to_string_lossy(), &header_text(header));
            self.file.write_all(&d)?;
            self.current = Some(dir.to_path_buf());
        }
        self.file.write_all(entries)
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }

    /// Keeps the journal for `msprobe recover` (a directory's JSON files could not be written).
    pub fn keep(&mut self) {
        self.keep = true;
    }

    /// Empties the journal: every directory it covered is written and closed.
    pub fn clear(&mut self) -> std::io::Result<()> {
        if self.keep {
            return Ok(());
        }
        self.file.flush()?;
        let f = self.file.get_mut();
        f.set_len(0)?;
        f.seek(SeekFrom::Start(0))?;
        self.current = None;
        Ok(())
    }

    /// Empties the journal at once, dropping what is still buffered and whatever `keep` says:
    /// the disk is full, and its room is needed for the JSON files, which it only duplicates
    /// (see `Worker::write`).
    pub fn discard(&mut self) -> std::io::Result<()> {
        let f = self.file.get_ref().try_clone()?;
        let buffered = std::mem::replace(&mut self.file, BufWriter::with_capacity(1 << 16, f));
        drop(buffered.into_parts());
        let f = self.file.get_mut();
        f.set_len(0)?;
        f.seek(SeekFrom::Start(0))?;
        self.current = None;
        self.keep = false;
        Ok(())
    }

    /// Removes the journal at a clean exit (unless it must be kept).
    pub fn remove(mut self) {
        if self.clear().is_ok() && !self.keep {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// One journal entry: (kind, record name, text).
pub type Entry = (char, String, String);

/// What one journal holds, by directory.
pub struct Replay {
    /// (directory, header, entries) in first-appearance order.
    pub dirs: Vec<(PathBuf, Header, Vec<Entry>)>,
    /// Entries that could not be read (a write cut by the kill).
    pub torn: usize,
}

/// Reads the journal at `path`; directories are resolved against its folder (only plain
/// relative names are accepted).
pub fn read(path: &Path) -> std::io::Result<Replay> {
    let bytes = std::fs::read(path)?;
    let root = path.parent().unwrap_or(Path::new("."));
    let mut out = Replay { dirs: Vec::new(), torn: 0 };
    let mut current: Option<usize> = None;
    let mut pos = 0;
    while pos < bytes.len() {
        let Some(nl) = bytes[pos..].iter().position(|&b| b == b'\n').map(|i| pos + i) else {
            out.torn += 1;
            break;
        };
        let head = String::from_utf8_lossy(&bytes[pos..nl]).into_owned();
        let parsed = head.split_once(' ').and_then(|(kind, rest)| {
            let (name, len) = rest.rsplit_once(' ')?;
            let kind = kind.chars().next().filter(|_| kind.len() == 1)?;
            Some((kind, json::parse(name).ok()?.as_str()?.to_string(), len.parse::<usize>().ok()?))
        });
        let Some((kind, name, len)) = parsed else {
            out.torn += 1;
            break;
        };
        let (start, end) = (nl + 1, nl + 1 + len);
        if end + 1 > bytes.len() || bytes[end] != b'\n' {
            out.torn += 1; // the kill cut this entry
            break;
        }
        let text = String::from_utf8_lossy(&bytes[start..end]).into_owned();
        pos = end + 1;
        if kind == 'D' {
            let rel = Path::new(&name);
            if rel.components().all(|c| matches!(c, Component::Normal(_))) {
                let dir = root.join(rel);
                current = Some(match out.dirs.iter().position(|(d, _, _)| *d == dir) {
                    Some(i) => i,
                    None => {
                        out.dirs.push((dir, parse_header(&text), Vec::new()));
                        out.dirs.len() - 1
                    }
                });
            } else {
                current = None;
                out.torn += 1;
            }
            continue;
        }
        match current {
            Some(i) => out.dirs[i].2.push((kind, name, text)),
            None => out.torn += 1,
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_go_to_the_directory_named_before_them_and_a_torn_tail_is_counted() {
        let root = tempfile::tempdir().unwrap();
        let h = |t: &str| Header { task: t.into(), level: "L1".into(), dump_data_dir: None };
        let mut j = Journal::create(root.path()).unwrap();
        let (a, b) = (root.path().join("step0/rank"), root.path().join("step1/rank"));
        let mut e = Vec::new();
        entry(&mut e, 'R', "Torch.add.0.forward", "{\"x\": 1}");
        j.append(&a, &h("statistics"), &e).unwrap();
        j.append(&b, &h("tensor"), &e).unwrap();
        let mut c = Vec::new();
        entry(&mut c, 'C', "Module.a.A.forward.0", "null");
        j.append(&a, &h("statistics"), &c).unwrap();
        j.flush().unwrap();
        let path = j.path.clone();
        // A kill in the middle of the next entry.
        let mut torn = Vec::new();
        entry(&mut torn, 'R', "Torch.mul.0.forward", "{\"y\": 2}");
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(&torn[..torn.len() - 4]).unwrap();
        let r = read(&path).unwrap();
        assert_eq!(r.torn, 1);
        assert_eq!(r.dirs.len(), 2);
        assert_eq!((r.dirs[0].0.clone(), r.dirs[0].1.task.as_str()), (a.clone(), "statistics"));
        assert_eq!((r.dirs[1].0.clone(), r.dirs[1].1.task.as_str()), (b, "tensor"));
        let kinds: Vec<_> = r.dirs[0].2.iter().map(|(k, n, _)| (*k, n.as_str())).collect();
        assert_eq!(kinds, [('R', "Torch.add.0.forward"), ('C', "Module.a.A.forward.0")]);
        // Emptied when nothing is open; removed at a clean exit, unless it must be kept.
        j.clear().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
        j.append(&a, &h("statistics"), &e).unwrap();
        j.flush().unwrap();
        assert_eq!(read(&path).unwrap().dirs.len(), 1, "a cleared journal names its directory again");
        j.remove();
        assert!(!path.exists());
        let mut k = Journal::create(root.path()).unwrap();
        k.keep();
        let kp = k.path.clone();
        k.remove();
        assert!(kp.exists(), "a journal that must be kept stays");
    }

    #[test]
    fn a_directory_outside_the_dump_path_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let p = root.path().join(format!("{PREFIX}1"));
        let mut bytes = Vec::new();
        entry(&mut bytes, 'D', "../elsewhere", "{}");
        entry(&mut bytes, 'R', "Torch.add.0.forward", "{}");
        std::fs::write(&p, bytes).unwrap();
        let r = read(&p).unwrap();
        assert!(r.dirs.is_empty());
        assert_eq!(r.torn, 2);
    }
}
