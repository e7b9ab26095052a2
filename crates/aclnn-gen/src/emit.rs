//! The op list → the two files libmsprobe includes: `aclnn_table.rs` (the op table and the symbol
//! matcher, included by `interposer/ops.rs`) and `aclnn_wrappers.rs` (the types, the phase-1
//! wrappers and the slots of the real functions, included by `interposer/aclnn.rs`).
//!
//! The emitted code names items of libmsprobe: `Arg`, `Role`, `OpInfo`, `Phase`, `Slot`,
//! `phase2`, `export_p2`, `export_real`, `ACLNN_MISSING`, `bind_executor`, `op_capturing`, `c_void`,
//! `aclnnStatus`.
//!
//! Both phases of every op are also exported under their C names (`aclnnXxxGetWorkspaceSize`,
//! `aclnnXxx`) for clients that link them directly: the export resolves the real function into
//! the same slot the dlsym path fills and calls the same wrapper.

use crate::parse::{Op, Parsed};
use crate::roles::ArgKind;
use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::quote;

/// The handle types the wrappers name. Incomplete C structs may not be emitted by bindgen; they
/// are only ever used behind pointers, so `c_void` stands in for any that are missing.
/// C enum types that phase-1 signatures take by value.
const ENUMS: [&str; 2] = ["aclDataType", "aclFormat"];

const HANDLES: [&str; 8] = [
    "aclTensor",
    "aclScalar",
    "aclIntArray",
    "aclFloatArray",
    "aclBoolArray",
    "aclTensorList",
    "aclScalarList",
    "aclOpExecutor",
];

/// The generated sources.
pub struct Generated {
    /// `aclnn_table.rs`.
    pub table: String,
    /// `aclnn_wrappers.rs`.
    pub wrappers: String,
}

fn ident(s: &str) -> Ident {
    Ident::new(s, Span::call_site())
}

/// The argument identifier of parameter `name` in a wrapper.
fn arg_ident(name: &str) -> Ident {
    ident(&format!("a_{name}"))
}

