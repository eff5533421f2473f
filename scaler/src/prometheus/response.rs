//! Reading an instant query's answer: the JSON envelope, the result types, the sample value.

use serde_json::{Map, Value};

use super::error::QueryErrorKind;

/// How many series' label sets [`QueryErrorKind::MultipleSeries`] lists.
const LISTED_SERIES: usize = 3;
/// How many bytes of an unreadable body an error message quotes.
const QUOTED_BYTES: usize = 200;

/// The one sample an instant query returned.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The value: always finite; may be negative or `-0.0`.
    pub value: f64,
    /// The evaluation time, Unix seconds.
    pub timestamp: f64,
    /// The series' labels, sorted by name (`__name__` included when Prometheus kept it); empty for
    /// a scalar.
    pub labels: Vec<(String, String)>,
}

/// A successful instant query: its sample, and the notes Prometheus attached to it.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The sample.
    pub sample: Sample,
    /// Prometheus' `warnings` (e.g. a partial answer): the query still succeeded.
    pub warnings: Vec<String>,
    /// Prometheus' `infos` (e.g. a `rate` over a metric that looks like a gauge).
    pub infos: Vec<String>,
}

/// Reads an answer of `POST /api/v1/query`: the HTTP `status` and the whole `body`.
///
/// `Ok` for an instant vector with exactly one plain sample, or a scalar, with a finite value.
pub fn parse_response(status: u16, body: &[u8]) -> Result<Answer, QueryErrorKind> {
    let Ok(Value::Object(envelope)) = serde_json::from_slice::<Value>(body) else {
        return Err(bad(status, format!("not a JSON object: {}", quote(body))));
    };
    match envelope.get("status").and_then(Value::as_str) {
        Some("success") if (200..300).contains(&status) => read_success(status, &envelope),
        Some("success") => Err(bad(
            status,
            "a success envelope with an error status".into(),
        )),
        Some("error") => Err(read_error(status, &envelope)),
        _ => Err(bad(status, "no `status` of `success` or `error`".into())),
    }
}

/// An error envelope: `errorType` decides, the HTTP status stands in when it is missing.
fn read_error(status: u16, envelope: &Map<String, Value>) -> QueryErrorKind {
    let message = envelope
        .get("error")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    match (envelope.get("errorType").and_then(Value::as_str), status) {
        (Some("bad_data"), _) | (None, 400) => QueryErrorKind::BadQuery { message },
        (Some("execution"), _) | (None, 422) => QueryErrorKind::Execution { message },
        (Some("canceled"), _) => QueryErrorKind::Timeout {
            message: format!("canceled: {message}"),
        },
        (Some("timeout"), _) | (None, 503) => QueryErrorKind::Timeout { message },
        (Some(kind), _) => bad(status, format!("{kind}: {message}")),
        (None, _) => bad(status, message),
    }
}

fn read_success(status: u16, envelope: &Map<String, Value>) -> Result<Answer, QueryErrorKind> {
    let data = envelope
        .get("data")
        .and_then(Value::as_object)
        .ok_or_else(|| bad(status, "a success envelope without `data`".into()))?;
    let result = data
        .get("result")
        .ok_or_else(|| bad(status, "`data` without `result`".into()))?;
    let sample = match data.get("resultType").and_then(Value::as_str) {
        Some("vector") => read_vector(status, result)?,
        Some("scalar") => read_pair(status, result, Vec::new())?,
        Some(other) => {
            return Err(QueryErrorKind::WrongType {
                result_type: other.to_owned(),
            });
        }
        None => return Err(bad(status, "`data` without `resultType`".into())),
    };
    Ok(Answer {
        sample,
        warnings: strings(envelope.get("warnings")),
        infos: strings(envelope.get("infos")),
    })
}

/// An instant vector: exactly one series with a plain `value`.
fn read_vector(status: u16, result: &Value) -> Result<Sample, QueryErrorKind> {
    let series = result
        .as_array()
        .ok_or_else(|| bad(status, "a vector `result` that is not a list".into()))?;
    let one = match series.as_slice() {
        [] => return Err(QueryErrorKind::Empty),
        [one] => one,
        many => {
            return Err(QueryErrorKind::MultipleSeries {
                count: many.len(),
                labels: many.iter().take(LISTED_SERIES).map(render).collect(),
            });
        }
    };
    let labels = one
        .get("metric")
        .and_then(Value::as_object)
        .map(|metric| {
            metric
                .iter()
                .map(|(name, value)| (name.clone(), value.as_str().unwrap_or_default().to_owned()))
                .collect()
        })
        .unwrap_or_default();
    match one.get("value") {
        Some(pair) => read_pair(status, pair, labels),
        None if one.get("histogram").is_some() => Err(QueryErrorKind::WrongType {
            result_type: "histogram".into(),
        }),
        None => Err(bad(status, "a vector sample without `value`".into())),
    }
}

