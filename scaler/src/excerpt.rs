//! Foreign text in messages and logs: a bounded excerpt with control characters escaped.
//!
//! Text the scaler did not write (a trigger's metadata, a Prometheus error or warning, a label
//! set, a response body) reaches error messages, gRPC statuses and log lines only through
//! [`excerpt`] or [`excerpt_bytes`]: at most [`EXCERPT_CHARS`] characters, each control
//! character escaped (`\n`, `\u{1b}`), so a hostile value can neither flood a log nor forge a
//! log line or a terminal escape.

use std::fmt::Write;

/// The most characters of foreign text a message quotes.
pub const EXCERPT_CHARS: usize = 160;

/// `text` for a message: its first [`EXCERPT_CHARS`] characters, control characters escaped
/// as Rust writes them, and `…(N more bytes)` when it was longer.
///
/// ```
/// use admit_scaler::excerpt::{EXCERPT_CHARS, excerpt};
///
/// assert_eq!(excerpt("sum(rate(x[1m]))"), "sum(rate(x[1m]))");
/// assert_eq!(excerpt("a\nb\u{1b}[31m"), r"a\nb\u{1b}[31m");
/// let long = "é".repeat(EXCERPT_CHARS + 10);
/// assert_eq!(excerpt(&long), format!("{}…(20 more bytes)", "é".repeat(EXCERPT_CHARS)));
/// ```
pub fn excerpt(text: &str) -> String {
    excerpt_bytes(text.as_bytes())
}

/// [`excerpt`] of bytes that may not be UTF-8 (a response body): each invalid sequence shows
/// as `U+FFFD`. Reads only the bytes it shows.
pub fn excerpt_bytes(bytes: &[u8]) -> String {
    let mut out = String::new();
    let mut shown = 0;
    let mut at = 0;
    for chunk in bytes.utf8_chunks() {
        let invalid = (!chunk.invalid().is_empty())
            .then_some((char::REPLACEMENT_CHARACTER, chunk.invalid().len()));
        let chars = chunk
            .valid()
            .chars()
            .map(|c| (c, c.len_utf8()))
            .chain(invalid);
        for (c, len) in chars {
            if shown == EXCERPT_CHARS {
                let _ = write!(out, "…({} more bytes)", bytes.len() - at);
                return out;
            }
            if c.is_control() {
                let _ = write!(out, "{}", c.escape_debug());
            } else {
                out.push(c);
            }
            shown += 1;
            at += len;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn short_text_is_kept() {
        assert_eq!(excerpt(""), "");
        assert_eq!(excerpt("ok"), "ok");
        assert_eq!(excerpt_bytes(b"ok"), "ok");
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(excerpt("a\r\nb\t\0"), r"a\r\nb\t\0");
        assert_eq!(excerpt("\u{7f}\u{85}"), r"\u{7f}\u{85}");
    }

    #[test]
    fn long_text_is_cut_and_counted() {
        let text = "x".repeat(EXCERPT_CHARS + 5);
        assert_eq!(
            excerpt(&text),
            format!("{}…(5 more bytes)", "x".repeat(EXCERPT_CHARS))
        );
        let body = vec![b'y'; 1 << 20];
        let quoted = excerpt_bytes(&body);
        assert!(quoted.starts_with(&"y".repeat(EXCERPT_CHARS)), "{quoted}");
        assert!(
            quoted.ends_with(&format!("…({} more bytes)", (1 << 20) - EXCERPT_CHARS)),
            "{quoted}"
        );
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        assert_eq!(excerpt_bytes(b"a\xffb"), "a\u{fffd}b");
    }

    proptest! {
        #[test]
        fn any_bytes_give_a_bounded_line(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let quoted = excerpt_bytes(&bytes);
            // Each character escapes to at most 10 bytes (`\u{10ffff}`), plus the count.
            prop_assert!(quoted.len() <= EXCERPT_CHARS * 10 + 40, "{}", quoted.len());
            prop_assert!(!quoted.chars().any(char::is_control), "{quoted:?}");
        }

        #[test]
        fn any_text_keeps_its_printable_prefix(text in "\\PC{0,300}") {
            let quoted = excerpt(&text);
            let kept: String = text.chars().take(EXCERPT_CHARS).collect();
            prop_assert!(quoted.starts_with(&kept));
        }
    }
}
