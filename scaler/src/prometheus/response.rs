//! Reading an instant query's answer: the JSON envelope, the result types, the sample value.
//!
//! Typed and in place: each part of the body is first taken as its raw JSON text (a
//! [`RawValue`], a slice of the body), then read as the type its place calls for once the
//! envelope says what that is. A vector is counted in one pass that keeps its first
//! [`LISTED_SERIES`] elements as raw text and skips the rest, so reading holds the sample, the
//! label sets of the first [`LISTED_SERIES`] series and the first [`MAX_NOTES`] warnings and
//! infos, however many series the answer lists.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::error::QueryErrorKind;
use crate::excerpt::{excerpt, excerpt_bytes};

/// How many series' label sets [`QueryErrorKind::MultipleSeries`] lists.
const LISTED_SERIES: usize = 3;
/// How many of an answer's `warnings`, and how many of its `infos`, [`Answer`] keeps.
pub const MAX_NOTES: usize = 3;

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
    /// Prometheus' `warnings` (e.g. a partial answer): the query still succeeded. The first
    /// [`MAX_NOTES`], each an [`excerpt`].
    pub warnings: Vec<String>,
    /// Prometheus' `infos` (e.g. a `rate` over a metric that looks like a gauge). The first
    /// [`MAX_NOTES`], each an [`excerpt`].
    pub infos: Vec<String>,
    /// How many more warnings and infos came than `warnings` and `infos` keep.
    pub omitted_notes: usize,
}

/// A part of the body as raw JSON text, when present (`null` included).
type Raw<'a> = Option<&'a RawValue>;

/// The envelope: every field raw, read once `status` says which ones count.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    status: Raw<'a>,
    #[serde(borrow, default, deserialize_with = "present")]
    data: Raw<'a>,
    #[serde(borrow, default, deserialize_with = "present", rename = "errorType")]
    error_type: Raw<'a>,
    #[serde(borrow, default, deserialize_with = "present")]
    error: Raw<'a>,
    #[serde(borrow, default, deserialize_with = "present")]
    warnings: Raw<'a>,
    #[serde(borrow, default, deserialize_with = "present")]
    infos: Raw<'a>,
}

/// A success envelope's `data`.
#[derive(Deserialize)]
struct Data<'a> {
    #[serde(borrow, default, deserialize_with = "present", rename = "resultType")]
    result_type: Raw<'a>,
    #[serde(borrow, default, deserialize_with = "present")]
    result: Raw<'a>,
}

/// One element of a vector `result`.
#[derive(Deserialize)]
struct Series<'a> {
    #[serde(default)]
    metric: BTreeMap<String, String>,
    #[serde(borrow, default, deserialize_with = "present")]
    value: Raw<'a>,
    #[serde(borrow, default, deserialize_with = "present")]
    histogram: Raw<'a>,
}

/// A vector `result` read in one pass: how many series, and the first few as raw text.
struct Vector<'a> {
    count: usize,
    first: Vec<&'a RawValue>,
}

/// Strings of a `warnings` or `infos` list: the first [`MAX_NOTES`] as excerpts, the rest
/// counted. Other elements are skipped.
#[derive(Default)]
struct Notes {
    kept: Vec<String>,
    omitted: usize,
}

