//! How the tower layer sends a request body more than once (a retry, a hedge): tower has no
//! general way to copy a body, so the layer is told, like tower's own retry `Policy::clone_request`.

/// Makes a copy of a request body for another attempt, or says it cannot (then the request is
/// sent once and never retried).
pub trait ReplayBody<B>: Clone + Send + Sync + 'static {
    /// A copy of `body` to send again, or `None`.
    fn replay(&self, body: &B) -> Option<B>;
}

/// Copies bodies with `Clone` (the default): `http_body_util::Full<Bytes>`, `Empty<Bytes>`,
/// `String`, `Bytes`, and any body a buffering layer made cloneable.
#[derive(Debug, Clone, Copy, Default)]
pub struct CloneBody;

impl<B: Clone> ReplayBody<B> for CloneBody {
    fn replay(&self, body: &B) -> Option<B> {
        Some(body.clone())
    }
}

/// Never copies a body: every request is sent once (failover still happens before sending, at
/// the pick). For bodies that cannot be cloned, such as tonic's streaming `Body`.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoReplay;

impl<B> ReplayBody<B> for NoReplay {
    fn replay(&self, _: &B) -> Option<B> {
        None
    }
}
