use super::*;

const T0: f64 = 1_700_000_000.0; // 2023-11-14 22:13:20 UTC

fn chart(series: Vec<Series>) -> Chart {
    Chart {
        title: "t".into(),
        x_label: "time (UTC)".into(),
        y_label: "replicas".into(),
        series,
    }
}

fn series(name: &str, style: Style, points: Vec<(f64, Option<f64>)>) -> Series {
    Series {
        name: name.into(),
        style,
        points,
    }
}

fn minutes(ys: &[Option<f64>]) -> Vec<(f64, Option<f64>)> {
    ys.iter()
        .enumerate()
        .map(|(i, &y)| (T0 + 60.0 * i as f64, y))
        .collect()
}

/// Every `&` starts one of the five entities.
fn check_entities(s: &str) {
    for (i, _) in s.match_indices('&') {
        let rest = &s[i..];
        assert!(
            ["&amp;", "&lt;", "&gt;", "&quot;", "&#39;"]
                .iter()
                .any(|e| rest.starts_with(e)),
            "bare & in {s:?}"
        );
    }
}

/// A tiny XML checker: tags balance, one `<svg>` root, quotes pair, no stray `<`/`>`/`&`.
fn assert_well_formed(svg: &str) {
    assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>\n"));
    let (mut stack, mut rest, mut roots) = (Vec::<&str>::new(), svg, 0);
    while let Some(start) = rest.find('<') {
        let text = &rest[..start];
        assert!(!text.contains('>'), "stray > in {text:?}");
        check_entities(text);
        assert!(
            !stack.is_empty() || text.trim().is_empty(),
            "text outside the root"
        );
        let end = start + rest[start..].find('>').expect("unclosed tag");
        let tag = &rest[start + 1..end];
        assert!(!tag.contains('<'), "< inside {tag:?}");
        assert_eq!(tag.matches('"').count() % 2, 0, "unpaired quote in {tag:?}");
        check_entities(tag);
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(stack.pop(), Some(name), "mismatched </{name}>");
        } else {
            let name = tag
                .split_whitespace()
                .next()
                .expect("empty tag")
                .trim_end_matches('/');
            assert!(
                name.chars().all(|c| c.is_ascii_alphanumeric()),
                "bad name {name:?}"
            );
            if stack.is_empty() {
                roots += 1;
            }
            if !tag.ends_with('/') {
                stack.push(name);
            }
        }
        rest = &rest[end + 1..];
    }
    assert!(stack.is_empty(), "unclosed {stack:?}");
    assert!(rest.trim().is_empty());
    assert_eq!(roots, 1);
}

fn assert_clean(svg: &str) {
    assert_well_formed(svg);
    for bad in ["NaN", "nan", "inf", "Inf"] {
        assert!(!svg.contains(bad), "{bad} in\n{svg}");
    }
}

