//! Tensor-mode metrics (`compare_by_op`, `npy_compare.py` and `check_accuracy` of msprobe 1.1.1),
//! computed in one streaming pass over the memory-mapped files.

use super::tensor::{Kind, Tensor, DT};
use super::value::{format_value, round6, Cell};

pub const UNSUPPORTED: &str = "unsupported";
pub const SHAPE_UNMATCH: &str = "shape unmatched";

/// Cosine, MaxAbsErr, MaxRelativeErr, One and Five Thousandth Err Ratio, and the message.
pub struct Metrics {
    pub values: [Cell; 5],
    pub msg: String,
}

fn all(c: Cell, msg: &str) -> Metrics {
    Metrics { values: [c.clone(), c.clone(), c.clone(), c.clone(), c], msg: msg.into() }
}

/// The metrics when a file could not be read (`READ_NONE`).
pub fn read_none(msg: &str) -> Metrics {
    all(Cell::s(UNSUPPORTED), msg)
}

fn round_to(k: Kind, v: f64) -> f64 {
    match k {
        Kind::F16 => half::f16::from_f64(v).to_f64(),
        Kind::F32 => v as f32 as f64,
        Kind::F64 => v,
    }
}

/// numpy's `(n - b) / b` in kind `k`, absolute.
#[inline]
fn rel_in(k: Kind, n: f64, b: f64) -> f64 {
    match k {
        Kind::F64 => ((n - b) / b).abs(),
        Kind::F32 => (((n as f32) - (b as f32)) / (b as f32)).abs() as f64,
        Kind::F16 => {
            let d = half::f16::from_f32((n as f32) - (b as f32)).to_f32();
            half::f16::from_f32(d / (b as f32)).to_f32().abs() as f64
        }
    }
}

fn eps(k: Kind) -> f64 {
    match k {
        Kind::F16 => half::f16::EPSILON.to_f64(),
        Kind::F32 => f32::EPSILON as f64,
        Kind::F64 => f64::EPSILON,
    }
}

/// numpy's result float kind for `n - b` when the bench is a float array.
fn promote(n: DT, b: Kind) -> Kind {
    match n.float_kind() {
        Some(k) => k.max(b),
        None => match (n, b) {
            (DT::Bool | DT::I8 | DT::U8, k) => k,
            (DT::I16 | DT::U16, Kind::F16) => Kind::F32,
            (DT::I16 | DT::U16, k) => k,
            _ => Kind::F64,
        },
    }
}

struct Acc {
    dot: f64,
    nn: f64,
    bb: f64,
    max_abs: f64,
    max_rel: f64,
    below1: u64,
    below5: u64,
}

