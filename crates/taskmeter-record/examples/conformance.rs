//! The client contract of clients/README.md, for the Rust client.
use taskmeter_record::{complete, flush, record, record_n, start};

fn main() {
    record();
    record();
    record();
    record_n(5);
    start(1);
    start(2);
    complete(2);
    complete(1);
    complete(99);
    complete(1);
    start(3);
    flush();
}
