//! etcd's v3 JSON gateway over reqwest: the few calls discovery and registration need
//! (`kv/range`, `kv/put`, `watch`, `lease/grant`, `lease/keepalive`,
//! `lease/revoke`), with no protoc and no gRPC stack.
//!
//! What the gateway does, as measured against etcd 3.4 (and what this file relies on):
//! every call is a `POST` of a JSON body over HTTP/1.1 (an HTTP/2 connection on the client port
//! goes to the gRPC server); keys and values are base64; 64-bit integers are JSON strings; zero
//! values are left out of answers, so every field here has a default; a watch is one request
//! whose answer is newline-delimited JSON, one `{"result": ...}` per message, and a keepalive is
//! one request per renewal (the gateway answers a streamed request only once it has ended).
//! Errors are a non-2xx status with `{"error", "message", "code"}` (a gRPC code).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde::de::{self, DeserializeOwned, Deserializer};
use serde::Deserialize;
use serde_json::{json, Value};
use url::Url;

use crate::discovery::http::{describe, read_bounded, BodyError};

/// The largest answer read from a unary call (a range of a big prefix included).
const MAX_ANSWER: usize = 64 << 20;
/// The largest single watch message.
const MAX_MESSAGE: usize = 16 << 20;

/// gRPC status of a request for a compacted revision.
const OUT_OF_RANGE: i32 = 11;
/// gRPC status of an unknown lease.
const NOT_FOUND: i32 = 5;

/// What went wrong talking to etcd.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EtcdError {
    /// No endpoint answered (refused, reset, timed out); every endpoint was tried.
    #[error("etcd at {endpoint} did not answer: {reason}")]
    Unreachable {
        /// The last endpoint tried.
        endpoint: String,
        /// Why.
        reason: String,
    },
    /// etcd refused the call.
    #[error("etcd at {endpoint} refused `{call}`: {message} (HTTP {status}, gRPC code {code})")]
    Refused {
        /// The endpoint that answered.
        endpoint: String,
        /// The call (`kv/range`).
        call: &'static str,
        /// The HTTP status.
        status: u16,
        /// The gRPC status code etcd gave.
        code: i32,
        /// etcd's message.
        message: String,
    },
    /// The answer was not what the gateway sends.
    #[error("etcd at {endpoint} answered `{call}` with something unreadable: {reason}")]
    Unreadable {
        /// The endpoint that answered.
        endpoint: String,
        /// The call.
        call: &'static str,
        /// What was wrong.
        reason: String,
    },
}

impl EtcdError {
    /// Whether etcd said the revision asked for was compacted away.
    pub fn is_compacted(&self) -> bool {
        matches!(self, EtcdError::Refused { code, .. } if *code == OUT_OF_RANGE)
    }

    /// Whether etcd said the lease does not exist (expired or revoked).
    pub fn is_lease_gone(&self) -> bool {
        matches!(self, EtcdError::Refused { code, .. } if *code == NOT_FOUND)
    }
}

/// A connection to one etcd cluster through its gateway: the endpoints are tried in turn, the
/// one that last answered first.
#[derive(Debug)]
pub(crate) struct Gateway {
    http: reqwest::Client,
    endpoints: Vec<Url>,
    /// The endpoint tried first.
    current: AtomicUsize,
    /// Bound of one unary call.
    timeout: Duration,
}

impl Gateway {
    /// A gateway over `endpoints` (each `http(s)://host:port`, at least one), each unary call
    /// bounded by `timeout`.
    pub fn new(endpoints: Vec<Url>, timeout: Duration) -> Result<Gateway, String> {
        if endpoints.is_empty() {
            return Err("no etcd endpoint given".into());
        }
        // HTTP/1.1 only (see the module docs), no redirects, no proxy (a registry is
        // infrastructure), and TCP keepalive so a dead peer ends a silent watch.
        let http = reqwest::Client::builder()
            .http1_only()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(timeout)
            .tcp_keepalive(Some(Duration::from_secs(10)))
            .build()
            .map_err(|e| format!("cannot build the etcd client: {e}"))?;
        Ok(Gateway {
            http,
            endpoints,
            current: AtomicUsize::new(0),
            timeout,
        })
    }

    /// The endpoint tried first now.
    pub fn endpoint(&self) -> &Url {
        &self.endpoints[self.current.load(Ordering::Relaxed) % self.endpoints.len()]
    }

