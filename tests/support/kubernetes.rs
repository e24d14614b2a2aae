//! A fake Kubernetes API server for EndpointSlices (no real API server can be installed on these
//! machines): axum, plain HTTP on 127.0.0.1, port 0. It speaks the part of the protocol kube's
//! runtime watcher uses, as the API server does:
//!
//! - `GET /apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices` lists the slices matching
//!   `labelSelector` (`k=v`, `k==v`, `k!=v`, comma-separated), pages by `limit` and `continue`,
//!   and says the `metadata.resourceVersion` of the list;
//! - the same path with `watch=true` streams one JSON event a line (`ADDED`, `MODIFIED`,
//!   `DELETED`, `BOOKMARK` when `allowWatchBookmarks=true`) in a chunked response, from the
//!   history after `resourceVersion`; a label change that moves a slice out of the selector is a
//!   `DELETED`, back in an `ADDED`; it ends the stream after `timeoutSeconds`;
//! - a watch from a resource version older than the compacted history gets `200` and one
//!   `ERROR` event with a 410 `Expired` Status, then the end of the stream.
//!
//! Knobs: apply and delete slices, send a bookmark, close every watch, mute watches (the
//! connection stays open and says nothing, `timeoutSeconds` included), compact the history and
//! expire the open watches, hold new watch requests, fail every request with a status code.
//! Misbehaviours: answer every watch with 410 (an `ERROR` event, or HTTP 410), delete a slice
//! with a truncated `DELETED` line, answer every request with a raw body, end every watch at
//! once. Every request is logged.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures::StreamExt;
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};

const API_VERSION: &str = "discovery.k8s.io/v1";

/// One request the fake received.
#[derive(Clone, Debug)]
pub struct Request {
    pub path: String,
    pub params: Vec<(String, String)>,
}

impl Request {
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn is_watch(&self) -> bool {
        self.param("watch") == Some("true")
    }
}

/// One change of the store: the object before and after (`None`: absent).
#[derive(Clone)]
struct Mutation {
    rv: u64,
    ns: String,
    before: Option<Value>,
    after: Option<Value>,
    /// Its event line is cut short (a broken proxy).
    truncated: bool,
}

/// How the fake answers every watch when told to expire them all.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Expiry {
    /// `200` and one `ERROR` event with a 410 `Expired` Status.
    Event,
    /// HTTP `410 Gone` with the Status as its body.
    Status,
}

enum Frame {
    Line(String),
    Close,
}

struct Watcher {
    id: u64,
    ns: String,
    selector: Vec<Requirement>,
    bookmarks: bool,
    muted: bool,
    tx: mpsc::UnboundedSender<Frame>,
}

#[derive(Clone)]
enum Requirement {
    Eq(String, String),
    Ne(String, String),
}

struct Store {
    rv: u64,
    /// (namespace, name) to object.
    objects: BTreeMap<(String, String), Value>,
    history: Vec<Mutation>,
    /// Watches from a resource version below this get 410.
    compacted: u64,
    watchers: Vec<Watcher>,
    next_id: u64,
    requests: Vec<Request>,
    fail: Option<u16>,
    expire_every_watch: Option<Expiry>,
    /// Every request is answered `200` with this body.
    raw: Option<String>,
    /// Every watch ends at once, without a line.
    end_watches: bool,
}

/// The fake API server; it stops when dropped.
pub struct FakeApiServer {
    pub url: String,
    store: Arc<Mutex<Store>>,
    /// `false` while new watch requests are held.
    watches_open: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Clone)]
struct Shared {
    store: Arc<Mutex<Store>>,
    watches_open: watch::Receiver<bool>,
}

