//! `deploy/prometheus-rule.yaml` (a prometheus-operator `PrometheusRule`) holds the same rule
//! groups as `deploy/prometheus/admit.rules.yml`, which `promtool test rules` checks in CI: the
//! two are parsed and their groups compared, so neither can change alone.

use std::path::Path;

use yaml_rust2::{Yaml, YamlLoader};

/// The one document of the YAML file at `path`, from the workspace's root.
fn document(path: &str) -> Yaml {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    let mut documents = YamlLoader::load_from_str(&text)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    assert_eq!(documents.len(), 1, "{}", path.display());
    documents.remove(0)
}

#[test]
fn the_prometheus_rule_holds_the_tested_rule_groups() {
    let plain = document("deploy/prometheus/admit.rules.yml");
    let resource = document("deploy/prometheus-rule.yaml");
    assert_eq!(
        resource["apiVersion"].as_str(),
        Some("monitoring.coreos.com/v1")
    );
    assert_eq!(resource["kind"].as_str(), Some("PrometheusRule"));
    let groups = plain["groups"].as_vec().expect("a list of groups");
    assert!(!groups.is_empty());
    assert_eq!(resource["spec"]["groups"], plain["groups"]);
    // Every rule records or alerts, with an expression, and promtool's tests check it.
    let tests = document("deploy/prometheus/admit.rules.test.yml");
    let tested = |name: &str| {
        tests["tests"]
            .as_vec()
            .expect("a list of tests")
            .iter()
            .any(|test| {
                let exprs = test["promql_expr_test"].as_vec().into_iter().flatten();
                let alerts = test["alert_rule_test"].as_vec().into_iter().flatten();
                exprs
                    .map(|t| &t["expr"])
                    .chain(alerts.map(|t| &t["alertname"]))
                    .any(|checked| checked.as_str() == Some(name))
            })
    };
    for group in groups {
        for rule in group["rules"].as_vec().expect("a list of rules") {
            let name = rule["record"].as_str().or(rule["alert"].as_str());
            let name = name.unwrap_or_else(|| panic!("neither a record nor an alert: {rule:?}"));
            assert!(rule["expr"].as_str().is_some(), "{name}: no expression");
            assert!(tested(name), "{name}: no promtool test");
        }
    }
}
