//! A full disk (a real tmpfs, mounted when root; the tests skip, saying so, otherwise): the JSON
//! files stay valid, no empty or cut-short tensor file is left, capture stops with one message
//! naming the dump path and the OS error, and the run summary counts exactly what was lost.
//!
//! Each scenario sends records until capture turns off (or a bound), then finishes; what is on
//! disk is compared with what was sent.

use msprobe_core::config::{Config, Task};
use msprobe_core::dtype::DType;
use msprobe_core::json::{self, Json};
use msprobe_core::record::TensorRef;
use msprobe_core::recorder::{Recorder, Summary};
use msprobe_core::tensorfile::read_pt_storage;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Bound on a scenario (each takes well under a second).
const LIMIT: Duration = Duration::from_secs(60);

/// A tmpfs of the given size on a temporary directory, unmounted when dropped.
struct SmallFs(tempfile::TempDir);

impl SmallFs {
    fn mount(size: &str) -> Option<SmallFs> {
        use std::os::unix::fs::MetadataExt;
        if std::fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(1) != 0 {
            eprintln!("skipped: mounting a small tmpfs needs root");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let opts = format!("size={size}");
        let st = Command::new("mount").args(["-t", "tmpfs", "-o", &opts, "tmpfs"]).arg(dir.path()).status();
        assert!(st.is_ok_and(|s| s.success()), "mount -t tmpfs failed as root");
        Some(SmallFs(dir))
    }

    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.path()).stderr(Stdio::null()).status();
    }
}

/// The warning and error lines logged (the tests run one at a time, see [`ONE_AT_A_TIME`]).
static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// Held by each test: the log is the process's.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, m: &log::Metadata) -> bool {
        m.level() <= log::Level::Warn
    }
    fn log(&self, r: &log::Record) {
        if self.enabled(r.metadata()) {
            LINES.lock().unwrap().push(format!("[{}] {}", r.level(), r.args()));
        }
    }
    fn flush(&self) {}
}

/// One record's tensor: 16 KiB of f32 that differ per record.
fn tensor(i: usize) -> Vec<u8> {
    (0..4096).flat_map(|k| (i as f32 * 1000.0 + k as f32).to_le_bytes()).collect()
}

/// Sends up to `max` records of one tensor each (in 3 steps, a stop and a step end between),
/// until capture turns off; returns the names of the records sent, and the summary.
fn run(dump: &Path, task: Task, max: usize) -> (Vec<String>, Summary) {
    let _ = log::set_logger(&Capture).map(|()| log::set_max_level(log::LevelFilter::Warn));
    LINES.lock().unwrap().clear();
    let rec = Recorder::new(Config { task, dump_path: dump.to_path_buf(), ..Config::default() });
    let mut sent = Vec::new();
    let t0 = Instant::now();
    'steps: for step in 0..3 {
        rec.start();
        for i in 0..max / 3 {
            assert!(t0.elapsed() < LIMIT, "still recording after {LIMIT:?}");
            // Fixed-width names: every tensor file has the same size.
            let name = format!("Torch.add.{i:04}.forward");
            let Some(mut b) = rec.begin(&name) else { break 'steps };
            b.section("input_args").unwrap();
            let data = tensor(sent.len());
            let t = TensorRef { dtype: DType::F32, shape: &[4096], data: &data, requires_grad: None, type_name: None };
            b.add_tensor(None, &t, rec.budget()).unwrap();
            rec.end(b);
            sent.push(format!("step{step}/{name}"));
        }
        rec.stop(true);
        rec.step();
    }
    let s = rec.finish().unwrap();
    (sent, s)
}

/// The records of each dump.json under `dump` (all must parse), as `step{N}/{name}`, and every
/// tensor file found, with every other JSON file parsed too.
fn read_dump(dump: &Path) -> (Vec<(String, Json)>, Vec<PathBuf>) {
    let (mut records, mut files) = (Vec::new(), Vec::new());
    let mut steps: Vec<_> =
        std::fs::read_dir(dump).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    steps.sort();
    for step in steps {
        let rank = step.join("rank");
        for f in ["dump.json", "stack.json", "construct.json"] {
            let text = std::fs::read_to_string(rank.join(f)).unwrap_or_else(|e| panic!("{}/{f}: {e}", rank.display()));
            let v = json::parse(&text).unwrap_or_else(|e| panic!("{}/{f} is not valid JSON: {e:?}", rank.display()));
            if f == "dump.json" {
                let Some(Json::Object(data)) = v.get("data") else { panic!("no data in {}", rank.display()) };
                let s = step.file_name().unwrap().to_string_lossy().to_string();
                records.extend(data.iter().map(|(k, v)| (format!("{s}/{k}"), v.clone())));
            }
        }
        if let Ok(rd) = std::fs::read_dir(rank.join("dump_tensor_data")) {
            files.extend(rd.map(|e| e.unwrap().path()));
        }
    }
    (records, files)
}

