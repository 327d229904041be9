//! es-broker
fn main() {}
