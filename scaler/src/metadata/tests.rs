//! Every key's valid and invalid forms, defaults, aliases, conflicts and the fingerprint.

use super::*;
use admit::erlang::ReplicaPlanner;

const MINIMAL: [(&str, &str); 5] = [
    ("prometheusURL", "http://prometheus:9090"),
    ("arrivalRateQuery", "sum(rate(requests_total[1m]))"),
    ("serviceTimeQuery", "avg(service_seconds)"),
    ("waitThresholdSeconds", "0.05"),
    ("targetSL", "0.95"),
];

const FULL: [(&str, &str); 18] = [
    ("prometheusURL", "https://prom.example:9443/prometheus"),
    ("arrivalRateQuery", "sum(rate(x[1m])) # λ\n"),
    ("serviceTimeQuery", "avg(y)"),
    ("waitThresholdSeconds", "0.25"),
    ("targetSL", "0.99"),
    ("concurrencyPerReplica", "8"),
    ("balancing", "pooled"),
    ("minReplicas", "2"),
    ("maxReplicas", "40"),
    ("scaleDownHoldSeconds", "120.5"),
    ("minScaleUpStep", "2"),
    ("maxScaleUpStep", "10"),
    ("maxScaleDownStep", "3"),
    ("slTolerance", "0.2"),
    ("activationArrivalRate", "0.5"),
    ("arrivalRateWindowSeconds", "60"),
    ("patienceSeconds", "30"),
    ("metricName", "checkout_erlang-1"),
];

fn map(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
    entries
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect()
}

/// `MINIMAL` with `extra` entries added or replaced.
fn with(extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut metadata = map(&MINIMAL);
    metadata.extend(map(extra));
    metadata
}

fn problems(metadata: &BTreeMap<String, String>) -> Vec<Problem> {
    match ScalerConfig::from_metadata(metadata) {
        Ok(config) => panic!("accepted {metadata:?} as {config:?}"),
        Err(error) => error.problems().to_vec(),
    }
}

fn parse(metadata: &BTreeMap<String, String>) -> ScalerConfig {
    ScalerConfig::from_metadata(metadata).unwrap_or_else(|error| panic!("{error}"))
}

#[test]
fn full_map() {
    let config = parse(&map(&FULL));
    assert_eq!(
        config,
        ScalerConfig {
            prometheus_url: Uri::from_static("https://prom.example:9443/prometheus"),
            arrival_rate_query: "sum(rate(x[1m])) # λ\n".into(),
            service_time_query: "avg(y)".into(),
            wait_threshold_seconds: 0.25,
            target_sl: 0.99,
            concurrency_per_replica: 8,
            balancing: Balancing::Pooled,
            min_replicas: 2,
            max_replicas: 40,
            scale_down_hold: Duration::from_millis(120_500),
            min_scale_up_step: 2,
            max_scale_up_step: 10,
            max_scale_down_step: 3,
            sl_tolerance: 0.2,
            activation_arrival_rate: 0.5,
            arrival_rate_window: Some(Duration::from_secs(60)),
            patience: Some(Duration::from_secs(30)),
            metric_name: "checkout_erlang-1".to_owned(),
        }
    );
    assert_eq!(config.prometheus_url.path(), "/prometheus");
}

#[test]
fn defaults() {
    let config = parse(&map(&MINIMAL));
    assert_eq!(config.concurrency_per_replica, 1);
    assert_eq!(config.balancing, Balancing::RoundRobin);
    assert_eq!(config.min_replicas, 1);
    assert_eq!(config.max_replicas, 2_147_483_647);
    assert_eq!(config.scale_down_hold, Duration::ZERO);
    assert_eq!(config.min_scale_up_step, 1);
    assert_eq!(config.max_scale_up_step, u64::MAX);
    assert_eq!(config.max_scale_down_step, u64::MAX);
    assert_eq!(config.sl_tolerance, 0.1);
    assert_eq!(config.activation_arrival_rate, 0.0);
    assert_eq!(config.arrival_rate_window, None);
    assert_eq!(config.patience, None);
    assert_eq!(config.metric_name, DEFAULT_METRIC_NAME);
}

