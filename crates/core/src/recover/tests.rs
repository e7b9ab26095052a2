use super::*;
use crate::budget::Budget;
use crate::journal::{dir_text, entry, file_id, with_identity, PREFIX};
use crate::writer::{Finished, Writer};
use std::collections::BTreeMap;
use std::os::unix::fs::symlink;

fn h(task: &str) -> Header {
    Header { task: task.into(), level: "L1".into(), dump_data_dir: None }
}

/// The identity of a run that is over (no process start recorded: never "still running").
fn dead(root: &Path) -> Identity {
    Identity { proc_start: None, ..Identity::of_this_process(root, &h("statistics")) }
}

fn read_json(p: &Path) -> Json {
    json::parse(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn names(dir: &Path) -> Vec<String> {
    let Some(Json::Object(data)) = read_json(&dir.join("dump.json")).get("data").cloned() else { panic!() };
    data.iter().map(|(k, _)| k.to_string()).collect()
}

fn body(i: usize) -> String {
    pretty(&json::parse(&format!(r#"{{"input_args": [{{"type": "int", "value": {i}}}]}}"#)).unwrap(), RECORD_DEPTH)
}

/// A journal of `id` holding `entries` (kind, dir, name, text).
fn journal_of(id: &Identity, entries: &[(char, &str, &str, String)]) -> Vec<u8> {
    let mut b = id.header_block();
    for (k, d, n, t) in entries {
        entry(&mut b, *k, d, n, t);
    }
    b
}

#[test]
fn truncated_tensor_files_are_detected() {
    use crate::dtype::DType;
    use crate::tensorfile::{encode_npy, encode_pt};
    let whole =
        |n: &str, b: &[u8]| complete(n, &b[..b.len().min(1 << 16)], &b[b.len().saturating_sub(22)..], b.len() as u64);
    let npy = encode_npy(DType::F32, &[3, 2], &[0u8; 24]);
    assert!(whole("a.npy", &npy));
    assert!(!whole("a.npy", &npy[..npy.len() - 1]));
    let pt = encode_pt("a", DType::F16, &[4], &[0u8; 8]).unwrap();
    assert!(whole("a.pt", &pt));
    assert!(!whole("a.pt", &pt[..pt.len() - 3]));
}

/// One journal per process and dump path: what it holds mid-step rebuilds that step's JSON
/// files (also in a copy of the dump, since it names directories relative to the dump path),
/// and it is gone after a clean exit.
#[test]
fn the_journal_recovers_the_open_step_also_in_a_copy() {
    let root = tempfile::tempdir().unwrap();
    let journal = root.path().join(format!("{PREFIX}{}", std::process::id()));
    let w = Writer::new(Budget::new(1 << 20, true));
    let header = Header { task: "statistics".into(), level: "L0".into(), dump_data_dir: None };
    let send = |dir: &Path, name: &str| {
        let body = json::parse(r#"{"input_args": [], "output": []}"#).unwrap();
        let (stack, parent) = (Some(vec!["File a.py, line 1, in f, \n f()".to_string()]), Some(None));
        w.record(dir.to_path_buf(), Finished { name: name.into(), body, files: vec![], stack, parent, reserved: 0 });
    };
    let (s0, s1) = (root.path().join("step0/rank0"), root.path().join("step1/rank0"));
    w.open(s0.clone(), header.clone());
    send(&s0, "Module.a.A.forward.0");
    w.write_now(&s0, true);
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
    let bytes = with_identity(&std::fs::read(&journal).unwrap(), |id| id.proc_start = None);
    std::fs::write(copy.path().join(journal.file_name().unwrap()), bytes).unwrap();
    // The copy holds what the writer's idle refreshes had written: some first records, or none,
    // or a file cut short when the copy read it during a refresh, as a kill can leave it.
    let text = std::fs::read_to_string(copy.path().join("step1/rank0/dump.json")).unwrap();
    if let Ok(Some(Json::Object(data))) = json::parse(&text).map(|j| j.get("data").cloned()) {
        let early: Vec<String> = data.iter().map(|(k, _)| k.to_string()).collect();
        let early: Vec<&str> = early.iter().map(String::as_str).collect();
        assert!(["Module.a.A.forward.1", "Module.b.B.forward.0"].starts_with(&early), "{early:?}");
    }
    let before_s0 = std::fs::read(copy.path().join("step0/rank0/dump.json")).unwrap();
    let r = recover_dir(copy.path()).unwrap();
    assert_eq!((r.journals, r.dirs, r.records, r.torn_lines, r.damaged, r.missing_files), (1, 1, 2, 0, 0, 0), "{r:?}");
    assert!(r.beside.is_empty(), "{r:?}");
    assert_eq!(names(&copy.path().join("step1/rank0")), ["Module.a.A.forward.1", "Module.b.B.forward.0"]);
    let c = read_json(&copy.path().join("step1/rank0/construct.json"));
    assert_eq!(c.get("Module.b.B.forward.0"), Some(&Json::Null));
    assert_eq!(read_json(&copy.path().join("step1/rank0/dump.json")).get("level").and_then(Json::as_str), Some("L0"));
    // The closed step is left as it was written; the replayed journal is gone.
    assert_eq!(std::fs::read(copy.path().join("step0/rank0/dump.json")).unwrap(), before_s0);
    assert!(!copy.path().join(journal.file_name().unwrap()).exists());
    w.shutdown();
    assert!(!journal.exists(), "the journal is removed at a clean exit");
    assert_eq!(read_json(&s1.join("dump.json")), read_json(&copy.path().join("step1/rank0/dump.json")));
}

/// A journal left by a killed run A is never replayed over a later run B's directory of the
/// same name: A's directory, moved aside by B (`rank.replaced-*`), is found by its inode and
/// completed there; B's files stay byte for byte. A second `recover` finds nothing.
#[test]
fn a_stale_journal_never_touches_a_later_runs_directory() {
    let root = tempfile::tempdir().unwrap();
    let a = root.path().join("step0/rank");
    std::fs::create_dir_all(&a).unwrap();
    let id = dead(root.path());
    let j = journal_of(
        &id,
        &[
            ('D', "step0/rank", "", dir_text(&h("statistics"), file_id(&a))),
            ('R', "step0/rank", "Torch.add.0.forward", body(0)),
            ('R', "step0/rank", "Torch.add.1.forward", body(1)),
        ],
    );
    std::fs::write(root.path().join(format!("{PREFIX}1")), j).unwrap();
    std::fs::write(a.join("dump.json"), b"{\"task\": ").unwrap(); // A was killed mid-write
                                                                  // B moves A's directory aside and finishes.
    let aside = root.path().join("step0/rank.replaced-1-1");
    std::fs::rename(&a, &aside).unwrap();
    std::fs::create_dir(&a).unwrap();
    let mut b = DirState::default();
    b.header = Some(h("statistics"));
    b.add_text("Torch.mul.0.forward", body(7));
    b.write_files(&a).unwrap();
    let before: Vec<_> = JsonFile::ALL.iter().map(|f| std::fs::read(a.join(f.name())).unwrap()).collect();
    let r = recover_dir(root.path()).unwrap();
    assert_eq!((r.dirs, r.records), (1, 2), "{r:?}");
    assert!(r.beside.is_empty());
    let after: Vec<_> = JsonFile::ALL.iter().map(|f| std::fs::read(a.join(f.name())).unwrap()).collect();
    assert_eq!(before, after, "the later run's files are untouched");
    assert_eq!(names(&aside), ["Torch.add.0.forward", "Torch.add.1.forward"]);
    let again = recover_dir(root.path()).unwrap();
    assert_eq!(again, Recovered::default(), "the replayed journal is gone");
}

/// Without a match by inode (the run's directory was deleted and another took its name), the
/// records go beside the other run's directory, never into it.
#[test]
fn records_of_a_directory_that_is_not_the_runs_go_beside_it() {
    let root = tempfile::tempdir().unwrap();
    let other = root.path().join("step0/rank");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("dump.json"), b"{}").unwrap();
    for ident in [Some((1u64, 2u64)), None] {
        let j = journal_of(
            &dead(root.path()),
            &[
                ('D', "step0/rank", "", dir_text(&h("statistics"), ident)),
                ('R', "step0/rank", "Torch.add.0.forward", body(0)),
            ],
        );
        std::fs::write(root.path().join(format!("{PREFIX}7")), j).unwrap();
        let r = recover_dir(root.path()).unwrap();
        assert_eq!(std::fs::read(other.join("dump.json")).unwrap(), b"{}");
        assert_eq!(r.beside.len(), 1, "{r:?}");
        assert_eq!(names(&r.beside[0]), ["Torch.add.0.forward"]);
        assert!(r.beside[0].file_name().unwrap().to_string_lossy().starts_with("rank.recovered-"));
    }
}

/// A kill at any point of a step directory's creation leaves a directory `recover` completes:
/// before the directory exists, when it is still empty, and when its JSON files are cut short.
#[test]
fn a_kill_during_step_directory_creation_is_recoverable() {
    for stage in 0..3 {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("step0/rank");
        let mut entries = vec![('D', "step0/rank", "", dir_text(&h("tensor"), None))];
        if stage > 0 {
            std::fs::create_dir_all(&dir).unwrap();
        }
        if stage > 1 {
            entries.push(('D', "step0/rank", "", dir_text(&h("tensor"), file_id(&dir))));
            std::fs::write(dir.join("dump.json"), b"").unwrap();
            std::fs::write(dir.join("stack.json"), b"{").unwrap();
        }
        std::fs::write(root.path().join(format!("{PREFIX}3")), journal_of(&dead(root.path()), &entries)).unwrap();
        let r = recover_dir(root.path()).unwrap();
        assert_eq!((r.dirs, r.records), (1, 0), "stage {stage}: {r:?}");
        let d = read_json(&dir.join("dump.json"));
        assert_eq!(d.get("task").and_then(Json::as_str), Some("tensor"), "stage {stage}");
        assert_eq!(d.get("data"), Some(&Json::Object(vec![])));
        for f in ["stack.json", "construct.json"] {
            assert_eq!(read_json(&dir.join(f)), Json::Object(vec![]), "stage {stage}: {f}");
        }
    }
}

/// No symbolic link is followed: a linked step directory (or rank directory, or tensor
/// directory, or tensor file) is never written through; a tensor file name from the journal
/// that is not one plain component is never looked up; only the run's own temporaries go.
#[test]
fn links_traversing_names_and_others_temporaries_are_left_alone() {
    let base = tempfile::tempdir().unwrap();
    let outside = base.path().join("outside");
    std::fs::create_dir_all(outside.join("rank")).unwrap();
    std::fs::write(outside.join("victim.pt"), b"cut short").unwrap();
    std::fs::write(outside.join("rank/dump.json"), b"{}").unwrap();
    let root = base.path().join("dump");
    std::fs::create_dir_all(root.join("step2")).unwrap();
    symlink(&outside, root.join("step1")).unwrap();
    symlink(outside.join("rank"), root.join("step2/rank")).unwrap();
    let own = root.join("step3/rank");
    std::fs::create_dir_all(own.join(TENSOR_DIR)).unwrap();
    symlink(outside.join("victim.pt"), own.join(TENSOR_DIR).join("Torch.add.0.forward.input.0.pt")).unwrap();
    let id = dead(&root);
    for (name, mine) in [(format!(".dump.json.tmp{}", id.pid), true), (".dump.json.tmp1".to_string(), false)] {
        std::fs::write(own.join(&name), b"x").unwrap();
        let _ = mine;
    }
    std::fs::create_dir_all(root.join("other")).unwrap();
    std::fs::write(root.join("other/.dump.json.tmp99"), b"x").unwrap();
    let leaf = |n: &str| {
        format!(
            r#"{{"input_args": [{{"type": "torch.Tensor", "data_name": {}}}]}}"#,
            Json::str(n.to_string()).to_compact()
        )
    };
    let j = journal_of(
        &id,
        &[
            ('R', "step1/rank", "Torch.a.0.forward", body(0)),
            ('R', "step2/rank", "Torch.a.0.forward", body(0)),
            ('D', "step3/rank", "", dir_text(&h("tensor"), file_id(&own))),
            ('R', "step3/rank", "Torch.add.0.forward", leaf("Torch.add.0.forward.input.0.pt")),
            ('R', "step3/rank", "Torch.add.1.forward", leaf("../../../outside/victim.pt")),
            ('R', "step3/rank", "Torch.add.2.forward", leaf("/etc/passwd")),
            ('R', "../outside", "Torch.x.0.forward", body(0)),
        ],
    );
    std::fs::write(root.join(format!("{PREFIX}5")), j).unwrap();
    let r = recover_dir(&root).unwrap();
    assert_eq!(std::fs::read(outside.join("victim.pt")).unwrap(), b"cut short");
    assert_eq!(std::fs::read(outside.join("rank/dump.json")).unwrap(), b"{}");
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 2, "nothing created outside the dump");
    assert!(std::fs::symlink_metadata(root.join("step1")).unwrap().file_type().is_symlink());
    assert_eq!((r.dirs, r.records, r.damaged, r.missing_files), (3, 5, 1, 3), "{r:?}");
    assert_eq!(r.beside.len(), 2, "{r:?}");
    assert!(root.join("step1.recovered-".to_string() + &id.pid.to_string()).join("rank/dump.json").exists());
    assert!(!own.join(format!(".dump.json.tmp{}", id.pid)).exists(), "the run's own temporary is removed");
    assert!(own.join(".dump.json.tmp1").exists(), "another process's temporary stays");
    assert!(root.join("other/.dump.json.tmp99").exists());
    assert_eq!(names(&own), ["Torch.add.0.forward", "Torch.add.1.forward", "Torch.add.2.forward"]);
}

/// A journal entry whose bytes were changed is skipped and counted, never copied: the files
/// stay valid JSON. A journal of a process that still runs is left alone.
#[test]
fn damaged_entries_are_skipped_and_running_processes_left_alone() {
    let root = tempfile::tempdir().unwrap();
    let mut j = journal_of(
        &dead(root.path()),
        &(0..3).map(|i| ('R', "step0/rank", "Torch.add.0.forward", body(i))).collect::<Vec<_>>(),
    );
    let at = j.len() - body(2).len() + 3;
    j[at] = b'}';
    std::fs::write(root.path().join(format!("{PREFIX}1")), &j).unwrap();
    let live = journal_of(
        &Identity::of_this_process(root.path(), &h("statistics")),
        &[('R', "step9/rank", "Torch.add.0.forward", body(0))],
    );
    std::fs::write(root.path().join(format!("{PREFIX}2")), live).unwrap();
    let r = recover_dir(root.path()).unwrap();
    assert_eq!((r.journals, r.running, r.records, r.torn_lines), (1, 1, 2, 1), "{r:?}");
    assert!(!root.path().join("step9").exists());
    assert!(root.path().join(format!("{PREFIX}2")).exists());
    let d = read_json(&root.path().join("step0/rank/dump.json"));
    assert_eq!(d.get("data").and_then(|d| d.get("Torch.add.0.forward")), json::parse(&body(1)).ok().as_ref());
}

// ---- the fuzz test ------------------------------------------------------------------------

/// Every file under `dir` (links not followed) with its bytes and modification time.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, i64, i64)> {
    let mut out = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let m = std::fs::symlink_metadata(e.path()).unwrap();
            if m.file_type().is_dir() {
                pending.push(e.path());
            }
            let bytes = if m.file_type().is_file() {
                std::fs::read(e.path()).unwrap()
            } else if m.file_type().is_symlink() {
                std::fs::read_link(e.path()).unwrap().to_string_lossy().into_owned().into_bytes()
            } else {
                vec![]
            };
            out.insert(e.path(), (bytes, m.mtime(), m.mtime_nsec()));
        }
    }
    out
}

/// Every `.json` file under `dir` (links not followed) that is new or changed since `before`
/// parses.
fn written_json_valid(dir: &Path, before: &BTreeMap<PathBuf, (Vec<u8>, i64, i64)>) -> Result<usize, String> {
    let mut n = 0;
    for (p, snap) in snapshot(dir) {
        let is_file = std::fs::symlink_metadata(&p).unwrap().file_type().is_file();
        if is_file && p.extension().is_some_and(|e| e == "json") && before.get(&p) != Some(&snap) {
            let text = String::from_utf8(snap.0).map_err(|_| format!("{} is not UTF-8", p.display()))?;
            json::parse(&text).map_err(|e| format!("{}: {e}\n{text}", p.display()))?;
            n += 1;
        }
    }
    Ok(n)
}

const DIRS: &[&str] = &[
    "step0/rank",
    "step0/rank",
    "step1/rank",
    "step2/rank",
    "step3/rank",
    "step4/rank7",
    "../sentinel",
    "step0/../../sentinel",
    "/tmp",
    "step0/rank/../../../sentinel",
    "step1/rank/x",
    "",
];
const DATA_NAMES: &[&str] = &[
    "Torch.add.0.forward.input.0.pt",
    "Torch.add.0.forward.output.0.pt",
    "Torch.cut.0.forward.input.0.npy",
    "../../../sentinel/victim.pt",
    "../../sentinel/victim.pt",
    "../../../../sentinel/victim.pt",
    "/etc/passwd",
    "..",
    ".dump.json.tmp1",
    "dump.json",
    "a\nb.pt",
];

/// A random entry text: mostly what the kind holds, sometimes not (with valid CRC).
fn random_text(rng: &mut fastrand::Rng) -> String {
    let leaf = |rng: &mut fastrand::Rng| {
        format!(
            r#"{{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [{}], "Max": {}, "data_name": {}}}"#,
            rng.u32(0..9),
            ["1.5", "NaN", "-Infinity", "1e308", "0"][rng.usize(0..5)],
            Json::str(DATA_NAMES[rng.usize(0..DATA_NAMES.len())].to_string()).to_compact()
        )
    };
    match rng.u32(0..12) {
        0 => "null".into(),
        1 => "\"Module.a.A.forward.0\"".into(),
        2 => r#"["File a.py, line 1, in f, \n f()"]"#.into(),
        3 => "{\"a\": ".into(),
        4 => "[".repeat(rng.usize(1..300)),
        5 => String::from_utf8_lossy(&(0..rng.usize(0..40)).map(|_| rng.u8(..)).collect::<Vec<_>>()).into_owned(),
        6 => "{\"x\": 1} trailing".into(),
        7 => "\"\\ud800\"".into(),
        _ => format!(r#"{{"input_args": [{}, {}], "output": [{}]}}"#, leaf(rng), leaf(rng), leaf(rng)),
    }
}

/// Builds the scene around a dump (a sentinel directory beside it, a finished later run's
/// directory, the killed run's directory moved aside, links out of the dump) and returns
/// (sentinel, dump, killed run's directory, later run's directory).
fn scene(base: &Path) -> (PathBuf, PathBuf, PathBuf, PathBuf) {
    use crate::dtype::DType;
    let sentinel = base.join("sentinel");
    std::fs::create_dir_all(sentinel.join("rank")).unwrap();
    std::fs::write(sentinel.join("victim.pt"), b"PK cut short").unwrap();
    std::fs::write(sentinel.join("dump.json"), b"{\"sentinel\": true}").unwrap();
    std::fs::write(sentinel.join(".dump.json.tmp1"), b"x").unwrap();
    std::fs::write(sentinel.join("rank/dump.json"), b"{}").unwrap();
    let dump = base.join("dump");
    let killed = dump.join("step0/rank.replaced-1-1");
    let later = dump.join("step0/rank");
    std::fs::create_dir_all(killed.join(TENSOR_DIR)).unwrap();
    std::fs::create_dir_all(&later).unwrap();
    let pt = crate::tensorfile::encode_pt("x", DType::F32, &[2], &[0u8; 8]).unwrap();
    std::fs::write(killed.join(TENSOR_DIR).join("Torch.add.0.forward.input.0.pt"), &pt).unwrap();
    std::fs::write(killed.join(TENSOR_DIR).join("Torch.add.0.forward.output.0.pt"), &pt[..pt.len() - 5]).unwrap();
    std::fs::write(killed.join("dump.json"), b"{\"task\": \"stat").unwrap();
    let mut st = DirState::default();
    st.header = Some(h("tensor"));
    st.add_text("Torch.mul.0.forward", body(9));
    st.write_files(&later).unwrap();
    std::fs::write(later.join(".dump.json.tmp1"), b"not ours").unwrap();
    symlink("../sentinel", dump.join("step1")).unwrap();
    std::fs::create_dir_all(dump.join("step2")).unwrap();
    symlink("../../sentinel/rank", dump.join("step2/rank")).unwrap();
    (sentinel, dump, killed, later)
}

/// The killed run's journal as the recorder would have left it.
fn template(dump: &Path, killed: &Path, rng: &mut fastrand::Rng) -> Vec<u8> {
    let id = dead(dump);
    let mut entries: Vec<(char, &str, String, String)> = vec![
        ('D', "step0/rank", String::new(), dir_text(&h("tensor"), None)),
        ('D', "step0/rank", String::new(), dir_text(&h("tensor"), file_id(killed))),
    ];
    for i in 0..6 {
        let name = format!("Torch.add.{i}.forward");
        entries.push(('R', "step0/rank", name.clone(), canonical('R', &random_text(rng)).unwrap_or_else(|| body(i))));
        entries.push(('S', "step0/rank", name.clone(), r#"["File a.py, line 1, in f, \n f()"]"#.into()));
        entries.push(('C', "step0/rank", name, "null".into()));
    }
    for d in ["step1/rank", "step2/rank", "step3/rank"] {
        entries.push(('D', d, String::new(), dir_text(&h("tensor"), Some((rng.u64(1..1 << 40), rng.u64(1..1 << 40))))));
        entries.push(('R', d, "Torch.sub.0.forward".into(), body(3)));
    }
    let mut b = id.header_block();
    for (k, d, n, t) in &entries {
        entry(&mut b, *k, d, n, t);
    }
    b
}

/// One mutation of a journal's bytes.
fn mutate(b: &mut Vec<u8>, rng: &mut fastrand::Rng, dump: &Path, forbidden: (u64, u64)) {
    match rng.u32(0..9) {
        0 if !b.is_empty() => {
            let i = rng.usize(0..b.len());
            b[i] ^= 1 << rng.u32(0..8);
        }
        1 if !b.is_empty() => b.truncate(rng.usize(0..b.len())),
        2 if !b.is_empty() => {
            let (i, j) = (rng.usize(0..b.len()), rng.usize(0..b.len()));
            let (i, j) = (i.min(j), i.max(j));
            let piece = b[i..j].to_vec();
            let at = rng.usize(0..=b.len());
            b.splice(at..at, piece);
        }
        3 if !b.is_empty() => {
            let (i, j) = (rng.usize(0..b.len()), rng.usize(0..b.len()));
            b.drain(i.min(j)..i.max(j));
        }
        4 => {
            let at = rng.usize(0..=b.len());
            let junk: Vec<u8> = (0..rng.usize(1..64)).map(|_| rng.u8(..)).collect();
            b.splice(at..at, junk);
        }
        5 => {
            // The identity: another dump path (moved), or a header that is not one.
            let moved = rng.bool();
            let end = b.iter().position(|&c| c == b'\n').map_or(0, |i| i + 1);
            let mut id = dead(dump);
            if moved {
                id.root = Some((1, 1));
            }
            let mut nb =
                if rng.u32(0..4) == 0 { b"msprobe-journal 2 {\"pid\": }\n".to_vec() } else { id.header_block() };
            nb.extend_from_slice(&b[end.min(b.len())..]);
            *b = nb;
        }
        _ => {
            // New entries with valid CRCs and hostile content.
            for _ in 0..rng.usize(1..6) {
                let kind = ['D', 'R', 'S', 'C', 'X', 'R', 'R'][rng.usize(0..7)];
                let dir = DIRS[rng.usize(0..DIRS.len())];
                let text = if kind == 'D' {
                    let mut fid = (rng.u64(1..1 << 40), rng.u64(1..1 << 40));
                    if fid == forbidden {
                        fid.1 += 1;
                    }
                    match rng.u32(0..3) {
                        0 => dir_text(&h("tensor"), None),
                        1 => dir_text(&h("statistics"), Some(fid)),
                        _ => random_text(rng),
                    }
                } else {
                    random_text(rng)
                };
                let name = ["Torch.add.0.forward", "", "Torch.\"q\".0.forward", "\u{0}\n"][rng.usize(0..4)];
                let mut e = Vec::new();
                entry(&mut e, kind, dir, name, &text);
                let at = rng.usize(0..=b.len());
                b.splice(at..at, e);
            }
        }
    }
}

/// 1,000 seeded mutated and generated journals: `recover` never panics, never writes invalid
/// JSON, never touches a file outside the dump nor the later run's directory inside it.
#[test]
fn fuzzed_journals_never_hurt() {
    let seeds = std::env::var("RECOVER_FUZZ_N").ok().and_then(|v| v.parse().ok()).unwrap_or(1000u64);
    let (mut recovered, mut damaged) = (0, 0);
    for seed in 0..seeds {
        let mut rng = fastrand::Rng::with_seed(0x5eed_0000 + seed);
        // On tmpfs when there is one: the test is file-system calls only.
        let shm = Path::new("/dev/shm");
        let base = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() }.unwrap();
        let (sentinel, dump, killed, later) = scene(base.path());
        let forbidden = file_id(&later).unwrap();
        let mut j = template(&dump, &killed, &mut rng);
        for _ in 0..rng.usize(1..5) {
            mutate(&mut j, &mut rng, &dump, forbidden);
        }
        std::fs::write(dump.join(format!("{PREFIX}{}", 4_000_000 + seed)), &j).unwrap();
        let (s0, l0, d0) = (snapshot(&sentinel), snapshot(&later), snapshot(&dump));
        let r = recover_dir(&dump);
        let ctx = format!("seed {seed}: {r:?}");
        assert_eq!(snapshot(&sentinel), s0, "{ctx}: the sentinel was touched");
        assert_eq!(snapshot(&later), l0, "{ctx}: the later run's directory was touched");
        assert!(std::fs::symlink_metadata(dump.join("step1")).unwrap().file_type().is_symlink(), "{ctx}");
        if let Err(e) = written_json_valid(&dump, &d0) {
            panic!("{ctx}: {e}");
        }
        let r = r.unwrap_or_else(|e| panic!("{ctx}: {e}"));
        recovered += r.records;
        damaged += r.damaged + r.torn_lines;
        // Nothing left to replay, or the same journal again does no harm.
        let d1 = snapshot(&dump);
        recover_dir(&dump).unwrap_or_else(|e| panic!("{ctx}: again: {e}"));
        assert_eq!(snapshot(&sentinel), s0, "{ctx}: again");
        written_json_valid(&dump, &d1).unwrap_or_else(|e| panic!("{ctx}: again: {e}"));
    }
    assert!(seeds < 100 || (recovered > 1000 && damaged > 300), "{recovered} records, {damaged} damaged");
}

/// Device statistics (issue #21): a record journaled in planned form at the launch (`P`) is
/// written only when its own record (`R`, from the completion thread) never came, in journal
/// order, and counted; a record that did end is written as it ended.
#[test]
fn planned_records_stand_in_only_for_records_that_never_ended() {
    let root = tempfile::tempdir().unwrap();
    let j = journal_of(
        &dead(root.path()),
        &[
            ('D', "step0/rank", "", dir_text(&h("statistics"), None)),
            ('P', "step0/rank", "Aclnn.Add.0.forward", body(10)),
            ('P', "step0/rank", "Aclnn.Mul.0.forward", body(20)),
            ('R', "step0/rank", "Aclnn.Add.0.forward", body(1)),
        ],
    );
    std::fs::write(root.path().join(format!("{PREFIX}7")), j).unwrap();
    let r = recover_dir(root.path()).unwrap();
    assert_eq!((r.records, r.planned_only), (2, 1), "{r:?}");
    let dir = root.path().join("step0/rank");
    assert_eq!(names(&dir), ["Aclnn.Add.0.forward", "Aclnn.Mul.0.forward"]);
    let data = read_json(&dir.join("dump.json"));
    let value = |n: &str| data.get("data").and_then(|d| d.get(n)).and_then(|r| r.get("input_args")).cloned();
    assert_eq!(value("Aclnn.Add.0.forward"), json::parse(&body(1)).unwrap().get("input_args").cloned());
    assert_eq!(value("Aclnn.Mul.0.forward"), json::parse(&body(20)).unwrap().get("input_args").cloned());
}
