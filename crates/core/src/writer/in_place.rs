//! The JSON files of an open directory, kept open from the start of the step and written in
//! place, as msprobe does, where a temporary and a rename would cost three more system calls per
//! file; a write that fails (the disk full) leaves the file as it was.

use super::dir_state::DirState;
use super::json_files::{write_close, write_entries, JsonFile};
use crate::fsutil;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// The JSON files of an open directory, kept open from the start of the step and written in
/// place, as msprobe does. A file whose entries were only added to since its last write is
/// extended: the new entries and the closing brackets are written over the old closing brackets,
/// leaving exactly the bytes a whole rewrite would. So the writer thread can keep the files
/// current while it idles (`Worker::refresh`) and a waiting `stop()` writes only what came
/// since. A kill during a write can leave a file cut short; the journal is complete, and
/// `msprobe recover` rebuilds the files from it.
///
/// A write that fails leaves the file holding its last valid text, on file systems that
/// overwrite in place (ext4, xfs, tmpfs...): a failed extension is cut back to the old length and
/// the old closing brackets, overwritten in blocks the file already has, are put back; a whole
/// rewrite first writes the part beyond the old length (cut off again if that fails) and only
/// then overwrites the old text. Neither costs a system call while writes succeed, except a
/// whole rewrite that grows (two writes instead of one). Reserving the space first
/// (`fallocate`) would cost a call per write, needs `unsafe` or another crate, and guarantees
/// no more: it works on the same file systems.
pub(super) struct JsonFiles {
    /// In [`JsonFile::ALL`] order, as the arrays below.
    files: [File; 3],
    /// Bytes in each file now.
    lens: [u64; 3],
    /// Per file: the entries of its map on disk, and where its closing brackets start; None
    /// until its first whole write (files found on disk, of a step re-opened, are rewritten
    /// first), and when a failed write could not be undone.
    written: [Option<(usize, u64)>; 3],
}

/// The closing brackets (and dump.json's tail) after a map of `entries` entries.
fn closing(file: JsonFile, entries: usize) -> String {
    let mut out = String::with_capacity(8);
    write_close(&mut out, entries, file.depth());
    out.push_str(file.tail());
    out
}

