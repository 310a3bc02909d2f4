//! The last hop of every fetch: the body of one GET, streamed, with the cap checked twice — on the declared
//! `Content-Length` before a byte is read, and on the bytes actually counted while they arrive
//! (a header may lie, or be absent). The download stops the moment the cap is passed.

use super::MediaError;
use futures::StreamExt;

/// What a download brought back.
#[derive(Debug)]
pub(crate) struct Downloaded {
    pub bytes: Vec<u8>,
    /// The `Content-Type` the server gave, if any.
    pub content_type: Option<String>,
}

/// Refuse a declared size over the cap (before downloading).
pub(crate) fn check_declared(declared: Option<u64>, limit: u64) -> Result<(), MediaError> {
    match declared {
        Some(n) if n > limit => Err(MediaError::TooLarge {
            limit,
            seen: format!("declared {n} bytes"),
        }),
        _ => Ok(()),
    }
}

/// Map a non-success status of a media request.
pub(crate) fn status_error(status: reqwest::StatusCode, what: &'static str) -> MediaError {
    match status.as_u16() {
        404 | 410 => MediaError::NotFound,
        s => MediaError::Upstream { status: s, what },
    }
}

/// Read the body of `response` (its request's timeout still running), at most `limit` bytes.
pub(crate) async fn download(
    response: reqwest::Response,
    limit: u64,
) -> Result<Downloaded, MediaError> {
    let status = response.status();
    if !status.is_success() {
        return Err(status_error(status, "media download"));
    }
    check_declared(response.content_length(), limit)?;
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or(v).trim().to_owned())
        .filter(|v| !v.is_empty());
    let mut bytes = Vec::new();
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(MediaError::from_http)?;
        if (bytes.len() + chunk.len()) as u64 > limit {
            return Err(MediaError::TooLarge {
                limit,
                seen: "more than the cap while streaming".into(),
            });
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Downloaded {
        bytes,
        content_type,
    })
}
