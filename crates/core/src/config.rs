//! Configuration: msprobe's config.json schema, environment variables and API arguments.
//!
//! Precedence, lowest first: built-in defaults; the file named by `MSPROBE_CONFIG` (or the
//! `config_path` argument of the Python API, which takes its place); per-key `MSPROBE_*`
//! environment variables; explicit arguments. Any invalid input yields one [`ConfigError`] that
//! names where the value came from, the key, the value and what is allowed; callers log it once
//! and leave capture off.
//!
//! Every input is bounded: config text (a file, an environment value, the argument object) is
//! at most [`MAX_CONFIG_BYTES`] and nests at most [`MAX_CONFIG_DEPTH`] containers; a config file
//! must be a regular file (a FIFO, a directory or a device is refused without being read, so
//! nothing blocks); step and rank lists stay ranges ([`IndexSet`]), never expanded.

use crate::dtype::Dialect;
use crate::json::{self, Json};
use crate::naming;
use crate::tensorfile::FileFormat;
use std::fmt;
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Task {
    Statistics,
    Tensor,
}

impl Task {
    pub fn as_str(self) -> &'static str {
        match self {
            Task::Statistics => "statistics",
            Task::Tensor => "tensor",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    L0,
    L1,
    Mix,
    L2,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::L0 => "L0",
            Level::L1 => "L1",
            Level::Mix => "mix",
            Level::L2 => "L2",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SummaryMode {
    Statistics,
    Md5,
}

/// What a record does when its tensor files do not fit under the cap (see [`crate::budget`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnFull {
    /// The capturing thread waits its turn until they fit, or, for a record larger than the
    /// cap, until nothing else is queued (nothing is lost; the job slows down).
    Block,
    /// The record is written without its tensor files, all of them, and counted (the job never
    /// waits on the disk).
    Drop,
}

/// msprobe's expanded `data_mode`: a part of a record is dumped only when both its direction
/// and its side are enabled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataMode {
    pub forward: bool,
    pub backward: bool,
    pub input: bool,
    pub output: bool,
}

impl DataMode {
    pub const ALL: DataMode = DataMode { forward: true, backward: true, input: true, output: true };

    /// Expands a validated list per msprobe 1.1.1 (§2.4 of msprobe-format.md).
    pub fn from_list(items: &[String]) -> DataMode {
        if items.iter().any(|s| s == "all") {
            return DataMode::ALL;
        }
        let has = |k: &str| items.iter().any(|s| s == k);
        let (mut f, mut b, mut i, mut o) = (has("forward"), has("backward"), has("input"), has("output"));
        if !f && !b {
            f = true;
            b = true;
        }
        if !i && !o {
            i = true;
            o = true;
        }
        DataMode { forward: f, backward: b, input: i, output: o }
    }
}

/// Step or rank numbers as sorted, disjoint, non-adjacent inclusive ranges: a list such as
/// `[0, "5-7", "0-1000000000000"]` is kept as two ranges, never expanded, and membership is a
/// binary search. Empty means "all".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexSet {
    ranges: Vec<(u64, u64)>,
}

impl IndexSet {
    /// The set covering the given inclusive ranges (`(a, b)` with `a > b` is empty).
    pub fn from_ranges(ranges: impl IntoIterator<Item = (u64, u64)>) -> IndexSet {
        let mut v: Vec<(u64, u64)> = ranges.into_iter().filter(|(a, b)| a <= b).collect();
        v.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
        for (a, b) in v {
            match out.last_mut() {
                Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                _ => out.push((a, b)),
            }
        }
        IndexSet { ranges: out }
    }

    /// No numbers: the filter selects every step (rank).
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub fn contains(&self, n: &u64) -> bool {
        // The last range starting at or before n.
        let i = self.ranges.partition_point(|&(a, _)| a <= *n);
        i > 0 && self.ranges[i - 1].1 >= *n
    }

    /// The largest number (`None` when empty).
    pub fn max(&self) -> Option<u64> {
        self.ranges.last().map(|r| r.1)
    }

    /// The merged ranges, ascending.
    pub fn ranges(&self) -> &[(u64, u64)] {
        &self.ranges
    }
}

/// The effective configuration of a capture session.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub task: Task,
    pub level: Level,
    /// Where `level` was set (`None`: the default), for the line that says why L2 capture is off.
    pub level_source: Option<Source>,
    pub dump_path: PathBuf,
    /// Ranks to dump; empty = all.
    pub rank: IndexSet,
    /// Steps to dump; empty = all.
    pub step: IndexSet,
    pub scope: Vec<String>,
    pub list: Vec<String>,
    pub data_mode: DataMode,
    pub summary_mode: SummaryMode,
    /// Tensor file format; `None` = the dialect's own (`.pt` for PyTorch, `.npy` for MindSpore).
    pub file_format: Option<FileFormat>,
    pub dialect: Dialect,
    /// Cap on tensor bytes queued for the writer.
    pub queue_bytes: u64,
    pub on_full: OnFull,
    /// L2: a launch whose record name contains this ends the step (after its
    /// `step_end_count`-th match).
    pub step_end_op: Option<String>,
    pub step_end_count: u64,
    /// L2: every this many captured launches end the step.
    pub step_launches: Option<u64>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            task: Task::Statistics,
            level: Level::L1,
            level_source: None,
            dump_path: PathBuf::from("./dump_path"),
            rank: IndexSet::default(),
            step: IndexSet::default(),
            scope: vec![],
            list: vec![],
            data_mode: DataMode::ALL,
            summary_mode: SummaryMode::Statistics,
            file_format: None,
            dialect: Dialect::PyTorch,
            queue_bytes: 1 << 30,
            on_full: OnFull::Block,
            step_end_op: None,
            step_end_count: 1,
            step_launches: None,
        }
    }
}

