//! `healthpick --version`, and the `--help` of every subcommand: each shows at least one
//! example command line of its own subcommand. These run the real binary.

use std::process::{Command, Output};

fn healthpick(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_healthpick"))
        .args(args)
        .output()
        .expect("run healthpick")
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8")
}

#[test]
fn version_prints_the_package_version() {
    for flag in ["--version", "-V"] {
        let out = healthpick(&[flag]);
        assert_eq!(out.status.code(), Some(0), "{flag}");
        assert_eq!(
            stdout(&out),
            format!("healthpick {}\n", env!("CARGO_PKG_VERSION")),
            "{flag}"
        );
    }
}

/// The lines under the help's `Examples:` heading, up to the next blank line.
fn examples(help: &str) -> Vec<&str> {
    help.lines()
        .skip_while(|line| line.trim() != "Examples:")
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        .map(str::trim)
        .collect()
}

#[test]
fn every_subcommand_help_shows_an_example_of_itself() {
    for subcommand in ["check", "watch", "simulate"] {
        for help in [
            healthpick(&[subcommand, "--help"]),
            healthpick(&["help", subcommand]),
        ] {
            assert_eq!(help.status.code(), Some(0), "{subcommand}");
            let text = stdout(&help);
            let own = format!("healthpick {subcommand} ");
            let examples = examples(&text);
            assert!(
                !examples.is_empty() && examples.iter().all(|line| line.starts_with(&own)),
                "`{subcommand}` help has no examples of its own:\n{text}"
            );
        }
    }
}
