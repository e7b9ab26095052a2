//! A human-readable table of the decisions: one line per op, each phase-1 parameter with how it
//! is recorded. The snapshot test over the bundled header compares it with a checked-in file.

use crate::parse::Parsed;
use crate::roles::Role;
use std::fmt::Write;

/// The table: a header, then `Op(name: kind, ...)` per op (kinds as [`crate::ArgKind`]'s
/// `Display`). A tensor whose role disagrees with its declared const-ness (an output or in/out
/// tensor declared const, an input declared non-const) is marked `[const]` / `[non-const]`:
/// those are the decisions made by name. Skipped functions are listed at the end.
pub fn report(parsed: &Parsed) -> String {
    let mut s = String::from(
        "# aclnn phase-1 parameters as the L2 interposer records them (crates/aclnn-gen).\n\
         # Op(parameter: kind, ...); tensor kinds carry the role (in, out, inout).\n\
         # [const] / [non-const]: the role was decided by name against the declared const-ness.\n",
    );
    for op in &parsed.ops {
        let params: Vec<String> = op
            .recorded()
            .iter()
            .map(|p| {
                let kind = p.kind();
                let is_const = p.ty_text.contains("const");
                let mark = match kind.role() {
                    Some(Role::In) if !is_const => " [non-const]",
                    Some(Role::Out | Role::InOut) if is_const => " [const]",
                    _ => "",
                };
                format!("{}: {kind}{mark}", p.name)
            })
            .collect();
        let _ = writeln!(s, "{}({})", op.name, params.join(", "));
    }
    for name in &parsed.skipped {
        let _ = writeln!(s, "# skipped (not a phase-1 signature): {name}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse;

    #[test]
    fn lines_and_marks() {
        let p = parse(
            "unsafe extern \"C\" {
                pub fn aclnnReluGetWorkspaceSize(self_: *const aclTensor, out: *const aclTensor,
                    workspaceSize: *mut u64, executor: *mut *mut aclOpExecutor) -> i32;
                pub fn aclnnInplaceAddGetWorkspaceSize(selfRef: *const aclTensor, alpha: *const aclScalar,
                    workspaceSize: *mut u64, executor: *mut *mut aclOpExecutor) -> i32;
                pub fn aclnnMaxDimGetWorkspaceSize(self_: *const aclTensor, dim: i64, indices: *mut aclTensor,
                    workspaceSize: *mut u64, executor: *mut *mut aclOpExecutor) -> i32;
                pub fn aclnnBadGetWorkspaceSize() -> i32;
            }",
        )
        .unwrap();
        let r = report(&p);
        let body: Vec<&str> = r.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            body,
            [
                "InplaceAdd(selfRef: tensor inout [const], alpha: scalar)",
                "MaxDim(self_: tensor in, dim: int, indices: tensor out)",
                "Relu(self_: tensor in, out: tensor out [const])",
            ]
        );
        assert!(r.ends_with("# skipped (not a phase-1 signature): aclnnBadGetWorkspaceSize\n"));
    }
}
