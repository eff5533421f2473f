//! Every case of the reference vectors (`tests/data/erlang_vectors_dev.json`, a copy of
//! `shared/reference/erlang_vectors_dev.json`: 60-digit mpmath values), within each case's
//! `suggested_rel_tol`, and every invalid case's error.

use admit::erlang::{ErlangA, ErlangError, MMc, QueueModel, Target};
use serde_json::Value;

fn cases() -> Vec<Value> {
    let text = include_str!("data/erlang_vectors_dev.json");
    let root: Value = serde_json::from_str(text).expect("valid JSON");
    root["cases"].as_array().expect("a list of cases").clone()
}

fn number(value: &Value) -> f64 {
    value
        .as_str()
        .expect("numbers are decimal strings")
        .parse()
        .expect("a number")
}

fn numbers(value: &Value) -> Vec<f64> {
    value
        .as_array()
        .map_or_else(Vec::new, |list| list.iter().map(number).collect())
}

/// Relative comparison; an expected 0 must be exactly 0.
fn close(id: &str, what: &str, actual: f64, expected: f64, tolerance: f64) {
    let ok = if expected == 0.0 {
        actual == 0.0
    } else {
        ((actual - expected) / expected).abs() <= tolerance
    };
    assert!(
        ok,
        "{id}: {what} = {actual:e}, expected {expected:e} (±{tolerance:e} relative)"
    );
}

fn tolerance(case: &Value) -> f64 {
    case.get("suggested_rel_tol").map_or(1e-13, number)
}

#[test]
fn mmc_cases() {
    let mut checked = 0;
    for case in cases().iter().filter(|c| c["kind"] == "mmc") {
        let id = case["id"].as_str().unwrap();
        let (inputs, expected, tol) = (&case["inputs"], &case["expected"], tolerance(case));
        let queue = MMc::new(number(&inputs["lambda"]), number(&inputs["mu"])).unwrap();
        let servers = inputs["c"].as_u64().unwrap();
        let staffed = queue.with_servers(servers).unwrap();
        close(id, "a", queue.offered_load(), number(&expected["a"]), tol);
        close(
            id,
            "erlang_b",
            queue.erlang_b(servers).unwrap(),
            number(&expected["erlang_b"]),
            tol,
        );
        close(
            id,
            "erlang_c",
            staffed.prob_wait(),
            number(&expected["erlang_c"]),
            tol,
        );
        close(
            id,
            "mean_wait",
            staffed.mean_wait(),
            number(&expected["mean_wait"]),
            tol,
        );
        close(
            id,
            "mean_queue_len",
            staffed.mean_queue_len(),
            number(&expected["mean_queue_len"]),
            tol,
        );
        close(
            id,
            "mean_wait_given_wait",
            staffed.mean_wait_given_wait(),
            number(&expected["mean_wait_given_wait"]),
            tol,
        );
        close(
            id,
            "occupancy",
            staffed.occupancy(),
            number(&expected["occupancy"]),
            tol,
        );
        let times = numbers(&inputs["T"]);
        let levels = numbers(&expected["service_level"]);
        let tails = numbers(&expected["p_wait_gt_T"]);
        assert_eq!(
            (times.len(), levels.len(), tails.len()),
            (times.len(), times.len(), times.len())
        );
        for ((t, level), tail) in times.iter().zip(levels).zip(tails) {
            close(
                id,
                &format!("SL({t})"),
                staffed.service_level(*t).unwrap(),
                level,
                tol,
            );
            close(
                id,
                &format!("P(Wq>{t})"),
                staffed.prob_wait_exceeds(*t).unwrap(),
                tail,
                tol,
            );
            // The per-call API agrees with the evaluated system.
            assert_eq!(queue.service_level(servers, *t), staffed.service_level(*t));
        }
        for (q, t) in expected["wait_percentile"].as_object().unwrap() {
            let q: f64 = q.parse().unwrap();
            close(
                id,
                &format!("t({q})"),
                staffed.wait_percentile(q).unwrap(),
                number(t),
                tol,
            );
        }
        assert_eq!(queue.prob_wait(servers), Ok(staffed.prob_wait()));
        checked += 1;
    }
    assert_eq!(checked, 22);
}

#[test]
fn min_servers_cases() {
    let mut checked = 0;
    for case in cases().iter().filter(|c| c["kind"] == "min_servers_sl") {
        let id = case["id"].as_str().unwrap();
        let (inputs, expected) = (&case["inputs"], &case["expected"]);
        let queue = MMc::new(number(&inputs["lambda"]), number(&inputs["mu"])).unwrap();
        let (within, at_least) = (number(&inputs["T"]), number(&inputs["target"]));
        let servers = queue
            .min_servers(Target::ServiceLevel { within, at_least })
            .unwrap();
        assert_eq!(servers, expected["c"].as_u64().unwrap(), "{id}");
        close(
            id,
            "SL at c",
            queue.service_level(servers, within).unwrap(),
            number(&expected["service_level_at_c"]),
            1e-13,
        );
        let below = &expected["service_level_at_c_minus_1"];
        if below
            .as_str()
            .is_some_and(|text| text.starts_with("unstable"))
        {
            // c − 1 is unstable, or no servers at all.
            assert!(
                matches!(
                    queue.service_level(servers - 1, within),
                    Err(ErlangError::Unstable { .. } | ErlangError::ZeroServers)
                ),
                "{id}: c − 1 must be unstable"
            );
        } else {
            close(
                id,
                "SL at c − 1",
                queue.service_level(servers - 1, within).unwrap(),
                number(below),
                1e-13,
            );
        }
        assert_eq!(
            queue.with_servers(servers).is_ok() && queue.with_servers(servers - 1).is_err(),
            servers == expected["min_stable_c"].as_u64().unwrap(),
            "{id}: min_stable_c"
        );
        checked += 1;
    }
    assert_eq!(checked, 11);
}

