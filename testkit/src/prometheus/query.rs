//! The answers of Prometheus' query API: [`Sample`]s, [`QueryError`]s, and how a query is
//! written into a URL.

use std::collections::BTreeMap;
use std::error::Error;
use std::fmt;
use std::io;

use serde_json::Value;

/// Why [`Prometheus::query`](super::Prometheus::query) failed.
#[derive(Debug)]
pub enum QueryError {
    /// The HTTP request failed or timed out, or its response was not HTTP.
    Io(io::Error),
    /// Prometheus answered `"status": "error"`, for instance for a PromQL syntax error.
    Prometheus {
        /// Prometheus' `errorType`, such as `bad_data`.
        error_type: String,
        /// Prometheus' `error` message.
        error: String,
    },
    /// An answer this client does not read: not JSON, a result type other than `vector` or
    /// `scalar`, or a sample without a value (a native histogram).
    Unexpected {
        /// What was wrong with it.
        reason: String,
        /// The response body.
        body: String,
    },
}

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueryError::Io(error) => write!(f, "querying Prometheus: {error}"),
            QueryError::Prometheus { error_type, error } => {
                write!(f, "Prometheus refused the query ({error_type}): {error}")
            }
            QueryError::Unexpected { reason, body } => {
                write!(f, "an unexpected answer from Prometheus: {reason}: {body}")
            }
        }
    }
}

impl Error for QueryError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            QueryError::Io(error) => Some(error),
            QueryError::Prometheus { .. } | QueryError::Unexpected { .. } => None,
        }
    }
}

/// One value of an instant query's answer: a series of a `vector` with its labels
/// (`__name__` included, when the series keeps its name), or a `scalar` with none.
///
/// `NaN` values compare unequal, as floats do.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The series' labels.
    pub labels: BTreeMap<String, String>,
    /// The value; Prometheus' `NaN`, `+Inf` and `-Inf` included.
    pub value: f64,
}

/// Percent-encodes all but the URL's unreserved characters.
pub(super) fn percent_encode(text: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            encoded.push(char::from(byte));
        } else {
            encoded.push('%');
            encoded.push(char::from(HEX[usize::from(byte >> 4)]));
            encoded.push(char::from(HEX[usize::from(byte & 0xf)]));
        }
    }
    encoded
}

/// Reads an answer of `/api/v1/query`.
pub(super) fn parse_answer(status: u16, body: &[u8]) -> Result<Vec<Sample>, QueryError> {
    let unexpected = |reason: String| QueryError::Unexpected {
        reason: format!("HTTP {status}: {reason}"),
        body: String::from_utf8_lossy(body).into_owned(),
    };
    let answer: Value =
        serde_json::from_slice(body).map_err(|error| unexpected(format!("not JSON: {error}")))?;
    match answer["status"].as_str() {
        Some("success") => {}
        Some("error") => {
            return Err(QueryError::Prometheus {
                error_type: answer["errorType"].as_str().unwrap_or_default().to_owned(),
                error: answer["error"].as_str().unwrap_or_default().to_owned(),
            });
        }
        _ => return Err(unexpected("no `status` of success or error".to_owned())),
    }
    let data = &answer["data"];
    match data["resultType"].as_str() {
        Some("vector") => {
            let series = data["result"]
                .as_array()
                .ok_or_else(|| unexpected("a vector without a `result` array".to_owned()))?;
            series
                .iter()
                .map(|series| {
                    let labels = series["metric"].as_object().map(|labels| {
                        labels
                            .iter()
                            .filter_map(|(name, value)| {
                                Some((name.clone(), value.as_str()?.to_owned()))
                            })
                            .collect()
                    });
                    let value = parse_value(&series["value"]);
                    match (labels, value) {
                        (Some(labels), Some(value)) => Ok(Sample { labels, value }),
                        _ => Err(unexpected(format!(
                            "a series without `metric` labels or a float `value`: {series}"
                        ))),
                    }
                })
                .collect()
        }
        Some("scalar") => match parse_value(&data["result"]) {
            Some(value) => Ok(vec![Sample {
                labels: BTreeMap::new(),
                value,
            }]),
            None => Err(unexpected("a scalar without a value".to_owned())),
        },
        Some(other) => Err(unexpected(format!(
            "the result type `{other}`; only `vector` and `scalar` are read"
        ))),
        None => Err(unexpected("no `data.resultType`".to_owned())),
    }
}