#[test]
fn edge_values_accepted() {
    let max = u64::MAX.to_string();
    let name48 = "a".repeat(48);
    type Check = fn(&ScalerConfig) -> bool;
    let cases: &[(&str, &str, Check)] = &[
        ("prometheusURL", "http://p", |c| {
            c.prometheus_url == "http://p/"
        }),
        ("prometheusURL", "HTTPS://P:1/a/b/", |c| {
            c.prometheus_url.path() == "/a/b/"
        }),
        ("arrivalRateQuery", " up ", |c| {
            &*c.arrival_rate_query == " up "
        }),
        ("waitThresholdSeconds", "0", |c| {
            c.wait_threshold_seconds == 0.0
        }),
        ("waitThresholdSeconds", "-0", |c| {
            c.wait_threshold_seconds.to_bits() == 0
        }),
        ("waitThresholdSeconds", "1e-3", |c| {
            c.wait_threshold_seconds == 0.001
        }),
        ("targetSL", "0", |c| c.target_sl == 0.0),
        ("targetSL", "+.5", |c| c.target_sl == 0.5),
        ("targetSL", "0.9999999", |c| c.target_sl == 0.9999999),
        ("concurrencyPerReplica", "007", |c| {
            c.concurrency_per_replica == 7
        }),
        ("maxReplicas", "2147483647", |c| {
            c.max_replicas == 2_147_483_647
        }),
        ("minReplicas", "2147483647", |c| {
            c.min_replicas == 2_147_483_647
        }),
        ("maxScaleUpStep", &max, |c| c.max_scale_up_step == u64::MAX),
        ("maxScaleDownStep", "1", |c| c.max_scale_down_step == 1),
        ("scaleDownHoldSeconds", "3600", |c| {
            c.scale_down_hold == MAX_SCALE_DOWN_HOLD
        }),
        ("scaleDownHoldSeconds", "3.6e3", |c| {
            c.scale_down_hold == MAX_SCALE_DOWN_HOLD
        }),
        ("slTolerance", "0", |c| c.sl_tolerance == 0.0),
        ("activationArrivalRate", "1e9", |c| {
            c.activation_arrival_rate == 1e9
        }),
        ("arrivalRateWindowSeconds", "0.001", |c| {
            c.arrival_rate_window == Some(Duration::from_millis(1))
        }),
        ("arrivalRateWindowSeconds", "86400", |c| {
            c.arrival_rate_window == Some(MAX_ARRIVAL_RATE_WINDOW)
        }),
        ("patienceSeconds", "1e-9", |c| {
            c.patience == Some(Duration::from_nanos(1))
        }),
        ("metricName", &name48, |c| c.metric_name.len() == 48),
        ("metricName", "0_-z", |c| c.metric_name == "0_-z"),
    ];
    for (key, value, check) in cases {
        // A patience needs the pooled queue.
        let balancing = if *key == "patienceSeconds" {
            "pooled"
        } else {
            "round-robin"
        };
        let config = parse(&with(&[(key, value), ("balancing", balancing)]));
        assert!(check(&config), "{key}={value:?} gave {config:?}");
        assert!(ReplicaPlanner::new(config.planner_config(), 1).is_ok());
    }
}

