//! Generates the L2 interposer's aclnn phase-1 wrappers from C headers.
//!
//! bindgen parses `wrapper.h` (the declarations bundled in `include/cann/aclnn_ops.h`, or every
//! `include/aclnnop/*.h` of an installed CANN when `ASCEND_TOOLKIT_HOME` / `ASCEND_HOME_PATH`
//! points at one). For each `aclnnXxxGetWorkspaceSize` we emit, into `$OUT_DIR/aclnn_wrappers.rs`:
//! - a wrapper with the exact C signature that calls the real function and then binds its
//!   arguments (classified by type and parameter name) to the executor it returned;
//! - the wrapper pointers and the slots of the real functions.
//!
//! and into `$OUT_DIR/aclnn_table.rs` the op table (`OPS`) and the name matcher of the dlsym hook.
//! Phase 2 (`aclnnXxx(workspace, size, executor, stream)`) has one signature for every op and is
//! handled by a const-generic wrapper in `src/interposer/aclnn.rs`.

use proc_macro2::{Ident, Span, TokenStream};
use quote::quote;
use std::path::{Path, PathBuf};

/// How a parameter is recorded.
fn classify(name: &str, ty: &str) -> TokenStream {
    let role = tensor_role(name, ty);
    let arg = Ident::new(&format!("a_{name}"), Span::call_site());
    if ty.contains("aclTensorList") {
        quote! { Arg::TensorList(#arg as *const c_void, #role) }
    } else if ty.contains("aclTensor") {
        quote! { Arg::Tensor(#arg as *const c_void, #role) }
    } else if ty.contains("aclScalarList") {
        quote! { Arg::Opaque }
    } else if ty.contains("aclScalar") {
        quote! { Arg::Scalar(#arg as *const c_void) }
    } else if ty.contains("aclIntArray") {
        quote! { Arg::IntArray(#arg as *const c_void) }
    } else if ty.contains("aclFloatArray") {
        quote! { Arg::FloatArray(#arg as *const c_void) }
    } else if ty.contains("aclBoolArray") {
        quote! { Arg::BoolArray(#arg as *const c_void) }
    } else if ty.contains("c_char") && ty.matches('*').count() == 1 {
        quote! { Arg::Str(#arg as *const c_void) }
    } else if ty.contains("aclDataType") {
        quote! { Arg::DType(#arg as i64) }
    } else if ty == "bool" {
        quote! { Arg::Bool(#arg) }
    } else if ty == "f64" || ty == "f32" {
        quote! { Arg::Float(#arg as f64) }
    } else if !ty.contains('*')
        && ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "c_int", "c_long"].iter().any(|t| ty.ends_with(t))
    {
        quote! { Arg::Int(#arg as i64) }
    } else {
        quote! { Arg::Opaque }
    }
}

/// Output / in-place by name first (the headers' const-ness is unreliable, cann-abi.md §3.2),
/// then by const-ness.
fn tensor_role(name: &str, ty: &str) -> TokenStream {
    let n = name.trim_end_matches("Optional");
    if n.ends_with("Ref") {
        quote! { Role::InOut }
    } else if (n == "gradOut" || n.starts_with("gradOutput")) && ty.contains("const") {
        // The incoming gradient of a backward op ("grad of the output"): an input.
        quote! { Role::In }
    } else if n == "out"
        || n.ends_with("Out")
        || n == "y"
        || n.starts_with("gradInput")
        || n.ends_with("OutOut")
        || !ty.contains("const")
    {
        quote! { Role::Out }
    } else {
        quote! { Role::In }
    }
}

fn cann_include() -> Option<PathBuf> {
    for var in ["ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH"] {
        if let Some(root) = std::env::var_os(var) {
            let inc = Path::new(&root).join("include");
            if inc.join("aclnnop").is_dir() && inc.join("aclnn").is_dir() {
                return Some(inc);
            }
        }
    }
    None
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=wrapper.h");
    println!("cargo:rerun-if-changed=include/cann/aclnn_ops.h");
    println!("cargo:rerun-if-env-changed=ASCEND_TOOLKIT_HOME");
    println!("cargo:rerun-if-env-changed=ASCEND_HOME_PATH");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));

    let mut builder = bindgen::Builder::default()
        .allowlist_function("aclnn.*GetWorkspaceSize")
        .opaque_type("acl.*")
        .default_enum_style(bindgen::EnumVariation::Consts)
        .layout_tests(false)
        .generate_comments(false);
    match cann_include() {
        Some(inc) => {
            // Every op header of the installed CANN.
            let mut umbrella = String::from("#include <aclnn/acl_meta.h>\n");
            let mut headers: Vec<_> = std::fs::read_dir(inc.join("aclnnop"))
                .map(|rd| rd.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "h")).collect())
                .unwrap_or_default();
            headers.sort();
            for h in headers {
                umbrella.push_str(&format!("#include \"{}\"\n", h.display()));
            }
            let path = out.join("cann_umbrella.h");
            std::fs::write(&path, umbrella).expect("write umbrella header");
            builder =
                builder.header(path.to_string_lossy()).clang_arg(format!("-I{}", inc.display())).clang_arg("-xc++");
        }
        None => builder = builder.header("wrapper.h").clang_arg("-I."),
    }
    let bindings = builder.generate().expect("bindgen over the aclnn declarations");
    let file: syn::File = syn::parse_str(&bindings.to_string()).expect("bindgen output parses");

    let mut types = TokenStream::new();
    // (op, [(parameter, type text)], parameter types)
    type Op = (String, Vec<(String, String)>, Vec<syn::Type>);
    let mut ops: Vec<Op> = Vec::new();
    for item in &file.items {
        match item {
            syn::Item::ForeignMod(fm) => {
                for fi in &fm.items {
                    let syn::ForeignItem::Fn(f) = fi else { continue };
                    let name = f.sig.ident.to_string();
                    let Some(op) = name.strip_prefix("aclnn").and_then(|s| s.strip_suffix("GetWorkspaceSize")) else {
                        continue;
                    };
                    let mut params = Vec::new();
                    let mut tys = Vec::new();
                    for (i, input) in f.sig.inputs.iter().enumerate() {
                        let syn::FnArg::Typed(pt) = input else { continue };
                        let pname = match &*pt.pat {
                            syn::Pat::Ident(id) => id.ident.to_string().trim_start_matches("r#").to_string(),
                            _ => format!("arg{i}"),
                        };
                        let ty = &*pt.ty;
                        params.push((pname, quote!(#ty).to_string().replace(' ', "")));
                        tys.push(ty.clone());
                    }
                    // Phase 1 always ends with (uint64_t *workspaceSize, aclOpExecutor **executor).
                    let tail_ok = params.len() >= 2
                        && params[params.len() - 2].1.contains("u64")
                        && params[params.len() - 1].1.contains("aclOpExecutor");
                    if tail_ok {
                        ops.push((op.to_string(), params, tys));
                    } else {
                        println!("cargo:warning=skipping {name}: unexpected phase-1 signature");
                    }
                }
            }
            other => types.extend(quote!(#other)),
        }
    }
    // Incomplete C structs (the nnopbase handles) may not be emitted; they are only ever used
    // behind pointers, so `c_void` stands in for any that are missing.
    let defined = types.to_string();
    for opaque in [
        "aclTensor",
        "aclScalar",
        "aclIntArray",
        "aclFloatArray",
        "aclBoolArray",
        "aclTensorList",
        "aclScalarList",
        "aclOpExecutor",
    ] {
        if !defined.contains(&format!("struct {opaque} ")) && !defined.contains(&format!("type {opaque} ")) {
            let id = Ident::new(opaque, Span::call_site());
            types.extend(quote! { pub type #id = std::ffi::c_void; });
        }
    }
    ops.sort_by(|a, b| a.0.cmp(&b.0));
    ops.dedup_by(|a, b| a.0 == b.0);

    let n = ops.len();
    let mut wrappers = TokenStream::new();
    let mut infos = TokenStream::new();
    let mut p1_arms = TokenStream::new();
    let mut p2_arms = TokenStream::new();
    let mut name_arms = TokenStream::new();
    let mut p1_slots = TokenStream::new();
    let mut p2_slots = TokenStream::new();
    for (k, (op, params, tys)) in ops.iter().enumerate() {
        let fname = Ident::new(&format!("p1_{op}"), Span::call_site());
        let args: Vec<Ident> = params.iter().map(|(p, _)| Ident::new(&format!("a_{p}"), Span::call_site())).collect();
        let tail = &args[args.len() - 2..];
        let (ws, ex) = (&tail[0], &tail[1]);
        let recorded: Vec<TokenStream> = params[..params.len() - 2].iter().map(|(p, t)| classify(p, t)).collect();
        let pnames: Vec<&str> = params[..params.len() - 2].iter().map(|(p, _)| p.as_str()).collect();
        wrappers.extend(quote! {
            /// Phase-1 wrapper: the real call, then the arguments bound to the returned executor.
            #[allow(non_snake_case, clippy::too_many_arguments)]
            unsafe extern "C" fn #fname(#(#args: #tys),*) -> aclnnStatus {
                type Real = unsafe extern "C" fn(#(#tys),*) -> aclnnStatus;
                // SAFETY: REAL_P1[k] was stored from the real dlsym result for this exact name
                // before this wrapper was handed out, and has this C signature.
                let real: Real = unsafe { REAL_P1[#k].get::<Real>() };
                if !op_capturing(#k) {
                    // SAFETY: forwarding the caller's arguments unchanged to the real function.
                    return unsafe { real(#(#args),*) };
                }
                // SAFETY: as above.
                let ret = unsafe { real(#(#args),*) };
                if ret == 0 && !#ex.is_null() {
                    let _ = #ws;
                    // SAFETY: the real phase 1 succeeded, so *executor holds the executor it made.
                    let executor = unsafe { *#ex } as *const c_void;
                    bind_executor(#k, executor, &[#(#recorded),*]);
                }
                ret
            }
        });
        let p1_name = format!("aclnn{op}GetWorkspaceSize");
        let p2_name = format!("aclnn{op}");
        infos.extend(quote! { OpInfo { op: #op, params: &[#(#pnames),*] }, });
        p1_arms.extend(quote! { #k => #fname as *mut c_void, });
        p2_arms.extend(quote! { #k => phase2::<#k> as *mut c_void, });
        let c1 = proc_macro2::Literal::c_string(&std::ffi::CString::new(p1_name.clone()).expect("no NUL in a C name"));
        let c2 = proc_macro2::Literal::c_string(&std::ffi::CString::new(p2_name.clone()).expect("no NUL in a C name"));
        p1_slots.extend(quote! { Slot::new(#c1), });
        p2_slots.extend(quote! { Slot::new(#c2), });
        let p1b = syn::LitByteStr::new(p1_name.as_bytes(), Span::call_site());
        let p2b = syn::LitByteStr::new(p2_name.as_bytes(), Span::call_site());
        name_arms.extend(quote! {
            #p1b => Some((#k, Phase::One)),
            #p2b => Some((#k, Phase::Two)),
        });
    }

    // The op table (names, parameters, name lookup): read by activation and capture.
    let table = quote! {
        /// Number of aclnn ops with generated wrappers.
        pub const N_OPS: usize = #n;

        /// Ops with wrappers, in id order.
        pub static OPS: [OpInfo; N_OPS] = [#infos];

        /// Maps a symbol name to (op id, phase).
        pub fn find(name: &[u8]) -> Option<(usize, Phase)> {
            match name {
                #name_arms
                _ => None,
            }
        }
    };
    std::fs::write(out.join("aclnn_table.rs"), table.to_string()).expect("write aclnn_table.rs");

    // The wrappers and their slots: the interposer's aclnn module.
    let code = quote! {
        #[allow(non_camel_case_types, non_snake_case, non_upper_case_globals, dead_code)]
        pub mod types {
            #types
        }
        use types::*;

        /// Real phase-1 / phase-2 functions, claimed by the dlsym hook.
        pub(crate) static REAL_P1: [Slot; N_OPS] = [#p1_slots];
        pub(crate) static REAL_P2: [Slot; N_OPS] = [#p2_slots];

        #wrappers

        /// The wrapper for (op, phase).
        pub fn wrapper(k: usize, phase: Phase) -> *mut c_void {
            match phase {
                Phase::One => match k { #p1_arms _ => std::ptr::null_mut() },
                Phase::Two => match k { #p2_arms _ => std::ptr::null_mut() },
            }
        }
    };
    std::fs::write(out.join("aclnn_wrappers.rs"), code.to_string()).expect("write aclnn_wrappers.rs");
}
