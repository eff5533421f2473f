//! Reading ScaledObjects and their external triggers out of the tree.

use std::collections::BTreeMap;
use std::rc::Rc;

use super::error::ManifestError;
use super::scalar::Kind;
use super::tree::{Entry, Node, Value};
use crate::excerpt::excerpt;

/// The most triggers one stream may list, counting each time an alias repeats one: aliases
/// of aliased lists multiply, and a few kilobytes of YAML could otherwise ask for billions.
pub const MAX_TRIGGERS: usize = 10_000;

/// The most bytes of trigger metadata (keys and values) one stream may produce, counting
/// each time an alias repeats them.
pub const MAX_METADATA_BYTES: usize = 16 << 20;

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

/// A trigger's metadata as KEDA sends it, and its `FromEnv` keys with their variables.
pub(super) type Resolved = (BTreeMap<String, String>, Vec<(String, String)>);

/// `prefix.key`, or `prefix["odd key"]`.
pub(super) fn join(prefix: &str, key: &str) -> String {
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
pub(super) struct Reader<'e> {
    pub(super) env: &'e BTreeMap<String, String>,
    /// The current document's index.
    pub(super) document: usize,
    pub(super) triggers: Vec<Trigger>,
    /// ScaledObjects and ScaledJobs seen.
    pub(super) scaled: usize,
    /// Triggers looked at, and metadata bytes copied, against the stream's budget.
    pub(super) triggers_seen: usize,
    pub(super) metadata_bytes: usize,
}

impl Reader<'_> {
    pub(super) fn document(&mut self, root: &Node) -> Result<(), ManifestError> {
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
    pub(super) fn object(
        &mut self,
        object: &Node,
        prefix: &str,
        top: bool,
    ) -> Result<(), ManifestError> {
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

    pub(super) fn scaled_object(
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
            self.triggers_seen += 1;
            if self.triggers_seen > MAX_TRIGGERS {
                return Err(ManifestError::TooLarge {
                    limit: format!("more than {MAX_TRIGGERS} triggers"),
                });
            }
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
    pub(super) fn trigger_metadata(
        &mut self,
        trigger: &Node,
        prefix: &str,
    ) -> Result<Resolved, ManifestError> {
        let path = join(prefix, "metadata");
        let node = self.required(trigger, prefix, "metadata")?;
        let mut metadata = BTreeMap::new();
        let mut from_env = Vec::new();
        for (key, value) in self.mapping(node, &path)? {
            let value = self.string(value, &join(&path, key))?;
            self.metadata_bytes += key.len() + value.len();
            if self.metadata_bytes > MAX_METADATA_BYTES {
                return Err(ManifestError::TooLarge {
                    limit: format!(
                        "more than {} MiB of trigger metadata",
                        MAX_METADATA_BYTES >> 20
                    ),
                });
            }
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
    pub(super) fn required<'n>(
        &self,
        parent: &'n Node,
        prefix: &str,
        key: &str,
    ) -> Result<&'n Node, ManifestError> {
        parent
            .get(key)
            .ok_or_else(|| self.missing(parent, join(prefix, key)))
    }

    pub(super) fn missing(&self, parent: &Node, path: String) -> ManifestError {
        ManifestError::MissingField {
            document: self.document,
            path,
            line: parent.at.line,
            column: parent.at.column,
        }
    }

    pub(super) fn wrong(
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

    pub(super) fn string<'n>(&self, node: &'n Node, path: &str) -> Result<&'n str, ManifestError> {
        match &node.value {
            Value::Scalar {
                text,
                kind: Kind::String,
                ..
            } => Ok(text),
            Value::Scalar { text, tagged, .. } => {
                let hint = if *tagged {
                    Some(format!("drop the tag and quote it: \"{}\"", excerpt(text)))
                } else if text.is_empty() {
                    None
                } else {
                    Some(format!("quote it: \"{}\"", excerpt(text)))
                };
                Err(self.wrong(node, path, "a string", hint))
            }
            _ => Err(self.wrong(node, path, "a string", None)),
        }
    }

    pub(super) fn mapping<'n>(
        &self,
        node: &'n Node,
        path: &str,
    ) -> Result<&'n [Entry], ManifestError> {
        match &node.value {
            Value::Mapping(entries) => Ok(entries),
            _ => Err(self.wrong(node, path, "a mapping", None)),
        }
    }

    pub(super) fn sequence<'n>(
        &self,
        node: &'n Node,
        path: &str,
    ) -> Result<&'n [Rc<Node>], ManifestError> {
        match &node.value {
            Value::Sequence(items) => Ok(items),
            _ => Err(self.wrong(node, path, "a list", None)),
        }
    }
}