/// Reads an answer of `POST /api/v1/query`: the HTTP `status` and the whole `body`.
///
/// `Ok` for an instant vector with exactly one plain sample, or a scalar, with a finite value.
/// Holds no more than it returns however many series the body lists; the body's own size is
/// the caller's to bound ([`max_body_bytes`](super::ClientOptions::max_body_bytes)). Every
/// text from the body in a failure or a note is an [`excerpt`]; the sample's labels are kept
/// whole.
pub fn parse_response(status: u16, body: &[u8]) -> Result<Answer, QueryErrorKind> {
    if body.trim_ascii_start().first() != Some(&b'{') {
        return Err(bad(status, format!("not a JSON object: {}", quote(body))));
    }
    let envelope: Envelope<'_> = serde_json::from_slice(body).map_err(|error| {
        bad(
            status,
            format!("not valid JSON ({}): {}", reason(&error), quote(body)),
        )
    })?;
    match string(envelope.status).as_deref() {
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
fn read_error(status: u16, envelope: &Envelope<'_>) -> QueryErrorKind {
    let message = excerpt(&string(envelope.error).unwrap_or_default());
    match (string(envelope.error_type).as_deref(), status) {
        (Some("bad_data"), _) | (None, 400) => QueryErrorKind::BadQuery { message },
        (Some("execution"), _) | (None, 422) => QueryErrorKind::Execution { message },
        (Some("canceled"), _) => QueryErrorKind::Timeout {
            message: format!("canceled: {message}"),
        },
        (Some("timeout"), _) | (None, 503) => QueryErrorKind::Timeout { message },
        (Some(kind), _) => bad(status, format!("{}: {message}", excerpt(kind))),
        (None, _) => bad(status, message),
    }
}

fn read_success(status: u16, envelope: &Envelope<'_>) -> Result<Answer, QueryErrorKind> {
    let data = envelope
        .data
        .filter(|data| data.get().starts_with('{'))
        .ok_or_else(|| bad(status, "a success envelope without `data`".into()))?;
    let data: Data<'_> = serde_json::from_str(data.get())
        .map_err(|error| bad(status, format!("a malformed `data`: {}", reason(&error))))?;
    let result = data
        .result
        .ok_or_else(|| bad(status, "`data` without `result`".into()))?;
    let sample = match string(data.result_type).as_deref() {
        Some("vector") => read_vector(status, result)?,
        Some("scalar") => read_pair(status, result, Vec::new())?,
        Some(other) => {
            return Err(QueryErrorKind::WrongType {
                result_type: excerpt(other),
            });
        }
        None => return Err(bad(status, "`data` without `resultType`".into())),
    };
    let warnings = notes(status, envelope.warnings)?;
    let infos = notes(status, envelope.infos)?;
    Ok(Answer {
        sample,
        warnings: warnings.kept,
        infos: infos.kept,
        omitted_notes: warnings.omitted + infos.omitted,
    })
}

/// An instant vector: exactly one series with a plain `value`.
fn read_vector(status: u16, result: &RawValue) -> Result<Sample, QueryErrorKind> {
    if !result.get().starts_with('[') {
        return Err(bad(status, "a vector `result` that is not a list".into()));
    }
    let vector: Vector<'_> = serde_json::from_str(result.get())
        .map_err(|error| bad(status, format!("a malformed vector: {}", reason(&error))))?;
    let one = match (vector.count, vector.first.as_slice()) {
        (0, _) => return Err(QueryErrorKind::Empty),
        (1, [one]) => read_series(status, one)?,
        (count, first) => {
            let labels = first
                .iter()
                .map(|series| Ok(excerpt(&render(&read_series(status, series)?.metric))))
                .collect::<Result<_, QueryErrorKind>>()?;
            return Err(QueryErrorKind::MultipleSeries { count, labels });
        }
    };
    match one.value {
        Some(pair) => read_pair(status, pair, one.metric.into_iter().collect()),
        None if one.histogram.is_some() => Err(QueryErrorKind::WrongType {
            result_type: "histogram".into(),
        }),
        None => Err(bad(status, "a vector sample without `value`".into())),
    }
}

/// One element of a vector: an object with a `metric` of string labels.
fn read_series<'a>(status: u16, series: &'a RawValue) -> Result<Series<'a>, QueryErrorKind> {
    let text = series.get();
    if !text.starts_with('{') {
        return Err(bad(
            status,
            format!("a vector element that is not an object: {}", excerpt(text)),
        ));
    }
    serde_json::from_str(text).map_err(|error| {
        bad(
            status,
            format!("a malformed series ({}): {}", reason(&error), excerpt(text)),
        )
    })
}

/// A `[timestamp, "value"]` pair.
fn read_pair(
    status: u16,
    pair: &RawValue,
    labels: Vec<(String, String)>,
) -> Result<Sample, QueryErrorKind> {
    let Ok((timestamp, raw)) = serde_json::from_str::<(f64, String)>(pair.get()) else {
        return Err(bad(
            status,
            format!(
                "a sample that is not `[time, \"value\"]`: {}",
                excerpt(pair.get())
            ),
        ));
    };
    let value: f64 = raw.parse().map_err(|_| {
        bad(
            status,
            format!("a sample value that is not a number: \"{}\"", excerpt(&raw)),
        )
    })?;
    if !value.is_finite() {
        return Err(QueryErrorKind::NotFinite { raw: excerpt(&raw) });
    }
    Ok(Sample {
        value,
        timestamp,
        labels,
    })
}

