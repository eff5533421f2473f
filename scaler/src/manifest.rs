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
//!   nesting deeper than 256 levels are errors.
//!
//! # Example
//!
//! ```
//! use std::collections::BTreeMap;
//! use admit_scaler::{manifest, metadata::ScalerConfig};
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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::rc::Rc;

use yaml_rust2::parser::{Event, Parser, Tag};
use yaml_rust2::scanner::{Marker, ScanError, TScalarStyle};

/// The deepest nesting accepted, counting the levels that aliases add.
const MAX_DEPTH: usize = 256;

/// The most entries merge keys (`<<`) may copy in one stream.
const MAX_MERGED: usize = 1 << 20;

/// The handle `!!` stands for.
const CORE_TAG: &str = "tag:yaml.org,2002:";

/// The suffix KEDA resolves from the scale target's environment.
const FROM_ENV: &str = "FromEnv";

/// One external trigger of a manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trigger {
    /// `ScaledObject` or `ScaledJob`.
    pub kind: String,
    /// `metadata.name`, never empty.
    pub name: String,
    /// `metadata.namespace`, if given and not empty.
    pub namespace: Option<String>,
    /// The index in `spec.triggers`, counting every trigger (KEDA names the HPA metric
    /// `s<index>-<metricName>`).
    pub index: usize,
    /// `external` or `external-push`.
    pub trigger_type: String,
    /// The trigger's metadata as KEDA sends it: `<key>FromEnv` keys hold the variable's value,
    /// or are absent when it is unset or empty.
    pub metadata: BTreeMap<String, String>,
    /// Every `<key>FromEnv` key and the environment variable it names, in manifest order;
    /// those absent from [`metadata`](Self::metadata) were not resolved.
    pub from_env: Vec<(String, String)>,
}

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
    /// No `ScaledObject` or `ScaledJob` has an `external` or `external-push` trigger.
    NoExternalTrigger {
        /// How many `ScaledObject`s and `ScaledJob`s the stream has.
        scaled: usize,
    },
}

impl ManifestError {
    fn scan(error: ScanError) -> Self {
        let at = Position::from(*error.marker());
        ManifestError::yaml(at, error.info().to_owned())
    }

    fn yaml(at: Position, message: String) -> Self {
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
struct Position {
    line: usize,
    column: usize,
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

/// What a scalar resolves to, as Kubernetes reads YAML (YAML 1.1, go-yaml v2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    String,
    Number,
    Boolean,
    Null,
}

/// A mapping entry: the key's text and the value.
type Entry = (Rc<str>, Rc<Node>);

/// A trigger's metadata as KEDA sends it, and its `FromEnv` keys with their variables.
type Resolved = (BTreeMap<String, String>, Vec<(String, String)>);

/// A node of a document; aliases share nodes.
#[derive(Debug)]
struct Node {
    value: Value,
    at: Position,
    /// Levels, this one included, counting what aliases share.
    height: usize,
}

#[derive(Debug)]
enum Value {
    Scalar {
        /// The text, quotes removed and escapes resolved.
        text: String,
        kind: Kind,
        /// Plain style, no tag: `<<` is a merge key.
        plain: bool,
        /// An explicit core tag (`!!int`) gave the kind.
        tagged: bool,
    },
    Sequence(Vec<Rc<Node>>),
    /// Entries in manifest order, merged ones last; keys are unique.
    Mapping(Vec<Entry>),
}

impl Node {
    fn is_null(&self) -> bool {
        matches!(
            self.value,
            Value::Scalar {
                kind: Kind::Null,
                ..
            }
        )
    }

    /// `a number`, `a list`, …
    fn describe(&self) -> &'static str {
        match &self.value {
            Value::Scalar { kind, text, .. } => match kind {
                Kind::String => "a string",
                Kind::Number => "a number",
                Kind::Boolean => "a boolean",
                Kind::Null if text.is_empty() => "no value",
                Kind::Null => "null",
            },
            Value::Sequence(_) => "a list",
            Value::Mapping(_) => "a mapping",
        }
    }

    /// The value of `key`, unless absent or null.
    fn get(&self, key: &str) -> Option<&Node> {
        let Value::Mapping(entries) = &self.value else {
            return None;
        };
        entries
            .iter()
            .find(|(name, _)| &**name == key)
            .map(|(_, node)| &**node)
            .filter(|node| !node.is_null())
    }
}

/// A collection being built.
#[derive(Debug)]
enum Frame {
    Sequence {
        anchor: usize,
        at: Position,
        items: Vec<Rc<Node>>,
    },
    Mapping(MappingFrame),
}

#[derive(Debug)]
struct MappingFrame {
    anchor: usize,
    at: Position,
    entries: Vec<Entry>,
    keys: HashSet<Rc<str>>,
    /// The values of `<<` keys.
    merges: Vec<Rc<Node>>,
    /// The key awaiting its value: its text, whether it is `<<`, where it is.
    key: Option<(Rc<str>, bool, Position)>,
}

impl MappingFrame {
    fn insert(&mut self, node: Rc<Node>) -> Result<(), ManifestError> {
        match self.key.take() {
            None => {
                let Value::Scalar { text, plain, .. } = &node.value else {
                    return Err(ManifestError::yaml(
                        node.at,
                        format!("a mapping key must be a scalar, not {}", node.describe()),
                    ));
                };
                // A block mapping's start event comes after its first key: start there.
                if self.entries.is_empty() && self.merges.is_empty() && node.at < self.at {
                    self.at = node.at;
                }
                self.key = Some((text.as_str().into(), *plain && text == "<<", node.at));
            }
            Some((_, true, _)) => self.merges.push(node),
            Some((key, false, at)) => {
                if !self.keys.insert(Rc::clone(&key)) {
                    return Err(ManifestError::yaml(at, format!("duplicate key `{key}`")));
                }
                self.entries.push((key, node));
            }
        }
        Ok(())
    }

