//! Recorder-core throughput, each figure beside a baseline measured in the same run.
//!
//! `cargo bench --bench core` prints GB/s for: statistics of f32/f16/bf16 beside a memcpy of
//! the same buffer; CRC-32; the writer thread (ready-made records with their tensor files,
//! journal included) beside a plain sequential write of the same bytes into as many files; and,
//! for transparency, capture end to end (statistics, encoding and writing) against the same
//! baseline. Best of several repetitions; `sync` before each timed write. Every timed write goes
//! to a fresh directory and is checked afterwards: each file must be on disk with the bytes that
//! were sent (a repetition that wrote nothing would otherwise be the "best"). Both the writer and
//! the plain write end when the bytes are in the files (the page cache), neither waits for the
//! device.

/// The allocator libmsprobe.so runs the core with (crates/libmsprobe/src/lib.rs), so the
/// per-record figures are the product's.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use msprobe_core::budget::Budget;
use msprobe_core::config::{Config, Task};
use msprobe_core::dtype::DType;
use msprobe_core::header::Header;
use msprobe_core::json::Json;
use msprobe_core::record::TensorFile;
use msprobe_core::record::TensorRef;
use msprobe_core::recorder::Recorder;
use msprobe_core::stats;
use msprobe_core::tensorfile::FileFormat;
use msprobe_core::writer::{Finished, Writer};
use std::hint::black_box;
use std::time::{Duration, Instant};

fn best<F: FnMut()>(reps: usize, mut f: F) -> Duration {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap()
}

/// Starts each timed write with no dirty pages pending, so kernel writeback throttling does not
/// land on whichever contender runs second.
fn settle() {
    let _ = std::process::Command::new("sync").status();
}

/// The file at `path` is on disk and holds `data`, after a `.npy` header when `npy`; the
/// benchmark stops otherwise.
fn check_file(path: &std::path::Path, data: &[u8], npy: bool) {
    let got = std::fs::read(path).unwrap_or_else(|e| panic!("{} is not on disk: {e}", path.display()));
    let skip = if npy { got.len().saturating_sub(data.len()) } else { 0 };
    let header_ok = !npy || (got.starts_with(b"\x93NUMPY") && skip % 64 == 0);
    assert!(
        header_ok && got.len() == skip + data.len() && &got[skip..] == data,
        "{} does not hold the bytes sent",
        path.display()
    );
}

fn gbps(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e9
}

