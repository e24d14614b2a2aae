//! The response body of a routed request: the destination stays in flight until the body ends,
//! fails or is dropped, and the request's outcome is reported then.

use std::pin::Pin;
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};
use tokio::time::Instant;

use crate::client::failover::report_answer;
use crate::engine::fast_path::PickHandle;
use crate::health::outcome::RequestOutcome;

pin_project_lite::pin_project! {
    /// The body of a response through [`HealthPickService`](crate::tower::HealthPickService):
    /// the inner service's body, unchanged, plus the pick of a routed request. The answering
    /// destination counts as in flight (for LeastRequests and PowerOfTwoChoices) until the body
    /// ends or is dropped; its outcome is reported then: the status when the body ended or was
    /// dropped, a transport failure when reading it failed. Requests that were not routed (their
    /// authority named no cluster) carry no pick.
    pub struct ResponseBody<B> {
        #[pin]
        inner: B,
        outcome: Outcome,
    }
}

/// The pick of a routed response and what to report for it when the body is done.
#[derive(Debug)]
struct Outcome {
    /// Dropped (the destination leaves the in-flight count) when the body is done; with when
    /// the attempt that answered started (the outcome carries the time since).
    pick: Option<(PickHandle, Instant)>,
    status: u16,
    /// Whether the outcome was reported already.
    reported: bool,
}

impl Outcome {
    /// Reports `outcome` unless reported already, and ends the destination's in-flight count.
    fn finish(&mut self, outcome: RequestOutcome) {
        if let Some((pick, started)) = self.pick.take() {
            if !self.reported {
                report_answer(&pick, outcome, started);
            }
        }
    }
}

impl Drop for Outcome {
    fn drop(&mut self) {
        let status = self.status;
        self.finish(RequestOutcome::Status(status));
    }
}

impl<B> ResponseBody<B> {
    /// A routed response's body: `pick` answered with `status`, in an attempt that started at
    /// `started`; `reported` when the outcome was reported already.
    pub(crate) fn routed(
        inner: B,
        pick: PickHandle,
        status: u16,
        reported: bool,
        started: Instant,
    ) -> Self {
        ResponseBody {
            inner,
            outcome: Outcome {
                pick: Some((pick, started)),
                status,
                reported,
            },
        }
    }

    /// The body of a response that was not routed.
    pub(crate) fn passed(inner: B) -> Self {
        ResponseBody {
            inner,
            outcome: Outcome {
                pick: None,
                status: 0,
                reported: true,
            },
        }
    }

    /// The inner service's body (the destination leaves the in-flight count, its outcome
    /// reported as the status).
    pub fn into_inner(self) -> B {
        self.inner
    }
}

impl<B: std::fmt::Debug> std::fmt::Debug for ResponseBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseBody")
            .field("inner", &self.inner)
            .field(
                "destination",
                &self
                    .outcome
                    .pick
                    .as_ref()
                    .map(|(p, _)| p.destination().id()),
            )
            .finish()
    }
}

impl<B: Body> Body for ResponseBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        let polled = this.inner.poll_frame(cx);
        match &polled {
            Poll::Ready(None) => {
                let status = this.outcome.status;
                this.outcome.finish(RequestOutcome::Status(status));
            }
            Poll::Ready(Some(Err(_))) => this.outcome.finish(RequestOutcome::TransportFailure),
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
