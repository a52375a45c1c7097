//! Helpers shared by the share codec tests.

use bytes::Bytes;

/// Parses an annotated hex dump: on each line, everything from `//` on is a comment; the rest
/// is hex digits, whitespace ignored. Lets the expected bytes sit next to the field they encode.
pub(crate) fn hex(annotated: &str) -> Bytes {
    let digits: String = annotated
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .flat_map(|code| code.chars().filter(|c| !c.is_whitespace()))
        .collect();
    assert!(digits.len().is_multiple_of(2), "odd number of hex digits");
    let bytes = (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).expect("hex digit"))
        .collect::<Vec<u8>>();
    Bytes::from(bytes)
}
