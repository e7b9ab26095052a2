//! Tensor statistics with msprobe 1.1.1's semantics, in one vectorisable pass.
//!
//! msprobe computes Max/Min/Mean/Norm with torch reductions (`msprobe-format.md` §5.4–5.5):
//! f16/bf16/f32 in their own dtype (so Mean and Norm are rounded to that dtype), integers and
//! float64 after a cast to float32, bool as any/all, complex as statistics of |x| without Norm,
//! empty tensors as nulls and 0-d tensors as the value itself. NaN propagates into all four
//! values; `*_except_inf_nan` are added when Max or Min is not finite.
//!
//! The hot loop works on blocks of `f32` with 16 independent lanes, which the compiler turns into
//! SIMD max/min/add/mul; lane sums are spilled into `f64` every block so long tensors keep their
//! precision (torch's CPU accumulator for f32 is double). Tolerance against torch: max/min exact,
//! mean/norm within 1 ulp of the result dtype plus the order-of-summation error (tests use 1e-5
//! relative for f32 and one ulp of the dtype for f16/bf16).

use crate::dtype::DType;
use half::{bf16, f16};

/// One statistic as msprobe writes it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stat {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
}

impl Stat {
    fn non_finite(self) -> bool {
        matches!(self, Stat::Float(f) if !f.is_finite())
    }
}

/// The statistics of one tensor leaf.
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    pub max: Stat,
    pub min: Stat,
    pub mean: Stat,
    pub norm: Stat,
    pub max_except_inf_nan: Option<Stat>,
    pub min_except_inf_nan: Option<Stat>,
}

impl Stats {
    /// The statistics of a leaf whose values never arrived (all null).
    pub fn null() -> Stats {
        Stats::all(Stat::Null)
    }

    fn all(v: Stat) -> Stats {
        Stats { max: v, min: v, mean: v, norm: v, max_except_inf_nan: None, min_except_inf_nan: None }
    }
}

const LANES: usize = 16;
const BLOCK: usize = 4096;

/// Running state of the f32 pass.
#[derive(Clone, Copy)]
struct Acc {
    max: f32,
    min: f32,
    sum: f64,
    sumsq: f64,
    nan: bool,
    non_finite: bool,
    n: usize,
}

impl Acc {
    fn new() -> Acc {
        Acc { max: f32::NEG_INFINITY, min: f32::INFINITY, sum: 0.0, sumsq: 0.0, nan: false, non_finite: false, n: 0 }
    }

    /// Folds a block of at most `BLOCK` values (so f32 lane sums stay short). The inner loop
    /// only does max/min/add/mul so it vectorises; NaN and ±inf make a lane sum non-finite,
    /// which sends that block through a scalar re-check.
    fn block(&mut self, xs: &[f32]) {
        let (mut mx, mut mn, mut s, mut q) = lanes(xs);
        let tail = &xs[xs.len() / LANES * LANES..];
        for (l, &x) in tail.iter().enumerate() {
            mx[l] = if x > mx[l] { x } else { mx[l] };
            mn[l] = if x < mn[l] { x } else { mn[l] };
            s[l] += x;
            q[l] += x * x;
        }
        let mut finite = true;
        for l in 0..LANES {
            self.max = if mx[l] > self.max { mx[l] } else { self.max };
            self.min = if mn[l] < self.min { mn[l] } else { self.min };
            self.sum += s[l] as f64;
            self.sumsq += q[l] as f64;
            finite &= s[l].is_finite() && q[l].is_finite();
        }
        if !finite {
            // Rare: NaN, ±inf, or a finite overflow of the f32 lane sums.
            for &x in xs {
                self.nan |= x.is_nan();
                self.non_finite |= !x.is_finite();
            }
        }
        self.n += xs.len();
    }
}

type Lanes = ([f32; LANES], [f32; LANES], [f32; LANES], [f32; LANES]);