/// The `Arg` expression a wrapper builds for argument `arg` of this kind.
pub fn arg_expr(kind: ArgKind, arg: &Ident) -> TokenStream {
    let role = |r: crate::roles::Role| {
        let v = ident(r.variant());
        quote! { Role::#v }
    };
    match kind {
        ArgKind::TensorList(r) => {
            let r = role(r);
            quote! { Arg::TensorList(#arg as *const c_void, #r) }
        }
        ArgKind::Tensor(r) => {
            let r = role(r);
            quote! { Arg::Tensor(#arg as *const c_void, #r) }
        }
        ArgKind::Scalar => quote! { Arg::Scalar(#arg as *const c_void) },
        ArgKind::IntArray => quote! { Arg::IntArray(#arg as *const c_void) },
        ArgKind::FloatArray => quote! { Arg::FloatArray(#arg as *const c_void) },
        ArgKind::BoolArray => quote! { Arg::BoolArray(#arg as *const c_void) },
        ArgKind::Str => quote! { Arg::Str(#arg as *const c_void) },
        ArgKind::DType => quote! { Arg::DType(#arg as i64) },
        ArgKind::Bool => quote! { Arg::Bool(#arg) },
        ArgKind::Float => quote! { Arg::Float(#arg as f64) },
        ArgKind::Int => quote! { Arg::Int(#arg as i64) },
        ArgKind::Opaque => quote! { Arg::Opaque },
    }
}

/// The type items, plus a `c_void` alias for every handle type bindgen did not define.
fn types(parsed: &Parsed) -> TokenStream {
    let mut types = TokenStream::new();
    for item in &parsed.types {
        types.extend(quote!(#item));
    }
    let defined = types.to_string();
    for handle in HANDLES {
        if !defined.contains(&format!("struct {handle} ")) && !defined.contains(&format!("type {handle} ")) {
            let id = ident(handle);
            types.extend(quote! { pub type #id = std::ffi::c_void; });
        }
    }
    // `.opaque_type("acl.*")` also drops C enum typedefs (`typedef enum {...} aclDataType;` in
    // real CANN headers): a C enum is passed as an `int`.
    for e in ENUMS {
        if !defined.contains(&format!("type {e} ")) {
            let id = ident(e);
            types.extend(quote! { pub type #id = std::ffi::c_int; });
        }
    }
    types
}

/// The phase-1 wrapper of op `k`: the real call, then (when capturing and the call succeeded) its
/// arguments bound to the executor it returned.
fn wrapper(k: usize, op: &Op) -> TokenStream {
    let fname = ident(&format!("p1_{}", op.name));
    let args: Vec<Ident> = op.params.iter().map(|p| arg_ident(&p.name)).collect();
    let tys: Vec<&syn::Type> = op.params.iter().map(|p| &p.ty).collect();
    let (ws, ex) = (&args[args.len() - 2], &args[args.len() - 1]);
    let recorded: Vec<TokenStream> = op.recorded().iter().map(|p| arg_expr(p.kind(), &arg_ident(&p.name))).collect();
    // The SAFETY notes of the unsafe blocks are here, where the code is written (token streams
    // hold no comments).
    quote! {
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
    }
}

/// The exports of op `k`'s two phases under their C names: the real function resolved into the
/// slot the dlsym path uses, then the same wrappers.
fn exports(k: usize, op: &Op) -> TokenStream {
    let p1 = ident(&format!("aclnn{}GetWorkspaceSize", op.name));
    let p2 = ident(&format!("aclnn{}", op.name));
    let wrapper = ident(&format!("p1_{}", op.name));
    let args: Vec<Ident> = op.params.iter().map(|p| arg_ident(&p.name)).collect();
    let tys: Vec<&syn::Type> = op.params.iter().map(|p| &p.ty).collect();
    quote! {
        /// Phase 1, exported for clients that link it directly.
        ///
        /// # Safety
        /// The aclnn C contract of this function.
        #[no_mangle]
        #[allow(non_snake_case, clippy::too_many_arguments)]
        pub unsafe extern "C" fn #p1(#(#args: #tys),*) -> aclnnStatus {
            if REAL_P1[#k].load().is_null() && export_real(&REAL_P1[#k]).is_null() {
                ACLNN_MISSING as aclnnStatus
            } else {
                // SAFETY: the slot holds the real function; the caller's arguments, unchanged.
                unsafe { #wrapper(#(#args),*) }
            }
        }

        /// Phase 2, exported for clients that link it directly.
        ///
        /// # Safety
        /// The aclnn C contract of this function.
        #[no_mangle]
        #[allow(non_snake_case)]
        pub unsafe extern "C" fn #p2(ws: *mut c_void, size: u64, ex: *mut c_void, stream: *mut c_void) -> aclnnStatus {
            // SAFETY: the caller's arguments, unchanged.
            unsafe { export_p2::<#k>(ws, size, ex, stream) as aclnnStatus }
        }
    }
}

fn c_literal(name: &str) -> Literal {
    Literal::c_string(&std::ffi::CString::new(name).expect("no NUL in a C name"))
}

/// Emits both files from the op list.
pub fn emit(parsed: &Parsed) -> Generated {
    let ops = &parsed.ops;
    let n = ops.len();
    let mut wrappers = TokenStream::new();
    let mut infos = TokenStream::new();
    let mut p1_arms = TokenStream::new();
    let mut p2_arms = TokenStream::new();
    let mut name_arms = TokenStream::new();
    let mut p1_slots = TokenStream::new();
    let mut p2_slots = TokenStream::new();
    for (k, op) in ops.iter().enumerate() {
        wrappers.extend(wrapper(k, op));
        wrappers.extend(exports(k, op));
        let fname = ident(&format!("p1_{}", op.name));
        let name = &op.name;
        let pnames: Vec<&str> = op.recorded().iter().map(|p| p.name.as_str()).collect();
        let p1_name = format!("aclnn{name}GetWorkspaceSize");
        let p2_name = format!("aclnn{name}");
        infos.extend(quote! { OpInfo { op: #name, params: &[#(#pnames),*] }, });
        p1_arms.extend(quote! { #k => #fname as *mut c_void, });
        p2_arms.extend(quote! { #k => phase2::<#k> as *mut c_void, });
        let (c1, c2) = (c_literal(&p1_name), c_literal(&p2_name));
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

    // The wrappers and their slots: the interposer's aclnn module.
    let types = types(parsed);
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
    Generated { table: table.to_string(), wrappers: code.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse;
    use crate::roles::Role;

    fn one_op(decl: &str) -> Generated {
        emit(&parse(&format!("unsafe extern \"C\" {{ {decl} }}")).unwrap())
    }

    /// Real CANN declares `typedef enum {...} aclDataType;`, which bindgen drops as opaque: the
    /// generated code must still name the type (it did not, and real-CANN builds failed).
    #[test]
    fn enum_parameters_compile_without_the_enum_definition() {
        let g = one_op(
            "pub fn aclnnCastGetWorkspaceSize(self_: *const aclTensor, dtype: aclDataType, out: *mut aclTensor, \
             workspaceSize: *mut u64, executor: *mut *mut aclOpExecutor) -> aclnnStatus;",
        );
        assert!(g.wrappers.contains("pub type aclDataType = std :: ffi :: c_int"), "{}", g.wrappers);
    }

    #[test]
    fn arg_exprs() {
        let a = ident("a_x");
        let s = |k| arg_expr(k, &a).to_string();
        assert_eq!(s(ArgKind::Tensor(Role::InOut)), "Arg :: Tensor (a_x as * const c_void , Role :: InOut)");
        assert_eq!(s(ArgKind::TensorList(Role::Out)), "Arg :: TensorList (a_x as * const c_void , Role :: Out)");
        assert_eq!(s(ArgKind::Str), "Arg :: Str (a_x as * const c_void)");
        assert_eq!(s(ArgKind::DType), "Arg :: DType (a_x as i64)");
        assert_eq!(s(ArgKind::Bool), "Arg :: Bool (a_x)");
        assert_eq!(s(ArgKind::Float), "Arg :: Float (a_x as f64)");
        assert_eq!(s(ArgKind::Opaque), "Arg :: Opaque");
    }

    #[test]
    fn table_and_wrapper_of_one_op() {
        let g = one_op(
            "pub fn aclnnReluGetWorkspaceSize(self_: *const aclTensor, out: *const aclTensor, \
             workspaceSize: *mut u64, executor: *mut *mut aclOpExecutor) -> aclnnStatus;",
        );
        assert!(g.table.contains("pub const N_OPS : usize = 1usize ;"), "{}", g.table);
        assert!(g.table.contains(r#"OpInfo { op : "Relu" , params : & ["self_" , "out"] } ,"#), "{}", g.table);
        assert!(g.table.contains(r#"b"aclnnReluGetWorkspaceSize" => Some ((0usize , Phase :: One)) ,"#));
        assert!(g.table.contains(r#"b"aclnnRelu" => Some ((0usize , Phase :: Two)) ,"#));
        let w = &g.wrappers;
        assert!(w.contains(r#"Slot :: new (c"aclnnReluGetWorkspaceSize")"#), "{w}");
        assert!(w.contains("unsafe extern \"C\" fn p1_Relu (a_self_ : * const aclTensor , a_out : * const aclTensor"));
        assert!(w.contains(
            "bind_executor (0usize , executor , & [Arg :: Tensor (a_self_ as * const c_void , Role :: In) , \
             Arg :: Tensor (a_out as * const c_void , Role :: Out)])"
        ));
        assert!(w.contains("0usize => phase2 :: < 0usize > as * mut c_void ,"));
        // Both files are valid Rust.
        syn::parse_file(&g.table).unwrap();
        syn::parse_file(&g.wrappers).unwrap();
    }

    #[test]
    fn missing_handles_become_c_void() {
        let g = emit(
            &parse(
                "#[repr(C)] pub struct aclTensor { _unused: [u8; 0] } pub type aclScalar = u8; \
                 pub type aclTensorListX = u8;",
            )
            .unwrap(),
        );
        assert!(g.table.contains("pub const N_OPS : usize = 0usize ;"), "{}", g.table);
        for h in HANDLES {
            let alias = format!("pub type {h} = std :: ffi :: c_void ;");
            let expect = !matches!(h, "aclTensor" | "aclScalar");
            assert_eq!(g.wrappers.contains(&alias), expect, "{h}");
        }
    }
}