/// A `warnings` or `infos` field: anything but a list is no notes.
fn notes(status: u16, field: Raw<'_>) -> Result<Notes, QueryErrorKind> {
    match field {
        Some(list) if list.get().starts_with('[') => serde_json::from_str(list.get())
            .map_err(|error| bad(status, format!("malformed notes: {}", reason(&error)))),
        _ => Ok(Notes::default()),
    }
}

/// A series' label set as PromQL prints it: `{a="b", c="d"}`.
fn render(labels: &BTreeMap<String, String>) -> String {
    let pairs: Vec<String> = labels
        .iter()
        // serde_json's string escaping matches PromQL's for `\`, `"` and newlines.
        .map(|(name, value)| format!("{name}={}", serde_json::Value::from(value.as_str())))
        .collect();
    format!("{{{}}}", pairs.join(", "))
}

/// The string a raw JSON value holds, if it is one.
fn string(raw: Raw<'_>) -> Option<String> {
    raw.filter(|raw| raw.get().starts_with('"'))
        .and_then(|raw| serde_json::from_str(raw.get()).ok())
}

/// A field's raw text, `null` included (`Option`'s own reading would make `null` absent).
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Raw<'de>, D::Error> {
    <&RawValue>::deserialize(deserializer).map(Some)
}

/// Why serde_json refused a part, without its position (within the part, not the body).
fn reason(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let position = format!(" at line {} column {}", error.line(), error.column());
    excerpt(text.strip_suffix(&position).unwrap_or(&text))
}

fn bad(status: u16, message: String) -> QueryErrorKind {
    QueryErrorKind::BadResponse { status, message }
}

/// The start of a body for an error message.
fn quote(body: &[u8]) -> String {
    if body.is_empty() {
        "(empty body)".to_owned()
    } else {
        excerpt_bytes(body)
    }
}

impl<'de> Deserialize<'de> for Vector<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Series;
        impl<'de> Visitor<'de> for Series {
            type Value = Vector<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of series")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vector<'de>, A::Error> {
                let mut first = Vec::with_capacity(LISTED_SERIES);
                while first.len() < LISTED_SERIES {
                    match seq.next_element()? {
                        Some(series) => first.push(series),
                        None => break,
                    }
                }
                let mut count = first.len();
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    count += 1;
                }
                Ok(Vector { count, first })
            }
        }
        deserializer.deserialize_seq(Series)
    }
}

