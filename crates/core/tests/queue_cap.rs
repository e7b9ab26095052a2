//! The writer's byte budget (`queue_bytes`, `on_queue_full`) never hangs capture, never loses a
//! record in block mode, and drops whole records' tensor files (counted) in drop mode.
//!
//! Eight threads send records of 1×, 2× and 4× the cap (several tensors each, so a record's
//! tensors alone exceed the cap) mixed with small ones, at once. Each scenario runs under a
//! watchdog: a hang fails the test after [`LIMIT`] instead of hanging the suite. What is on disk
//! is compared with what was sent: dump.json's records and leaves, and each tensor file's bytes.

use msprobe_core::config::{Config, OnFull, Task};
use msprobe_core::dtype::DType;
use msprobe_core::json::{self, Json};
use msprobe_core::record::TensorRef;
use msprobe_core::recorder::{Recorder, Summary};
use msprobe_core::tensorfile::read_pt_storage;
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Bound on each scenario (they take well under a second when nothing hangs).
const LIMIT: Duration = Duration::from_secs(60);
const CAP: u64 = 256 << 10;
const THREADS: usize = 8;

/// Runs `f` on its own thread and returns its result, failing the test if it has not finished
/// within [`LIMIT`] (the hung thread is left behind; the test binary still exits).
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let t0 = Instant::now();
    let h = std::thread::spawn(f);
    while !h.is_finished() {
        assert!(t0.elapsed() < LIMIT, "{what}: still running after {LIMIT:?} (hung)");
        std::thread::sleep(Duration::from_millis(5));
    }
    h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))
}

/// One record as sent: its name and its tensors' f32 bytes (input_args..., then one output).
struct Sent {
    name: String,
    tensors: Vec<Vec<u8>>,
}

/// Tensor bytes that differ per thread, record and tensor (so a file holding another tensor's
/// bytes is caught), f32 elements that are all finite.
fn tensor(thread: usize, rec: usize, k: usize, bytes: u64) -> Vec<u8> {
    let n = (bytes / 4) as usize;
    let base = (thread * 1000 + rec * 10 + k) as f32;
    (0..n).flat_map(|i| (base + (i % 251) as f32 * 0.5).to_le_bytes()).collect()
}

/// Thread `t`'s records: total tensor bytes of 1×, 2× and 4× the cap (spread over 2–3 tensors,
/// every one of them smaller than the cap), each followed by a small record of two 1 KiB tensors.
fn plan(t: usize) -> Vec<Sent> {
    let mut out = Vec::new();
    for (i, mult) in [1u64, 2, 4, 2, 1, 4].iter().enumerate() {
        let parts = if *mult == 1 { 2 } else { (*mult + 1) as usize };
        let per = mult * CAP / parts as u64;
        let r = 2 * i;
        out.push(Sent {
            name: format!("Torch.big{t}.{r}.forward"),
            tensors: (0..parts).map(|k| tensor(t, r, k, per)).collect(),
        });
        out.push(Sent {
            name: format!("Torch.small{t}.{}.forward", r + 1),
            tensors: (0..2).map(|k| tensor(t, r + 1, k, 1024)).collect(),
        });
    }
    out
}

fn recorder(dir: &Path, on_full: OnFull) -> Recorder {
    Recorder::new(Config {
        task: Task::Tensor,
        dump_path: dir.to_path_buf(),
        queue_bytes: CAP,
        on_full,
        ..Config::default()
    })
}

/// Builds and ends one record: every tensor but the last in input_args, the last in output.
fn send(rec: &Recorder, s: &Sent) {
    let mut b = rec.begin(&s.name).expect("capture is on");
    b.section("input_args").unwrap();
    let last = s.tensors.len() - 1;
    for (k, data) in s.tensors.iter().enumerate() {
        if k == last {
            b.section("output").unwrap();
        }
        let shape = [(data.len() / 4) as i64];
        let t = TensorRef { dtype: DType::F32, shape: &shape, data, requires_grad: Some(false), type_name: None };
        b.add_tensor(None, &t, rec.budget()).unwrap();
    }
    rec.end(b);
}

