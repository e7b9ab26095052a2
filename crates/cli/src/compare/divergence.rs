//! First divergence: the earliest record, in execution order, whose outputs differ between the
//! two runs, forward and backward, with whether its inputs agreed, its module path (from
//! construct.json) and the records around it.

use super::matching::Row;
use super::value::Cell;
use super::value::Mode;
use msprobe_core::json::Json;

/// When a row's two tensors count as different.
#[derive(Clone, Copy, Debug)]
pub struct Tolerance {
    pub rtol: f64,
    pub atol: f64,
}

/// Whether a matched row's NPU and bench tensors differ (`None`: the row has no bench match).
pub fn row_differs(row: &Row, mode: Mode, tol: Tolerance) -> Option<bool> {
    let c = &row.cells;
    if matches!(&c[1], Cell::S(s) if s == "N/A") {
        return None;
    }
    let stats_differ = |n0: usize, b0: usize| -> bool {
        let scale = c[b0].num().unwrap_or(0.0).abs().max(c[b0 + 1].num().unwrap_or(0.0).abs());
        (0..4).any(|i| match (c[n0 + i].num(), c[b0 + i].num()) {
            (Some(x), Some(y)) => {
                (x.is_nan() != y.is_nan()) || (!x.is_nan() && (x - y).abs() > tol.atol + tol.rtol * scale)
            }
            _ => c[n0 + i].py_str() != c[b0 + i].py_str(),
        })
    };
    Some(match mode {
        Mode::Md5 => !matches!(&c[8], Cell::S(s) if s == "pass"),
        Mode::Summary => stats_differ(14, 18),
        Mode::All => {
            let acc = c[19].py_str();
            if acc == "No" || acc == "Unmatched" {
                return Some(true);
            }
            match &c[7] {
                Cell::F(_) | Cell::I(_) => {
                    let scale = c[15].num().unwrap_or(0.0).abs().max(c[16].num().unwrap_or(0.0).abs());
                    c[7].num().unwrap_or(0.0) > tol.atol + tol.rtol * scale
                }
                Cell::S(s) if s == "unsupported" => stats_differ(11, 15),
                _ => true,
            }
        }
    })
}

pub struct Divergence {
    pub direction: &'static str,
    pub record: String,
    pub inputs_agree: bool,
    pub differing_inputs: Vec<String>,
    pub differing_outputs: Vec<String>,
    pub module_path: Vec<String>,
    pub around: Vec<(String, &'static str)>,
}

impl Divergence {
    pub fn lines(&self) -> Vec<String> {
        let mut v = vec![format!("first divergence ({}): {}", self.direction, self.record)];
        if self.inputs_agree {
            v.push("  its inputs agree and its outputs do not: the error starts in this op".into());
        } else {
            v.push(format!(
                "  its inputs already differ ({}) though no earlier record's output did: they come from outside the dumped ops (parameters, data)",
                self.differing_inputs.join(", ")
            ));
        }
        v.push(format!("  differing outputs: {}", self.differing_outputs.join(", ")));
        if !self.module_path.is_empty() {
            v.push(format!("  module path: {}", self.module_path.join(" <- ")));
        }
        v.push("  records around it (execution order):".into());
        for (r, verdict) in &self.around {
            let mark = if *r == self.record { ">" } else { " " };
            v.push(format!("   {mark} {r}: {verdict}"));
        }
        v
    }
}

pub fn parents(construct: Option<&Json>, record: &str) -> Vec<String> {
    let mut out = Vec::new();
    let Some(c) = construct else { return out };
    let mut cur = record.to_string();
    while out.len() < 64 {
        match c.get(&cur) {
            Some(Json::Str(p)) => {
                out.push(p.to_string());
                cur = p.to_string();
            }
            _ => break,
        }
    }
    out
}

/// Finds the first forward and backward divergence. `records` are the NPU record names in dump
/// order; each row carries its record index.
pub fn find(records: &[String], rows: &[Row], mode: Mode, tol: Tolerance, construct: Option<&Json>) -> Vec<Divergence> {
    // per record: (matched, inputs differing, outputs differing)
    #[derive(Default, Clone)]
    struct St {
        matched: bool,
        din: Vec<String>,
        dout: Vec<String>,
    }
    let mut st = vec![St::default(); records.len()];
    for r in rows {
        let Some(d) = row_differs(r, mode, tol) else { continue };
        let s = &mut st[r.record];
        s.matched = true;
        if d {
            let name = r.cells[0].py_str();
            if r.is_input {
                s.din.push(name);
            } else {
                s.dout.push(name);
            }
        }
    }
    let verdict = |s: &St| -> &'static str {
        match (s.matched, s.din.is_empty(), s.dout.is_empty()) {
            (false, _, _) => "no bench match",
            (true, true, true) => "agree",
            (true, true, false) => "inputs agree, outputs differ",
            (true, false, true) => "inputs differ, outputs agree",
            (true, false, false) => "inputs and outputs differ",
        }
    };
    let mut out = Vec::new();
    for direction in ["forward", "backward"] {
        let idx: Vec<usize> = (0..records.len()).filter(|&i| records[i].split('.').any(|p| p == direction)).collect();
        let Some(pos) = idx.iter().position(|&i| st[i].matched && !st[i].dout.is_empty()) else { continue };
        let i = idx[pos];
        let lo = pos.saturating_sub(3);
        let hi = (pos + 4).min(idx.len());
        out.push(Divergence {
            direction,
            record: records[i].clone(),
            inputs_agree: st[i].din.is_empty(),
            differing_inputs: st[i].din.clone(),
            differing_outputs: st[i].dout.clone(),
            module_path: parents(construct, &records[i]),
            around: idx[lo..hi].iter().map(|&j| (records[j].clone(), verdict(&st[j]))).collect(),
        });
    }
    out
}
