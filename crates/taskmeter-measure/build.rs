//! Compiles every program folder (`drivers/*` and `receivers/*` with a `driver.toml`) into
//! taskmeter, so an installed binary needs only the toolchains: `programs.rs` lists each
//! folder's manifest and files (README files excepted).

use std::fmt::Write;
use std::path::Path;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut table = String::from("pub static COMPILED_IN: &[CompiledIn] = &[\n");
    for parent in ["drivers", "receivers"] {
        println!("cargo:rerun-if-changed={}", root.join(parent).display());
        let mut folders: Vec<_> =
            std::fs::read_dir(root.join(parent)).expect("the program folders").flatten().map(|e| e.path()).collect();
        folders.sort();
        for folder in folders.into_iter().filter(|f| f.join("driver.toml").is_file()) {
            let mut files: Vec<_> =
                std::fs::read_dir(&folder).expect("a program folder").flatten().map(|e| e.path()).collect();
            files.sort();
            let name = folder.file_name().unwrap().to_string_lossy().into_owned();
            write!(table, "    CompiledIn {{ root: {parent:?}, folder: {name:?}, files: &[").unwrap();
            for file in files.iter().filter(|f| f.is_file() && f.extension().is_none_or(|e| e != "md")) {
                let file_name = file.file_name().unwrap().to_string_lossy().into_owned();
                let path = file.canonicalize().unwrap();
                write!(table, "({file_name:?}, include_str!({:?})), ", path.display().to_string()).unwrap();
            }
            table.push_str("] },\n");
        }
    }
    table.push_str("];\n");
    let out = Path::new(&std::env::var("OUT_DIR").unwrap()).join("programs.rs");
    std::fs::write(out, table).unwrap();
}
