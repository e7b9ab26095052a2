//! Reading dumped tensors: `.pt` (torch.save's zip: a pickle naming the storage, its dtype, size
//! and strides, and the storage bytes) and `.npy`, memory-mapped.

use std::io::Cursor;
use std::path::Path;

/// Element type as msprobe's compare sees it (`bf16` is read as float32, as msprobe converts it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DT {
    F16,
    BF16,
    F32,
    F64,
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    Bool,
    /// complex: msprobe's `astype(float)` keeps the real part
    C64,
    C128,
}

/// Float kind used for arithmetic in numpy's dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    F16,
    F32,
    F64,
}

impl DT {
    pub fn size(self) -> usize {
        match self {
            DT::I8 | DT::U8 | DT::Bool => 1,
            DT::F16 | DT::BF16 | DT::I16 | DT::U16 => 2,
            DT::F32 | DT::I32 | DT::U32 => 4,
            DT::F64 | DT::I64 | DT::U64 | DT::C64 => 8,
            DT::C128 => 16,
        }
    }

    /// The numpy float kind, or `None` for integers and bool.
    pub fn float_kind(self) -> Option<Kind> {
        match self {
            DT::F16 => Some(Kind::F16),
            DT::BF16 | DT::F32 => Some(Kind::F32),
            DT::F64 => Some(Kind::F64),
            _ => None,
        }
    }
}

enum Bytes {
    Map(memmap2::Mmap),
    Owned(Vec<u8>),
}

/// Files up to this size are mapped with their pages read in at once; larger ones are read as
/// they are compared and their pages dropped behind the reader, so memory stays bounded.
const POPULATE_MAX: u64 = 64 << 20;

/// A loaded tensor: contiguous little-endian elements.
pub struct Tensor {
    bytes: Bytes,
    start: usize,
    pub dtype: DT,
    pub shape: Vec<usize>,
}

impl Tensor {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    fn data(&self) -> &[u8] {
        let all = match &self.bytes {
            Bytes::Map(m) => &m[..],
            Bytes::Owned(v) => &v[..],
        };
        &all[self.start..self.start + self.numel() * self.dtype.size()]
    }

    /// Drops the mapped pages of elements `[from, to)` once they are compared (large files only:
    /// small ones are unmapped whole when the tensor is dropped).
    pub fn release(&self, from: usize, to: usize) {
        let Bytes::Map(m) = &self.bytes else { return };
        if (m.len() as u64) <= POPULATE_MAX {
            return;
        }
        const PAGE: usize = 4096;
        let sz = self.dtype.size();
        let a = (self.start + from * sz).div_ceil(PAGE) * PAGE;
        let b = ((self.start + to * sz) / PAGE * PAGE).min(m.len());
        if b > a {
            // SAFETY: a read-only shared mapping of a file: MADV_DONTNEED only drops the pages,
            // and a later read of the range loads the same file contents again; no slice into
            // the range is used across this call by a writer (there is none).
            let _ = unsafe { m.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, a, b - a) };
        }
    }

    /// The raw little-endian bytes of a float32 tensor.
    pub fn f32_bytes(&self) -> &[u8] {
        self.data()
    }

    /// Elements `[from, from + out.len())` as f64 (exact for every type read here).
    pub fn read_f64(&self, from: usize, out: &mut [f64]) {
        let sz = self.dtype.size();
        let d = &self.data()[from * sz..(from + out.len()) * sz];
        macro_rules! conv {
            ($t:ty, $f:expr) => {
                for (o, c) in out.iter_mut().zip(d.chunks_exact(sz)) {
                    let v = <$t>::from_le_bytes(c.try_into().unwrap_or_default());
                    *o = $f(v);
                }
            };
        }
        match self.dtype {
            DT::F32 => conv!(f32, |v: f32| v as f64),
            DT::F64 => conv!(f64, |v: f64| v),
            DT::F16 => conv!(u16, |v: u16| half::f16::from_bits(v).to_f64()),
            DT::BF16 => conv!(u16, |v: u16| half::bf16::from_bits(v).to_f64()),
            DT::I8 => conv!(i8, |v: i8| v as f64),
            DT::U8 => conv!(u8, |v: u8| v as f64),
            DT::Bool => conv!(u8, |v: u8| (v != 0) as u8 as f64),
            DT::I16 => conv!(i16, |v: i16| v as f64),
            DT::U16 => conv!(u16, |v: u16| v as f64),
            DT::I32 => conv!(i32, |v: i32| v as f64),
            DT::U32 => conv!(u32, |v: u32| v as f64),
            DT::I64 => conv!(i64, |v: i64| v as f64),
            DT::U64 => conv!(u64, |v: u64| v as f64),
            DT::C64 => {
                for (o, c) in out.iter_mut().zip(d.chunks_exact(8)) {
                    *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64;
                }
            }
            DT::C128 => {
                for (o, c) in out.iter_mut().zip(d.chunks_exact(16)) {
                    *o = f64::from_le_bytes(c[..8].try_into().unwrap_or_default());
                }
            }
        }
    }
}

