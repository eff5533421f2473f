//! Kubernetes' names, as the API server validates them: what a `scaledObjectRef` may carry.

/// What a namespace must be.
const LABEL: &str = "a Kubernetes namespace: 1 to 63 characters of [a-z0-9-], starting and \
                     ending with a letter or digit";
/// What a ScaledObject's name must be.
const SUBDOMAIN: &str = "a Kubernetes object name: 1 to 253 characters of [a-z0-9-.], in \
                         dot-separated parts that start and end with a letter or digit";

/// The longest RFC 1123 label.
pub(super) const LABEL_MAX: usize = 63;
/// The longest RFC 1123 subdomain.
pub(super) const SUBDOMAIN_MAX: usize = 253;

/// A namespace: an RFC 1123 label.
///
/// # Errors
///
/// What it must be, for a message.
pub(super) fn namespace(raw: &str) -> Result<(), &'static str> {
    if is_label(raw) { Ok(()) } else { Err(LABEL) }
}

/// An object name: an RFC 1123 subdomain.
///
/// # Errors
///
/// What it must be, for a message.
pub(super) fn object_name(raw: &str) -> Result<(), &'static str> {
    if raw.len() <= SUBDOMAIN_MAX && raw.split('.').all(is_label) {
        Ok(())
    } else {
        Err(SUBDOMAIN)
    }
}

fn is_label(part: &str) -> bool {
    let alphanumeric = |byte: &u8| byte.is_ascii_lowercase() || byte.is_ascii_digit();
    let bytes = part.as_bytes();
    (1..=LABEL_MAX).contains(&bytes.len())
        && bytes.iter().all(|byte| alphanumeric(byte) || *byte == b'-')
        && bytes.first().is_some_and(alphanumeric)
        && bytes.last().is_some_and(alphanumeric)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn namespaces() {
        for good in ["shop", "a", "kube-system", "0", "a1-b2", &"n".repeat(63)] {
            assert_eq!(namespace(good), Ok(()), "{good:?}");
        }
        for bad in [
            "",
            "Shop",
            "-shop",
            "shop-",
            "sh.op",
            "sh_op",
            "shop\n",
            "shöp",
            &"n".repeat(64),
        ] {
            assert!(namespace(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn object_names() {
        let longest = format!(
            "{}.{}.{}.{}",
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(61)
        );
        assert_eq!(longest.len(), 253);
        for good in ["checkout", "checkout.v2", "a-b.c-d", "1", &longest] {
            assert_eq!(object_name(good), Ok(()), "{good:?}");
        }
        for bad in [
            "",
            ".checkout",
            "checkout.",
            "check..out",
            "Checkout",
            "check out",
            "check/out",
            &format!("{longest}e"),
            &"a".repeat(64),
            &"x".repeat(3 << 20),
        ] {
            assert!(object_name(bad).is_err(), "{:?}", &bad[..bad.len().min(80)]);
        }
    }

    proptest! {
        #[test]
        fn a_valid_name_is_short_and_plain(raw in "\\PC{0,300}") {
            if object_name(&raw).is_ok() {
                prop_assert!(raw.len() <= SUBDOMAIN_MAX);
                prop_assert!(raw.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.'));
            }
            if namespace(&raw).is_ok() {
                prop_assert!(raw.len() <= LABEL_MAX && object_name(&raw).is_ok());
            }
        }
    }
}