/// The vector kernel: per-lane max, min, sum and sum of squares over whole 16-element chunks.
/// Compiled for AVX2/AVX-512 as well as the baseline and picked at run time.
#[multiversion::multiversion(targets("x86_64+avx512f+avx512bw+avx512vl+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
fn lanes(xs: &[f32]) -> Lanes {
    let mut mx = [f32::NEG_INFINITY; LANES];
    let mut mn = [f32::INFINITY; LANES];
    let mut s = [0f32; LANES];
    let mut q = [0f32; LANES];
    for c in xs.chunks_exact(LANES) {
        for l in 0..LANES {
            let x = c[l];
            mx[l] = if x > mx[l] { x } else { mx[l] };
            mn[l] = if x < mn[l] { x } else { mn[l] };
            s[l] += x;
            q[l] += x * x;
        }
    }
    (mx, mn, s, q)
}

/// Calls `f` with consecutive blocks of the tensor's elements converted to f32 (the cast that
/// msprobe 1.1.1 applies before reducing; exact for f16 and bf16).
fn for_each_f32_block(dtype: DType, data: &[u8], mut f: impl FnMut(&[f32])) {
    let size = dtype.size();
    if dtype == DType::F32 {
        if let Ok(xs) = bytemuck::try_cast_slice::<u8, f32>(data) {
            xs.chunks(BLOCK).for_each(f);
            return;
        }
    }
    // A fixed-size stack block keeps the conversion loops' bounds known to the compiler (they
    // vectorise); f32, the common case, returned above without paying for its zeroing.
    let mut buf = [0f32; BLOCK];
    // Aligned storage (the usual case) is reinterpreted in place, which lets the conversion
    // loops vectorise; unaligned storage falls back to per-element little-endian reads.
    macro_rules! fast {
        ($t:ty, $conv:expr) => {
            if let Ok(xs) = bytemuck::try_cast_slice::<u8, $t>(data) {
                for c in xs.chunks(BLOCK) {
                    let out = &mut buf[..c.len()];
                    for (o, &v) in out.iter_mut().zip(c) {
                        *o = $conv(v);
                    }
                    f(out);
                }
                return;
            }
        };
    }
    match dtype {
        DType::BF16 => fast!(u16, |v: u16| f32::from_bits((v as u32) << 16)),
        DType::F64 => fast!(f64, |v: f64| v as f32),
        DType::I8 => fast!(i8, |v: i8| v as f32),
        DType::U8 => fast!(u8, |v: u8| v as f32),
        DType::I16 => fast!(i16, |v: i16| v as f32),
        DType::U16 => fast!(u16, |v: u16| v as f32),
        DType::I32 => fast!(i32, |v: i32| v as f32),
        DType::U32 => fast!(u32, |v: u32| v as f32),
        DType::I64 => fast!(i64, |v: i64| v as f32),
        DType::U64 => fast!(u64, |v: u64| v as f32),
        _ => {}
    }
    for bytes in data.chunks(BLOCK * size) {
        let n = bytes.len() / size;
        let out = &mut buf[..n];
        macro_rules! conv {
            ($t:ty, $conv:expr) => {{
                for (o, c) in out.iter_mut().zip(bytes.chunks_exact(std::mem::size_of::<$t>())) {
                    let v = <$t>::from_le_bytes(c.try_into().expect("chunk has the element size"));
                    *o = $conv(v);
                }
            }};
        }
        match dtype {
            DType::F32 => conv!(f32, |v: f32| v),
            DType::F16 => match bytemuck::try_cast_slice::<u8, f16>(bytes) {
                // F16C-accelerated when the CPU has it (runtime detection inside `half`).
                Ok(h) => half::slice::HalfFloatSliceExt::convert_to_f32_slice(h, out),
                Err(_) => {
                    for (o, c) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                        *o = f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32();
                    }
                }
            },
            DType::BF16 => conv!(u16, |v: u16| f32::from_bits((v as u32) << 16)),
            DType::F64 => conv!(f64, |v: f64| v as f32),
            DType::I8 => conv!(i8, |v: i8| v as f32),
            DType::U8 => conv!(u8, |v: u8| v as f32),
            DType::I16 => conv!(i16, |v: i16| v as f32),
            DType::U16 => conv!(u16, |v: u16| v as f32),
            DType::I32 => conv!(i32, |v: i32| v as f32),
            DType::U32 => conv!(u32, |v: u32| v as f32),
            DType::I64 => conv!(i64, |v: i64| v as f32),
            DType::U64 => conv!(u64, |v: u64| v as f32),
            DType::Bool | DType::C64 | DType::C128 => unreachable!("handled by the caller"),
        }
        f(out);
    }
}

