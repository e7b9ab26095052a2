//! Simulated device memory.
//!
//! Each allocation is one memfd mapped twice: a `PROT_NONE` view whose address is handed out as the
//! device pointer (so a host dereference faults), and a read/write view used only by the simulator
//! (memcpy, memset, kernels, HCCL). Device addresses are translated through a sorted map.
use crate::consts::*;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{OnceLock, RwLock};

struct Alloc {
    size: usize,
    map_len: usize,
    rw: usize,
}

fn table() -> &'static RwLock<BTreeMap<usize, Alloc>> {
    static T: OnceLock<RwLock<BTreeMap<usize, Alloc>>> = OnceLock::new();
    T.get_or_init(|| RwLock::new(BTreeMap::new()))
}

static USED: AtomicUsize = AtomicUsize::new(0);

/// Total simulated device memory in bytes (`CANNSIM_DEVICE_MEM_MB`, default 32768).
pub fn total_bytes() -> usize {
    crate::env_num::<usize>("CANNSIM_DEVICE_MEM_MB", 32768) << 20
}
pub fn used_bytes() -> usize {
    USED.load(Ordering::Relaxed)
}

fn page() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// Allocate `size` bytes of device memory; returns the device (PROT_NONE) address.
pub fn alloc(size: usize) -> Result<usize, i32> {
    if size == 0 {
        return Err(ACL_ERROR_INVALID_PARAM);
    }
    let pg = page();
    let map_len = size.div_ceil(pg) * pg;
    if USED.load(Ordering::Relaxed) + map_len > total_bytes() {
        return Err(ACL_ERROR_RT_MEMORY_ALLOCATION);
    }
    // SAFETY: memfd_create with a valid NUL-terminated name.
    let fd = unsafe { libc::memfd_create(c"cannsim-dev".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(ACL_ERROR_RT_MEMORY_ALLOCATION);
    }
    // SAFETY: fd is a valid memfd we own.
    let ok = unsafe { libc::ftruncate(fd, map_len as libc::off_t) } == 0;
    let mut dev = libc::MAP_FAILED;
    let mut rw = libc::MAP_FAILED;
    if ok {
        // SAFETY: mapping a fresh memfd; NULL hint, length > 0.
        unsafe {
            dev = libc::mmap(std::ptr::null_mut(), map_len, libc::PROT_NONE, libc::MAP_SHARED, fd, 0);
            rw = libc::mmap(std::ptr::null_mut(), map_len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0);
        }
    }
    // SAFETY: the mappings keep the memory alive; the fd is no longer needed.
    unsafe { libc::close(fd) };
    if dev == libc::MAP_FAILED || rw == libc::MAP_FAILED {
        // SAFETY: unmapping only what we mapped.
        unsafe {
            if dev != libc::MAP_FAILED {
                libc::munmap(dev, map_len);
            }
            if rw != libc::MAP_FAILED {
                libc::munmap(rw, map_len);
            }
        }
        return Err(ACL_ERROR_RT_MEMORY_ALLOCATION);
    }
    let now = USED.fetch_add(map_len, Ordering::Relaxed) + map_len;
    crate::stats::device_mem(now);
    table().write().unwrap().insert(dev as usize, Alloc { size, map_len, rw: rw as usize });
    Ok(dev as usize)
}

/// Free a device allocation by its base address.
pub fn free(addr: usize) -> Result<(), i32> {
    let a = table().write().unwrap().remove(&addr).ok_or(ACL_ERROR_INVALID_PARAM)?;
    USED.fetch_sub(a.map_len, Ordering::Relaxed);
    // SAFETY: both mappings were created by `alloc` with this length and are removed from the table.
    unsafe {
        libc::munmap(addr as *mut libc::c_void, a.map_len);
        libc::munmap(a.rw as *mut libc::c_void, a.map_len);
    }
    Ok(())
}

/// Is `addr` inside some device allocation?
pub fn is_device(addr: usize) -> bool {
    lookup(addr, 0).is_some()
}

/// Translate the device range `[addr, addr+len)` to its RW host view. The range must lie in one allocation.
pub fn lookup(addr: usize, len: usize) -> Option<usize> {
    let t = table().read().unwrap();
    let (&base, a) = t.range(..=addr).next_back()?;
    let off = addr - base;
    if off < a.size.max(1) && off.checked_add(len)? <= a.size {
        Some(a.rw + off)
    } else {
        None
    }
}

/// Read `len` bytes of device memory.
pub fn read(addr: usize, len: usize) -> Result<Vec<u8>, i32> {
    let mut v = vec![0u8; len];
    if len == 0 {
        return Ok(v);
    }
    let rw = lookup(addr, len).ok_or(ACL_ERROR_RT_PARAM_INVALID)?;
    // SAFETY: `rw..rw+len` lies inside a live RW mapping (checked by lookup); v has len bytes.
    unsafe { std::ptr::copy(rw as *const u8, v.as_mut_ptr(), len) };
    Ok(v)
}

/// Write bytes into device memory.
pub fn write(addr: usize, data: &[u8]) -> Result<(), i32> {
    if data.is_empty() {
        return Ok(());
    }
    let rw = lookup(addr, data.len()).ok_or(ACL_ERROR_RT_PARAM_INVALID)?;
    // SAFETY: destination range checked by lookup; source is a valid slice.
    unsafe { std::ptr::copy(data.as_ptr(), rw as *mut u8, data.len()) };
    Ok(())
}

/// Fill device memory with a byte value.
pub fn fill(addr: usize, val: u8, len: usize) -> Result<(), i32> {
    if len == 0 {
        return Ok(());
    }
    let rw = lookup(addr, len).ok_or(ACL_ERROR_RT_PARAM_INVALID)?;
    // SAFETY: range checked by lookup.
    unsafe { std::ptr::write_bytes(rw as *mut u8, val, len) };
    Ok(())
}

/// A host-or-device address as seen by a memcpy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Host,
    Device,
}

/// Copy `count` bytes between host/device according to the (validated) sides.
/// Host pointers are trusted (as in the real runtime).
pub fn copy(dst: usize, dside: Side, src: usize, sside: Side, count: usize) -> Result<(), i32> {
    if count == 0 {
        return Ok(());
    }
    let s = match sside {
        Side::Host => src,
        Side::Device => lookup(src, count).ok_or(ACL_ERROR_RT_PARAM_INVALID)?,
    };
    let d = match dside {
        Side::Host => dst,
        Side::Device => lookup(dst, count).ok_or(ACL_ERROR_RT_PARAM_INVALID)?,
    };
    // SAFETY: device ranges were validated by lookup; host ranges are the caller's responsibility
    // exactly as for the real aclrtMemcpy. `copy` tolerates overlap.
    unsafe { std::ptr::copy(s as *const u8, d as *mut u8, count) };
    Ok(())
}

#[cfg(test)]
mod t {
    use super::*;
    #[test]
    fn alloc_rw() {
        let a = alloc(100).unwrap();
        write(a + 10, &[1, 2, 3]).unwrap();
        assert_eq!(read(a + 10, 3).unwrap(), vec![1, 2, 3]);
        assert!(read(a + 99, 2).is_err());
        assert!(lookup(a + 100, 0).is_none());
        free(a).unwrap();
        assert!(free(a).is_err());
    }
}
