//! Why a metadata map was refused.

use std::fmt;

/// Why a metadata map was refused: one or more [`Problem`]s.
#[derive(Clone, Debug, PartialEq)]
pub struct MetadataError {
    pub(super) problems: Vec<Problem>,
    /// Unknown keys beyond those listed in `problems`.
    pub(super) unlisted_unknown: usize,
}

impl MetadataError {
    /// Every problem found, in a fixed order: unknown keys (at most eight), then each known
    /// key's, then conflicts. Never empty.
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    /// How many more unknown keys there were than [`problems`](Self::problems) lists.
    pub fn unlisted_unknown_keys(&self) -> usize {
        self.unlisted_unknown
    }
}

impl fmt::Display for MetadataError {
    /// One problem per line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, problem) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{problem}")?;
        }
        if self.unlisted_unknown > 0 {
            write!(f, "\nand {} more unknown keys", self.unlisted_unknown)?;
        }
        Ok(())
    }
}

impl std::error::Error for MetadataError {}

/// One thing wrong with a metadata map.
///
/// Keys are named as written in the map (`<key>` or `<key>FromEnv`), except in
/// [`Missing`](Self::Missing) and [`Duplicate`](Self::Duplicate), which name the plain key.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Problem {
    /// A required key is absent.
    Missing {
        /// The key.
        key: &'static str,
    },
    /// A key the scaler does not know.
    Unknown {
        /// The key as given, as an [excerpt](crate::excerpt::excerpt).
        key: String,
        /// Its value as given, as an [excerpt](crate::excerpt::excerpt).
        value: String,
        /// The known key it matches ignoring ASCII case, if any.
        suggestion: Option<&'static str>,
    },
    /// Both `key` and `keyFromEnv` are present.
    Duplicate {
        /// The plain key.
        key: &'static str,
    },
    /// A present value that does not parse or is out of range.
    Invalid {
        /// The key.
        key: &'static str,
        /// The value as given, as an [excerpt](crate::excerpt::excerpt): at most 160
        /// characters, invisible characters escaped.
        value: String,
        /// What the value should have been.
        expected: &'static str,
    },
    /// Two individually valid values that contradict each other.
    Conflict {
        /// The two keys.
        keys: (&'static str, &'static str),
        /// What contradicts.
        message: String,
    },
}

impl Problem {
    /// The key the problem is about (for a conflict, the first of its two keys).
    pub fn key(&self) -> &str {
        match self {
            Problem::Missing { key }
            | Problem::Duplicate { key }
            | Problem::Invalid { key, .. } => key,
            Problem::Unknown { key, .. } => key,
            Problem::Conflict { keys, .. } => keys.0,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Missing { key } => write!(f, "missing required key `{key}`"),
            Problem::Unknown {
                key,
                value,
                suggestion,
            } => {
                write!(f, "unknown key `{key}` (value \"{value}\")")?;
                if let Some(suggestion) = suggestion {
                    write!(f, "; did you mean `{suggestion}`?")?;
                }
                Ok(())
            }
            Problem::Duplicate { key } => {
                write!(f, "both `{key}` and `{key}FromEnv` are set; set only one")
            }
            Problem::Invalid {
                key,
                value,
                expected,
            } => write!(f, "`{key}`: invalid value \"{value}\", expected {expected}"),
            Problem::Conflict { keys, message } => {
                write!(f, "`{}` and `{}` conflict: {message}", keys.0, keys.1)
            }
        }
    }
}
