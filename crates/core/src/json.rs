//! An ordered JSON value with Python-compatible text form.
//!
//! msprobe writes its files with Python's `json.dump(indent=1, ensure_ascii=True, allow_nan=True)`.
//! To be byte-comparable we need the same float text (Python `repr`: shortest round-trip digits,
//! scientific below 1e-4 and from 1e16 with a two-digit exponent), the literal tokens `NaN`,
//! `Infinity`, `-Infinity`, `\uXXXX` escapes and insertion-ordered keys. serde_json can do none
//! of the NaN part and formats floats differently, so both directions are written here; the
//! parser exists for the `recover` command and for tests that compare against msprobe's files.

use std::fmt::Write as _;

/// A JSON value; objects keep insertion order.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(Text),
    Array(Vec<Json>),
    Object(Vec<(Text, Json)>),
}

/// A string in a [`Json`] tree. Record keys and type names are mostly constants (`"type"`,
/// `"Max"`, `"torch.Tensor"`): borrowed, they cost no allocation per leaf on the capturing
/// thread and no free on the writer's.
pub type Text = std::borrow::Cow<'static, str>;

impl Json {
    pub fn str(s: impl Into<Text>) -> Json {
        Json::Str(s.into())
    }

    /// Looks up a key of an object (first match).
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(kv) => kv.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Json::Float(f) => Some(*f),
            Json::Int(i) => Some(*i as f64),
            _ => None,
        }
    }

    /// Text as `json.dumps(v, indent=1)` would write it.
    pub fn to_pretty(&self) -> String {
        let mut out = String::new();
        write_value(&mut out, self, Some(1), 0);
        out
    }

    /// Single-line text (`separators=(",", ":")`), used for journal lines.
    pub fn to_compact(&self) -> String {
        let mut out = String::new();
        write_value(&mut out, self, None, 0);
        out
    }

    /// Appends the pretty form at a given nesting depth (used to stream large files).
    pub fn write_pretty_at(&self, out: &mut String, depth: usize) {
        write_value(out, self, Some(1), depth);
    }
}

/// Python's `repr(float)`.
pub fn py_float_repr(x: f64) -> String {
    let mut s = String::new();
    write_py_float(&mut s, x);
    s
}

/// Appends Python's `repr(float)` of `x` without heap allocation (the writer formats millions).
pub fn write_py_float(out: &mut String, x: f64) {
    if x.is_nan() {
        out.push_str("NaN");
        return;
    }
    if x.is_infinite() {
        out.push_str(if x > 0.0 { "Infinity" } else { "-Infinity" });
        return;
    }
    if x == 0.0 {
        out.push_str(if x.is_sign_negative() { "-0.0" } else { "0.0" });
        return;
    }
    // Rust's `{:e}` yields the shortest round-trip digits, like Python's repr.
    let mut buf = StackBuf { buf: [0; 40], len: 0 };
    write!(buf, "{:e}", x.abs()).expect("40 bytes hold any f64");
    let shortest = std::str::from_utf8(&buf.buf[..buf.len]).expect("ASCII");
    // On an exact tie between two shortest digit strings Rust rounds the last digit up, Python's
    // repr (David Gay's dtoa) rounds half to even (684.80328369140625 -> 684.8032836914062).
    // Rust's fixed-precision formatting is correctly rounded, half to even: with as many digits
    // as the shortest form it gives Python's pick, and differs from `shortest` only on a tie.
    let mut buf2 = StackBuf { buf: [0; 40], len: 0 };
    let sci = {
        let ndig = shortest.find('e').expect("LowerExp always has an exponent") - usize::from(shortest.contains('.'));
        write!(buf2, "{:.*e}", ndig - 1, x.abs()).expect("40 bytes hold it");
        let exact = std::str::from_utf8(&buf2.buf[..buf2.len]).expect("ASCII");
        if exact != shortest && exact.parse::<f64>() == Ok(x.abs()) {
            exact
        } else {
            shortest
        }
    };
    let (mant, exp) = sci.split_once('e').expect("LowerExp always has an exponent");
    let exp: i32 = exp.parse().expect("exponent is an integer");
    let (first, rest) = mant.split_at(1);
    let rest = rest.strip_prefix('.').unwrap_or("");
    let ndigits = 1 + rest.len();
    let digit = |i: usize| if i == 0 { first } else { &rest[i - 1..i] };
    if x < 0.0 {
        out.push('-');
    }
    if (-4..16).contains(&exp) {
        if exp >= 0 {
            let int_len = exp as usize + 1;
            for i in 0..int_len {
                out.push_str(if i < ndigits { digit(i) } else { "0" });
            }
            out.push('.');
            if ndigits > int_len {
                out.push_str(&rest[int_len - 1..]);
            } else {
                out.push('0');
            }
        } else {
            out.push_str("0.");
            for _ in 0..(-exp - 1) {
                out.push('0');
            }
            out.push_str(first);
            out.push_str(rest);
        }
    } else {
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        let e = exp.unsigned_abs();
        if e < 10 {
            out.push('0');
        }
        let _ = write!(out, "{e}");
    }
}

