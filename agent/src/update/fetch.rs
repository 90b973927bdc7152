//! Downloading a release artefact: the [`Fetch`] seam and its real implementation over the
//! agent's HTTP client with the link's TLS trust. The artefact comes in ranges of
//! [`CHUNK`] bytes (`Range: bytes=a-b`), each retried up to [`CHUNK_TRIES`] times from where
//! the download stands, so a cut link resumes rather than starts over, and progress is told
//! after each range; a server that ignores ranges (`200`) sends it whole in one answer.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hyper::header::RANGE;

/// Told the bytes received so far.
pub type Progress<'a> = &'a (dyn Fn(u64) + Send + Sync);

/// Bytes asked for in one range.
pub const CHUNK: u64 = 4 << 20;
/// Tries of one range before the download fails.
pub const CHUNK_TRIES: u32 = 3;
/// Bound of one range request (a whole artefact when ranges are ignored).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(300);

/// Fetches an artefact of `size` bytes (what the signed manifest says; the caller checks
/// what arrived against it).
#[async_trait]
pub trait Fetch: Send + Sync {
    async fn fetch(&self, url: &str, size: u64, progress: Progress<'_>) -> Result<Vec<u8>, String>;
}

/// The agent's HTTP client with the link's TLS trust.
pub struct HttpFetch(pub Arc<rustls::ClientConfig>);

#[async_trait]
impl Fetch for HttpFetch {
    async fn fetch(&self, url: &str, size: u64, progress: Progress<'_>) -> Result<Vec<u8>, String> {
        let mut body: Vec<u8> = Vec::new();
        while (body.len() as u64) < size {
            let from = body.len() as u64;
            let to = from.saturating_add(CHUNK).min(size) - 1;
            let mut tries = 0;
            let (status, part) = loop {
                tries += 1;
                match self.range(url, from, to).await {
                    Ok(answer) => break answer,
                    Err(e) if tries >= CHUNK_TRIES => {
                        return Err(format!("bytes {from}-{to} after {tries} tries: {e}"));
                    }
                    Err(_) => tokio::time::sleep(Duration::from_secs(u64::from(tries))).await,
                }
            };
            match status {
                // ranges ignored: this is the whole artefact (one byte more than the size is
                // read, so a longer one shows)
                200 if from == 0 => {
                    progress(part.len() as u64);
                    return Ok(part);
                }
                206 if !part.is_empty() && part.len() as u64 <= to - from + 1 => {
                    body.extend_from_slice(&part);
                    progress(body.len() as u64);
                }
                206 => return Err(format!("bytes {from}-{to}: an empty or oversized range")),
                other => return Err(format!("bytes {from}-{to}: status {other}")),
            }
        }
        Ok(body)
    }
}

impl HttpFetch {
    /// `GET url` for bytes `from..=to`: (status, body).
    async fn range(&self, url: &str, from: u64, to: u64) -> Result<(u16, Vec<u8>), String> {
        // a server that ignores the range sends everything: room for the largest artefact
        // accepted and one byte more (a longer answer is an error)
        let max = usize::try_from(MAX_WHOLE).map_err(|e| e.to_string())?;
        let req = odac_host::http_client::Request::get(url, max, REQUEST_TIMEOUT)
            .header(RANGE, format!("bytes={from}-{to}"));
        let resp = odac_host::http_client::send(&self.0, req)
            .await
            .map_err(|e| e.to_string())?;
        Ok((resp.status, resp.body.to_vec()))
    }
}

/// Largest artefact accepted, bytes.
pub const MAX_ARTEFACT: u64 = 512 << 20;
/// Largest answer read at once (a server that ignores ranges sends the whole artefact).
const MAX_WHOLE: u64 = MAX_ARTEFACT + 1;