impl FakeApiServer {
    pub async fn start() -> FakeApiServer {
        let store = Arc::new(Mutex::new(Store {
            rv: 1000,
            objects: BTreeMap::new(),
            history: Vec::new(),
            compacted: 0,
            watchers: Vec::new(),
            next_id: 0,
            requests: Vec::new(),
            fail: None,
            expire_every_watch: None,
            raw: None,
            end_watches: false,
        }));
        let (watches_open, rx) = watch::channel(true);
        let app = Router::new()
            .route(
                "/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
                get(endpointslices),
            )
            .fallback(|| async {
                status_response(
                    404,
                    "NotFound",
                    "the server could not find the requested resource",
                )
            })
            .with_state(Shared {
                store: store.clone(),
                watches_open: rx,
            });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeApiServer {
            url,
            store,
            watches_open,
            task,
        }
    }

    /// A kube client for this server (no credentials; reads bounded by `read_timeout`).
    pub fn client(&self, read_timeout: Duration) -> kube::Client {
        let mut config = kube::Config::new(self.url.parse().unwrap());
        config.read_timeout = Some(read_timeout);
        config.reset_reader_on_write = true;
        kube::Client::try_from(config).unwrap()
    }

    /// Creates or replaces a slice in namespace `default`; its metadata is filled in as the
    /// API server does. Returns the new resource version.
    pub fn apply(&self, slice: Value) -> u64 {
        self.apply_in("default", slice)
    }

    pub fn apply_in(&self, ns: &str, mut slice: Value) -> u64 {
        let mut store = self.store.lock();
        store.rv += 1;
        let rv = store.rv;
        let name = slice["metadata"]["name"].as_str().unwrap().to_string();
        let key = (ns.to_string(), name.clone());
        let before = store.objects.get(&key).cloned();
        let object = slice.as_object_mut().unwrap();
        object.remove("apiVersion");
        object.remove("kind");
        let meta = slice["metadata"].as_object_mut().unwrap();
        meta.insert("namespace".into(), ns.into());
        meta.insert("resourceVersion".into(), rv.to_string().into());
        let (uid, generation) = match &before {
            Some(b) => (
                b["metadata"]["uid"].clone(),
                b["metadata"]["generation"].as_u64().unwrap_or(1) + 1,
            ),
            None => (json!(format!("slice-uid-{ns}-{name}-{rv}")), 1),
        };
        meta.insert("uid".into(), uid);
        meta.insert("generation".into(), generation.into());
        meta.insert("creationTimestamp".into(), "2026-01-01T00:00:00Z".into());
        store.objects.insert(key, slice.clone());
        store.record(Mutation {
            rv,
            ns: ns.to_string(),
            before,
            after: Some(slice),
            truncated: false,
        });
        rv
    }

    /// Deletes a slice of namespace `default`.
    pub fn delete(&self, name: &str) -> u64 {
        self.delete_as(name, false)
    }

    /// Deletes a slice of namespace `default`, telling open watches with a `DELETED` line cut
    /// short (what a broken proxy passes on); a list no longer has it.
    pub fn delete_truncated(&self, name: &str) -> u64 {
        self.delete_as(name, true)
    }

    fn delete_as(&self, name: &str, truncated: bool) -> u64 {
        let mut store = self.store.lock();
        store.rv += 1;
        let rv = store.rv;
        let before = store
            .objects
            .remove(&("default".to_string(), name.to_string()))
            .expect("no such slice");
        store.record(Mutation {
            rv,
            ns: "default".into(),
            before: Some(before),
            after: None,
            truncated,
        });
        rv
    }

    /// Sends a BOOKMARK at the current resource version to watches that allow them.
    pub fn bookmark(&self) -> u64 {
        let store = self.store.lock();
        let line = event_line(
            "BOOKMARK",
            &json!({"kind": "EndpointSlice", "apiVersion": API_VERSION,
                    "metadata": {"resourceVersion": store.rv.to_string(), "creationTimestamp": null}}),
        );
        for w in store.watchers.iter().filter(|w| w.bookmarks && !w.muted) {
            let _ = w.tx.send(Frame::Line(line.clone()));
        }
        store.rv
    }

    /// Ends every open watch stream cleanly (as the API server does on `timeoutSeconds` or a
    /// restart).
    pub fn close_watches(&self) {
        for w in self.store.lock().watchers.drain(..) {
            let _ = w.tx.send(Frame::Close);
        }
    }

