//! The dlsym hook's dispatch: for a name a client looks up, our wrapper, or the real address
//! unchanged. Each library's hooked names are declared once, in its own module's hook table.
//! The real function behind each recognised name is also noted ([`note_cann`]): its object is
//! where the tool's own runtime calls are looked up, whatever path the client opened CANN by.

use super::{aclnn, aclop, activation, hccl, ops};
use crate::hook::{note_cann, Family};
use std::ffi::c_void;

/// Our wrapper for `name`, or `found` unchanged. Allocates nothing and takes no lock (allocators
/// call dlsym during their own initialisation), except for a CANN name whose lookup found our
/// own export (a global-scope lookup): then the real definition is searched for, and the lookup
/// fails (NULL) when no loaded library defines the name, as it would without us.
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
            if w != found && !w.is_null() {
                note_cann(Family::Aclnn, found);
            }
            return w;
        }
        if name.ends_with(b"GetWorkspaceSize") {
            activation::note_uncaptured(name);
        }
        return found;
    }
    let (w, family) = if name.starts_with(b"Hccl") {
        (hccl::wrap(name, found), Family::Hccl)
    } else if let Some(w) = aclop::wrap(name, found) {
        (Some(w), Family::Aclop)
    } else {
        (aclnn::wrap_nnopbase(name, found), Family::Nnopbase)
    };
    match w {
        // Our own export found, and no loaded library defines the name.
        Some(w) if w.is_null() => w,
        // A wrapper handed out: `found` is the real function (not our export, not another wrapper).
        Some(w) if w != found => {
            note_cann(family, found);
            w
        }
        _ => found,
    }
}
