//! dump.json records → msprobe 1.1.1's per-record lists (`read_op`, `op_item_parse`,
//! `gen_op_item`, `merge_tensor` of `msprobe/core/compare/utils.py`).

use super::value::Mode;
use super::value::{py_repr, py_str_of, Cell};
use msprobe_core::json::Json;

/// (dtype, shape[, md5]) of one tensor: msprobe's `input_struct`/`output_struct` entries.
#[derive(Clone, Debug, PartialEq)]
pub struct Struct {
    pub dtype: Cell,
    pub shape: Cell,
    pub md5: Option<Cell>,
}

/// One record after `merge_tensor`.
#[derive(Clone, Debug)]
pub struct Op {
    pub record: String,
    pub names: Vec<String>,
    pub input_struct: Vec<Struct>,
    pub output_struct: Vec<Struct>,
    pub summary: Vec<[Cell; 4]>,
    pub data_names: Vec<String>,
    /// `str()` of the record's stack.json entry (`None` when it has none).
    pub stack: Cell,
}

struct Item {
    name: String,
    dtype: Cell,
    shape: Cell,
    md5: Cell,
    summary: [Cell; 4],
    data_name: String,
}

const MAX_DEPTH: usize = 10;

fn truthy(v: &Json) -> bool {
    match v {
        Json::Null => false,
        Json::Bool(b) => *b,
        Json::Int(i) => *i != 0,
        Json::Float(f) => *f != 0.0,
        Json::Str(s) => !s.is_empty(),
        Json::Array(a) => !a.is_empty(),
        Json::Object(o) => !o.is_empty(),
    }
}

fn default_item(name: String) -> Item {
    Item {
        name,
        dtype: Cell::N,
        shape: Cell::N,
        md5: Cell::N,
        summary: [Cell::N, Cell::N, Cell::N, Cell::N],
        data_name: "-1".into(),
    }
}

fn item_parse(v: &Json, name: &str, depth: usize, out: &mut Vec<Item>) {
    if depth > MAX_DEPTH {
        return;
    }
    match v {
        Json::Null => out.push(default_item(name.to_string())),
        _ if !truthy(v) => {}
        Json::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                item_parse(x, &format!("{name}.{i}"), depth + 1, out);
            }
        }
        Json::Object(kv) => {
            if matches!(v.get("type"), Some(Json::Str(_))) {
                out.push(gen_item(v, name));
                return;
            }
            for (k, x) in kv {
                item_parse(x, &format!("{name}.{k}"), depth + 1, out);
            }
        }
        _ => {}
    }
}

fn gen_item(v: &Json, name: &str) -> Item {
    let get = |k: &str| v.get(k).map(Cell::from_json).unwrap_or(Cell::N);
    let mut summary = [get("Max"), get("Min"), get("Mean"), get("Norm")];
    let dtype_ok = v.get("dtype").map(truthy).unwrap_or(false);
    let (dtype, shape) = if dtype_ok {
        (get("dtype"), v.get("shape").map(shape_cell).unwrap_or(Cell::N))
    } else {
        let ty = v.get("type").and_then(Json::as_str).unwrap_or("");
        let value = v.get("value");
        match ty {
            "torch.Size" => (Cell::s(ty), Cell::S(value.map(py_str_of).unwrap_or_else(|| "None".into()))),
            "slice" => {
                // str(np.shape(np.array(value))): a list of n items is "(n,)"
                let shape = match value {
                    Some(Json::Array(a)) => format!("({},)", a.len()),
                    _ => "()".into(),
                };
                (Cell::s(ty), Cell::S(shape))
            }
            _ => {
                let class = match value {
                    None | Some(Json::Null) => "NoneType",
                    Some(Json::Bool(_)) => "bool",
                    Some(Json::Int(_)) => "int",
                    Some(Json::Float(_)) => "float",
                    Some(Json::Str(_)) => "str",
                    Some(Json::Array(_)) => "list",
                    Some(Json::Object(_)) => "dict",
                };
                let c = value.map(Cell::from_json).unwrap_or(Cell::N);
                summary = [c.clone(), c.clone(), c.clone(), c];
                (Cell::S(format!("<class '{class}'>")), Cell::s("[]"))
            }
        }
    };
    let md5 = match v.get("md5") {
        Some(m) if truthy(m) => Cell::from_json(m),
        _ => {
            let text = match v.get("value") {
                Some(x) => py_str_of(x),
                None => String::new(),
            };
            Cell::S(format!("{:08x}", crc32fast::hash(text.as_bytes())))
        }
    };
    let data_name = match v.get("data_name") {
        Some(Json::Str(s)) => s.to_string(),
        Some(other) => py_str_of(other),
        None => "-1".into(),
    };
    Item { name: name.to_string(), dtype, shape, md5, summary, data_name }
}

