//! KEDA trigger metadata, as the scaler's tests and benchmarks write it.

use std::collections::BTreeMap;

/// A trigger's metadata: the `base` keys, then the `extra` ones, each added or replacing the
/// base key of that name.
pub fn metadata(base: &[(&str, &str)], extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut metadata = BTreeMap::new();
    for (key, value) in base.iter().chain(extra) {
        metadata.insert((*key).to_owned(), (*value).to_owned());
    }
    metadata
}

#[cfg(test)]
mod tests {
    use super::metadata;

    #[test]
    fn extra_keys_add_to_or_replace_the_base() {
        let map = metadata(&[("a", "1"), ("b", "2")], &[("b", "3"), ("c", "4")]);
        let pairs: Vec<_> = map.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(pairs, [("a", "1"), ("b", "3"), ("c", "4")]);
    }
}
