//! bindgen's output → the op list: every `aclnnXxxGetWorkspaceSize` with its parameters, and the
//! type items bindgen emitted alongside.

use crate::roles::{classify, ArgKind};
use quote::quote;

/// One parameter of a phase-1 function.
pub struct Param {
    /// The C name (`r#` of a Rust keyword removed; `argN` when bindgen gave none).
    pub name: String,
    /// Compact type text (see [`type_text`]), what the role and kind rules read.
    pub ty_text: String,
    /// bindgen's type, emitted verbatim in the wrapper's signature.
    pub ty: syn::Type,
}

impl Param {
    /// How this parameter is recorded.
    pub fn kind(&self) -> ArgKind {
        classify(&self.name, &self.ty_text)
    }
}

/// An op with a phase-1 function `aclnn{name}GetWorkspaceSize`.
pub struct Op {
    /// The name without `aclnn` and `GetWorkspaceSize`.
    pub name: String,
    /// Every parameter, the phase-1 tail `(uint64_t *workspaceSize, aclOpExecutor **executor)` last.
    pub params: Vec<Param>,
}

impl Op {
    /// The op's own parameters (the ones recorded): all but the two-parameter tail.
    pub fn recorded(&self) -> &[Param] {
        &self.params[..self.params.len() - 2]
    }
}

/// The op list of one bindgen run.
pub struct Parsed {
    /// Ops sorted by name, one per name (the first declaration wins), so the op ids are stable.
    pub ops: Vec<Op>,
    /// Every item bindgen emitted besides the functions (type aliases, opaque structs, consts).
    pub types: Vec<syn::Item>,
    /// Phase-1 functions skipped because their signature does not end with the phase-1 tail.
    pub skipped: Vec<String>,
}

