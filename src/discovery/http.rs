//! What the HTTP-based sources (etcd's gateway, Consul) share: reading an answer without
//! letting it grow without bound, and saying what a reqwest error actually was.

/// Why an answer could not be read.
#[derive(Debug)]
pub(crate) enum BodyError {
    /// It is larger than allowed.
    TooLarge(usize),
    /// The connection failed while reading it.
    Failed(String),
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::TooLarge(max) => write!(f, "answer larger than {max} bytes"),
            BodyError::Failed(why) => f.write_str(why),
        }
    }
}

/// The rest of `response`'s body, at most `max` bytes.
pub(crate) async fn read_bounded(
    response: &mut reqwest::Response,
    max: usize,
) -> Result<Vec<u8>, BodyError> {
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > max {
                    return Err(BodyError::TooLarge(max));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body),
            Err(e) => return Err(BodyError::Failed(describe(&e))),
        }
    }
}

/// reqwest's error with its causes, which say what happened (`connection refused`), or
/// `timed out`.
pub(crate) fn describe(e: &reqwest::Error) -> String {
    let mut text = if e.is_timeout() {
        "timed out".to_string()
    } else {
        e.to_string()
    };
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
