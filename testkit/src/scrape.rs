//! A Prometheus text exposition, parsed: what the metrics tests read a recorder's render with.

use std::collections::BTreeMap;

/// A scrape, parsed: `name{labels}` (labels as rendered) to value, and name to type.
#[derive(Clone, Debug, Default)]
pub struct Scrape {
    /// Each sample's value by its series, `name{labels}` as rendered; `NaN` read as NaN.
    pub values: BTreeMap<String, f64>,
    /// Each metric's type (`counter`, `gauge`, …) by its name, from the `# TYPE` lines.
    pub types: BTreeMap<String, String>,
}

impl Scrape {
    /// Parses `text`, a text exposition such as `PrometheusHandle::render` returns.
    ///
    /// # Panics
    ///
    /// On a `# TYPE` line without a type, or a sample line without a number.
    pub fn parse(text: &str) -> Scrape {
        let mut scrape = Scrape::default();
        for line in text.lines() {
            if let Some(declaration) = line.strip_prefix("# TYPE ") {
                let (name, kind) = declaration.split_once(' ').expect("a TYPE line");
                scrape.types.insert(name.to_owned(), kind.to_owned());
            } else if !line.starts_with('#') && !line.is_empty() {
                let (series, value) = line.rsplit_once(' ').expect("a sample line");
                let value = match value {
                    "NaN" => f64::NAN,
                    value => value.parse().expect("a number"),
                };
                scrape.values.insert(series.to_owned(), value);
            }
        }
        scrape
    }

    /// The value of `series`, if the scrape has it.
    pub fn get(&self, series: &str) -> Option<f64> {
        self.values.get(series).copied()
    }

    /// The value of `series`.
    ///
    /// # Panics
    ///
    /// If the scrape does not have it, listing the series it has.
    pub fn value(&self, series: &str) -> f64 {
        self.get(series)
            .unwrap_or_else(|| panic!("no series {series} in {:#?}", self.values))
    }
}

#[cfg(test)]
mod tests {
    use super::Scrape;

    #[test]
    fn samples_and_types_are_read_and_nan_is_a_value() {
        let scrape = Scrape::parse(
            "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1 2\"} 3\n\nb NaN\n",
        );
        assert_eq!(scrape.value("a_total{x=\"1 2\"}"), 3.0);
        assert!(scrape.value("b").is_nan());
        assert_eq!(scrape.get("c"), None);
        assert_eq!(scrape.types["a_total"], "counter");
    }
}
