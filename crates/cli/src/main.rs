//! `msprobe`: the command-line companion of libmsprobe.
//!
//! `msprobe recover DIR` rebuilds dump.json, stack.json and construct.json from the journals a
//! killed process left under DIR. `msprobe summary DIR...` prints what dumps hold.
//! `msprobe compare NPU BENCH` compares two dumps as msprobe 1.1.1's compare does (also invoked
//! msprobe's way: `msprobe -f pytorch compare -i compare.json -o out/`).
//!
//! The command line is clap's (derive): `--help`/`-h` and `--version` print to stdout and exit 0,
//! usage errors go to stderr with exit 2. A closed stdout (`msprobe summary A B | head -1`) ends
//! the command quietly with exit 0, as Unix filters do.

mod compare;

use clap::{Args, Parser, Subcommand};
use msprobe_core::json::{self, Json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const EXIT_CODES: &str = "Exit codes:
  0  success (also when stdout is closed early, e.g. `| head`)
  1  recover: the dump was rebuilt, but damaged journal entries were skipped (counted above)
  2  error: bad usage, unreadable input, nothing to recover, a comparison that could not run";

#[derive(Parser)]
#[command(
    name = "msprobe",
    version,
    about = "The msprobe-rs command line: summarise, recover and compare precision-debugging dumps",
    after_help = EXIT_CODES
)]
struct Cli {
    /// msprobe 1.1.1's framework option (`msprobe -f mindspore compare ...`): which of msprobe's
    /// compares to follow (they match and judge rows differently); without it, the framework
    /// that made the NPU dump
    #[arg(short = 'f', long = "framework", value_name = "pytorch|mindspore", value_parser = ["pytorch", "mindspore"])]
    framework: Option<String>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// List the step/rank directories under each DIR with their record and tensor-file counts
    #[command(after_help = EXIT_CODES)]
    Summary {
        /// Dump directories (a whole dump, a step or a rank directory)
        #[arg(required = true, value_name = "DIR")]
        dirs: Vec<PathBuf>,
    },
    /// Rebuild dump.json, stack.json and construct.json from the journals a killed run left
    #[command(after_help = EXIT_CODES)]
    Recover {
        /// The dump directory of the killed run
        dir: PathBuf,
        /// Show a progress bar (default: only when stderr is a terminal)
        #[arg(long, overrides_with = "no_progress")]
        progress: bool,
        /// Never show a progress bar
        #[arg(long)]
        no_progress: bool,
    },
    /// Compare two dumps as msprobe 1.1.1's compare does (CSV, XLSX, HTML report, first divergence)
    #[command(after_help = EXIT_CODES)]
    Compare(CompareArgs),
}

