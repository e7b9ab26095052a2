//! 1,000 generated configurations through `config::load` (seeded, so a failure reproduces):
//! random JSON of random depth and type for every known key and for unknown keys, in a config
//! file (sometimes cut short, nested far too deep or not JSON at all), in `MSPROBE_*` variables
//! and in the argument object. Loading never panics, and every error names where the value came
//! from, a key that was given, and the value, on one readable line.

use msprobe_core::config::{self, ConfigError, Source, ENV_KEYS};
use msprobe_core::json::Json;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

const COMMON: &[&str] = &[
    "task",
    "level",
    "dump_path",
    "rank",
    "step",
    "framework",
    "queue_mb",
    "on_queue_full",
    "step_end_op",
    "step_end_count",
    "step_launches",
    "enable_dataloader",
    "is_deterministic",
];
const SECTION: &[&str] = &["scope", "list", "data_mode", "summary_mode", "file_format", "online_run_ut", "nfs_path"];
const SECTIONS: &[&str] = &["statistics", "tensor", "overflow_check", "free_benchmark"];

/// The generator; `noisy` (two cases in three) adds random values, unknown keys and broken
/// files to the mostly valid configurations of the others.
struct Gen(fastrand::Rng, bool);

impl Gen {
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.0.usize(..xs.len())]
    }

    fn string(&mut self) -> String {
        match self.0.u8(..8) {
            0 => String::new(),
            1 => format!("{}-{}", self.0.u64(..), self.0.u64(..)),
            2 => format!("{}", self.0.u64(..) as i128 * 4),
            3 => "x".repeat(self.0.usize(..5000)),
            4 => (0..self.0.usize(..20)).map(|_| char::from_u32(self.0.u32(..0x11000)).unwrap_or('\u{0}')).collect(),
            5 => {
                self.pick(&["L2", "l2", "L1", "mix", "tensor", "md5", "npy", "all", "Functional.relu.0.forward"]).into()
            }
            6 => "a/b\n\u{0}\"\\".into(),
            _ => (0..self.0.usize(..12)).map(|_| self.0.alphanumeric()).collect(),
        }
    }

    /// A random JSON value; `depth` bounds the nesting of the containers it makes.
    fn value(&mut self, depth: usize) -> Json {
        let kind = if depth == 0 { self.0.u8(..6) } else { self.0.u8(..9) };
        match kind {
            0 => Json::Null,
            1 => Json::Bool(self.0.bool()),
            2 => Json::Int(match self.0.u8(..4) {
                0 => self.0.i64(-5..20) as i128,
                1 => self.0.u64(..) as i128 * self.0.i128(-3..4),
                2 => [i128::MIN, i128::MAX, 1 << 64, (1 << 64) + 1, u64::MAX as i128, -1][self.0.usize(..6)],
                _ => self.0.i32(..) as i128,
            }),
            3 => Json::Float([f64::NAN, f64::INFINITY, -0.0, 1.5, 1e300, -2.0][self.0.usize(..6)]),
            4 | 5 => Json::str(self.string()),
            6 | 7 => Json::Array((0..self.0.usize(..5)).map(|_| self.value(depth - 1)).collect()),
            _ => Json::Object((0..self.0.usize(..5)).map(|_| (self.string().into(), self.value(depth - 1))).collect()),
        }
    }

    /// A value that is often valid for `key`, else random.
    fn for_key(&mut self, key: &str) -> Json {
        if self.1 && self.0.u8(..3) == 0 {
            let depth = if self.0.u8(..10) == 0 { 40 } else { 3 };
            return self.value(depth);
        }
        let s = |v: &str| Json::str(v.to_string());
        match key {
            "task" => s(self.pick(&["statistics", "tensor", "overflow_check"])),
            "level" => s(self.pick(&["L0", "L1", "mix", "L2"])),
            "dump_path" => s("/nonexistent/msprobe-fuzz"),
            "rank" | "step" => Json::Array(
                (0..self.0.usize(..4))
                    .map(|_| match self.0.u8(..3) {
                        0 => Json::Int(self.0.u64(..10) as i128),
                        1 => Json::str(format!("{}-{}", self.0.u64(..5), self.0.u64(..1 << 40))),
                        _ => Json::str(format!("{}", self.0.u64(..))),
                    })
                    .collect(),
            ),
            "framework" => s(self.pick(&["pytorch", "mindspore"])),
            "queue_mb" | "step_end_count" | "step_launches" => Json::Int(self.0.i64(0..5000) as i128),
            "on_queue_full" => s(self.pick(&["block", "drop"])),
            "step_end_op" => s(self.pick(&["Add", "InplaceAdd"])),
            "enable_dataloader" | "is_deterministic" | "online_run_ut" => Json::Bool(false),
            "scope" => Json::Array(vec![s("Functional.a.0.forward"), s("Functional.b.1.forward")]),
            "list" => Json::Array(vec![s("relu")]),
            "data_mode" => Json::Array(vec![s(self.pick(&["all", "input", "output", "forward"]))]),
            "summary_mode" => s(self.pick(&["statistics", "md5"])),
            "file_format" => s(self.pick(&["npy", "pt", "bin"])),
            _ => self.value(2),
        }
    }

    fn section(&mut self) -> Json {
        let n = self.0.usize(..4);
        Json::Object(
            (0..n)
                .map(|_| {
                    let k = if self.1 && self.0.u8(..6) == 0 { self.string() } else { self.pick(SECTION).to_string() };
                    let v = self.for_key(&k);
                    (k.into(), v)
                })
                .collect(),
        )
    }

    fn config(&mut self) -> Json {
        let mut kv = Vec::new();
        for _ in 0..self.0.usize(..8) {
            let k = match self.0.u8(..8) {
                0 if self.1 => self.string(),
                1 => self.pick(SECTIONS).to_string(),
                _ => self.pick(COMMON).to_string(),
            };
            let v =
                if SECTIONS.contains(&k.as_str()) && self.0.u8(..4) != 0 { self.section() } else { self.for_key(&k) };
            kv.push((k.into(), v));
        }
        Json::Object(kv)
    }

    /// The text of a config file: usually the JSON, sometimes broken, far too deep or not text.
    fn file_text(&mut self) -> Vec<u8> {
        let text = self.config().to_pretty();
        match if self.1 { self.0.u8(..12) } else { 12 } {
            0 => text.as_bytes()[..self.0.usize(..=text.len())].to_vec(),
            1 => format!("{{\"step\": {}{}}}", "[".repeat(100_000), "]".repeat(100_000)).into_bytes(),
            2 => vec![0xff, 0xfe, b'{', b'}'],
            3 => b"[]".to_vec(),
            _ => text.into_bytes(),
        }
    }

    fn env_value(&mut self, key: &str) -> String {
        match if self.1 { self.0.u8(..4) } else { 4 } {
            0 => self.string(),
            1 => format!("{}{}", "[".repeat(self.0.usize(..100)), "]".repeat(self.0.usize(..100))),
            _ => match self.for_key(key) {
                Json::Str(s) => s.to_string(),
                Json::Array(items) if key != "step" && key != "rank" => {
                    items.iter().filter_map(|i| i.as_str().map(str::to_string)).collect::<Vec<_>>().join(",")
                }
                v => v.to_compact(),
            },
        }
    }
}

