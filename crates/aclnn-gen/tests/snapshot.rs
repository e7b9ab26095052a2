//! Snapshot of the generator's decisions over the bundled header
//! (`crates/libmsprobe/include/cann/aclnn_ops.h`, through libmsprobe's `wrapper.h` and the same
//! bindgen run as its build script): one line per op, each phase-1 parameter with its kind and
//! role, compared with `tests/snapshots/bundled_ops.txt`.
//!
//! After an intended change (a new op in the header, a changed rule), rewrite the snapshot with
//! `UPDATE_SNAPSHOTS=1 cargo test -p aclnn-gen --test snapshot` and review its diff.

use aclnn_gen::{bindings, emit, parse, report, Headers, Parsed};
use std::path::{Path, PathBuf};

fn libmsprobe_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../libmsprobe")
}

fn bundled() -> Parsed {
    let dir = libmsprobe_dir();
    let scratch = tempfile::tempdir().unwrap();
    let headers = Headers::Bundled { wrapper: dir.join("wrapper.h"), include_dir: dir };
    parse(&bindings(&headers, scratch.path()).expect("bindgen over the bundled header")).expect("bindgen output parses")
}

/// A line diff (longest common subsequence): `-` expected, `+` actual, two lines of context.
fn diff(expected: &str, actual: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
        }
    }
    let mut ops: Vec<(char, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            ops.push((' ', a[i]));
            (i, j) = (i + 1, j + 1);
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            ops.push(('-', a[i]));
            i += 1;
        } else {
            ops.push(('+', b[j]));
            j += 1;
        }
    }
    let changed: Vec<usize> = ops.iter().enumerate().filter(|(_, (c, _))| *c != ' ').map(|(k, _)| k).collect();
    let near = |k: usize| changed.iter().any(|&c| c.abs_diff(k) <= 2);
    let mut out = String::new();
    let mut gap = false;
    for (k, (c, line)) in ops.iter().enumerate() {
        if near(k) {
            out.push_str(&format!("{c} {line}\n"));
            gap = false;
        } else if !gap {
            out.push_str("  ...\n");
            gap = true;
        }
    }
    out
}

fn check_snapshot(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots").join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        eprintln!("rewrote {}", path.display());
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    if expected != actual {
        panic!(
            "{} differs from the generator's decisions (- snapshot, + now):\n{}\n\
             If the change is intended, rewrite it with UPDATE_SNAPSHOTS=1 and review the diff.",
            path.display(),
            diff(&expected, actual)
        );
    }
}

#[test]
fn bundled_ops_snapshot() {
    check_snapshot("bundled_ops.txt", &report(&bundled()));
}

/// Every phase-1 declaration of the bundled header becomes an op: none is skipped or lost.
#[test]
fn bundled_header_fully_wrapped() {
    let header = std::fs::read_to_string(libmsprobe_dir().join("include/cann/aclnn_ops.h")).unwrap();
    let declared =
        header.lines().filter(|l| l.starts_with("aclnnStatus aclnn") && l.contains("GetWorkspaceSize(")).count();
    let parsed = bundled();
    assert!(parsed.skipped.is_empty(), "{:?}", parsed.skipped);
    assert_eq!(parsed.ops.len(), declared);
    // The ops libmsprobe's own tests and the simulator rely on.
    for op in ["Add", "Mm", "Relu", "NLLLoss", "LayerNormBackward", "ApplyAdamW", "InplaceAdd", "Cat"] {
        assert!(parsed.ops.iter().any(|o| o.name == op), "{op}");
    }
}

/// The emitted files are valid Rust and agree with the op list.
#[test]
fn bundled_emitted_code_parses() {
    let parsed = bundled();
    let g = emit(&parsed);
    syn::parse_file(&g.table).expect("aclnn_table.rs parses");
    syn::parse_file(&g.wrappers).expect("aclnn_wrappers.rs parses");
    assert!(g.table.contains(&format!("pub const N_OPS : usize = {}usize ;", parsed.ops.len())));
    for (k, op) in parsed.ops.iter().enumerate() {
        assert!(g.wrappers.contains(&format!("fn p1_{} (", op.name)), "{}", op.name);
        assert!(g.table.contains(&format!("b\"aclnn{}\" => Some (({k}usize , Phase :: Two))", op.name)), "{}", op.name);
    }
}

#[test]
fn diff_is_readable() {
    let d = diff("a\nb\nc\nd\ne\nf\ng\n", "a\nb\nc\nD\ne\nf\ng\n");
    assert_eq!(d, "  ...\n  b\n  c\n- d\n+ D\n  e\n  f\n  ...\n");
}
