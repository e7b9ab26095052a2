//! msprobe 1.1.1's MindSpore compare (`MSComparator` in `mindspore/compare/ms_compare.py`), which
//! differs from its PyTorch compare in how rows are matched and how statistics are judged:
//!
//! - every record is flattened into one row per tensor (`gen_data_df`), and an NPU row's bench is
//!   the bench row of the same name and the same `str(shape)` (a pandas merge on both; NPU rows keep
//!   their dump order, bench rows without an NPU row are dropped), then cleared again when the two
//!   dtypes are neither equal nor a float16/float32/bfloat16 pair;
//! - statistics cells: `None` shows as "N/A", NaN as "Nan"; a relative error over a bench value of
//!   0 is "Nan" (PyTorch's compare says "N/A"); Warning only when all four differences exceed half
//!   of `|max(npu, bench)|` (PyTorch's: any one of them, over the larger magnitude);
//! - with `-cm` (a MindSpore dump against a PyTorch bench) an NPU row is matched by its name with
//!   `Cell` read as `Module` and its cell renamed by the mapping, with `-am` by its API's PyTorch
//!   name (msprobe's built-in table), and its dtype by torch's name;
//! - the stack goes on every row of a record, and a missing md5 or stack shows as "N/A" (the
//!   merged table's `fillna`); in tensor mode an NPU row without a bench keeps its
//!   data file name, so its message is "Bench does not have data file.".

use super::matching::{dtypes_match, Matched, Row, NAN, NO_BENCH, N_A};
use super::parse::Op;
use super::value::{py_float_str, Cell, Mode};
use std::collections::HashMap;

/// One row of `gen_data_df`.
struct Flat {
    name: String,
    dtype: String,
    shape: String,
    md5: Cell,
    summary: [Cell; 4],
    stack: Cell,
    data_name: Option<String>,
    record: usize,
    is_input: bool,
}

fn flatten(ops: &[Option<Op>], mode: Mode) -> Vec<Flat> {
    let mut out = Vec::new();
    for (record, op) in ops.iter().enumerate() {
        let Some(op) = op else { continue };
        let (mut ii, mut oi) = (0usize, 0usize);
        for (k, name) in op.names.iter().enumerate() {
            let is_input = name.contains(".input.") || name.contains(".kwargs.");
            let st = if is_input {
                ii += 1;
                op.input_struct.get(ii - 1)
            } else {
                oi += 1;
                op.output_struct.get(oi - 1)
            };
            let Some(st) = st else {
                log::warn!("{}: more rows than tensors in its record; the rest is skipped", op.record);
                break;
            };
            out.push(Flat {
                name: name.clone(),
                dtype: st.dtype.py_str(),
                shape: st.shape.py_str(),
                md5: na_if_none(st.md5.clone().unwrap_or(Cell::N)),
                summary: op.summary.get(k).cloned().unwrap_or([Cell::N, Cell::N, Cell::N, Cell::N]),
                stack: na_if_none(op.stack.clone()),
                data_name: if mode == Mode::All { op.data_names.get(k).cloned() } else { None },
                record,
                is_input,
            });
        }
    }
    out
}

/// The merged table's `fillna("N/A")`: a `None` md5 or stack becomes "N/A".
fn na_if_none(c: Cell) -> Cell {
    if c == Cell::N {
        Cell::s(N_A)
    } else {
        c
    }
}

/// `dtype_mapping` (core/compare/check.py): a MindSpore dtype as torch names it.
fn torch_dtype(ms: &str) -> Option<&'static str> {
    Some(match ms {
        "Int8" => "torch.int8",
        "UInt8" => "torch.uint8",
        "Int16" => "torch.int16",
        "UInt16" => "torch.uint16",
        "Int32" => "torch.int32",
        "UInt32" => "torch.uint32",
        "Int64" => "torch.int64",
        "UInt64" => "torch.uint64",
        "Float16" => "torch.float16",
        "Float32" => "torch.float32",
        "Float64" => "torch.float64",
        "Bool" => "torch.bool",
        "BFloat16" => "torch.bfloat16",
        "Complex64" => "torch.complex64",
        "Complex128" => "torch.complex128",
        _ => return None,
    })
}

/// The first `.forward.` or `.backward.` in a name: (start, length).
fn direction_at(name: &str) -> Option<(usize, usize)> {
    let f = name.find(".forward.").map(|i| (i, ".forward.".len()));
    let b = name.find(".backward.").map(|i| (i, ".backward.".len()));
    match (f, b) {
        (Some(x), Some(y)) => Some(if x.0 <= y.0 { x } else { y }),
        (x, y) => x.or(y),
    }
}