/// Compares two loaded tensors as msprobe 1.1.1 does.
pub fn compare(n: &Tensor, b: &Tensor) -> Metrics {
    let numel = n.numel();
    if numel == 0 {
        let z = Cell::I(0);
        return Metrics {
            values: [Cell::s(UNSUPPORTED), z.clone(), z.clone(), z.clone(), z],
            msg: "This is empty data, can not compare.".into(),
        };
    }
    if n.shape != b.shape {
        return all(Cell::s(SHAPE_UNMATCH), "Shape of NPU and bench Tensor do not match. Skipped.");
    }
    let scalar = n.shape.is_empty();
    let b_float = b.dtype.float_kind();
    // kind of the relative error arithmetic, and the epsilon numpy adds where the bench is 0
    let (k, e) = match b_float {
        Some(bk) => (promote(n.dtype, bk), eps(bk)),
        None => (Kind::F64, f64::EPSILON),
    };
    let nk = n.dtype.float_kind();
    let thr1 = round_to(k, 0.001);
    let thr5 = round_to(k, 0.005);

    if !scalar && n.dtype == DT::F32 && b.dtype == DT::F32 {
        let acc = fast_f32(n.f32_bytes(), b.f32_bytes(), |from, to| {
            n.release(from, to);
            b.release(from, to);
        });
        if let Some(acc) = acc {
            return finish(acc, false, false, false, numel, nk);
        }
    }
    let mut zero_invalid = false;
    if !scalar && (nk.is_some() || b_float.is_some()) {
        // handle_inf_nan: positions of inf and nan must agree; they are then zeroed
        let mut nb = vec![0f64; 4096];
        let mut bbuf = vec![0f64; 4096];
        let mut any = false;
        let mut from = 0;
        while from < numel {
            let len = (numel - from).min(4096);
            n.read_f64(from, &mut nb[..len]);
            b.read_f64(from, &mut bbuf[..len]);
            for (x, y) in nb[..len].iter().zip(&bbuf[..len]) {
                let (xi, xn, yi, yn) = (x.is_infinite(), x.is_nan(), y.is_infinite(), y.is_nan());
                if xi || xn || yi || yn {
                    any = true;
                    if xi != yi || xn != yn {
                        return all(Cell::s("N/A"), "The position of inf or nan in NPU and bench Tensor do not match.");
                    }
                }
            }
            n.release(from, from + len);
            b.release(from, from + len);
            from += len;
        }
        zero_invalid = any;
    }

    let mut a = Acc { dot: 0.0, nn: 0.0, bb: 0.0, max_abs: 0.0, max_rel: 0.0, below1: 0, below5: 0 };
    let mut abs_nan = false;
    let mut rel_nan = false;
    let mut nb = vec![0f64; 4096];
    let mut bbuf = vec![0f64; 4096];
    let mut from = 0;
    while from < numel {
        let len = (numel - from).min(4096);
        n.read_f64(from, &mut nb[..len]);
        b.read_f64(from, &mut bbuf[..len]);
        for (&x0, &y0) in nb[..len].iter().zip(&bbuf[..len]) {
            let (mut x, mut y) = (x0, y0);
            if zero_invalid && !x.is_finite() {
                x = 0.0;
            }
            if zero_invalid && !y.is_finite() {
                y = 0.0;
            }
            // get_relative_err adds eps where the bench is 0; for float benches in place (the
            // later metrics see it), for others on float64 copies
            let (xr, yr) = if y == 0.0 {
                match (b_float, nk) {
                    (Some(_), Some(nkk)) => (round_to(nkk, x + e), e),
                    (Some(_), None) => (x, e),
                    (None, _) => (x + e, e),
                }
            } else {
                (x, y)
            };
            let rel = rel_in(k, xr, yr);
            if rel.is_nan() {
                rel_nan = true;
            } else if rel > a.max_rel {
                a.max_rel = rel;
            }
            if rel < thr1 {
                a.below1 += 1;
            }
            if rel < thr5 {
                a.below5 += 1;
            }
            let (xm, ym) = if b_float.is_some() { (xr, yr) } else { (x, y) };
            let d = (xm - ym).abs();
            if d.is_nan() {
                abs_nan = true;
            } else if d > a.max_abs {
                a.max_abs = d;
            }
            a.dot += xm * ym;
            a.nn += xm * xm;
            a.bb += ym * ym;
        }
        n.release(from, from + len);
        b.release(from, from + len);
        from += len;
    }
    finish(a, abs_nan, rel_nan, scalar, numel, nk)
}

/// float32 against float32 without inf or nan (the common case): one pass straight over the
/// mapped bytes, in the same arithmetic as numpy (relative error in float32, the rest in
/// float64). Returns `None` when a non-finite value is met (the general path handles it).
const L: usize = 8;

/// Eight lanes per accumulator, so the compiler can keep them in vector registers.
#[derive(Default)]
struct Lanes {
    dot: [f64; L],
    nn: [f64; L],
    bb: [f64; L],
    mabs: [f64; L],
    mrel: [f32; L],
    c1: [u32; L],
    c5: [u32; L],
    fin: [bool; L],
}

impl Lanes {
    /// One group of eight element pairs, written lane-wise so it compiles to vector code.
    #[inline(always)]
    #[allow(clippy::needless_range_loop)]
    fn add8(&mut self, xs: &[f32; L], ys: &[f32; L]) {
        const E: f32 = f32::EPSILON;
        let (mut xr, mut yr, mut rel) = ([0f32; L], [0f32; L], [0f32; L]);
        for l in 0..L {
            self.fin[l] |= !(xs[l].is_finite() & ys[l].is_finite());
        }
        for l in 0..L {
            let z = ys[l] == 0.0;
            yr[l] = if z { E } else { ys[l] };
            xr[l] = if z { xs[l] + E } else { xs[l] };
        }
        for l in 0..L {
            rel[l] = ((xr[l] - yr[l]) / yr[l]).abs();
        }
        for l in 0..L {
            self.mrel[l] = if rel[l] > self.mrel[l] { rel[l] } else { self.mrel[l] };
            self.c1[l] += (rel[l] < 0.001f32) as u32;
            self.c5[l] += (rel[l] < 0.005f32) as u32;
        }
        for l in 0..L {
            let (xd, yd) = (xr[l] as f64, yr[l] as f64);
            let d = (xd - yd).abs();
            self.mabs[l] = if d > self.mabs[l] { d } else { self.mabs[l] };
            self.dot[l] += xd * yd;
            self.nn[l] += xd * xd;
            self.bb[l] += yd * yd;
        }
    }
}

