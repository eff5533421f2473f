//! Benchmarks for `admit`; run them with `cargo bench -p admit-benches`.
