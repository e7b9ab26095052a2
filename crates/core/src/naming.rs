//! Record names and path-safe file names.
//!
//! msprobe's grammar (msprobe-format.md §6, §12.4, §14):
//! - API: `{Prefix}.{api}.{n}.{forward|backward}` (the api may contain dots: `Torch.linalg.norm.0.forward`);
//! - module / cell: `{Module|Cell}.{path}.{Class}.{forward|backward}.{n}`;
//! - MindSpore primitive: `Primitive.{attr}.{Class}.{n}.{forward|backward}`.
//!
//! L2 kernel records keep the API form with framework-neutral prefixes: `Aclnn.{op}.{n}.forward`
//! (op without the `aclnn` prefix, e.g. `Aclnn.Add.0.forward`), `Aclop.{opType}.{n}.forward`
//! and `Hccl.{collective}.{n}.forward` (e.g. `Hccl.AllReduce.0.forward`). Kernels have no
//! backward: a backward kernel is its own op (`Aclnn.GeluBackward.0.forward`).

use std::fmt::Write as _;

/// API-record prefixes accepted in scope names (msprobe's L1 pattern plus the L2 prefixes).
pub const API_PREFIXES: &[&str] = &[
    "Distributed",
    "Functional",
    "Torch",
    "Tensor",
    "Mint",
    "MintFunctional",
    "Primitive",
    "Aten",
    "VF",
    "NPU",
    "Jit",
    "Aclnn",
    "Aclop",
    "Hccl",
];

/// `{prefix}.{api}.{n}.{direction}`.
pub fn api_name(prefix: &str, api: &str, n: u64, direction: &str) -> String {
    format!("{prefix}.{api}.{n}.{direction}")
}

/// `Module.{path}.{Class}.{direction}.{n}` (or `Cell.` for MindSpore).
pub fn module_name(kind: &str, path: &str, class: &str, direction: &str, n: u64) -> String {
    format!("{kind}.{path}.{class}.{direction}.{n}")
}

fn is_dir(s: &str) -> bool {
    s == "forward" || s == "backward"
}

fn is_num(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// msprobe's L1 scope pattern `^(Prefix)\..*\.\d+\.(forward|backward)$`.
pub fn is_api_name(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() >= 4
        && API_PREFIXES.contains(&parts[0])
        && is_dir(parts[parts.len() - 1])
        && is_num(parts[parts.len() - 2])
}

/// msprobe's L0 scope pattern `^(Cell|Module)\..*\.(forward|backward)\.\d+$`.
pub fn is_module_name(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() >= 4
        && (parts[0] == "Module" || parts[0] == "Cell")
        && is_num(parts[parts.len() - 1])
        && is_dir(parts[parts.len() - 2])
}

/// Longest file name component most file systems accept.
const NAME_MAX: usize = 255;

/// Cuts `s` to `max` bytes, ending in a tag `%~{crc32 of original}` so that distinct long names
/// stay distinct. A component that was not cut never holds `%~` (a `%` it holds is always
/// followed by two hex digits), so a cut name never equals an uncut one.
fn shorten(mut s: String, max: usize, original: &str) -> String {
    if s.len() <= max {
        return s;
    }
    let tag = format!("%~{:08x}", crc32fast::hash(original.as_bytes()));
    let mut cut = max - tag.len();
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    s.truncate(cut);
    s.push_str(&tag);
    s
}

/// Makes a string safe as one path component without merging distinct names: `%`, `/`, `\`
/// and control characters are percent-encoded (each UTF-8 byte as `%XX`), so `a/b` becomes
/// `a%2Fb` and can no longer land in the file of a record named `a_b` (or `a%2Fb`, which
/// becomes `a%252Fb`). `.` and `..` become `%2E` and `%2E%2E`, the empty string `%`. At most
/// 255 bytes (see [`shorten`]). Names of msprobe's grammar contain none of these and are kept
/// as they are.
pub fn sanitize_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c == '%' || c == '/' || c == '\\' || c.is_control() {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                let _ = write!(out, "%{b:02X}");
            }
        } else {
            out.push(c);
        }
    }
    match out.as_str() {
        "" => out.push('%'),
        "." => out = "%2E".into(),
        ".." => out = "%2E%2E".into(),
        _ => {}
    }
    shorten(out, NAME_MAX, s)
}

