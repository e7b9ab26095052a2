//! `msprobe compare`: msprobe 1.1.1's accuracy comparison of two dumps (an "NPU" run and a bench
//! run), with its matching, rows, metrics, verdicts, highlighting, columns and file names, plus
//! the first divergence.
//!
//! Flow: resolve the inputs to (npu dump.json, bench dump.json) pairs (a rank directory, a step
//! directory with rank directories, or a whole dump with step directories) → per pair: parse both
//! dump.json files into merged records ([`parse`]) → match them and build the rows ([`matching`])
//! → tensor mode: read the tensor files, memory-mapped, in parallel ([`tensor`], [`metrics`]) →
//! highlight ([`highlight`]) → write xlsx/CSV ([`output`]) → first divergence ([`divergence`]).

pub mod divergence;
pub mod highlight;
pub mod html;
pub mod matching;
pub mod metrics;
pub mod ms;
pub mod output;
pub mod parse;
pub mod tensor;
pub mod value;

use matching::Row;
use msprobe_core::json::{self, Json};
use rayon::prelude::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use value::{Cell, Mode};

pub const HEADER_ALL: [&str; 21] = [
    "NPU Name",
    "Bench Name",
    "NPU Dtype",
    "Bench Dtype",
    "NPU Tensor Shape",
    "Bench Tensor Shape",
    "Cosine",
    "MaxAbsErr",
    "MaxRelativeErr",
    "One Thousandth Err Ratio",
    "Five Thousandths Err Ratio",
    "NPU max",
    "NPU min",
    "NPU mean",
    "NPU l2norm",
    "Bench max",
    "Bench min",
    "Bench mean",
    "Bench l2norm",
    "Accuracy Reached or Not",
    "Err_message",
];
pub const HEADER_SUMMARY: [&str; 24] = [
    "NPU Name",
    "Bench Name",
    "NPU Dtype",
    "Bench Dtype",
    "NPU Tensor Shape",
    "Bench Tensor Shape",
    "Max diff",
    "Min diff",
    "Mean diff",
    "L2norm diff",
    "MaxRelativeErr",
    "MinRelativeErr",
    "MeanRelativeErr",
    "NormRelativeErr",
    "NPU max",
    "NPU min",
    "NPU mean",
    "NPU l2norm",
    "Bench max",
    "Bench min",
    "Bench mean",
    "Bench l2norm",
    "Result",
    "Err_message",
];
pub const HEADER_MD5: [&str; 9] = [
    "NPU Name",
    "Bench Name",
    "NPU Dtype",
    "Bench Dtype",
    "NPU Tensor Shape",
    "Bench Tensor Shape",
    "NPU MD5",
    "BENCH MD5",
    "Result",
];

/// Options of one comparison run.
#[derive(Clone, Debug)]
pub struct Options {
    pub out_dir: PathBuf,
    pub stack_mode: bool,
    pub fuzzy: bool,
    pub print_log: bool,
    pub xlsx: bool,
    pub csv: bool,
    pub html: bool,
    pub progress: bool,
    pub tol: divergence::Tolerance,
    /// fixed timestamp for the file names (tests); the local time otherwise
    pub timestamp: Option<String>,
    /// `-f`: msprobe's MindSpore compare (`Some(true)`), its PyTorch compare (`Some(false)`), or
    /// whichever framework made the NPU dump (`None`: MindSpore when its tensors are
    /// `mindspore.Tensor`)
    pub mindspore: Option<bool>,
    /// `-cm [YAML]` / `-am`: a MindSpore NPU dump against a PyTorch bench
    pub mapping: ms::Mapping,
}

/// One pair of dumps to compare.
#[derive(Clone, Debug)]
pub struct Pair {
    pub npu_json: PathBuf,
    pub bench_json: PathBuf,
    pub stack_json: Option<PathBuf>,
    pub suffix: String,
}

/// What one pair gave.
pub struct PairResult {
    pub rows: usize,
    pub records: usize,
    pub errors: usize,
    pub files: Vec<PathBuf>,
    pub divergence: Vec<String>,
    pub mode: Mode,
}

