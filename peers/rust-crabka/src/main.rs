//! Never measures: crabka-client-consumer 0.3 does not resolve on crates.io (see Cargo.toml).
fn main() {
    eprintln!("crabka bench: crabka-client-consumer 0.3 resolved again: write its bench program (peers/rust-krabka is the model)");
    std::process::exit(1);
}