fn shape_cell(v: &Json) -> Cell {
    match v {
        Json::Array(_) => Cell::S(py_repr(v)),
        other => Cell::from_json(other),
    }
}

/// Whether a dot-separated name has `part` as one of its components.
pub fn has_part(name: &str, part: &str) -> bool {
    name.split('.').any(|p| p == part)
}

/// `gen_merge_list`: one record of dump.json as msprobe's merged lists; `None` when the record
/// holds no data item.
pub fn merge_op(record: &str, data: &Json, stack: Option<&Json>, mode: Mode) -> Option<Op> {
    let mut items = Vec::new();
    for (key, suffix) in
        [("input_args", ".input"), ("input_kwargs", ".input"), ("input", ".input"), ("output", ".output")]
    {
        if let Some(v) = data.get(key) {
            item_parse(v, &format!("{record}{suffix}"), 0, &mut items);
        }
    }
    if items.is_empty() {
        return None;
    }
    let mut op = Op {
        record: record.to_string(),
        names: Vec::with_capacity(items.len()),
        input_struct: Vec::new(),
        output_struct: Vec::new(),
        summary: Vec::with_capacity(items.len()),
        data_names: Vec::new(),
        stack: stack.map(py_repr).map(Cell::S).unwrap_or(Cell::N),
    };
    for it in items {
        let st = Struct { dtype: it.dtype, shape: it.shape, md5: if mode == Mode::Md5 { Some(it.md5) } else { None } };
        if has_part(&it.name, "input") {
            op.input_struct.push(st);
        } else if has_part(&it.name, "kwargs") {
            // msprobe keeps a kwargs_struct that nothing reads
        } else if has_part(&it.name, "output") {
            op.output_struct.push(st);
        }
        op.summary.push(it.summary);
        let mut name = it.name;
        if mode == Mode::All {
            let (stem, ext) = it.data_name.rsplit_once('.').unwrap_or((&it.data_name, ""));
            // msprobe names a tensor row after its file; a file our writer named from a record
            // name that is no file name ("a/b", over 255 bytes) keeps the record's name, which
            // is what the bench is looked up by
            let sanitized = stem != name && msprobe_core::naming::sanitize_file_name(&name, ext) == it.data_name;
            if stem != "-1" && !sanitized {
                name = stem.to_string();
            }
            op.data_names.push(it.data_name);
        }
        op.names.push(name);
    }
    Some(op)
}

/// msprobe's `md5_find`: whether any item of the data carries an `md5` key.
pub fn md5_find(data: &Json) -> bool {
    let Json::Object(recs) = data else { return false };
    for (_, rec) in recs {
        let Json::Object(kv) = rec else { continue };
        for (_, v) in kv {
            match v {
                Json::Array(a) => {
                    if a.iter().any(|d| truthy(d) && d.get("md5").is_some()) {
                        return true;
                    }
                }
                other => {
                    if truthy(other) && other.get("md5").is_some() {
                        return true;
                    }
                }
            }
        }
    }
    false
}

/// msprobe's `get_bench_data_name`: the `data_name` of the bench item a (bench) row names.
pub fn bench_data_name(bench_name: &str, bench_data: &Json) -> Option<String> {
    // re.split(r'\.(input|output|kwargs)\.', name): record, kind, then the path up to the next match
    let mut cut = None;
    for kind in ["input", "output", "kwargs"] {
        let pat = format!(".{kind}.");
        if let Some(p) = bench_name.find(&pat) {
            if cut.map(|(q, _, _)| p < q).unwrap_or(true) {
                cut = Some((p, kind, pat.len()));
            }
        }
    }
    let (p, kind, len) = cut?;
    let record = &bench_name[..p];
    let rest = &bench_name[p + len..];
    let mut path_end = rest.len();
    for k in ["input", "output", "kwargs"] {
        if let Some(q) = rest.find(&format!(".{k}.")) {
            path_end = path_end.min(q);
        }
    }
    let bundle = bench_data.get(record)?;
    if !truthy(bundle) {
        return None;
    }
    let start = match kind {
        "input" => bundle.get("input").or_else(|| bundle.get("input_args")),
        "kwargs" => bundle.get("input_kwargs"),
        _ => bundle.get("output"),
    };
    let mut cur = start;
    for layer in rest[..path_end].split('.') {
        cur = match cur {
            Some(Json::Object(_)) => cur.and_then(|c| c.get(layer)),
            Some(Json::Array(a)) => layer.parse::<i64>().ok().and_then(|i| {
                let i = if i < 0 { a.len() as i64 + i } else { i };
                a.get(usize::try_from(i).ok()?)
            }),
            _ => None,
        };
    }
    match cur?.get("data_name")? {
        Json::Str(s) if !s.is_empty() => Some(s.to_string()),
        _ => None,
    }
}