    /// Sends `body` to `call` on each endpoint in turn until one answers; reads the whole answer
    /// (bounded) unless `streaming`.
    async fn send(
        &self,
        call: &'static str,
        body: &Value,
        streaming: bool,
    ) -> Result<(String, reqwest::Response), EtcdError> {
        let first = self.current.load(Ordering::Relaxed);
        let mut last = None;
        for step in 0..self.endpoints.len() {
            let index = (first + step) % self.endpoints.len();
            let endpoint = &self.endpoints[index];
            let url = match endpoint.join(&format!("v3/{call}")) {
                Ok(url) => url,
                Err(e) => {
                    last = Some(EtcdError::Unreachable {
                        endpoint: endpoint.to_string(),
                        reason: e.to_string(),
                    });
                    continue;
                }
            };
            let mut request = self
                .http
                .post(url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.to_string());
            if !streaming {
                request = request.timeout(self.timeout);
            }
            match request.send().await {
                Ok(response) => {
                    self.current.store(index, Ordering::Relaxed);
                    return Ok((endpoint.to_string(), response));
                }
                Err(e) => {
                    last = Some(EtcdError::Unreachable {
                        endpoint: endpoint.to_string(),
                        reason: describe(&e),
                    })
                }
            }
        }
        Err(last.unwrap_or_else(|| EtcdError::Unreachable {
            endpoint: String::new(),
            reason: "no endpoint".into(),
        }))
    }

    /// One unary call: the answer parsed as `T`, or etcd's refusal.
    async fn call<T: DeserializeOwned>(
        &self,
        call: &'static str,
        body: Value,
    ) -> Result<T, EtcdError> {
        let (endpoint, mut response) = self.send(call, &body, false).await?;
        let status = response.status();
        let text = match read_bounded(&mut response, MAX_ANSWER).await {
            Ok(text) => text,
            Err(BodyError::TooLarge(_)) => {
                return Err(EtcdError::Unreadable {
                    endpoint,
                    call,
                    reason: format!("answer larger than {MAX_ANSWER} bytes"),
                })
            }
            Err(BodyError::Failed(reason)) => {
                return Err(EtcdError::Unreachable { endpoint, reason })
            }
        };
        if !status.is_success() {
            return Err(refusal(endpoint, call, status.as_u16(), &text));
        }
        serde_json::from_slice(&text).map_err(|e| EtcdError::Unreadable {
            endpoint,
            call,
            reason: e.to_string(),
        })
    }

    /// Every key under `prefix`, at one revision.
    pub async fn range_prefix(&self, prefix: &[u8]) -> Result<RangeResponse, EtcdError> {
        self.call(
            "kv/range",
            json!({"key": BASE64.encode(prefix), "range_end": BASE64.encode(prefix_end(prefix))}),
        )
        .await
    }

    /// Writes `key` = `value`, attached to `lease` (0: none).
    pub async fn put(&self, key: &[u8], value: &[u8], lease: i64) -> Result<Header, EtcdError> {
        let mut body = json!({"key": BASE64.encode(key), "value": BASE64.encode(value)});
        if lease != 0 {
            body["lease"] = json!(lease.to_string());
        }
        let answer: HeaderOnly = self.call("kv/put", body).await?;
        Ok(answer.header)
    }

    /// Grants a lease of `ttl` seconds; returns its id and the TTL granted (etcd may raise it).
    pub async fn grant(&self, ttl: i64) -> Result<(i64, i64), EtcdError> {
        let answer: LeaseResponse = self
            .call("lease/grant", json!({"TTL": ttl.to_string()}))
            .await?;
        Ok((answer.id, answer.ttl))
    }

    /// Renews `lease` once; returns the TTL left, 0 when the lease no longer exists.
    pub async fn keep_alive(&self, lease: i64) -> Result<i64, EtcdError> {
        let (endpoint, mut response) = self
            .send("lease/keepalive", &json!({"ID": lease.to_string()}), false)
            .await?;
        let status = response.status();
        let text = read_bounded(&mut response, MAX_MESSAGE)
            .await
            .unwrap_or_default();
        if !status.is_success() {
            return Err(refusal(endpoint, "lease/keepalive", status.as_u16(), &text));
        }
        let line = text.split(|b| *b == b'\n').next().unwrap_or_default();
        match serde_json::from_slice::<StreamMessage<LeaseResponse>>(line) {
            Ok(StreamMessage::Result(answer)) => Ok(answer.ttl),
            Ok(StreamMessage::Error(e)) => Err(stream_error(endpoint, "lease/keepalive", e)),
            Err(e) => Err(EtcdError::Unreadable {
                endpoint,
                call: "lease/keepalive",
                reason: e.to_string(),
            }),
        }
    }

    /// Revokes `lease`: its keys are deleted at once.
    pub async fn revoke(&self, lease: i64) -> Result<(), EtcdError> {
        let _: HeaderOnly = self
            .call("lease/revoke", json!({"ID": lease.to_string()}))
            .await?;
        Ok(())
    }

