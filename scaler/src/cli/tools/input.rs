//! Where `check`, `plan` and `replay` get triggers: a manifest file or `--metadata` flags.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::PathBuf;

use admit_scaler::excerpt::excerpt;
use admit_scaler::tools::manifest::{self, Trigger};
use clap::Args;

/// Where a trigger's metadata comes from.
#[derive(Debug, Args)]
pub(super) struct TriggerArgs {
    /// A file of Kubernetes manifests (`-` for stdin): every external trigger of its
    /// ScaledObjects and ScaledJobs. Repeat the flag to read several files.
    #[arg(
        short = 'f',
        long,
        value_name = "PATH",
        required_unless_present = "metadata",
        conflicts_with = "metadata"
    )]
    file: Vec<PathBuf>,
    /// The trigger's metadata, one `KEY=VALUE` per flag, as KEDA sends it.
    #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
    metadata: Vec<(String, String)>,
    /// The value of an environment variable of the scale target, for `<key>FromEnv` keys
    /// (KEDA resolves them from the target's containers; an unset or empty one drops the key).
    #[arg(long, value_name = "NAME=VALUE", value_parser = key_value)]
    env: Vec<(String, String)>,
}

/// `KEY=VALUE`, split at the first `=`; the value may be empty or contain `=`.
pub(super) fn key_value(raw: &str) -> Result<(String, String), String> {
    match raw.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!("{raw:?} is not KEY=VALUE")),
    }
}

/// One trigger to evaluate: where it came from, and its metadata as KEDA would send it.
#[derive(Debug)]
pub(super) struct Source {
    /// `kind namespace/name trigger N (type)`, or `--metadata`.
    pub(super) label: String,
    /// The ScaledObject's namespace, if the manifest gives one.
    pub(super) namespace: Option<String>,
    pub(super) name: String,
    pub(super) index: usize,
    pub(super) metadata: BTreeMap<String, String>,
    /// `<key>FromEnv` keys whose variable `--env` did not give: KEDA drops them.
    pub(super) unresolved: Vec<(String, String)>,
    /// From a manifest, not `--metadata`.
    pub(super) from_manifest: bool,
}

/// Every trigger the flags name, file by file.
pub(super) fn triggers(args: &TriggerArgs) -> Result<Vec<Source>, String> {
    if args.file.is_empty() {
        return Ok(vec![Source {
            label: "--metadata".to_owned(),
            namespace: None,
            name: String::new(),
            index: 0,
            metadata: args.metadata.iter().cloned().collect(),
            unresolved: Vec::new(),
            from_manifest: false,
        }]);
    }
    let env: BTreeMap<String, String> = args.env.iter().cloned().collect();
    let mut sources = Vec::new();
    for path in &args.file {
        let text = if path.as_os_str() == "-" {
            read_manifest(std::io::stdin()).map_err(|error| format!("stdin: {error}"))?
        } else {
            fs::File::open(path)
                .and_then(read_manifest)
                .map_err(|error| format!("{}: {error}", path.display()))?
        };
        let found = manifest::triggers(&text, &env)
            .map_err(|error| format!("{}: {error}", path.display()))?;
        sources.extend(found.into_iter().map(source));
    }
    Ok(sources)
}

/// The most bytes of manifests read from one file.
const MAX_MANIFEST_BYTES: u64 = 64 << 20;

/// A manifest's text, read up to [`MAX_MANIFEST_BYTES`].
fn read_manifest(reader: impl Read) -> std::io::Result<String> {
    let mut text = String::new();
    reader
        .take(MAX_MANIFEST_BYTES + 1)
        .read_to_string(&mut text)?;
    if text.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(std::io::Error::other(format!(
            "larger than {} MiB",
            MAX_MANIFEST_BYTES >> 20
        )));
    }
    Ok(text)
}

fn source(trigger: Trigger) -> Source {
    // A manifest's names are foreign text until the API server validates them.
    let namespace = trigger
        .namespace
        .as_deref()
        .map_or_else(|| "<namespace>".to_owned(), excerpt);
    let unresolved = trigger
        .from_env
        .iter()
        .filter(|(key, _)| !trigger.metadata.contains_key(key))
        .cloned()
        .collect();
    Source {
        label: format!(
            "{} {namespace}/{} trigger {} ({})",
            trigger.kind,
            excerpt(&trigger.name),
            trigger.index,
            trigger.trigger_type
        ),
        namespace: trigger.namespace.clone(),
        name: trigger.name,
        index: trigger.index,
        metadata: trigger.metadata,
        unresolved,
        from_manifest: true,
    }
}

/// The one trigger `select` (`NAME` or `NAME/INDEX`) picks, or the only one.
pub(super) fn one(args: &TriggerArgs, select: Option<&str>) -> Result<Source, String> {
    let mut all = triggers(args)?;
    let (name, index) = match select {
        None => (None, None),
        Some(select) => match select.rsplit_once('/') {
            Some((name, index)) => {
                let index = index
                    .parse::<usize>()
                    .map_err(|_| format!("--select {select:?}: {index:?} is not an index"))?;
                (Some(name), Some(index))
            }
            None => (Some(select), None),
        },
    };
    all.retain(|source| {
        name.is_none_or(|name| source.name == name)
            && index.is_none_or(|index| source.index == index)
    });
    match all.len() {
        1 => Ok(all.remove(0)),
        0 => Err("no external trigger matches --select".to_owned()),
        _ => Err(format!(
            "{} external triggers match; choose one with --select NAME/INDEX: {}",
            all.len(),
            all.iter()
                .map(|source| format!("{}/{}", excerpt(&source.name), source.index))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_are_read_up_to_the_limit() {
        let at_limit = std::io::repeat(b'a').take(MAX_MANIFEST_BYTES);
        assert_eq!(
            read_manifest(at_limit).unwrap().len() as u64,
            MAX_MANIFEST_BYTES
        );
        // An endless stream (a device, a pipe) stops one byte past it.
        let error = read_manifest(std::io::repeat(b'a')).unwrap_err();
        assert_eq!(error.to_string(), "larger than 64 MiB");
    }
}
