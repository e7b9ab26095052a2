//! `msprobe`: the command-line companion of libmsprobe.
//!
//! `msprobe recover DIR` rebuilds dump.json, stack.json and construct.json from the journals a
//! killed process left under DIR. `msprobe summary DIR` prints what a dump holds.
//! `msprobe compare NPU BENCH` compares two dumps as msprobe 1.1.1's compare does (also invoked
//! msprobe's way: `msprobe -f pytorch compare -i compare.json -o out/`).

mod compare;

use msprobe_core::json::{self, Json};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str = "usage: msprobe recover DIR   rebuild JSON files from the journals under DIR (exit 0; 1: some
                             journal entries were damaged and skipped; 2: nothing recovered)
       msprobe summary DIR   list the step/rank directories under DIR with their record counts
       msprobe compare NPU BENCH [-o OUT] [-s] [--fuzzy] [--no-csv] [--no-xlsx] [--no-html] [--rtol X] [--atol X] [-q]
                             compare two dumps (dump.json files, rank, step or dump directories)
       msprobe [-f pytorch|mindspore] compare -i compare.json [-o OUT] [-s] [-c] [-f]
                             msprobe 1.1.1's invocation (npu_path, bench_path, stack_path, is_print_compare_log)";

fn compare_cmd(args: &[String]) -> Result<(), String> {
    let mut opt = compare::Options {
        out_dir: PathBuf::from("./output"),
        stack_mode: false,
        fuzzy: false,
        print_log: false,
        xlsx: true,
        csv: true,
        html: true,
        progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
        tol: compare::divergence::Tolerance { rtol: 1e-4, atol: 1e-12 },
        timestamp: std::env::var("MSPROBE_COMPARE_TIMESTAMP").ok(),
    };
    let mut input_json: Option<PathBuf> = None;
    let mut paths: Vec<PathBuf> = Vec::new();
    let mut quiet = false;
    let mut it = args.iter();
    let num = |v: Option<&String>, k: &str| -> Result<f64, String> {
        v.and_then(|s| s.parse().ok()).ok_or_else(|| format!("{k} needs a number"))
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "-i" | "--input_path" => input_json = it.next().map(PathBuf::from),
            "-o" | "--output_path" => opt.out_dir = it.next().map(PathBuf::from).ok_or("-o needs a directory")?,
            "-s" | "--stack_mode" => opt.stack_mode = true,
            "-f" | "--fuzzy_match" | "--fuzzy" => opt.fuzzy = true,
            "-c" | "--compare_only" => {}
            "--csv" => opt.csv = true,
            "--no-csv" => opt.csv = false,
            "--no-xlsx" => opt.xlsx = false,
            "--no-html" => opt.html = false,
            "--no-progress" => opt.progress = false,
            "-q" | "--quiet" => quiet = true,
            "--rtol" => opt.tol.rtol = num(it.next(), "--rtol")?,
            "--atol" => opt.tol.atol = num(it.next(), "--atol")?,
            "-cm" | "--cell_mapping" | "-am" | "--api_mapping" | "-dm" | "--data_mapping" | "-lm"
            | "--layer_mapping" => {
                return Err(format!("{a} (name mappings across frameworks) is not supported yet"));
            }
            other if other.starts_with('-') => return Err(format!("unknown option {other}\n{USAGE}")),
            other => paths.push(PathBuf::from(other)),
        }
    }
    let pairs = match (input_json, paths.as_slice()) {
        (Some(j), []) => {
            let (pairs, print) = compare::from_input_json(&j)?;
            opt.print_log = print && !quiet;
            pairs
        }
        (None, [n, b]) => compare::resolve(n, b, None)?,
        _ => return Err(USAGE.to_string()),
    };
    compare::run(&pairs, &opt)
}

fn summary(root: &Path) -> Result<(), String> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(d) = pending.pop() {
        let rd = std::fs::read_dir(&d).map_err(|e| format!("cannot read {}: {e}", d.display()))?;
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                pending.push(p);
            } else if p.file_name().map(|n| n == "dump.json").unwrap_or(false) {
                found.push(p);
            }
        }
    }
    found.sort();
    if found.is_empty() {
        return Err(format!("no dump.json under {}", root.display()));
    }
    for p in found {
        let text = std::fs::read_to_string(&p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
        let v = json::parse(&text).map_err(|e| format!("{} is not valid JSON: {e}", p.display()))?;
        let (n, first) = match v.get("data") {
            Some(Json::Object(kv)) => (kv.len(), kv.iter().take(3).map(|(k, _)| k.clone()).collect::<Vec<_>>()),
            _ => (0, vec![]),
        };
        let files = p
            .parent()
            .map(|d| d.join("dump_tensor_data"))
            .and_then(|d| std::fs::read_dir(d).ok())
            .map(|r| r.count())
            .unwrap_or(0);
        println!(
            "{}: {} records, {} tensor files (task {}, level {}); first: {}",
            p.parent().unwrap_or(&p).display(),
            n,
            files,
            v.get("task").and_then(Json::as_str).unwrap_or("?"),
            v.get("level").and_then(Json::as_str).unwrap_or("?"),
            first.join(", ")
        );
    }
    Ok(())
}

/// `msprobe recover DIR`: Ok(true) when every journal entry was intact, Ok(false) when some
/// were damaged (skipped and counted) or a directory could not be written.
fn recover(dir: &str) -> Result<bool, String> {
    use msprobe_core::journal::PREFIX;
    let r = msprobe_core::recover::recover_dir(Path::new(dir)).map_err(|e| format!("cannot recover {dir}: {e}"))?;
    if r.journals == 0 {
        return Err(match (r.running, r.unusable) {
            (0, 0) => format!("no journal ({PREFIX}*) found under {dir}; nothing to recover"),
            (0, n) => {
                format!("{n} file(s) named {PREFIX}* under {dir} are not journals of this version; nothing recovered")
            }
            (n, _) => {
                format!("the {n} journal(s) under {dir} belong to processes that are still running; nothing recovered")
            }
        });
    }
    println!(
        "recovered {} records in {} directories from {} journal(s) ({} torn journal entries skipped, {} damaged entries skipped, {} tensor files missing or cut short)",
        r.records, r.dirs, r.journals, r.torn_lines, r.damaged, r.missing_files
    );
    for m in &r.missing {
        println!("  missing or cut short (removed): {m}");
    }
    if r.missing_files > r.missing.len() {
        println!("  ... and {} more", r.missing_files - r.missing.len());
    }
    for b in &r.beside {
        println!("  recovered beside a directory of another run: {}", b.display());
    }
    if r.running > 0 {
        println!("  {} journal(s) left alone: their processes are still running", r.running);
    }
    for f in &r.failed {
        eprintln!("msprobe: cannot recover {f} (its journal is kept)");
    }
    Ok(r.damaged == 0 && r.failed.is_empty())
}

fn main() -> ExitCode {
    msprobe_core::logging::init();
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    // msprobe's global `-f/--framework pytorch|mindspore` comes before the subcommand
    if args.len() >= 2 && (args[0] == "-f" || args[0] == "--framework") {
        args.drain(..2);
    }
    let result = match args.as_slice() {
        [cmd, rest @ ..] if cmd == "compare" => compare_cmd(rest).map(|()| true),
        [cmd, dir] if cmd == "recover" => recover(dir),
        [cmd, dir] if cmd == "summary" => summary(Path::new(dir)).map(|()| true),
        _ => Err(USAGE.to_string()),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        // Recovered, but some journal entries were damaged (skipped, and counted above).
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("msprobe: {e}");
            ExitCode::from(2)
        }
    }
}