#[test]
fn invalid_values() {
    let name49 = "a".repeat(49);
    let too_long_query = format!("sum({})", "x".repeat(MAX_QUERY_BYTES));
    #[rustfmt::skip]
    let cases: &[(&str, &[&str])] = &[
        ("prometheusURL", &["", " http://p", "http://p ", "/api", "prom:9090", "prom",
            "http://", "ftp://p/", "unix:///sock", "http://p/?", "http://p?x=1",
            "http://p/#", "http://p/a#b", "http://p /"]),
        ("arrivalRateQuery", &["", " ", "\n\t", &too_long_query]),
        ("serviceTimeQuery", &["", "  "]),
        ("waitThresholdSeconds", &["", " 1", "1 ", "-1", "-1e-300", "NaN", "nan", "inf",
            "-inf", "Infinity", "1e400", "1s", "0x10", "1,5"]),
        ("targetSL", &["", " 0.5", "1", "1.0", "1.5", "-0.1", "NaN", "inf", "95%"]),
        ("concurrencyPerReplica", &["", " 1", "1 ", "0", "-1", "+1", "1.0", "1.5",
            "1e3", "18446744073709551616", "NaN", "inf", "one"]),
        ("minReplicas", &["", "0", "-1", "1.0", "2147483648", " 1"]),
        ("maxReplicas", &["", "0", "+5", "2.5", "2147483648", "99999999999999999999",
            "5\n"]),
        ("scaleDownHoldSeconds", &["", " 1", "-1", "NaN", "inf", "1e20", "1.9e19",
            "1e18", "3600.000001", "3601", "30s"]),
        ("minScaleUpStep", &["", "0", "-1", "1.0", "1e3", " 2"]),
        ("maxScaleUpStep", &["", "0", "-2", "3.0", "18446744073709551616"]),
        ("maxScaleDownStep", &["", "0", "-1", "1.5", "\t1"]),
        ("slTolerance", &["", " 0.1", "-0.1", "NaN", "inf", "-inf", "ten"]),
        ("activationArrivalRate", &["", "-1", "NaN", "inf", " 1"]),
        ("patienceSeconds", &["", "0", "-0", "1e-12", "-5", "NaN", "inf", "1e20", " 30"]),
        ("arrivalRateWindowSeconds", &["", "0", "0.0009", "-1", "86400.001", "NaN", "inf",
            " 1", "1m"]),
        ("metricName", &["", "Admit", "admit.erlang", "admit erlang", "admit/x", "é",
            &name49]),
    ];
    for (key, values) in cases {
        for value in *values {
            let found = problems(&with(&[(key, value)]));
            let [
                Problem::Invalid {
                    key: k,
                    value: v,
                    expected,
                },
            ] = found.as_slice()
            else {
                panic!("{key}={value:?} gave {found:?}");
            };
            // Values are quoted as excerpts: invisible characters escaped.
            assert_eq!((*k, v.as_str()), (*key, excerpt(value).as_str()));
            assert_eq!(found[0].key(), *key);
            if value.trim() != *value && !key.ends_with("Query") {
                assert_eq!(*expected, NO_WHITESPACE, "{key}={value:?}");
            } else if ["NaN", "nan", "inf", "-inf", "Infinity", "1e400"].contains(value) {
                // Integers name their digits-only rule instead.
                let integer = [POSITIVE_INTEGER, REPLICAS].contains(expected);
                assert!(integer || *expected == NOT_FINITE, "{key}={value:?}");
            }
            let shown = found[0].to_string();
            assert!(
                shown.contains(key) && shown.contains(&format!("\"{}\"", excerpt(value))),
                "{shown}"
            );
            assert!(shown.contains(expected), "{shown}");
        }
    }
}

#[test]
fn url_problems_say_what_is_wrong() {
    let cases = [
        ("/api", URL_ABSOLUTE),
        ("ftp://p/", URL_SCHEME),
        ("http://p?x=1", URL_NO_QUERY),
        ("http://p/a#b", URL_NO_FRAGMENT),
        ("http://user:secret@p:9090/", URL_NO_CREDENTIALS),
    ];
    for (value, expected) in cases {
        let found = problems(&with(&[("prometheusURL", value)]));
        assert!(
            matches!(&found[..], [Problem::Invalid { expected: e, .. }] if *e == expected),
            "{value}: {found:?}"
        );
    }
}

#[test]
fn missing_required_keys() {
    assert_eq!(
        problems(&BTreeMap::new()),
        [
            "prometheusURL",
            "arrivalRateQuery",
            "serviceTimeQuery",
            "waitThresholdSeconds",
            "targetSL"
        ]
        .map(|key| Problem::Missing { key })
    );
    for (key, _) in MINIMAL {
        let mut metadata = map(&MINIMAL);
        metadata.remove(key);
        assert_eq!(problems(&metadata), [Problem::Missing { key }]);
        assert_eq!(
            Problem::Missing { key }.to_string(),
            format!("missing required key `{key}`")
        );
    }
}

