//! The `calametra` command-line tool (in progress).
fn main() {}
