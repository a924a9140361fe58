//! Whether the caller's host pages can be page-locked: NVIDIA's driver pins them
//! (`pin_user_pages`), writable unless registered read-only, and the kernel refuses pages the
//! process may not access that way — an inaccessible (`PROT_NONE`) page of a reservation, a
//! read-only page pinned for writing, or a hole in the address space. softcuda reads the same
//! answer from `/proc/self/maps`, so code that registers such a range fails here as it would
//! on a GPU (gpuhost-wasm's guest memories keep the pages past a guest's size inaccessible).

/// Whether every page of `[addr, addr + len)` is mapped readable, and writable when `write`.
/// Where the maps cannot be read (no procfs), everything counts as pinnable, as before this
/// check.
pub(crate) fn pinnable(addr: u64, len: u64, write: bool) -> bool {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return true;
    };
    let end = addr.saturating_add(len);
    // The maps list mappings in address order: walk them, each continuing where the last
    // ended, until the range is covered.
    let mut at = addr;
    for line in maps.lines() {
        let Some((lo, hi, perms)) = parse(line) else {
            continue;
        };
        if hi <= at {
            continue;
        }
        let allowed = perms.starts_with('r') && (!write || perms.as_bytes().get(1) == Some(&b'w'));
        if lo > at || !allowed {
            return false;
        }
        at = hi;
        if at >= end {
            return true;
        }
    }
    false
}

/// `lo-hi perms ...` of one line of `/proc/self/maps`.
fn parse(line: &str) -> Option<(u64, u64, &str)> {
    let mut fields = line.split_ascii_whitespace();
    let (lo, hi) = fields.next()?.split_once('-')?;
    let lo = u64::from_str_radix(lo, 16).ok()?;
    let hi = u64::from_str_radix(hi, 16).ok()?;
    Some((lo, hi, fields.next()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh anonymous mapping of `pages` pages with `prot`.
    fn map(pages: usize, prot: libc::c_int) -> (u64, usize) {
        let len = pages * 4096;
        // SAFETY: a fresh private anonymous mapping, no address hint.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        (p as u64, len)
    }

    #[test]
    fn a_range_is_pinnable_only_where_every_page_allows_the_access() {
        let (base, len) = map(4, libc::PROT_READ | libc::PROT_WRITE);
        assert!(pinnable(base, len as u64, true));
        assert!(pinnable(base + 4096, 100, true));
        // The last page made inaccessible, as a guest memory's pages past its size are.
        // SAFETY: the last page of the mapping made above.
        let r = unsafe { libc::mprotect((base + 3 * 4096) as *mut _, 4096, libc::PROT_NONE) };
        assert_eq!(r, 0);
        assert!(pinnable(base, 3 * 4096, true));
        assert!(!pinnable(base, len as u64, true));
        assert!(!pinnable(base + 3 * 4096, 1, false));
        // Read-only pages: pinnable for reading only.
        // SAFETY: the second page of the same mapping.
        let r = unsafe { libc::mprotect((base + 4096) as *mut _, 4096, libc::PROT_READ) };
        assert_eq!(r, 0);
        assert!(!pinnable(base, 2 * 4096, true));
        assert!(pinnable(base, 2 * 4096, false));
        // SAFETY: unmapped once; the pointers above are not used again.
        unsafe { libc::munmap(base as *mut _, len) };
    }
}