fn is_rank_dir(name: &str) -> bool {
    let rest = name.strip_prefix("rank").or_else(|| name.strip_prefix("proc"));
    match rest {
        Some("") => name == "rank",
        Some(d) => d.chars().all(|c| c.is_ascii_digit()),
        None => false,
    }
}

fn step_number(name: &str) -> Option<u64> {
    name.strip_prefix("step").and_then(|d| d.parse().ok())
}

/// The directories in `dir`, sorted. A symbolic link to a directory is refused: links are not
/// followed in a dump (they may lead outside it, or in a cycle).
fn subdirs(dir: &Path) -> Result<Vec<String>, String> {
    let rd = std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut v = Vec::new();
    for e in rd.flatten() {
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_symlink() && e.path().is_dir() {
            return Err(link_refused(&e.path()));
        }
        if ft.is_dir() {
            v.extend(e.file_name().to_str().map(str::to_string));
        }
    }
    v.sort();
    Ok(v)
}

fn link_refused(p: &Path) -> String {
    format!("{} is a symbolic link; links are not followed in a dump: give the path it points to", p.display())
}

fn sort_ranks(v: &mut [String]) {
    v.sort_by_key(|n| (n.trim_start_matches(|c: char| c.is_ascii_alphabetic()).parse::<u64>().unwrap_or(0), n.clone()));
}

/// Turns two paths (files or directories) into the pairs of dump.json files to compare.
pub fn resolve(npu: &Path, bench: &Path, stack: Option<&Path>) -> Result<Vec<Pair>, String> {
    for p in [npu, bench] {
        if std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(link_refused(p));
        }
    }
    if npu.is_file() && bench.is_file() {
        let stack_json =
            stack.map(Path::to_path_buf).or_else(|| npu.parent().map(|d| d.join("stack.json")).filter(|p| p.is_file()));
        return Ok(vec![Pair { npu_json: npu.into(), bench_json: bench.into(), stack_json, suffix: String::new() }]);
    }
    if !npu.is_dir() || !bench.is_dir() {
        return Err(format!(
            "the NPU path {} and the bench path {} must both be dump.json files or both directories",
            npu.display(),
            bench.display()
        ));
    }
    if npu.join("dump.json").is_file() && bench.join("dump.json").is_file() {
        let s = npu.join("stack.json");
        return Ok(vec![Pair {
            npu_json: npu.join("dump.json"),
            bench_json: bench.join("dump.json"),
            stack_json: s.is_file().then_some(s),
            suffix: String::new(),
        }]);
    }
    let (mut nr, mut br): (Vec<String>, Vec<String>) = (
        subdirs(npu)?.into_iter().filter(|n| is_rank_dir(n)).collect(),
        subdirs(bench)?.into_iter().filter(|n| is_rank_dir(n)).collect(),
    );
    if !nr.is_empty() || !br.is_empty() {
        if nr.len() != br.len() {
            return Err(format!(
                "the number of ranks differs ({} in {}, {} in {}); compare rank directories one by one",
                nr.len(),
                npu.display(),
                br.len(),
                bench.display()
            ));
        }
        sort_ranks(&mut nr);
        sort_ranks(&mut br);
        let mut out = Vec::new();
        for (a, b) in nr.iter().zip(&br) {
            for mut p in resolve(&npu.join(a), &bench.join(b), None)? {
                p.suffix = format!("_{a}-{b}{}", p.suffix);
                out.push(p);
            }
        }
        return Ok(out);
    }
    let ns: Vec<String> = subdirs(npu)?.into_iter().filter(|n| step_number(n).is_some()).collect();
    let bs: Vec<String> = subdirs(bench)?;
    let mut out = Vec::new();
    let mut steps: Vec<&String> = ns.iter().filter(|s| bs.contains(s)).collect();
    steps.sort_by_key(|s| step_number(s));
    for s in steps {
        for mut p in resolve(&npu.join(s), &bench.join(s), None)? {
            p.suffix = format!("_{s}{}", p.suffix);
            out.push(p);
        }
    }
    if out.is_empty() {
        return Err(format!(
            "no dump found: {} holds no dump.json, no rank directory and no step directory shared with {}",
            npu.display(),
            bench.display()
        ));
    }
    Ok(out)
}

