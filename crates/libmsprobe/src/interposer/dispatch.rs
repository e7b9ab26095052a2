//! The dlsym hook's dispatch: for a name a client looks up, our wrapper, or the real address
//! unchanged. Each library's hooked names are declared once, in its own module's hook table.
//! The real function behind each recognised name is also noted ([`note_cann`]): its object is
//! where the tool's own runtime calls are looked up, whatever path the client opened CANN by.

use super::{aclnn, aclop, activation, hccl, ops};
use crate::hook::{note_cann, Family};
use std::ffi::c_void;

/// Our wrapper for `name`, or `found` unchanged. Allocates nothing and takes no lock (allocators
/// call dlsym during their own initialisation).
pub(crate) fn wrap(name: &[u8], found: *mut c_void) -> *mut c_void {
    // Functions the tool calls itself: remember the client's address, hand it out unchanged.
    if let Some(s) = crate::device::OBSERVED.iter().chain(aclop::OBSERVED.iter()).find(|s| s.name().to_bytes() == name)
    {
        s.observe(found);
        note_cann(Family::Runtime, found);
        return found;
    }
    if name.starts_with(b"aclnn") {
        if let Some(w) = ops::find(name).and_then(|(k, phase)| aclnn::wrap_op(k, phase, found)) {
            if w != found {
                note_cann(Family::Aclnn, found);
            }
            return w;
        }
        if name.ends_with(b"GetWorkspaceSize") {
            activation::note_uncaptured(name);
        }
        return found;
    }
    let (w, family) = if name.starts_with(b"aclop") {
        (aclop::wrap(name, found), Family::Aclop)
    } else if name.starts_with(b"Hccl") {
        (hccl::wrap(name, found), Family::Hccl)
    } else {
        (aclnn::wrap_nnopbase(name, found), Family::Nnopbase)
    };
    match w {
        // A wrapper handed out: `found` is the real function (not our export, not another wrapper).
        Some(w) if w != found => {
            note_cann(family, found);
            w
        }
        _ => found,
    }
}
