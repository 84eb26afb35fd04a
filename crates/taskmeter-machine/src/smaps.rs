//! The calling process's own mappings as `/proc/self/smaps` describes them (proc(5)).

/// The `VmFlags` of the mapping that starts at `address` (two letters each: `sr` read in order,
/// `dc` not inherited by a child...); None if no mapping starts there.
pub fn flags_of_mapping_at(address: usize) -> Option<Vec<String>> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let start = format!("{address:x}-");
    let flags = smaps
        .split_inclusive('\n')
        .skip_while(|line| !line.starts_with(&start))
        .find_map(|line| line.strip_prefix("VmFlags:"))?;
    Some(flags.split_whitespace().map(str::to_string).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mapping made here is found at its address, with its flags; none starts at address 0.
    #[test]
    fn a_mapping_is_found_with_its_flags() {
        // SAFETY: a new private anonymous mapping of a page, unmapped below.
        let map = unsafe {
            libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        };
        assert_ne!(map, libc::MAP_FAILED);
        let flags = flags_of_mapping_at(map as usize).expect("in smaps");
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(map, 4096) };
        assert!(flags.iter().any(|f| f == "rd") && !flags.iter().any(|f| f == "wr"), "{flags:?}");
        assert_eq!(flags_of_mapping_at(0), None);
    }
}
