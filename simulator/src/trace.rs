//! Ground-truth trace (`CANNSIM_TRACE`): one JSON object per launch, written in execution order.
use crate::dtype::DType;
use crate::tensor::TView;
use std::fs::File;
use std::io::Write;
use std::sync::{Mutex, OnceLock};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Input,
    Output,
    InOut,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Input => "input",
            Role::Output => "output",
            Role::InOut => "inout",
        }
    }
    pub fn writes(self) -> bool {
        self != Role::Input
    }
}

#[derive(Clone, Debug)]
pub struct Arg {
    pub role: Role,
    pub name: String,
    pub view: TView,
    /// Position of the argument among the op's tensor arguments (NULL optional ones included).
    pub index: usize,
    /// Element index inside a tensor-list argument.
    pub list_index: Option<usize>,
}

struct Sink {
    file: File,
    seq: u64,
}

fn sink() -> &'static Option<Mutex<Sink>> {
    static S: OnceLock<Option<Mutex<Sink>>> = OnceLock::new();
    S.get_or_init(|| {
        let p = std::env::var("CANNSIM_TRACE").ok().filter(|p| !p.is_empty())?;
        let p = p.replace("{pid}", &std::process::id().to_string());
        match std::fs::OpenOptions::new().create(true).append(true).open(&p) {
            Ok(file) => Some(Mutex::new(Sink { file, seq: 0 })),
            Err(e) => {
                eprintln!("[cannsim] cannot open CANNSIM_TRACE={p}: {e}");
                None
            }
        }
    })
}

pub fn enabled() -> bool {
    sink().is_some()
}

fn jstr(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn ints(v: &[i64]) -> String {
    format!("[{}]", v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(","))
}

/// Run `f` (the kernel) with tracing of `args` around it when tracing is enabled.
pub fn run_traced(op: &str, stream: usize, args: &[Arg], f: impl FnOnce() -> Result<(), i32>) -> Result<(), i32> {
    run_traced_shaped(op, stream, args, &[], f)
}

/// [`run_traced`] for a launch whose call returns the real shape of outputs the kernel sizes
/// (aclop NonZero through a V2 entry): `shaped` pairs an argument's position with the handle the
/// kernel sets the shape of; such an output is described, and its after-CRCs taken, at that shape.
pub fn run_traced_shaped(
    op: &str,
    stream: usize,
    args: &[Arg],
    shaped: &[(usize, usize)],
    f: impl FnOnce() -> Result<(), i32>,
) -> Result<(), i32> {
    crate::stats::launch(op);
    let int_out = args.iter().any(|a| a.role.writes() && (a.view.dtype.is_int() || a.view.dtype == DType::Bool));
    let f = || crate::tensor::exact_ints(op, int_out, f);
    let Some(s) = sink() else { return f() };
    let before: Vec<Option<u32>> = args.iter().map(|a| a.view.crc().ok()).collect();
    let before_view: Vec<Option<u32>> = args.iter().map(|a| a.view.crc_elements().ok()).collect();
    // bfloat16 views also as msprobe hashes them (float32), so a dump's md5 can be checked against the trace
    let bf16_crc = |v: &TView| if v.dtype == crate::dtype::DType::Bf16 { v.crc_elements_f32().ok() } else { None };
    let before_f32: Vec<Option<u32>> = args.iter().map(|a| bf16_crc(&a.view)).collect();
    let r = f();
    let views: Vec<TView> = (0..args.len())
        .map(|i| {
            // only this launch's kernel, when it ran, set the shape (an older entry may linger)
            let set = shaped
                .iter()
                .find(|(j, _)| *j == i)
                .filter(|_| r.is_ok())
                .and_then(|(_, h)| crate::tensor::kernel_shape(*h));
            match set {
                Some(shape) => {
                    TView { strides: crate::tensor::contiguous_strides(&shape), shape, ..args[i].view.clone() }
                }
                None => args[i].view.clone(),
            }
        })
        .collect();
    let writes = |i: usize| args[i].role.writes();
    // a shaped output's before-CRCs covered the launch-time view: not comparable, not reported
    let resized = |i: usize| views[i].shape != args[i].view.shape;
    let before: Vec<Option<u32>> = before.into_iter().enumerate().map(|(i, c)| c.filter(|_| !resized(i))).collect();
    let before_view: Vec<Option<u32>> =
        before_view.into_iter().enumerate().map(|(i, c)| c.filter(|_| !resized(i))).collect();
    let before_f32: Vec<Option<u32>> =
        before_f32.into_iter().enumerate().map(|(i, c)| c.filter(|_| !resized(i))).collect();
    let after_f32: Vec<Option<u32>> =
        views.iter().enumerate().map(|(i, v)| if writes(i) { bf16_crc(v) } else { None }).collect();
    let after: Vec<Option<u32>> =
        views.iter().enumerate().map(|(i, v)| if writes(i) { v.crc().ok() } else { None }).collect();
    let after_view: Vec<Option<u32>> =
        views.iter().enumerate().map(|(i, v)| if writes(i) { v.crc_elements().ok() } else { None }).collect();
    let hex = |c: Option<u32>| c.map(|c| format!("\"{c:08x}\"")).unwrap_or_else(|| "null".into());
    let mut g = s.lock().unwrap();
    let seq = g.seq;
    g.seq += 1;
    let tensors: Vec<String> = args
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let v = &views[i];
            let (start, len) = v.byte_span();
            let li = a.list_index.map(|l| format!("\"list_index\":{l},")).unwrap_or_default();
            let f32_crcs = if v.dtype == crate::dtype::DType::Bf16 {
                format!(",\"crc_f32_view_before\":{},\"crc_f32_view_after\":{}", hex(before_f32[i]), hex(after_f32[i]))
            } else {
                String::new()
            };
            format!(
                concat!(
                    "{{\"role\":\"{}\",\"index\":{},{}\"name\":{},\"addr\":\"{:#x}\",\"span_addr\":\"{:#x}\",",
                    "\"bytes\":{},\"dtype\":\"{}\",\"acl_dtype\":{},\"shape\":{},\"strides\":{},\"offset\":{},",
                    "\"crc_before\":{},\"crc_after\":{},\"crc_view_before\":{},\"crc_view_after\":{}{}}}"
                ),
                a.role.name(),
                a.index,
                li,
                jstr(&a.name),
                v.addr,
                start,
                len,
                v.dtype.name(),
                v.dtype.acl(),
                ints(&v.shape),
                ints(&v.strides),
                v.offset,
                hex(before[i]),
                hex(after[i]),
                hex(before_view[i]),
                hex(after_view[i]),
                f32_crcs
            )
        })
        .collect();
    let line = format!(
        "{{\"seq\":{},\"op\":{},\"stream\":\"{:#x}\",\"pid\":{},\"status\":{},\"tensors\":[{}]}}\n",
        seq,
        jstr(op),
        stream,
        std::process::id(),
        r.err().unwrap_or(0),
        tensors.join(",")
    );
    let _ = g.file.write_all(line.as_bytes());
    let _ = g.file.flush();
    r
}