impl<'de> Deserialize<'de> for Notes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Strings;
        impl<'de> Visitor<'de> for Strings {
            type Value = Notes;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of strings")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Notes, A::Error> {
                let mut notes = Notes::default();
                while let Some(note) = seq.next_element::<&RawValue>()? {
                    if notes.kept.len() == MAX_NOTES {
                        notes.omitted += usize::from(note.get().starts_with('"'));
                    } else if let Some(text) = string(Some(note)) {
                        notes.kept.push(excerpt(&text));
                    }
                }
                Ok(notes)
            }
        }
        deserializer.deserialize_seq(Strings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::excerpt::EXCERPT_CHARS;
    use admit_testkit::counting_alloc::{CountingAllocator, allocations_during};
    use proptest::prelude::*;

    // Counts this thread's allocations for `reading_allocates_the_same_however_many_series`;
    // it is the whole lib test binary's allocator (one per binary), forwarding to the system's.
    #[global_allocator]
    static ALLOCATOR: CountingAllocator = CountingAllocator;

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
        let cases: Vec<(&str, u16, String, QueryErrorKind)> = vec![
            (
                "empty",
                200,
                r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#.into(),
                Empty,
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
            ),
            (
                "matrix",
                200,
                r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1"],[2,"2"]]}]}}"#.into(),
                WrongType { result_type: "matrix".into() },
            ),
            (
                "string",
                200,
                r#"{"status":"success","data":{"resultType":"string","result":[1,"hello"]}}"#.into(),
                WrongType { result_type: "string".into() },
            ),
            (
                "histogram sample",
                200,
                r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"histogram":[1,{"count":"2","sum":"3","buckets":[]}]}]}}"#.into(),
                WrongType { result_type: "histogram".into() },
            ),
            ("NaN", 200, vector("NaN"), NotFinite { raw: "NaN".into() }),
            ("+Inf", 200, vector("+Inf"), NotFinite { raw: "+Inf".into() }),
            ("-Inf", 200, vector("-Inf"), NotFinite { raw: "-Inf".into() }),
            (
                "400 bad_data",
                400,
                r#"{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:5: parse error: unexpected end of input"}"#.into(),
                BadQuery { message: "invalid parameter \"query\": 1:5: parse error: unexpected end of input".into() },
            ),
            (
                "422 execution",
                422,
                r#"{"status":"error","errorType":"execution","error":"found duplicate series for the match group"}"#.into(),
                Execution { message: "found duplicate series for the match group".into() },
            ),
            (
                "503 timeout",
                503,
                r#"{"status":"error","errorType":"timeout","error":"query timed out in expression evaluation"}"#.into(),
                Timeout { message: "query timed out in expression evaluation".into() },
            ),
            (
                "503 canceled",
                503,
                r#"{"status":"error","errorType":"canceled","error":"context canceled"}"#.into(),
                Timeout { message: "canceled: context canceled".into() },
            ),
            (
                "error envelope with data",
                422,
                r#"{"status":"error","errorType":"execution","error":"boom","data":{"resultType":"vector","result":[]}}"#.into(),
                Execution { message: "boom".into() },
            ),
            (
                "200 with status error",
                200,
                r#"{"status":"error","errorType":"bad_data","error":"nope"}"#.into(),
                BadQuery { message: "nope".into() },
            ),
            (
                "other errorType",
                500,
                r#"{"status":"error","errorType":"internal","error":"oops"}"#.into(),
                BadResponse { status: 500, message: "internal: oops".into() },
            ),
            (
                "502 HTML",
                502,
                html.into(),
                BadResponse {
                    status: 502,
                    message: r"not a JSON object: <html>\n<head><title>502 Bad Gateway</title></head>\n<body>nginx</body>\n</html>".into(),
                },
            ),
            (
                "200 non-JSON",
                200,
                "OK".into(),
                BadResponse { status: 200, message: "not a JSON object: OK".into() },
            ),
            (
                "200 empty body",
                200,
                "".into(),
                BadResponse { status: 200, message: "not a JSON object: (empty body)".into() },
            ),
            (
                "missing data",
                200,
                r#"{"status":"success"}"#.into(),
                BadResponse { status: 200, message: "a success envelope without `data`".into() },
            ),
            (
                "missing status",
                200,
                r#"{"data":{"resultType":"scalar","result":[1,"1"]}}"#.into(),
                BadResponse { status: 200, message: "no `status` of `success` or `error`".into() },
            ),
            (
                "success with a 502",
                502,
                r#"{"status":"success","data":{"resultType":"scalar","result":[1,"1"]}}"#.into(),
                BadResponse { status: 502, message: "a success envelope with an error status".into() },
            ),
            (
                "value not a string",
                200,
                r#"{"status":"success","data":{"resultType":"scalar","result":[1,2]}}"#.into(),
                BadResponse { status: 200, message: "a sample that is not `[time, \"value\"]`: [1,2]".into() },
            ),
            (
                "value not a number",
                200,
                vector("twelve"),
                BadResponse { status: 200, message: "a sample value that is not a number: \"twelve\"".into() },
            ),
        ];
        for (name, status, body, expected) in cases {
            let got = parse_response(status, body.as_bytes());
            assert_eq!(got, Err(expected.clone()), "{name}");
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
    fn labels_of_every_kind() {
        use QueryErrorKind::*;
        let kinds = [
            (
                BadQuery {
                    message: String::new(),
                },
                "bad_query",
            ),
            (
                Execution {
                    message: String::new(),
                },
                "execution",
            ),
            (Empty, "empty"),
            (
                MultipleSeries {
                    count: 2,
                    labels: vec![],
                },
                "multiple_series",
            ),
            (
                WrongType {
                    result_type: "matrix".into(),
                },
                "wrong_type",
            ),
            (NotFinite { raw: "NaN".into() }, "not_finite"),
            (
                Timeout {
                    message: String::new(),
                },
                "timeout",
            ),
            (
                Unreachable {
                    message: String::new(),
                },
                "unreachable",
            ),
            (
                BadResponse {
                    status: 502,
                    message: String::new(),
                },
                "bad_response",
            ),
        ];
        for (kind, label) in kinds {
            assert_eq!(kind.as_str(), label);
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
    }

    /// A vector answer listing `series`, each `{"metric":{"pod":"p<i>"},"value":[1,"1"]}`.
    fn many(series: usize) -> String {
        let mut body =
            String::from(r#"{"status":"success","data":{"resultType":"vector","result":["#);
        for i in 0..series {
            if i > 0 {
                body.push(',');
            }
            body.push_str(&format!(r#"{{"metric":{{"pod":"p{i}"}},"value":[1,"1"]}}"#));
        }
        body.push_str("]}}");
        body
    }

    #[test]
    fn two_hundred_thousand_series_are_counted() {
        let kind = parse_response(200, many(200_000).as_bytes()).unwrap_err();
        let QueryErrorKind::MultipleSeries { count, labels } = kind else {
            panic!("{kind:?}");
        };
        assert_eq!(count, 200_000);
        assert_eq!(labels, [r#"{pod="p0"}"#, r#"{pod="p1"}"#, r#"{pod="p2"}"#]);
    }

    #[test]
    fn reading_allocates_the_same_however_many_series() {
        let (few, lots) = (many(10), many(100_000));
        let count = |body: &str| {
            allocations_during(|| drop(std::hint::black_box(parse_response(200, body.as_bytes()))))
        };
        count(&few);
        let (for_few, for_lots) = (count(&few), count(&lots));
        assert_eq!(
            for_few, for_lots,
            "allocations for 10 and for 100 000 series"
        );
        let one = vector("1");
        assert!(count(&one) <= for_few, "one sample: {}", count(&one));
    }

    #[test]
    fn foreign_text_in_errors_is_an_excerpt() {
        use QueryErrorKind::*;
        let long = "x".repeat(10_000);
        let more = |text: &str| {
            format!(
                "{}…({} more bytes)",
                &text[..EXCERPT_CHARS],
                text.len() - EXCERPT_CHARS
            )
        };
        let error = |error_type: &str| {
            format!(r#"{{"status":"error","errorType":"{error_type}","error":"{long}\u001b[2J"}}"#)
        };
        let cases: Vec<(&str, u16, String, QueryErrorKind)> = vec![
            (
                "error text",
                400,
                error("bad_data"),
                BadQuery {
                    message: more(&format!("{long}\u{1b}[2J")),
                },
            ),
            (
                "errorType",
                500,
                error(&long),
                BadResponse {
                    status: 500,
                    message: format!("{}: {}", more(&long), more(&format!("{long}\u{1b}[2J"))),
                },
            ),
            (
                "resultType",
                200,
                format!(r#"{{"status":"success","data":{{"resultType":"{long}","result":[]}}}}"#),
                WrongType {
                    result_type: more(&long),
                },
            ),
            (
                "value",
                200,
                vector(&"9".repeat(400)),
                NotFinite {
                    raw: more(&"9".repeat(400)),
                },
            ),
            (
                "value text",
                200,
                vector(&long),
                BadResponse {
                    status: 200,
                    message: format!("a sample value that is not a number: \"{}\"", more(&long)),
                },
            ),
            (
                "body",
                502,
                format!("<html>{long}"),
                BadResponse {
                    status: 502,
                    message: format!("not a JSON object: {}", more(&format!("<html>{long}"))),
                },
            ),
        ];
        for (name, status, body, expected) in cases {
            assert_eq!(
                parse_response(status, body.as_bytes()),
                Err(expected),
                "{name}"
            );
        }
        let kind = parse_response(200, vector(r"\u001b[31mred").as_bytes()).unwrap_err();
        assert_eq!(
            kind,
            BadResponse {
                status: 200,
                message: r#"a sample value that is not a number: "\u{1b}[31mred""#.into()
            }
        );
    }

    #[test]
    fn long_label_sets_are_listed_as_excerpts() {
        let value = "v".repeat(1000);
        let series = format!(r#"{{"metric":{{"a":"{value}","b":"\n"}},"value":[1,"1"]}}"#);
        let body = format!(
            r#"{{"status":"success","data":{{"resultType":"vector","result":[{series},{series}]}}}}"#
        );
        let kind = parse_response(200, body.as_bytes()).unwrap_err();
        let QueryErrorKind::MultipleSeries { count: 2, labels } = &kind else {
            panic!("{kind:?}");
        };
        let rendered = format!(r#"{{a="{value}", b="\n"}}"#);
        let expected = format!(
            "{}…({} more bytes)",
            &rendered[..EXCERPT_CHARS],
            rendered.len() - EXCERPT_CHARS
        );
        assert_eq!(labels, &[expected.clone(), expected]);
    }

    #[test]
    fn notes_are_bounded_in_number_and_length() {
        let long = "w".repeat(500);
        let body = format!(
            r#"{{"status":"success","data":{{"resultType":"scalar","result":[1,"2"]}},
            "warnings":["a\nb",1,null,"{long}","c","d","e"],"infos":{{"not":"a list"}}}}"#
        );
        let answer = ok(200, &body);
        let cut = format!("{}…(340 more bytes)", &long[..EXCERPT_CHARS]);
        assert_eq!(answer.warnings, [r"a\nb", cut.as_str(), "c"]);
        assert!(answer.infos.is_empty());
        assert_eq!(answer.omitted_notes, 2, "d and e; not 1 or null");
        let infos: Vec<String> = (0..10).map(|i| format!("\"i{i}\"")).collect();
        let body = format!(
            r#"{{"status":"success","data":{{"resultType":"scalar","result":[1,"2"]}},"infos":[{}]}}"#,
            infos.join(",")
        );
        let answer = ok(200, &body);
        assert_eq!(answer.infos, ["i0", "i1", "i2"]);
        assert_eq!(answer.omitted_notes, 7);
    }

    #[test]
    fn malformed_envelopes_are_bad_responses() {
        let cases = [
            ("array", "[]", "not a JSON object: []"),
            ("string", r#""success""#, r#"not a JSON object: "success""#),
            (
                "truncated",
                r#"{"status":"success","data":{"resultType":"vec"#,
                r#"not valid JSON (EOF while parsing a string): {"status":"success","data":{"resultType":"vec"#,
            ),
            (
                "duplicate status",
                r#"{"status":"error","status":"success"}"#,
                r#"not valid JSON (duplicate field `status`): {"status":"error","status":"success"}"#,
            ),
            (
                "trailing text",
                r#"{"status":"success"} and more"#,
                r#"not valid JSON (trailing characters): {"status":"success"} and more"#,
            ),
            (
                "data not an object",
                r#"{"status":"success","data":[1]}"#,
                "a success envelope without `data`",
            ),
            (
                "null result",
                r#"{"status":"success","data":{"resultType":"vector","result":null}}"#,
                "a vector `result` that is not a list",
            ),
            (
                "element not an object",
                r#"{"status":"success","data":{"resultType":"vector","result":[[1,"1"]]}}"#,
                r#"a vector element that is not an object: [1,"1"]"#,
            ),
            (
                "label value not a string",
                r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":1},"value":[1,"1"]}]}}"#,
                r#"a malformed series (invalid type: integer `1`, expected a string): {"metric":{"a":1},"value":[1,"1"]}"#,
            ),
            (
                "vector sample without value",
                r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{}}]}}"#,
                "a vector sample without `value`",
            ),
            (
                "three-element pair",
                r#"{"status":"success","data":{"resultType":"scalar","result":[1,"1",2]}}"#,
                r#"a sample that is not `[time, "value"]`: [1,"1",2]"#,
            ),
            (
                "no resultType",
                r#"{"status":"success","data":{"result":[]}}"#,
                "`data` without `resultType`",
            ),
            (
                "no result",
                r#"{"status":"success","data":{"resultType":"vector"}}"#,
                "`data` without `result`",
            ),
        ];
        for (name, body, message) in cases {
            assert_eq!(
                parse_response(200, body.as_bytes()),
                Err(bad(200, message.into())),
                "{name}"
            );
        }
        let invalid_utf8 = b"{\"status\":\"succ\xffess\"}";
        let kind = parse_response(200, invalid_utf8).unwrap_err();
        assert!(
            kind.to_string()
                .contains("not valid JSON (invalid unicode code point)"),
            "{kind}"
        );
    }

    #[test]
    fn deep_nesting_is_refused_without_overflowing_the_stack() {
        let deep =
            |open: &str, close: &str| format!("{}{}", open.repeat(100_000), close.repeat(100_000));
        let bodies = [
            deep("[", "]"),
            format!(
                r#"{{"status":"success","data":{{"resultType":"vector","result":[{{"metric":{{}},"value":{}}}]}}}}"#,
                deep("[", "]")
            ),
            format!(
                r#"{{"status":"success","data":{{"resultType":"vector","result":[{{"metric":{{}},"value":[1,"1"]}},{}]}}}}"#,
                deep("[", "]")
            ),
            format!(r#"{{"status":"success","x":{}}}"#, deep(r#"{"a":"#, "}")),
        ];
        for body in bodies {
            let kind = parse_response(200, body.as_bytes()).unwrap_err();
            assert!(kind.to_string().len() < MAX_MESSAGE_BYTES, "{kind}");
        }
        // A note that is not a string is skipped, however deep.
        let body = format!(
            r#"{{"status":"success","data":{{"resultType":"scalar","result":[1,"1"]}},"warnings":[{}]}}"#,
            deep("[", "]")
        );
        assert_eq!(ok(200, &body).warnings, Vec::<String>::new());
    }

    /// The longest `Display` of a failure read from a body: at most three excerpts (a label
    /// list) of at most `EXCERPT_CHARS` characters of 6 bytes each (`\u{9f}`), their
    /// `…(N more bytes)` and separators, and the fixed text.
    const MAX_MESSAGE_BYTES: usize = 4 * 1024;

    /// A value's text or a JSON value that is not a string.
    fn sample_value() -> impl Strategy<Value = serde_json::Value> {
        use serde_json::Value;
        prop_oneof![
            3 => any::<f64>().prop_map(|v| Value::from(v.to_string())),
            1 => prop::sample::select(vec!["NaN", "+Inf", "-Inf", "-0", "1e308", "1e309", "inf"])
                .prop_map(Value::from),
            1 => (300usize..400).prop_map(|n| Value::from("9".repeat(n))),
            1 => "\\PC{0,12}".prop_map(Value::from),
            1 => any::<i64>().prop_map(Value::from),
            1 => Just(Value::Null),
        ]
    }

    /// Text as it comes: short names, any characters (controls included), long runs.
    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => "[a-z_]{1,6}",
            2 => prop::collection::vec(any::<char>(), 0..12).prop_map(String::from_iter),
            1 => (0usize..2000).prop_map(|n| "é".repeat(n)),
        ]
    }

    #[derive(Debug, Clone)]
    enum Point {
        Value(serde_json::Value),
        Histogram,
        Neither,
    }

    /// A generated answer, and what it must read as.
    #[derive(Debug, Clone)]
    struct Doc {
        http: u16,
        status: Option<&'static str>,
        result_type: String,
        series: Vec<(BTreeMap<String, String>, Point)>,
        scalar: (f64, serde_json::Value),
        warnings: Vec<serde_json::Value>,
    }

    /// A series' labels and what it holds.
    fn series() -> impl Strategy<Value = (BTreeMap<String, String>, Point)> {
        let point = prop_oneof![
            8 => sample_value().prop_map(Point::Value),
            1 => Just(Point::Histogram),
            1 => Just(Point::Neither),
        ];
        (prop::collection::btree_map(text(), text(), 0..4), point)
    }

    fn doc() -> impl Strategy<Value = Doc> {
        let note = prop_oneof![
            text().prop_map(serde_json::Value::from),
            Just(serde_json::Value::from(7))
        ];
        (
            prop::sample::select(vec![200u16, 200, 200, 400, 422, 500, 502, 503]),
            prop::sample::select(vec![
                Some("success"),
                Some("success"),
                Some("error"),
                Some("other"),
                None,
            ]),
            prop_oneof![
                3 => Just("vector".to_owned()),
                1 => Just("scalar".to_owned()),
                1 => Just("matrix".to_owned()),
                1 => text(),
            ],
            prop_oneof![
                1 => prop::collection::vec(series(), 0..1),
                4 => prop::collection::vec(series(), 1..2),
                2 => prop::collection::vec(series(), 2..40),
            ],
            ((0u32..2_000_000_000).prop_map(f64::from), sample_value()),
            prop::collection::vec(note, 0..8),
        )
            .prop_map(
                |(http, status, result_type, series, scalar, warnings)| Doc {
                    http,
                    status,
                    result_type,
                    series,
                    scalar,
                    warnings,
                },
            )
    }

    impl Doc {
        fn body(&self) -> Vec<u8> {
            use serde_json::{Value, json};
            let result = match self.result_type.as_str() {
                "scalar" => json!([self.scalar.0, self.scalar.1]),
                _ => Value::Array(
                    self.series
                        .iter()
                        .map(|(labels, point)| match point {
                            Point::Value(value) => {
                                json!({"metric": labels, "value": [1700000000.5, value]})
                            }
                            Point::Histogram => {
                                json!({"metric": labels, "histogram": [1, {"count": "1"}]})
                            }
                            Point::Neither => json!({"metric": labels}),
                        })
                        .collect(),
                ),
            };
            let mut envelope = json!({
                "data": {"resultType": self.result_type, "result": result},
                "warnings": self.warnings,
                "errorType": "execution",
                "error": "e",
            });
            if let Some(status) = self.status {
                envelope["status"] = Value::from(status);
            }
            serde_json::to_vec(&envelope).unwrap()
        }

        /// The finite value the answer must read as, if any.
        fn one_finite_sample(&self) -> Option<f64> {
            if self.status != Some("success") || !(200..300).contains(&self.http) {
                return None;
            }
            let value = match (self.result_type.as_str(), self.series.as_slice()) {
                ("scalar", _) => &self.scalar.1,
                ("vector", [(_, Point::Value(value))]) => value,
                _ => return None,
            };
            let value: f64 = value.as_str()?.parse().ok()?;
            value.is_finite().then_some(value)
        }
    }

    /// Every failure's message is bounded and on one line; `Ok` holds one finite value.
    fn check(result: &Result<Answer, QueryErrorKind>) -> Result<(), TestCaseError> {
        match result {
            Ok(answer) => prop_assert!(answer.sample.value.is_finite()),
            Err(kind) => {
                let shown = kind.to_string();
                prop_assert!(
                    shown.len() <= MAX_MESSAGE_BYTES,
                    "{} bytes: {shown}",
                    shown.len()
                );
                prop_assert!(!shown.chars().any(char::is_control), "{shown:?}");
            }
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn any_bytes_read_safely(
            bytes in prop::collection::vec(any::<u8>(), 0..4096),
            status in any::<u16>(),
        ) {
            check(&parse_response(status, &bytes))?;
        }

        #[test]
        fn any_bytes_after_a_success_start_read_safely(
            tail in prop::collection::vec(any::<u8>(), 0..512),
        ) {
            let mut body =
                br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":"#
                    .to_vec();
            body.extend(tail);
            check(&parse_response(200, &body))?;
        }

        #[test]
        fn generated_answers_read_as_they_must(doc in doc()) {
            let result = parse_response(doc.http, &doc.body());
            check(&result)?;
            match (doc.one_finite_sample(), &result) {
                (Some(value), Ok(answer)) => {
                    prop_assert_eq!(answer.sample.value.to_bits(), value.to_bits());
                    let labels: Vec<(String, String)> = match doc.series.as_slice() {
                        [(labels, _)] if doc.result_type == "vector" => {
                            labels.clone().into_iter().collect()
                        }
                        _ => Vec::new(),
                    };
                    prop_assert_eq!(&answer.sample.labels, &labels);
                    let strings = doc.warnings.iter().filter(|note| note.is_string()).count();
                    prop_assert_eq!(answer.warnings.len(), strings.min(MAX_NOTES));
                    prop_assert_eq!(answer.omitted_notes, strings.saturating_sub(MAX_NOTES));
                }
                (None, Err(_)) => {}
                (expected, _) => prop_assert!(false, "expected {expected:?}, read {result:?}"),
            }
            let many = doc.status == Some("success")
                && (200..300).contains(&doc.http)
                && doc.result_type == "vector"
                && doc.series.len() > 1;
            if many {
                let listed: Vec<String> = doc
                    .series
                    .iter()
                    .take(LISTED_SERIES)
                    .map(|(labels, _)| excerpt(&render(labels)))
                    .collect();
                prop_assert_eq!(
                    result,
                    Err(QueryErrorKind::MultipleSeries { count: doc.series.len(), labels: listed })
                );
            }
        }
    }
}
