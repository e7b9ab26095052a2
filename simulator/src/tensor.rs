//! Strided tensor views over device memory (element-based strides and offset, like nnopbase).
use crate::consts::*;
use crate::dtype::DType;
use crate::mem;

#[derive(Clone, Debug)]
pub struct TView {
    /// Storage base address (device); element (0,..,0) is at `addr + offset*itemsize`.
    pub addr: usize,
    pub dtype: DType,
    pub shape: Vec<i64>,
    pub strides: Vec<i64>,
    pub offset: i64,
}

/// Whether a move into `o` from `srcs` is integer to integer (bools as 0 / 1): it then goes through i64,
/// exact at any size, where f64 rounds beyond 2^53.
pub fn int_move(o: &TView, srcs: &[&TView]) -> bool {
    o.dtype.is_int() && srcs.iter().all(|v| v.dtype.is_int() || v.dtype == DType::Bool)
}

thread_local! {
    /// The first 64-bit integer a kernel on this thread read as f64 that f64 cannot hold (beyond 2^53):
    /// see [`exact_ints`].
    static ROUNDED: std::cell::Cell<Option<i128>> = const { std::cell::Cell::new(None) };
}

/// The exact value of one int64 / uint64 element.
fn exact_int(dtype: DType, b: &[u8]) -> i128 {
    match dtype {
        DType::U64 => u64::from_le_bytes(b[..8].try_into().unwrap()) as i128,
        _ => i64::from_le_bytes(b[..8].try_into().unwrap()) as i128,
    }
}

fn note_rounded(vals: impl Iterator<Item = i128>) {
    if ROUNDED.with(|c| c.get()).is_some() {
        return;
    }
    if let Some(v) = vals.into_iter().find(|&v| (v as f64) as i128 != v) {
        ROUNDED.with(|c| c.set(Some(v)));
    }
}

/// Runs kernel `f` of `op`; when it has an integer or bool output (`int_out`) and read a 64-bit
/// integer beyond 2^53 through f64 (rounded), the launch fails (161002, naming the value) instead
/// of returning a silently rounded result: most kernels compute in f64, and only some (Add / Sub /
/// Mul / Remainder / Fmod, moves, casts, gathers, ...) read integers exactly. A float output (a cast
/// or a division to float) is rounded on a device too, and passes.
pub fn exact_ints(op: &str, int_out: bool, f: impl FnOnce() -> Result<(), i32>) -> Result<(), i32> {
    ROUNDED.with(|c| c.set(None));
    let r = f();
    match ROUNDED.with(|c| c.take()) {
        Some(v) if int_out && r.is_ok() => Err(crate::errmsg::fail(
            ACLNN_ERR_PARAM_INVALID,
            format!(
                "{op}: the simulator computes this kernel in f64, which cannot hold the 64-bit integer {v} \
                 (beyond 2^53); refused rather than rounded (a simulator limit, not a device one)"
            ),
        )),
        _ => r,
    }
}

/// Writes `o` (row-major) with the elements of the sources at `(source, row-major index)` pairs, as
/// a move: raw elements when every dtype agrees (exact for any dtype, NaN payloads included), through
/// i64 between integers, else converted through f64.
pub fn move_elems(srcs: &[&TView], o: &TView, at: &[(usize, usize)]) -> Result<(), i32> {
    if srcs.iter().all(|a| a.dtype == o.dtype) {
        let es = o.dtype.size();
        let xs: Vec<Vec<u8>> = srcs.iter().map(|a| a.read_raw()).collect::<Result<_, _>>()?;
        let mut y = Vec::with_capacity(at.len() * es);
        for &(s, k) in at {
            y.extend_from_slice(&xs[s][k * es..k * es + es]);
        }
        return o.write_raw(&y);
    }
    if int_move(o, srcs) {
        let xs: Vec<Vec<i64>> = srcs.iter().map(|a| a.read_i64()).collect::<Result<_, _>>()?;
        return o.write_i64(&at.iter().map(|&(s, k)| xs[s][k]).collect::<Vec<_>>());
    }
    let xs: Vec<Vec<f64>> = srcs.iter().map(|a| a.read_f64()).collect::<Result<_, _>>()?;
    o.write_f64(&at.iter().map(|&(s, k)| xs[s][k]).collect::<Vec<_>>())
}

