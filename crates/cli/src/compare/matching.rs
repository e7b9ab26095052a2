//! Record matching and the rows per tensor (`Comparator.compare_process`, `match_op`,
//! `check_op` and `get_accuracy`/`get_un_match_accuracy` of msprobe 1.1.1).

use super::parse::{has_part, Op, Struct};
use super::value::Mode;
use super::value::{py_float_str, Cell};

pub const N_A: &str = "N/A";
pub const NAN: &str = "Nan";
pub const NO_BENCH: &str = "No bench data matched.";

/// A table row: the header's cells, then the stack cell, then (tensor mode) the data name.
#[derive(Clone, Debug)]
pub struct Row {
    pub cells: Vec<Cell>,
    pub stack: Cell,
    pub data_name: Option<String>,
    /// index of the NPU record (in dump order) this row belongs to
    pub record: usize,
    pub is_input: bool,
}

/// msprobe's `gen_dtype_condition`: equal dtype names, or one of its loose pairs (half vs float,
/// half vs bfloat16) in either framework's spelling.
pub(super) fn dtypes_match(n: &str, b: &str) -> bool {
    const LOOSE: [(&str, &str); 8] = [
        ("Float16", "Float32"),
        ("Float32", "Float16"),
        ("Float16", "BFloat16"),
        ("BFloat16", "Float16"),
        ("torch.float16", "torch.float32"),
        ("torch.float32", "torch.float16"),
        ("torch.float16", "torch.bfloat16"),
        ("torch.bfloat16", "torch.float16"),
    ];
    n == b || LOOSE.iter().any(|(x, y)| n == *x && b == *y)
}

fn check_type_shape_match(n: &[Struct], b: &[Struct]) -> bool {
    let mut ok = false;
    for (x, y) in n.iter().zip(b) {
        let shape_match = x.shape == y.shape;
        let type_match = x.dtype == y.dtype || dtypes_match(&x.dtype.py_str(), &y.dtype.py_str());
        ok = shape_match && type_match;
        if !ok {
            return false;
        }
    }
    ok
}

fn check_struct_match(n: &Op, b: &Op) -> bool {
    if n.input_struct == b.input_struct && n.output_struct == b.output_struct {
        return true;
    }
    if n.input_struct.is_empty() || b.input_struct.is_empty() || n.input_struct.len() != b.input_struct.len() {
        return false;
    }
    check_type_shape_match(&n.input_struct, &b.input_struct)
        && check_type_shape_match(&n.output_struct, &b.output_struct)
}

/// msprobe's `rename_api`: the name without its call index, split at `process`.
fn rename_api(name: &str, process: &str) -> Option<String> {
    let mut parts = name.split(process);
    let head = parts.next()?;
    let in_out = parts.next()?;
    let mut r = head.rsplitn(3, '.').collect::<Vec<_>>();
    r.reverse();
    Some(format!("{}{}", r[0], in_out))
}

fn fuzzy_check_name(n: &str, b: &str) -> bool {
    for p in ["forward", "backward"] {
        if n.contains(p) && b.contains(p) {
            return rename_api(n, p) == rename_api(b, p);
        }
    }
    n == b
}

fn check_op(n: &Op, b: &Op, fuzzy: bool) -> bool {
    let struct_match = check_struct_match(n, b);
    if !fuzzy {
        return n.names == b.names && struct_match;
    }
    let names = !n.names.is_empty()
        && n.names.len() == b.names.len()
        && n.names.iter().zip(&b.names).all(|(x, y)| fuzzy_check_name(x, y));
    names && struct_match
}

fn match_op(nq: &[(usize, Op)], bq: &[(usize, Op)], fuzzy: bool) -> Option<(usize, usize)> {
    let last_n = &nq[nq.len() - 1].1;
    for (bi, b) in bq[..bq.len() - 1].iter().enumerate() {
        if check_op(last_n, &b.1, fuzzy) {
            return Some((nq.len() - 1, bi));
        }
    }
    let last_b = &bq[bq.len() - 1].1;
    if check_op(last_n, last_b, fuzzy) {
        return Some((nq.len() - 1, bq.len() - 1));
    }
    for (ni, n) in nq[..nq.len() - 1].iter().enumerate() {
        if check_op(&n.1, last_b, fuzzy) {
            return Some((ni, bq.len() - 1));
        }
    }
    None
}

/// The table rows, in msprobe's order.
pub struct Matched {
    pub rows: Vec<Row>,
}

