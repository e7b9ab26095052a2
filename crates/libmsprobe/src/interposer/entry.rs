//! The exported `dlsym`: a naked trampoline plus the Rust lookup behind it.
//!
//! For `RTLD_NEXT` the trampoline tail-jumps into glibc's dlsym so glibc still sees the
//! original caller (whose position defines "next"); every other lookup goes to [`lookup`],
//! which calls the real dlsym and, for names we wrap, returns a wrapper. `lookup` allocates
//! nothing, takes no lock and logs nothing (allocators call dlsym during their own init), and
//! returns NULL results untouched so `dlerror()` stays the client's. The one exception is the
//! first CANN name looked up while a bad `MSPROBE_LEVEL` keeps capture off: that lookup logs
//! why (`activation::lookup_while_off`); allocators never look up CANN names.

use crate::hook::{real_dlsym, resolve, MSPROBE_REAL_DLSYM};
use std::ffi::{c_char, c_void, CStr};

#[cfg(target_arch = "x86_64")]
#[unsafe(no_mangle)]
#[unsafe(naked)]
/// # Safety
/// Same contract as glibc's `dlsym`.
pub unsafe extern "C" fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    core::arch::naked_asm!(
        "cmp rdi, -1",
        "jne {lookup}",
        "mov rax, qword ptr [rip + {real}]",
        "test rax, rax",
        "jz 2f",
        "jmp rax",
        "2:",
        "push rdi",
        "push rsi",
        "sub rsp, 8",
        "call {resolve}",
        "add rsp, 8",
        "pop rsi",
        "pop rdi",
        "jmp rax",
        lookup = sym lookup,
        real = sym MSPROBE_REAL_DLSYM,
        resolve = sym resolve,
    )
}

// AAPCS64 review (tests/aarch64/test_aarch64.py runs it under qemu with RTLD_NEXT and
// RTLD_DEFAULT lookups from several threads and from a constructor that runs before ours):
// - glibc's dlsym reads x0 (handle), x1 (name) and x30 (its caller, which defines "next"); both
//   paths reach it with the three unchanged. q0–q7, x2–x7 and x8 carry nothing into dlsym (two
//   pointer arguments, a pointer result in x0) and are caller-saved, so the resolver may clobber
//   them; x19–x28 and x29 are preserved by `resolve` itself (an AAPCS64 function).
// - x16 (IP0) is the intra-procedure-call scratch register, free at a function's entry.
// - sp stays 16-byte aligned: one 32-byte frame around the call to `resolve`.
// - `hint #34` is `bti c` (a NOP on cores without BTI, and accepted by every assembler): the
//   landing pad for the PLT's `br x17` when the library is built with branch protection
//   (rustc's -Zbranch-protection=bti; the stable toolchain does not mark the library, so BTI is
//   not enforced on its pages today). PAC-RET: x30 is never signed, changed or returned through
//   here (tail branches only), so a signed caller is unaffected.
// - `b.eq` + `b`, not `b.ne {lookup}`: a conditional branch reaches ±1 MiB and the linker adds
//   no veneer for it, while `b` reaches ±128 MiB (with veneers beyond); the
//   library's text is about 1.6 MB.
#[cfg(target_arch = "aarch64")]
#[unsafe(no_mangle)]
#[unsafe(naked)]
/// # Safety
/// Same contract as glibc's `dlsym`.
pub unsafe extern "C" fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    core::arch::naked_asm!(
        "hint #34",
        "cmn x0, #1",
        "b.eq 1f",
        "b {lookup}",
        "1:",
        "adrp x16, {real}",
        "ldr x16, [x16, :lo12:{real}]",
        "cbz x16, 2f",
        "br x16",
        "2:",
        "stp x0, x1, [sp, #-32]!",
        "str x30, [sp, #16]",
        "bl {resolve}",
        "mov x16, x0",
        "ldr x30, [sp, #16]",
        "ldp x0, x1, [sp], #32",
        "br x16",
        lookup = sym lookup,
        real = sym MSPROBE_REAL_DLSYM,
        resolve = sym resolve,
    )
}

/// Every non-`RTLD_NEXT` lookup: the real result, or our wrapper for names we capture.
unsafe extern "C" fn lookup(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    // SAFETY: forwarding the caller's arguments to glibc's dlsym.
    let found = unsafe { real_dlsym()(handle, symbol) };
    if found.is_null() || symbol.is_null() {
        return found;
    }
    if !super::activation::wrapping() {
        // SAFETY: dlsym found the symbol, so `symbol` is a valid NUL-terminated string, read
        // only during this call.
        super::activation::lookup_while_off(|| unsafe { CStr::from_ptr(symbol) }.to_bytes());
        if !crate::hook::is_own(found) {
            return found;
        }
        // A global-scope lookup found our export of a CANN name: it fails (NULL) when no loaded
        // library defines the name, as it would without us (an export of ours is never
        // wrapped again).
        // SAFETY: as above.
        return super::dispatch::wrap(unsafe { CStr::from_ptr(symbol) }.to_bytes(), found);
    }
    // SAFETY: dlsym found the symbol, so `symbol` is a valid NUL-terminated string.
    let name = unsafe { CStr::from_ptr(symbol) }.to_bytes();
    super::dispatch::wrap(name, found)
}
