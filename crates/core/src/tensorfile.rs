//! Tensor file encoders: `.npy` (numpy format 1.0) and `.pt` (PyTorch's zip serialization).
//!
//! msprobe's PyTorch dumps are `torch.save` files; MindSpore dumps are `.npy`. We write both
//! from Rust so the capture never calls back into Python. The `.pt` layout mirrors torch.save:
//! an uncompressed zip whose entries live under `{stem}/`, a protocol-2 pickle calling
//! `torch._utils._rebuild_tensor_v2` with a persistent storage id, and the storage bytes in
//! `{stem}/data/0`, 64-byte aligned, so `torch.load(path, weights_only=True)` accepts it. The zip
//! writer is hand-written because we need that alignment padding (torch's "FB" extra field) and
//! nothing else; a general zip crate would add a dependency for 100 lines.

use crate::dtype::DType;

/// Which container a tensor is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileFormat {
    Npy,
    Pt,
}

impl FileFormat {
    pub fn ext(self) -> &'static str {
        match self {
            FileFormat::Npy => "npy",
            FileFormat::Pt => "pt",
        }
    }
}

/// numpy `descr` and the bytes as stored. bf16 has no numpy dtype: it is widened to float32
/// (exact), and dump.json keeps the original dtype.
fn npy_descr(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 | DType::BF16 => "<f4",
        DType::F16 => "<f2",
        DType::F64 => "<f8",
        DType::I8 => "|i1",
        DType::U8 => "|u1",
        DType::I16 => "<i2",
        DType::U16 => "<u2",
        DType::I32 => "<i4",
        DType::U32 => "<u4",
        DType::I64 => "<i8",
        DType::U64 => "<u8",
        DType::Bool => "|b1",
        DType::C64 => "<c8",
        DType::C128 => "<c16",
    }
}

fn widen_bf16(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() * 2);
    for b in data.chunks_exact(2) {
        out.extend_from_slice(&(((u16::from_le_bytes([b[0], b[1]]) as u32) << 16).to_le_bytes()));
    }
    out
}

/// Encodes a contiguous tensor as a `.npy` file.
pub fn encode_npy(dtype: DType, shape: &[i64], data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_npy_into(&mut out, dtype, shape, data);
    out
}

/// [`encode_npy`] into a reused buffer (cleared first).
pub fn encode_npy_into(out: &mut Vec<u8>, dtype: DType, shape: &[i64], data: &[u8]) {
    let shape_txt = match shape.len() {
        0 => "()".to_string(),
        1 => format!("({},)", shape[0]),
        _ => format!("({})", shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
    };
    let mut header = format!("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", npy_descr(dtype), shape_txt);
    // Magic (6) + version (2) + header length (2) + header, padded with spaces to a multiple of 64
    // and ended by a newline, as numpy writes it.
    let unpadded = 10 + header.len() + 1;
    header.extend(std::iter::repeat_n(' ', (64 - unpadded % 64) % 64));
    header.push('\n');
    let body: std::borrow::Cow<[u8]> = if dtype == DType::BF16 { widen_bf16(data).into() } else { data.into() };
    out.clear();
    out.reserve(10 + header.len() + body.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&body);
}

/// The pickle GLOBAL that names a dtype's storage, as torch.save writes it.
fn storage_global(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "FloatStorage",
        DType::F16 => "HalfStorage",
        DType::BF16 => "BFloat16Storage",
        DType::F64 => "DoubleStorage",
        DType::I8 => "CharStorage",
        DType::U8 => "ByteStorage",
        DType::I16 => "ShortStorage",
        DType::I32 => "IntStorage",
        DType::I64 => "LongStorage",
        DType::Bool => "BoolStorage",
        DType::C64 => "ComplexFloatStorage",
        DType::C128 => "ComplexDoubleStorage",
        // No typed storage class: torch.save writes an UntypedStorage plus the dtype
        // (`_rebuild_tensor_v3`).
        DType::U16 | DType::U32 | DType::U64 => "storage\nUntypedStorage",
    }
}

/// The dtype global for `_rebuild_tensor_v3`.
fn v3_dtype(dtype: DType) -> Option<&'static str> {
    match dtype {
        DType::U16 => Some("uint16"),
        DType::U32 => Some("uint32"),
        DType::U64 => Some("uint64"),
        _ => None,
    }
}

fn pickle_int(out: &mut Vec<u8>, v: i64) {
    if (0..=0xff).contains(&v) {
        out.extend_from_slice(&[b'K', v as u8]);
    } else if (0..=0xffff).contains(&v) {
        out.push(b'M');
        out.extend_from_slice(&(v as u16).to_le_bytes());
    } else if i32::try_from(v).is_ok() {
        out.push(b'J');
        out.extend_from_slice(&(v as i32).to_le_bytes());
    } else {
        out.extend_from_slice(&[0x8a, 8]); // LONG1, 8 bytes little-endian two's complement
        out.extend_from_slice(&v.to_le_bytes());
    }
}