    /// Adds the merged entries that no explicit key (or earlier merge) gives.
    fn merge(&mut self, merged: &mut usize) -> Result<(), ManifestError> {
        for source in std::mem::take(&mut self.merges) {
            let sources = match &source.value {
                Value::Sequence(items) => items.as_slice(),
                _ => std::slice::from_ref(&source),
            };
            for item in sources {
                let Value::Mapping(entries) = &item.value else {
                    return Err(ManifestError::yaml(
                        item.at,
                        format!(
                            "a merge key (`<<`) takes a mapping or a list of mappings, not {}",
                            item.describe()
                        ),
                    ));
                };
                *merged = merged.saturating_add(entries.len());
                if *merged > MAX_MERGED {
                    return Err(ManifestError::yaml(
                        item.at,
                        format!("merge keys (`<<`) copy more than {MAX_MERGED} entries"),
                    ));
                }
                for (key, node) in entries {
                    if self.keys.insert(Rc::clone(key)) {
                        self.entries.push((Rc::clone(key), Rc::clone(node)));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Builds one document at a time from parser events, without recursion.
#[derive(Debug, Default)]
struct Builder {
    frames: Vec<Frame>,
    /// The current document's complete anchored nodes, by the parser's anchor id.
    anchors: HashMap<usize, Rc<Node>>,
    root: Option<Rc<Node>>,
    /// Entries copied by merge keys so far.
    merged: usize,
}

impl Builder {
    fn start_document(&mut self) {
        self.frames.clear();
        self.anchors.clear();
        self.root = None;
    }

    fn event(&mut self, event: Event, mark: Marker) -> Result<(), ManifestError> {
        let at = Position::from(mark);
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                let (kind, tagged) = resolve(&text, style, tag.as_ref());
                let plain = style == TScalarStyle::Plain && tag.is_none();
                let value = Value::Scalar {
                    text,
                    kind,
                    plain,
                    tagged,
                };
                self.complete(value, at, 1, anchor)
            }
            Event::Alias(id) => {
                let Some(node) = self.anchors.get(&id) else {
                    return Err(ManifestError::yaml(
                        at,
                        "an alias must follow its anchor's complete node, in the same document"
                            .to_owned(),
                    ));
                };
                let node = Rc::clone(node);
                self.insert(node)
            }
            Event::SequenceStart(anchor, _) => self.open(
                Frame::Sequence {
                    anchor,
                    at,
                    items: Vec::new(),
                },
                at,
            ),
            Event::MappingStart(anchor, _) => self.open(
                Frame::Mapping(MappingFrame {
                    anchor,
                    at,
                    entries: Vec::new(),
                    keys: HashSet::new(),
                    merges: Vec::new(),
                    key: None,
                }),
                at,
            ),
            Event::SequenceEnd | Event::MappingEnd => match self.frames.pop() {
                Some(Frame::Sequence { anchor, at, items }) => {
                    let height = items.iter().map(|item| item.height).max().unwrap_or(0) + 1;
                    self.complete(Value::Sequence(items), at, height, anchor)
                }
                Some(Frame::Mapping(mut frame)) => {
                    frame.merge(&mut self.merged)?;
                    let height = frame
                        .entries
                        .iter()
                        .map(|(_, node)| node.height)
                        .max()
                        .unwrap_or(0)
                        + 1;
                    let value = Value::Mapping(frame.entries);
                    self.complete(value, frame.at, height, frame.anchor)
                }
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }

    fn open(&mut self, frame: Frame, at: Position) -> Result<(), ManifestError> {
        if self.frames.len() >= MAX_DEPTH {
            return Err(too_deep(at));
        }
        self.frames.push(frame);
        Ok(())
    }

    fn complete(
        &mut self,
        value: Value,
        at: Position,
        height: usize,
        anchor: usize,
    ) -> Result<(), ManifestError> {
        let node = Rc::new(Node { value, at, height });
        // The parser numbers anchors from 1.
        if anchor != 0 {
            self.anchors.insert(anchor, Rc::clone(&node));
        }
        self.insert(node)
    }

    /// Adds a complete node to the open collection, or makes it the document.
    fn insert(&mut self, node: Rc<Node>) -> Result<(), ManifestError> {
        // Dropping a node recurses through its levels: keep them bounded, aliases included.
        if self.frames.len() + node.height > MAX_DEPTH {
            return Err(too_deep(node.at));
        }
        match self.frames.last_mut() {
            None => {
                self.root = Some(node);
                Ok(())
            }
            Some(Frame::Sequence { items, .. }) => {
                items.push(node);
                Ok(())
            }
            Some(Frame::Mapping(frame)) => frame.insert(node),
        }
    }
}

fn too_deep(at: Position) -> ManifestError {
    ManifestError::yaml(
        at,
        format!("nested more than {MAX_DEPTH} levels deep (counting aliases)"),
    )
}

/// A scalar's kind, and whether an explicit core tag gave it.
fn resolve(text: &str, style: TScalarStyle, tag: Option<&Tag>) -> (Kind, bool) {
    if let Some(tag) = tag {
        let kind = match (tag.handle.as_str(), tag.suffix.as_str()) {
            (CORE_TAG, "int" | "float") => Kind::Number,
            (CORE_TAG, "bool") => Kind::Boolean,
            (CORE_TAG, "null") => Kind::Null,
            // `!!str`, `!!binary`, local tags.
            _ => return (Kind::String, false),
        };
        return (kind, true);
    }
    if style != TScalarStyle::Plain {
        return (Kind::String, false);
    }
    (resolve_plain(text), false)
}

/// How go-yaml v2 (`sigs.k8s.io/yaml`, what `kubectl` uses) resolves an untagged plain scalar.
fn resolve_plain(text: &str) -> Kind {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Kind::Null,
        "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "true" | "True" | "TRUE" | "n"
        | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" | "false" | "False" | "FALSE" => {
            return Kind::Boolean;
        }
        ".nan" | ".NaN" | ".NAN" | ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF"
        | "-.inf" | "-.Inf" | "-.INF" => return Kind::Number,
        _ => {}
    }
    let number = match text.as_bytes().first() {
        Some(b'.') => finite_float(text),
        Some(b'0'..=b'9' | b'+' | b'-') => {
            let digits: String = text.chars().filter(|&c| c != '_').collect();
            go_integer(&digits) || (yaml_float_syntax(&digits) && finite_float(&digits))
        }
        _ => false,
    };
    if number { Kind::Number } else { Kind::String }
}

/// Go's `strconv.ParseFloat` succeeds: a finite decimal (callers exclude Rust's `inf`, `nan`).
fn finite_float(text: &str) -> bool {
    text.parse::<f64>().is_ok_and(f64::is_finite)
}

/// Go's `strconv.ParseInt(text, 0, 64)` or `ParseUint(text, 0, 64)` succeeds: an optional
/// sign (`ParseInt` only), then `0x`, `0o`, `0b`, `0` (octal) or decimal digits, in range.
fn go_integer(text: &str) -> bool {
    let (sign, rest) = match text.as_bytes().first() {
        Some(b'-') => (Some(true), &text[1..]),
        Some(b'+') => (Some(false), &text[1..]),
        _ => (None, text),
    };
    let prefixed = |lower: &str, upper: &str| {
        rest.strip_prefix(lower)
            .or_else(|| rest.strip_prefix(upper))
    };
    let (radix, digits) = if let Some(digits) = prefixed("0x", "0X") {
        (16, digits)
    } else if let Some(digits) = prefixed("0o", "0O") {
        (8, digits)
    } else if let Some(digits) = prefixed("0b", "0B") {
        (2, digits)
    } else if rest.len() > 1
        && let Some(digits) = rest.strip_prefix('0')
    {
        (8, digits)
    } else {
        (10, rest)
    };
    // `from_str_radix` would take a second sign.
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return false;
    }
    let Ok(magnitude) = u64::from_str_radix(digits, radix) else {
        return false;
    };
    match sign {
        None => true,
        Some(false) => magnitude <= i64::MAX as u64,
        Some(true) => magnitude <= i64::MIN.unsigned_abs(),
    }
}

/// go-yaml v2's float syntax: `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn yaml_float_syntax(text: &str) -> bool {
    let bytes = text.as_bytes();
    let digits = |from: usize| {
        bytes.get(from..).map_or(0, |rest| {
            rest.iter().take_while(|b| b.is_ascii_digit()).count()
        })
    };
    let mut i = usize::from(matches!(bytes.first(), Some(b'+' | b'-')));
    if bytes.get(i) == Some(&b'.') {
        let fraction = digits(i + 1);
        if fraction == 0 {
            return false;
        }
        i += 1 + fraction;
    } else {
        let whole = digits(i);
        if whole == 0 {
            return false;
        }
        i += whole;
        if bytes.get(i) == Some(&b'.') {
            i += 1;
            i += digits(i);
        }
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(bytes.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exponent = digits(i);
        if exponent == 0 {
            return false;
        }
        i += exponent;
    }
    i == bytes.len()
}

/// `prefix.key`, or `prefix["odd key"]`.
fn join(prefix: &str, key: &str) -> String {
    let simple = !key.is_empty()
        && key
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-');
    match (prefix.is_empty(), simple) {
        (true, true) => key.to_owned(),
        (false, true) => format!("{prefix}.{key}"),
        (_, false) => format!("{prefix}[{key:?}]"),
    }
}

/// Reads the documents' triggers.
#[derive(Debug)]
struct Reader<'e> {
    env: &'e BTreeMap<String, String>,
    /// The current document's index.
    document: usize,
    triggers: Vec<Trigger>,
    /// ScaledObjects and ScaledJobs seen.
    scaled: usize,
}

impl Reader<'_> {
    fn document(&mut self, root: &Node) -> Result<(), ManifestError> {
        if root.is_null() {
            return Ok(());
        }
        if !matches!(root.value, Value::Mapping(_)) {
            return Err(ManifestError::NotAMapping {
                document: self.document,
                found: root.describe(),
                line: root.at.line,
                column: root.at.column,
            });
        }
        self.object(root, "", true)
    }

    /// A Kubernetes object at `prefix` (`""`, or `items[3]` in a `List`).
    fn object(&mut self, object: &Node, prefix: &str, top: bool) -> Result<(), ManifestError> {
        let kind = self.string(
            self.required(object, prefix, "kind")?,
            &join(prefix, "kind"),
        )?;
        match kind {
            "ScaledObject" | "ScaledJob" => {
                self.scaled += 1;
                self.scaled_object(object, prefix, kind)
            }
            list if top && list.ends_with("List") => {
                let path = join(prefix, "items");
                let Some(items) = object.get("items") else {
                    return Ok(());
                };
                for (i, item) in self.sequence(items, &path)?.iter().enumerate() {
                    let path = format!("{path}[{i}]");
                    self.mapping(item, &path)?;
                    self.object(item, &path, false)?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn scaled_object(
        &mut self,
        object: &Node,
        prefix: &str,
        kind: &str,
    ) -> Result<(), ManifestError> {
        let path = join(prefix, "metadata");
        let metadata = self.required(object, prefix, "metadata")?;
        self.mapping(metadata, &path)?;
        let name_path = join(&path, "name");
        let name = self.string(self.required(metadata, &path, "name")?, &name_path)?;
        if name.is_empty() {
            return Err(self.missing(metadata, name_path));
        }
        let namespace = match metadata.get("namespace") {
            Some(namespace) => Some(self.string(namespace, &join(&path, "namespace"))?),
            None => None,
        }
        .filter(|namespace| !namespace.is_empty());

        let path = join(prefix, "spec");
        let spec = self.required(object, prefix, "spec")?;
        self.mapping(spec, &path)?;
        let path = join(&path, "triggers");
        let list = self.sequence(
            self.required(spec, &join(prefix, "spec"), "triggers")?,
            &path,
        )?;
        for (index, trigger) in list.iter().enumerate() {
            let path = format!("{path}[{index}]");
            self.mapping(trigger, &path)?;
            let trigger_type =
                self.string(self.required(trigger, &path, "type")?, &join(&path, "type"))?;
            if !matches!(trigger_type, "external" | "external-push") {
                continue;
            }
            let (metadata, from_env) = self.trigger_metadata(trigger, &path)?;
            self.triggers.push(Trigger {
                kind: kind.to_owned(),
                name: name.to_owned(),
                namespace: namespace.map(str::to_owned),
                index,
                trigger_type: trigger_type.to_owned(),
                metadata,
                from_env,
            });
        }
        Ok(())
    }

    /// The trigger's `metadata` as KEDA sends it, and its `FromEnv` references.
    fn trigger_metadata(&self, trigger: &Node, prefix: &str) -> Result<Resolved, ManifestError> {
        let path = join(prefix, "metadata");
        let node = self.required(trigger, prefix, "metadata")?;
        let mut metadata = BTreeMap::new();
        let mut from_env = Vec::new();
        for (key, value) in self.mapping(node, &path)? {
            let value = self.string(value, &join(&path, key))?;
            if key.ends_with(FROM_ENV) {
                from_env.push((key.to_string(), value.to_owned()));
                if let Some(resolved) = self.env.get(value).filter(|v| !v.is_empty()) {
                    metadata.insert(key.to_string(), resolved.clone());
                }
            } else {
                metadata.insert(key.to_string(), value.to_owned());
            }
        }
        Ok((metadata, from_env))
    }

    /// `parent`'s `key`, unless absent or null.
    fn required<'n>(
        &self,
        parent: &'n Node,
        prefix: &str,
        key: &str,
    ) -> Result<&'n Node, ManifestError> {
        parent
            .get(key)
            .ok_or_else(|| self.missing(parent, join(prefix, key)))
    }

    fn missing(&self, parent: &Node, path: String) -> ManifestError {
        ManifestError::MissingField {
            document: self.document,
            path,
            line: parent.at.line,
            column: parent.at.column,
        }
    }

    fn wrong(
        &self,
        node: &Node,
        path: &str,
        expected: &'static str,
        hint: Option<String>,
    ) -> ManifestError {
        ManifestError::WrongType {
            document: self.document,
            path: path.to_owned(),
            expected,
            found: node.describe(),
            hint,
            line: node.at.line,
            column: node.at.column,
        }
    }

    fn string<'n>(&self, node: &'n Node, path: &str) -> Result<&'n str, ManifestError> {
        match &node.value {
            Value::Scalar {
                text,
                kind: Kind::String,
                ..
            } => Ok(text),
            Value::Scalar { text, tagged, .. } => {
                let hint = if *tagged {
                    Some(format!("drop the tag and quote it: {text:?}"))
                } else if text.is_empty() {
                    None
                } else {
                    Some(format!("quote it: {text:?}"))
                };
                Err(self.wrong(node, path, "a string", hint))
            }
            _ => Err(self.wrong(node, path, "a string", None)),
        }
    }

    fn mapping<'n>(&self, node: &'n Node, path: &str) -> Result<&'n [Entry], ManifestError> {
        match &node.value {
            Value::Mapping(entries) => Ok(entries),
            _ => Err(self.wrong(node, path, "a mapping", None)),
        }
    }

    fn sequence<'n>(&self, node: &'n Node, path: &str) -> Result<&'n [Rc<Node>], ManifestError> {
        match &node.value {
            Value::Sequence(items) => Ok(items),
            _ => Err(self.wrong(node, path, "a list", None)),
        }
    }
}

#[cfg(test)]
mod tests;
