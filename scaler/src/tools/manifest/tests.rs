//! Manifests as written in practice, every error, YAML resolution, limits and hostile input.

use super::scalar::{Kind, go_integer, resolve_plain};
use super::*;
use crate::metadata::ScalerConfig;

/// A ScaledObject with a Prometheus trigger (ignored) and an external one.
const SCALED_OBJECT: &str = r#"apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: checkout
  namespace: shop
  labels:
    app: checkout
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: checkout
  pollingInterval: 15
  cooldownPeriod: 300
  minReplicaCount: 1
  maxReplicaCount: 50
  advanced:
    horizontalPodAutoscalerConfig:
      behavior:
        scaleDown:
          stabilizationWindowSeconds: 60
  triggers:
    - type: prometheus
      metadata:
        serverAddress: http://prometheus.monitoring:9090
        query: sum(rate(http_requests_total{app="checkout"}[1m]))
        threshold: "100"
    - type: external
      name: erlang
      metadata:
        scalerAddress: admit-scaler.keda.svc:9090
        prometheusURL: http://prometheus.monitoring:9090
        arrivalRateQuery: sum(rate(http_requests_total{app="checkout"}[1m]))
        serviceTimeQuery: |
          sum(rate(http_request_duration_seconds_sum{app="checkout"}[1m]))
          / sum(rate(http_request_duration_seconds_count{app="checkout"}[1m]))
        waitThresholdSeconds: "0.050"
        targetSL: '0.95'
        concurrencyPerReplica: "8"
        maxReplicas: "40"
"#;

fn no_env() -> BTreeMap<String, String> {
    BTreeMap::new()
}

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect()
}

fn read(yaml: &str) -> Vec<Trigger> {
    triggers(yaml, &no_env()).unwrap_or_else(|error| panic!("{error}"))
}

fn error(yaml: &str) -> ManifestError {
    match triggers(yaml, &no_env()) {
        Ok(found) => panic!("accepted {found:?}"),
        Err(error) => error,
    }
}

/// The 1-based line of the first line containing `needle`.
fn line_of(yaml: &str, needle: &str) -> usize {
    yaml.lines()
        .position(|line| line.contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} not in the manifest"))
        + 1
}

/// A minimal valid ScaledObject `name` whose external trigger has `metadata` (indented YAML
/// lines without the indentation).
fn scaled_object(name: &str, metadata: &[&str]) -> String {
    let mut yaml = format!(
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata:\n  name: {name}\nspec:\n  \
         scaleTargetRef:\n    name: {name}\n  triggers:\n    - type: external\n      metadata:\n"
    );
    for line in metadata {
        yaml.push_str("        ");
        yaml.push_str(line);
        yaml.push('\n');
    }
    yaml
}

/// The metadata of the only trigger of a [`scaled_object`] with these metadata lines.
fn metadata_of(lines: &[&str]) -> BTreeMap<String, String> {
    let mut found = read(&scaled_object("app", lines));
    assert_eq!(found.len(), 1);
    found.remove(0).metadata
}

/// The error for a [`scaled_object`] with these metadata lines.
fn metadata_error(lines: &[&str]) -> ManifestError {
    error(&scaled_object("app", lines))
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    env(pairs)
}

#[test]
fn realistic_scaled_object() {
    let found = read(SCALED_OBJECT);
    assert_eq!(
        found,
        vec![Trigger {
            kind: "ScaledObject".to_owned(),
            name: "checkout".to_owned(),
            namespace: Some("shop".to_owned()),
            index: 1,
            trigger_type: "external".to_owned(),
            metadata: map(&[
                ("scalerAddress", "admit-scaler.keda.svc:9090"),
                ("prometheusURL", "http://prometheus.monitoring:9090"),
                (
                    "arrivalRateQuery",
                    r#"sum(rate(http_requests_total{app="checkout"}[1m]))"#
                ),
                (
                    "serviceTimeQuery",
                    "sum(rate(http_request_duration_seconds_sum{app=\"checkout\"}[1m]))\n\
                     / sum(rate(http_request_duration_seconds_count{app=\"checkout\"}[1m]))\n"
                ),
                ("waitThresholdSeconds", "0.050"),
                ("targetSL", "0.95"),
                ("concurrencyPerReplica", "8"),
                ("maxReplicas", "40"),
            ]),
            from_env: Vec::new(),
        }]
    );
}