#[test]
fn erlang_a_cases() {
    let mut checked = 0;
    for case in cases().iter().filter(|c| c["kind"] == "erlang_a") {
        let id = case["id"].as_str().unwrap();
        let (inputs, expected, tol) = (&case["inputs"], &case["expected"], tolerance(case));
        let queue = ErlangA::new(
            number(&inputs["lambda"]),
            number(&inputs["mu"]),
            number(&inputs["theta"]),
        )
        .unwrap();
        let n = inputs["N"].as_u64().unwrap();
        close(id, "a", queue.offered_load(), number(&expected["a"]), tol);
        close(
            id,
            "p_wait",
            queue.prob_wait(n).unwrap(),
            number(&expected["p_wait"]),
            tol,
        );
        close(
            id,
            "p_abandon",
            queue.prob_abandon(n).unwrap(),
            number(&expected["p_abandon"]),
            tol,
        );
        close(
            id,
            "p_abandon_given_wait",
            queue.prob_abandon_given_wait(n).unwrap(),
            number(&expected["p_abandon_given_wait"]),
            tol,
        );
        close(
            id,
            "mean_wait",
            queue.mean_wait(n).unwrap(),
            number(&expected["mean_wait"]),
            tol,
        );
        close(
            id,
            "mean_queue_len",
            queue.mean_queue_len(n).unwrap(),
            number(&expected["mean_queue_len"]),
            tol,
        );
        close(
            id,
            "occupancy",
            queue.occupancy(n).unwrap(),
            number(&expected["occupancy"]),
            tol,
        );
        let times = numbers(&inputs["T"]);
        for (i, t) in times.iter().enumerate() {
            let at = |field: &str| number(&expected[field][i]);
            close(
                id,
                &format!("P(V>{t})"),
                queue.prob_virtual_wait_exceeds(n, *t).unwrap(),
                at("p_virtual_wait_gt_T"),
                tol,
            );
            close(
                id,
                &format!("served within {t}"),
                queue.service_level(n, *t).unwrap(),
                at("p_served_within_T"),
                tol,
            );
            close(
                id,
                &format!("P(W≤{t})"),
                queue.prob_wait_within(n, *t).unwrap(),
                at("p_wait_le_T"),
                tol,
            );
        }
        checked += 1;
    }
    assert_eq!(checked, 2);
}

#[test]
fn invalid_cases_are_typed_errors() {
    use ErlangError::*;
    let mut checked = 0;
    for case in cases().iter().filter(|c| c["kind"] == "invalid") {
        let id = case["id"].as_str().unwrap();
        let inputs = &case["inputs"];
        let get = |field: &str| inputs.get(field).map(number);
        let (lambda, mu) = (get("lambda").unwrap(), get("mu").unwrap());
        let expected = match id {
            "inv_lambda_eq_cmu" => Unstable { rho: 1.0 },
            "inv_lambda_gt_cmu" => Unstable { rho: 1.2 },
            "inv_c_zero" => ZeroServers,
            "inv_mu_zero" | "inv_mu_negative" => NonPositiveRate {
                field: "service_rate",
            },
            "inv_lambda_negative" => Negative {
                field: "arrival_rate",
            },
            "inv_lambda_nan" | "inv_lambda_inf" => NonFinite {
                field: "arrival_rate",
            },
            "inv_mu_nan" | "inv_mu_inf" => NonFinite {
                field: "service_rate",
            },
            "inv_T_negative" => Negative { field: "t" },
            "inv_T_nan" => NonFinite { field: "t" },
            "inv_target_one" => TargetOutOfRange { target: 1.0 },
            "inv_target_gt_one" => TargetOutOfRange { target: 1.5 },
            "inv_target_nan" => NonFinite { field: "at_least" },
            "inv_erlangA_theta_zero" => NonPositiveRate {
                field: "abandon_rate",
            },
            other => panic!("no expectation for invalid case {other}"),
        };
        let actual = if let Some(theta) = get("theta") {
            ErlangA::new(lambda, mu, theta).and_then(|q| q.prob_wait(inputs["N"].as_u64().unwrap()))
        } else if let Some(at_least) = get("target") {
            let within = get("T").unwrap();
            MMc::new(lambda, mu)
                .and_then(|q| q.min_servers(Target::ServiceLevel { within, at_least }))
                .map(|c| c as f64)
        } else {
            let servers = inputs["c"].as_u64().unwrap();
            MMc::new(lambda, mu).and_then(|q| match get("T") {
                Some(t) => q.service_level(servers, t),
                None => q.prob_wait(servers),
            })
        };
        assert_eq!(actual, Err(expected), "{id}");
        checked += 1;
    }
    assert_eq!(checked, 16);
}