/// A regular file's text: a symlink (it may point outside the dump) and anything that is not a
/// regular file (a FIFO would block) are refused, naming the path.
fn read_text(p: &Path) -> Result<String, String> {
    let bytes = msprobe_core::fsutil::read_nofollow(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
    String::from_utf8(bytes).map_err(|_| format!("{} is not UTF-8 text", p.display()))
}

fn load_json(p: &Path) -> Result<Json, String> {
    let text = read_text(p)?;
    json::parse(&text).map_err(|e| format!("{} is not valid JSON: {e}", p.display()))
}

fn dump_mode(n: &Json, b: &Json) -> Result<Mode, String> {
    let nt = n.get("task").and_then(Json::as_str);
    let bt = b.get("task").and_then(Json::as_str);
    let (Some(nt), Some(bt)) = (nt, bt) else {
        return Err(format!("Please check the dump task is correct, npu's task is {nt:?}, bench's task is {bt:?}."));
    };
    if nt != bt {
        return Err(format!("Please check the dump task is consistent (npu: {nt}, bench: {bt})."));
    }
    match nt {
        "tensor" => Ok(Mode::All),
        "statistics" => {
            let (nm, bm) = (
                n.get("data").map(parse::md5_find).unwrap_or(false),
                b.get("data").map(parse::md5_find).unwrap_or(false),
            );
            if nm != bm {
                return Err("Please check the dump task is consistent: one dump has md5 and the other not.".into());
            }
            Ok(if nm { Mode::Md5 } else { Mode::Summary })
        }
        other => Err(format!("the dump task {other} cannot be compared (tensor or statistics only)")),
    }
}

fn ops_of(dump: &Json, stack: Option<&Json>, mode: Mode) -> (Vec<String>, Vec<Option<parse::Op>>) {
    let Some(Json::Object(recs)) = dump.get("data") else { return (vec![], vec![]) };
    let stack_map: HashMap<&str, &Json> = match stack {
        Some(Json::Object(kv)) => kv.iter().map(|(k, v)| (k.as_ref(), v)).collect(),
        _ => HashMap::new(),
    };
    let names = recs.iter().map(|(k, _)| k.to_string()).collect();
    let ops = recs.par_iter().map(|(k, v)| parse::merge_op(k, v, stack_map.get(k.as_ref()).copied(), mode)).collect();
    (names, ops)
}

/// Whether a dump's first tensor is a `mindspore.Tensor` (msprobe 1.1.1's dump.json does not
/// name its framework).
fn made_by_mindspore(dump: &Json) -> bool {
    fn first_type(v: &Json, depth: usize) -> Option<&str> {
        if depth > 12 {
            return None;
        }
        match v {
            Json::Object(kv) => {
                if let Some(t) = v.get("type").and_then(Json::as_str).filter(|t| t.ends_with(".Tensor")) {
                    return Some(t);
                }
                kv.iter().find_map(|(_, x)| first_type(x, depth + 1))
            }
            Json::Array(a) => a.iter().find_map(|x| first_type(x, depth + 1)),
            _ => None,
        }
    }
    dump.get("data").and_then(|d| first_type(d, 0)).is_some_and(|t| t.starts_with("mindspore."))
}

/// Compares one pair and writes its files.
pub fn compare_pair(pair: &Pair, opt: &Options) -> Result<PairResult, String> {
    let (nd, bd) = rayon::join(|| load_json(&pair.npu_json), || load_json(&pair.bench_json));
    let (nd, bd) = (nd?, bd?);
    let mode = dump_mode(&nd, &bd)?;
    let stack = match &pair.stack_json {
        Some(p) => Some(load_json(p)?),
        None => None,
    };
    let construct = pair
        .npu_json
        .parent()
        .map(|d| d.join("construct.json"))
        .filter(|p| p.is_file())
        .and_then(|p| load_json(&p).ok());
    let (records, nops) = ops_of(&nd, stack.as_ref(), mode);
    let (_, bops) = ops_of(&bd, None, mode);
    if opt.fuzzy {
        log::warn!("This task uses fuzzy matching, which may affect the accuracy of the comparison.");
    }
    let mindspore = opt.mindspore.unwrap_or_else(|| made_by_mindspore(&nd));
    let matched = if mindspore {
        if opt.fuzzy {
            log::warn!("fuzzy matching changes nothing in msprobe's MindSpore compare (it matches by name and shape)");
        }
        ms::compare_process(&nops, &bops, mode, &opt.mapping)
    } else {
        matching::compare_process(&nops, &bops, opt.fuzzy, mode)
    };
    let mut rows: Vec<Row> = matched.rows;
    if rows.is_empty() {
        return Err("Can`t match any op.".into());
    }
    let mut errors = 0usize;
    if mode == Mode::All {
        errors = tensor_metrics(&mut rows, pair, &bd, opt);
    }
    let header: Vec<&str> = match mode {
        Mode::All => HEADER_ALL.to_vec(),
        Mode::Summary => HEADER_SUMMARY.to_vec(),
        Mode::Md5 => HEADER_MD5.to_vec(),
    };
    let mut table: Vec<Vec<Cell>> = rows.iter().map(|r| r.cells.clone()).collect();
    let err_col = header.iter().position(|h| *h == "Err_message").unwrap_or(0);
    let hl = highlight::apply(&mut table, mode, err_col);
    for (r, t) in rows.iter_mut().zip(&table) {
        r.cells = t.clone();
    }
    let mut full_header: Vec<&str> = header.clone();
    if opt.stack_mode {
        full_header.push("NPU_Stack_Info");
    }
    if mode == Mode::All {
        full_header.push("Data_name");
    }
    for (t, r) in table.iter_mut().zip(&rows) {
        if opt.stack_mode {
            t.push(r.stack.clone());
        }
        if mode == Mode::All {
            t.push(r.data_name.clone().map(Cell::S).unwrap_or(Cell::N));
        }
    }
    let divs = divergence::find(&records, &rows, mode, opt.tol, construct.as_ref());
    let mut div_lines: Vec<String> = divs.iter().flat_map(|d| d.lines()).collect();
    if div_lines.is_empty() {
        div_lines.push("no divergence: every matched record's outputs agree within the tolerance".into());
    }
    let ts = opt.timestamp.clone().unwrap_or_else(|| chrono::Local::now().format("%Y%m%d%H%M%S").to_string());
    let out_dir = msprobe_core::fsutil::create_dirs(&opt.out_dir, &[])
        .map_err(|e| format!("cannot create the output directory {}: {e}", opt.out_dir.display()))?;
    let exts: Vec<&str> = [(opt.xlsx, "xlsx"), (opt.csv, "csv"), (opt.html, "html")]
        .into_iter()
        .filter_map(|(on, e)| on.then_some(e))
        .collect();
    let (stem, div_name) = output_names(&out_dir, &pair.suffix, &ts, &exts)?;
    let mut files = Vec::new();
    if opt.xlsx {
        let p = out_dir.join(format!("{stem}.xlsx"));
        output::write_xlsx(&p, &full_header, &table, &hl, Some(("first divergence", &div_lines)))?;
        files.push(p);
    }
    if opt.csv {
        let p = out_dir.join(format!("{stem}.csv"));
        output::write_csv(&p, &full_header, &table)?;
        files.push(p);
    }
    if opt.html {
        let modules: Vec<String> = rows
            .iter()
            .map(|r| {
                let rec = &records[r.record];
                let mut chain = divergence::parents(construct.as_ref(), rec);
                chain.reverse();
                chain.join(" / ")
            })
            .collect();
        let colors = (0..rows.len())
            .map(|i| {
                if hl.red.contains(&i) {
                    "red"
                } else if hl.yellow.contains(&i) {
                    "yellow"
                } else {
                    ""
                }
            })
            .collect();
        let marker = divs.first().and_then(|d| rows.iter().position(|r| records[r.record] == d.record));
        let report = html::Report {
            title: format!("msprobe compare: {} vs {}", pair.npu_json.display(), pair.bench_json.display()),
            mode,
            header: &full_header,
            rows: &table,
            modules,
            colors,
            divergence: &div_lines,
            marker,
        };
        let p = out_dir.join(format!("{stem}.html"));
        output::write_new(&p, html::render(&report).as_bytes())?;
        files.push(p);
    }
    let p = out_dir.join(div_name);
    output::write_new(&p, (div_lines.join("\n") + "\n").as_bytes())?;
    files.push(p);
    Ok(PairResult { rows: table.len(), records: records.len(), errors, files, divergence: div_lines, mode })
}

/// Whether `s` names a file in the tensor directory itself (no separator, not `.` or `..`).
fn is_file_name(s: &str) -> bool {
    !s.is_empty() && s != "." && s != ".." && !s.contains(['/', '\\', '\0'])
}

/// The output names of one comparison: `compare_result{suffix}_{ts}` (the stem of each of `exts`)
/// and `first_divergence{suffix}_{ts}.txt`, as msprobe names them; when one of them exists (a
/// compare in the same second, or the same MSPROBE_COMPARE_TIMESTAMP), `{ts}_1`, `{ts}_2`, ...
/// instead, said in a warning: nothing is overwritten.
fn output_names(dir: &Path, suffix: &str, ts: &str, exts: &[&str]) -> Result<(String, String), String> {
    let taken = |p: PathBuf| std::fs::symlink_metadata(p).is_ok();
    for n in 0..1000 {
        let t = if n == 0 { ts.to_string() } else { format!("{ts}_{n}") };
        let stem = format!("compare_result{suffix}_{t}");
        let div = format!("first_divergence{suffix}_{t}.txt");
        if taken(dir.join(&div)) || exts.iter().any(|e| taken(dir.join(format!("{stem}.{e}")))) {
            continue;
        }
        if n > 0 {
            log::warn!(
                "compare_result{suffix}_{ts} / first_divergence{suffix}_{ts} exist in {}: writing {stem} instead \
                 (nothing is overwritten)",
                dir.display()
            );
        }
        return Ok((stem, div));
    }
    Err(format!("{}: 1000 results named compare_result{suffix}_{ts}* exist; remove some or use -o", dir.display()))
}

/// Tensor mode: reads each row's two files and fills the metric cells. Returns how many rows
/// could not be read.
fn tensor_metrics(rows: &mut [Row], pair: &Pair, bench_dump: &Json, opt: &Options) -> usize {
    let ndir = pair.npu_json.parent().unwrap_or(Path::new(".")).join("dump_tensor_data");
    let bdir = pair.bench_json.parent().unwrap_or(Path::new(".")).join("dump_tensor_data");
    let empty = Json::Object(vec![]);
    let bench_data = bench_dump.get("data").unwrap_or(&empty);
    let bar = if opt.progress && rows.len() >= 200 {
        let b = indicatif::ProgressBar::new(rows.len() as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template("compare {bar:40} {pos}/{len} rows ({per_sec}, eta {eta})")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        Some(b)
    } else {
        None
    };
    let errors = std::sync::atomic::AtomicUsize::new(0);
    rows.par_iter_mut().for_each(|row| {
        let npu_name = row.cells[0].py_str();
        let bench_name = row.cells[1].py_str();
        let data_name = row.data_name.clone().unwrap_or_else(|| "-1".into());
        let m = if data_name == "-1" {
            metrics::read_none(matching::NO_BENCH)
        } else {
            match parse::bench_data_name(&bench_name, bench_data) {
                None => metrics::read_none("Bench does not have data file."),
                // a data_name that leaves the tensor directory is not read
                Some(bname) if !is_file_name(&bname) => {
                    errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    log::warn!("{bench_name}: data_name {bname:?} is not a file name in dump_tensor_data; not read");
                    metrics::read_none(&format!("Dump file: {data_name} not found."))
                }
                Some(bname) => {
                    // the file the dump names (msprobe's writer names it after the record; ours
                    // sanitises a record name that is no file name, e.g. a module called "a/b")
                    let np = if is_file_name(&data_name) {
                        ndir.join(&data_name)
                    } else {
                        let ext = data_name.rsplit_once('.').map(|(_, e)| e).unwrap_or("pt");
                        ndir.join(format!("{npu_name}.{ext}"))
                    };
                    let bp = bdir.join(&bname);
                    match (tensor::load(&np), tensor::load(&bp)) {
                        (Ok(a), Ok(b)) => metrics::compare(&a, &b),
                        (a, b) => {
                            errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let why = a.err().or(b.err()).unwrap_or_default();
                            log::warn!("{npu_name}: {why}");
                            metrics::read_none(&format!("Dump file: {data_name} not found."))
                        }
                    }
                }
            }
        };
        let mut msg = m.msg;
        if npu_name != bench_name && bench_name != "N/A" {
            msg.push_str(" Fuzzy matching data, the comparison accuracy may be affected.");
        }
        let acc = metrics::check_accuracy(&m.values[0], &m.values[1]);
        if opt.print_log {
            println!(
                "[{npu_name}] Compare result: cosine {}, max_abs_err {}, max_relative_err {}, {msg}, one_thousand_err_ratio {}, five_thousand_err_ratio {}",
                m.values[0].py_str(),
                m.values[1].py_str(),
                m.values[2].py_str(),
                m.values[3].py_str(),
                m.values[4].py_str()
            );
        }
        for (k, v) in m.values.into_iter().enumerate() {
            row.cells[6 + k] = v;
        }
        row.cells[19] = Cell::s(acc);
        row.cells[20] = Cell::S(msg);
        if let Some(b) = &bar {
            b.inc(1);
        }
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    errors.into_inner()
}

/// Runs every pair; prints a summary and the first divergence of each.
pub fn run(pairs: &[Pair], opt: &Options) -> Result<(), String> {
    let mut failed = 0;
    for p in pairs {
        match compare_pair(p, opt) {
            Ok(r) => {
                let mode = match r.mode {
                    Mode::All => "tensor",
                    Mode::Summary => "statistics",
                    Mode::Md5 => "md5",
                };
                println!(
                    "compared {} with {} ({mode} mode): {} records, {} rows{}",
                    p.npu_json.display(),
                    p.bench_json.display(),
                    r.records,
                    r.rows,
                    if r.errors > 0 {
                        format!(", {} rows with unreadable files (see Err_message)", r.errors)
                    } else {
                        String::new()
                    }
                );
                for f in &r.files {
                    println!("  wrote {}", f.display());
                }
                for l in &r.divergence {
                    println!("{l}");
                }
            }
            Err(e) => {
                failed += 1;
                eprintln!("msprobe compare: {}: {e}", p.npu_json.display());
            }
        }
    }
    if failed > 0 {
        return Err(format!("{failed} of {} comparisons failed", pairs.len()));
    }
    println!("msprobe compare ends successfully.");
    Ok(())
}

/// msprobe 1.1.1's `-i compare.json`: `npu_path`, `bench_path`, `stack_path`, `is_print_compare_log`.
pub fn from_input_json(path: &Path) -> Result<(Vec<Pair>, bool), String> {
    let j = load_json(path)?;
    let get = |k: &str| j.get(k).and_then(Json::as_str).map(PathBuf::from);
    let npu = get("npu_path")
        .ok_or_else(|| format!("Missing npu_path in configuration file {}, please check!", path.display()))?;
    let bench = get("bench_path")
        .ok_or_else(|| format!("Missing bench_path in configuration file {}, please check!", path.display()))?;
    let stack = get("stack_path");
    if npu.is_file() && bench.is_file() && stack.is_none() {
        return Err(format!("Missing stack_path in configuration file {}, please check!", path.display()));
    }
    let print = !matches!(j.get("is_print_compare_log"), Some(Json::Bool(false)));
    Ok((resolve(&npu, &bench, stack.as_deref())?, print))
}
