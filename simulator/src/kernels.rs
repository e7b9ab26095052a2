//! Pure compute kernels on host vectors (f32 math; f16/bf16 are rounded when stored).

extern "C" {
    fn erf(x: f64) -> f64;
}

pub fn erf_f(x: f32) -> f32 {
    // SAFETY: libm's erf is a pure function of its argument.
    unsafe { erf(x as f64) as f32 }
}

/// erf⁻¹ (torch.erfinv) rounded to float32: Giles' single-precision approximation (M. Giles,
/// "Approximating the erfinv function", GPU Computing Gems, 2010) refined by Newton steps on libm's erf
/// in f64, so the result is within rounding of the exact value; ±1 → ±inf, |x| > 1 and NaN → NaN, ±0 kept.
pub fn erfinv_f(x: f32) -> f32 {
    let x = f64::from(x);
    if x.is_nan() || x.abs() > 1.0 {
        return f32::NAN;
    }
    if x.abs() == 1.0 || x == 0.0 {
        return (x * if x == 0.0 { 1.0 } else { f64::INFINITY }) as f32;
    }
    let w = -((1.0 - x) * (1.0 + x)).ln();
    let poly = |w: f64, c: &[f64]| c.iter().fold(0.0, |p, &k| k + p * w);
    let mut y = x * if w < 5.0 {
        let c = [
            2.810_226_36e-08,
            3.432_739_39e-07,
            -3.523_387_7e-06,
            -4.391_506_54e-06,
            0.000_218_580_87,
            -0.001_253_725_03,
            -0.004_177_681_64,
            0.246_640_727,
            1.501_409_41,
        ];
        poly(w - 2.5, &c)
    } else {
        let c = [
            -0.000_200_214_257,
            0.000_100_950_558,
            0.001_349_343_22,
            -0.003_673_428_44,
            0.005_739_507_73,
            -0.007_622_461_3,
            0.009_438_870_47,
            1.001_674_06,
            2.832_976_82,
        ];
        poly(w.sqrt() - 3.0, &c)
    };
    for _ in 0..3 {
        // SAFETY: libm's erf is a pure function of its argument.
        let e = unsafe { erf(y) } - x;
        y -= e / (std::f64::consts::FRAC_2_SQRT_PI * (-y * y).exp());
    }
    y as f32
}

/// Broadcast shape of two shapes (numpy rules), or None.
pub fn broadcast_shape(a: &[i64], b: &[i64]) -> Option<Vec<i64>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n { a[i + a.len() - n] } else { 1 };
        let db = if i + b.len() >= n { b[i + b.len() - n] } else { 1 };
        out[i] = if da == db {
            da
        } else if da == 1 {
            db
        } else if db == 1 {
            da
        } else {
            return None;
        };
    }
    Some(out)
}

/// `a @ b` with a: [m,k], b: [k,n], row-major.
pub fn mm(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    let mut c = vec![0f32; m * n];
    for i in 0..m {
        let row = &mut c[i * n..(i + 1) * n];
        for p in 0..k {
            let av = a[i * k + p];
            if av == 0.0 {
                continue;
            }
            let br = &b[p * n..(p + 1) * n];
            for j in 0..n {
                row[j] += av * br[j];
            }
        }
    }
    c
}

/// Split a shape around `dim` into (outer, size, inner).
pub fn split_dim(shape: &[i64], dim: usize) -> (usize, usize, usize) {
    let outer: i64 = shape[..dim].iter().product();
    let inner: i64 = shape[dim + 1..].iter().product();
    (outer as usize, shape[dim] as usize, inner as usize)
}