/// Every key the error may name: the known ones, the file's, and any unknown key given.
fn keys_of(v: &Json, out: &mut Vec<String>) {
    if let Json::Object(kv) = v {
        for (k, v) in kv {
            out.push(k.to_string());
            keys_of(v, out);
        }
    }
}

fn check_error(e: &ConfigError, given: &[String], env: &HashMap<String, String>, file: &std::path::Path) {
    // A key is named (the empty key only when a config gave one) and so is the value.
    assert!(!e.value.is_empty() && (!e.key.is_empty() || given.iter().any(String::is_empty)), "{e:?}");
    let key_ok = e.key == "config_path"
        || COMMON.contains(&e.key.as_str())
        || SECTION.contains(&e.key.as_str())
        || SECTIONS.contains(&e.key.as_str())
        || given.iter().any(|k| config::clip_text(k) == e.key);
    assert!(key_ok, "the error names a key nobody gave: {e:?}");
    match &e.source {
        Source::Env(var) => assert!(env.contains_key(var), "{e:?}"),
        Source::File(p) => assert_eq!(p, file, "{e:?}"),
        Source::Argument => {}
    }
    let line = e.to_string();
    assert!(line.contains(&format!("key '{}' has value {}", e.key, e.value)), "{line}");
    assert!(!line.contains('\n') || given.iter().any(|k| k.contains('\n')), "{line}");
    // One readable line: the key and value are quoted clipped.
    assert!(e.key.len() <= 230 && e.value.len() <= 230, "{e:?}");
    assert!(line.ends_with("Capture is off; the job runs uncaptured."), "{line}");
}

#[test]
fn a_thousand_generated_configs_never_panic_and_every_error_names_key_and_value() {
    let dir = tempfile::tempdir().unwrap();
    let mut g = Gen(fastrand::Rng::with_seed(0x6d73_7072_6f62_6531), true);
    let (mut ok, mut errors) = (0, 0);
    let t0 = std::time::Instant::now();
    for case in 0..1000 {
        g.1 = case % 3 != 0;
        let file = dir.path().join(format!("config{case}.json"));
        let mut env: HashMap<String, String> = HashMap::new();
        let mut given = Vec::new();
        if g.0.u8(..4) != 0 {
            let text = g.file_text();
            if let Ok(v) = config::parse_json(&String::from_utf8_lossy(&text)) {
                keys_of(&v, &mut given);
            }
            std::fs::write(&file, &text).unwrap();
            env.insert("MSPROBE_CONFIG".into(), file.to_str().unwrap().into());
        }
        for (var, key, _) in ENV_KEYS {
            if g.0.u8(..6) == 0 {
                env.insert(var.to_string(), g.env_value(key));
            }
        }
        let args = if g.0.bool() {
            let a = g.config();
            keys_of(&a, &mut given);
            Some(a)
        } else {
            None
        };
        let get = |k: &str| env.get(k).cloned();
        let got = catch_unwind(AssertUnwindSafe(|| config::load(&get, args.as_ref())))
            .unwrap_or_else(|_| panic!("case {case} panicked: env {env:?}, args {args:?}"));
        match got {
            Ok(c) => {
                ok += 1;
                assert!(c.step_end_count >= 1 && c.queue_bytes >= 1 << 20, "case {case}: {c:?}");
            }
            Err(e) => {
                errors += 1;
                check_error(&e, &given, &env, &file);
            }
        }
    }
    // The generator reaches both outcomes often (else it tests little).
    assert!(ok >= 100 && errors >= 300, "ok {ok}, errors {errors}");
    assert!(t0.elapsed().as_secs() < 60, "{:?}", t0.elapsed());
    eprintln!("1000 configs: {ok} accepted, {errors} refused, {:?}", t0.elapsed());
}