fn pickle_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'X');
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn pickle_tuple(out: &mut Vec<u8>, items: &[i64]) {
    match items.len() {
        0 => out.push(b')'),
        n => {
            if n > 3 {
                out.push(b'(');
            }
            for &i in items {
                pickle_int(out, i);
            }
            out.push(match n {
                1 => 0x85,
                2 => 0x86,
                3 => 0x87,
                _ => b't',
            });
        }
    }
}

/// The `data.pkl` of a contiguous tensor whose storage is `data/0`.
fn tensor_pickle(dtype: DType, shape: &[i64]) -> Vec<u8> {
    let numel: i64 = shape.iter().product();
    let mut strides = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1].max(1);
    }
    let v3 = v3_dtype(dtype);
    let mut p = vec![0x80, 2];
    p.extend_from_slice(if v3.is_some() {
        b"ctorch._utils\n_rebuild_tensor_v3\n"
    } else {
        b"ctorch._utils\n_rebuild_tensor_v2\n"
    });
    p.push(b'('); // args of _rebuild_tensor_v2/v3
    p.push(b'('); // persistent id tuple
    pickle_str(&mut p, "storage");
    let global = storage_global(dtype);
    let module = if global.contains('\n') { "torch." } else { "torch\n" };
    p.extend_from_slice(format!("c{module}{global}\n").as_bytes());
    pickle_str(&mut p, "0");
    pickle_str(&mut p, "cpu");
    // Typed storages count elements; an UntypedStorage counts bytes.
    pickle_int(&mut p, if v3.is_some() { numel * dtype.size() as i64 } else { numel });
    p.push(b't');
    p.push(b'Q'); // BINPERSID
    pickle_int(&mut p, 0); // storage offset
    pickle_tuple(&mut p, shape);
    pickle_tuple(&mut p, &strides);
    p.push(0x89); // requires_grad = False (msprobe saves a detached clone)
    p.extend_from_slice(b"ccollections\nOrderedDict\n)R");
    if let Some(dt) = v3 {
        p.extend_from_slice(format!("ctorch\n{dt}\n").as_bytes());
    }
    p.push(b't');
    p.push(b'R');
    p.push(b'.');
    p
}

/// A minimal stored-only zip writer with 64-byte aligned entry data.
struct Zip {
    buf: Vec<u8>,
    central: Vec<u8>,
    entries: u16,
}

impl Zip {
    fn new(mut buf: Vec<u8>, capacity: usize) -> Zip {
        buf.clear();
        buf.reserve(capacity);
        Zip { buf, central: Vec::new(), entries: 0 }
    }

    fn add(&mut self, name: &str, data: &[u8]) {
        let offset = self.buf.len() as u32;
        let crc = crc32fast::hash(data);
        let fixed = 30 + name.len();
        // Pad with an "FB" extra field so the entry data starts on a 64-byte boundary.
        let pad = (64 - (self.buf.len() + fixed + 4) % 64) % 64;
        let extra_len = 4 + pad;
        let size = data.len() as u32;
        self.buf.extend_from_slice(&0x04034b50u32.to_le_bytes());
        self.buf.extend_from_slice(&20u16.to_le_bytes()); // version needed
        self.buf.extend_from_slice(&0u16.to_le_bytes()); // flags
        self.buf.extend_from_slice(&0u16.to_le_bytes()); // stored
        self.buf.extend_from_slice(&0u16.to_le_bytes()); // time
        self.buf.extend_from_slice(&0x21u16.to_le_bytes()); // date 1980-01-01
        self.buf.extend_from_slice(&crc.to_le_bytes());
        self.buf.extend_from_slice(&size.to_le_bytes());
        self.buf.extend_from_slice(&size.to_le_bytes());
        self.buf.extend_from_slice(&(name.len() as u16).to_le_bytes());
        self.buf.extend_from_slice(&(extra_len as u16).to_le_bytes());
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.extend_from_slice(b"FB");
        self.buf.extend_from_slice(&(pad as u16).to_le_bytes());
        self.buf.extend(std::iter::repeat_n(b'Z', pad));
        debug_assert_eq!(self.buf.len() % 64, 0);
        self.buf.extend_from_slice(data);

        let c = &mut self.central;
        c.extend_from_slice(&0x02014b50u32.to_le_bytes());
        c.extend_from_slice(&20u16.to_le_bytes()); // made by
        c.extend_from_slice(&20u16.to_le_bytes()); // needed
        c.extend_from_slice(&0u16.to_le_bytes());
        c.extend_from_slice(&0u16.to_le_bytes());
        c.extend_from_slice(&0u16.to_le_bytes());
        c.extend_from_slice(&0x21u16.to_le_bytes());
        c.extend_from_slice(&crc.to_le_bytes());
        c.extend_from_slice(&size.to_le_bytes());
        c.extend_from_slice(&size.to_le_bytes());
        c.extend_from_slice(&(name.len() as u16).to_le_bytes());
        c.extend_from_slice(&0u16.to_le_bytes()); // extra
        c.extend_from_slice(&0u16.to_le_bytes()); // comment
        c.extend_from_slice(&0u16.to_le_bytes()); // disk
        c.extend_from_slice(&0u16.to_le_bytes()); // internal attrs
        c.extend_from_slice(&0u32.to_le_bytes()); // external attrs
        c.extend_from_slice(&offset.to_le_bytes());
        c.extend_from_slice(name.as_bytes());
        self.entries += 1;
    }