/// `msprobe compare NPU BENCH`, or msprobe 1.1.1's `msprobe -f pytorch compare -i compare.json`.
#[derive(Args)]
struct CompareArgs {
    /// The NPU dump and the bench dump (dump.json files, rank, step or dump directories)
    #[arg(value_name = "NPU BENCH", num_args = 0..=2)]
    paths: Vec<PathBuf>,
    /// msprobe 1.1.1's compare.json (npu_path, bench_path, stack_path, is_print_compare_log), instead of NPU BENCH
    #[arg(short = 'i', long = "input_path", value_name = "JSON", conflicts_with = "paths")]
    input_path: Option<PathBuf>,
    /// Output directory
    #[arg(short = 'o', long = "output_path", value_name = "OUT", default_value = "./output")]
    output_path: PathBuf,
    /// Add each record's call stack to the output (msprobe's -s)
    #[arg(short = 's', long = "stack_mode")]
    stack_mode: bool,
    /// Match records by name without their call index (msprobe's fuzzy matching)
    #[arg(short = 'f', long = "fuzzy_match", visible_alias = "fuzzy")]
    fuzzy_match: bool,
    /// Accepted for msprobe 1.1.1's scripts (its "compare only" switch); no effect here
    #[arg(short = 'c', long = "compare_only")]
    compare_only: bool,
    /// Write the CSV (default)
    #[arg(long)]
    csv: bool,
    /// Do not write the CSV
    #[arg(long, overrides_with = "csv")]
    no_csv: bool,
    /// Do not write the XLSX
    #[arg(long)]
    no_xlsx: bool,
    /// Do not write the HTML report
    #[arg(long)]
    no_html: bool,
    /// Show a progress bar (default: only when stderr is a terminal)
    #[arg(long, overrides_with = "no_progress")]
    progress: bool,
    /// Never show a progress bar
    #[arg(long)]
    no_progress: bool,
    /// Do not print msprobe's per-record compare log (is_print_compare_log)
    #[arg(short = 'q', long)]
    quiet: bool,
    /// Relative tolerance of the first-divergence search
    #[arg(long, value_name = "X", default_value_t = 1e-4)]
    rtol: f64,
    /// Absolute tolerance of the first-divergence search
    #[arg(long, value_name = "X", default_value_t = 1e-12)]
    atol: f64,
    /// MindSpore NPU dump against a PyTorch bench (msprobe's -cm [YAML]): cells compared with the
    /// modules of the same name (`Cell.` read as `Module.`), cell names renamed by the YAML
    /// (`fc1.Dense: fc1.Linear`, one flat mapping a line)
    #[arg(long = "cell_mapping", value_name = "YAML", num_args = 0..=1)]
    cell_mapping: Option<Option<PathBuf>>,
    /// MindSpore NPU dump against a PyTorch bench (msprobe's -am): APIs compared by their PyTorch
    /// names (msprobe's built-in table; a user YAML is not supported)
    #[arg(long = "api_mapping", value_name = "YAML", num_args = 0..=1)]
    api_mapping: Option<Option<PathBuf>>,
    /// msprobe's data and layer mappings (-dm, -lm): not supported (README)
    #[arg(long = "data_mapping", alias = "layer_mapping", num_args = 0..=1, hide = true)]
    mapping: Option<Option<String>>,
}

/// Whether progress bars are shown: asked for, refused, or stderr is a terminal.
fn progress_wanted(on: bool, off: bool) -> bool {
    if off {
        return false;
    }
    on || std::io::IsTerminal::is_terminal(&std::io::stderr())
}

fn compare_cmd(a: CompareArgs, framework: Option<&str>) -> Result<(), String> {
    if a.mapping.is_some() {
        return Err(
            "the data and layer mappings across frameworks (-dm, -lm) are not supported (-cm and -am are)".into()
        );
    }
    if (a.cell_mapping.is_some() || a.api_mapping.is_some()) && framework != Some("mindspore") {
        return Err("-cm and -am compare a MindSpore dump with a PyTorch one: they need -f mindspore".into());
    }
    if let Some(Some(p)) = &a.api_mapping {
        return Err(format!(
            "-am with a mapping file ({}) is not supported: -am alone uses msprobe's built-in API table",
            p.display()
        ));
    }
    // msprobe 1.1.1: the cell mapping wins when both are given
    let mapping = match (&a.cell_mapping, &a.api_mapping) {
        (Some(None), _) => compare::ms::Mapping::Cells(Vec::new()),
        (Some(Some(p)), _) => compare::ms::Mapping::Cells(compare::ms::load_cell_mapping(p)?),
        (None, Some(_)) => compare::ms::Mapping::Apis,
        (None, None) => compare::ms::Mapping::None,
    };
    let mut opt = compare::Options {
        out_dir: a.output_path,
        stack_mode: a.stack_mode,
        fuzzy: a.fuzzy_match,
        print_log: false,
        xlsx: !a.no_xlsx,
        csv: !a.no_csv,
        html: !a.no_html,
        progress: progress_wanted(a.progress, a.no_progress),
        tol: compare::divergence::Tolerance { rtol: a.rtol, atol: a.atol },
        timestamp: std::env::var("MSPROBE_COMPARE_TIMESTAMP").ok(),
        mindspore: framework.map(|f| f == "mindspore"),
        mapping,
    };
    let pairs = match (a.input_path, a.paths.as_slice()) {
        (Some(j), []) => {
            let (pairs, print) = compare::from_input_json(&j)?;
            opt.print_log = print && !a.quiet;
            pairs
        }
        (None, [n, b]) => compare::resolve(n, b, None)?,
        _ => return Err("compare needs NPU BENCH, or -i compare.json (see `msprobe compare --help`)".into()),
    };
    compare::run(&pairs, &opt)
}

