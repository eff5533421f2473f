//! The one table from a failed decision to the gRPC code KEDA sees.

use tonic::Code;

use crate::decision::DecisionError;
use crate::prometheus::{QueryError, QueryErrorKind};

/// The gRPC code KEDA sees for a failed decision, so that its fallback engages:
///
/// | failure | code |
/// |---|---|
/// | Prometheus rejected the query (HTTP 400, `bad_data`) | `INVALID_ARGUMENT` |
/// | the query failed in Prometheus (HTTP 422), or gave no series, several, a non-number or NaN/±Inf; λ < 0 or a service time ≤ 0 | `FAILED_PRECONDITION` |
/// | Prometheus' timeout (503) or the client's | `DEADLINE_EXCEEDED` |
/// | Prometheus unreachable, no usable bearer token, an answer that is not Prometheus' | `UNAVAILABLE` |
/// | the queueing model's limits | `OUT_OF_RANGE` |
///
/// ```
/// use admit_scaler::decision::DecisionError;
/// use admit_scaler::prometheus::{QueryError, QueryErrorKind};
/// use admit_scaler::service::code;
///
/// let empty = QueryError { query: "up".into(), kind: QueryErrorKind::Empty };
/// assert_eq!(code(&DecisionError::Query(empty)), tonic::Code::FailedPrecondition);
/// ```
pub fn code(failure: &DecisionError<QueryError>) -> Code {
    use DecisionError::{Domain, Erlang, Query};
    use QueryErrorKind as Kind;
    match failure {
        Query(QueryError {
            kind: Kind::BadQuery { .. },
            ..
        }) => Code::InvalidArgument,
        Query(QueryError {
            kind:
                Kind::Execution { .. }
                | Kind::Empty
                | Kind::MultipleSeries { .. }
                | Kind::WrongType { .. }
                | Kind::NotFinite { .. },
            ..
        })
        | Domain { .. } => Code::FailedPrecondition,
        Query(QueryError {
            kind: Kind::Timeout { .. },
            ..
        }) => Code::DeadlineExceeded,
        Query(QueryError {
            kind: Kind::Unreachable { .. } | Kind::Credentials { .. } | Kind::BadResponse { .. },
            ..
        }) => Code::Unavailable,
        Erlang(_) => Code::OutOfRange,
    }
}

#[cfg(test)]
mod tests {
    use admit::erlang::ErlangError;

    use super::*;

    #[test]
    fn every_failure_has_its_code() {
        use QueryErrorKind::*;
        let text = String::new;
        let kinds = [
            (BadQuery { message: text() }, Code::InvalidArgument),
            (Execution { message: text() }, Code::FailedPrecondition),
            (Empty, Code::FailedPrecondition),
            (
                MultipleSeries {
                    count: 2,
                    labels: vec![],
                },
                Code::FailedPrecondition,
            ),
            (
                WrongType {
                    result_type: "matrix".into(),
                },
                Code::FailedPrecondition,
            ),
            (NotFinite { raw: "NaN".into() }, Code::FailedPrecondition),
            (Timeout { message: text() }, Code::DeadlineExceeded),
            (Unreachable { message: text() }, Code::Unavailable),
            (Credentials { message: text() }, Code::Unavailable),
            (
                BadResponse {
                    status: 502,
                    message: text(),
                },
                Code::Unavailable,
            ),
        ];
        for (kind, expected) in kinds {
            let label = kind.as_str();
            let failure = DecisionError::Query(QueryError {
                query: "up".into(),
                kind,
            });
            assert_eq!(code(&failure), expected, "{label}");
        }
        let domain = DecisionError::Domain {
            query: "up".into(),
            value: -1.0,
            expected: "a rate of at least 0 per second",
        };
        assert_eq!(code(&domain), Code::FailedPrecondition);
        let model = DecisionError::Erlang(ErlangError::OutOfRange {
            field: "offered_load",
            value: 1e13,
        });
        assert_eq!(code(&model), Code::OutOfRange);
    }
}