/// Rounds an f64 result to what torch returns for `dtype` (f16/bf16 results are f16/bf16).
fn round_to(dtype: DType, x: f64) -> f64 {
    match dtype {
        DType::F16 => f16::from_f64(x).to_f64(),
        DType::BF16 => bf16::from_f64(x).to_f64(),
        _ => x as f32 as f64,
    }
}

/// Reads element `i` of a 0-d tensor as msprobe's `.item()` would give it.
fn item(dtype: DType, b: &[u8]) -> Stat {
    macro_rules! rd {
        ($t:ty) => {
            <$t>::from_le_bytes(b[..std::mem::size_of::<$t>()].try_into().expect("0-d tensor holds one element"))
        };
    }
    match dtype {
        DType::F32 => Stat::Float(rd!(f32) as f64),
        DType::F64 => Stat::Float(rd!(f64)),
        DType::F16 => Stat::Float(f16::from_bits(rd!(u16)).to_f64()),
        DType::BF16 => Stat::Float(bf16::from_bits(rd!(u16)).to_f64()),
        DType::I8 => Stat::Int(rd!(i8) as i128),
        DType::U8 => Stat::Int(rd!(u8) as i128),
        DType::I16 => Stat::Int(rd!(i16) as i128),
        DType::U16 => Stat::Int(rd!(u16) as i128),
        DType::I32 => Stat::Int(rd!(i32) as i128),
        DType::U32 => Stat::Int(rd!(u32) as i128),
        DType::I64 => Stat::Int(rd!(i64) as i128),
        DType::U64 => Stat::Int(rd!(u64) as i128),
        DType::Bool => Stat::Bool(b[0] != 0),
        DType::C64 | DType::C128 => Stat::Null,
    }
}

/// Statistics of a contiguous little-endian tensor. `zero_dim` marks a 0-d tensor (shape `[]`).
/// `data.len()` must be a multiple of the element size; extra bytes are ignored.
pub fn tensor_stats(dtype: DType, zero_dim: bool, data: &[u8]) -> Stats {
    let size = dtype.size();
    let n = data.len() / size;
    let data = &data[..n * size];
    if n == 0 {
        return Stats::all(Stat::Null);
    }
    match dtype {
        DType::Bool => {
            let any = data.iter().any(|&b| b != 0);
            let all = data.iter().all(|&b| b != 0);
            return Stats {
                max: Stat::Bool(any),
                min: Stat::Bool(all),
                mean: Stat::Null,
                norm: Stat::Null,
                max_except_inf_nan: None,
                min_except_inf_nan: None,
            };
        }
        DType::C64 | DType::C128 => return complex_stats(dtype, data),
        _ => {}
    }
    if zero_dim && n == 1 {
        let mut s = Stats::all(item(dtype, data));
        add_except(&mut s, dtype, data);
        return s;
    }
    let mut acc = Acc::new();
    for_each_f32_block(dtype, data, |b| acc.block(b));
    // Integers and float64 are reduced as float32 (1.1.1), so their results are float32 too.
    let rdt = if matches!(dtype, DType::F16 | DType::BF16) { dtype } else { DType::F32 };
    let (mut sum, mut sumsq) = (acc.sum, acc.sumsq);
    if !(acc.non_finite || sum.is_finite() && sumsq.is_finite()) {
        // A finite tensor overflowed the f32 lane sums: redo the sums in f64.
        (sum, sumsq) = (0.0, 0.0);
        for_each_f32_block(dtype, data, |b| {
            for &x in b {
                sum += x as f64;
                sumsq += (x as f64) * (x as f64);
            }
        });
    }
    let mut s = if acc.nan {
        Stats::all(Stat::Float(f64::NAN))
    } else {
        Stats {
            max: Stat::Float(acc.max as f64),
            min: Stat::Float(acc.min as f64),
            mean: Stat::Float(round_to(rdt, sum / n as f64)),
            norm: Stat::Float(round_to(rdt, sumsq.sqrt())),
            max_except_inf_nan: None,
            min_except_inf_nan: None,
        }
    };
    if acc.non_finite {
        add_except(&mut s, dtype, data);
    }
    s
}