pub fn contiguous_strides(shape: &[i64]) -> Vec<i64> {
    let mut s = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1].max(1);
    }
    s
}

pub fn numel(shape: &[i64]) -> usize {
    shape.iter().map(|&d| d.max(0) as usize).product()
}

impl TView {
    pub fn contiguous(addr: usize, dtype: DType, shape: Vec<i64>) -> TView {
        let strides = contiguous_strides(&shape);
        TView { addr, dtype, shape, strides, offset: 0 }
    }
    pub fn numel(&self) -> usize {
        numel(&self.shape)
    }
    /// Lowest and one-past-highest element index (relative to the storage base) covered by the view.
    pub fn elem_span(&self) -> (i64, i64) {
        if self.numel() == 0 {
            return (self.offset, self.offset);
        }
        let (mut lo, mut hi) = (self.offset, self.offset);
        for (d, s) in self.shape.iter().zip(&self.strides) {
            let e = (d - 1) * s;
            if e < 0 {
                lo += e
            } else {
                hi += e
            }
        }
        (lo, hi + 1)
    }
    /// (device address of the first byte, byte length) of the span covered by the view.
    pub fn byte_span(&self) -> (usize, usize) {
        let (lo, hi) = self.elem_span();
        let es = self.dtype.size() as i64;
        ((self.addr as i64 + lo * es) as usize, ((hi - lo) * es) as usize)
    }
    /// Element offsets (relative to span start) in row-major view order.
    fn offsets(&self) -> Vec<usize> {
        let (lo, _) = self.elem_span();
        let n = self.numel();
        let mut out = Vec::with_capacity(n);
        if n == 0 {
            return out;
        }
        let nd = self.shape.len();
        let mut idx = vec![0i64; nd];
        let mut cur = self.offset - lo;
        for _ in 0..n {
            out.push(cur as usize);
            for k in (0..nd).rev() {
                idx[k] += 1;
                cur += self.strides[k];
                if idx[k] < self.shape[k] {
                    break;
                }
                cur -= self.strides[k] * idx[k];
                idx[k] = 0;
            }
        }
        out
    }
    pub fn check(&self) -> Result<(), i32> {
        if self.shape.len() != self.strides.len() || self.shape.iter().any(|&d| d < 0) {
            return Err(ACLNN_ERR_PARAM_INVALID);
        }
        let (a, l) = self.byte_span();
        if l > 0 && mem::lookup(a, l).is_none() {
            return Err(crate::errmsg::fail(
                ACLNN_ERR_PARAM_INVALID,
                format!("tensor span {a:#x}+{l} is not inside a device allocation"),
            ));
        }
        Ok(())
    }
    pub fn read_span(&self) -> Result<Vec<u8>, i32> {
        let (a, l) = self.byte_span();
        mem::read(a, l).map_err(|_| {
            crate::errmsg::fail(
                ACLNN_ERR_PARAM_INVALID,
                format!("tensor span {a:#x}+{l} is not inside a device allocation"),
            )
        })
    }
    pub fn crc(&self) -> Result<u32, i32> {
        Ok(crc32fast::hash(&self.read_span()?))
    }
    /// CRC-32 of the view's elements in row-major order (what a contiguous copy of the view
    /// holds), as opposed to [`crc`](Self::crc) over the whole byte span including gaps.
    pub fn crc_elements(&self) -> Result<u32, i32> {
        let b = self.read_span()?;
        let es = self.dtype.size();
        let mut h = crc32fast::Hasher::new();
        for o in self.offsets() {
            h.update(&b[o * es..o * es + es]);
        }
        Ok(h.finalize())
    }
    /// CRC-32 of the view's elements converted to float32 (little-endian): msprobe 1.1.1's `md5` of a
    /// bfloat16 tensor, which it hashes as float32.
    pub fn crc_elements_f32(&self) -> Result<u32, i32> {
        let mut h = crc32fast::Hasher::new();
        for v in self.read_f64()? {
            h.update(&(v as f32).to_le_bytes());
        }
        Ok(h.finalize())
    }
    pub fn read_f64(&self) -> Result<Vec<f64>, i32> {
        let b = self.read_span()?;
        let es = self.dtype.size();
        let offs = self.offsets();
        if matches!(self.dtype, DType::I64 | DType::U64) {
            note_rounded(offs.iter().map(|&o| exact_int(self.dtype, &b[o * es..])));
        }
        Ok(offs.into_iter().map(|o| self.dtype.get(&b[o * es..])).collect())
    }
    pub fn read_f32(&self) -> Result<Vec<f32>, i32> {
        Ok(self.read_f64()?.into_iter().map(|v| v as f32).collect())
    }
    pub fn read_i64(&self) -> Result<Vec<i64>, i32> {
        let b = self.read_span()?;
        let es = self.dtype.size();
        Ok(self.offsets().into_iter().map(|o| self.dtype.get_i64(&b[o * es..])).collect())
    }
    /// A kernel that computed another number of values than the view holds is a simulator bug: it fails the
    /// launch (ACLNN_ERR_INNER) instead of leaving elements unwritten or dropping values.
    fn check_len(&self, n: usize) -> Result<(), i32> {
        if n == self.numel() {
            Ok(())
        } else {
            Err(crate::errmsg::fail(
                ACLNN_ERR_INNER,
                format!("simulator bug: a kernel produced {n} values for a tensor of {} elements", self.numel()),
            ))
        }
    }
    pub fn write_f64(&self, v: &[f64]) -> Result<(), i32> {
        self.check_len(v.len())?;
        let (a, _) = self.byte_span();
        let mut b = self.read_span()?;
        let es = self.dtype.size();
        for (o, x) in self.offsets().into_iter().zip(v) {
            self.dtype.put(&mut b[o * es..], *x);
        }
        mem::write(a, &b)
    }
    /// The view's elements in row-major order, as raw bytes (`dtype.size()` each).
    pub fn read_raw(&self) -> Result<Vec<u8>, i32> {
        let b = self.read_span()?;
        let es = self.dtype.size();
        Ok(self.offsets().into_iter().flat_map(|o| b[o * es..o * es + es].iter().copied()).collect())
    }
    /// Stores raw elements of the view's dtype in row-major order (exact for every dtype).
    pub fn write_raw(&self, v: &[u8]) -> Result<(), i32> {
        self.check_len(v.len() / self.dtype.size().max(1))?;
        let (a, _) = self.byte_span();
        let mut b = self.read_span()?;
        let es = self.dtype.size();
        for (k, o) in self.offsets().into_iter().enumerate() {
            b[o * es..o * es + es].copy_from_slice(&v[k * es..k * es + es]);
        }
        mem::write(a, &b)
    }
    pub fn write_i64(&self, v: &[i64]) -> Result<(), i32> {
        self.check_len(v.len())?;
        let (a, _) = self.byte_span();
        let mut b = self.read_span()?;
        let es = self.dtype.size();
        for (o, x) in self.offsets().into_iter().zip(v) {
            self.dtype.put_i64(&mut b[o * es..], *x);
        }
        mem::write(a, &b)
    }
    pub fn write_f32(&self, v: &[f32]) -> Result<(), i32> {
        self.check_len(v.len())?;
        let (a, _) = self.byte_span();
        let mut b = self.read_span()?;
        let es = self.dtype.size();
        for (o, x) in self.offsets().into_iter().zip(v) {
            self.dtype.put(&mut b[o * es..], *x as f64);
        }
        mem::write(a, &b)
    }
}

