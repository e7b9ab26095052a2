//! Golden tests: replaying msprobe 1.1.1's own sample dumps through our recorder gives the same
//! dump.json, stack.json and construct.json.
//!
//! The tensor data comes from the `*_tensor` samples (msprobe's `.pt` files, produced by the
//! same seeded scripts as the statistics and md5 samples). Each target record is rebuilt from
//! its structure: tensor leaves from the data file with the leaf's dtype, shape and
//! requires_grad; other leaves as msprobe wrote them (their conversion is the Python layer's
//! job). Statistics are then computed by us and compared with msprobe's: Max/Min exactly,
//! Mean/Norm within 1e-6 relative plus 1e-6 × max|x| for float32 (torch sums in a different
//! order; a mean near zero has no meaningful relative error), and within 2^-10 (f16) or 2^-7
//! (bf16) relative, the dtype's rounding step.
//! CRCs, names, key order and layout must be identical.

use msprobe_core::config::{Config, DataMode, Level, SummaryMode, Task};
use msprobe_core::dtype::DType;
use msprobe_core::json::{self, Json};
use msprobe_core::record::{RecordBuilder, TensorRef};
use msprobe_core::recorder::Recorder;
use msprobe_core::tensorfile;
use std::path::{Path, PathBuf};

/// msprobe 1.1.1's PyTorch samples, vendored in the repository (tests/data/README.md).
fn samples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/samples/msprobe-1.1.1-pytorch")
}

fn load(p: &Path) -> Json {
    json::parse(&std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).unwrap()
}

fn is_tensor_leaf(v: &Json) -> bool {
    matches!(v.get("type").and_then(Json::as_str), Some("torch.Tensor"))
}

/// Replays one value tree into the builder.
fn replay(b: &mut RecordBuilder, rec: &Recorder, key: Option<&str>, v: &Json, stem: &str, data_dir: &Path) {
    match v {
        _ if is_tensor_leaf(v) => {
            let dtype = DType::from_name(v.get("dtype").unwrap().as_str().unwrap()).unwrap();
            let shape: Vec<i64> = match v.get("shape").unwrap() {
                Json::Array(a) => a.iter().map(|d| d.as_f64().unwrap() as i64).collect(),
                _ => panic!("shape"),
            };
            let file = data_dir.join(format!("{stem}.pt"));
            let bytes = std::fs::read(&file).unwrap_or_else(|e| panic!("tensor data {}: {e}", file.display()));
            let data = tensorfile::read_pt_storage(&bytes).expect("a torch zip file");
            let numel: i64 = shape.iter().product();
            let data = &data[..numel as usize * dtype.size()];
            let rg = match v.get("requires_grad") {
                Some(Json::Bool(b)) => Some(*b),
                _ => None,
            };
            let t = TensorRef { dtype, shape: &shape, data, requires_grad: rg, type_name: None };
            b.add_tensor(key, &t, rec.budget()).unwrap();
        }
        Json::Array(items) => {
            b.open(key, false).unwrap();
            for (i, it) in items.iter().enumerate() {
                replay(b, rec, None, it, &format!("{stem}.{i}"), data_dir);
            }
            b.close().unwrap();
        }
        Json::Object(kv) if v.get("type").is_none() && !kv.is_empty() => {
            b.open(key, true).unwrap();
            for (k, it) in kv {
                replay(b, rec, Some(k), it, &format!("{stem}.{k}"), data_dir);
            }
            b.close().unwrap();
        }
        leaf => b.add_value(key, leaf.clone()).unwrap(),
    }
}

fn config_for(target: &Json, dump: &Path) -> Config {
    let task = if target.get("task").unwrap().as_str() == Some("tensor") { Task::Tensor } else { Task::Statistics };
    let level = match target.get("level").unwrap().as_str().unwrap() {
        "L0" => Level::L0,
        "mix" => Level::Mix,
        _ => Level::L1,
    };
    let md5 = target.to_compact().contains("\"md5\":");
    Config {
        task,
        level,
        dump_path: dump.to_path_buf(),
        summary_mode: if md5 { SummaryMode::Md5 } else { SummaryMode::Statistics },
        data_mode: DataMode::ALL,
        ..Config::default()
    }
}

