//! The class a request's header lines claim: the one rule the reader and the propagation layer
//! share.

use http::{HeaderMap, HeaderName, HeaderValue};

use super::Criticality;

/// What a request's class header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Claim {
    /// No line of the header.
    Absent,
    /// Lines whose last element names no class, or that hold no element at all.
    Invalid,
    /// The class the last element names.
    Class(Criticality),
}

/// The class `headers` claim in `name`: every line, in order, read as one comma-separated
/// list (a proxy may fold lines into one), whose last non-empty element counts. An edge proxy
/// that appends a line therefore decides whatever the client sent before it. Allocates
/// nothing.
pub(crate) fn claim(headers: &HeaderMap, name: &HeaderName) -> Claim {
    claim_lines(headers.get_all(name).into_iter())
}

/// [`claim`] over one header's lines, in order.
pub(crate) fn claim_lines<'a>(
    mut lines: impl DoubleEndedIterator<Item = &'a HeaderValue>,
) -> Claim {
    let Some(last) = lines.next_back() else {
        return Claim::Absent;
    };
    // The usual line is one class name, which holds no comma: read it whole first.
    if let Some(class) = Criticality::parse(last.as_bytes()) {
        return Claim::Class(class);
    }
    let element = match last_element(last.as_bytes()) {
        Some(element) => Some(element),
        None => lines.rev().find_map(|line| last_element(line.as_bytes())),
    };
    match element.and_then(Criticality::parse) {
        Some(class) => Claim::Class(class),
        None => Claim::Invalid,
    }
}

/// The last non-empty element of a comma-separated line, trimmed.
#[inline]
fn last_element(line: &[u8]) -> Option<&[u8]> {
    let mut rest = line;
    loop {
        let (before, element) = match rest.iter().rposition(|&byte| byte == b',') {
            Some(comma) => (Some(&rest[..comma]), &rest[comma + 1..]),
            None => (None, rest),
        };
        let element = element.trim_ascii();
        if !element.is_empty() {
            return Some(element);
        }
        rest = before?;
    }
}

#[cfg(all(test, not(admit_loom)))]
mod tests {
    use http::{HeaderMap, HeaderName, HeaderValue};

    use super::{Claim, claim};
    use crate::criticality::Criticality;

    fn claimed(lines: &[&'static str]) -> Claim {
        let name = HeaderName::from_static("admit-criticality");
        let mut headers = HeaderMap::new();
        headers.append("other", HeaderValue::from_static("critical_plus"));
        for line in lines {
            headers.append(&name, HeaderValue::from_static(line));
        }
        claim(&headers, &name)
    }

    #[test]
    fn the_last_element_of_the_last_line_counts() {
        use Criticality::{Critical, CriticalPlus, Sheddable, SheddablePlus};
        assert_eq!(claimed(&[]), Claim::Absent);
        assert_eq!(claimed(&["sheddable"]), Claim::Class(Sheddable));
        // The edge's appended line wins over the client's.
        assert_eq!(
            claimed(&["critical_plus", "sheddable"]),
            Claim::Class(Sheddable)
        );
        assert_eq!(
            claimed(&["sheddable", "CRITICAL_PLUS"]),
            Claim::Class(CriticalPlus)
        );
        // Folded lines are one list; empty elements are skipped, across lines too.
        assert_eq!(
            claimed(&["critical_plus , sheddable_plus"]),
            Claim::Class(SheddablePlus)
        );
        assert_eq!(claimed(&["sheddable", " , "]), Claim::Class(Sheddable));
        assert_eq!(claimed(&["critical,"]), Claim::Class(Critical));
        // Only the last element is read: what precedes it may be anything.
        assert_eq!(claimed(&["urgent", "critical"]), Claim::Class(Critical));
        assert_eq!(claimed(&["critical", "urgent"]), Claim::Invalid);
        assert_eq!(claimed(&["critical, urgent"]), Claim::Invalid);
        assert_eq!(claimed(&[""]), Claim::Invalid);
        assert_eq!(claimed(&[",", " "]), Claim::Invalid);
    }
}
