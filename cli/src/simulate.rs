//! `healthpick simulate FILE`: replay a scenario of probe results, request outcomes, picks,
//! reloads, latencies and load reports through a configuration on a simulated clock, printing
//! every decision as JSON lines.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use healthpick::simulate::{Scenario, Simulation};

use crate::{emit, read_text};

pub(crate) const AFTER_HELP: &str = "\
The scenario is JSON (comments and trailing commas allowed):
  {
    \"config\":  { \"Clusters\": { ... } },      a YARP document, as in appsettings.json
    \"globals\": { \"DetectionWindowSize\": \"00:01:00\", \"MinimalTotalCountThreshold\": 10,
                 \"DefaultFailureRateLimit\": 0.3, \"ConsecutiveFailuresThreshold\": 2 },
    \"seed\": 1,                                 random source of the load balancers (default 0)
    \"until\": 120.0,                            the run ends at this time, in seconds
    \"events\": [
      {\"at\": 10.0, \"probe\":    {\"cluster\": \"c0\", \"results\": {\"d0\": 500, \"d1\": 200,
                                \"d2\": \"error\", \"d3\": {\"status\": 200, \"payload\": \"Degraded\"}}}},
      {\"at\": 12.5, \"request\":  {\"cluster\": \"c0\", \"destination\": \"d1\",
                                \"outcome\": \"success\" | \"transport-failure\" | \"cancelled\" | 503}},
      {\"at\": 13.0, \"pick\":     {\"cluster\": \"c0\", \"count\": 5, \"hold\": false}},
      {\"at\": 14.0, \"inflight\": {\"cluster\": \"c0\", \"destination\": \"d0\", \"delta\": 3}},
      {\"at\": 15.0, \"reload\":   { ...a new config document... }},
      {\"at\": 16.0, \"latency\":  {\"cluster\": \"c0\", \"destinations\": {\"d0\": 0.020, \"d1\": null}}},
      {\"at\": 16.0, \"load\":     {\"cluster\": \"c0\", \"destinations\": {\"d0\": 0.4}}},
      {\"at\": 16.0, \"tally\":    {\"cluster\": \"c0\", \"every\": 1.0}},
      {\"at\": 16.0, \"pick\":     {\"cluster\": \"c0\", \"rate\": 200, \"for\": 30,
                                \"keys\": {\"prefix\": \"user-\", \"count\": 100}}}
    ]
  }

Traffic:
  latency  from now on the destinations answer after this many seconds (null: not at
           all): a pick of one is in flight until its answer, which reports a success
           that took that long (latency estimates, PeakEwma, tier spill, passive checks)
  load     the endpoint-load-metrics value their answers carry (a number: the
           application_utilization; or the header value; null: none)
  pick     \"rate\" spreads the picks (per second) over \"for\" seconds or \"count\" picks;
           \"key\" or \"keys\" (a list, or a numbered pattern) make keyed picks
  tally    count the cluster's picks: one line per \"every\" seconds instead of one per pick
  The engine's timers (reactivations, slow-start steps, tier-spill looks) fire on the
  simulated clock; without \"until\" the run ends when only timers are left.

Output (stdout): one JSON object per line, in time order, each with `at` and `type`:
  health      a health part changed: cluster, destination, part, from, to, reason
  evaluation  every policy evaluation, even without a change (counters, window, state)
  available   the available set or panic mode changed: cluster, destinations, panic
  pick        cluster, key (keyed picks), and destination or error
              (\"NoAvailableDestinations\", \"AffinityUnavailable\")
  tally       a cluster's picks per destination since `since`, errors, the share that
              spills (`spill`) and warming destinations' slow-start factors (`warming`)
  spill       the preferred tier started spilling (state \"started\", share) or stopped:
              cluster, fromTier, toTier
  reload      a reload was applied (valid: true) or rejected (valid: false, errors)
The same scenario and seed always give byte-identical output.

Exit status:
  0  the scenario ran
  1  the scenario or its configuration is invalid, or FILE cannot be read
  2  usage error

Examples:
  healthpick simulate examples/scenarios/active_ejection.json
  healthpick simulate examples/scenarios/peak_ewma_slow_instance.json
  healthpick simulate incident.json --config appsettings.Tuned.json
  healthpick simulate examples/scenarios/tier_failover.json | jq -c 'select(.type == \"pick\")'";

#[derive(Debug, Args)]
pub(crate) struct SimulateArgs {
    /// The scenario file to replay
    #[arg(value_name = "FILE")]
    pub file: PathBuf,

    /// Run the scenario through this YARP config file instead of its own `config` (replay a
    /// recorded incident with other settings)
    #[arg(long, value_name = "CONFIG")]
    pub config: Option<PathBuf>,

    /// Seed of the random source, overriding the scenario's `seed`
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
}

pub(crate) fn run(args: &SimulateArgs) -> ExitCode {
    let fail = |message: String| {
        let _ = writeln!(std::io::stderr(), "healthpick: error: {message}");
        ExitCode::FAILURE
    };
    let text = match read_text(&args.file) {
        Ok(text) => text,
        Err(why) => return fail(format!("cannot read `{}`: {why}", args.file.display())),
    };
    let parsed = match &args.config {
        Some(path) => match read_text(path) {
            Ok(config) => Scenario::from_json_with_config(&text, &config),
            Err(why) => return fail(format!("cannot read `{}`: {why}", path.display())),
        },
        None => Scenario::from_json(&text),
    };
    let scenario = match parsed {
        Ok(scenario) => scenario,
        Err(e) => return fail(format!("{}: {e}", args.file.display())),
    };
    let scenario = match args.seed {
        Some(seed) => scenario.with_seed(seed),
        None => scenario,
    };
    match Simulation::new(scenario).run() {
        Ok(lines) => {
            let mut out = String::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
            for line in lines {
                out.push_str(&line);
                out.push('\n');
            }
            emit(&out);
            ExitCode::SUCCESS
        }
        Err(e) => fail(format!("{}: {e}", args.file.display())),
    }
}