/// Produces our dump for `target_case` from the tensors of `data_case`.
fn reproduce(data_case: &str, target_case: &str, out: &Path) -> PathBuf {
    let src = samples().join(data_case).join("step0/rank/dump_tensor_data");
    let tdir = samples().join(target_case).join("step0/rank");
    let target = load(&tdir.join("dump.json"));
    let stack = load(&tdir.join("stack.json"));
    let construct = load(&tdir.join("construct.json"));
    let rec = Recorder::new(config_for(&target, out));
    assert!(rec.start());
    // Module parents are registered when modules start, so construct.json has its own order.
    if let Json::Object(kv) = &construct {
        for (k, v) in kv {
            rec.set_construct(k, v.as_str());
        }
    }
    let Json::Object(records) = target.get("data").unwrap() else { panic!("data") };
    for (name, body) in records {
        let mut b = rec.begin(name).expect("not filtered");
        let Json::Object(sections) = body else { panic!("body") };
        for (sec, v) in sections {
            b.section(sec).unwrap();
            let cat = match &**sec {
                "input_args" | "input" => "input",
                "input_kwargs" => "kwargs",
                _ => "output",
            };
            match v {
                Json::Array(items) => {
                    for (i, it) in items.iter().enumerate() {
                        replay(&mut b, &rec, None, it, &format!("{name}.{cat}.{i}"), &src);
                    }
                }
                Json::Object(kv) => {
                    for (k, it) in kv {
                        replay(&mut b, &rec, Some(k), it, &format!("{name}.{cat}.{k}"), &src);
                    }
                }
                _ => panic!("section"),
            }
        }
        if let Some(Json::Array(frames)) = stack.get(name) {
            b.stack = Some(frames.iter().map(|f| f.as_str().unwrap().to_string()).collect());
        }
        rec.end(b);
    }
    rec.stop(true);
    let s = rec.finish().expect("first finish");
    assert_eq!(s.errors, 0);
    assert_eq!(s.dropped, 0);
    out.join("step0/rank")
}

fn ulp_tol(dtype: &str) -> f64 {
    match dtype {
        "torch.float16" => 1.0 / 1024.0,
        "torch.bfloat16" => 1.0 / 128.0,
        _ => 1e-6,
    }
}

fn compare(ours: &Json, theirs: &Json, path: &str, dtype: &str, scale: f64) {
    match (ours, theirs) {
        (Json::Float(a), Json::Float(b)) if scale >= 0.0 => {
            let tol = ulp_tol(dtype) * b.abs() + if ulp_tol(dtype) < 1e-3 { 1e-6 * scale } else { 0.0 };
            let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol;
            assert!(ok, "{path}: ours {a} vs msprobe {b}");
        }
        (Json::Float(a), Json::Float(b)) => assert!(a == b || (a.is_nan() && b.is_nan()), "{path}: {a} vs {b}"),
        (Json::Array(a), Json::Array(b)) => {
            assert_eq!(a.len(), b.len(), "{path}: array length");
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                compare(x, y, &format!("{path}[{i}]"), dtype, scale);
            }
        }
        (Json::Object(a), Json::Object(b)) => {
            let ka: Vec<&str> = a.iter().map(|(k, _)| &**k).collect();
            let kb: Vec<&str> = b.iter().map(|(k, _)| &**k).collect();
            assert_eq!(ka, kb, "{path}: keys and their order");
            let dt = ours.get("dtype").and_then(Json::as_str).unwrap_or(dtype).to_string();
            let mag = |k: &str| theirs.get(k).and_then(Json::as_f64).map(f64::abs).unwrap_or(0.0);
            let largest = mag("Max").max(mag("Min"));
            for ((k, x), (_, y)) in a.iter().zip(b) {
                // Mean and Norm are reductions (order-dependent); Max/Min must be exact.
                let scale = if matches!(&**k, "Mean" | "Norm") { largest } else { -1.0 };
                compare(x, y, &format!("{path}.{k}"), &dt, scale);
            }
        }
        (a, b) => assert_eq!(a, b, "{path}"),
    }
}

