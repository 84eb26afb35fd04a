//! Sizes as a reader reads them.

/// A size in bytes: `512 B`, `12.0 KiB`, `3.5 MiB`, `4.0 GiB`.
pub fn format_bytes(bytes: f64) -> String {
    const KIB: f64 = 1024.0;
    let a = bytes.abs();
    if a >= KIB * KIB * KIB {
        format!("{:.1} GiB", bytes / KIB / KIB / KIB)
    } else if a >= KIB * KIB {
        format!("{:.1} MiB", bytes / KIB / KIB)
    } else if a >= KIB {
        format!("{:.1} KiB", bytes / KIB)
    } else {
        format!("{bytes:.0} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_size_takes_the_largest_binary_unit_it_reaches() {
        assert_eq!(format_bytes(1.0), "1 B");
        assert_eq!(format_bytes(1023.0), "1023 B");
        assert_eq!(format_bytes(1024.0), "1.0 KiB");
        assert_eq!(format_bytes(12.0 * 1024.0 * 1024.0), "12.0 MiB");
        assert_eq!(format_bytes(6.0 * 1024.0 * 1024.0 * 1024.0), "6.0 GiB");
    }
}
