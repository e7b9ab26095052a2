//! Tensor views over storage: byte spans and gathering a strided view into contiguous bytes.
//!
//! ACL tensors (and framework tensors) are views: shape, element strides and an element offset
//! into a storage buffer. Statistics and files describe the view's elements in row-major order,
//! so a non-contiguous view is gathered first. The span is also what the interposer copies off
//! the device.

use std::borrow::Cow;

/// Why a view cannot be read from the storage it was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LayoutError {
    NegativeDim,
    NegativeStride,
    NegativeOffset(i64),
    OutOfBounds { needed: u128, available: usize },
}

impl std::fmt::Display for LayoutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LayoutError::NegativeDim => write!(f, "negative dimension"),
            LayoutError::NegativeStride => write!(f, "negative stride"),
            LayoutError::NegativeOffset(o) => write!(f, "negative storage offset ({o} elements)"),
            LayoutError::OutOfBounds { needed, available } => {
                write!(f, "view needs {needed} bytes of storage but {available} are available")
            }
        }
    }
}

impl std::error::Error for LayoutError {}

/// Row-major (C-contiguous) strides of a shape, in elements.
pub fn contiguous_strides(shape: &[i64]) -> Vec<i64> {
    let mut s = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1].max(1);
    }
    s
}

pub fn numel(shape: &[i64]) -> u128 {
    shape.iter().map(|&d| d.max(0) as u128).product()
}

/// The element range `[first, last + 1)` a view touches, relative to the storage start;
/// `None` for an empty view.
pub fn element_span(shape: &[i64], strides: &[i64], offset: i64) -> Result<Option<(u128, u128)>, LayoutError> {
    if shape.iter().any(|&d| d < 0) {
        return Err(LayoutError::NegativeDim);
    }
    if strides.iter().any(|&s| s < 0) {
        return Err(LayoutError::NegativeStride);
    }
    if offset < 0 {
        return Err(LayoutError::NegativeOffset(offset));
    }
    if numel(shape) == 0 {
        return Ok(None);
    }
    let last: u128 = shape.iter().zip(strides).map(|(&d, &s)| (d as u128 - 1) * s as u128).sum();
    Ok(Some((offset as u128, offset as u128 + last + 1)))
}

/// The view's elements as contiguous little-endian bytes, borrowing when the view already is
/// contiguous. `strides = None` means row-major.
pub fn gather<'a>(
    elem: usize,
    shape: &[i64],
    strides: Option<&[i64]>,
    offset: i64,
    storage: &'a [u8],
) -> Result<Cow<'a, [u8]>, LayoutError> {
    let cstrides = contiguous_strides(shape);
    let strides = strides.unwrap_or(&cstrides);
    let Some((lo, hi)) = element_span(shape, strides, offset)? else {
        return Ok(Cow::Borrowed(&[]));
    };
    let needed = hi * elem as u128;
    if needed > storage.len() as u128 {
        return Err(LayoutError::OutOfBounds { needed, available: storage.len() });
    }
    let n = numel(shape) as usize;
    let contiguous = shape.iter().zip(strides.iter().zip(&cstrides)).all(|(&d, (&s, &c))| d == 1 || s == c);
    if contiguous {
        return Ok(Cow::Borrowed(&storage[lo as usize * elem..(lo as usize + n) * elem]));
    }
    let dims = merged_dims(shape, strides);
    let mut out = vec![0u8; n * elem];
    // Copying element by element through a slice of run-time length costs a memmove call per
    // element (a transposed 64x64 gradient took ~10 µs); a fixed-size copy is one load and store.
    match elem {
        1 => copy_view::<1>(&mut out, storage, &dims, offset),
        2 => copy_view::<2>(&mut out, storage, &dims, offset),
        4 => copy_view::<4>(&mut out, storage, &dims, offset),
        8 => copy_view::<8>(&mut out, storage, &dims, offset),
        16 => copy_view::<16>(&mut out, storage, &dims, offset),
        _ => copy_view_dyn(elem, &mut out, storage, &dims, offset),
    }
    Ok(Cow::Owned(out))
}

/// The view's (size, stride) dimensions without size-1 ones, each run of dimensions that
/// steps through memory as one (`stride[i] == stride[i+1] * size[i+1]`) merged. Never empty:
/// a view of one element is `[(1, 1)]`.
fn merged_dims(shape: &[i64], strides: &[i64]) -> Vec<(usize, usize)> {
    let mut dims: Vec<(usize, usize)> = Vec::with_capacity(shape.len().max(1));
    for (&d, &s) in shape.iter().zip(strides) {
        if d == 1 {
            continue;
        }
        let (d, s) = (d as usize, s as usize);
        match dims.last_mut() {
            Some(last) if last.1 == s * d => *last = (last.0 * d, s),
            _ => dims.push((d, s)),
        }
    }
    if dims.is_empty() {
        dims.push((1, 1));
    }
    dims
}

/// Visits the first element (in elements) of each innermost row of `dims`, in row-major order.
fn for_each_row(dims: &[(usize, usize)], offset: i64, mut f: impl FnMut(usize)) {
    let outer = &dims[..dims.len() - 1];
    let mut idx = vec![0usize; outer.len()];
    let mut base = offset as usize;
    loop {
        f(base);
        // Advance the odometer over the outer dimensions, keeping `base` in step.
        let mut k = outer.len();
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            idx[k] += 1;
            base += outer[k].1;
            if idx[k] < outer[k].0 {
                break;
            }
            base -= outer[k].1 * outer[k].0;
            idx[k] = 0;
        }
    }
}

