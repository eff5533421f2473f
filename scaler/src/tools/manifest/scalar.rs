//! What a scalar resolves to, as Kubernetes reads YAML (YAML 1.1, go-yaml v2).

use yaml_rust2::parser::Tag;
use yaml_rust2::scanner::TScalarStyle;

/// The handle `!!` stands for.
const CORE_TAG: &str = "tag:yaml.org,2002:";

/// What a scalar resolves to, as Kubernetes reads YAML (YAML 1.1, go-yaml v2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    String,
    Number,
    Boolean,
    Null,
}

/// A scalar's kind, and whether an explicit core tag gave it.
pub(super) fn resolve(text: &str, style: TScalarStyle, tag: Option<&Tag>) -> (Kind, bool) {
    if let Some(tag) = tag {
        let kind = match (tag.handle.as_str(), tag.suffix.as_str()) {
            (CORE_TAG, "int" | "float") => Kind::Number,
            (CORE_TAG, "bool") => Kind::Boolean,
            (CORE_TAG, "null") => Kind::Null,
            // `!!str`, `!!binary`, local tags.
            _ => return (Kind::String, false),
        };
        return (kind, true);
    }
    if style != TScalarStyle::Plain {
        return (Kind::String, false);
    }
    (resolve_plain(text), false)
}

/// How go-yaml v2 (`sigs.k8s.io/yaml`, what `kubectl` uses) resolves an untagged plain scalar.
pub(super) fn resolve_plain(text: &str) -> Kind {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Kind::Null,
        "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "true" | "True" | "TRUE" | "n"
        | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" | "false" | "False" | "FALSE" => {
            return Kind::Boolean;
        }
        ".nan" | ".NaN" | ".NAN" | ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF"
        | "-.inf" | "-.Inf" | "-.INF" => return Kind::Number,
        _ => {}
    }
    let number = match text.as_bytes().first() {
        Some(b'.') => finite_float(text),
        Some(b'0'..=b'9' | b'+' | b'-') => {
            let digits: String = text.chars().filter(|&c| c != '_').collect();
            go_integer(&digits) || (yaml_float_syntax(&digits) && finite_float(&digits))
        }
        _ => false,
    };
    if number { Kind::Number } else { Kind::String }
}

/// Go's `strconv.ParseFloat` succeeds: a finite decimal (callers exclude Rust's `inf`, `nan`).
pub(super) fn finite_float(text: &str) -> bool {
    text.parse::<f64>().is_ok_and(f64::is_finite)
}

/// Go's `strconv.ParseInt(text, 0, 64)` or `ParseUint(text, 0, 64)` succeeds: an optional
/// sign (`ParseInt` only), then `0x`, `0o`, `0b`, `0` (octal) or decimal digits, in range.
pub(super) fn go_integer(text: &str) -> bool {
    let (sign, rest) = match text.as_bytes().first() {
        Some(b'-') => (Some(true), &text[1..]),
        Some(b'+') => (Some(false), &text[1..]),
        _ => (None, text),
    };
    let prefixed = |lower: &str, upper: &str| {
        rest.strip_prefix(lower)
            .or_else(|| rest.strip_prefix(upper))
    };
    let (radix, digits) = if let Some(digits) = prefixed("0x", "0X") {
        (16, digits)
    } else if let Some(digits) = prefixed("0o", "0O") {
        (8, digits)
    } else if let Some(digits) = prefixed("0b", "0B") {
        (2, digits)
    } else if rest.len() > 1
        && let Some(digits) = rest.strip_prefix('0')
    {
        (8, digits)
    } else {
        (10, rest)
    };
    // `from_str_radix` would take a second sign.
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return false;
    }
    let Ok(magnitude) = u64::from_str_radix(digits, radix) else {
        return false;
    };
    match sign {
        None => true,
        Some(false) => magnitude <= i64::MAX as u64,
        Some(true) => magnitude <= i64::MIN.unsigned_abs(),
    }
}

/// go-yaml v2's float syntax: `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
pub(super) fn yaml_float_syntax(text: &str) -> bool {
    let bytes = text.as_bytes();
    let digits = |from: usize| {
        bytes.get(from..).map_or(0, |rest| {
            rest.iter().take_while(|b| b.is_ascii_digit()).count()
        })
    };
    let mut i = usize::from(matches!(bytes.first(), Some(b'+' | b'-')));
    if bytes.get(i) == Some(&b'.') {
        let fraction = digits(i + 1);
        if fraction == 0 {
            return false;
        }
        i += 1 + fraction;
    } else {
        let whole = digits(i);
        if whole == 0 {
            return false;
        }
        i += whole;
        if bytes.get(i) == Some(&b'.') {
            i += 1;
            i += digits(i);
        }
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(bytes.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exponent = digits(i);
        if exponent == 0 {
            return false;
        }
        i += exponent;
    }
    i == bytes.len()
}
