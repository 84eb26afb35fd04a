//! `taskmeter list`: every runtime, whether it can run here, and why not.

use crate::runtimes;

pub fn print() {
    let width = runtimes::all().iter().map(|r| r.id.len()).max().unwrap_or(0);
    for info in runtimes::all() {
        let status = match runtimes::availability(info) {
            Ok(()) => "available".to_string(),
            Err(reason) => format!("unavailable: {reason}"),
        };
        crate::outln!("{:<width$}  {status}\n{:<width$}  {}", info.id, "", info.description);
        crate::outln!("{:<width$}  priority classes: {}", "", info.priority);
    }
    crate::outln!("\nreceivers of `taskmeter run net`:");
    for (id, description) in crate::experiments::net::registry::RECEIVERS {
        let status = match crate::experiments::net::registry::availability(id) {
            Ok(()) => "available".to_string(),
            Err(reason) => format!("unavailable: {reason}"),
        };
        crate::outln!("{id:<width$}  {status}\n{:<width$}  {description}", "");
    }
}