#[test]
fn unknown_keys() {
    let cases = [
        ("targetsl", Some("targetSL")),
        ("PROMETHEUSURL", Some("prometheusURL")),
        ("minreplicasfromenv", Some("minReplicasFromEnv")),
        ("enabletls", Some("enableTLS")),
        ("target", None),
        ("maxReplica", None),
        ("", None),
    ];
    for (key, suggestion) in cases {
        let found = problems(&with(&[(key, "1")]));
        assert_eq!(
            found,
            [Problem::Unknown {
                key: key.to_owned(),
                value: "1".to_owned(),
                suggestion
            }]
        );
        assert_eq!(found[0].key(), key);
        let shown = found[0].to_string();
        assert!(
            shown.starts_with(&format!("unknown key `{key}` (value \"1\")")),
            "{shown}"
        );
        match suggestion {
            Some(s) => assert!(shown.ends_with(&format!("did you mean `{s}`?")), "{shown}"),
            None => assert!(!shown.contains("did you mean"), "{shown}"),
        }
    }
}

#[test]
fn keda_keys_are_ignored() {
    let metadata = with(&[
        ("scalerAddress", "admit-scaler.keda:9090"),
        ("enableTLS", "not a bool"),
        ("unsafeSsl", ""),
    ]);
    assert_eq!(parse(&metadata), parse(&map(&MINIMAL)));
}

#[test]
fn from_env_spelling() {
    let plain = parse(&map(&FULL));
    let from_env: BTreeMap<String, String> = FULL
        .iter()
        .map(|(key, value)| (format!("{key}FromEnv"), (*value).to_owned()))
        .collect();
    assert_eq!(parse(&from_env), plain);

    // Invalid values and conflicts name the key as spelled.
    let found = problems(&with(&[("minReplicasFromEnv", "x")]));
    assert_eq!(found[0].key(), "minReplicasFromEnv");
    let found = problems(&with(&[("minReplicasFromEnv", "9"), ("maxReplicas", "3")]));
    assert!(
        matches!(
            &found[..],
            [Problem::Conflict {
                keys: ("minReplicasFromEnv", "maxReplicas"),
                ..
            }]
        ),
        "{found:?}"
    );
}

#[test]
fn key_and_from_env_together() {
    for (key, value) in FULL {
        let env = format!("{key}FromEnv");
        let mut metadata = map(&FULL);
        metadata.insert(env.clone(), value.to_owned());
        let found = problems(&metadata);
        assert!(
            matches!(&found[..], [Problem::Duplicate { key: k }] if *k == key),
            "{found:?}"
        );
        let shown = found[0].to_string();
        assert!(shown.contains(&format!("`{key}`")) && shown.contains(&format!("`{env}`")));
    }
}

#[test]
fn conflicts() {
    let cases = [
        (("minReplicas", "5"), ("maxReplicas", "4")),
        (("minScaleUpStep", "3"), ("maxScaleUpStep", "2")),
    ];
    for ((low, low_value), (high, high_value)) in cases {
        let found = problems(&with(&[(low, low_value), (high, high_value)]));
        let [Problem::Conflict { keys, message }] = found.as_slice() else {
            panic!("{found:?}");
        };
        assert_eq!(*keys, (low, high));
        assert!(
            message.contains(low_value) && message.contains(high_value),
            "{message}"
        );
        assert_eq!(found[0].key(), low);
        // Equal bounds are fine, and one invalid bound suppresses the conflict.
        parse(&with(&[(low, low_value), (high, low_value)]));
        let found = problems(&with(&[(low, low_value), (high, "0")]));
        assert!(matches!(&found[..], [Problem::Invalid { .. }]), "{found:?}");
    }
}

