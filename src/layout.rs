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
    OutOfBounds { needed: u128, available: usize },
}

impl std::fmt::Display for LayoutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LayoutError::NegativeDim => write!(f, "negative dimension"),
            LayoutError::NegativeStride => write!(f, "negative stride"),
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
    if strides.iter().any(|&s| s < 0) || offset < 0 {
        return Err(LayoutError::NegativeStride);
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
    let mut out = Vec::with_capacity(n * elem);
    let nd = shape.len();
    let mut idx = vec![0i64; nd];
    let inner = shape[nd - 1];
    let inner_stride = strides[nd - 1];
    loop {
        let base: i64 = offset + idx.iter().zip(strides).map(|(i, s)| i * s).sum::<i64>();
        for j in 0..inner {
            let e = (base + j * inner_stride) as usize * elem;
            out.extend_from_slice(&storage[e..e + elem]);
        }
        // Advance the odometer over all but the innermost dimension.
        let mut d = nd as isize - 2;
        loop {
            if d < 0 {
                return Ok(Cow::Owned(out));
            }
            let k = d as usize;
            idx[k] += 1;
            if idx[k] < shape[k] {
                break;
            }
            idx[k] = 0;
            d -= 1;
        }
    }
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
}