#[test]
fn typical_chart_is_well_formed_and_deterministic() {
    let c = chart(vec![
        series(
            "recommended",
            Style::Step,
            minutes(&[Some(3.0), Some(4.0), None, Some(6.0)]),
        ),
        series(
            "servers",
            Style::Line,
            minutes(&[Some(2.5), Some(3.7), None, Some(5.2)]),
        ),
        series(
            "current",
            Style::Dashed,
            minutes(&[Some(3.0), Some(3.0), Some(4.0), Some(5.0)]),
        ),
    ]);
    let svg = c.render_svg();
    assert_clean(&svg);
    assert_eq!(svg, c.render_svg());
    assert!(svg.contains(r#"width="960" height="480""#));
    for name in ["recommended", "servers", "current", "no answer"] {
        assert!(
            svg.contains(&format!(">{name}</text>")),
            "{name} not in legend"
        );
    }
    assert_eq!(
        svg.matches("stroke-dasharray").count(),
        2,
        "the dashed line and its swatch"
    );
    assert!(svg.contains(">22:14<"), "{svg}");
    // One gap marker (both gaps are at the same minute) and its legend swatch.
    assert_eq!(svg.matches(GAP_COLOUR).count(), 2);
}

#[test]
fn text_is_escaped() {
    let mut c = chart(vec![series(
        r#"sum(rate(x{job="a&b"}[1m])) < 'y' > 0"#,
        Style::Line,
        minutes(&[Some(1.0)]),
    )]);
    c.title = "<script>&".into();
    c.y_label = "a\u{0}b\nc".into();
    let svg = c.render_svg();
    assert_clean(&svg);
    assert!(svg.contains("sum(rate(x{job=&quot;a&amp;b&quot;}[1m])) &lt; &#39;y&#39; &gt; 0"));
    assert!(svg.contains("&lt;script&gt;&amp;"));
    assert!(svg.contains(">a b c</text>"));
    assert!(!svg.contains("<script"));
    assert_eq!(escape(r#"&<>"'"#), "&amp;&lt;&gt;&quot;&#39;");
}

#[test]
fn nice_ticks_for_several_ranges() {
    let cases: &[(f64, f64, &[f64])] = &[
        (0.0, 10.0, &[0.0, 2.0, 4.0, 6.0, 8.0, 10.0]),
        (0.0, 1.0, &[0.0, 0.2, 0.4, 0.6, 0.8, 1.0]),
        (0.0, 3.0, &[0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0]),
        (0.0, 7.0, &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]),
        (0.0, 37.0, &[0.0, 10.0, 20.0, 30.0, 40.0]),
        (0.0, 0.0, &[0.0, 0.2, 0.4, 0.6, 0.8, 1.0]),
        (0.0, 1e9, &[0.0, 2e8, 4e8, 6e8, 8e8, 1e9]),
        (-3.0, 12.0, &[-5.0, 0.0, 5.0, 10.0, 15.0]),
        (0.0, 0.03, &[0.0, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03]),
    ];
    for &(lo, hi, want) in cases {
        assert_eq!(nice_ticks(lo, hi).0, want, "[{lo}, {hi}]");
    }
    for hi in [1.0, 1.3, 2.9, 4.4, 6.1, 14.5, 99.0, 123.0, 555.0, 7e6, 3e11] {
        let (t, _) = nice_ticks(0.0, hi);
        assert!((4..=8).contains(&t.len()), "{hi}: {t:?}");
        assert!(t[0] == 0.0 && *t.last().unwrap() >= hi);
    }
    let (t, exp) = nice_ticks(0.0, 3.0);
    let labels: Vec<_> = t.iter().map(|&v| y_label(v, 3.0, exp)).collect();
    assert_eq!(labels, ["0", "0.5", "1.0", "1.5", "2.0", "2.5", "3.0"]);
    assert_eq!(y_label(2e8, 1e9, nice_ticks(0.0, 1e9).1), "0.2G");
    assert_eq!(y_label(5000.0, 2e4, nice_ticks(0.0, 2e4).1), "5k");
    assert_eq!(y_label(2e14, 1e15, nice_ticks(0.0, 1e15).1), "2.0e14");
}

#[test]
fn time_labels_and_steps() {
    assert_eq!(format_hh_mm(1_700_000_000), "22:13");
    assert_eq!(format_hh_mm(0), "00:00");
    assert_eq!(format_hh_mm(-60), "23:59");
    assert_eq!(
        format_utc_range(1_700_000_000, 1_700_003_000),
        "2023-11-14 22:13–23:03 UTC"
    );
    assert_eq!(
        format_utc_range(1_700_000_000, 1_700_010_000),
        "2023-11-14 22:13 – 2023-11-15 01:00 UTC"
    );
    assert_eq!(civil_from_days(0), (1970, 1, 1));
    assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    assert_eq!(civil_from_days(-1), (1969, 12, 31));
    assert_eq!(time_step(T0, T0 + 300.0), 60.0);
    assert_eq!(time_step(T0, T0 + 3600.0), 600.0);
    assert_eq!(time_step(T0, T0 + 6.0 * 3600.0), 3600.0);
    assert_eq!(time_step(T0, T0 + 86_400.0), 10_800.0);
    assert_eq!(time_step(T0, T0 + 7.0 * 86_400.0), 86_400.0);
    assert_eq!(time_step(T0, T0 + 30.0 * 86_400.0), 5.0 * 86_400.0);
    assert_eq!(time_label(1_699_920_000.0, 86_400.0), "11-14");
    // A 1 h replay: 10-minute ticks labelled HH:MM.
    let svg = chart(vec![series(
        "r",
        Style::Line,
        (0..=60)
            .map(|i| (T0 + 60.0 * f64::from(i), Some(1.0)))
            .collect(),
    )])
    .render_svg();
    for label in ["22:20", "22:30", "22:40", "22:50", "23:00", "23:10"] {
        assert!(svg.contains(&format!(">{label}</text>")), "{label}");
    }
}

#[test]
fn steps_go_horizontal_then_vertical() {
    let plot = plot();
    let (d, dots) = path(
        &plot,
        &[(0.0, Some(1.0)), (4.0, Some(3.0)), (8.0, Some(2.0))],
        true,
    );
    assert_eq!(d, "M72 130H472V110H872V120");
    assert!(dots.is_empty());
    let (d, _) = path(&plot, &[(0.0, Some(1.0)), (4.0, Some(3.0))], false);
    assert_eq!(d, "M72 130L472 110");
}

/// x 0..8.64 on 72..936 px (100 px a unit), y 0..10 on 140..40 px (10 px a unit).
fn plot() -> Plot {
    Plot {
        bottom: 140.0,
        x: (0.0, 8.64),
        y: (0.0, 10.0),
    }
}

#[test]
fn gaps_split_paths() {
    let plot = plot();
    let pts = [
        (0.0, Some(1.0)),
        (2.0, Some(2.0)),
        (4.0, None),
        (6.0, Some(3.0)),
        (8.0, Some(4.0)),
    ];
    let (d, dots) = path(&plot, &pts, false);
    assert_eq!(d, "M72 130L272 120M672 110L872 100");
    assert!(dots.is_empty());
    // A step holds until the gap; a lone point between gaps becomes a dot (lines) or a stub.
    let (d, _) = path(&plot, &pts, true);
    assert_eq!(d, "M72 130H272V120H472M672 110H872V100");
    let lone = [(0.0, None), (4.0, Some(5.0)), (8.0, None)];
    let (d, dots) = path(&plot, &lone, false);
    assert_eq!((d.as_str(), dots.len()), ("M472 90", 1));
    assert_eq!(path(&plot, &lone, true), ("M472 90H872".into(), vec![]));
    // Rendered: two `M`s in the series path.
    let svg = chart(vec![series(
        "r",
        Style::Line,
        minutes(&[Some(1.0), None, Some(2.0), Some(2.0)]),
    )])
    .render_svg();
    let line = svg
        .lines()
        .find(|l| l.contains(PALETTE[0]) && l.contains("stroke-width=\"2\""))
        .unwrap();
    assert_eq!(line.matches('M').count(), 2, "{line}");
}

#[test]
fn edge_cases_render_cleanly() {
    let big = minutes(&[Some(1e9), Some(5e8), Some(1e9)]);
    let cases: Vec<(&str, Vec<Series>)> = vec![
        ("no series", vec![]),
        ("no points", vec![series("a", Style::Line, vec![])]),
        (
            "one point",
            vec![series("a", Style::Step, vec![(T0, Some(3.0))])],
        ),
        (
            "all none",
            vec![series("a", Style::Line, minutes(&[None, None, None]))],
        ),
        (
            "all equal",
            vec![series("a", Style::Line, minutes(&[Some(4.0); 5]))],
        ),
        (
            "all zero",
            vec![series("a", Style::Step, minutes(&[Some(0.0); 5]))],
        ),
        (
            "zero width",
            vec![series(
                "a",
                Style::Line,
                vec![(T0, Some(1.0)), (T0, Some(2.0))],
            )],
        ),
        ("huge", vec![series("a", Style::Dashed, big)]),
        (
            "huge 1e300",
            vec![series(
                "a",
                Style::Line,
                minutes(&[Some(1e300), Some(-1e300)]),
            )],
        ),
        (
            "tiny",
            vec![series(
                "a",
                Style::Line,
                minutes(&[Some(1e-300), Some(5e-324)]),
            )],
        ),
        (
            "negative",
            vec![series("a", Style::Line, minutes(&[Some(-3.0), Some(2.0)]))],
        ),
        (
            "wide x",
            vec![series(
                "a",
                Style::Line,
                vec![(-1e300, Some(1.0)), (1e300, Some(2.0))],
            )],
        ),
        (
            "non-finite",
            vec![series(
                "a",
                Style::Step,
                vec![
                    (T0, Some(f64::NAN)),
                    (T0 + 60.0, Some(f64::INFINITY)),
                    (T0 + 120.0, Some(f64::NEG_INFINITY)),
                    (f64::NAN, Some(1.0)),
                    (f64::INFINITY, Some(1.0)),
                    (T0 + 180.0, Some(f64::MAX)),
                    (T0 + 240.0, Some(2.0)),
                ],
            )],
        ),
        (
            "unsorted",
            vec![series(
                "a",
                Style::Step,
                vec![(T0 + 120.0, Some(1.0)), (T0, Some(2.0)), (T0 + 60.0, None)],
            )],
        ),
        (
            "many series",
            (0..40)
                .map(|i| {
                    series(
                        &format!("series number {i}"),
                        Style::Line,
                        minutes(&[Some(1.0), None]),
                    )
                })
                .collect(),
        ),
        (
            "long name",
            vec![series(&"x".repeat(500), Style::Line, minutes(&[Some(1.0)]))],
        ),
    ];
    for (what, s) in cases {
        let mut c = chart(s);
        c.title = what.into();
        let svg = c.render_svg();
        assert_clean(&svg);
        assert_eq!(svg, c.render_svg(), "{what}");
    }
    let none = chart(vec![series("a", Style::Line, minutes(&[None, None]))]).render_svg();
    assert!(none.contains(">no data<") && none.contains(">no answer<"));
    let many = chart(
        (0..40)
            .map(|i| {
                series(
                    &format!("series number {i}"),
                    Style::Line,
                    minutes(&[Some(1.0)]),
                )
            })
            .collect(),
    )
    .render_svg();
    assert!(many.contains(" more</text>"), "{many}");
}
