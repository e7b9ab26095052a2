//! The cell values of a comparison table, modelled on the Python objects msprobe 1.1.1 puts in
//! its pandas table (`str`, `float`, `int`, `bool`, `None`), with Python's `str()` of each.

use msprobe_core::json::Json;

/// msprobe's dump modes: tensor (`ALL`), statistics (`SUMMARY`) and md5 (`MD5`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    All,
    Summary,
    Md5,
}

/// One cell: what msprobe's table would hold at that place.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    S(String),
    F(f64),
    I(i128),
    B(bool),
    /// Python `None`
    N,
}

impl Cell {
    pub fn s(x: &str) -> Cell {
        Cell::S(x.to_string())
    }

    /// Python's `str(value)`.
    pub fn py_str(&self) -> String {
        match self {
            Cell::S(s) => s.clone(),
            Cell::F(f) => py_float_str(*f),
            Cell::I(i) => i.to_string(),
            Cell::B(b) => if *b { "True" } else { "False" }.to_string(),
            Cell::N => "None".to_string(),
        }
    }

    /// `isinstance(v, (float, int))` (bool is an int in Python).
    pub fn is_num(&self) -> bool {
        matches!(self, Cell::F(_) | Cell::I(_) | Cell::B(_))
    }

    /// `isinstance(v, (float, int)) and not isinstance(v, bool)`.
    pub fn is_num_not_bool(&self) -> bool {
        matches!(self, Cell::F(_) | Cell::I(_))
    }

    pub fn num(&self) -> Option<f64> {
        match self {
            Cell::F(f) => Some(*f),
            Cell::I(i) => Some(*i as f64),
            Cell::B(b) => Some(*b as u8 as f64),
            _ => None,
        }
    }

    /// A JSON value as `json.load` gives it.
    pub fn from_json(v: &Json) -> Cell {
        match v {
            Json::Null => Cell::N,
            Json::Bool(b) => Cell::B(*b),
            Json::Int(i) => Cell::I(*i),
            Json::Float(f) => Cell::F(*f),
            Json::Str(s) => Cell::S(s.to_string()),
            other => Cell::S(py_repr(other)),
        }
    }
}

/// Python's `str(float)`.
pub fn py_float_str(f: f64) -> String {
    if f.is_nan() {
        "nan".into()
    } else if f.is_infinite() {
        if f > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        msprobe_core::json::py_float_repr(f)
    }
}

/// Python's `repr()` of a str.
pub fn py_str_repr(s: &str) -> String {
    let q = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(q);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == q => {
                out.push('\\');
                out.push(c)
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(q);
    out
}

/// Python's `str()` of a value that `json.load` returned (lists and dicts as Python prints them).
pub fn py_repr(v: &Json) -> String {
    match v {
        Json::Null => "None".into(),
        Json::Bool(b) => if *b { "True" } else { "False" }.into(),
        Json::Int(i) => i.to_string(),
        Json::Float(f) => py_float_str(*f),
        Json::Str(s) => py_str_repr(s),
        Json::Array(a) => {
            let parts: Vec<String> = a.iter().map(py_repr).collect();
            format!("[{}]", parts.join(", "))
        }
        Json::Object(kv) => {
            let parts: Vec<String> = kv.iter().map(|(k, v)| format!("{}: {}", py_str_repr(k), py_repr(v))).collect();
            format!("{{{}}}", parts.join(", "))
        }
    }
}

/// `str(v)` of a JSON value at the top level (a str is itself, not quoted).
pub fn py_str_of(v: &Json) -> String {
    match v {
        Json::Str(s) => s.to_string(),
        other => py_repr(other),
    }
}

/// msprobe's `format_value`: `float('{:.12f}'.format(v))`.
pub fn format_value(v: f64) -> f64 {
    if !v.is_finite() {
        return v;
    }
    format!("{v:.12}").parse().unwrap_or(v)
}

/// Python's `round(v, 6)`.
pub fn round6(v: f64) -> f64 {
    format!("{v:.6}").parse().unwrap_or(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_text_forms() {
        assert_eq!(py_float_str(1.0), "1.0");
        assert_eq!(py_float_str(f64::NAN), "nan");
        assert_eq!(py_float_str(1e-5), "1e-05");
        let j = msprobe_core::json::parse("[16, 32]").unwrap();
        assert_eq!(py_repr(&j), "[16, 32]");
        let j = msprobe_core::json::parse(r#"["a'b", "c"]"#).unwrap();
        assert_eq!(py_repr(&j), r#"["a'b", 'c']"#);
        assert_eq!(format_value(0.1234567890123456), 0.123456789012);
        assert_eq!(round6(0.99995), 0.99995);
    }
}