/// Failures of a command: a message (exit 2), or stdout closed by its reader (quiet exit 0).
enum Fail {
    Msg(String),
    ClosedPipe,
}

impl From<String> for Fail {
    fn from(s: String) -> Self {
        Fail::Msg(s)
    }
}

impl From<std::io::Error> for Fail {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            Fail::ClosedPipe
        } else {
            Fail::Msg(format!("cannot write to stdout: {e}"))
        }
    }
}

fn summary(roots: &[PathBuf]) -> Result<(), Fail> {
    let mut out = std::io::stdout().lock();
    let mut missing = Vec::new();
    for root in roots {
        match summary_one(root, &mut out) {
            Ok(()) => {}
            Err(Fail::Msg(m)) => {
                // Every directory is listed; the ones that could not be are named at the end.
                eprintln!("msprobe: {m}");
                missing.push(root.display().to_string());
            }
            Err(Fail::ClosedPipe) => return Err(Fail::ClosedPipe),
        }
    }
    out.flush()?;
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Fail::Msg(format!(
            "{} of {} directories had no readable dump: {}",
            missing.len(),
            roots.len(),
            missing.join(", ")
        )))
    }
}

/// `p` cut into text and number runs, so that `step2` sorts before `step10`.
fn natural_key(p: &str) -> Vec<(String, u128)> {
    let mut out = Vec::new();
    let mut rest = p;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits > 0 {
            out.push((String::new(), rest[..digits].parse().unwrap_or(u128::MAX)));
            rest = &rest[digits..];
        } else {
            let text = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
            out.push((rest[..text].to_string(), 0));
            rest = &rest[text..];
        }
    }
    out
}

fn summary_one(root: &Path, out: &mut impl Write) -> Result<(), Fail> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(d) = pending.pop() {
        let rd = std::fs::read_dir(&d).map_err(|e| format!("cannot read {}: {e}", d.display()))?;
        for e in rd.flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                // a link is not followed (it may lead outside the dump, or in a cycle)
                pending.push(p);
            } else if p.file_name().map(|n| n == "dump.json").unwrap_or(false) {
                found.push(p);
            }
        }
    }
    // step2 before step10: numbers in the path compare as numbers
    found.sort_by_cached_key(|p| natural_key(&p.to_string_lossy()));
    if found.is_empty() {
        return Err(format!("no dump.json under {}", root.display()).into());
    }
    for p in found {
        let bytes = msprobe_core::fsutil::read_nofollow(&p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
        let text = String::from_utf8(bytes).map_err(|_| format!("{} is not UTF-8 text", p.display()))?;
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
        writeln!(
            out,
            "{}: {} records, {} tensor files (task {}, level {}); first: {}",
            p.parent().unwrap_or(&p).display(),
            n,
            files,
            v.get("task").and_then(Json::as_str).unwrap_or("?"),
            v.get("level").and_then(Json::as_str).unwrap_or("?"),
            first.join(", ")
        )?;
    }
    Ok(())
}