impl Config {
    /// The tensor file format in effect.
    pub fn tensor_format(&self) -> FileFormat {
        self.file_format.unwrap_or(match self.dialect {
            Dialect::PyTorch => FileFormat::Pt,
            Dialect::MindSpore => FileFormat::Npy,
        })
    }
}

/// Where a configuration value came from.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    File(PathBuf),
    Env(String),
    Argument,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::File(p) => write!(f, "config file {}", p.display()),
            Source::Env(v) => write!(f, "environment variable {v}"),
            Source::Argument => write!(f, "API argument"),
        }
    }
}

/// One invalid configuration input.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigError {
    pub source: Source,
    pub key: String,
    pub value: String,
    pub allowed: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid configuration in {}: key '{}' has value {}; {}. Capture is off; the job runs uncaptured.",
            self.source, self.key, self.value, self.allowed
        )
    }
}

impl std::error::Error for ConfigError {}

/// The environment variables that map onto config keys: (variable, key, is task-section key).
pub const ENV_KEYS: &[(&str, &str, bool)] = &[
    ("MSPROBE_TASK", "task", false),
    ("MSPROBE_LEVEL", "level", false),
    ("MSPROBE_DUMP_PATH", "dump_path", false),
    ("MSPROBE_STEP", "step", false),
    ("MSPROBE_RANK", "rank", false),
    ("MSPROBE_FRAMEWORK", "framework", false),
    ("MSPROBE_QUEUE_MB", "queue_mb", false),
    ("MSPROBE_ON_QUEUE_FULL", "on_queue_full", false),
    ("MSPROBE_STEP_END_OP", "step_end_op", false),
    ("MSPROBE_STEP_END_COUNT", "step_end_count", false),
    ("MSPROBE_STEP_LAUNCHES", "step_launches", false),
    ("MSPROBE_SCOPE", "scope", true),
    ("MSPROBE_LIST", "list", true),
    ("MSPROBE_DATA_MODE", "data_mode", true),
    ("MSPROBE_SUMMARY_MODE", "summary_mode", true),
    ("MSPROBE_FILE_FORMAT", "file_format", true),
];

/// msprobe config sections of tasks we do not implement; accepted and ignored so that users can
/// point us at msprobe's own config.json.
const FOREIGN_SECTIONS: &[&str] = &["overflow_check", "free_benchmark", "run_ut", "grad_probe"];

/// Largest config text accepted: a config file, an environment value or the API's argument
/// object (msprobe's own config files are a few hundred bytes).
pub const MAX_CONFIG_BYTES: usize = 16 << 20;
/// Deepest nesting of containers accepted in config JSON (msprobe's config nests 3 deep).
pub const MAX_CONFIG_DEPTH: usize = 32;
/// Longest text of a value (or key) quoted in an error: the line stays readable whatever the input.
const SHOW_MAX: usize = 200;

/// Text as an error quotes it: clipped to one readable line.
pub fn clip_text(s: &str) -> String {
    if s.len() <= SHOW_MAX {
        return s.to_string();
    }
    let mut cut = SHOW_MAX;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}... ({} bytes)", &s[..cut], s.len())
}

fn show(v: &Json) -> String {
    clip_text(&v.to_compact())
}

/// Parses config JSON (a file, an environment value, the API's argument object) within
/// [`MAX_CONFIG_BYTES`] and [`MAX_CONFIG_DEPTH`]; the error says which limit or where the text
/// is broken.
pub fn parse_json(text: &str) -> Result<Json, String> {
    if text.len() > MAX_CONFIG_BYTES {
        return Err(format!("it holds {} bytes; config text may hold at most {MAX_CONFIG_BYTES}", text.len()));
    }
    json::parse_limited(text, MAX_CONFIG_DEPTH).map_err(|e| {
        if e.msg == "nesting too deep" {
            format!("it nests deeper than {MAX_CONFIG_DEPTH} levels (at byte {})", e.offset)
        } else {
            format!("it is not valid JSON ({e})")
        }
    })
}