impl JsonFiles {
    /// Creates the files of `dir` with the texts of `state` (msprobe's skeleton files at
    /// `start()`), or opens them as they are when they exist (a closed step re-opened). On an
    /// error the files this call created are removed again: never an empty or cut-short file.
    pub(super) fn open(dir: &Path, state: &DirState) -> std::io::Result<JsonFiles> {
        let mut files = Vec::with_capacity(3);
        let mut created = Vec::new();
        let mut lens = [0u64; 3];
        let mut written = [None; 3];
        for file in JsonFile::ALL {
            let i = file.index();
            let path = dir.join(file.name());
            let res = match fsutil::create_new(&path) {
                Ok(mut f) => {
                    created.push(path.clone());
                    let text = state.text(file);
                    f.write_all(text.as_bytes()).map(|()| {
                        lens[i] = text.len() as u64;
                        let n = state.map(file).len();
                        written[i] = Some((n, lens[i] - file.closing_len(n)));
                        f
                    })
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => fsutil::open_existing(&path).and_then(|f| {
                    lens[i] = f.metadata()?.len();
                    Ok(f)
                }),
                Err(e) => Err(e),
            };
            match res {
                Ok(f) => files.push(f),
                Err(e) => {
                    for p in created {
                        let _ = std::fs::remove_file(p);
                    }
                    return Err(e);
                }
            }
        }
        let files: [File; 3] = files.try_into().expect("three files");
        Ok(JsonFiles { files, lens, written })
    }

    /// Whether `file` on disk holds what `state` holds.
    pub(super) fn is_current(&self, file: JsonFile, state: &DirState) -> bool {
        let i = file.index();
        matches!(self.written[i], Some((n, _)) if n == state.map(file).len() && !state.replaced[i])
    }

    /// Brings the files up to `state`: each file that changed is extended with its new
    /// entries, or rewritten whole when an entry already written changed. With `whole` false
    /// such files are left for a later write (the writer's idle refreshes only extend, so a
    /// step with many merged records is not rewritten again and again); returns whether every
    /// file is current. The first failing write ends the call: that file is left as it was (see
    /// [`JsonFiles`]), the files after it are not written.
    pub(super) fn write(&mut self, state: &mut DirState, whole: bool) -> std::io::Result<bool> {
        let mut current = true;
        for file in JsonFile::ALL {
            let i = file.index();
            let map = state.map(file);
            let n = map.len();
            let (done, at) = match self.written[i] {
                Some(w) => w,
                // Not known to be valid (found on disk, or a failed write not undone).
                None if whole => (usize::MAX, 0),
                None => {
                    current = false;
                    continue;
                }
            };
            let replaced = state.replaced[i] || done > n;
            if done == n && !replaced {
                continue;
            }
            if !replaced {
                let mut out = String::with_capacity(
                    map.iter().skip(done).map(|(k, v)| k.len() + v.len() + 8).sum::<usize>() + 16,
                );
                write_entries(&mut out, map, done, file.depth());
                write_close(&mut out, n, file.depth());
                out.push_str(file.tail());
                if let Err(e) = self.files[i].write_all_at(out.as_bytes(), at) {
                    self.undo_extension(file, done, at);
                    return Err(e);
                }
                self.lens[i] = at + out.len() as u64;
            } else if whole {
                self.rewrite(file, state.text(file).as_bytes())?;
                state.replaced[i] = false;
            } else {
                current = false;
                continue;
            }
            self.written[i] = Some((n, self.lens[i] - file.closing_len(n)));
        }
        Ok(current)
    }

    /// After a failed extension of `file` (its `done` entries' closing brackets at `at`): the
    /// file is cut back to its old length and the old closing brackets are put back, in bytes
    /// the file already had. If that fails too, the file is marked unknown (rewritten whole next
    /// time).
    fn undo_extension(&mut self, file: JsonFile, done: usize, at: u64) {
        let i = file.index();
        let f = &self.files[i];
        let undone = f.set_len(self.lens[i]).and_then(|()| f.write_all_at(closing(file, done).as_bytes(), at));
        if undone.is_err() {
            self.unknown(i);
        }
    }

    /// Rewrites `file` whole with `text`: the part beyond the old length first (cut off again if
    /// that fails, leaving the old text), then the old length's worth over the old text.
    fn rewrite(&mut self, file: JsonFile, text: &[u8]) -> std::io::Result<()> {
        let i = file.index();
        let (f, old, len) = (&self.files[i], self.lens[i], text.len() as u64);
        if len > old {
            if let Err(e) = f.write_all_at(&text[old as usize..], old) {
                if f.set_len(old).is_err() {
                    self.unknown(i);
                }
                return Err(e);
            }
        }
        let res = f.write_all_at(&text[..len.min(old) as usize], 0).and_then(|()| match len < old {
            true => f.set_len(len),
            false => Ok(()),
        });
        match res {
            Ok(()) => {
                self.lens[i] = len;
                Ok(())
            }
            Err(e) => {
                self.unknown(i);
                Err(e)
            }
        }
    }

    /// File `i` is not known to hold a valid text: rewritten whole next time, over its length now.
    fn unknown(&mut self, i: usize) {
        self.written[i] = None;
        self.lens[i] = self.files[i].metadata().map(|m| m.len()).unwrap_or(u64::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::super::dir_state::parent_text;
    use super::*;
    use crate::header::Header;
    use crate::json::{self, Json};

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
            for file in JsonFile::ALL {
                let i = file.index();
                if current || !st.replaced[i] {
                    assert_eq!(read(file.name()), texts[i], "round {round}: {}", file.name());
                }
            }
        }
        assert!(extended > 20 && deferred > 5, "both paths ran ({extended} extending writes, {deferred} deferred)");
    }

    fn read3(dir: &Path) -> [Vec<u8>; 3] {
        JsonFile::ALL.map(|f| std::fs::read(dir.join(f.name())).unwrap())
    }

    /// On a full disk (a real tmpfs), a write that does not fit leaves every file exactly as it
    /// was: an extension (cut back, closing brackets restored) and a whole rewrite (grown first)
    /// alike; once there is room again the files get everything.
    #[test]
    fn a_write_that_does_not_fit_leaves_each_file_as_it_was() {
        let Some(fs) = crate::fsutil::small_fs::SmallFs::mount("256k") else { return };
        let dir = fs.path().join("rank");
        std::fs::create_dir(&dir).unwrap();
        let header = Header { task: "statistics".into(), level: "L1".into(), dump_data_dir: None };
        let mut st = DirState { header: Some(header), ..Default::default() };
        let mut files = JsonFiles::open(&dir, &st).unwrap();
        let body = |i: usize| {
            json::parse(&format!(
                r#"{{"input_args": [{{"type": "int", "value": {i}}}], "pad": "{}"}}"#,
                "p".repeat(900)
            ))
            .unwrap()
        };
        let add = |st: &mut DirState, i: usize| {
            let frames = [format!("File f.py, line {i}")];
            st.add(&format!("Torch.add.{i}.forward"), &body(i), Some(&frames), Some(&Some(format!("Module.m{i}"))));
        };
        (0..5).for_each(|i| add(&mut st, i));
        assert!(files.write(&mut st, true).unwrap());
        let before = read3(&dir);
        assert_eq!(before, st.texts().map(String::into_bytes));
        let filler = fs.fill();

        (5..60).for_each(|i| add(&mut st, i));
        let e = files.write(&mut st, true).unwrap_err();
        assert!(crate::fsutil::is_out_of_space(&e), "{e}");
        assert_eq!(read3(&dir), before, "a failed extension leaves the files as they were");
        assert!(!files.is_current(JsonFile::Dump, &st));
        let e = files.write(&mut st, false).unwrap_err();
        assert!(crate::fsutil::is_out_of_space(&e), "{e}");
        assert_eq!(read3(&dir), before, "an idle refresh that fails too");

        // A merged record: dump.json is rewritten whole.
        st.add("Torch.add.0.forward", &json::parse(r#"{"output": []}"#).unwrap(), None, None);
        assert!(st.replaced[JsonFile::Dump.index()]);
        assert!(files.write(&mut st, true).is_err());
        assert_eq!(read3(&dir), before, "a failed whole rewrite leaves the files as they were");

        std::fs::remove_file(filler).unwrap();
        assert!(files.write(&mut st, true).unwrap());
        assert_eq!(read3(&dir), st.texts().map(String::into_bytes));
        assert!(files.is_current(JsonFile::Dump, &st));
    }

    /// The skeleton files that do not fit are not left behind (never a 0-byte JSON file).
    #[test]
    fn files_that_cannot_be_created_whole_are_not_left() {
        let Some(fs) = crate::fsutil::small_fs::SmallFs::mount("64k") else { return };
        let dir = fs.path().join("rank");
        std::fs::create_dir(&dir).unwrap();
        fs.fill();
        let header = Header { task: "tensor".into(), level: "L1".into(), dump_data_dir: Some("x".into()) };
        let st = DirState { header: Some(header), ..Default::default() };
        let e = JsonFiles::open(&dir, &st).err().expect("the skeleton does not fit");
        assert!(crate::fsutil::is_out_of_space(&e), "{e}");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    }
}