/// 8 threads send their plans at once; returns what was sent and the run summary.
fn run(dir: &Path, on_full: OnFull) -> (Vec<Sent>, Summary) {
    let rec = Arc::new(recorder(dir, on_full));
    assert!(rec.start());
    let go = Arc::new(Barrier::new(THREADS));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (rec, go) = (rec.clone(), go.clone());
            std::thread::spawn(move || {
                let p = plan(t);
                go.wait();
                p.iter().for_each(|s| send(&rec, s));
                p
            })
        })
        .collect();
    let sent: Vec<Sent> = threads.into_iter().flat_map(|h| h.join().unwrap()).collect();
    rec.stop(true);
    let s = rec.finish().expect("first finish");
    (sent, s)
}

/// What dump.json holds for one record: each tensor leaf's data_name (None when it has none),
/// in order (input_args, then output).
fn leaves(dir: &Path) -> std::collections::HashMap<String, Vec<Option<String>>> {
    let text = std::fs::read_to_string(dir.join("step0/rank/dump.json")).unwrap();
    let v = json::parse(&text).unwrap();
    let Some(Json::Object(data)) = v.get("data") else { panic!("dump.json has no data") };
    data.iter()
        .map(|(name, body)| {
            let mut names = Vec::new();
            for sec in ["input_args", "output"] {
                let Some(Json::Array(items)) = body.get(sec) else { panic!("{name}: no {sec}") };
                for leaf in items {
                    assert_eq!(leaf.get("type").and_then(Json::as_str), Some("torch.Tensor"), "{name}");
                    names.push(leaf.get("data_name").and_then(Json::as_str).map(str::to_string));
                }
            }
            (name.to_string(), names)
        })
        .collect()
}

/// The tensor file `name` holds exactly `data`.
fn check_file(dir: &Path, name: &str, data: &[u8]) {
    let file = std::fs::read(dir.join("step0/rank/dump_tensor_data").join(name))
        .unwrap_or_else(|e| panic!("{name} is named in dump.json but cannot be read: {e}"));
    let got = read_pt_storage(&file).unwrap_or_else(|| panic!("{name} is not a .pt file"));
    assert!(got == data, "{name} does not hold the tensor that was sent");
}

fn tensor_files(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("step0/rank/dump_tensor_data")).map(|d| d.count()).unwrap_or(0)
}

#[test]
fn block_mode_writes_every_record_up_to_4x_the_cap_from_8_threads() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().to_path_buf();
    let (sent, s) = within("block mode, 8 threads", move || run(&dir, OnFull::Block));
    let on_disk = leaves(t.path());
    assert_eq!(on_disk.len(), sent.len(), "records in dump.json");
    let mut files = 0;
    for r in &sent {
        let names = on_disk.get(&r.name).unwrap_or_else(|| panic!("{} is missing from dump.json", r.name));
        assert_eq!(names.len(), r.tensors.len(), "{}", r.name);
        for (n, data) in names.iter().zip(&r.tensors) {
            let n = n.as_ref().unwrap_or_else(|| panic!("{}: a tensor has no data_name in block mode", r.name));
            check_file(t.path(), n, data);
            files += 1;
        }
    }
    assert_eq!(tensor_files(t.path()), files);
    assert_eq!((s.records, s.files, s.dropped, s.errors), (sent.len() as u64, files as u64, 0, 0), "{s:?}");
}

/// Drop mode never waits, and keeps every record in dump.json; a record's tensor files are all
/// written or all dropped (its leaves then have no data_name and no file of it exists).
#[test]
fn drop_mode_drops_whole_records_files_from_8_threads() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().to_path_buf();
    let (sent, s) = within("drop mode, 8 threads", move || run(&dir, OnFull::Drop));
    let on_disk = leaves(t.path());
    assert_eq!(on_disk.len(), sent.len(), "records in dump.json");
    let (mut files, mut without) = (0, 0);
    for r in &sent {
        let names = on_disk.get(&r.name).unwrap_or_else(|| panic!("{} is missing from dump.json", r.name));
        assert_eq!(names.len(), r.tensors.len(), "{}", r.name);
        let kept = names.iter().filter(|n| n.is_some()).count();
        assert!(kept == 0 || kept == names.len(), "{}: {kept} of {} tensor files kept", r.name, names.len());
        if kept == 0 {
            without += 1;
            continue;
        }
        for (n, data) in names.iter().zip(&r.tensors) {
            check_file(t.path(), n.as_ref().unwrap(), data);
            files += 1;
        }
    }
    assert!(files > 0, "the first record into the empty queue keeps its files");
    assert_eq!(tensor_files(t.path()), files, "tensor files on disk that dump.json does not name");
    assert_eq!((s.records, s.files, s.errors), (sent.len() as u64, files as u64, 0), "{s:?}");
    let dropped_files: usize = sent.iter().map(|r| r.tensors.len()).sum::<usize>() - files;
    assert_eq!((s.without_files, s.files_dropped), (without, dropped_files as u64), "{s:?}");
}