    /// Watches every key under `prefix` from `start_revision` (inclusive).
    pub async fn watch_prefix(
        &self,
        prefix: &[u8],
        start_revision: i64,
    ) -> Result<WatchStream, EtcdError> {
        let body = json!({"create_request": {
            "key": BASE64.encode(prefix),
            "range_end": BASE64.encode(prefix_end(prefix)),
            "start_revision": start_revision.to_string(),
            "progress_notify": true,
        }});
        // Not bounded by the call timeout: the answer is the stream. Its headers come with the
        // `created` message, which `send` awaits — bound that.
        let sent = tokio::time::timeout(self.timeout, self.send("watch", &body, true)).await;
        let (endpoint, mut response) = match sent {
            Ok(sent) => sent?,
            Err(_) => {
                return Err(EtcdError::Unreachable {
                    endpoint: self.endpoint().to_string(),
                    reason: format!("no watch within {} ms", self.timeout.as_millis()),
                })
            }
        };
        let status = response.status();
        if !status.is_success() {
            let text = read_bounded(&mut response, MAX_MESSAGE)
                .await
                .unwrap_or_default();
            return Err(refusal(endpoint, "watch", status.as_u16(), &text));
        }
        Ok(WatchStream {
            endpoint,
            response,
            buffer: Vec::new(),
        })
    }
}

/// The messages of one watch.
#[derive(Debug)]
pub(crate) struct WatchStream {
    endpoint: String,
    response: reqwest::Response,
    buffer: Vec<u8>,
}

impl WatchStream {
    /// The next message; `None` when the server ended the stream (a graceful stop).
    pub async fn next(&mut self) -> Option<Result<WatchResponse, EtcdError>> {
        loop {
            if let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                let line = line.trim_ascii();
                if line.is_empty() {
                    continue;
                }
                return Some(
                    match serde_json::from_slice::<StreamMessage<WatchResponse>>(line) {
                        Ok(StreamMessage::Result(message)) => Ok(message),
                        Ok(StreamMessage::Error(e)) => {
                            Err(stream_error(std::mem::take(&mut self.endpoint), "watch", e))
                        }
                        Err(e) => Err(EtcdError::Unreadable {
                            endpoint: self.endpoint.clone(),
                            call: "watch",
                            reason: e.to_string(),
                        }),
                    },
                );
            }
            if self.buffer.len() > MAX_MESSAGE {
                return Some(Err(EtcdError::Unreadable {
                    endpoint: self.endpoint.clone(),
                    call: "watch",
                    reason: format!("a message larger than {MAX_MESSAGE} bytes"),
                }));
            }
            match self.response.chunk().await {
                Ok(Some(chunk)) => self.buffer.extend_from_slice(&chunk),
                Ok(None) => return None,
                Err(e) => {
                    return Some(Err(EtcdError::Unreachable {
                        endpoint: self.endpoint.clone(),
                        reason: format!("watch lost: {}", describe(&e)),
                    }))
                }
            }
        }
    }
}

/// The end of the range of keys starting with `prefix`: the prefix with its last byte below
/// 0xff incremented and what follows dropped; `\0` (every key from `key` on) when there is none.
pub(crate) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

fn refusal(endpoint: String, call: &'static str, status: u16, body: &[u8]) -> EtcdError {
    let parsed: ErrorBody = serde_json::from_slice(body).unwrap_or_default();
    let message = if parsed.message.is_empty() {
        String::from_utf8_lossy(body)
            .trim()
            .chars()
            .take(300)
            .collect()
    } else {
        parsed.message
    };
    EtcdError::Refused {
        endpoint,
        call,
        status,
        code: parsed.code,
        message,
    }
}

fn stream_error(endpoint: String, call: &'static str, body: Value) -> EtcdError {
    let parsed: ErrorBody = serde_json::from_value(body).unwrap_or_default();
    EtcdError::Refused {
        endpoint,
        call,
        status: 200,
        code: parsed.code,
        message: if parsed.message.is_empty() {
            parsed.error
        } else {
            parsed.message
        },
    }
}

/// An int64 as the gateway writes it (a string), or a number.
fn int<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Int {
        Number(i64),
        Text(String),
    }
    match Int::deserialize(d)? {
        Int::Number(n) => Ok(n),
        Int::Text(t) => t.parse().map_err(de::Error::custom),
    }
}

/// Bytes as the gateway writes them (base64).
fn bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    let text = String::deserialize(d)?;
    BASE64.decode(text.as_bytes()).map_err(de::Error::custom)
}