impl Lanes {
    /// One pair of the tail, into lane 0.
    fn add1(&mut self, x: f32, y: f32) {
        let (mut xs, mut ys) = ([0f32; L], [0f32; L]);
        xs[0] = x;
        ys[0] = y;
        let mut one = Lanes::default();
        one.add8(&xs, &ys);
        self.fin[0] |= one.fin[0];
        self.mrel[0] = if one.mrel[0] > self.mrel[0] { one.mrel[0] } else { self.mrel[0] };
        self.mabs[0] = if one.mabs[0] > self.mabs[0] { one.mabs[0] } else { self.mabs[0] };
        self.c1[0] += one.c1[0];
        self.c5[0] += one.c5[0];
        self.dot[0] += one.dot[0];
        self.nn[0] += one.nn[0];
        self.bb[0] += one.bb[0];
    }
}

fn f32s(b: &[u8]) -> [f32; L] {
    let mut o = [0f32; L];
    for (l, v) in o.iter_mut().enumerate() {
        *v = f32::from_le_bytes([b[4 * l], b[4 * l + 1], b[4 * l + 2], b[4 * l + 3]]);
    }
    o
}

fn fast_f32(n: &[u8], b: &[u8], mut release: impl FnMut(usize, usize)) -> Option<Acc> {
    let mut a = Lanes::default();
    let (mut total1, mut total5) = (0u64, 0u64);
    let block = L * 4 * 4096;
    for (k, (nc, bc)) in n.chunks(block).zip(b.chunks(block)).enumerate() {
        let mut ni = nc.chunks_exact(L * 4);
        let mut bi = bc.chunks_exact(L * 4);
        for (x8, y8) in (&mut ni).zip(&mut bi) {
            a.add8(&f32s(x8), &f32s(y8));
        }
        let (nr, br) = (ni.remainder(), bi.remainder());
        for (x, y) in nr.chunks_exact(4).zip(br.chunks_exact(4)) {
            a.add1(f32::from_le_bytes([x[0], x[1], x[2], x[3]]), f32::from_le_bytes([y[0], y[1], y[2], y[3]]));
        }
        // the u32 lanes count at most 4096 per block: fold them now
        for l in 0..L {
            total1 += a.c1[l] as u64;
            total5 += a.c5[l] as u64;
            a.c1[l] = 0;
            a.c5[l] = 0;
        }
        if a.fin.iter().any(|&nonfinite| nonfinite) {
            return None;
        }
        release(k * L * 4096, k * L * 4096 + nc.len() / 4);
    }
    let sum = |v: &[f64; L]| ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
    Some(Acc {
        dot: sum(&a.dot),
        nn: sum(&a.nn),
        bb: sum(&a.bb),
        max_abs: a.mabs.iter().fold(0f64, |m, &v| m.max(v)),
        max_rel: a.mrel.iter().fold(0f32, |m, &v| m.max(v)) as f64,
        below1: total1,
        below5: total5,
    })
}

fn finish(a: Acc, abs_nan: bool, rel_nan: bool, scalar: bool, numel: usize, nk: Option<Kind>) -> Metrics {
    let mut msg = String::new();
    if scalar {
        msg.push_str("This is type of scalar data, can not compare.");
    }
    // Cosine
    let cos = if scalar {
        Cell::s(UNSUPPORTED)
    } else if numel == 1 {
        msg.push_str("This tensor is scalar.");
        Cell::s(UNSUPPORTED)
    } else {
        let (an, bn) = (a.nn.sqrt(), a.bb.sqrt());
        if an <= f64::EPSILON && bn <= f64::EPSILON {
            Cell::F(1.0)
        } else if an <= f64::EPSILON {
            msg.push_str("Cannot compare by Cosine Similarity, All the data is Zero in npu dump data.");
            Cell::s("Nan")
        } else if bn <= f64::EPSILON {
            msg.push_str("Cannot compare by Cosine Similarity, All the data is Zero in Bench dump data.");
            Cell::s("Nan")
        } else {
            let c = a.dot / (an * bn);
            if c.is_nan() {
                msg.push_str("Cannot compare by Cosine Similarity, the dump data has NaN.");
                Cell::s("Nan")
            } else {
                let mut r = format_value(c);
                if r > 0.9999 {
                    r = round6(r);
                }
                Cell::F(if r > 0.99999 { 1.0 } else { r })
            }
        }
    };
    let nan_msg = "Cannot compare by MaxRelativeError, the data contains nan/inf/-inf in dump data.";
    let max_abs = if abs_nan {
        msg.push_str(nan_msg);
        Cell::s("Nan")
    } else {
        // a 0-d tensor's difference is taken in its own dtype
        let v = if scalar { round_to(nk.unwrap_or(Kind::F64), a.max_abs) } else { a.max_abs };
        Cell::F(format_value(v))
    };
    let max_rel = if rel_nan {
        msg.push_str(nan_msg);
        Cell::s("Nan")
    } else {
        Cell::F(format_value(a.max_rel))
    };
    let (r1, r5) = if scalar {
        (Cell::s("Nan"), Cell::s("Nan"))
    } else {
        (Cell::F(format_value(a.below1 as f64 / numel as f64)), Cell::F(format_value(a.below5 as f64 / numel as f64)))
    };
    Metrics { values: [cos, max_abs, max_rel, r1, r5], msg }
}