    /// Open watches stay open and say nothing more, ever (a dead connection behind a proxy).
    pub fn mute_watches(&self) {
        for w in self.store.lock().watchers.iter_mut() {
            w.muted = true;
        }
    }

    /// Forgets the history up to now: a watch from an older resource version gets 410.
    pub fn compact(&self) {
        let mut store = self.store.lock();
        store.compacted = store.rv;
        store.history.clear();
    }

    /// Compacts, then tells every open watch its history is gone (an ERROR 410 event) and ends it.
    pub fn expire_watches(&self) {
        self.compact();
        let mut store = self.store.lock();
        let line = event_line(
            "ERROR",
            &status(410, "Expired", "too old resource version: 1 (2)"),
        );
        for w in store.watchers.drain(..) {
            let _ = w.tx.send(Frame::Line(line.clone()));
            let _ = w.tx.send(Frame::Close);
        }
    }

    /// Holds new watch requests unanswered until `hold_watches(false)`.
    pub fn hold_watches(&self, hold: bool) {
        let _ = self.watches_open.send(!hold);
    }

    /// Answers every request with this status code (`None`: normally again).
    pub fn fail_with(&self, code: Option<u16>) {
        self.store.lock().fail = code;
    }

    /// Answers every watch request with 410, however recent its resource version (`None`:
    /// normally again); lists are answered normally.
    pub fn expire_every_watch(&self, expiry: Option<Expiry>) {
        self.store.lock().expire_every_watch = expiry;
    }

    /// Answers every request, list or watch, `200` with this body (`None`: normally again).
    pub fn answer_raw(&self, body: Option<&str>) {
        self.store.lock().raw = body.map(str::to_string);
    }

    /// Ends every watch at once, without a line (`false`: normally again).
    pub fn end_watches_at_once(&self, end: bool) {
        self.store.lock().end_watches = end;
    }

    pub fn watches(&self) -> usize {
        self.requests().iter().filter(|r| r.is_watch()).count()
    }

    pub fn requests(&self) -> Vec<Request> {
        self.store.lock().requests.clone()
    }

    pub fn lists(&self) -> usize {
        self.requests().iter().filter(|r| !r.is_watch()).count()
    }

    pub fn open_watches(&self) -> usize {
        self.store
            .lock()
            .watchers
            .iter()
            .filter(|w| !w.tx.is_closed())
            .count()
    }

    pub fn resource_version(&self) -> u64 {
        self.store.lock().rv
    }
}

impl Store {
    fn record(&mut self, mutation: Mutation) {
        self.watchers.retain(|w| {
            if w.muted {
                return !w.tx.is_closed();
            }
            match event_for(&mutation, &w.ns, &w.selector) {
                Some(line) if mutation.truncated => {
                    let cut = format!("{}\n", &line[..line.len() / 2]);
                    w.tx.send(Frame::Line(cut)).is_ok()
                }
                Some(line) => w.tx.send(Frame::Line(line)).is_ok(),
                None => !w.tx.is_closed(),
            }
        });
        self.history.push(mutation);
    }
}

fn labels_match(object: &Value, selector: &[Requirement]) -> bool {
    let label = |k: &str| object["metadata"]["labels"][k].as_str().map(str::to_string);
    selector.iter().all(|r| match r {
        Requirement::Eq(k, v) => label(k).as_deref() == Some(v),
        Requirement::Ne(k, v) => label(k).as_deref() != Some(v),
    })
}

fn parse_selector(text: &str) -> Result<Vec<Requirement>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| {
            if let Some((k, v)) = t.split_once("!=") {
                Ok(Requirement::Ne(k.trim().into(), v.trim().into()))
            } else if let Some((k, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
                Ok(Requirement::Eq(k.trim().into(), v.trim().into()))
            } else {
                Err(format!("unable to parse requirement: {t}"))
            }
        })
        .collect()
}

