//! msprobe 1.1.1's highlighting (`highlight.py`): red and yellow rows, and the messages they add
//! to `Err_message`.

use super::value::Cell;
use super::value::Mode;

#[derive(Default)]
pub struct Highlight {
    pub red: std::collections::BTreeSet<usize>,
    pub yellow: std::collections::BTreeSet<usize>,
    red_lines: Vec<(usize, Vec<&'static str>)>,
    yellow_lines: Vec<(usize, Vec<&'static str>)>,
}

fn add(list: &mut Vec<(usize, Vec<&'static str>)>, num: usize, msg: &'static str) {
    if let Some(e) = list.iter_mut().find(|e| e.0 == num) {
        e.1.push(msg);
    } else {
        list.push((num, vec![msg]));
    }
}

struct Idx {
    npu_max: usize,
    npu_min: usize,
    bench_max: usize,
    diff: usize,
    cos: usize,
    one: usize,
}

fn idx(mode: Mode) -> Idx {
    match mode {
        Mode::Summary => Idx { npu_max: 14, npu_min: 15, bench_max: 18, diff: 6, cos: 0, one: 0 },
        _ => Idx { npu_max: 11, npu_min: 12, bench_max: 15, diff: 7, cos: 6, one: 9 },
    }
}

fn n(c: &Cell) -> f64 {
    c.num().unwrap_or(f64::NAN)
}

fn find_error_rows(
    rows: &[Vec<Cell>],
    start: usize,
    n_in: usize,
    mode: Mode,
    red: &mut Vec<(usize, Vec<&'static str>)>,
    yellow: &mut Vec<(usize, Vec<&'static str>)>,
) {
    let ix = idx(mode);
    for (i, line) in rows.iter().enumerate() {
        let num = start + i;
        let over = |c: &Cell| matches!(c.py_str().as_str(), "nan\t" | "inf\t" | "-inf\t" | "nan" | "inf" | "-inf");
        if over(&line[ix.npu_max]) || over(&line[ix.npu_min]) {
            add(red, num, "maximum or minimum is nan, -inf, or inf");
            continue;
        }
        if line[ix.diff].is_num() && n(&line[ix.diff]).abs() > 1e10 {
            add(red, num, "maximum absolute error exceeds 1e+10");
        }
    }
    let numeric = |l: &Vec<Cell>| l[ix.npu_max].is_num() && l[ix.bench_max].is_num() && l[ix.diff].is_num();
    for (k, out) in rows.iter().enumerate().skip(n_in) {
        let num = start + k;
        if !numeric(out) {
            continue;
        }
        for inp in rows[..n_in.min(rows.len())].iter() {
            if !numeric(inp) {
                continue;
            }
            // CheckOrderMagnitude
            let (di, dout) = (n(&inp[ix.diff]).abs(), n(&out[ix.diff]).abs());
            if di <= dout {
                let io = if di < 1.0 { 0.0 } else { di.log10() };
                let oo = if dout < 1.0 { 0.0 } else { dout.log10() };
                if oo - io >= 1.0 {
                    add(yellow, num, "maximum absolute error of both input and output exceed 1, with the output larger by an order of magnitude");
                }
            }
            if mode == Mode::Summary {
                let rel = |l: &Vec<Cell>| (n(&l[ix.diff]) / n(&l[ix.bench_max]).max(0.01)).abs();
                let (ri, ro) = (rel(inp), rel(out));
                if ro > 0.5 {
                    add(red, num, "maximum relative error exceeds 0.5");
                } else if ro > 0.1 && ri < 0.01 {
                    add(
                        yellow,
                        num,
                        "The output's maximum relative error exceeds 0.1, while the input's is below 0.01",
                    );
                }
            } else {
                if inp[ix.one].is_num() && out[ix.one].is_num() {
                    let (a, b) = (n(&inp[ix.one]), n(&out[ix.one]));
                    if a > 0.9 && b < 0.6 {
                        add(
                            red,
                            num,
                            "The input's one thousandth err ratio exceeds 0.9, while the output's is below 0.6",
                        );
                    } else if a - b > 0.1 {
                        add(
                            yellow,
                            num,
                            "The output's one thousandth err ratio decreases by more than 0.1 compared to the input's",
                        );
                    }
                }
                if inp[ix.cos].is_num() && out[ix.cos].is_num() && n(&inp[ix.cos]) - n(&out[ix.cos]) > 0.1 {
                    add(yellow, num, "The output's cosine decreases by more than 0.1 compared to the input's");
                }
            }
        }
    }
}

fn name_and_state(name: &str) -> (&str, bool) {
    if let Some(p) = name.find("input") {
        (&name[..p], true)
    } else {
        (name.split("output").next().unwrap_or(name), false)
    }
}

/// `find_compare_result_error_rows` + `update_highlight_err_msg`: colours rows and appends the
/// messages to the `Err_message` column `err_col`.
pub fn apply(rows: &mut [Vec<Cell>], mode: Mode, err_col: usize) -> Highlight {
    let mut h = Highlight::default();
    if mode == Mode::Md5 || rows.is_empty() {
        return h;
    }
    let (mut start, mut input_num, mut output_num) = (0usize, 0usize, 0usize);
    let mut last: Option<(String, bool)> = None;
    let mut num = 0usize;
    let mut state = false;
    let flush = |start: usize, len_in: usize, len_out: usize, h: &mut Highlight, rows: &[Vec<Cell>]| {
        let end = (start + len_in + len_out).min(rows.len());
        let (mut red, mut yellow) = (Vec::new(), Vec::new());
        find_error_rows(&rows[start.min(end)..end], start, len_in, mode, &mut red, &mut yellow);
        let rs: std::collections::BTreeSet<usize> = red.iter().map(|x| x.0).collect();
        for (k, _) in &yellow {
            if !rs.contains(k) {
                h.yellow.insert(*k);
            }
        }
        h.red.extend(rs);
        h.red_lines.extend(red);
        h.yellow_lines.extend(yellow);
    };
    for row in rows.iter() {
        let name = row[0].py_str();
        let (api, st) = name_and_state(&name);
        state = st;
        match &last {
            Some((la, ls)) => {
                if api == la {
                    if st == *ls {
                        num += 1;
                    } else {
                        input_num = num;
                        num = 1;
                        last = Some((api.to_string(), st));
                    }
                } else {
                    output_num = num;
                    flush(start, input_num, output_num, &mut h, rows);
                    num = 1;
                    last = Some((api.to_string(), st));
                    start += input_num + output_num;
                    input_num = 1;
                    output_num = 0;
                }
            }
            None => {
                num = 1;
                last = Some((api.to_string(), st));
            }
        }
    }
    if state {
        input_num = num;
    } else {
        output_num = num;
    }
    flush(start, input_num, output_num, &mut h, rows);
    let _ = output_num;

    // update_highlight_err_msg
    let mut red_set = h.red.clone();
    for (lines, is_red) in [(&h.red_lines, true), (&h.yellow_lines, false)] {
        for (line, msgs) in lines {
            if !is_red && red_set.contains(line) {
                continue;
            }
            if let Some(row) = rows.get_mut(*line) {
                for m in msgs {
                    let cur = row[err_col].py_str();
                    row[err_col] = Cell::S(if cur.is_empty() { m.to_string() } else { format!("{cur}\n{m}") });
                }
            }
            if is_red {
                red_set.insert(*line);
            }
        }
    }
    h
}
