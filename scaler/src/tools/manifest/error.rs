//! Why a manifest was refused, and where.

use std::fmt;

use yaml_rust2::scanner::{Marker, ScanError};

/// Why a manifest was refused.
///
/// `document` counts the stream's documents from 0, empty ones included; messages count them
/// from 1. Lines and columns count from 1.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ManifestError {
    /// Invalid YAML, or YAML without a Kubernetes meaning (duplicate or non-scalar keys, bad
    /// aliases or merges), or beyond a limit (nesting depth, merged entries).
    Yaml {
        /// What is wrong.
        message: String,
        /// Where.
        line: usize,
        /// Where.
        column: usize,
    },
    /// A document that is not a mapping (a Kubernetes object).
    NotAMapping {
        /// The document.
        document: usize,
        /// What it is instead, e.g. `a list`.
        found: &'static str,
        /// Where the document starts.
        line: usize,
        /// Where the document starts.
        column: usize,
    },
    /// A required field is absent, null or (for `metadata.name`) empty.
    MissingField {
        /// The document.
        document: usize,
        /// The field, e.g. `spec.triggers[1].metadata`.
        path: String,
        /// Where the mapping that lacks it starts.
        line: usize,
        /// Where the mapping that lacks it starts.
        column: usize,
    },
    /// A field of the wrong type, e.g. an unquoted number as a metadata value.
    WrongType {
        /// The document.
        document: usize,
        /// The field, e.g. `spec.triggers[0].metadata.targetSL`.
        path: String,
        /// What it should be, e.g. `a string`.
        expected: &'static str,
        /// What it is, e.g. `a number`.
        found: &'static str,
        /// How to fix it, e.g. `quote it: "0.95"`.
        hint: Option<String>,
        /// Where the value is.
        line: usize,
        /// Where the value is.
        column: usize,
    },
    /// The stream asks for more than a reader does, counting each time an alias repeats a
    /// part ([`MAX_TRIGGERS`](super::MAX_TRIGGERS),
    /// [`MAX_METADATA_BYTES`](super::MAX_METADATA_BYTES)).
    TooLarge {
        /// Which limit, e.g. `more than 10000 triggers`.
        limit: String,
    },
    /// No `ScaledObject` or `ScaledJob` has an `external` or `external-push` trigger.
    NoExternalTrigger {
        /// How many `ScaledObject`s and `ScaledJob`s the stream has.
        scaled: usize,
    },
}

impl ManifestError {
    pub(super) fn scan(error: ScanError) -> Self {
        let at = Position::from(*error.marker());
        ManifestError::yaml(at, error.info().to_owned())
    }

    pub(super) fn yaml(at: Position, message: String) -> Self {
        ManifestError::Yaml {
            message,
            line: at.line,
            column: at.column,
        }
    }
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ManifestError::Yaml {
                message,
                line,
                column,
            } => write!(f, "line {line}, column {column}: invalid YAML: {message}"),
            ManifestError::NotAMapping {
                document,
                found,
                line,
                column,
            } => write!(
                f,
                "document {}, line {line}, column {column}: expected a mapping (a Kubernetes \
                 object), found {found}",
                document + 1
            ),
            ManifestError::MissingField {
                document,
                path,
                line,
                column,
            } => write!(
                f,
                "document {}, line {line}, column {column}: missing or empty `{path}`",
                document + 1
            ),
            ManifestError::WrongType {
                document,
                path,
                expected,
                found,
                hint,
                line,
                column,
            } => {
                write!(
                    f,
                    "document {}, line {line}, column {column}: `{path}`: expected {expected}, \
                     found {found}",
                    document + 1
                )?;
                if let Some(hint) = hint {
                    write!(f, "; {hint}")?;
                }
                Ok(())
            }
            ManifestError::TooLarge { limit } => write!(
                f,
                "the stream lists {limit}, counting each time an alias repeats them"
            ),
            ManifestError::NoExternalTrigger { scaled: 0 } => {
                f.write_str("no ScaledObject or ScaledJob found")
            }
            ManifestError::NoExternalTrigger { scaled: 1 } => f.write_str(
                "the ScaledObject or ScaledJob found has no `external` or `external-push` trigger",
            ),
            ManifestError::NoExternalTrigger { scaled } => write!(
                f,
                "none of the {scaled} ScaledObjects and ScaledJobs has an `external` or \
                 `external-push` trigger"
            ),
        }
    }
}

impl std::error::Error for ManifestError {}

/// A place in the text, from 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Position {
    pub(super) line: usize,
    pub(super) column: usize,
}

impl From<Marker> for Position {
    /// yaml-rust2 counts lines from 1 and columns from 0.
    fn from(mark: Marker) -> Self {
        Position {
            line: mark.line(),
            column: mark.col().saturating_add(1),
        }
    }
}