/// Adds `Max_except_inf_nan` / `Min_except_inf_nan` where Max / Min is not finite (§5.5).
fn add_except(s: &mut Stats, dtype: DType, data: &[u8]) {
    if !(s.max.non_finite() || s.min.non_finite()) {
        return;
    }
    let (mut fmax, mut fmin) = (f32::NEG_INFINITY, f32::INFINITY);
    let (mut nmax, mut nmin) = (f32::NEG_INFINITY, f32::INFINITY);
    let (mut any_finite, mut any_non_nan) = (false, false);
    for_each_f32_block(dtype, data, |b| {
        for &x in b {
            if x.is_nan() {
                continue;
            }
            any_non_nan = true;
            nmax = nmax.max(x);
            nmin = nmin.min(x);
            if x.is_finite() {
                any_finite = true;
                fmax = fmax.max(x);
                fmin = fmin.min(x);
            }
        }
    });
    let pick = |finite: f32, non_nan: f32| {
        if !any_non_nan {
            Stat::Float(f64::NAN)
        } else if any_finite {
            Stat::Float(finite as f64)
        } else {
            Stat::Float(non_nan as f64)
        }
    };
    if s.max.non_finite() {
        s.max_except_inf_nan = Some(pick(fmax, nmax));
    }
    if s.min.non_finite() {
        s.min_except_inf_nan = Some(pick(fmin, nmin));
    }
}

/// The L2 norm of |x| of a complex tensor (msprobe 1.1.1's MindSpore Norm, `np.linalg.norm`),
/// accumulated in f64 and rounded to the magnitudes' dtype; None for other dtypes.
pub fn complex_norm(dtype: DType, data: &[u8]) -> Option<f64> {
    if !matches!(dtype, DType::C64 | DType::C128) {
        return None;
    }
    let mags = magnitudes(dtype, data);
    let norm = mags.iter().map(|m| m * m).sum::<f64>().sqrt();
    Some(if dtype == DType::C64 { norm as f32 as f64 } else { norm })
}

/// |x| per element of a complex64/complex128 tensor.
fn magnitudes(dtype: DType, data: &[u8]) -> Vec<f64> {
    if dtype == DType::C64 {
        data.chunks_exact(8)
            .map(|c| {
                let re = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                let im = f32::from_le_bytes([c[4], c[5], c[6], c[7]]);
                re.hypot(im) as f64
            })
            .collect()
    } else {
        data.chunks_exact(16)
            .map(|c| {
                let re = f64::from_le_bytes(c[..8].try_into().expect("8 bytes"));
                let im = f64::from_le_bytes(c[8..].try_into().expect("8 bytes"));
                re.hypot(im)
            })
            .collect()
    }
}

/// Statistics of |x| for complex tensors, as numpy computes them (Norm is null: msprobe 1.1.1's
/// PyTorch processor; the MindSpore dialect adds it, see [`complex_norm`]).
fn complex_stats(dtype: DType, data: &[u8]) -> Stats {
    let mags = magnitudes(dtype, data);
    let nan = mags.iter().any(|m| m.is_nan());
    let max = mags.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let min = mags.iter().copied().fold(f64::INFINITY, f64::min);
    let mean = mags.iter().sum::<f64>() / mags.len() as f64;
    let fix = |x: f64| {
        if nan {
            f64::NAN
        } else if dtype == DType::C64 {
            x as f32 as f64
        } else {
            x
        }
    };
    Stats {
        max: Stat::Float(fix(max)),
        min: Stat::Float(fix(min)),
        mean: Stat::Float(fix(mean)),
        norm: Stat::Null,
        max_except_inf_nan: None,
        min_except_inf_nan: None,
    }
}