/// What a file that is not a regular file is, for the error line.
fn file_kind(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Reads a config file without ever blocking: anything but a regular file is refused before it
/// is opened (a FIFO would block, `/dev/zero` never ends), the open is non-blocking (the path may
/// have been swapped since) and checked again, and at most [`MAX_CONFIG_BYTES`] are read.
fn read_config_file(path: &std::path::Path) -> Result<String, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let regular = |m: &std::fs::Metadata| -> Result<(), String> {
        if !m.is_file() {
            return Err(format!("it is {}; a config file must be a regular file", file_kind(m.file_type())));
        }
        if m.len() > MAX_CONFIG_BYTES as u64 {
            return Err(format!("the file holds {} bytes; a config file may hold at most {MAX_CONFIG_BYTES}", m.len()));
        }
        Ok(())
    };
    regular(&std::fs::metadata(path).map_err(|e| format!("the file cannot be read ({e})"))?)?;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| format!("the file cannot be read ({e})"))?;
    regular(&f.metadata().map_err(|e| format!("the file cannot be read ({e})"))?)?;
    let mut buf = Vec::new();
    f.take(MAX_CONFIG_BYTES as u64 + 1).read_to_end(&mut buf).map_err(|e| format!("the file cannot be read ({e})"))?;
    if buf.len() > MAX_CONFIG_BYTES {
        return Err(format!("the file grew past {MAX_CONFIG_BYTES} bytes while being read"));
    }
    String::from_utf8(buf).map_err(|e| format!("the file is not UTF-8 text (byte {})", e.utf8_error().valid_up_to()))
}

struct Layer {
    source: Source,
    /// Top-level keys.
    common: Vec<(String, Json)>,
    /// Keys of the task section (already selected for the final task where the layer is a file).
    sections: Vec<(String, Vec<(String, Json)>)>,
}

/// Turns an environment string into the JSON value a config file would hold for that key.
fn env_value(key: &str, raw: &str) -> Json {
    let raw = raw.trim();
    match key {
        "step" | "rank" | "scope" | "list" | "data_mode" => {
            if raw.starts_with('[') {
                // Unparsable (or too deep): the string itself, which the key then refuses.
                return parse_json(raw).unwrap_or_else(|_| Json::str(raw.to_string()));
            }
            let parts = raw.split(',').map(str::trim).filter(|s| !s.is_empty());
            Json::Array(
                parts
                    .map(|p| match (key, p.parse::<i128>()) {
                        ("step" | "rank", Ok(n)) => Json::Int(n),
                        _ => Json::str(p.to_string()),
                    })
                    .collect(),
            )
        }
        "queue_mb" | "step_end_count" | "step_launches" => {
            raw.parse::<i128>().map(Json::Int).unwrap_or_else(|_| Json::str(raw.to_string()))
        }
        _ => Json::str(raw.to_string()),
    }
}

/// Loads the configuration. `env` reads environment variables (injected for tests); `args` holds
/// explicit API arguments as a JSON object (keys as in config.json, plus `config_path`).
pub fn load(env: &dyn Fn(&str) -> Option<String>, args: Option<&Json>) -> Result<Config, ConfigError> {
    let mut layers = Vec::new();
    // The file layer: the config_path argument, else MSPROBE_CONFIG.
    let arg_path = args.and_then(|a| a.get("config_path")).filter(|v| **v != Json::Null);
    let file = match arg_path {
        Some(Json::Str(p)) => Some((PathBuf::from(&**p), Source::Argument)),
        Some(other) => {
            return Err(ConfigError {
                source: Source::Argument,
                key: "config_path".into(),
                value: show(other),
                allowed: "it must be a string naming a .json file".into(),
            })
        }
        None => env("MSPROBE_CONFIG")
            .filter(|s| !s.is_empty())
            .map(|p| (PathBuf::from(p), Source::Env("MSPROBE_CONFIG".into()))),
    };
    if let Some((path, named_by)) = file {
        layers.push(file_layer(&path, named_by)?);
    }
    // The environment layer.
    let mut env_layer = Layer { source: Source::Env(String::new()), common: vec![], sections: vec![] };
    let mut env_sources = Vec::new();
    for (var, key, in_section) in ENV_KEYS {
        if let Some(raw) = env(var).filter(|s| !s.trim().is_empty()) {
            let v = env_value(key, &raw);
            env_sources.push((key.to_string(), var.to_string()));
            if *in_section {
                env_layer.sections.push(("*".into(), vec![(key.to_string(), v)]));
            } else {
                env_layer.common.push((key.to_string(), v));
            }
        }
    }
    // The argument layer.
    let mut arg_layer = Layer { source: Source::Argument, common: vec![], sections: vec![] };
    if let Some(Json::Object(kv)) = args {
        for (k, v) in kv {
            if k == "config_path" || *v == Json::Null {
                continue;
            }
            match &**k {
                "scope" | "list" | "data_mode" | "summary_mode" | "file_format" => {
                    arg_layer.sections.push(("*".into(), vec![(k.to_string(), v.clone())]))
                }
                _ => arg_layer.common.push((k.to_string(), v.clone())),
            }
        }
    }

    let mut cfg = Config::default();
    let env_source = |key: &str| -> Source {
        env_sources
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| Source::Env(v.clone()))
            .unwrap_or(Source::Env("?".into()))
    };
    // Common keys, layer by layer.
    let all: Vec<&Layer> = layers.iter().chain([&env_layer, &arg_layer]).collect();
    for layer in &all {
        for (k, v) in &layer.common {
            let src = if layer.source == Source::Env(String::new()) { env_source(k) } else { layer.source.clone() };
            apply_common(&mut cfg, k, v, &src)?;
        }
    }
    // Task-section keys: a file contributes its section for the final task; env and arguments
    // apply whatever the task.
    for layer in &all {
        for (section, kv) in &layer.sections {
            if section != "*" && section != cfg.task.as_str() {
                continue;
            }
            for (k, v) in kv {
                let src = if layer.source == Source::Env(String::new()) { env_source(k) } else { layer.source.clone() };
                apply_section(&mut cfg, k, v, &src)?;
            }
        }
    }
    validate_scope(&cfg, &all)?;
    Ok(cfg)
}