/// A `[timestamp, "value"]` pair.
fn read_pair(
    status: u16,
    pair: &Value,
    labels: Vec<(String, String)>,
) -> Result<Sample, QueryErrorKind> {
    let Some([timestamp, raw]) = pair.as_array().map(Vec::as_slice) else {
        return Err(bad(
            status,
            format!("a sample that is not `[time, \"value\"]`: {pair}"),
        ));
    };
    let (Some(timestamp), Some(raw)) = (timestamp.as_f64(), raw.as_str()) else {
        return Err(bad(
            status,
            format!("a sample that is not `[time, \"value\"]`: {pair}"),
        ));
    };
    let value: f64 = raw.parse().map_err(|_| {
        bad(
            status,
            format!("a sample value that is not a number: {raw:?}"),
        )
    })?;
    if !value.is_finite() {
        return Err(QueryErrorKind::NotFinite {
            raw: raw.to_owned(),
        });
    }
    Ok(Sample {
        value,
        timestamp,
        labels,
    })
}

/// A series' label set as PromQL prints it: `{a="b", c="d"}`.
fn render(series: &Value) -> String {
    let pairs: Vec<String> = series
        .get("metric")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(name, value)| {
            // serde_json's string escaping matches PromQL's for `\`, `"` and newlines.
            format!(
                "{name}={}",
                Value::String(value.as_str().unwrap_or_default().to_owned())
            )
        })
        .collect();
    format!("{{{}}}", pairs.join(", "))
}

