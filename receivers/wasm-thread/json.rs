//! A JSON string literal, for the report lines of the guest and its host (neither links a JSON
//! library: the guest stays small, the host's build stays wasmtime's alone).

pub fn quoted(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' | '\\' => out.extend(['\\', c]),
            c if c < ' ' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out + "\""
}