/// `process_cell_mapping`: the name an NPU row is matched by when a MindSpore dump is compared
/// with a PyTorch one (`-cm`): "N/A" (matches nothing) unless the name reads
/// `.+(?:for|back)ward\..+`; `Cell` → `Module` (first occurrence); the cell name (between the
/// first dot and the direction) renamed by the mapping.
fn cell_key(name: &str, map: &[(String, String)]) -> String {
    let shaped = name.char_indices().skip(1).any(|(i, _)| {
        let rest = &name[i..];
        (rest.starts_with("forward.") && rest.len() > "forward.".len())
            || (rest.starts_with("backward.") && rest.len() > "backward.".len())
    });
    if !shaped {
        return N_A.to_string();
    }
    let key = name.replacen("Cell", "Module", 1);
    if map.is_empty() {
        return key;
    }
    let rest = key.split_once('.').map(|(_, r)| r).unwrap_or(&key);
    let cell = match direction_at(rest) {
        Some((i, _)) => &rest[..i],
        None => rest,
    };
    match map.iter().find(|(k, _)| k == cell) {
        Some((k, v)) => key.replacen(k.as_str(), v, 1),
        None => key,
    }
}

/// Reads `-cm`'s YAML: one flat mapping, `mindspore_cell_name: pytorch_module_name` a line
/// (`#` comments, optional quotes). Anything else is refused, naming the line.
pub fn load_cell_mapping(path: &std::path::Path) -> Result<Vec<(String, String)>, String> {
    // a regular file only (no link followed; a FIFO would block)
    let bytes = msprobe_core::fsutil::read_nofollow(path)
        .map_err(|e| format!("cannot read the cell mapping {}: {e}", path.display()))?;
    let text = String::from_utf8(bytes).map_err(|_| format!("the cell mapping {} is not UTF-8", path.display()))?;
    flat_yaml(&text, &path.display().to_string())
}

/// msprobe 1.1.1's built-in MindSpore → PyTorch API names (`-am`).
const MS_TO_PT_API: &str = include_str!("ms_to_pt_api.yaml");

/// `load_internal_api`.
fn internal_api_mapping() -> HashMap<String, String> {
    flat_yaml(MS_TO_PT_API, "ms_to_pt_api.yaml").unwrap_or_default().into_iter().collect()
}

/// `process_internal_api_mapping`: `Mint.` → `Torch.`, `MintFunctional.` → `Functional.`, other
/// APIs by the built-in table (Python's `str.replace`: every occurrence).
fn api_key(name: &str, table: &HashMap<String, String>) -> String {
    let mut parts = name.splitn(3, '.');
    let (Some(class), Some(api)) = (parts.next(), parts.next()) else { return name.to_string() };
    let ms_api = format!("{class}.{api}");
    match class {
        "Mint" => name.replace("Mint", "Torch"),
        "MintFunctional" => name.replace("MintFunctional", "Functional"),
        _ => match table.get(&ms_api) {
            Some(pt) => name.replace(&ms_api, pt),
            None => name.to_string(),
        },
    }
}

/// One flat YAML mapping, `key: value` a line (`#` comments, optional quotes); anything else is
/// refused, naming the line.
fn flat_yaml(text: &str, path: &str) -> Result<Vec<(String, String)>, String> {
    let unquote = |s: &str| -> String {
        let s = s.trim();
        for q in ['"', '\''] {
            if s.len() >= 2 && s.starts_with(q) && s.ends_with(q) {
                return s[1..s.len() - 1].to_string();
            }
        }
        s.to_string()
    };
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let body = match line.find(" #") {
            Some(p) => &line[..p],
            None => line,
        };
        if body.trim().is_empty() || body.trim_start().starts_with('#') {
            continue;
        }
        let Some((k, v)) = body.split_once(": ").or_else(|| body.strip_suffix(':').map(|k| (k, ""))) else {
            return Err(format!(
                "{path} line {}: {line:?} is not `name: name` (one flat YAML mapping expected)",
                i + 1
            ));
        };
        if line.starts_with([' ', '\t', '-']) || v.trim().is_empty() {
            return Err(format!(
                "{path} line {}: {line:?} is not `name: name` (one flat YAML mapping expected)",
                i + 1
            ));
        }
        out.push((unquote(k), unquote(v)));
    }
    Ok(out)
}

/// `set_summary`: `None` → "N/A", NaN (or the text "nan" in any case) → "Nan".
fn set_summary(s: &[Cell; 4]) -> [Cell; 4] {
    s.clone().map(|c| match c {
        Cell::N => Cell::s(N_A),
        Cell::F(f) if f.is_nan() => Cell::s(NAN),
        Cell::S(t) if t.eq_ignore_ascii_case("nan") => Cell::s(NAN),
        other => other,
    })
}