/// A tolerance for which the stricter target reaches 1 fails every decision: refused, naming
/// both keys and values; one just short of it is accepted.
#[test]
fn a_tolerance_whose_stricter_target_reaches_1_is_refused() {
    let cases = [
        ("0.8", "1e16", false),
        ("0.8", "1e15", true),
        ("0", "1e300", false),
        ("0", "1e15", true),
        ("0.999999", "1e10", true),
        ("0.999999", "1e11", false),
        ("0.95", "0.1", true),
    ];
    for (target, tolerance, accepted) in cases {
        let metadata = with(&[("targetSL", target), ("slTolerance", tolerance)]);
        let row = format!("targetSL {target}, slTolerance {tolerance}");
        let planner = PlannerConfig {
            tolerance: tolerance.parse().unwrap(),
            ..PlannerConfig::default()
        };
        let stricter = planner.stricter_service_level(target.parse().unwrap());
        assert_eq!(stricter < 1.0, accepted, "{row}: {stricter}");
        if accepted {
            let config = parse(&metadata);
            assert!(
                config
                    .planner_config()
                    .stricter_service_level(config.target_sl)
                    < 1.0
            );
            continue;
        }
        let found = problems(&metadata);
        let [Problem::Conflict { keys, message }] = found.as_slice() else {
            panic!("{row}: {found:?}");
        };
        assert_eq!(*keys, ("slTolerance", "targetSL"), "{row}");
        assert!(
            message.contains(&format!("slTolerance \"{tolerance}\""))
                && message.contains(&format!("targetSL \"{target}\"")),
            "{row}: {message}"
        );
        assert!(message.len() < 400, "{message}");
    }
    // Spelled `FromEnv`, the key is named as written.
    let found = problems(&with(&[("slToleranceFromEnv", "1e300")]));
    assert!(
        matches!(
            &found[..],
            [Problem::Conflict {
                keys: ("slToleranceFromEnv", "targetSL"),
                ..
            }]
        ),
        "{found:?}"
    );
}

#[test]
fn collects_every_problem() {
    let mut metadata = with(&[
        ("targetSL", "1.5"),
        ("minReplicas", "10"),
        ("maxReplicas", "3"),
        ("metricName", "Bad"),
        ("slTolerance", " 0.1"),
        ("patienceSecond", "5"),
        ("prometheusURLFromEnv", "http://p"),
    ]);
    metadata.remove("arrivalRateQuery");
    let error = ScalerConfig::from_metadata(&metadata).unwrap_err();
    let keys: Vec<&str> = error.problems().iter().map(Problem::key).collect();
    assert_eq!(
        keys,
        [
            "patienceSecond",
            "prometheusURL",
            "arrivalRateQuery",
            "targetSL",
            "slTolerance",
            "metricName",
            "minReplicas"
        ]
    );
    let shown = error.to_string();
    assert_eq!(shown.lines().count(), keys.len(), "{shown}");
    for (line, problem) in shown.lines().zip(error.problems()) {
        assert_eq!(line, problem.to_string());
    }
}

/// Each policy by its name; another name, a different case or padding is refused; a patience
/// needs the pooled queue, and round-robin at most its model's servers per replica.
#[test]
fn balancing_names_and_conflicts() {
    for (name, policy) in [
        ("round-robin", Balancing::RoundRobin),
        ("least-request", Balancing::LeastRequest),
        ("random", Balancing::Random),
        ("pooled", Balancing::Pooled),
    ] {
        assert_eq!(parse(&with(&[("balancing", name)])).balancing, policy);
        assert_eq!(
            parse(&with(&[("balancingFromEnv", name)])).balancing,
            policy
        );
    }
    for bad in ["Round-Robin", "roundrobin", "least_request", ""] {
        assert_eq!(
            problems(&with(&[("balancing", bad)])),
            [Problem::Invalid {
                key: "balancing",
                value: excerpt(bad),
                expected: BALANCING_NAMES,
            }],
            "{bad:?}"
        );
    }
    assert!(matches!(
        &problems(&with(&[("balancing", " pooled")]))[..],
        [Problem::Invalid {
            expected: NO_WHITESPACE,
            ..
        }]
    ));
    let conflict = problems(&with(&[("patienceSeconds", "30")]));
    assert!(
        matches!(&conflict[..], [Problem::Conflict { keys: ("patienceSeconds", "balancing"), message }]
            if message.contains("round-robin") && message.contains("set balancing to pooled")),
        "{conflict:?}"
    );
    let config = parse(&with(&[("patienceSeconds", "30"), ("balancing", "pooled")]));
    assert_eq!(config.patience, Some(Duration::from_secs(30)));
    let most = Fleet::MAX_ROUND_ROBIN_PER_REPLICA;
    assert!(
        ScalerConfig::from_metadata(&with(&[("concurrencyPerReplica", &most.to_string())])).is_ok()
    );
    let above = (most + 1).to_string();
    assert!(matches!(
        &problems(&with(&[("concurrencyPerReplica", &above)]))[..],
        [Problem::Conflict {
            keys: ("concurrencyPerReplica", "balancing"),
            ..
        }]
    ));
    parse(&with(&[
        ("concurrencyPerReplica", &above),
        ("balancing", "random"),
    ]));
}