fn map(path: &Path) -> Result<memmap2::Mmap, String> {
    // a regular file only: a symlink is refused (it may point outside the dump), a FIFO would block
    let f =
        msprobe_core::fsutil::open_read_nofollow(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let small = f.metadata().map(|m| m.len() <= POPULATE_MAX).unwrap_or(false);
    let mut o = memmap2::MmapOptions::new();
    if small {
        o.populate();
    }
    // SAFETY: the dump files are read-only inputs; a file truncated by another process while we
    // read it could fault, which is the same contract every mmap-based reader accepts (msprobe
    // users do not rewrite a dump while comparing it).
    unsafe { o.map(&f) }.map_err(|e| format!("cannot map {}: {e}", path.display()))
}

/// Loads a `.pt` or `.npy` file.
pub fn load(path: &Path) -> Result<Tensor, String> {
    let m = map(path)?;
    if m.starts_with(b"\x93NUMPY") {
        load_npy(m, path)
    } else {
        load_pt(m, path)
    }
}

fn load_npy(m: memmap2::Mmap, path: &Path) -> Result<Tensor, String> {
    let bad = || format!("{} is not a valid .npy file", path.display());
    if m.len() < 10 {
        return Err(bad());
    }
    let (hlen, hstart) = match m[6] {
        1 => (u16::from_le_bytes([m[8], m[9]]) as usize, 10),
        _ => {
            if m.len() < 12 {
                return Err(bad());
            }
            (u32::from_le_bytes([m[8], m[9], m[10], m[11]]) as usize, 12)
        }
    };
    let header = std::str::from_utf8(m.get(hstart..hstart + hlen).ok_or_else(bad)?).map_err(|_| bad())?;
    let descr = header.split("'descr':").nth(1).and_then(|s| s.split('\'').nth(1)).ok_or_else(bad)?;
    let dtype = match descr {
        "<f4" => DT::F32,
        "<f8" => DT::F64,
        "<f2" => DT::F16,
        "|i1" => DT::I8,
        "|u1" => DT::U8,
        "|b1" => DT::Bool,
        "<i2" => DT::I16,
        "<u2" => DT::U16,
        "<i4" => DT::I32,
        "<u4" => DT::U32,
        "<i8" => DT::I64,
        "<u8" => DT::U64,
        "<c8" => DT::C64,
        "<c16" => DT::C128,
        other => return Err(format!("{}: unsupported dtype {other}", path.display())),
    };
    if header.contains("'fortran_order': True") {
        return Err(format!("{}: Fortran-ordered arrays are not supported", path.display()));
    }
    let shape_txt = header.split("'shape':").nth(1).and_then(|s| s.split('(').nth(1)).and_then(|s| s.split(')').next());
    let shape: Vec<usize> = shape_txt
        .ok_or_else(bad)?
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    let start = hstart + hlen;
    let t = Tensor { bytes: Bytes::Map(m), start, dtype, shape };
    let need = t.start + t.numel() * dtype.size();
    let have = match &t.bytes {
        Bytes::Map(m) => m.len(),
        Bytes::Owned(v) => v.len(),
    };
    if need > have {
        return Err(format!("{} is cut short ({have} of {need} bytes)", path.display()));
    }
    Ok(t)
}

// ---- .pt: zip + pickle ----

#[derive(Clone, Debug)]
enum P {
    None,
    /// a bool or a float: carried, never read
    Scalar,
    Int(i64),
    Str(String),
    Bytes,
    Tuple(Vec<P>),
    List(Vec<P>),
    Dict,
    Global(String, String),
    Reduce(Box<P>, Box<P>),
    Pers(Box<P>),
    Mark,
}

fn unpickle(b: &[u8]) -> Result<P, String> {
    let mut st: Vec<P> = Vec::new();
    let mut memo: std::collections::HashMap<u32, P> = std::collections::HashMap::new();
    let mut i = 0usize;
    let err = |m: &str| format!("pickle: {m}");
    macro_rules! take {
        ($n:expr) => {{
            let n = $n;
            let s = b.get(i..i + n).ok_or_else(|| err("truncated"))?;
            i += n;
            s
        }};
    }
    let pop_mark = |st: &mut Vec<P>| -> Result<Vec<P>, String> {
        let k = st.iter().rposition(|p| matches!(p, P::Mark)).ok_or_else(|| err("no mark"))?;
        let items = st.split_off(k + 1);
        st.pop();
        Ok(items)
    };
    loop {
        let op = *b.get(i).ok_or_else(|| err("no STOP"))?;
        i += 1;
        match op {
            0x80 => {
                take!(1);
            }
            0x95 => {
                take!(8);
            }
            b'}' => st.push(P::Dict),
            b']' => st.push(P::List(vec![])),
            b')' => st.push(P::Tuple(vec![])),
            b'(' => st.push(P::Mark),
            b'N' => st.push(P::None),
            0x88 => st.push(P::Scalar),
            0x89 => st.push(P::Scalar),
            b'K' => st.push(P::Int(take!(1)[0] as i64)),
            b'M' => {
                let s = take!(2);
                st.push(P::Int(u16::from_le_bytes([s[0], s[1]]) as i64))
            }
            b'J' => {
                let s = take!(4);
                st.push(P::Int(i32::from_le_bytes(s.try_into().unwrap_or_default()) as i64))
            }
            0x8a => {
                let n = take!(1)[0] as usize;
                let s = take!(n);
                let mut v: i64 = 0;
                for (k, byte) in s.iter().enumerate().take(8) {
                    v |= (*byte as i64) << (8 * k);
                }
                if n > 0 && n < 8 && s[n - 1] & 0x80 != 0 {
                    v -= 1i64 << (8 * n);
                }
                st.push(P::Int(v))
            }
            b'G' => {
                let s = take!(8);
                let _ = s;
                st.push(P::Scalar)
            }
            b'X' => {
                let s = take!(4);
                let n = u32::from_le_bytes(s.try_into().unwrap_or_default()) as usize;
                st.push(P::Str(String::from_utf8_lossy(take!(n)).into_owned()))
            }
            0x8c => {
                let n = take!(1)[0] as usize;
                st.push(P::Str(String::from_utf8_lossy(take!(n)).into_owned()))
            }
            b'C' => {
                let n = take!(1)[0] as usize;
                take!(n);
                st.push(P::Bytes)
            }
            b'B' => {
                let s = take!(4);
                let n = u32::from_le_bytes(s.try_into().unwrap_or_default()) as usize;
                take!(n);
                st.push(P::Bytes)
            }
            b'c' => {
                let rest = &b[i..];
                let l1 = rest.iter().position(|&c| c == b'\n').ok_or_else(|| err("GLOBAL"))?;
                let l2 = rest[l1 + 1..].iter().position(|&c| c == b'\n').ok_or_else(|| err("GLOBAL"))?;
                let m = String::from_utf8_lossy(&rest[..l1]).into_owned();
                let n = String::from_utf8_lossy(&rest[l1 + 1..l1 + 1 + l2]).into_owned();
                i += l1 + l2 + 2;
                st.push(P::Global(m, n))
            }
            0x93 => {
                let n = st.pop().ok_or_else(|| err("stack"))?;
                let m = st.pop().ok_or_else(|| err("stack"))?;
                match (m, n) {
                    (P::Str(m), P::Str(n)) => st.push(P::Global(m, n)),
                    _ => return Err(err("STACK_GLOBAL")),
                }
            }
            b'q' => {
                let k = take!(1)[0] as u32;
                memo.insert(k, st.last().cloned().ok_or_else(|| err("stack"))?);
            }
            b'r' => {
                let s = take!(4);
                let k = u32::from_le_bytes(s.try_into().unwrap_or_default());
                memo.insert(k, st.last().cloned().ok_or_else(|| err("stack"))?);
            }
            0x94 => {
                let k = memo.len() as u32;
                memo.insert(k, st.last().cloned().ok_or_else(|| err("stack"))?);
            }
            b'h' => {
                let k = take!(1)[0] as u32;
                st.push(memo.get(&k).cloned().ok_or_else(|| err("memo"))?)
            }
            b'j' => {
                let s = take!(4);
                let k = u32::from_le_bytes(s.try_into().unwrap_or_default());
                st.push(memo.get(&k).cloned().ok_or_else(|| err("memo"))?)
            }
            b't' => {
                let items = pop_mark(&mut st)?;
                st.push(P::Tuple(items))
            }
            0x85..=0x87 => {
                let n = (op - 0x84) as usize;
                if st.len() < n {
                    return Err(err("stack"));
                }
                let items = st.split_off(st.len() - n);
                st.push(P::Tuple(items))
            }
            b'Q' => {
                let pid = st.pop().ok_or_else(|| err("stack"))?;
                st.push(P::Pers(Box::new(pid)))
            }
            b'R' | 0x81 => {
                let args = st.pop().ok_or_else(|| err("stack"))?;
                let f = st.pop().ok_or_else(|| err("stack"))?;
                st.push(P::Reduce(Box::new(f), Box::new(args)))
            }
            b'b' | b's' => {
                st.pop();
                if op == b's' {
                    st.pop();
                }
            }
            b'u' | b'e' => {
                let items = pop_mark(&mut st)?;
                if op == b'e' {
                    if let Some(P::List(l)) = st.last_mut() {
                        l.extend(items);
                    }
                }
            }
            b'a' => {
                let v = st.pop().ok_or_else(|| err("stack"))?;
                if let Some(P::List(l)) = st.last_mut() {
                    l.push(v);
                }
            }
            b'0' => {
                st.pop();
            }
            b'1' => {
                pop_mark(&mut st)?;
            }
            b'2' => {
                let v = st.last().cloned().ok_or_else(|| err("stack"))?;
                st.push(v)
            }
            b'.' => return st.pop().ok_or_else(|| err("empty")),
            other => return Err(err(&format!("unsupported opcode 0x{other:02x}"))),
        }
    }
}

struct Rebuild {
    key: String,
    dtype: DT,
    offset: usize,
    size: Vec<usize>,
    stride: Vec<usize>,
}

fn ints(p: &P) -> Option<Vec<usize>> {
    match p {
        P::Tuple(v) | P::List(v) => {
            v.iter().map(|x| if let P::Int(i) = x { usize::try_from(*i).ok() } else { None }).collect()
        }
        _ => None,
    }
}

fn find_rebuild(p: &P) -> Option<Rebuild> {
    let P::Reduce(f, args) = p else { return None };
    let P::Global(module, fname) = &**f else { return None };
    if !module.starts_with("torch") {
        return None;
    }
    let P::Tuple(a) = &**args else { return None };
    if fname == "_rebuild_parameter" || fname == "_rebuild_parameter_with_state" {
        return a.first().and_then(find_rebuild);
    }
    if !fname.starts_with("_rebuild_tensor") {
        return None;
    }
    let P::Pers(pid) = a.first()? else { return None };
    let P::Tuple(pid) = &**pid else { return None };
    let P::Global(smod, storage) = pid.get(1)? else { return None };
    if smod != "torch" {
        return None;
    }
    let key = match pid.get(2)? {
        P::Str(s) => s.clone(),
        P::Int(i) => i.to_string(),
        _ => return None,
    };
    let dtype = match storage.as_str() {
        "FloatStorage" => DT::F32,
        "DoubleStorage" => DT::F64,
        "HalfStorage" => DT::F16,
        "BFloat16Storage" => DT::BF16,
        "LongStorage" => DT::I64,
        "IntStorage" => DT::I32,
        "ShortStorage" => DT::I16,
        "CharStorage" => DT::I8,
        "ByteStorage" => DT::U8,
        "BoolStorage" => DT::Bool,
        "ComplexFloatStorage" => DT::C64,
        "ComplexDoubleStorage" => DT::C128,
        _ => return None,
    };
    let offset = match a.get(1)? {
        P::Int(i) => usize::try_from(*i).ok()?,
        _ => return None,
    };
    Some(Rebuild { key, dtype, offset, size: ints(a.get(2)?)?, stride: ints(a.get(3)?)? })
}

/// The byte range of a stored (uncompressed) zip entry inside the archive.
fn entry_range(z: &mut zip::ZipArchive<Cursor<&[u8]>>, name: &str) -> Option<(usize, usize)> {
    let f = z.by_name(name).ok()?;
    if f.compression() != zip::CompressionMethod::Stored {
        return None;
    }
    let start = usize::try_from(f.data_start()?).ok()?;
    Some((start, usize::try_from(f.size()).ok()?))
}

fn load_pt(m: memmap2::Mmap, path: &Path) -> Result<Tensor, String> {
    let bad = |why: String| format!("{} is not a readable torch.save file: {why}", path.display());
    let (pkl_name, prefix, rb, data) = {
        let mut z = zip::ZipArchive::new(Cursor::new(&m[..])).map_err(|e| bad(e.to_string()))?;
        let pkl_name = z
            .file_names()
            .filter_map(|n| n.ok())
            .find(|n| n.ends_with("data.pkl"))
            .map(|n| n.to_string())
            .ok_or_else(|| bad("no data.pkl".into()))?;
        let prefix = pkl_name.trim_end_matches("data.pkl").to_string();
        let (ps, pl) = entry_range(&mut z, &pkl_name).ok_or_else(|| bad("data.pkl is compressed".into()))?;
        let p = unpickle(&m[ps..ps + pl]).map_err(bad)?;
        let rb = find_rebuild(&p).ok_or_else(|| bad("the pickle holds no plain tensor".into()))?;
        let data = entry_range(&mut z, &format!("{prefix}data/{}", rb.key))
            .ok_or_else(|| bad("storage missing or compressed".into()))?;
        (pkl_name, prefix, rb, data)
    };
    let _ = (pkl_name, prefix);
    let es = rb.dtype.size();
    let numel: usize = rb.size.iter().product();
    // contiguous strides?
    let mut expect = 1usize;
    let mut contiguous = true;
    for (d, s) in rb.size.iter().zip(&rb.stride).rev() {
        if *d != 1 && *s != expect {
            contiguous = false;
        }
        expect *= *d;
    }
    let (dstart, dlen) = data;
    if contiguous {
        let start = dstart + rb.offset * es;
        if rb.offset * es + numel * es > dlen {
            return Err(bad("storage shorter than the tensor".into()));
        }
        return Ok(Tensor { bytes: Bytes::Map(m), start, dtype: rb.dtype, shape: rb.size });
    }
    // strided view: gather into a contiguous copy
    let storage = &m[dstart..dstart + dlen];
    let mut out = Vec::with_capacity(numel * es);
    let mut idx = vec![0usize; rb.size.len()];
    for _ in 0..numel {
        let off = rb.offset + idx.iter().zip(&rb.stride).map(|(i, s)| i * s).sum::<usize>();
        let b = storage.get(off * es..off * es + es).ok_or_else(|| bad("stride outside the storage".into()))?;
        out.extend_from_slice(b);
        for k in (0..idx.len()).rev() {
            idx[k] += 1;
            if idx[k] < rb.size[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    Ok(Tensor { bytes: Bytes::Owned(out), start: 0, dtype: rb.dtype, shape: rb.size })
}

#[cfg(test)]
mod tests {
    use super::*;
    use msprobe_core::dtype::DType;
    use msprobe_core::tensorfile::{encode_npy, encode_pt};

    fn write(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("msprobe-cmp-test-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn reads_pt_and_npy_written_by_the_core() {
        let vals: Vec<f32> = (0..6).map(|i| i as f32 * 0.5 - 1.0).collect();
        let raw: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        for (name, bytes) in [
            ("a.pt", encode_pt("a", DType::F32, &[2, 3], &raw).unwrap()),
            ("a.npy", encode_npy(DType::F32, &[2, 3], &raw)),
        ] {
            let t = load(&write(name, &bytes)).unwrap();
            assert_eq!(t.shape, vec![2, 3]);
            assert_eq!(t.dtype, DT::F32);
            let mut out = [0f64; 6];
            t.read_f64(0, &mut out);
            assert_eq!(out.to_vec(), vals.iter().map(|v| *v as f64).collect::<Vec<_>>());
        }
        let bf: Vec<u8> = [1.5f32, -2.0].iter().flat_map(|v| ((v.to_bits() >> 16) as u16).to_le_bytes()).collect();
        let t = load(&write("b.pt", &encode_pt("b", DType::BF16, &[2], &bf).unwrap())).unwrap();
        let mut out = [0f64; 2];
        t.read_f64(0, &mut out);
        assert_eq!(out, [1.5, -2.0]);
    }

    #[test]
    fn rejects_garbage_and_cut_files() {
        assert!(load(&write("bad.pt", b"not a zip at all")).is_err());
        let raw = vec![0u8; 24];
        let mut npy = encode_npy(DType::F32, &[6], &raw);
        npy.truncate(npy.len() - 4);
        match load(&write("cut.npy", &npy)) {
            Err(e) => assert!(e.contains("cut short"), "{e}"),
            Ok(_) => panic!("a cut .npy file was read"),
        }
    }
}