/// `compare_process`: walks both dumps in step, matching records as msprobe does.
pub fn compare_process(npu: &[Option<Op>], bench: &[Option<Op>], fuzzy: bool, mode: Mode) -> Matched {
    let mut nq: Vec<(usize, Op)> = Vec::new();
    let mut bq: Vec<(usize, Op)> = Vec::new();
    let mut rows = Vec::new();
    let (mut ni, mut bi) = (0usize, 0usize);
    let (mut more_n, mut more_b) = (true, true);
    loop {
        if !more_n && !more_b {
            break;
        }
        let last_n = nq.len();
        if ni < npu.len() {
            if let Some(op) = &npu[ni] {
                nq.push((ni, op.clone()));
            }
            ni += 1;
        } else {
            more_n = false;
        }
        let last_b = bq.len();
        if bi < bench.len() {
            if let Some(op) = &bench[bi] {
                bq.push((bi, op.clone()));
            }
            bi += 1;
        } else {
            more_b = false;
        }
        let both_empty = nq.is_empty() && bq.is_empty();
        let no_change = nq.len() == last_n && bq.len() == last_b;
        if both_empty || no_change {
            continue;
        }
        if nq.is_empty() != bq.is_empty() {
            log::info!("Please check whether the number and calls of APIs in NPU and Bench models are consistent.");
            break;
        }
        let Some((nm, bm)) = match_op(&nq, &bq, fuzzy) else { continue };
        for (idx, op) in &nq[..nm] {
            un_match_rows(&mut rows, *idx, op, mode);
        }
        let (nidx, nop) = &nq[nm];
        let (_, bop) = &bq[bm];
        accuracy_rows(&mut rows, *nidx, nop, bop, mode);
        nq.drain(..=nm);
        bq.drain(..=bm);
    }
    for (idx, op) in &nq {
        un_match_rows(&mut rows, *idx, op, mode);
    }
    Matched { rows }
}

fn process_summary(s: &[Cell; 4]) -> Vec<Cell> {
    s.iter().map(|c| if matches!(c, Cell::F(f) if f.is_nan()) { Cell::s(NAN) } else { c.clone() }).collect()
}

/// `get_rela_diff_summary_mode`: fills the differences and relative errors; returns the Warning flag.
fn rela_diff(item: &mut [Cell], n: &[Cell; 4], b: &[Cell; 4]) -> bool {
    const START: usize = 6;
    let mut warning = false;
    for i in 0..4 {
        if n[i].is_num_not_bool() && b[i].is_num_not_bool() {
            let diff = match (&n[i], &b[i]) {
                (Cell::I(x), Cell::I(y)) => Cell::I(x - y),
                (x, y) => Cell::F(x.num().unwrap_or(0.0) - y.num().unwrap_or(0.0)),
            };
            let (nv, bv) = (n[i].num().unwrap_or(0.0), b[i].num().unwrap_or(0.0));
            let dv = diff.num().unwrap_or(0.0);
            if dv.is_nan() {
                item[START + i] = Cell::s(NAN);
                item[START + i + 4] = Cell::s(NAN);
            } else {
                let rel = if bv != 0.0 {
                    Cell::S(format!("{}%", py_float_str(((dv / bv) * 100.0).abs())))
                } else {
                    Cell::s(N_A)
                };
                let magnitude = dv.abs() / (nv.abs().max(bv.abs()) + 1e-10);
                if magnitude > 0.5 {
                    warning = true;
                }
                item[START + i] = diff;
                item[START + i + 4] = rel;
            }
        } else {
            item[START + i] = Cell::s(N_A);
            item[START + i + 4] = Cell::s(N_A);
        }
    }
    for c in item.iter_mut().skip(START) {
        let s = c.py_str();
        if s == "inf" || s == "-inf" || s == "nan" {
            *c = Cell::S(format!("{s}\t"));
        }
    }
    warning
}

fn struct_of(op: &Op, input: bool) -> &[Struct] {
    if input {
        &op.input_struct
    } else {
        &op.output_struct
    }
}

fn is_input_name(name: &str) -> bool {
    has_part(name, "input") || has_part(name, "kwargs")
}

/// `get_accuracy`: the rows of a matched pair.
pub fn accuracy_rows(rows: &mut Vec<Row>, record: usize, n: &Op, b: &Op, mode: Mode) {
    let n_in = n.names.iter().filter(|x| is_input_name(x)).count();
    let b_in = b.names.iter().filter(|x| is_input_name(x)).count();
    core(rows, record, n, b, mode, (0, n_in), (0, b_in), true);
    core(rows, record, n, b, mode, (n_in, n.names.len() - n_in), (b_in, b.names.len() - b_in), false);
}