/// `pd.to_numeric(str(v), errors='coerce')`: the number a cell's text reads as, if any.
fn to_numeric(c: &Cell) -> Option<f64> {
    match c {
        Cell::F(f) => Some(*f),
        Cell::I(i) => Some(*i as f64),
        Cell::S(s) => {
            let t = s.trim();
            let l = t.to_ascii_lowercase();
            if matches!(l.as_str(), "inf" | "+inf" | "-inf" | "nan" | "+nan" | "-nan") || t.parse::<f64>().is_ok() {
                t.parse::<f64>().ok().or(Some(f64::NAN))
            } else {
                None
            }
        }
        Cell::B(_) | Cell::N => None,
    }
}

/// `type_check`: a number, or text that reads as one, or "nan" in any case.
fn numeric(c: &Cell) -> bool {
    to_numeric(c).is_some()
}

/// `calc_summary_diff` for one statistic of a matched row: (difference, relative error, over
/// the warning magnitude).
fn summary_diff(n: &Cell, b: &Cell) -> (Cell, Cell, bool) {
    if !numeric(n) || !numeric(b) {
        return (Cell::s(N_A), Cell::s(N_A), false);
    }
    let (x, y) = (to_numeric(n).unwrap_or(f64::NAN), to_numeric(b).unwrap_or(f64::NAN));
    let diff = match (n, b) {
        (Cell::I(p), Cell::I(q)) => Cell::I(p - q),
        _ => Cell::F(x - y),
    };
    let d = x - y;
    if d.is_nan() {
        return (Cell::s(NAN), Cell::s(NAN), false);
    }
    // `pt_val == 0` on the cell as it is (a "Nan" text is not 0)
    let bench_zero = matches!(b, Cell::F(f) if *f == 0.0) || matches!(b, Cell::I(0));
    let rel = if bench_zero { Cell::s(NAN) } else { Cell::S(format!("{}%", py_float_str((d / y * 100.0).abs()))) };
    // |diff| / (|np.maximum(npu, bench)| + EPSILON) > MAGNITUDE; NaN compares false
    let m = x.max(y);
    let m = if x.is_nan() || y.is_nan() { f64::NAN } else { m };
    let over = d.abs() / (m.abs() + 1e-10) > 0.5;
    (diff, rel, over)
}

/// `MSComparator.compare_process` + `make_result_df` + `calc_accuracy`: the rows of an NPU dump
/// against a bench dump (tensor metrics are filled afterwards, as for PyTorch).
/// Which names an NPU row is matched by.
#[derive(Clone, Debug, Default)]
pub enum Mapping {
    /// its own (a MindSpore bench)
    #[default]
    None,
    /// `-cm [YAML]`: a PyTorch bench; cells read as modules, renamed by these pairs
    Cells(Vec<(String, String)>),
    /// `-am`: a PyTorch bench; APIs by msprobe's built-in table
    Apis,
}