#[test]
fn end_to_end_with_the_metadata_validator() {
    let found = read(SCALED_OBJECT);
    let config =
        ScalerConfig::from_metadata(&found[0].metadata).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(config.wait_threshold_seconds, 0.05);
    assert_eq!(config.target_sl, 0.95);
    assert_eq!(config.concurrency_per_replica, 8);
    assert_eq!(config.max_replicas, 40);
    assert!(
        config
            .service_time_query
            .starts_with("sum(rate(http_request_duration")
    );

    // A FromEnv URL resolved from `--env` passes too.
    let yaml = SCALED_OBJECT.replace("prometheusURL:", "prometheusURLFromEnv:");
    let yaml = yaml.replace(
        "http://prometheus.monitoring:9090\n        arrivalRateQuery",
        "PROMETHEUS_URL\n        arrivalRateQuery",
    );
    let found = triggers(&yaml, &env(&[("PROMETHEUS_URL", "https://prom:9443")])).unwrap();
    let config = ScalerConfig::from_metadata(&found[0].metadata).unwrap();
    assert_eq!(config.prometheus_url, "https://prom:9443");

    // Unresolved, KEDA drops the key and the validator reports it missing.
    let found = triggers(&yaml, &no_env()).unwrap();
    let error = ScalerConfig::from_metadata(&found[0].metadata).unwrap_err();
    assert!(
        error.problems().iter().any(|p| p.key() == "prometheusURL"),
        "{error}"
    );
}

#[test]
fn multi_document_with_a_deployment() {
    const DEPLOYMENT: &str = r#"# the app
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: checkout
spec:
  replicas: 2
  template:
    spec:
      containers:
        - name: app
          env:
            - name: X
              value: "1"
---
---
# only a comment
---
"#;
    const SERVICE: &str = "apiVersion: v1\nkind: Service\nmetadata:\n  name: checkout\n";
    let second = scaled_object("second", &["targetSL: \"0.9\""]);
    let yaml = format!("{DEPLOYMENT}{SCALED_OBJECT}...\n---\n{SERVICE}---\n{second}");
    let found = read(&yaml);
    assert_eq!(found.len(), 2);
    assert_eq!((found[0].name.as_str(), found[0].index), ("checkout", 1));
    assert_eq!((found[1].name.as_str(), found[1].index), ("second", 0));
    assert_eq!(found[1].namespace, None);
    assert_eq!(found[1].metadata, map(&[("targetSL", "0.9")]));
}

#[test]
fn scaled_job_and_external_push() {
    let yaml = "apiVersion: keda.sh/v1alpha1\nkind: ScaledJob\nmetadata:\n  name: worker\n  \
                namespace: batch\nspec:\n  jobTargetRef:\n    template:\n      spec:\n        \
                containers: [{name: w, image: w}]\n  triggers:\n  - type: external-push\n    \
                metadata: {scalerAddress: 'admit:9090', targetSL: \"0.99\"}\n  - type: cpu\n    \
                metadata: {type: Utilization, value: \"50\"}\n  - type: external\n    \
                metadata: {}\n";
    let found = read(yaml);
    assert_eq!(found.len(), 2);
    assert_eq!(found[0].kind, "ScaledJob");
    assert_eq!(found[0].namespace.as_deref(), Some("batch"));
    assert_eq!(found[0].trigger_type, "external-push");
    assert_eq!(found[0].index, 0);
    assert_eq!(
        found[0].metadata,
        map(&[("scalerAddress", "admit:9090"), ("targetSL", "0.99")])
    );
    assert_eq!(
        (found[1].index, found[1].trigger_type.as_str()),
        (2, "external")
    );
    assert!(found[1].metadata.is_empty());
}

#[test]
fn list_items() {
    let item = scaled_object("listed", &["targetSL: \"0.9\""]);
    let indented: String = item.lines().map(|line| format!("    {line}\n")).collect();
    let yaml = format!("apiVersion: v1\nkind: List\nitems:\n  -\n{indented}");
    let found = read(&yaml);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].name, "listed");

    let yaml = "apiVersion: keda.sh/v1alpha1\nkind: ScaledObjectList\nitems:\n  \
                - kind: ScaledObject\n    spec: {}\n";
    assert_eq!(
        error(yaml),
        ManifestError::MissingField {
            document: 0,
            path: "items[0].metadata".to_owned(),
            line: 4,
            column: 5,
        }
    );
    assert_eq!(
        error("kind: List\nitems:\n  - 3\n"),
        ManifestError::WrongType {
            document: 0,
            path: "items[0]".to_owned(),
            expected: "a mapping",
            found: "a number",
            hint: None,
            line: 3,
            column: 5,
        }
    );
    // An empty list has no trigger.
    assert_eq!(
        error("kind: List\nitems: []\n"),
        ManifestError::NoExternalTrigger { scaled: 0 }
    );
}

