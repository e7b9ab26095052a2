//! Generates the L2 interposer's aclnn phase-1 wrappers from C headers, with the `aclnn-gen`
//! crate (crates/aclnn-gen), which holds the rules and is unit- and snapshot-tested.
//!
//! bindgen parses `wrapper.h` (the declarations bundled in `include/cann/aclnn_ops.h`), or every
//! `include/aclnnop/*.h` of an installed CANN when `ASCEND_TOOLKIT_HOME` / `ASCEND_HOME_PATH`
//! points at one. For each `aclnnXxxGetWorkspaceSize` the generator emits, into
//! `$OUT_DIR/aclnn_wrappers.rs`:
//! - a wrapper with the exact C signature that calls the real function and then binds its
//!   arguments (classified by type and parameter name) to the executor it returned;
//! - the wrapper pointers and the slots of the real functions.
//!
//! and into `$OUT_DIR/aclnn_table.rs` the op table (`OPS`) and the name matcher of the dlsym hook.
//! Phase 2 (`aclnnXxx(workspace, size, executor, stream)`) has one signature for every op and is
//! handled by a const-generic wrapper in `src/interposer/aclnn.rs`.

use aclnn_gen::headers::CANN_ROOT_VARS;
use aclnn_gen::Headers;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=wrapper.h");
    println!("cargo:rerun-if-changed=include/cann/aclnn_ops.h");
    for var in CANN_ROOT_VARS {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));

    let headers = match aclnn_gen::cann_include(|v| std::env::var_os(v)) {
        Some(include) => Headers::Cann { include },
        None => Headers::Bundled { wrapper: "wrapper.h".into(), include_dir: ".".into() },
    };
    let bindings = aclnn_gen::bindings(&headers, &out).unwrap_or_else(|e| panic!("{e}"));
    let parsed = aclnn_gen::parse(&bindings).expect("bindgen output parses");
    for name in &parsed.skipped {
        println!("cargo:warning=skipping {name}: unexpected phase-1 signature");
    }
    let generated = aclnn_gen::emit(&parsed);
    std::fs::write(out.join("aclnn_table.rs"), generated.table).expect("write aclnn_table.rs");
    std::fs::write(out.join("aclnn_wrappers.rs"), generated.wrappers).expect("write aclnn_wrappers.rs");
}