#[cfg(test)]
mod t {
    use super::*;
    #[test]
    fn strided_view() {
        let a = mem::alloc(64).unwrap();
        let base = TView::contiguous(a, DType::F32, vec![2, 3]);
        base.write_f32(&[0., 1., 2., 3., 4., 5.]).unwrap();
        // transpose view
        let t = TView { addr: a, dtype: DType::F32, shape: vec![3, 2], strides: vec![1, 3], offset: 0 };
        assert_eq!(t.read_f32().unwrap(), vec![0., 3., 1., 4., 2., 5.]);
        let o = TView { addr: a, dtype: DType::F32, shape: vec![2], strides: vec![3], offset: 1 };
        assert_eq!(o.byte_span(), (a + 4, 16));
        o.write_f32(&[9., 8.]).unwrap();
        assert_eq!(base.read_f32().unwrap(), vec![0., 9., 2., 3., 8., 5.]);
        mem::free(a).unwrap();
    }
}

/// The value of one executor slot at launch time.
#[derive(Clone, Debug)]
pub enum SV {
    T(Option<TView>),
    L(Vec<TView>),
}

/// View `v` broadcast to `shape` (stride 0 on broadcast axes).
pub fn bview(v: &TView, shape: &[i64]) -> Result<TView, i32> {
    if v.shape.len() > shape.len() {
        return Err(crate::errmsg::fail(
            ACLNN_ERR_PARAM_INVALID,
            format!("cannot broadcast {:?} to {:?}", v.shape, shape),
        ));
    }
    let lead = shape.len() - v.shape.len();
    let mut st = vec![0i64; shape.len()];
    for i in 0..v.shape.len() {
        let (d, o) = (v.shape[i], shape[lead + i]);
        st[lead + i] = if d == o {
            v.strides[i]
        } else if d == 1 {
            0
        } else {
            return Err(crate::errmsg::fail(
                ACLNN_ERR_PARAM_INVALID,
                format!("cannot broadcast {:?} to {:?}", v.shape, shape),
            ));
        };
    }
    Ok(TView { addr: v.addr, dtype: v.dtype, shape: shape.to_vec(), strides: st, offset: v.offset })
}