#[allow(clippy::too_many_arguments)]
fn core(
    rows: &mut Vec<Row>,
    record: usize,
    n: &Op,
    b: &Op,
    mode: Mode,
    ns: (usize, usize),
    bs: (usize, usize),
    input: bool,
) {
    let (n_start, n_len) = ns;
    let (b_start, b_len) = bs;
    let nst = struct_of(n, input);
    let bst = struct_of(b, input);
    let stack_for = |index: usize| if input && index == 0 { n.stack.clone() } else { Cell::s("None") };
    for index in 0..n_len.min(b_len) {
        let (Some(nn), Some(bn), Some(ns), Some(bs)) =
            (n.names.get(n_start + index), b.names.get(b_start + index), nst.get(index), bst.get(index))
        else {
            log::warn!("index out of bounds comparing {} with {}", n.record, b.record);
            return;
        };
        let mut item = vec![
            Cell::S(nn.clone()),
            Cell::S(bn.clone()),
            ns.dtype.clone(),
            bs.dtype.clone(),
            ns.shape.clone(),
            bs.shape.clone(),
        ];
        if mode == Mode::Md5 {
            let (nm, bm) = (ns.md5.clone().unwrap_or(Cell::N), bs.md5.clone().unwrap_or(Cell::N));
            let res = if nm == bm { "pass" } else { "Different" };
            item.extend([nm, bm, Cell::s(res)]);
            rows.push(Row { cells: item, stack: stack_for(index), data_name: None, record, is_input: input });
            continue;
        }
        item.extend(std::iter::repeat_n(Cell::s(" "), if mode == Mode::Summary { 8 } else { 5 }));
        let nsum = &n.summary[n_start + index];
        let bsum = &b.summary[b_start + index];
        item.extend(process_summary(nsum));
        item.extend(process_summary(bsum));
        let mut err = String::new();
        let acc = if mode == Mode::Summary {
            let w = rela_diff(&mut item, nsum, bsum);
            if w {
                err.push_str("Need double check api accuracy.");
            }
            if w {
                "Warning"
            } else {
                ""
            }
        } else {
            "Yes"
        };
        item.push(Cell::s(acc));
        item.push(Cell::S(err));
        let data_name = if mode == Mode::All { n.data_names.get(n_start + index).cloned() } else { None };
        rows.push(Row { cells: item, stack: stack_for(index), data_name, record, is_input: input });
    }
    for index in b_len..n_len {
        let (Some(nn), Some(ns)) = (n.names.get(n_start + index), nst.get(index)) else { return };
        let mut item =
            vec![Cell::S(nn.clone()), Cell::s(NAN), ns.dtype.clone(), Cell::s(NAN), ns.shape.clone(), Cell::s(NAN)];
        if mode == Mode::Md5 {
            item.extend([ns.md5.clone().unwrap_or(Cell::N), Cell::s(NAN), Cell::s(NAN)]);
            rows.push(Row { cells: item, stack: Cell::s("None"), data_name: None, record, is_input: input });
            continue;
        }
        item.extend(std::iter::repeat_n(Cell::s(" "), if mode == Mode::Summary { 8 } else { 5 }));
        item.extend(n.summary[n_start + index].iter().cloned());
        item.extend(std::iter::repeat_n(Cell::s(NAN), 4));
        item.push(Cell::s("Yes"));
        item.push(Cell::s(""));
        let data_name = if mode == Mode::All { n.data_names.get(n_start + index).cloned() } else { None };
        rows.push(Row { cells: item, stack: stack_for(index), data_name, record, is_input: input });
    }
}

/// `get_un_match_accuracy`: the rows of an NPU record without a bench match.
pub fn un_match_rows(rows: &mut Vec<Row>, record: usize, n: &Op, mode: Mode) {
    let mut index_out = 0;
    let mut cur: Option<&Struct> = None;
    for (index, name) in n.names.iter().enumerate() {
        let input = is_input_name(name);
        if input {
            cur = n.input_struct.get(index);
        }
        if has_part(name, "output") {
            cur = n.output_struct.get(index_out);
            index_out += 1;
        }
        let Some(st) = cur else {
            log::warn!("index out of bounds in the unmatched record {}", n.record);
            return;
        };
        let mut item =
            vec![Cell::S(name.clone()), Cell::s(N_A), st.dtype.clone(), Cell::s(N_A), st.shape.clone(), Cell::s(N_A)];
        let stack = if index == 0 { n.stack.clone() } else { Cell::s("None") };
        if mode == Mode::Md5 {
            item.extend(std::iter::repeat_n(Cell::s(N_A), 3));
            rows.push(Row { cells: item, stack, data_name: None, record, is_input: input });
            continue;
        }
        item.extend(std::iter::repeat_n(Cell::s(N_A), if mode == Mode::Summary { 8 } else { 5 }));
        item.extend(n.summary[index].iter().cloned());
        item.extend(std::iter::repeat_n(Cell::s(N_A), 4));
        item.push(Cell::s(N_A));
        item.push(Cell::s(NO_BENCH));
        let data_name = if mode == Mode::All { Some("-1".to_string()) } else { None };
        rows.push(Row { cells: item, stack, data_name, record, is_input: input });
    }
}
