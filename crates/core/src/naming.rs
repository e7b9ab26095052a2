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

/// Cuts `s` to `max` bytes, ending in a CRC of `original` so that distinct long names stay distinct.
fn shorten(mut s: String, max: usize, original: &str) -> String {
    if s.len() <= max {
        return s;
    }
    let tag = format!("~{:08x}", crc32fast::hash(original.as_bytes()));
    let mut cut = max - tag.len();
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    s.truncate(cut);
    s.push_str(&tag);
    s
}

/// Makes a string safe as one path component: no `/`, `\`, NUL or control characters, never
/// `.`/`..`/empty, at most 255 bytes.
pub fn sanitize_component(s: &str) -> String {
    let mut out: String = s.chars().map(|c| if c == '/' || c == '\\' || c.is_control() { '_' } else { c }).collect();
    if out.is_empty() || out == "." || out == ".." {
        out = if out.is_empty() { "_".into() } else { out.replace('.', "_") };
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
        assert_eq!(sanitize_component("a/b\\c\nd"), "a_b_c_d");
        assert_eq!(sanitize_component(".."), "__");
        assert_eq!(sanitize_component("."), "_");
        assert_eq!(sanitize_component(""), "_");
        assert_eq!(sanitize_component("Functional.linear.0.forward"), "Functional.linear.0.forward");
        let long = "x".repeat(400);
        let a = sanitize_component(&long);
        assert_eq!(a.len(), 255);
        assert_ne!(a, sanitize_component(&"x".repeat(401)));
        let f = sanitize_file_name(&"y".repeat(300), "pt");
        assert!(f.len() <= 255 && f.ends_with(".pt"), "{f}");
        assert_eq!(sanitize_file_name("A.b.0.forward.input.0", "npy"), "A.b.0.forward.input.0.npy");
    }
}