pub fn softmax(x: &[f32], (o, d, i): (usize, usize, usize), log: bool) -> Vec<f32> {
    let mut y = vec![0f32; x.len()];
    for a in 0..o {
        for c in 0..i {
            let idx = |k: usize| (a * d + k) * i + c;
            let mx = (0..d).map(|k| x[idx(k)]).fold(f32::NEG_INFINITY, f32::max);
            let s: f32 = (0..d).map(|k| (x[idx(k)] - mx).exp()).sum();
            for k in 0..d {
                y[idx(k)] = if log { x[idx(k)] - mx - s.ln() } else { (x[idx(k)] - mx).exp() / s };
            }
        }
    }
    y
}

/// Softmax backward: dx = y * (g - sum(g*y)); log-softmax backward: dx = g - exp(y) * sum(g).
pub fn softmax_backward(g: &[f32], y: &[f32], (o, d, i): (usize, usize, usize), log: bool) -> Vec<f32> {
    let mut dx = vec![0f32; g.len()];
    for a in 0..o {
        for c in 0..i {
            let idx = |k: usize| (a * d + k) * i + c;
            if log {
                let s: f32 = (0..d).map(|k| g[idx(k)]).sum();
                for k in 0..d {
                    dx[idx(k)] = g[idx(k)] - y[idx(k)].exp() * s;
                }
            } else {
                let s: f32 = (0..d).map(|k| g[idx(k)] * y[idx(k)]).sum();
                for k in 0..d {
                    dx[idx(k)] = y[idx(k)] * (g[idx(k)] - s);
                }
            }
        }
    }
    dx
}

pub fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf_f(x / std::f32::consts::SQRT_2))
}
/// CANN's Gelu (aclnnGelu, the aclop Gelu kernel): the tanh approximation written as a sigmoid,
/// `x / (1 + exp(-sqrt(8/pi) (x + 0.044715 x^3)))`, in float32 as the device computes it (ops-nn
/// `activation/gelu`; 0.5 (1 + tanh(z)) = 1 / (1 + exp(-2z))). Equal to torch's `approximate="tanh"`
/// up to float32 rounding.
pub fn gelu_sigmoid_form(x: f32) -> f32 {
    const C0: f32 = -0.071_354_816; // -sqrt(8/pi) * 0.044715
    const C1: f32 = -1.595_769; // -sqrt(8/pi)
    x / (((x * x * C0 + C1) * x).exp() + 1.0)
}
/// The gradient of [`gelu_sigmoid_form`] by CANN's GeluGrad formula (its 910B form):
/// `px = exp((c0 x^2 + c1) x)`, `t = 1 / (px + 1)`, `dx = (px (c2 x^2 + c3) x t^2 + t) dy`, evaluated in f64
/// as `(px t)(r t) + t` so that no intermediate overflows where the gradient is finite (in float32 `px r`
/// overflows for x near -10 and `r` for |x| > 1e13); in the tails it is 0 (x → -inf) and dy (x → +inf).
pub fn gelu_sigmoid_form_grad(dy: f32, x: f32) -> f32 {
    const C0: f64 = -0.071_354_816_272_600_25;
    const C1: f64 = -1.595_769_121_605_730_7;
    const C2: f64 = 0.214_064_448_817_800_7;
    const C3: f64 = 1.595_769_121_605_730_7;
    let (x, dy) = (f64::from(x), f64::from(dy));
    let px = ((x * x * C0 + C1) * x).exp();
    let g = if x.is_nan() {
        f64::NAN
    } else if px.is_infinite() {
        0.0 // x → -inf
    } else if px == 0.0 {
        1.0 // x → +inf
    } else {
        let t = 1.0 / (px + 1.0);
        (px * t) * ((x * x * C2 + C3) * x * t) + t
    };
    (g * dy) as f32
}
pub fn gelu_grad(x: f32) -> f32 {
    let cdf = 0.5 * (1.0 + erf_f(x / std::f32::consts::SQRT_2));
    let pdf = (-0.5 * x * x).exp() / (2.0 * std::f32::consts::PI).sqrt();
    cdf + x * pdf
}

