//! Placeholder until the differential test lands (issue 3).
fn main() {}
