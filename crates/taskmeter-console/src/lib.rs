//! What taskmeter says to a reader, in one place below every other crate: its own stdout and
//! stderr, which never panic on a broken stream ([`streams`], and the macros `outln!`, `textln!`,
//! `errln!`, `progressln!`), text fitted to the terminal's width ([`terminal`]), the one error
//! for a name that is not known, with the nearest few ([`names`]), and sizes in bytes ([`sizes`]). The measuring crates use it for
//! their few warnings; everything else that presents (reports, charts, the CLI) is the crate
//! `taskmeter`.

pub mod names;
pub mod sizes;
pub mod streams;
pub mod terminal;
