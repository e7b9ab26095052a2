//! Recovery after a kill (`msprobe recover`): every journal found under a dump path is replayed
//! into its rank directories, whose dump.json, stack.json and construct.json are rebuilt whole
//! from it, and the tensor files its records name are checked (one cut short by the kill is
//! removed and counted, as is one that never reached disk). The journal format is in
//! [`crate::journal`].

use crate::fsutil;
use crate::header::Header;
use crate::journal;
use crate::json::{self, Json};
use crate::writer::{DirState, JsonFile, TENSOR_DIR};
use std::path::Path;

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
                // A JSON file's temporary left by the killed process (see `fsutil::Replacement`).
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
    let mut state = DirState::default();
    state.header = Some(header);
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

/// A temporary of a JSON file written through a rename (see `fsutil::Replacement`).
fn is_stale_temporary(name: &str) -> bool {
    JsonFile::ALL.iter().any(|f| name.starts_with(&format!(".{}{}", f.name(), fsutil::TMP_MARK)))
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
    use crate::budget::Budget;
    use crate::writer::{Finished, Writer};

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
            for f in JsonFile::ALL.map(JsonFile::name) {
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
}
