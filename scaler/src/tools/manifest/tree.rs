//! The document tree, built one parser event at a time (no recursion), with aliases shared
//! and merges bounded.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use yaml_rust2::parser::Event;
use yaml_rust2::scanner::{Marker, TScalarStyle};

use super::error::{ManifestError, Position};
use super::scalar::{Kind, resolve};

/// The deepest nesting accepted, counting the levels that aliases add.
const MAX_DEPTH: usize = 256;

/// The most entries merge keys (`<<`) may copy in one stream.
const MAX_MERGED: usize = 1 << 20;

/// A mapping entry: the key's text and the value.
pub(super) type Entry = (Rc<str>, Rc<Node>);

/// A node of a document; aliases share nodes.
#[derive(Debug)]
pub(super) struct Node {
    pub(super) value: Value,
    pub(super) at: Position,
    /// Levels, this one included, counting what aliases share.
    pub(super) height: usize,
}

#[derive(Debug)]
pub(super) enum Value {
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
    pub(super) fn is_null(&self) -> bool {
        matches!(
            self.value,
            Value::Scalar {
                kind: Kind::Null,
                ..
            }
        )
    }

    /// `a number`, `a list`, …
    pub(super) fn describe(&self) -> &'static str {
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
    pub(super) fn get(&self, key: &str) -> Option<&Node> {
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
pub(super) enum Frame {
    Sequence {
        anchor: usize,
        at: Position,
        items: Vec<Rc<Node>>,
    },
    Mapping(MappingFrame),
}

#[derive(Debug)]
pub(super) struct MappingFrame {
    pub(super) anchor: usize,
    pub(super) at: Position,
    pub(super) entries: Vec<Entry>,
    pub(super) keys: HashSet<Rc<str>>,
    /// The values of `<<` keys.
    pub(super) merges: Vec<Rc<Node>>,
    /// The key awaiting its value: its text, whether it is `<<`, where it is.
    pub(super) key: Option<(Rc<str>, bool, Position)>,
}

impl MappingFrame {
    pub(super) fn insert(&mut self, node: Rc<Node>) -> Result<(), ManifestError> {
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
    pub(super) fn merge(&mut self, merged: &mut usize) -> Result<(), ManifestError> {
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
pub(super) struct Builder {
    pub(super) frames: Vec<Frame>,
    /// The current document's complete anchored nodes, by the parser's anchor id.
    pub(super) anchors: HashMap<usize, Rc<Node>>,
    pub(super) root: Option<Rc<Node>>,
    /// Entries copied by merge keys so far.
    pub(super) merged: usize,
}

impl Builder {
    pub(super) fn start_document(&mut self) {
        self.frames.clear();
        self.anchors.clear();
        self.root = None;
    }

    pub(super) fn event(&mut self, event: Event, mark: Marker) -> Result<(), ManifestError> {
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

    pub(super) fn open(&mut self, frame: Frame, at: Position) -> Result<(), ManifestError> {
        if self.frames.len() >= MAX_DEPTH {
            return Err(too_deep(at));
        }
        self.frames.push(frame);
        Ok(())
    }

    pub(super) fn complete(
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
    pub(super) fn insert(&mut self, node: Rc<Node>) -> Result<(), ManifestError> {
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

pub(super) fn too_deep(at: Position) -> ManifestError {
    ManifestError::yaml(
        at,
        format!("nested more than {MAX_DEPTH} levels deep (counting aliases)"),
    )
}
