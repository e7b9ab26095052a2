//! The JSON files of an open directory, kept open from the start of the step and written in
//! place, as msprobe does, where a temporary and a rename would cost three more system calls per
//! file.

use super::dir_state::DirState;
use super::json_files::{write_close, write_entries, JsonFile};
use crate::fsutil;
use std::io::Write;
use std::path::Path;

/// The JSON files of an open directory, kept open from the start of the step and written in
/// place, as msprobe does. A file whose entries were only added to since its last write is
/// extended: the new entries and the closing brackets are written over the old closing brackets,
/// leaving exactly the bytes a whole rewrite would. So the writer thread can keep the files
/// current while it idles (`Worker::refresh`) and a waiting `stop()` writes only what came
/// since. A kill during a write can leave a file cut short; the journal is complete, and
/// `msprobe recover` rebuilds the files from it.
pub(super) struct JsonFiles {
    /// In [`JsonFile::ALL`] order, as the arrays below.
    files: [std::fs::File; 3],
    /// Bytes in each file now.
    lens: [u64; 3],
    /// Entries of each file's map on disk, and where its closing brackets start; None until
    /// the first whole write (files found on disk, of a step re-opened, are rewritten first).
    written: Option<[(usize, u64); 3]>,
}

impl JsonFiles {
    /// Creates the files of `dir` with the texts of `state` (msprobe's skeleton files at
    /// `start()`), or opens them as they are when they exist (a closed step re-opened).
    pub(super) fn open(dir: &Path, state: &DirState) -> std::io::Result<JsonFiles> {
        let mut files = Vec::with_capacity(3);
        let mut lens = [0u64; 3];
        let mut written = Some([(0usize, 0u64); 3]);
        for file in JsonFile::ALL {
            let i = file.index();
            let path = dir.join(file.name());
            let f = match fsutil::create_new(&path) {
                Ok(mut f) => {
                    let text = state.text(file);
                    f.write_all(text.as_bytes())?;
                    lens[i] = text.len() as u64;
                    let n = state.map(file).len();
                    if let Some(w) = written.as_mut() {
                        w[i] = (n, lens[i] - file.closing_len(n));
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
    pub(super) fn write(&mut self, state: &mut DirState, whole: bool) -> std::io::Result<bool> {
        use std::os::unix::fs::FileExt;
        // Until this write succeeds the files are in an unknown state: rewritten whole next time.
        let Some(mut written) = self.written.take().or(whole.then_some([(usize::MAX, 0); 3])) else {
            return Ok(false);
        };
        let mut current = true;
        for file in JsonFile::ALL {
            let i = file.index();
            let map = state.map(file);
            let depth = file.depth();
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
                out.push_str(file.tail());
                self.files[i].write_all_at(out.as_bytes(), at)?;
                self.lens[i] = at + out.len() as u64;
            } else if whole {
                let text = state.text(file);
                let len = text.len() as u64;
                self.files[i].write_all_at(text.as_bytes(), 0)?;
                if len < self.lens[i] {
                    self.files[i].set_len(len)?;
                }
                self.lens[i] = len;
                state.replaced[i] = false;
            } else {
                current = false;
                continue;
            }
            written[i] = (n, self.lens[i] - file.closing_len(n));
        }
        self.written = Some(written);
        Ok(current)
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
}