/// msprobe's `md5` value: zlib CRC-32 of the contiguous bytes, bf16 hashed as float32 (1.1.1).
pub fn crc32_hex(dtype: DType, data: &[u8]) -> String {
    format!("{:08x}", crc32(dtype, data))
}

/// The CRC-32 behind [`crc32_hex`].
pub fn crc32(dtype: DType, data: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    if dtype == DType::BF16 {
        let mut buf = [0u8; BLOCK * 4];
        for c in data.chunks(BLOCK * 2) {
            let n = c.len() / 2;
            for (o, b) in buf.chunks_exact_mut(4).zip(c.chunks_exact(2)) {
                o.copy_from_slice(&(((u16::from_le_bytes([b[0], b[1]]) as u32) << 16).to_le_bytes()));
            }
            h.update(&buf[..n * 4]);
        }
    } else {
        h.update(data);
    }
    h.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn naive(v: &[f32]) -> (f64, f64, f64, f64) {
        let max = v.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
        let min = v.iter().copied().fold(f32::INFINITY, f32::min) as f64;
        let sum: f64 = v.iter().map(|&x| x as f64).sum();
        let sq: f64 = v.iter().map(|&x| (x as f64) * (x as f64)).sum();
        (max, min, sum / v.len() as f64, sq.sqrt())
    }

    fn close(a: Stat, b: f64, rel: f64) -> bool {
        match a {
            Stat::Float(a) => (a - b).abs() <= rel * b.abs().max(1e-30),
            _ => false,
        }
    }

    #[test]
    fn f32_matches_naive_double_reduction() {
        // A pseudo-random vector long enough to cross several blocks and leave a tail.
        let mut x = 12345u64;
        let v: Vec<f32> = (0..(BLOCK * 3 + 77))
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((x >> 40) as f32 / (1u64 << 24) as f32) * 8.0 - 3.0
            })
            .collect();
        let s = tensor_stats(DType::F32, false, &f32s(&v));
        let (max, min, mean, norm) = naive(&v);
        assert_eq!(s.max, Stat::Float(max));
        assert_eq!(s.min, Stat::Float(min));
        assert!(close(s.mean, mean, 1e-5), "{:?} vs {mean}", s.mean);
        assert!(close(s.norm, norm, 1e-6), "{:?} vs {norm}", s.norm);
        assert_eq!(s.max_except_inf_nan, None);
    }

    #[test]
    fn nan_and_inf_follow_msprobe() {
        // [1, nan, inf, -inf, 2] → all NaN, except = 2 / 1 (msprobe-format §5.5, observed).
        let s = tensor_stats(DType::F32, false, &f32s(&[1.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 2.0]));
        for v in [s.max, s.min, s.mean, s.norm] {
            assert!(matches!(v, Stat::Float(f) if f.is_nan()));
        }
        assert_eq!(s.max_except_inf_nan, Some(Stat::Float(2.0)));
        assert_eq!(s.min_except_inf_nan, Some(Stat::Float(1.0)));
        // [-inf, inf] → Mean NaN, except = ±inf.
        let s = tensor_stats(DType::F32, false, &f32s(&[f32::NEG_INFINITY, f32::INFINITY]));
        assert_eq!(s.max, Stat::Float(f64::INFINITY));
        assert_eq!(s.min, Stat::Float(f64::NEG_INFINITY));
        assert!(matches!(s.mean, Stat::Float(f) if f.is_nan()));
        assert_eq!(s.norm, Stat::Float(f64::INFINITY));
        assert_eq!(s.max_except_inf_nan, Some(Stat::Float(f64::INFINITY)));
        assert_eq!(s.min_except_inf_nan, Some(Stat::Float(f64::NEG_INFINITY)));
        // [inf, -2, 1]: Max inf, Min finite, only Max gets an except key.
        let s = tensor_stats(DType::F32, false, &f32s(&[f32::INFINITY, -2.0, 1.0]));
        assert_eq!(s.min, Stat::Float(-2.0));
        assert_eq!(s.max_except_inf_nan, Some(Stat::Float(1.0)));
        assert_eq!(s.min_except_inf_nan, None);
        // all NaN
        let s = tensor_stats(DType::F32, false, &f32s(&[f32::NAN, f32::NAN]));
        assert!(matches!(s.max_except_inf_nan, Some(Stat::Float(f)) if f.is_nan()));
    }

    #[test]
    fn empty_zero_dim_bool_int() {
        assert_eq!(tensor_stats(DType::BF16, false, &[]), Stats::all(Stat::Null));
        let s = tensor_stats(DType::F32, true, &f32s(&[-0.6157]));
        assert_eq!(s.norm, Stat::Float(-0.6157f32 as f64)); // signed, not |x|
        let s = tensor_stats(DType::I64, true, &15i64.to_le_bytes());
        assert_eq!(s.max, Stat::Int(15));
        let s = tensor_stats(DType::Bool, false, &[1, 0, 1]);
        assert_eq!((s.max, s.min, s.mean, s.norm), (Stat::Bool(true), Stat::Bool(false), Stat::Null, Stat::Null));
        let s = tensor_stats(DType::Bool, true, &[1]);
        assert_eq!((s.max, s.min), (Stat::Bool(true), Stat::Bool(true)));
        // ints are reduced as float32
        let v: Vec<u8> = [1i32, 2, 3, 4].iter().flat_map(|x| x.to_le_bytes()).collect();
        let s = tensor_stats(DType::I32, false, &v);
        assert_eq!((s.max, s.min, s.mean), (Stat::Float(4.0), Stat::Float(1.0), Stat::Float(2.5)));
        assert_eq!(s.norm, Stat::Float((30f64.sqrt()) as f32 as f64));
        // float64 goes through float32: 0.1 → 0.10000000149011612
        let s =
            tensor_stats(DType::F64, false, &[0.1f64, 0.1].iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>());
        assert_eq!(s.max, Stat::Float(0.10000000149011612));
    }

    #[test]
    fn half_types_round_results_to_their_dtype() {
        let vals = [1.234375f32, -2.109375, 0.5, 3.0];
        for dt in [DType::F16, DType::BF16] {
            let bytes: Vec<u8> = vals
                .iter()
                .flat_map(|&x| match dt {
                    DType::F16 => f16::from_f32(x).to_bits().to_le_bytes(),
                    _ => bf16::from_f32(x).to_bits().to_le_bytes(),
                })
                .collect();
            let s = tensor_stats(dt, false, &bytes);
            assert_eq!(s.max, Stat::Float(3.0));
            assert_eq!(s.min, Stat::Float(-2.109375));
            let mean = vals.iter().map(|&x| x as f64).sum::<f64>() / 4.0;
            assert_eq!(s.mean, Stat::Float(round_to(dt, mean)));
        }
    }

    #[test]
    fn complex_is_abs_without_norm() {
        let v = f32s(&[3.0, 4.0, 0.0, 1.0]);
        let s = tensor_stats(DType::C64, false, &v);
        assert_eq!((s.max, s.min, s.mean, s.norm), (Stat::Float(5.0), Stat::Float(1.0), Stat::Float(3.0), Stat::Null));
    }

    #[test]
    fn crc_test_vectors() {
        // zlib.crc32(b"123456789") == 0xcbf43926 (the standard check value).
        assert_eq!(crc32_hex(DType::U8, b"123456789"), "cbf43926");
        assert_eq!(crc32_hex(DType::F32, &[]), "00000000");
        // bool tensor [True, False, True] → 898483b3 (msprobe-format §5.6, observed).
        assert_eq!(crc32_hex(DType::Bool, &[1, 0, 1]), "898483b3");
        // bf16 is hashed as float32.
        let b = bf16::from_f32(1.5).to_bits().to_le_bytes();
        assert_eq!(crc32_hex(DType::BF16, &b), crc32_hex(DType::F32, &1.5f32.to_le_bytes()));
    }
}