/// The watch event a mutation is for a watch of `ns` with `selector`, as a line.
fn event_for(m: &Mutation, ns: &str, selector: &[Requirement]) -> Option<String> {
    if m.ns != ns {
        return None;
    }
    let was = m.before.as_ref().is_some_and(|o| labels_match(o, selector));
    let is = m.after.as_ref().is_some_and(|o| labels_match(o, selector));
    let (kind, object) = match (was, is, &m.after) {
        (false, true, Some(after)) => ("ADDED", after.clone()),
        (true, true, Some(after)) => ("MODIFIED", after.clone()),
        // Out of the selector: gone for this watch, in its new state.
        (true, false, Some(after)) => ("DELETED", after.clone()),
        (true, false, None) => {
            let mut last = m.before.clone().unwrap();
            last["metadata"]["resourceVersion"] = m.rv.to_string().into();
            ("DELETED", last)
        }
        _ => return None,
    };
    Some(event_line(kind, &with_type(object)))
}

fn with_type(mut object: Value) -> Value {
    object["apiVersion"] = API_VERSION.into();
    object["kind"] = "EndpointSlice".into();
    object
}

fn event_line(kind: &str, object: &Value) -> String {
    let mut line = json!({"type": kind, "object": object}).to_string();
    line.push('\n');
    line
}

fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code})
}

fn status_response(code: u16, reason: &str, message: &str) -> Response {
    (
        StatusCode::from_u16(code).unwrap(),
        [(header::CONTENT_TYPE, "application/json")],
        status(code, reason, message).to_string(),
    )
        .into_response()
}