fn file_layer(path: &std::path::Path, named_by: Source) -> Result<Layer, ConfigError> {
    let err = |allowed: String| ConfigError {
        source: named_by.clone(),
        key: "config_path".into(),
        value: format!("\"{}\"", path.display()),
        allowed,
    };
    let text = read_config_file(path).map_err(err)?;
    let v = parse_json(&text).map_err(|e| err(format!("the file is refused: {e}")))?;
    let Json::Object(kv) = v else {
        return Err(err("the file must hold a JSON object".into()));
    };
    let source = Source::File(path.to_path_buf());
    let mut layer = Layer { source: source.clone(), common: vec![], sections: vec![] };
    for (k, v) in kv {
        let k = k.into_owned();
        match k.as_str() {
            "statistics" | "tensor" => {
                let Json::Object(inner) = v else {
                    return Err(ConfigError {
                        source,
                        key: k,
                        value: show(&v),
                        allowed: "a task section must be a JSON object".into(),
                    });
                };
                layer.sections.push((k, inner.into_iter().map(|(k, v)| (k.into_owned(), v)).collect()));
            }
            s if FOREIGN_SECTIONS.contains(&s) => {
                log::debug!("config: ignoring msprobe section '{s}' (task not supported)")
            }
            _ => layer.common.push((k, v)),
        }
    }
    Ok(layer)
}

fn bad(src: &Source, key: &str, v: &Json, allowed: &str) -> ConfigError {
    ConfigError { source: src.clone(), key: clip_text(key), value: show(v), allowed: allowed.into() }
}

fn one_of<'a>(src: &Source, key: &str, v: &Json, options: &[&'a str]) -> Result<&'a str, ConfigError> {
    let mut allowed =
        format!("allowed values are {}", options.iter().map(|o| format!("\"{o}\"")).collect::<Vec<_>>().join(", "));
    // msprobe compares exactly (`level` "l2" is invalid there too); say so rather than guess.
    if let Some(o) = v.as_str().and_then(|s| options.iter().find(|o| o.eq_ignore_ascii_case(s.trim()))) {
        allowed.push_str(&format!(" (case matters: \"{o}\")"));
    }
    match v {
        Json::Str(s) => options.iter().find(|o| **o == s).copied().ok_or_else(|| bad(src, key, v, &allowed)),
        _ => Err(bad(src, key, v, &allowed)),
    }
}

/// Parses msprobe's step/rank lists: integers and "a-b" ranges, kept as ranges (a list of many
/// large ranges costs 16 bytes per entry, not one word per step).
pub fn parse_index_list(src: &Source, key: &str, v: &Json) -> Result<IndexSet, ConfigError> {
    let Json::Array(items) = v else {
        return Err(bad(
            src,
            key,
            v,
            "it must be a list of non-negative integers or \"a-b\" ranges, e.g. [0, \"2-4\"]",
        ));
    };
    if items.len() > 1_000_000 {
        return Err(bad(src, key, v, "a list may have at most 1000000 entries"));
    }
    let max = u64::MAX;
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        match item {
            Json::Int(n) => match u64::try_from(*n) {
                Ok(n) => out.push((n, n)),
                Err(_) => {
                    return Err(bad(
                        src,
                        key,
                        item,
                        &format!("each element of {key} must be an integer from 0 to {max}"),
                    ))
                }
            },
            Json::Str(s) => {
                let s = s.trim();
                let range = s.split_once('-').map(|(a, b)| (a.trim().parse::<u64>(), b.trim().parse::<u64>()));
                match (range, s.parse::<u64>()) {
                    (None, Ok(n)) => out.push((n, n)),
                    (Some((Ok(a), Ok(b))), _) if a <= b => out.push((a, b)),
                    (Some((Ok(a), Ok(b))), _) => {
                        return Err(bad(
                            src,
                            key,
                            item,
                            &format!("the left boundary ({a}) cannot be greater than the right boundary ({b})"),
                        ))
                    }
                    _ => {
                        return Err(bad(
                            src,
                            key,
                            item,
                            &format!(
                                "a string element must be an integer or a range \"a-b\" with 0 <= a <= b <= {max}"
                            ),
                        ))
                    }
                }
            }
            _ => {
                return Err(bad(
                    src,
                    key,
                    item,
                    &format!("each element of {key} must be an integer or a string \"a-b\""),
                ))
            }
        }
    }
    Ok(IndexSet::from_ranges(out))
}

/// A count that must be at least 1 and fit the u64 counter it sets (no wrap past 2^64).
fn positive_u64(src: &Source, key: &str, v: &Json) -> Result<u64, ConfigError> {
    match v {
        Json::Int(n) => u64::try_from(*n).ok().filter(|n| *n >= 1),
        _ => None,
    }
    .ok_or_else(|| bad(src, key, v, &format!("it must be an integer from 1 to {}", u64::MAX)))
}

