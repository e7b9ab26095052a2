//! Thread-local "recent error message" (aclGetRecentErrMsg).
use std::cell::RefCell;
use std::ffi::CString;

thread_local! {
    static LAST: RefCell<Option<CString>> = const { RefCell::new(None) };
}

/// Record an error message for `aclGetRecentErrMsg` and return `code`.
pub fn fail(code: i32, msg: impl Into<String>) -> i32 {
    let m = msg.into();
    crate::simlog!("error {}: {}", code, m);
    let c = CString::new(format!("EE{:06}: {}", code % 1_000_000, m).replace('\0', " ")).unwrap_or_default();
    LAST.with(|l| *l.borrow_mut() = Some(c));
    code
}

/// Takes this thread's last message (a stream worker's, to hand to the thread that synchronises).
pub fn take_last() -> Option<String> {
    LAST.with(|l| l.borrow_mut().take()).map(|c| c.to_string_lossy().into_owned())
}

/// Pointer to the last message (valid until the next error on this thread), or NULL.
pub fn last_ptr() -> *const std::os::raw::c_char {
    LAST.with(|l| l.borrow().as_ref().map(|c| c.as_ptr()).unwrap_or(std::ptr::null()))
}
