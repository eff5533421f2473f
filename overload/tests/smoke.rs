//! Short runs of the demo, the protocol and the classes run, end to end: real servers in child
//! processes on 127.0.0.1, driven for a few seconds each. Only the bookkeeping is checked,
//! never a speed.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Runs `admit-overload` with `args` and returns its output, failing with it if it fails.
fn run(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_admit-overload"))
        .args(args)
        .output()
        .expect("admit-overload runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("the JSON is written"))
        .expect("valid JSON")
}

fn is_svg(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|svg| svg.starts_with("<svg") && svg.contains("</svg>"))
}

#[test]
fn the_protocol_measures_two_points_and_writes_its_report() {
    let dir = tempdir("protocol");
    let out = dir.to_str().expect("a UTF-8 path");
    let stdout = run(&[
        "protocol",
        "--loads=0.5,2",
        "--distributions=bimodal",
        "--styles=blocking,io",
        "--peers=admit,gate-bound",
        "--no-sweep",
        "--no-step",
        "--no-storm",
        "--warm-seconds=1",
        "--measured-seconds=1",
        "--capacity=200",
        "--no-pin",
        "--out",
        out,
    ]);
    assert!(stdout.contains("goodput, % of capacity"), "{stdout}");
    let report = json(&dir.join("protocol.json"));
    for (curves, style) in report["curves"]
        .as_array()
        .expect("curves per style")
        .iter()
        .zip(["blocking", "io"])
    {
        assert_eq!(curves["style"], style);
        assert_eq!(curves["distribution"], "bimodal");
        assert_eq!(curves["capacity"], 200.0);
        let policies = curves["curves"].as_array().expect("a curve per peer");
        assert_eq!(policies.len(), 2);
        for point_and_load in policies.iter().flat_map(|curve| {
            let points = curve["points"].as_array().expect("points");
            assert_eq!(points.len(), 2);
            points.iter().zip([0.5, 2.0])
        }) {
            let (point, load) = point_and_load;
            assert_eq!(point["load"], load);
            // A Poisson second at 100/s or 400/s: well within a factor of two of its rate.
            let offered = point["offered_per_s"].as_f64().expect("a rate");
            assert!(
                offered > 0.5 * load * 200.0 && offered < 2.0 * load * 200.0,
                "{point}"
            );
            assert!(point["refusal_reasons"].is_object(), "{point}");
            for share in ["goodput", "refused", "timed_out"] {
                let share = point[share].as_f64().expect("a share");
                assert!((0.0..=2.0 * load).contains(&share), "{point}");
            }
        }
    }
    assert_eq!(report["curves"].as_array().map(Vec::len), Some(2));
    assert!(is_svg(&dir.join("curves-bimodal-blocking.svg")));
    assert!(is_svg(&dir.join("curves-bimodal-io.svg")));
    assert!(report["transients"].is_null());
}

#[test]
fn the_classes_run_tallies_each_class_and_writes_its_report() {
    let dir = tempdir("classes");
    let out = dir.to_str().expect("a UTF-8 path");
    let stdout = run(&[
        "classes",
        "--loads=2",
        "--styles=inline",
        "--policies=admit-classes,gate-bound",
        "--no-spike",
        "--warm-seconds=1",
        "--measured-seconds=1",
        "--capacity=200",
        "--no-pin",
        "--out",
        out,
    ]);
    assert!(stdout.contains("critical available, %"), "{stdout}");
    let report = json(&dir.join("classes.json"));
    let classes = &report["styles"][0];
    assert_eq!(classes["style"], "inline");
    // Alone, the critical class is offered its rate, 0.2 × the capacity, and nothing else.
    let alone = &classes["uncontended"];
    let offered = alone["critical"]["offered_per_s"].as_f64().expect("a rate");
    assert!(offered > 0.5 * 40.0 && offered < 2.0 * 40.0, "{alone}");
    assert_eq!(alone["sheddable"]["offered_per_s"], 0.0);
    assert!(alone["sheddable"]["availability"].is_null(), "{alone}");
    let runs = classes["runs"].as_array().expect("a run per policy");
    assert_eq!(runs.len(), 2);
    let point = &runs[1]["points"][0];
    assert_eq!(point["load"], 2.0);
    // 0.2 × 200/s critical, the sheddable class filling the load to 400/s: each within a factor
    // of two of its rate.
    for (class, rate) in [("critical", 40.0), ("sheddable", 360.0)] {
        let offered = point[class]["offered_per_s"].as_f64().expect("a rate");
        assert!(offered > 0.5 * rate && offered < 2.0 * rate, "{point}");
        let available = point[class]["availability"].as_f64().expect("a share");
        assert!((0.0..=1.0).contains(&available), "{point}");
    }
    let cut_time: f64 = point["cut_time"]
        .as_array()
        .expect("the cut's shares")
        .iter()
        .map(|share| share.as_f64().expect("a share"))
        .sum();
    assert!((cut_time - 1.0).abs() < 1e-9, "{point}");
    assert!(is_svg(&dir.join("classes-inline.svg")));
}