/// View shapes set by kernels whose output shape they decide (aclnnNonzero, aclop NonZero), by
/// aclTensor or aclTensorDesc handle (distinct ranges), until the client reads them
/// (`aclGetViewShape`, `aclGetTensorDescDimV2`, ...) or destroys the tensor or descriptor. Kept here, below
/// `nnop`, so that the operators need not reach up into the executor store.
static KERNEL_SHAPES: std::sync::Mutex<Vec<(usize, Vec<i64>)>> = std::sync::Mutex::new(Vec::new());

/// Notes the shape a kernel gave the output aclTensor `h`.
pub fn set_kernel_shape(h: usize, shape: Vec<i64>) {
    let mut v = KERNEL_SHAPES.lock().unwrap_or_else(|e| e.into_inner());
    v.retain(|(k, _)| *k != h);
    v.push((h, shape));
}

/// The shape a kernel gave `h`, if it is still to be read (left for the client).
pub fn kernel_shape(h: usize) -> Option<Vec<i64>> {
    let v = KERNEL_SHAPES.lock().unwrap_or_else(|e| e.into_inner());
    v.iter().find(|(k, _)| *k == h).map(|(_, s)| s.clone())
}

/// The shape a kernel gave `h` since the last call, if any.
pub fn take_kernel_shape(h: usize) -> Option<Vec<i64>> {
    let mut v = KERNEL_SHAPES.lock().unwrap_or_else(|e| e.into_inner());
    let i = v.iter().position(|(k, _)| *k == h)?;
    Some(v.swap_remove(i).1)
}
