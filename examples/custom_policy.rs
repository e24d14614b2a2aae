//! A custom load-balancing policy, registered by name and chosen from config.
//!
//! `Weighted` sends each destination a share of the picks proportional to its weight (a
//! destination's `Weight` metadata, default 1). It does what the built-in policies do, through
//! the same doors: when the group changes, `prepare` returns the group's `Picker`. Where all
//! weights are equal that is `Picker::Uniform`, a form the engine runs in place (as it runs the
//! built-ins' forms); otherwise its own picker (`Picker::custom`), which adds up the weights once
//! so that a pick only draws a ticket and finds it. `signals` says that its picks read no
//! in-flight counts or latencies, so picks from its clusters write nothing another thread reads
//! and never read the clock. It is
//! registered in a `PolicyRegistry` under the name `Weighted`, and the cluster asks for it with
//! `"LoadBalancingPolicy": "Weighted"`, exactly as it would name a built-in. A config that
//! misspells it is rejected, and the error lists the known names.
//!
//! ```text
//! 200 calls: big 157, small 43 (weights 3 and 1)
//! misspelt: invalid configuration (1 error)
//!   - Clusters:search:LoadBalancingPolicy: cluster `search`: LoadBalancingPolicy `Wieghted` is not a known policy (known: PowerOfTwoChoices, ..., Weighted)
//! ok: the picks followed the weights and the unknown name was refused
//! ```
//!
//! Run with `cargo run --example custom_policy`. Exits 0 only if `big` got between 65% and 85%
//! of the calls and the misspelt name was refused.

#[path = "support/tiny_server.rs"]
mod tiny_server;

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;

use healthpick::selection::{Group, LoadBalancingPolicy, Pick, PickView, Picker, Signals};
use healthpick::{Engine, HealthAwareClient, PolicyRegistry};
use tiny_server::TinyServer;

/// Picks each destination with probability proportional to its weight.
struct Weighted;

/// One group's picks: destination `i` owns the tickets `ends[i - 1]..ends[i]` (weights in
/// thousandths, so `1.5` counts).
struct Tickets {
    ends: Vec<usize>,
}

impl Pick for Tickets {
    /// On every pick: one draw and a binary search.
    fn pick(&self, view: &PickView<'_>) -> usize {
        let total = self.ends.last().copied().unwrap_or(0);
        let ticket = view.random_index(total.max(1));
        self.ends.partition_point(|&end| end <= ticket)
    }
}

impl LoadBalancingPolicy for Weighted {
    /// Once per change of the group, not per pick.
    fn prepare(&self, group: &Group) -> Picker {
        if group.weights().is_none() {
            // Equal weights: a uniform draw, which the engine runs in place.
            return Picker::Uniform;
        }
        let ends = (0..group.len())
            .scan(0, |total, i| {
                *total += (group.weight(i) * 1000.0) as usize;
                Some(*total)
            })
            .collect();
        Picker::custom(Tickets { ends })
    }

    /// No in-flight counts, no latencies.
    fn signals(&self) -> Signals {
        Signals::NONE
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let big = TinyServer::start("big").await?;
    let small = TinyServer::start("small").await?;
    let config = |policy: &str| {
        format!(
            r#"{{ "Clusters": {{ "search": {{
                  "LoadBalancingPolicy": "{policy}",
                  "Destinations": {{
                    "big":   {{ "Address": "{}", "Metadata": {{ "Weight": "3" }} }},
                    "small": {{ "Address": "{}", "Metadata": {{ "Weight": "1" }} }}
                  }} }} }} }}"#,
            big.url(),
            small.url(),
        )
    };

    let mut registry = PolicyRegistry::default(); // the built-ins...
    registry.register_load_balancing("Weighted", Arc::new(Weighted)); // ...and ours
    let engine = Engine::builder().registry(registry).seed(7).build();
    engine.load_json(&config("Weighted"))?;

    let http = reqwest::Client::builder().no_proxy().build()?;
    let client = HealthAwareClient::new(http, engine.clone());
    let mut answered: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..200 {
        let who = client
            .get("search", "/q?text=rust")
            .send()
            .await?
            .text()
            .await?;
        *answered.entry(who).or_default() += 1;
    }
    let (b, s) = (
        answered.get("big").copied().unwrap_or(0),
        answered.get("small").copied().unwrap_or(0),
    );
    println!("200 calls: big {b}, small {s} (weights 3 and 1)");
    if !(130..=170).contains(&b) {
        return Err(format!("big got {b} of 200 calls, expected about 150").into());
    }

    // A name no registry entry has is refused, and the old config stays in force.
    match engine.load_json(&config("Wieghted")) {
        Ok(_) => return Err("the misspelt policy name was accepted".into()),
        Err(e) => {
            println!("misspelt: {e}");
            if !e.to_string().contains("Weighted") {
                return Err("the error does not list `Weighted` among the known names".into());
            }
        }
    }
    println!("ok: the picks followed the weights and the unknown name was refused");
    Ok(())
}
