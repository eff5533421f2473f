//! Foreign text in messages and logs: a bounded excerpt with invisible characters escaped.
//!
//! Text the scaler did not write (a trigger's metadata, a Prometheus error or warning, a label
//! set, a response body, a manifest's names) reaches error messages, gRPC statuses and log
//! lines only through [`excerpt`] or [`excerpt_bytes`]: at most [`EXCERPT_CHARS`] characters,
//! each control character escaped (`\n`, `\u{1b}`), and so is every other character that
//! does not print as itself: format characters (the bidirectional overrides and isolates
//! U+202A–U+202E and U+2066–U+2069, zero-width U+200B–U+200F, U+FEFF, ...), the line and
//! paragraph separators U+2028 and U+2029, spaces other than U+0020, private-use and
//! unassigned code points. A hostile value can neither flood a log, forge a log line or a
//! terminal escape, nor show reordered or hidden text.

use std::fmt::Write;

/// The most characters of foreign text a message quotes.
pub const EXCERPT_CHARS: usize = 160;

/// Code points that show nothing, or a blank, though Rust deems them printable: Unicode's
/// default-ignorable code points (fillers, joiners, variation selectors, tags) and the
/// braille blank.
const BLANK: [std::ops::RangeInclusive<char>; 14] = [
    '\u{034f}'..='\u{034f}',
    '\u{115f}'..='\u{1160}',
    '\u{17b4}'..='\u{17b5}',
    '\u{180b}'..='\u{180f}',
    '\u{2060}'..='\u{206f}',
    '\u{2800}'..='\u{2800}',
    '\u{3164}'..='\u{3164}',
    '\u{fe00}'..='\u{fe0f}',
    '\u{ffa0}'..='\u{ffa0}',
    '\u{fff0}'..='\u{fff8}',
    '\u{1bca0}'..='\u{1bca3}',
    '\u{1d173}'..='\u{1d17a}',
    '\u{e0000}'..='\u{e0fff}',
    '\u{200b}'..='\u{200f}',
];

/// `text` for a message: its first [`EXCERPT_CHARS`] characters, invisible characters escaped
/// as Rust writes them, and `…(N more bytes)` when it was longer.
///
/// ```
/// use admit_scaler::excerpt::{EXCERPT_CHARS, excerpt};
///
/// assert_eq!(excerpt("sum(rate(x[1m]))"), "sum(rate(x[1m]))");
/// assert_eq!(excerpt("a\nb\u{1b}[31m"), r"a\nb\u{1b}[31m");
/// // A right-to-left override would show `checkout` reversed: it is escaped instead.
/// assert_eq!(excerpt("\u{202e}tuokcehc"), r"\u{202e}tuokcehc");
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
            if blank(c) {
                let _ = write!(out, "{}", c.escape_unicode());
            } else if hidden(c) {
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

/// Whether `c` is in [`BLANK`]: Rust prints it as itself, so it is escaped as `\u{…}`.
fn blank(c: char) -> bool {
    BLANK.iter().any(|range| range.contains(&c))
}

/// Whether `c` does not print as itself: a control character, a default-ignorable or blank
/// code point ([`BLANK`]), or one that Rust's `Debug` escapes as not printable (format
/// characters, separators other than U+0020, private-use and unassigned code points). Quotes
/// and backslashes print; so do combining marks, which Rust escapes only at the start of a
/// string.
fn hidden(c: char) -> bool {
    if c.is_control() || blank(c) {
        return true;
    }
    if matches!(c, '"' | '\'' | '\\') {
        return false;
    }
    // After a letter, `str::escape_debug` escapes exactly what is not printable.
    let mut probe = [0; 8];
    probe[0] = b'a';
    let len = 1 + c.encode_utf8(&mut probe[1..]).len();
    std::str::from_utf8(&probe[..len]).map_or(true, |probe| probe.escape_debug().nth(1) != Some(c))
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
    fn characters_that_hide_or_reorder_text_are_escaped() {
        for (c, escaped) in [
            ('\u{202a}', r"\u{202a}"),
            ('\u{202e}', r"\u{202e}"),
            ('\u{2066}', r"\u{2066}"),
            ('\u{2069}', r"\u{2069}"),
            ('\u{2028}', r"\u{2028}"),
            ('\u{2029}', r"\u{2029}"),
            ('\u{200b}', r"\u{200b}"),
            ('\u{200f}', r"\u{200f}"),
            ('\u{feff}', r"\u{feff}"),
            ('\u{ad}', r"\u{ad}"),
            ('\u{61c}', r"\u{61c}"),
            ('\u{a0}', r"\u{a0}"),
            ('\u{e0041}', r"\u{e0041}"),
            ('\u{e000}', r"\u{e000}"),
            ('\u{3164}', r"\u{3164}"),
            ('\u{115f}', r"\u{115f}"),
            ('\u{2800}', r"\u{2800}"),
            ('\u{34f}', r"\u{34f}"),
            ('\u{fe0f}', r"\u{fe0f}"),
        ] {
            assert_eq!(excerpt(&format!("a{c}b")), format!("a{escaped}b"), "{c:?}");
        }
        // What prints as itself stays: quotes, backslashes, accents, combining marks, CJK.
        for kept in [
            "\"q\" 'q' \\",
            "café",
            "cafe\u{301}",
            "\u{301}x",
            "日本",
            "λ ✓",
        ] {
            assert_eq!(excerpt(kept), kept);
        }
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
            prop_assert!(!quoted.chars().any(hidden), "{quoted:?}");
        }

        #[test]
        fn any_text_keeps_its_printable_prefix(
            text in "[^\\p{C}\\p{Z}]{0,300}".prop_filter("no blank", |text| !text.chars().any(blank)),
        ) {
            let quoted = excerpt(&text);
            let kept: String = text.chars().take(EXCERPT_CHARS).collect();
            prop_assert!(quoted.starts_with(&kept));
        }
    }
}