    fn finish(mut self) -> Vec<u8> {
        let cd_offset = self.buf.len() as u32;
        let cd_size = self.central.len() as u32;
        self.buf.extend_from_slice(&self.central);
        self.buf.extend_from_slice(&0x06054b50u32.to_le_bytes());
        self.buf.extend_from_slice(&0u16.to_le_bytes());
        self.buf.extend_from_slice(&0u16.to_le_bytes());
        self.buf.extend_from_slice(&self.entries.to_le_bytes());
        self.buf.extend_from_slice(&self.entries.to_le_bytes());
        self.buf.extend_from_slice(&cd_size.to_le_bytes());
        self.buf.extend_from_slice(&cd_offset.to_le_bytes());
        self.buf.extend_from_slice(&0u16.to_le_bytes());
        self.buf
    }
}

/// Largest tensor a `.pt` file can hold here (no zip64).
pub const PT_MAX_BYTES: usize = u32::MAX as usize - 4096;

/// Encodes a contiguous tensor as a `torch.save`-compatible file. `stem` is the file name without
/// `.pt`; torch uses it as the archive's folder name. Returns `None` above [`PT_MAX_BYTES`].
pub fn encode_pt(stem: &str, dtype: DType, shape: &[i64], data: &[u8]) -> Option<Vec<u8>> {
    encode_pt_into(Vec::new(), stem, dtype, shape, data)
}

/// [`encode_pt`] into a reused buffer.
pub fn encode_pt_into(buf: Vec<u8>, stem: &str, dtype: DType, shape: &[i64], data: &[u8]) -> Option<Vec<u8>> {
    if data.len() > PT_MAX_BYTES {
        return None;
    }
    let mut z = Zip::new(buf, data.len() + 1024);
    z.add(&format!("{stem}/data.pkl"), &tensor_pickle(dtype, shape));
    z.add(&format!("{stem}/.format_version"), b"1");
    z.add(&format!("{stem}/.storage_alignment"), b"64");
    z.add(&format!("{stem}/byteorder"), b"little");
    z.add(&format!("{stem}/data/0"), data);
    z.add(&format!("{stem}/version"), b"3\n");
    Some(z.finish())
}

/// Reads the storage bytes (`*/data/0`) back out of a `.pt` file written by torch.save or by
/// [`encode_pt`]. Used by the golden tests to replay msprobe's own tensor files.
pub fn read_pt_storage(file: &[u8]) -> Option<Vec<u8>> {
    // Walk the central directory from the end-of-central-directory record.
    let eocd =
        (0..file.len().saturating_sub(21)).rev().find(|&i| file[i..].starts_with(&0x06054b50u32.to_le_bytes()))?;
    let rd16 = |o: usize| u16::from_le_bytes([file[o], file[o + 1]]) as usize;
    let rd32 = |o: usize| u32::from_le_bytes(file[o..o + 4].try_into().unwrap()) as usize;
    let n = rd16(eocd + 10);
    let mut p = rd32(eocd + 16);
    for _ in 0..n {
        if rd32(p) != 0x02014b50 {
            return None;
        }
        let size = rd32(p + 20);
        let name_len = rd16(p + 28);
        let extra = rd16(p + 30);
        let comment = rd16(p + 32);
        let local = rd32(p + 42);
        let name = std::str::from_utf8(&file[p + 46..p + 46 + name_len]).ok()?;
        if name.ends_with("/data/0") {
            let data = local + 30 + rd16(local + 26) + rd16(local + 28);
            return file.get(data..data + size).map(|s| s.to_vec());
        }
        p += 46 + name_len + extra + comment;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_header_is_64_aligned() {
        let f = encode_npy(DType::F32, &[2, 3], &[0u8; 24]);
        assert_eq!(&f[..8], b"\x93NUMPY\x01\x00");
        let hl = u16::from_le_bytes([f[8], f[9]]) as usize;
        assert_eq!((10 + hl) % 64, 0);
        let h = std::str::from_utf8(&f[10..10 + hl]).unwrap();
        assert!(h.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"));
        assert!(h.ends_with('\n'));
        assert_eq!(f.len(), 10 + hl + 24);
    }

    #[test]
    fn pt_round_trips_storage() {
        let data: Vec<u8> = (0..48u8).collect();
        let f = encode_pt("X.forward.input.0", DType::F32, &[3, 4], &data).unwrap();
        assert_eq!(read_pt_storage(&f).unwrap(), data);
    }
}