/// Checks a run into a full disk: JSON files valid, no empty or cut tensor file, one message,
/// and a summary that adds up to what was sent and matches what is on disk.
fn check(dump: &Path, task: Task, sent: &[String], s: &Summary) {
    eprintln!("{}: {} records sent\n{s}", dump.display(), sent.len());
    let (records, files) = read_dump(dump);
    let names: Vec<&str> = records.iter().map(|(n, _)| n.as_str()).collect();
    assert!(sent.len() < 600, "capture stopped ({} records sent)", sent.len());
    assert_eq!(names, sent[..names.len()], "dump.json holds the first records sent, in order");
    assert_eq!(s.records as usize, records.len(), "{s:?}");
    assert_eq!((s.records + s.dropped) as usize, sent.len(), "records written + dropped = sent: {s:?}");
    assert_eq!(s.tensors as usize, sent.len());

    let mut on_disk = 0u64;
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        assert!(!bytes.is_empty(), "empty tensor file {}", f.display());
        let storage = read_pt_storage(&bytes).unwrap_or_else(|| panic!("cut tensor file {}", f.display()));
        // Its record: dump.json names it, and the bytes are the tensor sent.
        let fname = f.file_name().unwrap().to_string_lossy().to_string();
        let step = f.ancestors().nth(3).unwrap().file_name().unwrap().to_string_lossy().to_string();
        let rec = format!("{step}/{}", fname.split(".input").next().unwrap());
        let i = sent.iter().position(|n| *n == rec).expect("a record that was sent");
        assert_eq!(storage, tensor(i), "{}", f.display());
        on_disk += bytes.len() as u64;
    }
    assert_eq!((s.files as usize, s.bytes), (files.len(), on_disk), "{s:?}");
    if task == Task::Tensor {
        assert_eq!(s.files + s.files_lost, sent.len() as u64, "tensor files written + lost = sent: {s:?}");
        let size = on_disk / files.len().max(1) as u64;
        assert!(files.is_empty() || s.bytes_lost == s.files_lost * size, "bytes lost: {s:?}");
        // Records whose file was not written keep their entry, naming the missing file.
        let named = records.len();
        assert!(named >= files.len() && (named - files.len()) as u64 <= s.files_lost, "{s:?}");
    } else {
        assert_eq!((s.files, s.files_lost, s.bytes_lost), (0, 0, 0));
    }

    let lines = LINES.lock().unwrap().clone();
    assert_eq!(lines.len(), 1, "one message: {lines:#?}");
    let expected = format!("[ERROR] cannot write to the dump path {} (", dump.display());
    assert!(
        lines[0].starts_with(&expected) && lines[0].contains("No space left on device (os error 28)"),
        "{}",
        lines[0]
    );
    let leftovers: Vec<_> = std::fs::read_dir(dump)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn tensor_files_fill_the_disk() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(fs) = SmallFs::mount("1m") else { return };
    let dump = fs.path().join("dump");
    let (sent, s) = run(&dump, Task::Tensor, 600);
    check(&dump, Task::Tensor, &sent, &s);
    assert!(s.files > 0 && s.files_lost > 0, "{s:?}");
}

#[test]
fn json_files_fill_the_disk() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(fs) = SmallFs::mount("96k") else { return };
    let dump = fs.path().join("dump");
    let (sent, s) = run(&dump, Task::Statistics, 600);
    check(&dump, Task::Statistics, &sent, &s);
    assert!(s.records > 0, "{s:?}");
}

#[test]
fn a_disk_full_from_the_start_leaves_no_file() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(fs) = SmallFs::mount("64k") else { return };
    let dump = fs.path().join("dump");
    std::fs::create_dir(&dump).unwrap();
    let filler = std::fs::write(fs.path().join("filler"), vec![0u8; 1 << 20]);
    assert!(filler.is_err(), "the disk is full");
    let (sent, s) = run(&dump, Task::Tensor, 600);
    check(&dump, Task::Tensor, &sent, &s);
    assert_eq!(s.records, 0, "{s:?}");
    let left: Vec<_> = walk(&dump);
    assert!(left.is_empty(), "nothing is left in the dump path: {left:?}");
}

fn walk(d: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(d).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}