fn main() {
    let mb = std::env::var("BENCH_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(64usize);
    let n = mb << 20;
    let mut x = 0x9e3779b97f4a7c15u64;
    let src: Vec<u8> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8 & 0x3f // keeps every float finite (exponent byte < 0x40)
        })
        .collect();
    let mut dst = vec![0u8; n];
    let reps = 7;
    let memcpy = best(reps, || {
        dst.copy_from_slice(black_box(&src));
        black_box(&dst);
    });
    println!("buffer: {mb} MiB, best of {reps}, one thread");
    println!("{:<34} {:>8} {:>10}", "what", "GB/s", "vs memcpy");
    let base = gbps(n, memcpy);
    println!("{:<34} {:>8.2} {:>10}", "memcpy (baseline)", base, "1.00");
    for (name, dt) in [("statistics f32", DType::F32), ("statistics f16", DType::F16), ("statistics bf16", DType::BF16)]
    {
        let d = best(reps, || {
            black_box(stats::tensor_stats(dt, false, black_box(&src)));
        });
        println!("{:<34} {:>8.2} {:>10.2}", name, gbps(n, d), gbps(n, d) / base);
    }
    let d = best(reps, || {
        black_box(stats::crc32(DType::F32, black_box(&src)));
    });
    println!("{:<34} {:>8.2} {:>10.2}", "crc32 (md5 mode)", gbps(n, d), gbps(n, d) / base);

    // Writer: 4 MiB tensors as records with .npy files, against a plain write of the same
    // bytes into as many files. The two alternate so page-cache writeback hits both alike.
    let tmp = tempfile::tempdir().expect("tempdir");
    let chunk = 4 << 20;
    let count = n / chunk;
    let (mut plain, mut writer, mut alone) = (Duration::MAX, Duration::MAX, Duration::MAX);
    let w = Writer::new(Budget::new(1 << 40, false));
    let cfg = Config {
        task: Task::Tensor,
        dump_path: tmp.path().join("dump"),
        file_format: Some(FileFormat::Npy),
        ..Config::default()
    };
    let rec = Recorder::with_journal(cfg, mmap_journal::MmapSink::open);
    rec.start();
    for k in 0..reps {
        let dir = tmp.path().join(format!("plain{k}"));
        std::fs::create_dir_all(&dir).unwrap();
        settle();
        let t = Instant::now();
        for i in 0..count {
            std::fs::write(dir.join(format!("{i}.npy")), &src[i * chunk..(i + 1) * chunk]).unwrap();
        }
        plain = plain.min(t.elapsed());
        for i in 0..count {
            check_file(&dir.join(format!("{i}.npy")), &src[i * chunk..(i + 1) * chunk], false);
        }
        let _ = std::fs::remove_dir_all(&dir);

        // One recorder for all repetitions: steady state, with written buffers recycled.
        let shape = [(chunk / 4) as i64];
        settle();
        let t = Instant::now();
        for i in 0..count {
            let mut b = rec.begin(&format!("Torch.add.{k}.{i}.forward")).unwrap();
            b.section("input_args").unwrap();
            let tr = TensorRef {
                dtype: DType::F32,
                shape: &shape,
                data: &src[i * chunk..(i + 1) * chunk],
                requires_grad: Some(false),
                type_name: None,
            };
            b.add_tensor(None, &tr, rec.budget()).unwrap();
            rec.end(b);
        }
        rec.flush();
        writer = writer.min(t.elapsed());
        for i in 0..count {
            let f = tmp.path().join(format!("dump/step0/rank/dump_tensor_data/Torch.add.{k}.{i}.forward.input.0.npy"));
            check_file(&f, &src[i * chunk..(i + 1) * chunk], true);
            let _ = std::fs::remove_file(f);
        }

        // The writer thread alone: ready-made records (journal line + file) through the channel,
        // into a fresh directory each time.
        let wdir = tmp.path().join(format!("alone{k}")).join("rank");
        w.open(wdir.clone(), Header { task: "tensor".into(), level: "L1".into(), dump_data_dir: None });
        w.sync(); // the directory and its JSON skeleton exist before the clock starts
        let recs: Vec<Finished> = (0..count)
            .map(|i| Finished {
                name: format!("Torch.add.{k}.{i}.forward"),
                body: Json::Object(vec![]),
                files: vec![TensorFile {
                    name: format!("w{k}_{i}.npy"),
                    // In a buffer of the writer's pool, as capture encodes files (a fresh 4 MiB
                    // buffer each time would make the writer free one per file once the pool is full).
                    bytes: {
                        let mut b = w.budget.take_buffer(chunk);
                        b.extend_from_slice(&src[i * chunk..(i + 1) * chunk]);
                        b
                    },
                }],
                stack: None,
                parent: None,
                reserved: 0,
            })
            .collect();
        settle();
        let t = Instant::now();
        for r in recs {
            w.record(wdir.clone(), r);
        }
        w.sync();
        alone = alone.min(t.elapsed());
        for i in 0..count {
            check_file(&wdir.join(format!("dump_tensor_data/w{k}_{i}.npy")), &src[i * chunk..(i + 1) * chunk], false);
        }
        w.write(wdir.clone(), true);
        w.sync();
        let _ = std::fs::remove_dir_all(wdir.parent().unwrap());
    }
    assert_eq!(w.counters.errors.load(std::sync::atomic::Ordering::Relaxed), 0, "the writer reported errors");
    assert_eq!(rec.summary().errors, 0, "capture reported write errors");
    w.shutdown();
    rec.finish();
    small_records();
    println!("{:<34} {:>8} {:>10}", "", "GB/s", "vs plain");
    let pb = gbps(n, plain);
    println!("{:<34} {:>8.2} {:>10}", "plain sequential write (baseline)", pb, "1.00");
    println!("{:<34} {:>8.2} {:>10.2}", "writer thread (records + files)", gbps(n, alone), gbps(n, alone) / pb);
    println!("{:<34} {:>8.2} {:>10.2}", "capture end to end (stats+encode)", gbps(n, writer), gbps(n, writer) / pb);
}