#[test]
fn the_protocol_rejects_bad_flags_with_a_message() {
    for args in [
        &["protocol", "--loads=0"][..],
        &["protocol", "--peers=tower:0"],
        &["protocol", "--styles=sideways"],
        &["classes", "--critical=1"],
        &["classes", "--policies=admit,nothing"],
        &["--runs=nothing"],
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_admit-overload"))
            .args(args)
            .output()
            .expect("admit-overload runs");
        assert!(!output.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("invalid value"), "{args:?}: {stderr}");
    }
}

#[test]
fn the_demo_runs_its_phases_and_writes_json_and_a_chart() {
    let dir = tempdir("demo");
    let (json_path, chart) = (dir.join("demo.json"), dir.join("demo.svg"));
    run(&[
        "--cold=1",
        "--normal=1",
        "--overload=1",
        "--recovery=1",
        "--runs=unprotected,admit",
        "--capacity=200",
        "--no-pin",
        "--json",
        json_path.to_str().expect("UTF-8"),
        "--chart",
        chart.to_str().expect("UTF-8"),
    ]);
    let report = json(&json_path);
    let runs = report["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[1]["run"], "admit");
    let phases: Vec<&str> = runs[0]["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .map(|phase| phase["phase"].as_str().expect("a name"))
        .collect();
    assert_eq!(phases, ["cold start", "normal", "overload", "recovery"]);
    assert!(is_svg(&chart));
}

#[test]
fn a_storm_with_admit_clients_throttles_them_and_keeps_attempts_down() {
    let dir = tempdir("storm");
    let out = dir.to_str().expect("a UTF-8 path");
    // 20 ms of work a request: the server serves about 50 a second, so 4x overloads it.
    let stdout = run(&[
        "protocol",
        "--loads=1",
        "--distributions=exponential",
        "--styles=inline",
        "--peers=admit-bound",
        "--no-sweep",
        "--no-step",
        "--storm-peaks=4",
        "--storm-clients=admit:1",
        "--work-ms=20",
        "--warm-seconds=1",
        "--measured-seconds=1",
        "--capacity=50",
        "--no-pin",
        "--out",
        out,
    ]);
    assert!(stdout.contains("storm    4x, admit:1"), "{stdout}");
    let report = json(&dir.join("protocol.json"));
    let storms = report["transients"]["runs"][0]["storms"]
        .as_array()
        .expect("the storms of the one policy");
    assert_eq!(storms.len(), 1, "{storms:?}");
    let storm = &storms[0];
    assert_eq!(storm["clients"], "admit:1");
    assert_eq!(storm["peak"], 4.0);
    // The clients refuse part of the overload themselves and retry within a budget, so about
    // one attempt per request reaches the server (immediate retries send up to four).
    let attempts = storm["attempts_per_request"].as_f64().expect("a ratio");
    assert!(attempts > 0.0 && attempts < 1.1, "{storm}");
    let during = storm["local_refusals"][0].as_u64().expect("a count");
    assert!(during > 0, "{storm}");
    assert!(is_svg(&dir.join("transients.svg")));
}

/// A fresh directory under the target directory's temporary space.
fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("overload-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    dir
}