/// Appends `s` as a JSON string (Python's `json.dumps` escaping).
pub fn write_string(out: &mut String, s: &str) {
    write_str(out, s);
}

/// A fixed buffer to format into without the heap (and without `io::Write`'s adapter).
struct StackBuf {
    buf: [u8; 40],
    len: usize,
}

impl std::fmt::Write for StackBuf {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        self.buf.get_mut(self.len..end).ok_or(std::fmt::Error)?.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

fn write_str(out: &mut String, s: &str) {
    out.push('"');
    // Runs of printable ASCII other than quote and backslash are copied as they are (stack
    // frames are long strings with one newline each); the rest is escaped as Python's
    // json.dumps (ensure_ascii) does.
    let bytes = s.as_bytes();
    let mut run = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\' {
            i += 1;
            continue;
        }
        out.push_str(&s[run..i]);
        let c = s[i..].chars().next().unwrap_or('\u{fffd}');
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{:04x}", unit);
                }
            }
        }
        i += c.len_utf8();
        run = i;
    }
    out.push_str(&s[run..]);
    out.push('"');
}

fn newline(out: &mut String, indent: Option<usize>, depth: usize) {
    const SPACES: &str = "                                                                ";
    if let Some(n) = indent {
        out.push('\n');
        let mut left = n * depth;
        while left > 0 {
            let k = left.min(SPACES.len());
            out.push_str(&SPACES[..k]);
            left -= k;
        }
    }
}

fn write_value(out: &mut String, v: &Json, indent: Option<usize>, depth: usize) {
    match v {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Int(i) => out.push_str(itoa::Buffer::new().format(*i)),
        Json::Float(f) => write_py_float(out, *f),
        Json::Str(s) => write_str(out, s),
        Json::Array(items) => {
            if items.is_empty() {
                out.push_str("[]");
                return;
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                    if indent.is_none() {
                        // compact: no space
                    }
                }
                newline(out, indent, depth + 1);
                write_value(out, item, indent, depth + 1);
            }
            newline(out, indent, depth);
            out.push(']');
        }
        Json::Object(kv) => {
            if kv.is_empty() {
                out.push_str("{}");
                return;
            }
            out.push('{');
            for (i, (k, item)) in kv.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, indent, depth + 1);
                write_str(out, k);
                out.push_str(if indent.is_some() { ": " } else { ":" });
                write_value(out, item, indent, depth + 1);
            }
            newline(out, indent, depth);
            out.push('}');
        }
    }
}

/// A parse failure with its byte offset.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    pub offset: usize,
    pub msg: &'static str,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at byte {}", self.msg, self.offset)
    }
}

impl std::error::Error for ParseError {}

/// Nesting limit of [`parse`]: deeper text is refused, never a stack overflow.
pub const MAX_DEPTH: usize = 512;

/// Parses JSON text, accepting Python's `NaN`, `Infinity` and `-Infinity` tokens. Containers may
/// nest [`MAX_DEPTH`] deep.
pub fn parse(text: &str) -> Result<Json, ParseError> {
    parse_limited(text, MAX_DEPTH)
}