/// The value of a `[<unix time>, "<value>"]` pair.
fn parse_value(pair: &Value) -> Option<f64> {
    match pair.as_array()?.as_slice() {
        [_, value] => parse_float(value.as_str()?),
        _ => None,
    }
}

/// A float as Prometheus writes it: Go's formatting, or `NaN`, `+Inf`, `-Inf`.
fn parse_float(text: &str) -> Option<f64> {
    match text {
        "NaN" => Some(f64::NAN),
        "+Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ => text.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|&(name, value)| (name.to_owned(), value.to_owned()))
            .collect()
    }

    #[test]
    fn percent_encoding_keeps_only_unreserved_characters() {
        assert_eq!(
            percent_encode("up{job=\"admit\"} + 1/2 ~x_y.z-é"),
            "up%7Bjob%3D%22admit%22%7D%20%2B%201%2F2%20~x_y.z-%C3%A9"
        );
    }

    #[test]
    fn a_vector_answer() {
        let body = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"__name__":"up","job":"admit"},"value":[1795452282.726,"1"]},
            {"metric":{},"value":[1795452282.726,"NaN"]},
            {"metric":{"a":"b"},"value":[1795452282.726,"-Inf"]}]}}"#;
        let samples = parse_answer(200, body).expect("samples");
        assert_eq!(samples.len(), 3);
        assert_eq!(
            samples[0],
            Sample {
                labels: labels(&[("__name__", "up"), ("job", "admit")]),
                value: 1.0
            }
        );
        assert!(samples[1].labels.is_empty());
        assert!(samples[1].value.is_nan());
        assert_eq!(samples[2].value, f64::NEG_INFINITY);
        let empty = br#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
        assert_eq!(parse_answer(200, empty).expect("no samples"), vec![]);
    }

    #[test]
    fn a_scalar_answer() {
        let body = br#"{"status":"success","data":{"resultType":"scalar","result":[1795452271.267,"+Inf"]}}"#;
        assert_eq!(
            parse_answer(200, body).expect("a sample"),
            vec![Sample {
                labels: BTreeMap::new(),
                value: f64::INFINITY
            }]
        );
    }

    #[test]
    fn an_error_answer() {
        let body = br#"{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:5: parse error: unclosed left parenthesis"}"#;
        match parse_answer(400, body) {
            Err(QueryError::Prometheus { error_type, error }) => {
                assert_eq!(error_type, "bad_data");
                assert!(error.ends_with("unclosed left parenthesis"), "{error}");
            }
            other => panic!("not a Prometheus error: {other:?}"),
        }
    }

    #[test]
    fn unread_answers() {
        let string =
            br#"{"status":"success","data":{"resultType":"string","result":[1795452271.273,"x"]}}"#;
        let histogram = br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"histogram":[1,{}]}]}}"#;
        for body in [&string[..], histogram, b"<html>bad gateway</html>", b"{}"] {
            match parse_answer(502, body) {
                Err(QueryError::Unexpected { reason, .. }) => {
                    assert!(reason.starts_with("HTTP 502: "), "{reason}")
                }
                other => panic!("read {}: {other:?}", String::from_utf8_lossy(body)),
            }
        }
    }

    #[test]
    fn floats_as_prometheus_writes_them() {
        assert_eq!(parse_float("42"), Some(42.0));
        assert_eq!(parse_float("0.1"), Some(0.1));
        assert_eq!(parse_float("1e+06"), Some(1e6));
        assert_eq!(parse_float("+Inf"), Some(f64::INFINITY));
        assert_eq!(parse_float("-Inf"), Some(f64::NEG_INFINITY));
        assert!(parse_float("NaN").is_some_and(f64::is_nan));
        assert_eq!(parse_float("forty-two"), None);
    }
}