/// Gathers a view of `N`-byte elements into `out` (its row-major size). Every index is inside
/// `storage`: the caller checked the view's span.
fn copy_view<const N: usize>(out: &mut [u8], storage: &[u8], dims: &[(usize, usize)], offset: i64) {
    let (len, stride) = dims[dims.len() - 1];
    let mut rows = out.chunks_exact_mut(len * N);
    for_each_row(dims, offset, |base| {
        let Some(row) = rows.next() else { return };
        if stride == 1 {
            row.copy_from_slice(&storage[base * N..(base + len) * N]);
            return;
        }
        for (j, o) in row.chunks_exact_mut(N).enumerate() {
            let e = (base + j * stride) * N;
            let v: &[u8; N] = storage[e..e + N].try_into().expect("N bytes");
            o.copy_from_slice(v);
        }
    });
}

/// [`copy_view`] for element sizes known only at run time.
fn copy_view_dyn(elem: usize, out: &mut [u8], storage: &[u8], dims: &[(usize, usize)], offset: i64) {
    let (len, stride) = dims[dims.len() - 1];
    let mut rows = out.chunks_exact_mut(len * elem);
    for_each_row(dims, offset, |base| {
        let Some(row) = rows.next() else { return };
        for (j, o) in row.chunks_exact_mut(elem).enumerate() {
            let e = (base + j * stride) * elem;
            o.copy_from_slice(&storage[e..e + elem]);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transposed_view_gathers_row_major() {
        // storage [[0,1,2],[3,4,5]] as u8; the transpose has shape [3,2], strides [1,3]
        let st: Vec<u8> = (0..6).collect();
        let g = gather(1, &[3, 2], Some(&[1, 3]), 0, &st).unwrap();
        assert_eq!(&*g, &[0, 3, 1, 4, 2, 5]);
        // a column slice with an offset: st[:, 1] → shape [2], stride [3], offset 1
        let g = gather(1, &[2], Some(&[3]), 1, &st).unwrap();
        assert_eq!(&*g, &[1, 4]);
        // contiguous views borrow
        assert!(matches!(gather(1, &[2, 3], None, 0, &st).unwrap(), Cow::Borrowed(_)));
        assert_eq!(element_span(&[2, 3], &[3, 1], 2).unwrap(), Some((2, 8)));
        assert!(matches!(gather(1, &[3, 3], None, 0, &st), Err(LayoutError::OutOfBounds { .. })));
        assert_eq!(&*gather(4, &[0, 5], None, 0, &[]).unwrap(), &[] as &[u8]);
        // 0-d
        assert_eq!(&*gather(1, &[], None, 4, &st).unwrap(), &[4]);
    }

    #[test]
    fn each_bad_view_is_named_for_what_is_wrong() {
        let e = |shape: &[i64], strides: &[i64], offset| element_span(shape, strides, offset).unwrap_err().to_string();
        assert_eq!(e(&[2], &[1], -3), "negative storage offset (-3 elements)");
        assert_eq!(e(&[2], &[-1], 0), "negative stride");
        assert_eq!(e(&[-2], &[1], 0), "negative dimension");
        let err = gather(4, &[2], None, -1, &[0; 8]).unwrap_err();
        assert_eq!(err, LayoutError::NegativeOffset(-1));
    }

    /// Element by element from the definition: element `(i0, i1, ...)` is at
    /// `offset + sum(i_k * stride_k)`.
    fn reference(elem: usize, shape: &[i64], strides: &[i64], offset: i64, storage: &[u8]) -> Vec<u8> {
        let n = numel(shape) as usize;
        let mut out = Vec::new();
        for flat in 0..n {
            let (mut rest, mut at) = (flat, offset as usize);
            for (&d, &s) in shape.iter().zip(strides).rev() {
                at += (rest % d as usize) * s as usize;
                rest /= d as usize;
            }
            out.extend_from_slice(&storage[at * elem..(at + 1) * elem]);
        }
        out
    }

    #[test]
    fn strided_views_gather_like_the_definition() {
        // Transposes, broadcasts (stride 0), slices, size-1 dimensions, offsets, every element
        // size, from a seeded generator.
        let mut rng = fastrand::Rng::with_seed(0x2545_f491_4f6c_dd1d);
        let mut next = |m: u64| rng.u64(0..m);
        for case in 0..2000 {
            let elem = [1, 2, 4, 8, 16, 3][case % 6];
            let nd = next(5) as usize;
            let shape: Vec<i64> = (0..nd).map(|_| next(5) as i64 + 1).collect();
            let strides: Vec<i64> = (0..nd)
                .map(|_| match next(4) {
                    0 => 0,
                    _ => next(40) as i64 + 1,
                })
                .collect();
            let offset = next(7) as i64;
            let (_, hi) = element_span(&shape, &strides, offset).unwrap().unwrap();
            let storage: Vec<u8> = (0..hi as usize * elem).map(|i| (i * 7 + 3) as u8).collect();
            let got = gather(elem, &shape, Some(&strides), offset, &storage).unwrap();
            assert_eq!(
                &*got,
                &reference(elem, &shape, &strides, offset, &storage)[..],
                "{elem} {shape:?} {strides:?} {offset}"
            );
        }
    }
}