/// The strings of an optional array, e.g. `warnings`; anything else is ignored.
fn strings(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

fn bad(status: u16, message: String) -> QueryErrorKind {
    QueryErrorKind::BadResponse { status, message }
}

/// The start of a body for an error message, on one line.
fn quote(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(QUOTED_BYTES)]);
    let mut quoted = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if body.len() > QUOTED_BYTES {
        quoted.push('…');
    }
    if quoted.is_empty() {
        quoted.push_str("(empty body)");
    }
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    fn vector(value: &str) -> String {
        format!(
            r#"{{"status":"success","data":{{"resultType":"vector","result":[{{"metric":{{"job":"api"}},"value":[1700000000.123,"{value}"]}}]}}}}"#
        )
    }

    fn ok(status: u16, body: &str) -> Answer {
        match parse_response(status, body.as_bytes()) {
            Ok(answer) => answer,
            Err(kind) => panic!("{body}: expected Ok, got {kind:?}"),
        }
    }

    fn sample(value: f64, timestamp: f64, labels: &[(&str, &str)]) -> Sample {
        let labels = labels
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect();
        Sample {
            value,
            timestamp,
            labels,
        }
    }

    #[test]
    fn successes() {
        const SCALAR: &str =
            r#"{"status":"success","data":{"resultType":"scalar","result":[1700000000,"3"]}}"#;
        const UNLABELLED: &str = r#"{"status":"success","data":{"resultType":"vector",
            "result":[{"metric":{},"value":[1,"7"]}]}}"#;
        let (t, job) = (1700000000.123, [("job", "api")]);
        let cases = [
            ("one sample", vector("12.5"), sample(12.5, t, &job)),
            ("scalar", SCALAR.into(), sample(3.0, 1700000000.0, &[])),
            ("negative", vector("-4"), sample(-4.0, t, &job)),
            (
                "long decimal",
                vector("120.00000000000001"),
                sample(120.00000000000001, t, &job),
            ),
            ("exponent", vector("1e-3"), sample(0.001, t, &job)),
            ("no labels", UNLABELLED.into(), sample(7.0, 1.0, &[])),
        ];
        for (name, body, expected) in cases {
            let answer = ok(200, &body);
            assert_eq!(answer.sample, expected, "{name}");
            assert!(
                answer.warnings.is_empty() && answer.infos.is_empty(),
                "{name}"
            );
        }
    }

    #[test]
    fn negative_zero_is_a_value() {
        let sample = ok(200, &vector("-0")).sample;
        assert_eq!(sample.value, 0.0);
        assert!(sample.value.is_sign_negative());
    }

    #[test]
    fn labels_are_sorted_by_name() {
        let body = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"z":"1","__name__":"up","a":"2"},"value":[1,"1"]}]}}"#;
        let names: Vec<String> = ok(200, body)
            .sample
            .labels
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, ["__name__", "a", "z"]);
    }

    #[test]
    fn warnings_and_infos_are_carried() {
        let body = r#"{"status":"success","data":{"resultType":"scalar","result":[1,"2"]},
            "warnings":["partial answer"],"infos":["PromQL info: metric might not be a counter"]}"#;
        let answer = ok(200, body);
        assert_eq!(answer.sample.value, 2.0);
        assert_eq!(answer.warnings, ["partial answer"]);
        assert_eq!(answer.infos, ["PromQL info: metric might not be a counter"]);
    }

    #[test]
    fn failures() {
        use QueryErrorKind::*;
        let html =
            "<html>\n<head><title>502 Bad Gateway</title></head>\n<body>nginx</body>\n</html>";
        let cases: Vec<(&str, u16, String, QueryErrorKind, Code)> = vec![
            (
                "empty",
                200,
                r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#.into(),
                Empty,
                Code::FailedPrecondition,
            ),
            (
                "two series",
                200,
                r#"{"status":"success","data":{"resultType":"vector","result":[
                    {"metric":{"job":"api","pod":"a"},"value":[1,"1"]},
                    {"metric":{"job":"api","pod":"b\"c"},"value":[1,"2"]}]}}"#
                    .into(),
                MultipleSeries {
                    count: 2,
                    labels: vec![
                        r#"{job="api", pod="a"}"#.into(),
                        r#"{job="api", pod="b\"c"}"#.into(),
                    ],
                },
                Code::FailedPrecondition,
            ),
            (
                "matrix",
                200,
                r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1"],[2,"2"]]}]}}"#.into(),
                WrongType { result_type: "matrix".into() },
                Code::FailedPrecondition,
            ),
            (
                "string",
                200,
                r#"{"status":"success","data":{"resultType":"string","result":[1,"hello"]}}"#.into(),
                WrongType { result_type: "string".into() },
                Code::FailedPrecondition,
            ),
            (
                "histogram sample",
                200,
                r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"histogram":[1,{"count":"2","sum":"3","buckets":[]}]}]}}"#.into(),
                WrongType { result_type: "histogram".into() },
                Code::FailedPrecondition,
            ),
            ("NaN", 200, vector("NaN"), NotFinite { raw: "NaN".into() }, Code::FailedPrecondition),
            ("+Inf", 200, vector("+Inf"), NotFinite { raw: "+Inf".into() }, Code::FailedPrecondition),
            ("-Inf", 200, vector("-Inf"), NotFinite { raw: "-Inf".into() }, Code::FailedPrecondition),
            (
                "400 bad_data",
                400,
                r#"{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:5: parse error: unexpected end of input"}"#.into(),
                BadQuery { message: "invalid parameter \"query\": 1:5: parse error: unexpected end of input".into() },
                Code::InvalidArgument,
            ),
            (
                "422 execution",
                422,
                r#"{"status":"error","errorType":"execution","error":"found duplicate series for the match group"}"#.into(),
                Execution { message: "found duplicate series for the match group".into() },
                Code::FailedPrecondition,
            ),
            (
                "503 timeout",
                503,
                r#"{"status":"error","errorType":"timeout","error":"query timed out in expression evaluation"}"#.into(),
                Timeout { message: "query timed out in expression evaluation".into() },
                Code::DeadlineExceeded,
            ),
            (
                "503 canceled",
                503,
                r#"{"status":"error","errorType":"canceled","error":"context canceled"}"#.into(),
                Timeout { message: "canceled: context canceled".into() },
                Code::DeadlineExceeded,
            ),
            (
                "error envelope with data",
                422,
                r#"{"status":"error","errorType":"execution","error":"boom","data":{"resultType":"vector","result":[]}}"#.into(),
                Execution { message: "boom".into() },
                Code::FailedPrecondition,
            ),
            (
                "200 with status error",
                200,
                r#"{"status":"error","errorType":"bad_data","error":"nope"}"#.into(),
                BadQuery { message: "nope".into() },
                Code::InvalidArgument,
            ),
            (
                "other errorType",
                500,
                r#"{"status":"error","errorType":"internal","error":"oops"}"#.into(),
                BadResponse { status: 500, message: "internal: oops".into() },
                Code::Unavailable,
            ),
            (
                "502 HTML",
                502,
                html.into(),
                BadResponse {
                    status: 502,
                    message: "not a JSON object: <html> <head><title>502 Bad Gateway</title></head> <body>nginx</body> </html>".into(),
                },
                Code::Unavailable,
            ),
            (
                "200 non-JSON",
                200,
                "OK".into(),
                BadResponse { status: 200, message: "not a JSON object: OK".into() },
                Code::Unavailable,
            ),
            (
                "200 empty body",
                200,
                "".into(),
                BadResponse { status: 200, message: "not a JSON object: (empty body)".into() },
                Code::Unavailable,
            ),
            (
                "missing data",
                200,
                r#"{"status":"success"}"#.into(),
                BadResponse { status: 200, message: "a success envelope without `data`".into() },
                Code::Unavailable,
            ),
            (
                "missing status",
                200,
                r#"{"data":{"resultType":"scalar","result":[1,"1"]}}"#.into(),
                BadResponse { status: 200, message: "no `status` of `success` or `error`".into() },
                Code::Unavailable,
            ),
            (
                "success with a 502",
                502,
                r#"{"status":"success","data":{"resultType":"scalar","result":[1,"1"]}}"#.into(),
                BadResponse { status: 502, message: "a success envelope with an error status".into() },
                Code::Unavailable,
            ),
            (
                "value not a string",
                200,
                r#"{"status":"success","data":{"resultType":"scalar","result":[1,2]}}"#.into(),
                BadResponse { status: 200, message: "a sample that is not `[time, \"value\"]`: [1,2]".into() },
                Code::Unavailable,
            ),
            (
                "value not a number",
                200,
                vector("twelve"),
                BadResponse { status: 200, message: "a sample value that is not a number: \"twelve\"".into() },
                Code::Unavailable,
            ),
        ];
        for (name, status, body, expected, code) in cases {
            let got = parse_response(status, body.as_bytes());
            assert_eq!(got, Err(expected.clone()), "{name}");
            assert_eq!(expected.code(), code, "{name}");
        }
    }

    #[test]
    fn many_series_list_the_first_few() {
        let series: Vec<String> = (0..5)
            .map(|i| format!(r#"{{"metric":{{"pod":"p{i}"}},"value":[1,"1"]}}"#))
            .collect();
        let body = format!(
            r#"{{"status":"success","data":{{"resultType":"vector","result":[{}]}}}}"#,
            series.join(",")
        );
        let kind = parse_response(200, body.as_bytes()).unwrap_err();
        assert_eq!(
            kind,
            QueryErrorKind::MultipleSeries {
                count: 5,
                labels: vec![
                    r#"{pod="p0"}"#.into(),
                    r#"{pod="p1"}"#.into(),
                    r#"{pod="p2"}"#.into()
                ],
            }
        );
        assert_eq!(
            kind.to_string(),
            r#"the query returned 5 series, expected one: {pod="p0"}, {pod="p1"}, {pod="p2"}, …"#
        );
    }

    #[test]
    fn labels_and_codes_of_every_kind() {
        use QueryErrorKind::*;
        let kinds = [
            (
                BadQuery {
                    message: String::new(),
                },
                "bad_query",
                Code::InvalidArgument,
            ),
            (
                Execution {
                    message: String::new(),
                },
                "execution",
                Code::FailedPrecondition,
            ),
            (Empty, "empty", Code::FailedPrecondition),
            (
                MultipleSeries {
                    count: 2,
                    labels: vec![],
                },
                "multiple_series",
                Code::FailedPrecondition,
            ),
            (
                WrongType {
                    result_type: "matrix".into(),
                },
                "wrong_type",
                Code::FailedPrecondition,
            ),
            (
                NotFinite { raw: "NaN".into() },
                "not_finite",
                Code::FailedPrecondition,
            ),
            (
                Timeout {
                    message: String::new(),
                },
                "timeout",
                Code::DeadlineExceeded,
            ),
            (
                Unreachable {
                    message: String::new(),
                },
                "unreachable",
                Code::Unavailable,
            ),
            (
                BadResponse {
                    status: 502,
                    message: String::new(),
                },
                "bad_response",
                Code::Unavailable,
            ),
        ];
        for (kind, label, code) in kinds {
            assert_eq!(kind.as_str(), label);
            assert_eq!(kind.code(), code, "{label}");
        }
    }

    #[test]
    fn display_names_the_query_and_the_raw_value() {
        let error = super::super::QueryError {
            query: "sum(rate(x[1m]))\n# comment".into(),
            kind: QueryErrorKind::NotFinite { raw: "+Inf".into() },
        };
        assert_eq!(
            error.to_string(),
            r#"query "sum(rate(x[1m]))\n# comment": the query returned +Inf, not a finite number"#
        );
        assert_eq!(error.code(), Code::FailedPrecondition);
    }
}