async fn endpointslices(
    State(shared): State<Shared>,
    Path(ns): Path<String>,
    RawQuery(query): RawQuery,
) -> Response {
    // kube's queries start with a stray `&`: empty pairs are skipped, as the API server does.
    let params: Vec<(String, String)> =
        url::form_urlencoded::parse(query.unwrap_or_default().as_bytes())
            .filter(|(k, _)| !k.is_empty())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
    let request = Request {
        path: format!("/apis/{API_VERSION}/namespaces/{ns}/endpointslices"),
        params,
    };
    let (fail, expire, raw, end_watches) = {
        let mut store = shared.store.lock();
        store.requests.push(request.clone());
        (
            store.fail,
            store.expire_every_watch,
            store.raw.clone(),
            store.end_watches,
        )
    };
    if let Some(code) = fail {
        return status_response(code, "InternalError", "etcdserver: request timed out");
    }
    if let Some(body) = raw {
        return (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response();
    }
    if request.is_watch() {
        let message = "too old resource version: 1 (2)";
        match expire {
            Some(Expiry::Status) => return status_response(410, "Expired", message),
            Some(Expiry::Event) => {
                let line = event_line("ERROR", &status(410, "Expired", message));
                return (
                    StatusCode::OK,
                    [(header::CONTENT_TYPE, "application/json")],
                    line,
                )
                    .into_response();
            }
            None => {}
        }
        if end_watches {
            return (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/json")],
                "",
            )
                .into_response();
        }
    }
    let selector = match parse_selector(request.param("labelSelector").unwrap_or_default()) {
        Ok(selector) => selector,
        Err(why) => return status_response(400, "BadRequest", &why),
    };
    if request.is_watch() {
        let mut open = shared.watches_open.clone();
        let _ = open.wait_for(|open| *open).await;
        watch_response(&shared.store, ns, selector, &request)
    } else {
        list_response(&shared.store, &ns, &selector, &request)
    }
}

fn list_response(
    store: &Mutex<Store>,
    ns: &str,
    selector: &[Requirement],
    request: &Request,
) -> Response {
    let store = store.lock();
    let limit = request
        .param("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    // The continue token is the name after which the page starts (pages of the current state).
    let after = request.param("continue").unwrap_or_default();
    let matching: Vec<&Value> = store
        .objects
        .iter()
        .filter(|((o_ns, name), o)| {
            o_ns == ns && name.as_str() > after && labels_match(o, selector)
        })
        .map(|(_, o)| o)
        .collect();
    let page = &matching[..limit.min(matching.len())];
    let mut metadata = json!({"resourceVersion": store.rv.to_string()});
    if page.len() < matching.len() {
        metadata["continue"] = page.last().unwrap()["metadata"]["name"].clone();
        metadata["remainingItemCount"] = (matching.len() - page.len()).into();
    }
    let body = json!({"kind": "EndpointSliceList", "apiVersion": API_VERSION,
                      "metadata": metadata, "items": page});
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn watch_response(
    store_lock: &Arc<Mutex<Store>>,
    ns: String,
    selector: Vec<Requirement>,
    request: &Request,
) -> Response {
    let mut store = store_lock.lock();
    let bookmarks = request.param("allowWatchBookmarks") == Some("true");
    let mut first: Vec<String> = Vec::new();
    let mut gone = false;
    match request
        .param("resourceVersion")
        .filter(|v| !v.is_empty() && *v != "0")
    {
        // Without a resource version: the current state as ADDED events, then changes.
        None => {
            for ((o_ns, _), o) in &store.objects {
                if *o_ns == ns && labels_match(o, &selector) {
                    first.push(event_line("ADDED", &with_type(o.clone())));
                }
            }
        }
        Some(rv) => {
            let Ok(rv) = rv.parse::<u64>() else {
                return status_response(400, "BadRequest", "invalid resource version");
            };
            if rv < store.compacted {
                let message = format!("too old resource version: {rv} ({})", store.compacted);
                first.push(event_line("ERROR", &status(410, "Expired", &message)));
                gone = true;
            } else {
                for m in store.history.iter().filter(|m| m.rv > rv) {
                    first.extend(event_for(m, &ns, &selector));
                }
            }
        }
    }
    let (tx, rx) = mpsc::unbounded_channel();
    if gone {
        let _ = tx.send(Frame::Close);
    } else {
        store.next_id += 1;
        let id = store.next_id;
        store.watchers.push(Watcher {
            id,
            ns,
            selector,
            bookmarks,
            muted: false,
            tx: tx.clone(),
        });
        let timeout = request
            .param("timeoutSeconds")
            .and_then(|t| t.parse::<u64>().ok())
            .filter(|t| *t > 0);
        if let Some(seconds) = timeout {
            let store = store_lock.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(seconds)).await;
                let mut store = store.lock();
                if let Some(at) = store.watchers.iter().position(|w| w.id == id && !w.muted) {
                    let _ = store.watchers.remove(at).tx.send(Frame::Close);
                }
            });
        }
    }
    drop(store);
    let live = futures::stream::unfold(rx, |mut rx| async move {
        match rx.recv().await {
            Some(Frame::Line(line)) => Some((line, rx)),
            Some(Frame::Close) | None => None,
        }
    });
    let body = futures::stream::iter(first)
        .chain(live)
        .map(Ok::<_, Infallible>);
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(body))
        .unwrap()
}

/// An endpoint of a slice: pod `uid` at `ip`, in `zone` on node `node-<zone>`, with these
/// conditions.
pub fn endpoint(ip: &str, uid: &str, ready: bool, serving: bool, terminating: bool) -> Value {
    json!({
        "addresses": [ip],
        "conditions": {"ready": ready, "serving": serving, "terminating": terminating},
        "zone": "zone-a",
        "nodeName": "node-1",
        "targetRef": {"kind": "Pod", "namespace": "default", "name": format!("pod-{uid}"), "uid": uid},
    })
}

/// A ready endpoint.
pub fn ready(ip: &str, uid: &str) -> Value {
    endpoint(ip, uid, true, true, false)
}

/// A slice of `service` with these endpoints on ports `http` (8080) and `metrics` (9090), as
/// the EndpointSlice controller labels them.
pub fn slice(name: &str, service: &str, endpoints: Vec<Value>) -> Value {
    json!({
        "metadata": {"name": name, "labels": {
            "kubernetes.io/service-name": service,
            "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
        }},
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"},
                  {"name": "metrics", "port": 9090, "protocol": "TCP"}],
    })
}