/// [`parse`] with a smaller nesting limit (configuration input: a config file, an environment
/// value, the API's argument object). Text nesting deeper than `max_depth` containers fails
/// with "nesting too deep" at the offset of the first container past the limit.
pub fn parse_limited(text: &str, max_depth: usize) -> Result<Json, ParseError> {
    let mut p = Parser { s: text.as_bytes(), i: 0, max_depth: max_depth.min(MAX_DEPTH) };
    let v = p.value(0)?;
    p.ws();
    if p.i != p.s.len() {
        return Err(p.err("trailing characters"));
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    max_depth: usize,
}

impl Parser<'_> {
    fn err(&self, msg: &'static str) -> ParseError {
        ParseError { offset: self.i, msg }
    }

    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\n' | b'\r' | b'\t') {
            self.i += 1;
        }
    }

    fn eat(&mut self, lit: &str) -> bool {
        if self.s[self.i..].starts_with(lit.as_bytes()) {
            self.i += lit.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, ParseError> {
        self.ws();
        let Some(&c) = self.s.get(self.i) else {
            return Err(self.err("unexpected end"));
        };
        // `depth` containers enclose this value; a container here would be one more.
        if matches!(c, b'{' | b'[') && depth >= self.max_depth {
            return Err(self.err("nesting too deep"));
        }
        match c {
            b'{' => {
                self.i += 1;
                let mut kv = Vec::new();
                self.ws();
                if self.eat("}") {
                    return Ok(Json::Object(kv));
                }
                loop {
                    self.ws();
                    if self.s.get(self.i) != Some(&b'"') {
                        return Err(self.err("expected a key"));
                    }
                    let k = self.string()?;
                    self.ws();
                    if !self.eat(":") {
                        return Err(self.err("expected ':'"));
                    }
                    let v = self.value(depth + 1)?;
                    kv.push((k.into(), v));
                    self.ws();
                    if self.eat(",") {
                        continue;
                    }
                    if self.eat("}") {
                        return Ok(Json::Object(kv));
                    }
                    return Err(self.err("expected ',' or '}'"));
                }
            }
            b'[' => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.eat("]") {
                    return Ok(Json::Array(items));
                }
                loop {
                    items.push(self.value(depth + 1)?);
                    self.ws();
                    if self.eat(",") {
                        continue;
                    }
                    if self.eat("]") {
                        return Ok(Json::Array(items));
                    }
                    return Err(self.err("expected ',' or ']'"));
                }
            }
            b'"' => Ok(Json::str(self.string()?)),
            b't' if self.eat("true") => Ok(Json::Bool(true)),
            b'f' if self.eat("false") => Ok(Json::Bool(false)),
            b'n' if self.eat("null") => Ok(Json::Null),
            b'N' if self.eat("NaN") => Ok(Json::Float(f64::NAN)),
            b'I' if self.eat("Infinity") => Ok(Json::Float(f64::INFINITY)),
            b'-' if self.eat("-Infinity") => Ok(Json::Float(f64::NEG_INFINITY)),
            b'-' | b'0'..=b'9' => self.number(),
            _ => Err(self.err("unexpected character")),
        }
    }

    fn number(&mut self) -> Result<Json, ParseError> {
        let start = self.i;
        let mut is_float = false;
        while let Some(&c) = self.s.get(self.i) {
            match c {
                b'0'..=b'9' | b'-' | b'+' => {}
                b'.' | b'e' | b'E' => is_float = true,
                _ => break,
            }
            self.i += 1;
        }
        let text = std::str::from_utf8(&self.s[start..self.i]).map_err(|_| self.err("bad number"))?;
        if !is_float {
            if let Ok(v) = text.parse::<i128>() {
                return Ok(Json::Int(v));
            }
        }
        text.parse::<f64>().map(Json::Float).map_err(|_| self.err("bad number"))
    }

    fn hex4(&mut self) -> Result<u32, ParseError> {
        let h = self.s.get(self.i..self.i + 4).ok_or_else(|| self.err("short \\u escape"))?;
        let h = std::str::from_utf8(h).map_err(|_| self.err("bad \\u escape"))?;
        let v = u32::from_str_radix(h, 16).map_err(|_| self.err("bad \\u escape"))?;
        self.i += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<String, ParseError> {
        self.i += 1; // opening quote
        let mut out = String::new();
        loop {
            let start = self.i;
            while let Some(&c) = self.s.get(self.i) {
                if c == b'"' || c == b'\\' {
                    break;
                }
                self.i += 1;
            }
            out.push_str(std::str::from_utf8(&self.s[start..self.i]).map_err(|_| self.err("invalid UTF-8"))?);
            match self.s.get(self.i) {
                None => return Err(self.err("unterminated string")),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(out);
                }
                Some(_) => {
                    self.i += 1;
                    let e = *self.s.get(self.i).ok_or_else(|| self.err("bad escape"))?;
                    self.i += 1;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let mut cp = self.hex4()?;
                            if (0xd800..0xdc00).contains(&cp) && self.eat("\\u") {
                                let lo = self.hex4()?;
                                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo.wrapping_sub(0xdc00) & 0x3ff);
                            }
                            out.push(char::from_u32(cp).unwrap_or('\u{fffd}'));
                        }
                        _ => return Err(self.err("bad escape")),
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_repr_matches_python() {
        // Expected strings are Python 3.11's repr() of the same doubles.
        let cases: &[(f64, &str)] = &[
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1.7198240756988525, "1.7198240756988525"),
            (1e-5, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (0.0001, "0.0001"),
            (1e16, "1e+16"),
            (1.2345e16, "1.2345e+16"),
            (123456789012345.0, "123456789012345.0"),
            (-2.5, "-2.5"),
            (1e300, "1e+300"),
            (5e-324, "5e-324"),
            (f32::MAX as f64, "3.4028234663852886e+38"),
            (-0.0, "-0.0"),
            (100.0, "100.0"),
            // exact ties between two shortest forms: Python rounds half to even
            (684.8032836914062, "684.8032836914062"),
            (0.30000001192092896, "0.30000001192092896"),
            (1.0000001192092896, "1.0000001192092896"),
            (-103.21731567382812, "-103.21731567382812"),
            (-913.7710571289062, "-913.7710571289062"),
            (696.9572143554688, "696.9572143554688"),
            (750.6682739257812, "750.6682739257812"),
            (1010.4002075195312, "1010.4002075195312"),
        ];
        for (x, want) in cases {
            assert_eq!(py_float_repr(*x), *want, "repr of {x:e}");
        }
    }

    #[test]
    fn strings_escape_as_python_json_dumps() {
        // Python 3.11: json.dumps('a"b\\c\nd\té€😀\x01\x7f/')
        let want = r#""a\"b\\c\nd\t\u00e9\u20ac\ud83d\ude00\u0001\u007f/""#;
        assert_eq!(Json::str("a\"b\\c\nd\té€😀\u{1}\u{7f}/").to_compact(), want);
        assert_eq!(
            Json::str("File /x.py, line 3, in f, \n y = g(x)").to_compact(),
            r#""File /x.py, line 3, in f, \n y = g(x)""#
        );
    }

    #[test]
    fn pretty_layout_is_python_indent_1() {
        let v = Json::Object(vec![
            ("a".into(), Json::Array(vec![Json::Int(1), Json::Float(f64::NAN)])),
            ("b".into(), Json::Object(vec![])),
            ("c".into(), Json::Array(vec![])),
            ("d".into(), Json::str("é\n\"")),
        ]);
        assert_eq!(
            v.to_pretty(),
            "{\n \"a\": [\n  1,\n  NaN\n ],\n \"b\": {},\n \"c\": [],\n \"d\": \"\\u00e9\\n\\\"\"\n}"
        );
    }

    #[test]
    fn parse_round_trips_with_nan_tokens() {
        let text = "{\"x\": [NaN, Infinity, -Infinity, -1, 2.5e-07, \"\\ud83d\\ude00\"], \"y\": {\"z\": null}}";
        let v = parse(text).unwrap();
        let back = parse(&v.to_pretty()).unwrap();
        assert_eq!(back.get("y"), v.get("y"));
        match back.get("x").unwrap() {
            Json::Array(a) => {
                assert!(a[0].as_f64().unwrap().is_nan());
                assert_eq!(a[1], Json::Float(f64::INFINITY));
                assert_eq!(a[2], Json::Float(f64::NEG_INFINITY));
                assert_eq!(a[3], Json::Int(-1));
                assert_eq!(a[5], Json::str("😀"));
            }
            _ => panic!("not an array"),
        }
        assert!(parse("{\"a\": }").is_err());
        assert!(parse("[1] x").is_err());
    }

    #[test]
    fn nesting_is_limited_without_recursing_past_the_limit() {
        let nest = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(parse_limited(&nest(3), 3).is_ok());
        let e = parse_limited(&nest(4), 3).unwrap_err();
        assert_eq!((e.msg, e.offset), ("nesting too deep", 3));
        assert!(parse_limited("{\"a\": {\"b\": 1}}", 2).is_ok());
        assert!(parse_limited("{\"a\": {\"b\": []}}", 2).is_err());
        // Far deeper than any stack: refused at the limit, no overflow.
        let e = parse(&nest(1_000_000)).unwrap_err();
        assert_eq!((e.msg, e.offset), ("nesting too deep", MAX_DEPTH));
    }
}