/// `mapping`: `-cm` or `-am` (a PyTorch bench).
pub fn compare_process(npu: &[Option<Op>], bench: &[Option<Op>], mode: Mode, mapping: &Mapping) -> Matched {
    let api_table = if matches!(mapping, Mapping::Apis) { internal_api_mapping() } else { HashMap::new() };
    let cross = !matches!(mapping, Mapping::None);
    let nrows = flatten(npu, mode);
    let brows = flatten(bench, mode);
    let by_key: HashMap<(&str, &str), &Flat> = brows.iter().map(|b| ((b.name.as_str(), b.shape.as_str()), b)).collect();
    let mut rows = Vec::with_capacity(nrows.len());
    for n in &nrows {
        let key = match mapping {
            Mapping::Cells(map) => cell_key(&n.name, map),
            Mapping::Apis => api_key(&n.name, &api_table),
            Mapping::None => n.name.clone(),
        };
        let ndtype = if cross { torch_dtype(&n.dtype).unwrap_or(&n.dtype) } else { &n.dtype };
        let b = by_key.get(&(key.as_str(), n.shape.as_str())).copied().filter(|b| dtypes_match(ndtype, &b.dtype));
        let mut cells = vec![
            Cell::S(n.name.clone()),
            b.map(|b| Cell::S(b.name.clone())).unwrap_or(Cell::s(N_A)),
            Cell::S(n.dtype.clone()),
            b.map(|b| Cell::S(b.dtype.clone())).unwrap_or(Cell::s(N_A)),
            Cell::S(n.shape.clone()),
            b.map(|b| Cell::S(b.shape.clone())).unwrap_or(Cell::s(N_A)),
        ];
        match mode {
            Mode::Md5 => {
                let bm = b.map(|b| b.md5.clone()).unwrap_or(Cell::s(N_A));
                let res = match b {
                    None => N_A,
                    Some(_) if n.md5 == bm => "pass",
                    Some(_) => "Different",
                };
                cells.extend([n.md5.clone(), bm, Cell::s(res)]);
            }
            Mode::Summary => {
                let ns = set_summary(&n.summary);
                let bs = b.map(|b| set_summary(&b.summary)).unwrap_or_else(|| std::array::from_fn(|_| Cell::s(N_A)));
                let mut diffs = vec![Cell::s(N_A); 8];
                let mut all_over = b.is_some();
                if b.is_some() {
                    for i in 0..4 {
                        let (d, r, over) = summary_diff(&ns[i], &bs[i]);
                        diffs[i] = d;
                        diffs[4 + i] = r;
                        all_over &= over;
                    }
                }
                cells.extend(diffs);
                cells.extend(ns);
                cells.extend(bs);
                match b {
                    None => cells.extend([Cell::s(N_A), Cell::s(NO_BENCH)]),
                    Some(_) if all_over => {
                        cells.extend([Cell::s("Warning"), Cell::s("Need double check api accuracy.")])
                    }
                    Some(_) => cells.extend([Cell::s(""), Cell::s("")]),
                }
            }
            Mode::All => {
                let fill = if b.is_some() { "" } else { N_A };
                cells.extend(std::iter::repeat_n(Cell::s(fill), 5));
                cells.extend(set_summary(&n.summary));
                cells.extend(
                    b.map(|b| set_summary(&b.summary)).unwrap_or_else(|| std::array::from_fn(|_| Cell::s(N_A))),
                );
                cells.push(Cell::s(if b.is_some() { "Yes" } else { N_A }));
                cells.push(Cell::s(if b.is_some() { "" } else { NO_BENCH }));
            }
        }
        rows.push(Row {
            cells,
            stack: n.stack.clone(),
            data_name: n.data_name.clone(),
            record: n.record,
            is_input: n.is_input,
        });
    }
    Matched { rows }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_rules_of_the_mindspore_compare() {
        // bench 0: relative error "Nan"
        let (d, r, _) = summary_diff(&Cell::F(0.5), &Cell::F(0.0));
        assert_eq!((d, r), (Cell::F(0.5), Cell::s(NAN)));
        // a "Nan" on one side: both "Nan"
        let (d, r, o) = summary_diff(&Cell::s(NAN), &Cell::F(1.0));
        assert_eq!((d, r, o), (Cell::s(NAN), Cell::s(NAN), false));
        // N/A on one side: both N/A
        let (d, r, _) = summary_diff(&Cell::s(N_A), &Cell::F(1.0));
        assert_eq!((d, r), (Cell::s(N_A), Cell::s(N_A)));
        // magnitude over |np.maximum(npu, bench)|, not over the larger magnitude
        let (_, r, o) = summary_diff(&Cell::F(-1.0), &Cell::F(-3.0));
        assert_eq!(r, Cell::s("66.66666666666666%"));
        assert!(o, "|2| / |max(-1, -3)| = 2 > 0.5");
    }

    #[test]
    fn api_mapping_keys() {
        let t = internal_api_mapping();
        assert!(t.len() > 300, "{}", t.len());
        assert_eq!(api_key("Mint.mul.0.forward.input.0", &t), "Torch.mul.0.forward.input.0");
        assert_eq!(api_key("MintFunctional.silu.0.forward.output.0", &t), "Functional.silu.0.forward.output.0");
        assert_eq!(api_key("Functional.add.0.forward.input.0", &t), "Torch.add.0.forward.input.0");
        assert_eq!(api_key("Primitive.add.Add.0.forward.input.0", &t), "Primitive.add.Add.0.forward.input.0");
    }

    #[test]
    fn cell_mapping_keys() {
        let map = vec![("fc1.Dense".to_string(), "fc1.Linear".to_string())];
        assert_eq!(cell_key("Cell.fc1.Dense.forward.0.input.0", &map), "Module.fc1.Linear.forward.0.input.0");
        assert_eq!(cell_key("Cell.fc2.Dense.backward.0.output.0", &map), "Module.fc2.Dense.backward.0.output.0");
        assert_eq!(cell_key("Cell.relu.ReLU.forward.0.input.0", &[]), "Module.relu.ReLU.forward.0.input.0");
        assert_eq!(cell_key("forward.0", &map), N_A);
        assert_eq!(cell_key("Functional.relu.0.forward.input.0", &map), "Functional.relu.0.forward.input.0");
    }
}