/// What a hooked framework call costs: one record with four small f32 tensors (a linear
/// layer's input, weight, bias and output) and ten stack frames. The capturing thread's part
/// (build it, hand it to the writer; fewer records than the queue holds, so it never waits) beside
/// the statistics of the same elements alone, and the writer thread's part. The capturing
/// thread formats the record and appends it to the crash journal (durable when `end` returns);
/// the writer files it.
fn small_records() {
    let dir = std::env::temp_dir().join(format!("msprobe-bench-small-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // The product's crash journal: each record appended to a shared file mapping before `end`
    // returns (`MSPROBE_BENCH_JOURNAL=file`: the plain-file journal, one write(2) per record).
    let cfg = Config { task: Task::Statistics, dump_path: dir.clone(), ..Config::default() };
    let rec = match std::env::var("MSPROBE_BENCH_JOURNAL").as_deref() {
        Ok("file") => Recorder::new(cfg),
        _ => Recorder::with_journal(cfg, mmap_journal::MmapSink::open),
    };
    rec.start();
    let shapes: [&[i64]; 4] = [&[16, 32], &[64, 32], &[64], &[16, 64]];
    let data: Vec<Vec<u8>> = shapes
        .iter()
        .map(|s| (0..s.iter().product::<i64>()).flat_map(|i| ((i % 97) as f32 * 0.01).to_le_bytes()).collect())
        .collect();
    let frames: Vec<String> =
        (0..10).map(|i| format!("File /work/model.py, line {i}, in forward, \n h = self.fc(x)")).collect();
    let n = 2_000;
    let mut k = 0u64;
    let mut writer = Duration::MAX;
    let mut capture = Duration::MAX;
    best(5, || {
        let t0 = Instant::now();
        for _ in 0..n {
            let mut b = rec.begin(&format!("Functional.linear.{k}.forward")).expect("capturing");
            k += 1;
            b.section("input_args").unwrap();
            for i in 0..3 {
                let t = TensorRef {
                    dtype: DType::F32,
                    shape: shapes[i],
                    data: &data[i],
                    requires_grad: Some(i > 0),
                    type_name: None,
                };
                b.add_tensor(None, &t, rec.budget()).unwrap();
            }
            b.section("input_kwargs").unwrap();
            b.section("output").unwrap();
            let t = TensorRef {
                dtype: DType::F32,
                shape: shapes[3],
                data: &data[3],
                requires_grad: Some(true),
                type_name: None,
            };
            b.add_tensor(None, &t, rec.budget()).unwrap();
            b.stack = Some(frames.clone());
            rec.end(b);
        }
        // The writer works in parallel; waiting for it gives its throughput.
        capture = capture.min(t0.elapsed());
        rec.flush(); // includes writing dump.json/stack.json of these records, as stop() does
        writer = writer.min(t0.elapsed());
        rec.step();
        rec.start();
    });
    let stats_only = best(5, || {
        for _ in 0..n {
            for d in &data {
                black_box(stats::tensor_stats(DType::F32, false, black_box(d)));
            }
        }
    });
    rec.finish();
    let _ = std::fs::remove_dir_all(&dir);
    let per = |d: Duration| d.as_secs_f64() / n as f64 * 1e6;
    println!("{:<34} {:>8} {:>10}", "", "µs/rec", "vs stats");
    println!("{:<34} {:>8.2} {:>10}", "statistics of its 4 tensors", per(stats_only), "1.00");
    println!("{:<34} {:>8.2} {:>10.2}", "record: capturing thread", per(capture), per(capture) / per(stats_only));
    println!("{:<34} {:>8.2} {:>10.2}", "record: done by the writer", per(writer), per(writer) / per(stats_only));
}