#[test]
fn unquoted_number_is_refused_with_a_hint() {
    let yaml = scaled_object("app", &["waitThresholdSeconds: \"0.05\"", "targetSL: 0.95"]);
    let error = error(&yaml);
    assert_eq!(
        error,
        ManifestError::WrongType {
            document: 0,
            path: "spec.triggers[0].metadata.targetSL".to_owned(),
            expected: "a string",
            found: "a number",
            hint: Some("quote it: \"0.95\"".to_owned()),
            line: line_of(&yaml, "targetSL"),
            column: 19,
        }
    );
    assert_eq!(
        error.to_string(),
        "document 1, line 12, column 19: `spec.triggers[0].metadata.targetSL`: expected a \
         string, found a number; quote it: \"0.95\""
    );
}

#[test]
fn other_non_strings_are_refused() {
    let cases: [(&str, &str, Option<&str>); 10] = [
        ("minReplicas: 2", "a number", Some("quote it: \"2\"")),
        ("targetSL: 0.950", "a number", Some("quote it: \"0.950\"")),
        ("targetSL: 1e-3", "a number", Some("quote it: \"1e-3\"")),
        ("enableTLS: true", "a boolean", Some("quote it: \"true\"")),
        ("enableTLS: yes", "a boolean", Some("quote it: \"yes\"")),
        ("enableTLS: off", "a boolean", Some("quote it: \"off\"")),
        ("metricName: ~", "null", Some("quote it: \"~\"")),
        ("metricName:", "no value", None),
        (
            "maxReplicas: !!int \"4\"",
            "a number",
            Some("drop the tag and quote it: \"4\""),
        ),
        ("metricName: [a, b]", "a list", None),
    ];
    for (line, found, hint) in cases {
        let key = line.split(':').next().unwrap();
        match metadata_error(&[line]) {
            ManifestError::WrongType {
                path,
                expected,
                found: actual,
                hint: actual_hint,
                ..
            } => {
                assert_eq!(path, format!("spec.triggers[0].metadata.{key}"), "{line}");
                assert_eq!(expected, "a string", "{line}");
                assert_eq!(actual, found, "{line}");
                assert_eq!(actual_hint.as_deref(), hint, "{line}");
            }
            other => panic!("{line}: {other:?}"),
        }
    }
    match metadata_error(&["query:", "  nested: x"]) {
        ManifestError::WrongType { found, .. } => assert_eq!(found, "a mapping"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn strings_are_kept_exactly() {
    let metadata = metadata_of(&[
        "a: \"0.950\"",
        "b: '1e3'",
        "c: !!str 0.95",
        "d: http://x:9090/p?q=1",
        "e: \"  padded \"",
        "f: >-\n          folded\n          text",
        "g: 1.2.3",
        "h: 0x",
        "i: 12abc",
        "j: \"\"",
        "k: 2024-01-01",
        "l: 1:30",
        "m: \"yes\"",
        "n: -1-2",
        "o: 1e999",
    ]);
    assert_eq!(
        metadata,
        map(&[
            ("a", "0.950"),
            ("b", "1e3"),
            ("c", "0.95"),
            ("d", "http://x:9090/p?q=1"),
            ("e", "  padded "),
            ("f", "folded text"),
            ("g", "1.2.3"),
            ("h", "0x"),
            ("i", "12abc"),
            ("j", ""),
            ("k", "2024-01-01"),
            ("l", "1:30"),
            ("m", "yes"),
            ("n", "-1-2"),
            ("o", "1e999"),
        ])
    );
}

#[test]
fn plain_scalar_resolution_follows_go_yaml_v2() {
    let numbers = [
        "0",
        "-0",
        "+1",
        "42",
        "0755",
        "0x1F",
        "-0x1f",
        "0o17",
        "0b101",
        "-0b1",
        "1_000",
        "1.",
        ".5",
        "-.5",
        "+.5e3",
        "1e3",
        "1E+3",
        "6.02e-23",
        ".inf",
        "-.Inf",
        "+.INF",
        ".nan",
        "9223372036854775807",
        "-9223372036854775808",
        "18446744073709551615",
        "99999999999999999999",
        "08",
    ];
    for text in numbers {
        assert_eq!(resolve_plain(text), Kind::Number, "{text}");
    }
    for text in ["y", "Y", "yes", "NO", "On", "off", "True", "FALSE"] {
        assert_eq!(resolve_plain(text), Kind::Boolean, "{text}");
    }
    for text in ["", "~", "null", "Null", "NULL"] {
        assert_eq!(resolve_plain(text), Kind::Null, "{text}");
    }
    let strings = [
        "nan",
        "inf",
        ".",
        "+",
        "-",
        "-_",
        "1e",
        "e3",
        "0x",
        "0xG",
        "0o8",
        "0b2",
        "1.2.3",
        "1:30",
        "2024-01-01",
        "12abc",
        "0x1p-2",
        "+-1",
        "--1",
        "+0x-1",
        "1e999",
        "0xFFFFFFFFFFFFFFFFF",
        "9223372036854775808x",
        "yES",
        "nULL",
        "_1",
        "._5",
        "http://x",
    ];
    for text in strings {
        assert_eq!(resolve_plain(text), Kind::String, "{text}");
    }
    // Signed integers are `ParseInt`'s range; unsigned ones `ParseUint`'s, then floats.
    assert!(!go_integer("+9223372036854775808"));
    assert!(go_integer("-9223372036854775808"));
    assert!(!go_integer("-9223372036854775809"));
    assert!(go_integer("18446744073709551615"));
    assert!(!go_integer("18446744073709551616"));
}

#[test]
fn from_env_resolved() {
    let yaml = scaled_object(
        "app",
        &[
            "prometheusURLFromEnv: PROM_URL",
            "targetSLFromEnv: TARGET",
            "waitThresholdSeconds: \"0.1\"",
        ],
    );
    let found = triggers(
        &yaml,
        &env(&[
            ("PROM_URL", "http://prom:9090"),
            ("TARGET", "0.9"),
            ("OTHER", "x"),
        ]),
    )
    .unwrap();
    assert_eq!(
        found[0].metadata,
        map(&[
            ("prometheusURLFromEnv", "http://prom:9090"),
            ("targetSLFromEnv", "0.9"),
            ("waitThresholdSeconds", "0.1"),
        ])
    );
    assert_eq!(
        found[0].from_env,
        vec![
            ("prometheusURLFromEnv".to_owned(), "PROM_URL".to_owned()),
            ("targetSLFromEnv".to_owned(), "TARGET".to_owned()),
        ]
    );
}

#[test]
fn from_env_unresolved_or_empty_is_dropped() {
    let yaml = scaled_object(
        "app",
        &[
            "prometheusURLFromEnv: PROM_URL",
            "targetSLFromEnv: \"TARGET\"",
            "metricName: m",
        ],
    );
    for env in [no_env(), env(&[("PROM_URL", ""), ("TARGET", "")])] {
        let found = triggers(&yaml, &env).unwrap();
        assert_eq!(found[0].metadata, map(&[("metricName", "m")]));
        assert_eq!(
            found[0].from_env,
            vec![
                ("prometheusURLFromEnv".to_owned(), "PROM_URL".to_owned()),
                ("targetSLFromEnv".to_owned(), "TARGET".to_owned()),
            ]
        );
    }
    // Only one of the two set.
    let found = triggers(&yaml, &env(&[("TARGET", "0.9")])).unwrap();
    assert_eq!(
        found[0].metadata,
        map(&[("metricName", "m"), ("targetSLFromEnv", "0.9")])
    );
    assert_eq!(found[0].from_env.len(), 2);
}

#[test]
fn from_env_names_must_be_strings() {
    match metadata_error(&["targetSLFromEnv: 5"]) {
        ManifestError::WrongType { path, found, .. } => {
            assert_eq!(path, "spec.triggers[0].metadata.targetSLFromEnv");
            assert_eq!(found, "a number");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn no_external_trigger() {
    let yaml = SCALED_OBJECT.replace("type: external", "type: cpu");
    let error = error(&yaml);
    assert_eq!(error, ManifestError::NoExternalTrigger { scaled: 1 });
    assert_eq!(
        error.to_string(),
        "the ScaledObject or ScaledJob found has no `external` or `external-push` trigger"
    );
    assert_eq!(
        ManifestError::NoExternalTrigger { scaled: 3 }.to_string(),
        "none of the 3 ScaledObjects and ScaledJobs has an `external` or `external-push` trigger"
    );
    for yaml in [
        "",
        "\n# nothing\n",
        "---\n---\n",
        "kind: Deployment\nmetadata: {name: x}\n",
    ] {
        assert_eq!(
            self::error(yaml),
            ManifestError::NoExternalTrigger { scaled: 0 },
            "{yaml:?}"
        );
    }
    assert_eq!(
        ManifestError::NoExternalTrigger { scaled: 0 }.to_string(),
        "no ScaledObject or ScaledJob found"
    );
    // Trigger types are case-sensitive, as in KEDA.
    let yaml = SCALED_OBJECT.replace("type: external", "type: External");
    assert_eq!(
        self::error(&yaml),
        ManifestError::NoExternalTrigger { scaled: 1 }
    );
}

#[test]
fn syntax_error_has_its_line() {
    let yaml = "kind: ScaledObject\nmetadata:\n  name: app\nspec:\n  triggers:\n    \
                - type: external\n      metadata: {targetSL: \"0.9\"\n";
    match error(yaml) {
        ManifestError::Yaml { line, .. } => assert_eq!(line, 8),
        other => panic!("{other:?}"),
    }
    let yaml = "kind: ScaledObject\nmetadata:\n  name: app\n    bad: indent\n";
    let error = error(yaml);
    assert_eq!(
        error,
        ManifestError::Yaml {
            message: "mapping values are not allowed in this context".to_owned(),
            line: 4,
            column: 8,
        }
    );
    assert_eq!(
        error.to_string(),
        "line 4, column 8: invalid YAML: mapping values are not allowed in this context"
    );
    // A later document's error fails the stream, as with kubectl.
    let yaml = format!("{SCALED_OBJECT}---\nkey: \"unterminated\n");
    assert!(matches!(
        self::error(&yaml),
        ManifestError::Yaml { line, column: 6, .. } if line == SCALED_OBJECT.lines().count() + 2
    ));
    // Tabs are not indentation.
    assert!(matches!(
        self::error("kind: ScaledObject\nmetadata:\n\tname: app\n"),
        ManifestError::Yaml { line: 3, .. }
    ));
}

#[test]
fn non_mapping_documents() {
    let error = error("---\n- kind: ScaledObject\n");
    assert_eq!(
        error,
        ManifestError::NotAMapping {
            document: 0,
            found: "a list",
            line: 2,
            column: 1,
        }
    );
    assert_eq!(
        error.to_string(),
        "document 1, line 2, column 1: expected a mapping (a Kubernetes object), found a list"
    );
    let yaml = format!("{SCALED_OBJECT}---\njust text\n");
    assert_eq!(
        self::error(&yaml),
        ManifestError::NotAMapping {
            document: 1,
            found: "a string",
            line: SCALED_OBJECT.lines().count() + 2,
            column: 1,
        }
    );
    assert!(matches!(
        self::error("--- 42\n"),
        ManifestError::NotAMapping {
            found: "a number",
            ..
        }
    ));
}

#[test]
fn trigger_without_metadata() {
    let yaml = "kind: ScaledObject\nmetadata:\n  name: app\nspec:\n  triggers:\n    \
                - type: external\n      name: t\n";
    let error = error(yaml);
    assert_eq!(
        error,
        ManifestError::MissingField {
            document: 0,
            path: "spec.triggers[0].metadata".to_owned(),
            line: 6,
            column: 7,
        }
    );
    assert_eq!(
        error.to_string(),
        "document 1, line 6, column 7: missing or empty `spec.triggers[0].metadata`"
    );
    // A null map is no map.
    let yaml = format!("{yaml}      metadata:\n");
    assert!(matches!(
        self::error(&yaml),
        ManifestError::MissingField { path, .. } if path == "spec.triggers[0].metadata"
    ));
    // A non-external trigger without metadata is not read.
    let yaml = "kind: ScaledObject\nmetadata:\n  name: app\nspec:\n  triggers:\n    - type: cpu\n";
    assert_eq!(
        self::error(yaml),
        ManifestError::NoExternalTrigger { scaled: 1 }
    );
}

#[test]
fn missing_and_mistyped_fields() {
    let missing = |yaml: &str| match error(yaml) {
        ManifestError::MissingField { path, .. } => path,
        other => panic!("{yaml:?}: {other:?}"),
    };
    assert_eq!(missing("metadata: {name: x}\n"), "kind");
    assert_eq!(
        missing("kind: ScaledObject\nspec: {triggers: []}\n"),
        "metadata"
    );
    assert_eq!(
        missing("kind: ScaledObject\nmetadata: {namespace: n}\nspec: {triggers: []}\n"),
        "metadata.name"
    );
    assert_eq!(
        missing("kind: ScaledObject\nmetadata: {name: \"\"}\nspec: {triggers: []}\n"),
        "metadata.name"
    );
    assert_eq!(missing("kind: ScaledObject\nmetadata: {name: a}\n"), "spec");
    assert_eq!(
        missing("kind: ScaledObject\nmetadata: {name: a}\nspec: {scaleTargetRef: {name: a}}\n"),
        "spec.triggers"
    );
    assert_eq!(
        missing("kind: ScaledObject\nmetadata: {name: a}\nspec: {triggers: [{metadata: {}}]}\n"),
        "spec.triggers[0].type"
    );

    let wrong = |yaml: &str| match error(yaml) {
        ManifestError::WrongType {
            path,
            expected,
            found,
            ..
        } => (path, expected, found),
        other => panic!("{yaml:?}: {other:?}"),
    };
    let path = |path: &str, expected, found| (path.to_owned(), expected, found);
    assert_eq!(wrong("kind: [a]\n"), path("kind", "a string", "a list"));
    assert_eq!(
        wrong("kind: ScaledObject\nmetadata: x\n"),
        path("metadata", "a mapping", "a string")
    );
    assert_eq!(
        wrong("kind: ScaledObject\nmetadata: {name: 5}\n"),
        path("metadata.name", "a string", "a number")
    );
    assert_eq!(
        wrong("kind: ScaledObject\nmetadata: {name: a, namespace: {}}\n"),
        path("metadata.namespace", "a string", "a mapping")
    );
    assert_eq!(
        wrong("kind: ScaledObject\nmetadata: {name: a}\nspec: {triggers: {type: external}}\n"),
        path("spec.triggers", "a list", "a mapping")
    );
    assert_eq!(
        wrong("kind: ScaledObject\nmetadata: {name: a}\nspec: {triggers: [external]}\n"),
        path("spec.triggers[0]", "a mapping", "a string")
    );
    assert_eq!(
        wrong(
            "kind: ScaledObject\nmetadata: {name: a}\n\
             spec: {triggers: [{type: external, metadata: [a]}]}\n"
        ),
        path("spec.triggers[0].metadata", "a mapping", "a list")
    );
    // Odd keys are quoted in paths.
    assert_eq!(
        wrong(
            "kind: ScaledObject\nmetadata: {name: a}\n\
             spec: {triggers: [{type: external, metadata: {a.b: 1}}]}\n"
        ),
        path("spec.triggers[0].metadata[\"a.b\"]", "a string", "a number")
    );
    // An empty namespace is none.
    let yaml = scaled_object("app", &["a: b"])
        .replace("  name: app\n", "  name: app\n  namespace: \"\"\n");
    assert_eq!(read(&yaml)[0].namespace, None);
}

#[test]
fn duplicate_and_complex_keys() {
    let yaml = scaled_object("app", &["targetSL: \"0.9\"", "targetSL: \"0.8\""]);
    assert_eq!(
        error(&yaml),
        ManifestError::Yaml {
            message: "duplicate key `targetSL`".to_owned(),
            line: line_of(&yaml, "\"0.8\""),
            column: 9,
        }
    );
    // `1` and "1" are the same key in JSON.
    assert!(matches!(
        error("a: 1\n1: x\n\"1\": y\n"),
        ManifestError::Yaml { line: 3, .. }
    ));
    assert!(matches!(
        error("? [a, b]\n: c\n"),
        ManifestError::Yaml { message, line: 1, .. } if message.contains("must be a scalar")
    ));
}

#[test]
fn anchors_aliases_and_merge_keys() {
    let yaml = r#"
kind: ScaledObject
metadata: {name: app}
spec:
  triggers:
    - type: external
      metadata: &common
        prometheusURL: &url http://prom:9090
        targetSL: "0.9"
    - type: external
      metadata:
        <<: *common
        targetSL: "0.99"
        mirror: *url
    - type: external
      metadata:
        <<: [{a: "1", targetSL: "0.5"}, {a: "2", b: "3"}]
    - type: external
      metadata: *common
"#;
    let found = read(yaml);
    assert_eq!(found.len(), 4);
    assert_eq!(
        found[0].metadata,
        map(&[("prometheusURL", "http://prom:9090"), ("targetSL", "0.9")])
    );
    assert_eq!(
        found[1].metadata,
        map(&[
            ("mirror", "http://prom:9090"),
            ("prometheusURL", "http://prom:9090"),
            ("targetSL", "0.99"),
        ])
    );
    assert_eq!(
        found[2].metadata,
        map(&[("a", "1"), ("b", "3"), ("targetSL", "0.5")])
    );
    assert_eq!(found[3].metadata, found[0].metadata);

    // A quoted "<<" is an ordinary key.
    let metadata = metadata_of(&["\"<<\": x"]);
    assert_eq!(metadata, map(&[("<<", "x")]));
    // Merging a scalar is an error.
    assert!(matches!(
        metadata_error(&["<<: x"]),
        ManifestError::Yaml { message, .. } if message.contains("merge key")
    ));
    // An alias of a number is a number.
    match metadata_error(&["a: &n \"1\"", "b: &m 2", "c: *m"]) {
        ManifestError::WrongType { path, found, .. } => {
            assert_eq!(
                (path.as_str(), found),
                ("spec.triggers[0].metadata.b", "a number")
            );
        }
        other => panic!("{other:?}"),
    }
    // Anchors do not cross documents, nor refer to themselves.
    assert!(matches!(
        error("kind: A\na: &x 1\n---\nkind: B\nb: *x\n"),
        ManifestError::Yaml { line: 5, .. }
    ));
    assert!(matches!(
        error("a: &x [*x]\n"),
        ManifestError::Yaml { line: 1, .. }
    ));
}

#[test]
fn billion_laughs_is_cheap() {
    let mut yaml = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for level in 1..40 {
        let previous = format!("*a{}", level - 1);
        let items = [previous.as_str(); 10].join(", ");
        yaml.push_str(&format!("a{level}: &a{level} [{items}]\n"));
    }
    // 10^40 nodes if expanded: shared instead.
    assert!(matches!(
        error(&yaml),
        ManifestError::MissingField { path, .. } if path == "kind"
    ));
}

#[test]
fn merge_keys_have_a_budget() {
    let mut yaml = String::from("base: &b {");
    for key in 0..1000 {
        yaml.push_str(&format!("k{key}: v, "));
    }
    yaml.push_str("}\nlist:\n");
    for _ in 0..2000 {
        yaml.push_str("  - {<<: *b}\n");
    }
    assert!(matches!(
        error(&yaml),
        ManifestError::Yaml { message, .. } if message.contains("merge keys")
    ));
}

#[test]
fn deep_nesting_is_refused_without_overflow() {
    // Block sequences on one line: 100 000 levels.
    let yaml = "- ".repeat(100_000) + "x\n";
    assert!(matches!(
        error(&yaml),
        ManifestError::Yaml { message, .. } if message.contains("levels deep")
    ));
    // Block mappings.
    let mut yaml = String::new();
    for level in 0..300 {
        yaml.push_str(&" ".repeat(level));
        yaml.push_str("k:\n");
    }
    assert!(matches!(error(&yaml), ManifestError::Yaml { .. }));
    // Flow collections.
    let yaml = "[".repeat(10_000) + &"]".repeat(10_000);
    assert!(matches!(error(&yaml), ManifestError::Yaml { .. }));
    // Aliases of deep nodes nested in deep nodes.
    let mut yaml = String::from("a0: &a0 x\n");
    for level in 1..100 {
        yaml.push_str(&format!(
            "a{level}: &a{level} {}*a{}{}\n",
            "[".repeat(100),
            level - 1,
            "]".repeat(100)
        ));
    }
    assert!(matches!(
        error(&yaml),
        ManifestError::Yaml { message, line: 3, .. } if message.contains("levels deep")
    ));
    // 200 levels are fine.
    let yaml = format!("kind: X\nspec: {}1{}\n", "[".repeat(200), "]".repeat(200));
    assert_eq!(error(&yaml), ManifestError::NoExternalTrigger { scaled: 0 });
}

#[test]
fn large_input() {
    let mut yaml = String::new();
    for i in 0..2000 {
        yaml.push_str(&scaled_object(&format!("app{i}"), &["targetSL: \"0.9\""]));
        yaml.push_str("---\n");
    }
    yaml.push_str(&format!(
        "kind: ConfigMap\ndata:\n  big: \"{}\"\n",
        "x".repeat(1 << 20)
    ));
    let found = read(&yaml);
    assert_eq!(found.len(), 2000);
    assert_eq!(found[1999].name, "app1999");
}

/// A xorshift generator, for reproducible mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn mutated_manifests_never_panic() {
    const PIECES: [&str; 24] = [
        "\n", " ", "  ", "-", ":", "- ", ": ", "---\n", "...\n", "[", "]", "{", "}", ",", "&a ",
        "*a", "<<: ", "!!int ", "\"", "'", "|\n", "#", "\t", "? ",
    ];
    let base: Vec<char> = SCALED_OBJECT.chars().collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..3000 {
        let mut text = base.clone();
        for _ in 0..1 + rng.below(6) {
            let at = rng.below(text.len() + 1);
            match rng.below(3) {
                0 if at < text.len() => {
                    let end = (at + 1 + rng.below(8)).min(text.len());
                    text.drain(at..end);
                }
                1 => {
                    let piece = PIECES[rng.below(PIECES.len())];
                    text.splice(at..at, piece.chars());
                }
                _ => {
                    let from = rng.below(text.len());
                    let end = (from + rng.below(40)).min(text.len());
                    let copy: Vec<char> = text[from..end].to_vec();
                    text.splice(at..at, copy);
                }
            }
        }
        let text: String = text.into_iter().collect();
        let _ = triggers(&text, &env(&[("X", "1")]));
    }
}

/// A stream whose aliases multiply: `lists` ScaledObjects, each an alias of one whose
/// `triggers` lists `per_list` aliases of one external trigger.
fn multiplied(lists: usize, per_list: usize) -> String {
    let aliases = |alias: &str, count: usize| vec![alias; count].join(", ");
    format!(
        "kind: List\nt: &t {{type: external, metadata: {{scalerAddress: a, targetSL: \"0.9\"}}}}\n\
         so: &so {{kind: ScaledObject, metadata: {{name: x}}, spec: {{triggers: [{}]}}}}\n\
         items: [{}]\n",
        aliases("*t", per_list),
        aliases("*so", lists)
    )
}

#[test]
fn aliases_that_multiply_triggers_hit_the_budget() {
    // 400 × 400 = 160 000 triggers from 3 KB of YAML.
    let yaml = multiplied(400, 400);
    assert!(yaml.len() < 4096, "{}", yaml.len());
    let error = triggers(&yaml, &env(&[])).unwrap_err();
    assert_eq!(
        error,
        ManifestError::TooLarge {
            limit: format!("more than {MAX_TRIGGERS} triggers")
        }
    );
    // The same shape within the budget is read, every repetition a trigger.
    let found = triggers(&multiplied(50, 100), &env(&[])).unwrap();
    assert_eq!(found.len(), 5000);
}

#[test]
fn aliases_that_multiply_metadata_hit_the_budget() {
    // A trigger whose metadata holds a 64 KiB value, repeated 300 times: 19 MiB.
    let yaml = format!(
        "kind: ScaledObject\nmetadata: {{name: x}}\nv: &v \"{}\"\n\
         t: &t {{type: external, metadata: {{arrivalRateQuery: *v}}}}\n\
         spec: {{triggers: [{}]}}\n",
        "x".repeat(64 << 10),
        vec!["*t"; 300].join(", ")
    );
    let error = triggers(&yaml, &env(&[])).unwrap_err();
    assert!(
        matches!(&error, ManifestError::TooLarge { limit } if limit.contains("MiB")),
        "{error}"
    );
}

mod arbitrary {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn any_bytes_are_read_or_refused(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let text = String::from_utf8_lossy(&bytes);
            if let Err(error) = triggers(&text, &env(&[])) {
                prop_assert!(error.to_string().len() < 4096);
            }
        }

        #[test]
        fn any_yaml_shaped_text_is_read_or_refused(
            pieces in proptest::collection::vec(
                proptest::sample::select(vec![
                    "kind: ScaledObject\n", "kind: List\n", "items:\n", "- ", "  ", "metadata:",
                    " {name: a}", "spec:", " triggers:", " [", "]", "{", "}", ", ", "&a ", "*a",
                    "<<: *a", "type: external", "type: cpu", "metadata: {targetSL: \"0.9\"}",
                    "\n", "---\n", "\"", "'", "|\n", "!!str ", "? ", "x", "1e3",
                ]),
                0..60,
            ),
        ) {
            let _ = triggers(&pieces.concat(), &env(&[("X", "1")]));
        }
    }
}