#[test]
fn fingerprint_is_stable() {
    let config = parse(&map(&MINIMAL));
    assert_eq!(config.fingerprint(), parse(&map(&MINIMAL)).fingerprint());
    assert_eq!(config.fingerprint(), config.clone().fingerprint());
    // Pinned: the same across builds, runs and processes.
    assert_eq!(config.fingerprint(), 12_627_867_488_163_904_535);
    // Equal configs hash alike, even when spelled differently.
    let upper = parse(&with(&[("prometheusURL", "HTTP://Prometheus:9090/")]));
    assert_eq!(upper, config);
    assert_eq!(upper.fingerprint(), config.fingerprint());
    let zero = ScalerConfig {
        activation_arrival_rate: -0.0,
        ..config.clone()
    };
    assert_eq!(zero, config);
    assert_eq!(zero.fingerprint(), config.fingerprint());
}

#[test]
fn fingerprint_changes_with_every_field() {
    let base = parse(&map(&FULL));
    let changes: &[fn(&mut ScalerConfig)] = &[
        |c| c.prometheus_url = Uri::from_static("https://prom.example:9443/prometheus/"),
        |c| c.prometheus_url = Uri::from_static("http://prom.example:9443/prometheus"),
        |c| c.prometheus_url = Uri::from_static("https://prom.example:9444/prometheus"),
        |c| c.prometheus_url = Uri::from_static("https://prom.example:9443/prometheus?"),
        |c| c.arrival_rate_query = format!("{} ", c.arrival_rate_query).into(),
        |c| c.service_time_query = format!("{} ", c.service_time_query).into(),
        |c| c.wait_threshold_seconds += 1e-9,
        |c| c.target_sl = 0.98,
        |c| c.concurrency_per_replica += 1,
        |c| c.balancing = Balancing::LeastRequest,
        |c| c.min_replicas += 1,
        |c| c.max_replicas += 1,
        |c| c.scale_down_hold += Duration::from_nanos(1),
        |c| c.min_scale_up_step += 1,
        |c| c.max_scale_up_step += 1,
        |c| c.max_scale_down_step += 1,
        |c| c.sl_tolerance = 0.0,
        |c| c.activation_arrival_rate = 0.0,
        |c| c.arrival_rate_window = None,
        |c| c.arrival_rate_window = Some(Duration::from_nanos(60_000_000_001)),
        |c| c.patience = None,
        |c| c.patience = Some(Duration::from_nanos(30_000_000_001)),
        |c| c.metric_name = DEFAULT_METRIC_NAME.to_owned(),
        // Moving text between the two queries.
        |c| {
            c.arrival_rate_query = format!("{}avg(y)", c.arrival_rate_query).into();
            c.service_time_query = "".into();
        },
    ];
    let mut seen = vec![base.fingerprint()];
    for (i, change) in changes.iter().enumerate() {
        let mut changed = base.clone();
        change(&mut changed);
        assert_ne!(changed, base, "change {i}");
        let fingerprint = changed.fingerprint();
        assert!(!seen.contains(&fingerprint), "change {i}");
        seen.push(fingerprint);
    }
}

#[test]
fn planner_config() {
    let config = parse(&map(&FULL));
    let planner = config.planner_config();
    assert_eq!(
        planner,
        PlannerConfig {
            per_replica: 8,
            min_replicas: 2,
            max_replicas: 40,
            min_step_up: 2,
            max_step_up: 10,
            max_step_down: 3,
            scale_down_hold: Duration::from_millis(120_500),
            tolerance: 0.2,
        }
    );
    let extremes = [
        map(&FULL),
        map(&MINIMAL),
        with(&[
            ("minReplicas", "2147483647"),
            ("minScaleUpStep", "18446744073709551615"),
        ]),
        with(&[
            ("maxReplicas", "1"),
            ("maxScaleUpStep", "1"),
            ("maxScaleDownStep", "1"),
        ]),
        with(&[("slTolerance", "1e14"), ("scaleDownHoldSeconds", "3600")]),
    ];
    for metadata in &extremes {
        let config = parse(metadata);
        assert!(
            ReplicaPlanner::new(config.planner_config(), 1).is_ok(),
            "{config:?}"
        );
    }
}