fn string_list(src: &Source, key: &str, v: &Json) -> Result<Vec<String>, ConfigError> {
    match v {
        Json::Array(items) => items
            .iter()
            .map(|i| i.as_str().map(str::to_string).ok_or_else(|| bad(src, key, v, "it must be a list of strings")))
            .collect(),
        _ => Err(bad(src, key, v, "it must be a list of strings")),
    }
}

fn apply_common(cfg: &mut Config, key: &str, v: &Json, src: &Source) -> Result<(), ConfigError> {
    match key {
        "task" => {
            cfg.task = match v {
                Json::Str(s) if FOREIGN_SECTIONS.contains(&&**s) => {
                    return Err(bad(src, key, v, "msprobe-rs implements the tasks \"statistics\" and \"tensor\""))
                }
                _ => match one_of(src, key, v, &["statistics", "tensor"])? {
                    "tensor" => Task::Tensor,
                    _ => Task::Statistics,
                },
            }
        }
        "level" => {
            cfg.level = match one_of(src, key, v, &["L0", "L1", "mix", "L2"])? {
                "L0" => Level::L0,
                "L1" => Level::L1,
                "mix" => Level::Mix,
                _ => Level::L2,
            };
            cfg.level_source = Some(src.clone());
        }
        "dump_path" => match v {
            Json::Str(s) if !s.is_empty() && !s.contains('\0') => cfg.dump_path = PathBuf::from(&**s),
            _ => return Err(bad(src, key, v, "it must be a non-empty string naming a directory")),
        },
        "step" => cfg.step = parse_index_list(src, key, v)?,
        "rank" => cfg.rank = parse_index_list(src, key, v)?,
        "framework" => {
            cfg.dialect = match one_of(src, key, v, &["pytorch", "mindspore"])? {
                "mindspore" => Dialect::MindSpore,
                _ => Dialect::PyTorch,
            }
        }
        "queue_mb" => match v {
            Json::Int(n) if *n >= 1 && *n <= 1 << 20 => cfg.queue_bytes = (*n as u64) << 20,
            _ => return Err(bad(src, key, v, "it must be an integer number of MiB from 1 to 1048576")),
        },
        "on_queue_full" => {
            cfg.on_full = match one_of(src, key, v, &["block", "drop"])? {
                "drop" => OnFull::Drop,
                _ => OnFull::Block,
            }
        }
        "step_end_op" => match v {
            Json::Str(s) if !s.is_empty() => cfg.step_end_op = Some(s.to_string()),
            _ => {
                return Err(bad(
                    src,
                    key,
                    v,
                    "it must be a non-empty op name (substring of the kernel record name, e.g. \"ApplyAdamW\")",
                ))
            }
        },
        "step_end_count" => cfg.step_end_count = positive_u64(src, key, v)?,
        "step_launches" => cfg.step_launches = Some(positive_u64(src, key, v)?),
        // Read by the framework layers (device statistics fetched only at step end, as msprobe 26).
        "async_dump" => match v {
            Json::Bool(_) => {}
            _ => return Err(bad(src, key, v, "it must be true or false")),
        },
        "enable_dataloader" | "is_deterministic" => match v {
            Json::Bool(false) => {}
            Json::Bool(true) => log::warn!("config: '{key}: true' is not supported by msprobe-rs and is ignored"),
            _ => return Err(bad(src, key, v, "it must be true or false")),
        },
        _ => {
            return Err(bad(
                src,
                key,
                v,
                concat!(
                    "this key is unknown; known keys are task, level, dump_path, rank, step, framework, queue_mb, ",
                    "on_queue_full, step_end_op, step_end_count, step_launches, async_dump, enable_dataloader and the task ",
                    "sections \"statistics\" and \"tensor\""
                ),
            ))
        }
    }
    Ok(())
}

fn apply_section(cfg: &mut Config, key: &str, v: &Json, src: &Source) -> Result<(), ConfigError> {
    match key {
        "scope" => cfg.scope = string_list(src, key, v)?,
        "list" => cfg.list = string_list(src, key, v)?,
        "data_mode" => {
            let items = string_list(src, key, v)?;
            let allowed = "it must be a list of up to 4 of \"all\", \"input\", \"output\", \"forward\", \"backward\", with \"all\" alone";
            let ok = !items.is_empty()
                && items.len() <= 4
                && items.iter().all(|s| ["all", "input", "output", "forward", "backward"].contains(&s.as_str()))
                && (!items.iter().any(|s| s == "all") || items.len() == 1);
            if !ok {
                return Err(bad(src, key, v, allowed));
            }
            cfg.data_mode = DataMode::from_list(&items);
        }
        "summary_mode" => {
            cfg.summary_mode = match one_of(src, key, v, &["statistics", "md5"])? {
                "md5" => SummaryMode::Md5,
                _ => SummaryMode::Statistics,
            }
        }
        "file_format" => {
            cfg.file_format = Some(match one_of(src, key, v, &["npy", "pt", "bin"])? {
                "npy" => FileFormat::Npy,
                "pt" => FileFormat::Pt,
                // msprobe validates "bin" and ignores it for PyTorch; we do the same.
                _ => return Ok(()),
            })
        }
        "online_run_ut" => match v {
            Json::Bool(false) => {}
            _ => return Err(bad(src, key, v, "online run_ut is not supported by msprobe-rs; it must be false")),
        },
        "online_run_ut_recompute" | "nfs_path" | "tls_path" | "host" | "port" => {}
        _ => {
            return Err(bad(
                src,
                key,
                v,
                "this task-section key is unknown; known keys are scope, list, data_mode, summary_mode, file_format",
            ))
        }
    }
    Ok(())
}