/// Sanitizes a `{stem}.{ext}` file name, keeping the extension when the stem must be cut.
pub fn sanitize_file_name(stem: &str, ext: &str) -> String {
    let ext = sanitize_component(ext);
    let stem = shorten(sanitize_component(stem), NAME_MAX - ext.len() - 1, stem);
    format!("{stem}.{ext}")
}

/// Directory name of a rank: `rank` when not distributed (msprobe 1.1.1), else `rank{N}`.
pub fn rank_dir(rank: Option<u64>) -> String {
    match rank {
        Some(r) => format!("rank{r}"),
        None => "rank".to_string(),
    }
}

/// Directory name of a step.
pub fn step_dir(step: u64) -> String {
    format!("step{step}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_msprobe_grammar() {
        assert_eq!(api_name("Functional", "linear", 0, "forward"), "Functional.linear.0.forward");
        assert_eq!(module_name("Module", "fc1", "Linear", "backward", 2), "Module.fc1.Linear.backward.2");
        assert!(is_api_name("Torch.linalg.norm.0.forward"));
        assert!(is_api_name("Aclnn.Add.12.forward"));
        assert!(is_api_name("Primitive.matmul.MatMul.0.forward"));
        assert!(!is_api_name("Functional.linear.x.forward"));
        assert!(!is_api_name("Foo.linear.0.forward"));
        assert!(is_module_name("Module.fc1.Linear.forward.0"));
        assert!(is_module_name("Cell.relu.ReLU.backward.3"));
        assert!(!is_module_name("Module.fc1.Linear.forward"));
        assert_eq!(rank_dir(None), "rank");
        assert_eq!(rank_dir(Some(3)), "rank3");
    }

    #[test]
    fn sanitize_blocks_traversal_and_control_chars() {
        assert_eq!(sanitize_component("a/b\\c\nd"), "a%2Fb%5Cc%0Ad");
        assert_eq!(sanitize_component(".."), "%2E%2E");
        assert_eq!(sanitize_component("."), "%2E");
        assert_eq!(sanitize_component(""), "%");
        assert_eq!(sanitize_component("a\u{85}é"), "a%C2%85é");
        assert_eq!(sanitize_component("Functional.linear.0.forward"), "Functional.linear.0.forward");
        let long = "x".repeat(400);
        let a = sanitize_component(&long);
        assert_eq!(a.len(), 255);
        assert_ne!(a, sanitize_component(&"x".repeat(401)));
        let f = sanitize_file_name(&"y".repeat(300), "pt");
        assert!(f.len() <= 255 && f.ends_with(".pt"), "{f}");
        assert_eq!(sanitize_file_name("A.b.0.forward.input.0", "npy"), "A.b.0.forward.input.0.npy");
    }

    #[test]
    fn names_that_differ_stay_different_after_sanitising() {
        let long = "z".repeat(300);
        let cut = sanitize_component(&long);
        let names = [
            "a/b", "a_b", "a%2Fb", "a%b", "a\\b", "a\nb", "a%0Ab", "", "%", "_", ".", "..", "%2E", "%2E%2E", "a\0b",
            "a%00b", &long, &cut,
        ];
        let out: Vec<String> = names.iter().map(|n| sanitize_component(n)).collect();
        for (i, a) in out.iter().enumerate() {
            assert!(!a.contains('/') && !a.contains('\0') && a != "." && a != ".." && !a.is_empty(), "{a:?}");
            for (j, b) in out.iter().enumerate().skip(i + 1) {
                assert_ne!(a, b, "{:?} and {:?} collide", names[i], names[j]);
            }
        }
        assert_ne!(
            sanitize_file_name("Functional.a/b.0.forward", "pt"),
            sanitize_file_name("Functional.a_b.0.forward", "pt")
        );
    }
}
