//! `weir simulate` end to end: runs the built binary and checks what a user sees. Every run is
//! on the simulated clock, so nothing here sleeps and each test takes milliseconds.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

const FIXED: &str = "fixed_window:limit=10,window=1s";
const LOG: &str = "sliding_log:limit=10,window=1s";
const BUCKET: &str = "token_bucket:capacity=10,rate=10,per=1s";
const GCRA: &str = "gcra:rate=10,per=1s,burst=10";

/// The rules of the comparisons, as `--rule` options.
fn four_rules() -> String {
    format!("--rule {FIXED} --rule {LOG} --rule {BUCKET} --rule {GCRA}")
}

/// Runs `weir` with whitespace-separated arguments, then `extra` as they are.
fn weir_line(line: &str, extra: &[&str]) -> Output {
    let mut args: Vec<&str> = line.split_whitespace().collect();
    args.extend(extra);
    weir(&args)
}

fn weir(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .output()
        .unwrap()
}

fn weir_with_stdin(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "weir failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}

/// `(allowed, denied)` per CSV line of one rule, the `total` line last.
fn csv_counts(csv: &str, rule: &str) -> Vec<(u64, u64)> {
    csv.lines()
        .skip(1)
        .filter(|line| line.contains(&format!("\"{rule}\"")))
        .map(|line| {
            let fields: Vec<&str> = line.rsplit(',').collect();
            // Reversed: mean_delay_ms, denied, allowed, ...
            (fields[2].parse().unwrap(), fields[1].parse().unwrap())
        })
        .collect()
}

#[test]
fn four_rules_meet_two_bursts_across_a_window_boundary() {
    // 30 requests at 0.9 s and 30 more at 1.1 s, on either side of a fixed window boundary.
    let out = stdout(&weir_line(
        &format!(
            "simulate {} --pattern burst --burst 30 --offset 900ms --every 200ms \
             --duration 1200ms --format csv",
            four_rules()
        ),
        &[],
    ));
    // Rows: [0, 1s), [1s, 1.2s), total.
    // The fixed window resets at 1 s: 10 more pass 200 ms after the first 10.
    assert_eq!(csv_counts(&out, FIXED), [(10, 20), (10, 20), (20, 40)]);
    // The sliding log still counts the 10 from 0.9 s at 1.1 s: nothing passes.
    assert_eq!(csv_counts(&out, LOG), [(10, 20), (0, 30), (10, 50)]);
    // The token bucket and GCRA earned back 0.2 s × 10/s = 2.
    assert_eq!(csv_counts(&out, BUCKET), [(10, 20), (2, 28), (12, 48)]);
    assert_eq!(csv_counts(&out, GCRA), [(10, 20), (2, 28), (12, 48)]);
    assert!(out.starts_with("interval,start_s,end_s,rule,algorithm,sent,allowed,denied"));
}

#[test]
fn the_readme_example_prints_its_table_and_chart() {
    let svg = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("weir-readme-burst.svg");
    let output = weir_line(
        &format!(
            "simulate {} --pattern burst --burst 30 --every 2s --rate 5/s --duration 10s --svg",
            four_rules()
        ),
        &[svg.to_str().unwrap()],
    );
    let table = stdout(&output);
    // A burst of 30 plus one background request at 0 s, then 5/s: the buckets refill 4 more
    // before 1 s; the windows deny them.
    assert!(
        table.contains(
            "\n0s-1s       35  10/25             10/25            14/21             14/21\n"
        ),
        "{table}"
    );
    assert!(
        table.contains(
            "\n1s-2s        5   5/0               5/0              5/0               5/0\n"
        ),
        "{table}"
    );
    assert!(
        table.ends_with(
            "\ntotal      200  75/125            75/125           95/105            95/105\n"
        ),
        "{table}"
    );
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains(svg.to_str().unwrap()), "{stderr}");
    std::fs::remove_file(svg).unwrap();
}

/// Checks that every tag is closed in order (the chart has no comments, CDATA or `<` in text).
fn assert_well_formed(svg: &str) {
    let mut open: Vec<&str> = Vec::new();
    let mut rest = svg;
    while let Some(start) = rest.find('<') {
        let end = rest[start..].find('>').unwrap() + start;
        let tag = &rest[start + 1..end];
        rest = &rest[end + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(open.pop(), Some(name), "unbalanced </{name}>");
        } else if !tag.ends_with('/') {
            open.push(tag.split_whitespace().next().unwrap());
        }
    }
    assert!(open.is_empty(), "unclosed: {open:?}");
    assert!(!svg.contains("& "), "unescaped ampersand");
}

#[test]
fn svg_names_every_rule_and_is_well_formed() {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("weir-four-rules.svg");
    let output = weir_line(
        &format!(
            "simulate --rule {FIXED} --rule {LOG} --rule {GCRA} \
             --rule leaky_queue:rate=10,per=1s,max_depth=20,max_wait=2s \
             --rate 15/s --duration 5s --format json --svg"
        ),
        &[path.to_str().unwrap()],
    );
    let json = stdout(&output);
    assert!(
        json.starts_with('{') && json.trim_end().ends_with('}'),
        "{json}"
    );
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.starts_with("<svg"));
    assert_well_formed(&svg);
    for name in ["fixed_window", "sliding_log", "gcra", "leaky_queue"] {
        assert!(svg.contains(name), "{name} is not in the chart");
    }
    assert!(svg.contains("mean delay"));
    std::fs::remove_file(path).unwrap();
}