/// The header of every answer.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Header {
    /// The store's revision when the answer was made.
    #[serde(deserialize_with = "int")]
    pub revision: i64,
}

/// One key.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct KeyValue {
    #[serde(deserialize_with = "bytes")]
    pub key: Vec<u8>,
    #[serde(deserialize_with = "bytes")]
    pub value: Vec<u8>,
    #[serde(deserialize_with = "int")]
    pub mod_revision: i64,
    #[serde(deserialize_with = "int")]
    pub lease: i64,
}

/// `kv/range`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct RangeResponse {
    pub header: Header,
    pub kvs: Vec<KeyValue>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct HeaderOnly {
    header: Header,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct LeaseResponse {
    #[serde(rename = "ID", deserialize_with = "int")]
    id: i64,
    #[serde(rename = "TTL", deserialize_with = "int")]
    ttl: i64,
}

/// What a watch event did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub(crate) enum EventType {
    /// A key written (the gateway leaves this zero value out).
    #[default]
    #[serde(rename = "PUT")]
    Put,
    /// A key deleted (or its lease expired).
    #[serde(rename = "DELETE")]
    Delete,
}

/// One change of a key.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Event {
    #[serde(rename = "type")]
    pub kind: EventType,
    pub kv: KeyValue,
}

/// One message of a watch.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct WatchResponse {
    pub header: Header,
    pub created: bool,
    pub canceled: bool,
    #[serde(deserialize_with = "int")]
    pub compact_revision: i64,
    pub cancel_reason: String,
    pub events: Vec<Event>,
}

/// One line of a gateway stream.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
enum StreamMessage<T> {
    Result(T),
    Error(Value),
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ErrorBody {
    error: String,
    message: String,
    code: i32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_range_end_of_a_prefix_increments_its_last_byte_below_0xff() {
        assert_eq!(prefix_end(b"/svc/api/"), b"/svc/api0");
        assert_eq!(prefix_end(b"a\xff\xff"), b"b");
        assert_eq!(prefix_end(b"\xff"), b"\0");
        assert_eq!(prefix_end(b""), b"\0");
    }

    #[test]
    fn gateway_messages_are_read_with_their_omitted_zero_values() {
        let created: StreamMessage<WatchResponse> =
            serde_json::from_str(r#"{"result":{"header":{"cluster_id":"15709815907815761808","revision":"7"},"created":true}}"#).unwrap();
        let StreamMessage::Result(created) = created else {
            panic!("a result")
        };
        assert!(created.created && created.events.is_empty());
        assert_eq!(created.header.revision, 7);
        let put: StreamMessage<WatchResponse> = serde_json::from_str(
            r#"{"result":{"header":{"revision":"8"},"events":[{"kv":{"key":"L3N2Yy9h","mod_revision":"8","value":"MQ=="}},{"type":"DELETE","kv":{"key":"L3N2Yy9i","mod_revision":"8"}}]}}"#,
        )
        .unwrap();
        let StreamMessage::Result(put) = put else {
            panic!("a result")
        };
        assert_eq!(put.events[0].kind, EventType::Put);
        assert_eq!(put.events[0].kv.key, b"/svc/a");
        assert_eq!(put.events[0].kv.value, b"1");
        assert_eq!(put.events[1].kind, EventType::Delete);
        assert!(put.events[1].kv.value.is_empty());
        let cancel: StreamMessage<WatchResponse> = serde_json::from_str(
            r#"{"result":{"header":{"raft_term":"2"},"canceled":true,"compact_revision":"110"}}"#,
        )
        .unwrap();
        let StreamMessage::Result(cancel) = cancel else {
            panic!("a result")
        };
        assert!(cancel.canceled);
        assert_eq!(cancel.compact_revision, 110);
    }

    #[test]
    fn a_refusal_keeps_etcds_message_and_code() {
        let e = refusal(
            "http://127.0.0.1:2379/".into(),
            "kv/range",
            400,
            br#"{"error":"etcdserver: mvcc: required revision has been compacted","message":"etcdserver: mvcc: required revision has been compacted","code":11}"#,
        );
        assert!(e.is_compacted());
        assert!(
            e.to_string()
                .contains("required revision has been compacted"),
            "{e}"
        );
        let e = refusal(
            "x".into(),
            "lease/revoke",
            404,
            br#"{"code":5,"message":"etcdserver: requested lease not found"}"#,
        );
        assert!(e.is_lease_gone());
        let e = refusal("x".into(), "kv/range", 502, b"<html>bad gateway</html>");
        assert!(e.to_string().contains("bad gateway"), "{e}");
    }
}
