//! The external triggers of KEDA `ScaledObject` and `ScaledJob` manifests, read without I/O.
//!
//! [`triggers`] reads a YAML stream as `kubectl apply -f` does (documents separated by `---`)
//! and returns every trigger of type `external` or `external-push`, with its `metadata` map as
//! KEDA would send it to the scaler.
//!
//! - Documents of other kinds (a `Deployment` next to its `ScaledObject`) and empty documents
//!   are skipped; the `items` of a `kind: List` (`kubectl get -o yaml`) are read.
//! - Every metadata value must be a string, as Kubernetes requires: an unquoted `0.95`, `true`,
//!   `yes`, `1e3` or `~` is not one (YAML 1.1 resolution, as `kubectl`), and is refused with a
//!   hint to quote it. Quoted text is kept exactly (`"0.950"` stays `0.950`).
//! - A `<key>FromEnv` value names an environment variable of the scale target; it is resolved
//!   from the `env` map given, and the key is dropped when the variable is unset or empty, as
//!   KEDA does.
//! - Anchors, aliases and merge keys (`<<: *defaults`) work; duplicate keys, non-scalar keys and
//!   nesting deeper than 256 levels are errors, and so is a stream that lists more than
//!   [`MAX_TRIGGERS`] triggers or [`MAX_METADATA_BYTES`] of their metadata, counting each time an
//!   alias repeats them.
//!
//! # Example
//!
//! ```
//! use std::collections::BTreeMap;
//! use admit_scaler::metadata::ScalerConfig;
//! use admit_scaler::tools::manifest;
//!
//! let yaml = r#"
//! apiVersion: keda.sh/v1alpha1
//! kind: ScaledObject
//! metadata:
//!   name: checkout
//! spec:
//!   scaleTargetRef:
//!     name: checkout
//!   triggers:
//!     - type: external
//!       metadata:
//!         scalerAddress: admit-scaler.keda:9090
//!         prometheusURLFromEnv: PROMETHEUS_URL
//!         arrivalRateQuery: sum(rate(http_requests_total[1m]))
//!         serviceTimeQuery: avg(rate(duration_sum[1m]) / rate(duration_count[1m]))
//!         waitThresholdSeconds: "0.05"
//!         targetSL: "0.95"
//! "#;
//! let env = BTreeMap::from([("PROMETHEUS_URL".to_owned(), "http://prometheus:9090".to_owned())]);
//!
//! let found = manifest::triggers(yaml, &env)?;
//! assert_eq!(found.len(), 1);
//! let trigger = &found[0];
//! assert_eq!((trigger.name.as_str(), trigger.index), ("checkout", 0));
//! assert_eq!(trigger.metadata["prometheusURLFromEnv"], "http://prometheus:9090");
//! assert_eq!(trigger.metadata["targetSL"], "0.95");
//!
//! let config = ScalerConfig::from_metadata(&trigger.metadata)?;
//! assert_eq!(config.target_sl, 0.95);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;

use yaml_rust2::parser::{Event, Parser};

mod error;
mod reader;
mod scalar;
mod tree;

pub use self::error::ManifestError;
use self::reader::Reader;
pub use self::reader::{MAX_METADATA_BYTES, MAX_TRIGGERS, Trigger};
use self::tree::Builder;

/// Reads the external triggers of every `ScaledObject` and `ScaledJob` in a YAML stream.
///
/// `env` holds the scale target's environment variables, for `<key>FromEnv` keys.
///
/// # Errors
///
/// The first problem in stream order: invalid YAML, a document that is not a mapping, a missing
/// or mistyped field, or no external trigger at all.
pub fn triggers(yaml: &str, env: &BTreeMap<String, String>) -> Result<Vec<Trigger>, ManifestError> {
    let mut parser = Parser::new_from_str(yaml);
    let mut builder = Builder::default();
    let mut reader = Reader {
        env,
        document: 0,
        triggers: Vec::new(),
        scaled: 0,
        triggers_seen: 0,
        metadata_bytes: 0,
    };
    loop {
        let (event, mark) = parser.next_token().map_err(ManifestError::scan)?;
        match event {
            Event::StreamEnd => break,
            Event::DocumentStart => builder.start_document(),
            Event::DocumentEnd => {
                if let Some(root) = builder.root.take() {
                    reader.document(&root)?;
                }
                reader.document += 1;
            }
            event => builder.event(event, mark)?,
        }
    }
    if reader.triggers.is_empty() {
        return Err(ManifestError::NoExternalTrigger {
            scaled: reader.scaled,
        });
    }
    Ok(reader.triggers)
}

#[cfg(test)]
mod tests;