#[test]
fn a_traffic_file_on_stdin_keeps_keys_apart() {
    let text = "# alice sends 15, bob 5, at the same instant\n".to_owned()
        + &"0.9 alice\n".repeat(15)
        + &"900ms bob\n".repeat(5);
    let out = stdout(&weir_with_stdin(
        &[
            "simulate", "--rule", GCRA, "--input", "-", "--format", "csv",
        ],
        &text,
    ));
    // GCRA allows a burst of 10 per key: alice 10 of 15, bob all 5. The run ends after the
    // interval of the last request.
    assert_eq!(csv_counts(&out, GCRA), [(15, 5), (15, 5)]);
    assert!(out.contains("\ntotal,0,1,"), "{out}");
}

#[test]
fn a_bad_spec_is_named_and_fails() {
    let output = weir(&[
        "simulate",
        "--rule",
        "fixed_windw:limit=10,window=1s",
        "--rate",
        "5/s",
    ]);
    assert!(!output.status.success());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("--rule"), "{stderr}");
    assert!(
        stderr.contains("unknown algorithm `fixed_windw`"),
        "{stderr}"
    );
    assert!(stderr.contains("fixed_window, sliding_log"), "{stderr}");

    let output = weir(&[
        "simulate",
        "--rule",
        "gcra:rate=10,per=1s,burst=0",
        "--rate",
        "5/s",
    ]);
    assert!(!output.status.success());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("gcra: burst must be greater than zero"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());
}

#[test]
fn a_cost_no_rule_can_pass_is_an_error() {
    let output = weir(&["simulate", "--rule", GCRA, "--rate", "5/s", "--cost", "11"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.starts_with("error: --cost 11 is above the limit of"),
        "{stderr}"
    );
}

#[test]
fn help_answers_with_examples() {
    let top = stdout(&weir(&["--help"]));
    assert!(top.contains("Examples:"), "{top}");
    assert!(top.contains("weir simulate --rule"), "{top}");
    let help = stdout(&weir(&["simulate", "--help"]));
    for needle in [
        "Examples:",
        "Rule specs",
        "leaky_queue:rate=10,per=1s,max_depth=20",
        "--pattern file --input FILE",
        "e.g. --rate 30/s",
    ] {
        assert!(help.contains(needle), "`{needle}` is not in the help");
    }
    let short = stdout(&weir(&["simulate", "-h"]));
    assert!(short.contains("Examples:"), "{short}");
}

#[test]
fn a_warm_up_rule_ramps_from_a_third_of_the_rate() {
    // 100/s with a burst of 100, asked 200 times a second: a cold key under a 30 s
    // warm-up admits about a third of the rate at first and the full rate from 30 s on.
    let warm = "gcra:rate=100,per=1s,burst=100,warmup=30s";
    let plain = "gcra:rate=100,per=1s,burst=100";
    let out = stdout(&weir_line(
        &format!(
            "simulate --rule {plain} --rule {warm} --rate 200/s --duration 40s \
             --interval 5s --format csv"
        ),
        &[],
    ));
    let warm_counts = csv_counts(&out, warm);
    let plain_counts = csv_counts(&out, plain);
    assert_eq!(plain_counts[0], (599, 401));
    // 34 at once (1 + 99/3), then about 35 a second, rising with use.
    assert_eq!(warm_counts[0], (210, 790));
    assert!(warm_counts
        .windows(2)
        .take(6)
        .all(|w| w[0].0 <= w[1].0 + 20));
    assert_eq!(&warm_counts[6..8], [(500, 500), (500, 500)]);
    // The table names the rule as given.
    let table = stdout(&weir_line(
        &format!("simulate --rule {warm} --rate 200/s --duration 5s"),
        &[],
    ));
    assert!(table.contains(warm), "{table}");
}

/// `--svg` writes where it is told, relative to the directory `weir` runs in — never into
/// the repository it was built from: a relative file, a directory (the chart inside it),
/// and `--svg` alone (`./weir-simulate.svg`). stderr names the full path written.
#[test]
fn svg_writes_where_told_relative_to_the_current_directory() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("weir-svg-cwd-{}", std::process::id()));
    let charts = dir.join("charts");
    std::fs::create_dir_all(&charts).unwrap();
    let line = format!("simulate --rule {GCRA} --rate 20/s --duration 2s");
    let run_in = |extra: &[&str]| {
        let mut args: Vec<&str> = line.split_whitespace().collect();
        args.extend(extra);
        let output = Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(&args)
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stderr).unwrap()
    };
    let cases: [(&[&str], PathBuf); 3] = [
        (&["--svg", "burst.svg"], dir.join("burst.svg")),
        (&["--svg", "charts"], charts.join("weir-simulate.svg")),
        (&["--svg"], dir.join("weir-simulate.svg")),
    ];
    for (extra, expected) in cases {
        let stderr = run_in(extra);
        let svg = std::fs::read_to_string(&expected)
            .unwrap_or_else(|e| panic!("{extra:?}: no chart at {}: {e}", expected.display()));
        assert!(svg.ends_with("</svg>\n"));
        assert!(
            stderr.contains(&format!("chart written to {}", expected.display())),
            "{extra:?}: {stderr}"
        );
    }
    let repository = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    for name in ["burst.svg", "weir-simulate.svg"] {
        assert!(!repository.join(name).exists(), "{name} in the repository");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