/// Sum over the axes flagged in `red` of a tensor with `shape`; result in row-major order of kept axes.
pub fn reduce_sum(x: &[f32], shape: &[i64], red: &[bool]) -> Vec<f32> {
    let out_shape: Vec<i64> = shape.iter().zip(red).map(|(&d, &r)| if r { 1 } else { d }).collect();
    let on = crate::tensor::numel(&out_shape);
    let mut out = vec![0f64; on];
    let ostr = crate::tensor::contiguous_strides(&out_shape);
    let nd = shape.len();
    let mut idx = vec![0i64; nd];
    for &v in x {
        let mut o = 0i64;
        for k in 0..nd {
            if !red[k] {
                o += idx[k] * ostr[k];
            }
        }
        out[o as usize] += v as f64;
        for k in (0..nd).rev() {
            idx[k] += 1;
            if idx[k] < shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    out.into_iter().map(|v| v as f32).collect()
}

/// Layer norm over rows of length n: returns (y, mean, rstd).
pub fn layer_norm(
    x: &[f32],
    m: usize,
    n: usize,
    w: Option<&[f32]>,
    b: Option<&[f32]>,
    eps: f64,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut y = vec![0f32; m * n];
    let mut means = vec![0f32; m];
    let mut rstds = vec![0f32; m];
    for r in 0..m {
        let row = &x[r * n..(r + 1) * n];
        let mean = row.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
        let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n as f64;
        let rstd = 1.0 / (var + eps).sqrt();
        means[r] = mean as f32;
        rstds[r] = rstd as f32;
        for j in 0..n {
            let mut v = ((row[j] as f64 - mean) * rstd) as f32;
            if let Some(w) = w {
                v *= w[j];
            }
            if let Some(b) = b {
                v += b[j];
            }
            y[r * n + j] = v;
        }
    }
    (y, means, rstds)
}

/// Layer norm backward: returns (dx, dw, db).
pub fn layer_norm_backward(
    dy: &[f32],
    x: &[f32],
    mean: &[f32],
    rstd: &[f32],
    w: Option<&[f32]>,
    m: usize,
    n: usize,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut dx = vec![0f32; m * n];
    let mut dw = vec![0f64; n];
    let mut db = vec![0f64; n];
    for r in 0..m {
        let (mu, rs) = (mean[r] as f64, rstd[r] as f64);
        let xhat: Vec<f64> = (0..n).map(|j| (x[r * n + j] as f64 - mu) * rs).collect();
        let g: Vec<f64> = (0..n).map(|j| dy[r * n + j] as f64 * w.map(|w| w[j] as f64).unwrap_or(1.0)).collect();
        let mg = g.iter().sum::<f64>() / n as f64;
        let mgx = g.iter().zip(&xhat).map(|(a, b)| a * b).sum::<f64>() / n as f64;
        for j in 0..n {
            dx[r * n + j] = (rs * (g[j] - mg - xhat[j] * mgx)) as f32;
            dw[j] += dy[r * n + j] as f64 * xhat[j];
            db[j] += dy[r * n + j] as f64;
        }
    }
    (dx, dw.into_iter().map(|v| v as f32).collect(), db.into_iter().map(|v| v as f32).collect())
}

#[cfg(test)]
mod t {
    use super::*;
    #[test]
    fn basics() {
        assert_eq!(mm(&[1., 2., 3., 4.], &[5., 6., 7., 8.], 2, 2, 2), vec![19., 22., 43., 50.]);
        assert_eq!(broadcast_shape(&[2, 1, 3], &[4, 1]), Some(vec![2, 4, 3]));
        assert_eq!(broadcast_shape(&[2], &[3]), None);
        let y = softmax(&[1., 2., 3.], (1, 3, 1), false);
        assert!((y.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert_eq!(reduce_sum(&[1., 2., 3., 4., 5., 6.], &[2, 3], &[true, false]), vec![5., 7., 9.]);
        assert!((gelu(1.0) - 0.841_344_7).abs() < 1e-5);
    }
}
