//! `healthpick simulate FILE [--config CONFIG] [--seed N]`: output, determinism, exit statuses.

use std::process::{Command, Output};

/// The workspace root, where the fixtures and examples live: the binary runs there, so that the
/// paths it prints are the ones the tests name.
const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

fn healthpick(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_healthpick"))
        .args(args)
        .current_dir(ROOT)
        .output()
        .expect("run healthpick")
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8")
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).expect("stderr is UTF-8")
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("exited normally")
}

#[test]
fn each_worked_example_prints_its_expected_output_byte_for_byte() {
    for name in ["active_ejection", "passive_flapping", "tier_failover"] {
        let file = format!("examples/scenarios/{name}.json");
        let out = healthpick(&["simulate", &file]);
        assert_eq!(code(&out), 0, "{name}: {}", stderr(&out));
        let expected =
            std::fs::read_to_string(format!("{ROOT}/examples/scenarios/{name}.expected.jsonl"))
                .unwrap();
        assert_eq!(stdout(&out), expected, "{name}");
        // And again: byte-identical.
        assert_eq!(
            stdout(&healthpick(&["simulate", &file])),
            expected,
            "{name} (second run)"
        );
    }
}

/// Scenarios with traffic: picks spread at a rate, answered after the latencies they give,
/// tallied; PeakEwma's slow instance loses its share while it is slow; each gives the same
/// bytes twice.
#[test]
fn traffic_scenarios_print_their_decisions_the_same_each_run() {
    let file = "examples/scenarios/peak_ewma_slow_instance.json";
    let out = healthpick(&["simulate", file]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    let tallies: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(r#""type":"tally""#))
        .collect();
    assert_eq!(tallies.len(), 10, "{text}");
    assert!(
        tallies[3].starts_with(
            r#"{"at":20.0,"type":"tally","cluster":"search","since":15.0,"picks":{"search-1":"#
        ),
        "{text}"
    );
    assert!(!tallies[3].contains("search-4"), "slow, no picks: {text}");
    assert_eq!(stdout(&healthpick(&["simulate", file])), text);

    // The other traffic scenarios, through their documents' own TierSpill, SlowStart and
    // SessionAffinity sections: what each is about shows, and twice gives the same bytes.
    for (name, shows) in [
        (
            "tier_spill_load_step",
            r#""type":"spill","cluster":"payments","state":"started""#,
        ),
        ("slow_start_join", r#""warming":{"catalog-5":0.1}"#),
        (
            "keyed_ejection",
            r#"{"at":16.0,"type":"pick","cluster":"carts","key":"user-0","destination":"carts-2"}"#,
        ),
    ] {
        let file = format!("examples/scenarios/{name}.json");
        let out = healthpick(&["simulate", &file]);
        assert_eq!(code(&out), 0, "{name}: {}", stderr(&out));
        let text = stdout(&out);
        assert!(text.contains(shows), "{name}: {text}");
        assert_eq!(stdout(&healthpick(&["simulate", &file])), text, "{name}");
    }
}

#[test]
fn a_recorded_timeline_replays_through_another_config() {
    let out = healthpick(&[
        "simulate",
        "examples/scenarios/active_ejection.json",
        "--config",
        "tests/fixtures/simulate/strict_threshold.json",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    // Threshold 1: ejected by the first failed probe (t=15) instead of the second (t=20).
    assert!(text.contains(r#"{"at":15.0,"type":"health","cluster":"orders","destination":"orders-2","part":"active","from":"Healthy","to":"Unhealthy""#), "{text}");
    assert!(!text.contains(r#"{"at":20.0,"type":"health""#), "{text}");
}

#[test]
fn the_seed_option_overrides_the_scenario_seed() {
    let file = "examples/scenarios/active_ejection.json";
    // RoundRobin does not use the random source: same output whatever the seed.
    let a = stdout(&healthpick(&["simulate", file, "--seed", "1"]));
    let b = stdout(&healthpick(&["simulate", file, "--seed", "99"]));
    assert_eq!(a, b);
    assert!(!a.is_empty());
}

#[test]
fn invalid_scenarios_exit_1_naming_the_event() {
    let out = healthpick(&["simulate", "tests/fixtures/simulate/bad_events.json"]);
    assert_eq!(code(&out), 1);
    assert!(
        stdout(&out).is_empty(),
        "nothing is printed for an invalid scenario"
    );
    let err = stderr(&out);
    assert!(err.contains("events[1].request.outcome"), "{err}");
    assert!(err.contains("`exploded` is not an outcome"), "{err}");

    let out = healthpick(&["simulate", "tests/fixtures/simulate/unknown_cluster.json"]);
    assert_eq!(code(&out), 1);
    assert!(stdout(&out).is_empty());
    let err = stderr(&out);
    assert!(
        err.contains("events[1].pick.cluster: no cluster `payments`"),
        "{err}"
    );

    let out = healthpick(&["simulate", "tests/fixtures/simulate/no_such_file.json"]);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("cannot read"), "{}", stderr(&out));
}

#[test]
fn usage_errors_exit_2_and_help_shows_the_format_and_examples() {
    assert_eq!(code(&healthpick(&["simulate"])), 2);
    assert_eq!(
        code(&healthpick(&["simulate", "x.json", "--seed", "minus-one"])),
        2
    );
    let help = stdout(&healthpick(&["simulate", "--help"]));
    for needle in [
        "\"events\"",
        "transport-failure",
        "Exit status:",
        "Examples:",
        "--config",
    ] {
        assert!(help.contains(needle), "help lacks {needle}:\n{help}");
    }
    let main_help = stdout(&healthpick(&["--help"]));
    assert!(main_help.contains("simulate"), "{main_help}");
}
