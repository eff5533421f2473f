//! A trace from a user's own data: λ over time as Prometheus' range query answers it.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use admit_loadgen::{Trace, TraceError};

/// Why a trace file was refused.
#[derive(Debug)]
pub enum TraceFileError {
    /// The file could not be read.
    Read(std::io::Error),
    /// It is not JSON, or not a range query's answer: `data.result` holding one series whose
    /// `values` are `[time, "rate"]` pairs.
    Shape(String),
    /// A point's time does not come after the one before it, or a rate is not a finite,
    /// non-negative number (`point` counts from 0).
    Point {
        /// The point's index.
        point: usize,
        /// What is wrong with it.
        why: &'static str,
    },
    /// Fewer than two points: no span to play.
    TooShort,
    /// The trace the points make was refused.
    Trace(TraceError),
}

impl fmt::Display for TraceFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceFileError::Read(error) => write!(f, "cannot read the trace file: {error}"),
            TraceFileError::Shape(why) => write!(
                f,
                "the trace file is not a Prometheus range query's answer with one series: {why}"
            ),
            TraceFileError::Point { point, why } => write!(f, "trace point {point}: {why}"),
            TraceFileError::TooShort => f.write_str("the trace file needs at least two points"),
            TraceFileError::Trace(error) => write!(f, "the trace file's points: {error}"),
        }
    }
}

impl std::error::Error for TraceFileError {}

/// The trace in the file at `path`: ramps between its points, times divided by `compression`
/// and rates multiplied by `scale`.
///
/// # Errors
///
/// [`TraceFileError`].
pub fn read_trace(path: &Path, compression: f64, scale: f64) -> Result<Trace, TraceFileError> {
    let bytes = std::fs::read(path).map_err(TraceFileError::Read)?;
    parse_trace(&bytes, compression, scale)
}

fn parse_trace(bytes: &[u8], compression: f64, scale: f64) -> Result<Trace, TraceFileError> {
    let shape = |why: &str| TraceFileError::Shape(why.to_owned());
    let answer: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|error| TraceFileError::Shape(error.to_string()))?;
    let result = answer
        .pointer("/data/result")
        .and_then(serde_json::Value::as_array)
        .ok_or_else(|| shape("no data.result array"))?;
    let [series] = result.as_slice() else {
        return Err(shape(&format!("{} series, not one", result.len())));
    };
    let values = series
        .get("values")
        .and_then(serde_json::Value::as_array)
        .ok_or_else(|| shape("the series has no values (an instant query's answer?)"))?;
    let mut points = Vec::with_capacity(values.len());
    for (point, value) in values.iter().enumerate() {
        let pair = value.as_array().filter(|pair| pair.len() == 2);
        let time = pair.and_then(|pair| pair[0].as_f64());
        let rate = pair
            .and_then(|pair| pair[1].as_str())
            .and_then(|rate| rate.parse::<f64>().ok());
        let (Some(time), Some(rate)) = (time, rate) else {
            return Err(TraceFileError::Point {
                point,
                why: "not a [time, \"rate\"] pair",
            });
        };
        if !(rate.is_finite() && rate >= 0.0) {
            return Err(TraceFileError::Point {
                point,
                why: "the rate is not a finite, non-negative number",
            });
        }
        if points.last().is_some_and(|&(before, _)| time <= before) {
            return Err(TraceFileError::Point {
                point,
                why: "its time does not come after the point before",
            });
        }
        points.push((time, rate * scale));
    }
    if points.len() < 2 {
        return Err(TraceFileError::TooShort);
    }
    let mut builder = Trace::builder();
    for pair in points.windows(2) {
        let [(t0, from), (t1, to)] = [pair[0], pair[1]];
        let span = Duration::try_from_secs_f64((t1 - t0) / compression)
            .map_err(|_| TraceFileError::Trace(TraceError::TooLong))?;
        builder = builder.ramp(from, to, span);
    }
    builder.build().map_err(TraceFileError::Trace)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANSWER: &str = r#"{"status":"success","data":{"resultType":"matrix","result":[
        {"metric":{},"values":[[1700000000,"10"],[1700000060,"30"],[1700000120,"20.5"]]}]}}"#;

    #[test]
    fn a_range_query_becomes_ramps() {
        let trace = parse_trace(ANSWER.as_bytes(), 10.0, 2.0).unwrap();
        assert_eq!(trace.duration(), Duration::from_secs(12));
        assert_eq!(trace.rate_at(Duration::from_secs(3)), 40.0);
        assert_eq!(trace.rate_at(Duration::from_secs(6)), 60.0);
    }

    #[test]
    fn bad_files_say_what_is_wrong() {
        let bad = |text: &str| {
            parse_trace(text.as_bytes(), 1.0, 1.0)
                .unwrap_err()
                .to_string()
        };
        assert!(bad("not json").contains("not a Prometheus"));
        assert!(bad(r#"{"data":{"result":[]}}"#).contains("0 series"));
        let point = |values: &str| {
            bad(&format!(
                r#"{{"data":{{"result":[{{"values":{values}}}]}}}}"#
            ))
        };
        assert!(point(r#"[[1,"1"]]"#).contains("at least two"));
        assert!(point(r#"[[1,"1"],[1,"2"]]"#).contains("point 1: its time"));
        assert!(point(r#"[[1,"1"],[2,"-2"]]"#).contains("point 1: the rate"));
        assert!(point(r#"[[1,"1"],[2,"NaN"]]"#).contains("point 1: the rate"));
        assert!(point(r#"[[1,1],[2,"2"]]"#).contains("point 0: not a"));
    }
}
