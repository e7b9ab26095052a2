//! Where the aclnn declarations come from (the bundled header or an installed CANN), and the
//! bindgen run over them.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

/// The variables that may point at an installed CANN (its root, holding `include/`), in order.
pub const CANN_ROOT_VARS: [&str; 2] = ["ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH"];

/// The declarations bindgen reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Headers {
    /// The bundled declarations: `wrapper` (libmsprobe's `wrapper.h`), searched with `-I<include_dir>`.
    Bundled { wrapper: PathBuf, include_dir: PathBuf },
    /// An installed CANN's `include` directory: `aclnn/acl_meta.h` and every `aclnnop/*.h`.
    Cann { include: PathBuf },
}

/// The `include` directory of the CANN that the first of [`CANN_ROOT_VARS`] holding one points
/// at (one with both `include/aclnnop` and `include/aclnn`). `var` reads a variable
/// (`|v| std::env::var_os(v)` in a build script).
pub fn cann_include(var: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    CANN_ROOT_VARS
        .iter()
        .filter_map(|v| var(v))
        .map(|root| Path::new(&root).join("include"))
        .find(|inc| inc.join("aclnnop").is_dir() && inc.join("aclnn").is_dir())
}

/// A header including `aclnn/acl_meta.h` and every `aclnnop/*.h` of a CANN include directory,
/// sorted by path (an unreadable directory gives just the meta header).
pub fn umbrella_header(include: &Path) -> String {
    let mut umbrella = String::from("#include <aclnn/acl_meta.h>\n");
    let mut headers: Vec<PathBuf> = std::fs::read_dir(include.join("aclnnop"))
        .map(|rd| rd.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "h")).collect())
        .unwrap_or_default();
    headers.sort();
    for h in headers {
        umbrella.push_str(&format!("#include \"{}\"\n", h.display()));
    }
    umbrella
}

/// A failure to produce the bindings.
#[derive(Debug)]
pub enum Error {
    /// Writing the umbrella header.
    Io(std::io::Error),
    /// bindgen (libclang) failed on the headers.
    Bindgen(bindgen::BindgenError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(e) => write!(f, "writing the umbrella header: {e}"),
            Error::Bindgen(e) => write!(f, "bindgen over the aclnn declarations: {e}"),
        }
    }
}

impl std::error::Error for Error {}

/// Runs bindgen over the declarations: every `aclnn*GetWorkspaceSize`, with the `acl*` types
/// opaque and enums as constants. For [`Headers::Cann`] the umbrella header is written to
/// `scratch/cann_umbrella.h` and parsed as C++ (the CANN headers are).
pub fn bindings(headers: &Headers, scratch: &Path) -> Result<String, Error> {
    let mut builder = bindgen::Builder::default()
        .allowlist_function("aclnn.*GetWorkspaceSize")
        .opaque_type("acl.*")
        .default_enum_style(bindgen::EnumVariation::Consts)
        .layout_tests(false)
        .generate_comments(false);
    match headers {
        Headers::Cann { include } => {
            let path = scratch.join("cann_umbrella.h");
            std::fs::write(&path, umbrella_header(include)).map_err(Error::Io)?;
            builder =
                builder.header(path.to_string_lossy()).clang_arg(format!("-I{}", include.display())).clang_arg("-xc++");
        }
        Headers::Bundled { wrapper, include_dir } => {
            builder = builder.header(wrapper.to_string_lossy()).clang_arg(format!("-I{}", include_dir.display()));
        }
    }
    Ok(builder.generate().map_err(Error::Bindgen)?.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cann_include_needs_both_directories() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("cann");
        let other = d.path().join("other");
        std::fs::create_dir_all(root.join("include/aclnnop")).unwrap();
        std::fs::create_dir_all(other.join("include/aclnnop")).unwrap();
        let vars = |toolkit: Option<&Path>, home: Option<&Path>| {
            let (t, h) = (toolkit.map(OsString::from), home.map(OsString::from));
            cann_include(move |v| match v {
                "ASCEND_TOOLKIT_HOME" => t.clone(),
                "ASCEND_HOME_PATH" => h.clone(),
                _ => None,
            })
        };
        // Without include/aclnn it is not a CANN.
        assert_eq!(vars(Some(&root), None), None);
        std::fs::create_dir_all(root.join("include/aclnn")).unwrap();
        assert_eq!(vars(Some(&root), None), Some(root.join("include")));
        assert_eq!(vars(None, Some(&root)), Some(root.join("include")));
        // ASCEND_TOOLKIT_HOME first, but a variable that does not point at a CANN is skipped.
        assert_eq!(vars(Some(&other), Some(&root)), Some(root.join("include")));
        std::fs::create_dir_all(other.join("include/aclnn")).unwrap();
        assert_eq!(vars(Some(&other), Some(&root)), Some(other.join("include")));
        assert_eq!(vars(None, None), None);
    }

    #[test]
    fn umbrella_includes_every_op_header_sorted() {
        let d = tempfile::tempdir().unwrap();
        let inc = d.path();
        assert_eq!(umbrella_header(inc), "#include <aclnn/acl_meta.h>\n");
        std::fs::create_dir_all(inc.join("aclnnop")).unwrap();
        for f in ["aclnn_mul.h", "aclnn_add.h", "README.md", "aclnn_add.hpp"] {
            std::fs::write(inc.join("aclnnop").join(f), "").unwrap();
        }
        let expect = format!(
            "#include <aclnn/acl_meta.h>\n#include \"{0}/aclnn_add.h\"\n#include \"{0}/aclnn_mul.h\"\n",
            inc.join("aclnnop").display()
        );
        assert_eq!(umbrella_header(inc), expect);
    }
}