/// A record ends while another is half built on the same thread (an API record stays open
/// while the op runs, and the op's inner calls may record): the open record holds no budget, so
/// the inner one, over the cap with it, does not wait for it.
#[test]
fn a_half_built_record_does_not_hold_back_one_inside_it() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().to_path_buf();
    let (outer, inner) = (tensor(0, 0, 0, CAP * 3 / 4), tensor(0, 1, 0, CAP * 3 / 4));
    let (o, i) = (outer.clone(), inner.clone());
    let s = within("nested records, block mode", move || {
        let rec = recorder(&dir, OnFull::Block);
        assert!(rec.start());
        let shape = [(o.len() / 4) as i64];
        let t = |data| TensorRef { dtype: DType::F32, shape: &shape, data, requires_grad: None, type_name: None };
        let mut a = rec.begin("Torch.outer.0.forward").unwrap();
        a.section("input_args").unwrap();
        a.add_tensor(None, &t(&o), rec.budget()).unwrap();
        send(&rec, &Sent { name: "Torch.inner.0.forward".into(), tensors: vec![i.clone(), i] });
        a.section("output").unwrap();
        a.add_tensor(None, &t(&o), rec.budget()).unwrap();
        rec.end(a);
        rec.stop(true);
        rec.finish().unwrap()
    });
    let on_disk = leaves(t.path());
    for (name, data) in [("Torch.outer.0.forward", &outer), ("Torch.inner.0.forward", &inner)] {
        for n in &on_disk[name] {
            check_file(t.path(), n.as_ref().expect("block mode names every file"), data);
        }
    }
    assert_eq!((s.records, s.files, s.dropped), (2, 4, 0), "{s:?}");
}

/// With the queue held full, drop mode drops the tensor files of exactly the records sent
/// meanwhile, keeps their statistics, and counts records, files and bytes apart; once there is
/// room again records keep their files.
#[test]
fn drop_mode_counts_records_files_and_bytes_apart() {
    let t = tempfile::tempdir().unwrap();
    let rec = recorder(t.path(), OnFull::Drop);
    assert!(rec.start());
    let data: Vec<Vec<u8>> = (0..3).map(|k| tensor(0, 0, k, 4096)).collect();
    let sent = |i: usize| Sent { name: format!("Torch.mul.{i}.forward"), tensors: data.clone() };
    // The queue is full (as if a slow disk held it): the next 4 records lose their files.
    assert!(rec.budget().reserve(CAP));
    (0..4).for_each(|i| send(&rec, &sent(i)));
    rec.budget().release(CAP);
    (4..6).for_each(|i| send(&rec, &sent(i)));
    rec.stop(true);
    let s = within("drop mode, one thread", move || rec.finish().unwrap());
    let on_disk = leaves(t.path());
    for i in 0..6 {
        let names = &on_disk[&format!("Torch.mul.{i}.forward")];
        assert_eq!(names.iter().all(Option::is_some), i >= 4, "Torch.mul.{i}.forward: {names:?}");
    }
    assert_eq!(tensor_files(t.path()), 6);
    assert_eq!(
        (s.records, s.files, s.dropped, s.without_files, s.files_dropped, s.bytes_dropped),
        (6, 6, 0, 4, 12, 12 * 4096),
        "{s:?}"
    );
    let text = s.to_string();
    assert!(text.contains("records dropped: 0"), "{text}");
    assert!(text.contains("records written without their tensor files (writer queue full): 4;"), "{text}");
    assert!(text.contains("tensor files not written: 12 (49152 tensor bytes)"), "{text}");
}