#[test]
fn a_query_of_the_longest_length_is_accepted() {
    let query = format!("sum({})", "x".repeat(MAX_QUERY_BYTES - 5));
    assert_eq!(query.len(), MAX_QUERY_BYTES);
    assert_eq!(
        &*parse(&with(&[("arrivalRateQuery", &query)])).arrival_rate_query,
        query
    );
}

#[test]
fn many_unknown_keys_are_counted_not_listed() {
    let mut metadata = with(&[]);
    for i in 0..200_000 {
        metadata.insert(format!("unknown{i}"), "1".to_owned());
    }
    // A key of three megabytes is quoted as an excerpt.
    metadata.insert("k".repeat(3 << 20), "1".to_owned());
    let error = ScalerConfig::from_metadata(&metadata).unwrap_err();
    assert_eq!(error.problems().len(), MAX_LISTED_UNKNOWN);
    assert_eq!(error.unlisted_unknown_keys(), 200_001 - MAX_LISTED_UNKNOWN);
    let shown = error.to_string();
    assert!(shown.len() < 4096, "{} bytes", shown.len());
    assert!(shown.ends_with(&format!(
        "and {} more unknown keys",
        200_001 - MAX_LISTED_UNKNOWN
    )));
}

mod arbitrary {
    use super::*;
    use proptest::prelude::*;

    /// A key: one the scaler knows (either spelling), KEDA's, or anything.
    fn key() -> impl Strategy<Value = String> {
        let known: Vec<String> = KEYS
            .iter()
            .flat_map(|key| [key.name, key.env])
            .chain(KEDA_KEYS)
            .map(str::to_owned)
            .collect();
        prop_oneof![
            3 => proptest::sample::select(known),
            1 => any::<String>(),
        ]
    }

    /// A value: a plausible one, or anything.
    fn value() -> impl Strategy<Value = String> {
        prop_oneof![
            proptest::sample::select(
                FULL.iter()
                    .map(|(_, value)| (*value).to_owned())
                    .collect::<Vec<_>>()
            ),
            "[0-9.e+-]{0,12}",
            any::<String>(),
        ]
    }

    proptest! {
        #[test]
        fn any_map_is_parsed_or_refused_with_a_bounded_message(
            entries in proptest::collection::btree_map(key(), value(), 0..40),
        ) {
            match ScalerConfig::from_metadata(&entries) {
                Ok(config) => {
                    prop_assert!(config.min_replicas <= config.max_replicas);
                    prop_assert!((0.0..1.0).contains(&config.target_sl));
                    prop_assert!(config.arrival_rate_query.len() <= MAX_QUERY_BYTES);
                }
                Err(error) => {
                    prop_assert!(!error.problems().is_empty());
                    // Each problem is bounded whatever the map held.
                    for problem in error.problems() {
                        prop_assert!(problem.to_string().len() < 2048, "{problem}");
                    }
                }
            }
        }

        #[test]
        fn any_single_value_of_a_known_key(
            key in proptest::sample::select(KEYS.iter().map(|key| key.name).collect::<Vec<_>>()),
            value in any::<String>(),
        ) {
            let _ = ScalerConfig::from_metadata(&with(&[(key, &value)]));
        }
    }
}

#[test]
fn the_longest_metadata_parses_and_nothing_longer_does() {
    let longest = longest_metadata();
    assert_eq!(longest.len(), KEYS.len() + KEDA_KEYS.len());
    let config = parse(&longest);
    assert_eq!(config.arrival_rate_query.len(), MAX_QUERY_BYTES);
    assert_eq!(config.metric_name.len(), METRIC_NAME_MAX_LEN);
    for (key, value) in &longest {
        assert!(
            [
                MAX_QUERY_BYTES,
                METRIC_NAME_MAX_LEN,
                MAX_VALUE_BYTES,
                "pooled".len()
            ]
            .contains(&value.len()),
            "{key}: {} bytes",
            value.len()
        );
        // One byte more, anywhere, is refused.
        let mut longer = longest.clone();
        longer.insert(key.clone(), format!("{value}0"));
        let refused = problems(&longer);
        assert!(
            refused.iter().any(|problem| key.starts_with(problem.key())),
            "{key}: {refused:?}"
        );
    }
}
