// The recorder core needs no generated code. The L2 interposer (src/interposer) will generate its
// aclnn wrappers here with bindgen over wrapper.h.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
}