/// msprobe's `check_accuracy(cos, max_abs_err)`.
pub fn check_accuracy(cos: &Cell, max_abs: &Cell) -> &'static str {
    let is = |c: &Cell, s: &str| matches!(c, Cell::S(x) if x == s);
    if is(cos, SHAPE_UNMATCH) {
        return "Unmatched";
    }
    if is(cos, "None") || is(max_abs, "None") {
        return "None";
    }
    if is(cos, "N/A") || is(max_abs, "N/A") {
        return "No";
    }
    let f = |c: &Cell| -> Option<f64> {
        match c {
            Cell::S(s) => py_float(s),
            other => other.num(),
        }
    };
    let (Some(c), Some(m)) = (f(cos), f(max_abs)) else { return "None" };
    if c < 0.99 && m > 0.001 {
        return "No";
    }
    if c < 0.9 || m > 1.0 {
        return "No";
    }
    "Yes"
}

/// Python's `float(str)` for the strings that can reach it.
fn py_float(s: &str) -> Option<f64> {
    let t = s.trim();
    match t.to_ascii_lowercase().as_str() {
        "nan" | "+nan" | "-nan" => Some(f64::NAN),
        "inf" | "+inf" | "infinity" | "+infinity" => Some(f64::INFINITY),
        "-inf" | "-infinity" => Some(f64::NEG_INFINITY),
        _ => t.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accuracy_rule() {
        assert_eq!(check_accuracy(&Cell::F(1.0), &Cell::F(0.0)), "Yes");
        assert_eq!(check_accuracy(&Cell::F(0.95), &Cell::F(0.01)), "No");
        assert_eq!(check_accuracy(&Cell::F(0.95), &Cell::F(0.0001)), "Yes");
        assert_eq!(check_accuracy(&Cell::F(0.999), &Cell::F(2.0)), "No");
        assert_eq!(check_accuracy(&Cell::s(SHAPE_UNMATCH), &Cell::s(SHAPE_UNMATCH)), "Unmatched");
        assert_eq!(check_accuracy(&Cell::s(UNSUPPORTED), &Cell::s(UNSUPPORTED)), "None");
        assert_eq!(check_accuracy(&Cell::s("N/A"), &Cell::s("N/A")), "No");
    }

    #[test]
    fn fast_path_agrees_with_the_general_path() {
        // the general path in float64 arithmetic reference, computed here independently
        let n: Vec<f32> = (0..1003).map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0).collect();
        let b: Vec<f32> = n
            .iter()
            .enumerate()
            .map(|(i, v)| if i % 5 == 0 { 0.0 } else { v * (1.0 + 1e-3 * (i % 3) as f32) })
            .collect();
        let nb: Vec<u8> = n.iter().flat_map(|v| v.to_le_bytes()).collect();
        let bb: Vec<u8> = b.iter().flat_map(|v| v.to_le_bytes()).collect();
        let a = fast_f32(&nb, &bb, |_, _| {}).unwrap();
        let (mut dot, mut nn, mut sb, mut mabs, mut mrel, mut c1) = (0f64, 0f64, 0f64, 0f64, 0f32, 0u64);
        for (&x, &y) in n.iter().zip(&b) {
            let (x, y) = if y == 0.0 { (x + f32::EPSILON, f32::EPSILON) } else { (x, y) };
            let rel = ((x - y) / y).abs();
            mrel = mrel.max(rel);
            c1 += (rel < 0.001) as u64;
            let (xd, yd) = (x as f64, y as f64);
            mabs = mabs.max((xd - yd).abs());
            dot += xd * yd;
            nn += xd * xd;
            sb += yd * yd;
        }
        assert_eq!(a.max_abs, mabs);
        assert_eq!(a.max_rel, mrel as f64);
        assert_eq!(a.below1, c1);
        for (x, y) in [(a.dot, dot), (a.nn, nn), (a.bb, sb)] {
            assert!((x - y).abs() <= 1e-12 * y.abs(), "{x} vs {y}");
        }
        let mut with_nan = nb.clone();
        with_nan[..4].copy_from_slice(&f32::NAN.to_le_bytes());
        assert!(fast_f32(&with_nan, &bb, |_, _| {}).is_none());
    }
}
