//! Unmapping the pages of the operator's own binary once start-up is over, so that only the code
//! and read-only data it runs from then on come back into its resident set.
//!
//! Start-up (argument parsing, the client's TLS set-up, loading the guest, the first list of
//! every watched kind) runs code the operator never runs again, and the kernel maps up to 64 KiB
//! around each page of a file it faults in (fault-around): measured on the idle operator, most of
//! its RSS was pages of its binary. [`release`] drops this process's mappings of its binary's
//! read-only segments (`MADV_DONTNEED`); what runs next faults its pages back in from the page
//! cache. The page cache itself is left alone: the pages stay there until the kernel needs the
//! memory, as for any file nobody maps.

use std::io;

/// What [`release`] unmapped, and the process's resident file pages around it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Released {
    /// Read-only segments of the binary unmapped.
    pub segments: usize,
    /// Bytes of address space unmapped (resident or not).
    pub bytes: usize,
    /// `RssFile` of `/proc/self/status` before, in KiB (`None` where it cannot be read).
    pub resident_file_kib_before: Option<u64>,
    /// `RssFile` right after, in KiB.
    pub resident_file_kib_after: Option<u64>,
}

/// Unmaps the read-only segments (code, read-only data) of the binary this function is in.
///
/// Safe to call at any time: those segments are never written (no text relocations; what the
/// loader relocates lies in writable segments, left alone here), so a page faulted in again
/// from the file holds what the dropped one held; the running binary's file cannot be written
/// (`ETXTBSY`). A debugger's breakpoints written into the code before the call are lost with
/// their pages.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub fn release() -> io::Result<Released> {
    let page = page_size();
    let mut released = Released {
        resident_file_kib_before: resident_file_kib(),
        ..Released::default()
    };
    for (start, end) in read_only_segments() {
        // Whole pages inside the segment only: a page shared with a writable segment is kept.
        let start = start.next_multiple_of(page);
        let end = end - end % page;
        if end <= start {
            continue;
        }
        // SAFETY: [start, end) is whole pages of a loaded, never-written segment of this binary
        // (see above); MADV_DONTNEED on a private file mapping only drops page table entries,
        // and the next access maps the file's unchanged page again.
        let rc =
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        released.segments += 1;
        released.bytes += end - start;
    }
    released.resident_file_kib_after = resident_file_kib();
    Ok(released)
}

/// Not supported off Linux: unmaps nothing.
#[cfg(not(target_os = "linux"))]
pub fn release() -> io::Result<Released> {
    Ok(Released::default())
}

/// This process's resident pages of files (its binary, shared libraries), in KiB.
#[cfg(target_os = "linux")]
fn resident_file_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("RssFile:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn page_size() -> usize {
    // SAFETY: sysconf only reads a constant of the system.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096)
}

/// An ELF program header of this target.
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
type Phdr = libc::Elf64_Phdr;
/// An ELF program header of this target.
#[cfg(all(target_os = "linux", target_pointer_width = "32"))]
type Phdr = libc::Elf32_Phdr;

/// The address ranges of the non-writable `PT_LOAD` segments of the loaded object (executable
/// or shared library) this function is in.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn read_only_segments() -> Vec<(usize, usize)> {
    struct Search {
        probe: usize,
        found: Vec<(usize, usize)>,
    }

    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: the loader passes a valid `info` for the duration of the call, whose
        // `dlpi_phdr` points to `dlpi_phnum` program headers; `data` is the `Search` below,
        // borrowed by nothing else during `dl_iterate_phdr`.
        let (info, search) = unsafe { (&*info, &mut *data.cast::<Search>()) };
        // SAFETY: as above.
        let headers =
            unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
        let base = info.dlpi_addr as usize;
        let span = |h: &Phdr| {
            let start = base + h.p_vaddr as usize;
            (start, start + h.p_memsz as usize)
        };
        let loads = headers.iter().filter(|h| h.p_type == libc::PT_LOAD);
        let contains = loads.clone().any(|h| {
            let (start, end) = span(h);
            (start..end).contains(&search.probe)
        });
        if !contains {
            return 0;
        }
        search.found = loads
            .filter(|h| h.p_flags & libc::PF_W == 0)
            .map(span)
            .collect();
        1
    }

    let mut search = Search {
        probe: read_only_segments as *const () as usize,
        found: Vec::new(),
    };
    // SAFETY: `visit` only reads what the loader passes and writes `search`, which outlives the
    // call.
    unsafe {
        libc::dl_iterate_phdr(Some(visit), (&raw mut search).cast());
    }
    search.found
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn unmaps_this_binarys_code_which_still_runs_afterwards() {
        let segments = read_only_segments();
        let here = unmaps_this_binarys_code_which_still_runs_afterwards as *const () as usize;
        assert!(
            segments
                .iter()
                .any(|&(start, end)| (start..end).contains(&here)),
            "{segments:x?} do not contain this function at {here:x}"
        );
        let released = release().unwrap();
        assert!(released.segments >= 1 && released.bytes > 0, "{released:?}");
        let (Some(before), Some(after)) = (
            released.resident_file_kib_before,
            released.resident_file_kib_after,
        ) else {
            panic!("RssFile unreadable: {released:?}");
        };
        assert!(after < before, "{released:?}");
        // The code and read-only data come back on use: this runs, and formatting reads both.
        assert_eq!(format!("{}", 6 * 7), "42");
    }
}
