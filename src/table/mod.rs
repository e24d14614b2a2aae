//! A live text table of destination health: what `healthpick watch` and the demo show.
//!
//! [`StatusTable`] renders an [`EngineStatus`](crate::EngineStatus) as one row per destination: cluster, destination,
//! tier, active / passive / reported health, whether it is available (and in the best group),
//! requests in flight, its load signals when it has any (latency estimate, reported utilization,
//! slow-start share while it warms up), requests served (a counter the caller may supply) and
//! the last change with its reason; under the rows, where each cluster's tier spill stands.
//! Column widths follow the content.
//!
//! [`LiveTable`] keeps that table on screen while things change, in one of two [`OutputMode`]s:
//!
//! - [`OutputMode::Redraw`] (a terminal): the table and the most recent changes below it are
//!   redrawn in place with plain ANSI escapes (cursor up, clear to end of screen). Line wrapping
//!   is switched off while a frame is written, so a row wider than the terminal is cut at the
//!   edge instead of breaking the line count.
//! - [`OutputMode::Lines`] (a pipe, a file, a CI log): nothing is ever redrawn. Each change is one
//!   timestamped line (`[  3.2s] orders/local-1: active Healthy -> Unhealthy (...)`), and the
//!   table is printed again, every row stamped the same way, when its health columns changed or
//!   when it has not been printed for a while.
//!
//! Both are plain functions over the status snapshot; nothing here touches the network or spawns
//! tasks, so the caller decides when to update (a timer, each event, or once).
//!
//! ```
//! use healthpick::table::StatusTable;
//! use healthpick::Engine;
//!
//! let engine = Engine::from_json(r#"{"Clusters": {"orders": {"Destinations": {
//!     "local-1":  { "Address": "http://127.0.0.1:8001/" },
//!     "remote-1": { "Address": "http://127.0.0.1:9001/", "Priority": 1 } } } } }"#)?;
//! let text = StatusTable::new().render(&engine.status());
//! assert!(text.starts_with("CLUSTER  DESTINATION  TIER  ACTIVE  PASSIVE  REPORTED  AVAILABLE"));
//! assert!(text.contains("orders   local-1         0  off     off      -         yes (best)"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub(crate) mod describe;
pub(crate) mod live;
pub(crate) mod render;

pub use describe::describe_event;
pub use live::{LiveTable, OutputMode};
pub use render::{format_latency, spill_summary, Counter, StatusTable};