/// The compact text of a type that the role and kind rules read: the tokens with every space
/// removed (`*const aclTensor` → `*constaclTensor`).
pub fn type_text(ty: &syn::Type) -> String {
    quote!(#ty).to_string().replace(' ', "")
}

/// Parses bindgen's output.
pub fn parse(bindings: &str) -> syn::Result<Parsed> {
    let file: syn::File = syn::parse_str(bindings)?;
    let mut ops = Vec::new();
    let mut types = Vec::new();
    let mut skipped = Vec::new();
    for item in file.items {
        let syn::Item::ForeignMod(fm) = item else {
            types.push(item);
            continue;
        };
        for fi in &fm.items {
            let syn::ForeignItem::Fn(f) = fi else { continue };
            let fname = f.sig.ident.to_string();
            let Some(op) = fname.strip_prefix("aclnn").and_then(|s| s.strip_suffix("GetWorkspaceSize")) else {
                continue;
            };
            let params: Vec<Param> = f
                .sig
                .inputs
                .iter()
                .enumerate()
                .filter_map(|(i, input)| {
                    let syn::FnArg::Typed(pt) = input else { return None };
                    let name = match &*pt.pat {
                        syn::Pat::Ident(id) => id.ident.to_string().trim_start_matches("r#").to_string(),
                        _ => format!("arg{i}"),
                    };
                    Some(Param { name, ty_text: type_text(&pt.ty), ty: (*pt.ty).clone() })
                })
                .collect();
            if has_phase1_tail(&params) {
                ops.push(Op { name: op.to_string(), params });
            } else {
                skipped.push(fname);
            }
        }
    }
    ops.sort_by(|a, b| a.name.cmp(&b.name));
    ops.dedup_by(|a, b| a.name == b.name);
    Ok(Parsed { ops, types, skipped })
}

/// Phase 1 always ends with `(uint64_t *workspaceSize, aclOpExecutor **executor)`.
fn has_phase1_tail(params: &[Param]) -> bool {
    let n = params.len();
    n >= 2 && params[n - 2].ty_text.contains("u64") && params[n - 1].ty_text.contains("aclOpExecutor")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roles::Role;

    const BINDINGS: &str = r#"
        pub type aclnnStatus = u32;
        pub type aclDataType = u32;
        #[repr(C)]
        pub struct aclTensor { _unused: [u8; 0] }
        unsafe extern "C" {
            pub fn aclnnReluGetWorkspaceSize(self_: *const aclTensor, out: *const aclTensor,
                workspaceSize: *mut u64, executor: *mut *mut aclOpExecutor) -> aclnnStatus;
            pub fn aclnnAddGetWorkspaceSize(r#match: *const aclTensor, other: *const aclTensor,
                alpha: *const aclScalar, out: *mut aclTensor, workspaceSize: *mut u64,
                executor: *mut *mut aclOpExecutor) -> aclnnStatus;
            pub fn aclnnAddGetWorkspaceSize(a: *const aclTensor, workspaceSize: *mut u64,
                executor: *mut *mut aclOpExecutor) -> aclnnStatus;
            pub fn aclnnBadGetWorkspaceSize(self_: *const aclTensor, out: *mut aclTensor) -> aclnnStatus;
            pub fn aclnnAdd(workspace: *mut ::std::os::raw::c_void, workspaceSize: u64,
                executor: *mut aclOpExecutor, stream: aclrtStream) -> aclnnStatus;
            pub fn aclCreateTensor() -> *mut aclTensor;
        }
    "#;

    #[test]
    fn ops_sorted_deduplicated_and_checked() {
        let p = parse(BINDINGS).unwrap();
        let names: Vec<&str> = p.ops.iter().map(|o| o.name.as_str()).collect();
        // Sorted; the second `Add` declaration is dropped; phase 2 and other functions ignored.
        assert_eq!(names, ["Add", "Relu"]);
        assert_eq!(p.skipped, ["aclnnBadGetWorkspaceSize"]);
        assert_eq!(p.types.len(), 3);
    }

    #[test]
    fn params_and_types() {
        let p = parse(BINDINGS).unwrap();
        let add = &p.ops[0];
        let names: Vec<&str> = add.params.iter().map(|q| q.name.as_str()).collect();
        // `r#match` loses its raw prefix; the first declaration's parameters are kept.
        assert_eq!(names, ["match", "other", "alpha", "out", "workspaceSize", "executor"]);
        assert_eq!(add.recorded().len(), 4);
        let texts: Vec<&str> = add.params.iter().map(|q| q.ty_text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "*constaclTensor",
                "*constaclTensor",
                "*constaclScalar",
                "*mutaclTensor",
                "*mutu64",
                "*mut*mutaclOpExecutor"
            ]
        );
        let kinds: Vec<ArgKind> = add.recorded().iter().map(Param::kind).collect();
        assert_eq!(
            kinds,
            [ArgKind::Tensor(Role::In), ArgKind::Tensor(Role::In), ArgKind::Scalar, ArgKind::Tensor(Role::Out)]
        );
        // Relu's `out` is declared const and is an output all the same.
        assert_eq!(p.ops[1].recorded()[1].kind(), ArgKind::Tensor(Role::Out));
    }

    #[test]
    fn tail_check() {
        let tail = |a: &str, b: &str| {
            let src = format!("unsafe extern \"C\" {{ pub fn aclnnXGetWorkspaceSize(w: {a}, e: {b}) -> i32; }}");
            !parse(&src).unwrap().ops.is_empty()
        };
        assert!(tail("*mut u64", "*mut *mut aclOpExecutor"));
        assert!(!tail("*mut u32", "*mut *mut aclOpExecutor"));
        assert!(!tail("*mut u64", "*mut *mut aclTensor"));
        let one = "unsafe extern \"C\" { pub fn aclnnXGetWorkspaceSize(e: *mut *mut aclOpExecutor) -> i32; }";
        assert_eq!(parse(one).unwrap().skipped, ["aclnnXGetWorkspaceSize"]);
    }

    #[test]
    fn unparsable_input_is_an_error() {
        assert!(parse("pub fn (").is_err());
    }
}
