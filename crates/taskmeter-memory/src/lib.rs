//! Memory that taskmeter fills while a worker measures: lists in mappings of their own that a
//! worker never inherits ([`List`]), and spare lists written before the first worker starts,
//! handed to the rows that fill them ([`Spare`]).
//!
//! taskmeter forks to start each worker, and a fork write-protects every page its parent has
//! written: the parent's next write to each faults, about 2 µs here, while the worker measures
//! (issue 58); a page fresh from the kernel faults too, 3 to 3.5 µs. A list is a private
//! anonymous mapping the child does not inherit (`MADV_DONTFORK`), and never memory the
//! allocator could hand to anything else, which that advice needs: the child, between fork and
//! exec, would find such memory unmapped. A list kept spare keeps its pages, written once.

mod list;
mod spare;

pub use list::List;
pub use spare::{Lent, Spare};

/// The kernel's page, in bytes.
pub const PAGE_BYTES: usize = 4096;

/// The spare tables of one entry per unit (the checker's unit states and `U` frames, a row's
/// per-unit sums): 64 MiB holds those of 100,000 units for four rows at once.
pub static UNIT_TABLES: Spare = Spare::new(64 << 20, PAGE_BYTES);