fn check(data_case: &str, target_case: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let dump = tmp.path().join("dump");
    let ours_dir = reproduce(data_case, target_case, &dump);
    let theirs_dir = samples().join(target_case).join("step0/rank");
    for f in ["dump.json", "stack.json", "construct.json"] {
        let mut text = std::fs::read_to_string(ours_dir.join(f)).unwrap();
        text = text.replace(&dump.to_string_lossy().to_string(), "<dump_path>");
        let ours = json::parse(&text).unwrap();
        let theirs = load(&theirs_dir.join(f));
        compare(&ours, &theirs, &format!("{target_case}/{f}"), "", -1.0);
    }
    // No journal is left behind after a clean finish.
    let journals = std::fs::read_dir(&dump)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(msprobe_core::journal::PREFIX));
    assert_eq!(journals.count(), 0, "a journal was left in {}", dump.display());
    // Tensor task: every file msprobe wrote exists with the same name and the same tensor bytes.
    let their_files = theirs_dir.join("dump_tensor_data");
    if their_files.exists() {
        let mut n = 0;
        for e in std::fs::read_dir(&their_files).unwrap() {
            let e = e.unwrap();
            let ours = std::fs::read(ours_dir.join("dump_tensor_data").join(e.file_name()))
                .unwrap_or_else(|_| panic!("missing {:?}", e.file_name()));
            let theirs = std::fs::read(e.path()).unwrap();
            let (a, b) = (tensorfile::read_pt_storage(&ours).unwrap(), tensorfile::read_pt_storage(&theirs).unwrap());
            // torch.save stores the whole (compact) storage: equal lengths and equal bytes.
            assert!(!a.is_empty() || b.is_empty(), "{:?}: empty storage", e.file_name());
            assert_eq!(a.len(), b.len(), "{:?}: storage length", e.file_name());
            assert_eq!(a, b, "{:?}", e.file_name());
            n += 1;
        }
        let ours_n = std::fs::read_dir(ours_dir.join("dump_tensor_data")).unwrap().count();
        assert_eq!(ours_n, n, "same number of tensor files");
    }
}

#[test]
fn mlp_l1_tensor() {
    check("mlp_L1_tensor", "mlp_L1_tensor");
}

#[test]
fn mlp_l1_statistics() {
    check("mlp_L1_tensor", "mlp_L1_statistics");
}

#[test]
fn mlp_l1_md5() {
    check("mlp_L1_tensor", "mlp_L1_md5");
}

#[test]
fn mlp_l0_statistics_and_md5() {
    check("mlp_L0_tensor", "mlp_L0_statistics");
    check("mlp_L0_tensor", "mlp_L0_md5");
}

#[test]
fn mlp_mix_all_tasks() {
    check("mlp_mix_tensor", "mlp_mix_tensor");
    check("mlp_mix_tensor", "mlp_mix_statistics");
    check("mlp_mix_tensor", "mlp_mix_md5");
}

#[test]
fn edge_cases() {
    check("edge_L1_tensor", "edge_L1_tensor");
    check("edge_L1_tensor", "edge_L1_md5");
    check("edge_mix_tensor", "edge_mix_tensor");
}

#[test]
fn kwargs_file_names() {
    check("kwargs_tensor", "kwargs_tensor");
}

/// The pretty printer reproduces msprobe's bytes exactly when the values agree: re-serialising
/// msprobe's own file gives the file back.
#[test]
fn text_is_byte_identical_to_python_json_dump() {
    for case in ["mlp_mix_md5", "edge_L1_md5", "float64_inf_md5", "misc_args"] {
        for f in ["dump.json", "stack.json", "construct.json"] {
            let p = samples().join(case).join("step0/rank").join(f);
            let text = std::fs::read_to_string(&p).unwrap();
            let v = json::parse(&text).unwrap();
            assert_eq!(v.to_pretty(), text.trim_end(), "{}", p.display());
        }
    }
}
