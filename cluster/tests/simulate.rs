//! `admit-cluster simulate`: the frontier's sweep in the simulation, seeded and repeatable,
//! and a trace from a Prometheus range query.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BINARY: &str = env!("CARGO_BIN_EXE_admit-cluster");

fn dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("admit-sim-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn simulate(dir: &Path, name: &str, args: &[&str]) -> (Output, serde_json::Value) {
    let json = dir.join(format!("{name}.json"));
    let output = Command::new(BINARY)
        .arg("simulate")
        .args(args)
        .arg("--json")
        .arg(&json)
        .arg("--svg")
        .arg(dir.join(format!("{name}.svg")))
        .arg("--frontier-svg")
        .arg(dir.join(format!("{name}-frontier.svg")))
        .output()
        .expect("admit-cluster runs");
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&output.stdout)
    );
    let report = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    (output, report)
}

/// Each policy's name, SLO attainment and replica-seconds.
fn points(report: &serde_json::Value) -> Vec<(String, f64, f64)> {
    report["summaries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["policy"].as_str().unwrap().to_owned(),
                s["slo_attainment"].as_f64().unwrap(),
                s["replica_seconds"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn the_sweep_runs_in_the_simulation_and_a_seed_repeats_it() {
    let dir = dir("sweep");
    let (_, first) = simulate(&dir, "first", &["--sweep", "--trace", "step"]);
    let (_, again) = simulate(&dir, "again", &["--sweep", "--trace", "step"]);
    let (_, other) = simulate(
        &dir,
        "other",
        &["--sweep", "--trace", "step", "--seed", "2"],
    );
    let points_first = points(&first);
    assert_eq!(points_first.len(), 23, "{points_first:?}");
    assert_eq!(
        points_first,
        points(&again),
        "the same seed, another answer"
    );
    assert_ne!(
        points_first,
        points(&other),
        "another seed, the same answer"
    );
    // Every run answered every request it sent, and the frontier is drawn from them.
    for run in first["runs"].as_array().unwrap() {
        let total = &run["total"];
        assert!(
            total["offered"].as_u64().unwrap() > 8_000,
            "{}",
            run["name"]
        );
        assert!(total["ok"].as_u64().unwrap() > 0, "{}", run["name"]);
    }
    let frontier = first["frontier"]["points"].as_array().unwrap();
    assert_eq!(frontier.len(), 23);
    // A fixed fleet sized for the peak keeps the SLO; one of three replicas does not.
    let slo = |name: &str| {
        points_first
            .iter()
            .find(|(policy, ..)| policy == name)
            .unwrap_or_else(|| panic!("no {name}"))
            .1
    };
    assert!(slo("fixed 5") > 0.95, "{points_first:?}");
    assert!(slo("fixed 3") < slo("fixed 5"), "{points_first:?}");
    assert!(dir.join("first-frontier.svg").is_file());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_range_query_export_plays_as_the_trace() {
    let dir = dir("trace-file");
    // Five minutes of λ, a point a minute, played at 10×: 30 s from 20/s up to 80/s.
    let points: Vec<String> = [20, 40, 80, 80, 40, 20]
        .iter()
        .enumerate()
        .map(|(i, rate)| format!("[{},\"{rate}\"]", 1_700_000_000 + 60 * i))
        .collect();
    let answer = format!(
        r#"{{"status":"success","data":{{"resultType":"matrix","result":[{{"metric":{{}},"values":[{}]}}]}}}}"#,
        points.join(",")
    );
    let file = dir.join("lambda.json");
    std::fs::write(&file, answer).unwrap();
    let (_, report) = simulate(
        &dir,
        "played",
        &[
            "--policies",
            "admit,fixed:2",
            "--trace-file",
            file.to_str().unwrap(),
        ],
    );
    let runs = report["runs"].as_array().unwrap();
    let offered = runs[0]["total"]["offered"].as_u64().unwrap() as f64;
    // The ramps' mean rate over 30 s: (30 + 60 + 80 + 60 + 30) / 5 = 52 per second.
    let expected = 52.0 * 30.0;
    assert!(
        (offered - expected).abs() < 4.0 * expected.sqrt(),
        "{offered} requests for {expected} expected"
    );
    assert_eq!(runs[0]["seconds"].as_array().unwrap().len(), 30);

    // A file that is not an export fails with what is wrong, and nothing is simulated.
    std::fs::write(&file, r#"{"data":{"result":[]}}"#).unwrap();
    let output = Command::new(BINARY)
        .args(["simulate", "--trace-file", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("0 series, not one"), "{stderr}");
    std::fs::remove_dir_all(dir).unwrap();
}
