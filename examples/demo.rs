//! Placeholder demo; replaced below.
fn main() {}