/// msprobe's scope check: exactly two names matching the level's record-name pattern.
fn validate_scope(cfg: &Config, layers: &[&Layer]) -> Result<(), ConfigError> {
    if cfg.scope.is_empty() {
        return Ok(());
    }
    // Report against the layer that set it last.
    let src = layers
        .iter()
        .rev()
        .find(|l| l.sections.iter().any(|(_, kv)| kv.iter().any(|(k, _)| k == "scope")))
        .map(|l| match &l.source {
            // The environment layer's own source is a placeholder: scope comes from MSPROBE_SCOPE.
            Source::Env(v) if v.is_empty() => Source::Env("MSPROBE_SCOPE".into()),
            s => s.clone(),
        })
        .unwrap_or(Source::Argument);
    let v = Json::Array(cfg.scope.iter().map(|s| Json::str(s.clone())).collect());
    if cfg.scope.len() != 2 {
        return Err(bad(&src, "scope", &v, "scope must hold exactly 2 record names: the first and the last to dump"));
    }
    let ok = |s: &str| match cfg.level {
        Level::L1 | Level::L2 => naming::is_api_name(s),
        Level::L0 => naming::is_module_name(s),
        Level::Mix => naming::is_api_name(s) || naming::is_module_name(s),
    };
    if let Some(badname) = cfg.scope.iter().find(|s| !ok(s)) {
        return Err(bad(
            &src,
            "scope",
            &Json::str(badname.clone()),
            &format!(
                "at level {} a scope name must look like {}",
                cfg.level.as_str(),
                match cfg.level {
                    Level::L0 => "\"Module.fc1.Linear.forward.0\"",
                    Level::Mix => "\"Functional.linear.0.forward\" or \"Module.fc1.Linear.forward.0\"",
                    _ => "\"Functional.linear.0.forward\"",
                }
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    fn write_cfg(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::Builder::new().suffix(".json").tempfile().unwrap();
        std::io::Write::write_all(&mut f, text.as_bytes()).unwrap();
        f
    }

    #[test]
    fn defaults() {
        let c = load(&env_of(&[]), None).unwrap();
        assert_eq!(c, Config::default());
    }

    #[test]
    fn precedence_file_env_args() {
        let f = write_cfg(
            r#"{"task": "tensor", "dump_path": "/tmp/a", "level": "L1", "step": [0, "2-4"], "rank": [],
                "tensor": {"scope": [], "list": ["relu"], "data_mode": ["input"], "file_format": "npy"},
                "statistics": {"summary_mode": "md5"}, "overflow_check": {"overflow_nums": 1}}"#,
        );
        let p = f.path().to_str().unwrap().to_string();
        let c = load(&env_of(&[("MSPROBE_CONFIG", &p)]), None).unwrap();
        assert_eq!(c.task, Task::Tensor);
        assert_eq!(c.step, IndexSet::from_ranges([(0, 0), (2, 4)]));
        assert_eq!(c.list, vec!["relu".to_string()]);
        assert_eq!(c.data_mode, DataMode { forward: true, backward: true, input: true, output: false });
        assert_eq!(c.file_format, Some(FileFormat::Npy));
        assert_eq!(c.summary_mode, SummaryMode::Statistics, "statistics section ignored for task tensor");
        // env beats file; the statistics section of the file now applies
        let c =
            load(&env_of(&[("MSPROBE_CONFIG", &p), ("MSPROBE_TASK", "statistics"), ("MSPROBE_STEP", "1,5-6")]), None)
                .unwrap();
        assert_eq!(c.task, Task::Statistics);
        assert_eq!(c.summary_mode, SummaryMode::Md5);
        assert_eq!(c.step.ranges(), [(1, 1), (5, 6)]);
        // arguments beat env
        let args = json::parse(r#"{"level": "L0", "dump_path": "/tmp/b", "step": [7]}"#).unwrap();
        let c = load(&env_of(&[("MSPROBE_CONFIG", &p), ("MSPROBE_LEVEL", "mix")]), Some(&args)).unwrap();
        assert_eq!(
            (c.level, c.step.clone(), c.dump_path.clone()),
            (Level::L0, IndexSet::from_ranges([(7, 7)]), PathBuf::from("/tmp/b"))
        );
    }

    fn err_of(env: &[(&str, &str)], args: Option<&str>) -> ConfigError {
        let a = args.map(|t| json::parse(t).unwrap());
        load(&env_of(env), a.as_ref()).unwrap_err()
    }

    #[test]
    fn each_invalid_input_names_source_key_value() {
        let e = err_of(&[("MSPROBE_LEVEL", "L3")], None);
        assert_eq!(
            (e.source.clone(), e.key.as_str(), e.value.as_str()),
            (Source::Env("MSPROBE_LEVEL".into()), "level", "\"L3\"")
        );
        assert!(e.to_string().contains("\"L0\", \"L1\", \"mix\", \"L2\""), "{e}");

        let e = err_of(&[("MSPROBE_STEP", "5-3")], None);
        assert!(e.allowed.contains("left boundary (5)"), "{e}");
        let e = err_of(&[("MSPROBE_STEP", "x")], None);
        assert_eq!(e.key, "step");
        let e = err_of(&[], Some(r#"{"step": [-1]}"#));
        assert_eq!((e.source.clone(), e.value.as_str()), (Source::Argument, "-1"));
        let e = err_of(&[], Some(r#"{"step": [1.5]}"#));
        assert_eq!(e.value, "1.5");
        let e = err_of(&[], Some(r#"{"rank": 3}"#));
        assert_eq!(e.key, "rank");

        let f = write_cfg(r#"{"task": "statistics", "bogus": 1}"#);
        let e = err_of(&[("MSPROBE_CONFIG", f.path().to_str().unwrap())], None);
        assert_eq!((e.key.as_str(), e.value.as_str()), ("bogus", "1"));
        assert!(matches!(e.source, Source::File(_)));

        let f = write_cfg(r#"{"task": "statistics", "statistics": {"summary_mode": "sha"}}"#);
        let e = err_of(&[("MSPROBE_CONFIG", f.path().to_str().unwrap())], None);
        assert_eq!((e.key.as_str(), e.value.as_str()), ("summary_mode", "\"sha\""));

        let f = write_cfg(r#"{"task": "#);
        let e = err_of(&[("MSPROBE_CONFIG", f.path().to_str().unwrap())], None);
        assert!(e.allowed.contains("not valid JSON"), "{e}");
        let e = err_of(&[("MSPROBE_CONFIG", "/nonexistent/cfg.json")], None);
        assert!(e.allowed.contains("cannot be read"), "{e}");

        let e = err_of(&[("MSPROBE_DATA_MODE", "all,input")], None);
        assert_eq!(e.key, "data_mode");
        let e = err_of(&[("MSPROBE_SCOPE", "Functional.relu.0.forward")], None);
        assert!(e.allowed.contains("exactly 2"), "{e}");
        assert_eq!(e.source, Source::Env("MSPROBE_SCOPE".into()));
        let e = err_of(
            &[("MSPROBE_LEVEL", "L0"), ("MSPROBE_SCOPE", "Functional.relu.0.forward,Module.a.B.forward.0")],
            None,
        );
        assert_eq!(e.value, "\"Functional.relu.0.forward\"");
        let e = err_of(&[("MSPROBE_TASK", "overflow_check")], None);
        assert!(e.allowed.contains("statistics"), "{e}");
        let e = err_of(&[("MSPROBE_QUEUE_MB", "0")], None);
        assert_eq!(e.key, "queue_mb");
    }

    #[test]
    fn step_and_rank_lists_stay_ranges() {
        let t0 = std::time::Instant::now();
        // 100000 ranges of a million steps each: expanded, 800 GB (the old code aborted).
        let many: Vec<String> = (0..100_000u64).map(|i| format!("\"{}-{}\"", i * 10, i * 10 + 1_000_000)).collect();
        let args = format!(r#"{{"step": [{}], "rank": [0, "5-7", "0-1000000000000", 3]}}"#, many.join(","));
        let c = load(&env_of(&[]), Some(&json::parse(&args).unwrap())).unwrap();
        assert_eq!(c.step.ranges(), [(0, 999_990 + 1_000_000)]);
        assert_eq!(c.rank.ranges(), [(0, 1_000_000_000_000)]);
        let c = load(&env_of(&[("MSPROBE_STEP", "0, 5-7,9"), ("MSPROBE_RANK", "[\"0-18446744073709551615\"]")]), None)
            .unwrap();
        assert_eq!(c.step.ranges(), [(0, 0), (5, 7), (9, 9)]);
        assert!([0, 5, 6, 7, 9].iter().all(|n| c.step.contains(n)));
        assert!(![1, 4, 8, 10, u64::MAX].iter().any(|n| c.step.contains(n)));
        assert_eq!(c.step.max(), Some(9));
        assert!(c.rank.contains(&u64::MAX) && c.rank.contains(&0));
        // Expanded, the lists would take hours or all memory; 60 s leaves room for qemu on a busy machine.
        assert!(t0.elapsed() < std::time::Duration::from_secs(60), "{:?}", t0.elapsed());
        let e = err_of(&[("MSPROBE_STEP", "0-18446744073709551616")], None);
        assert_eq!((e.key.as_str(), e.value.as_str()), ("step", "\"0-18446744073709551616\""));
        let e = err_of(&[], Some(r#"{"rank": [18446744073709551616]}"#));
        assert_eq!((e.key.as_str(), e.value.as_str()), ("rank", "18446744073709551616"));
        // Adjacent and overlapping ranges merge.
        assert_eq!(IndexSet::from_ranges([(5, 9), (0, 3), (4, 4), (20, 30), (25, 26)]).ranges(), [(0, 9), (20, 30)]);
        assert!(IndexSet::default().is_empty() && IndexSet::default().max().is_none());
    }

    #[test]
    fn counts_past_u64_are_refused_not_wrapped() {
        for var in ["MSPROBE_STEP_END_COUNT", "MSPROBE_STEP_LAUNCHES"] {
            for v in ["18446744073709551616", "36893488147419103232", "0", "-1"] {
                let e = err_of(&[(var, v)], None);
                assert_eq!((e.source.clone(), e.value.as_str()), (Source::Env(var.into()), v), "{e}");
                assert!(e.allowed.contains("18446744073709551615"), "{e}");
            }
        }
        let e = err_of(&[], Some(r#"{"step_end_count": 18446744073709551617}"#));
        assert_eq!(e.key, "step_end_count");
        let c = load(&env_of(&[("MSPROBE_STEP_END_COUNT", "18446744073709551615")]), None).unwrap();
        assert_eq!(c.step_end_count, u64::MAX);
    }

    #[test]
    fn deep_or_huge_config_text_is_refused_with_a_clear_error() {
        let deep = |n: usize| format!(r#"{{"step": {}{}}}"#, "[".repeat(n), "]".repeat(n));
        let f = write_cfg(&deep(100_000));
        let e = err_of(&[("MSPROBE_CONFIG", f.path().to_str().unwrap())], None);
        assert_eq!(e.key, "config_path");
        assert!(e.allowed.contains("nests deeper than 32 levels"), "{e}");
        assert!(parse_json(&deep(1000)).unwrap_err().starts_with("it nests deeper than 32 levels"));
        assert!(parse_json(&deep(31)).is_ok());
        // An environment list nested too deep is refused as the string it is.
        let e = err_of(&[("MSPROBE_STEP", &format!("{}{}", "[".repeat(5000), "]".repeat(5000)))], None);
        assert_eq!(e.key, "step");
        assert!(e.value.len() < 300, "the value is clipped in the message: {}", e.value.len());
        let huge = format!(r#"{{"dump_path": "{}"}}"#, "x".repeat(MAX_CONFIG_BYTES));
        let f = write_cfg(&huge);
        let e = err_of(&[("MSPROBE_CONFIG", f.path().to_str().unwrap())], None);
        assert!(e.allowed.contains("at most 16777216"), "{e}");
        // A long value is quoted clipped: one readable line.
        let f = write_cfg(&format!(r#"{{"level": "{}"}}"#, "y".repeat(100_000)));
        let e = err_of(&[("MSPROBE_CONFIG", f.path().to_str().unwrap())], None);
        assert!(e.to_string().len() < 600 && e.value.ends_with("... (100002 bytes)"), "{e}");
    }

    /// Runs `f` on a thread and fails (instead of hanging the suite) if it takes over 10 s.
    fn within_10s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(std::time::Duration::from_secs(10)).expect("config::load blocked")
    }

    #[test]
    fn config_files_that_are_not_regular_files_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo.json");
        // The core is safe Rust: the FIFO comes from mkfifo(1).
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let cases = [
            (fifo.to_str().unwrap().to_string(), "a FIFO"),
            (dir.path().to_str().unwrap().to_string(), "a directory"),
            ("/dev/zero".to_string(), "a character device"),
        ];
        for (path, kind) in cases {
            let p = path.clone();
            let e = within_10s(move || load(&env_of(&[("MSPROBE_CONFIG", &p)]), None)).unwrap_err();
            assert_eq!((e.key.as_str(), e.value.clone()), ("config_path", format!("\"{path}\"")));
            assert!(e.allowed.contains(kind) && e.allowed.contains("regular file"), "{e}");
        }
        // A sparse file past the size limit is refused without being read.
        let big = dir.path().join("big.json");
        std::fs::File::create(&big).unwrap().set_len(1 << 40).unwrap();
        let p = big.to_str().unwrap().to_string();
        let e = within_10s(move || load(&env_of(&[("MSPROBE_CONFIG", &p)]), None)).unwrap_err();
        assert!(e.allowed.contains("1099511627776 bytes"), "{e}");
        // Not UTF-8.
        let bin = dir.path().join("bin.json");
        std::fs::write(&bin, b"{\"level\": \"\xff\"}").unwrap();
        let e = err_of(&[("MSPROBE_CONFIG", bin.to_str().unwrap())], None);
        assert!(e.allowed.contains("not UTF-8"), "{e}");
    }

    #[test]
    fn wrong_case_is_refused_with_a_hint() {
        let e = err_of(&[("MSPROBE_LEVEL", "l2")], None);
        assert_eq!((e.key.as_str(), e.value.as_str()), ("level", "\"l2\""));
        assert!(e.allowed.ends_with("(case matters: \"L2\")"), "{e}");
        let e = err_of(&[("MSPROBE_TASK", "Tensor")], None);
        assert!(e.allowed.contains("(case matters: \"tensor\")"), "{e}");
        let e = err_of(&[("MSPROBE_LEVEL", "x")], None);
        assert!(!e.allowed.contains("case matters"), "{e}");
    }

    #[test]
    fn data_mode_expansion() {
        let s = |v: &[&str]| DataMode::from_list(&v.iter().map(|x| x.to_string()).collect::<Vec<_>>());
        assert_eq!(s(&["input"]), DataMode { forward: true, backward: true, input: true, output: false });
        assert_eq!(s(&["forward"]), DataMode { forward: true, backward: false, input: true, output: true });
        assert_eq!(s(&["backward", "output"]), DataMode { forward: false, backward: true, input: false, output: true });
        assert_eq!(s(&["all"]), DataMode::ALL);
    }
}