/// `msprobe recover DIR`: Ok(true) when every journal entry was intact, Ok(false) when some
/// were damaged (skipped and counted) or a directory could not be written.
fn recover(dir: &Path, progress: bool) -> Result<bool, Fail> {
    use msprobe_core::journal::PREFIX;
    let bar = progress.then(|| {
        let b = indicatif::ProgressBar::new(0);
        b.set_style(
            indicatif::ProgressStyle::with_template("recover {bar:40} {bytes}/{total_bytes} of journals ({eta})")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    });
    let r = msprobe_core::recover::recover_dir_with(dir, &mut |done, total| {
        if let Some(b) = &bar {
            b.set_length(total);
            b.set_position(done);
        }
    });
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let r = r.map_err(|e| format!("cannot recover {}: {e}", dir.display()))?;
    let dir = dir.display();
    let mut out = std::io::stdout().lock();
    if r.journals == 0 {
        return Err(Fail::Msg(match (r.running, r.unusable) {
            (0, 0) => format!("no journal ({PREFIX}*) found under {dir}; nothing to recover"),
            (0, n) => {
                format!("{n} file(s) named {PREFIX}* under {dir} are not journals of this version; nothing recovered")
            }
            (n, _) => {
                format!("the {n} journal(s) under {dir} belong to processes that are still running; nothing recovered")
            }
        }));
    }
    writeln!(
        out,
        "recovered {} records in {} directories from {} journal(s) ({} torn journal entries skipped, {} damaged entries skipped, {} tensor files missing or cut short)",
        r.records, r.dirs, r.journals, r.torn_lines, r.damaged, r.missing_files
    )?;
    if r.planned_only > 0 {
        writeln!(
            out,
            "  {} records recovered from their launch-time plan (device statistics or host copies not completed before the kill): their statistics are null (uncertain)",
            r.planned_only
        )?;
    }
    for m in &r.missing {
        writeln!(out, "  missing or cut short (removed): {m}")?;
    }
    if r.missing_files > r.missing.len() {
        writeln!(out, "  ... and {} more", r.missing_files - r.missing.len())?;
    }
    for b in &r.beside {
        writeln!(out, "  recovered beside a directory of another run: {}", b.display())?;
    }
    if r.running > 0 {
        writeln!(out, "  {} journal(s) left alone: their processes are still running", r.running)?;
    }
    for f in &r.failed {
        eprintln!("msprobe: cannot recover {f} (its journal is kept)");
    }
    Ok(r.damaged == 0 && r.failed.is_empty())
}

/// msprobe 1.1.1 spells its mapping options with one dash and two letters (`-cm`); clap's short
/// options are one letter, so they are rewritten to their long names before parsing.
fn msprobe_spellings(args: impl Iterator<Item = std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    args.map(|a| match a.to_str() {
        Some("-cm") => "--cell_mapping".into(),
        Some("-am") => "--api_mapping".into(),
        Some("-dm") => "--data_mapping".into(),
        Some("-lm") => "--layer_mapping".into(),
        _ => a,
    })
    .collect()
}

fn main() -> ExitCode {
    msprobe_core::logging::init();
    // compare's report lines use println!; a reader that goes away (`| head`) ends it quietly too.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.starts_with("failed printing to stdout") && msg.contains("Broken pipe") {
            std::process::exit(0);
        }
        default_hook(info)
    }));
    let cli = match Cli::try_parse_from(msprobe_spellings(std::env::args_os())) {
        Ok(c) => c,
        // --help and --version: stdout, exit 0; usage errors: stderr, exit 2.
        Err(e) => {
            let code = e.exit_code();
            if e.print().is_err() && !e.use_stderr() {
                return ExitCode::SUCCESS; // help to a closed pipe
            }
            return ExitCode::from(code.clamp(0, 255) as u8);
        }
    };
    let result = match cli.cmd {
        Cmd::Compare(a) => compare_cmd(a, cli.framework.as_deref()).map(|()| true).map_err(Fail::Msg),
        Cmd::Recover { dir, progress, no_progress } => recover(&dir, progress_wanted(progress, no_progress)),
        Cmd::Summary { dirs } => summary(&dirs).map(|()| true),
    };
    match result {
        Ok(true) | Err(Fail::ClosedPipe) => ExitCode::SUCCESS,
        // Recovered, but some journal entries were damaged (skipped, and counted above).
        Ok(false) => ExitCode::from(1),
        Err(Fail::Msg(e)) => {
            eprintln!("msprobe: {e}");
            ExitCode::from(2)
        }
    }
}
