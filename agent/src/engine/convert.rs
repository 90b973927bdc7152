//! Conversions between bollard's types and the engine seam's domain types, and the mapping of
//! bollard errors onto [`EngineError`]. Nothing here is public outside `engine/`.

use bollard::errors::Error as BollardError;

use super::error::EngineError;

/// Map a bollard error onto the seam's error, keeping the engine's exact words.
pub(crate) fn map_error(err: BollardError) -> EngineError {
    match err {
        BollardError::DockerResponseServerError {
            status_code,
            message,
        } => match status_code {
            404 => EngineError::NotFound(message),
            409 => EngineError::Conflict(message),
            status => EngineError::Rejected { status, message },
        },
        BollardError::SocketNotFoundError(path) => {
            EngineError::Unavailable(format!("docker socket not found at {path}"))
        }
        BollardError::RequestTimeoutError => {
            EngineError::Unavailable("request to the docker engine timed out".into())
        }
        e @ (BollardError::IOError { .. }
        | BollardError::HyperLegacyError { .. }
        | BollardError::HttpClientError { .. }
        | BollardError::HyperResponseError { .. }) => EngineError::Unavailable(error_chain(&e)),
        BollardError::DockerStreamError { error } => EngineError::Other(error),
        other => EngineError::Other(error_chain(&other)),
    }
}

/// The error's message followed by its sources, so "client error (Connect)" also says
/// "connection refused" or "no such file or directory".
pub(crate) fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let part = cause.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_map_to_variants() {
        let server = |status_code: u16| BollardError::DockerResponseServerError {
            status_code,
            message: "the engine's words".into(),
        };
        assert_eq!(
            map_error(server(404)),
            EngineError::NotFound("the engine's words".into())
        );
        assert_eq!(
            map_error(server(409)),
            EngineError::Conflict("the engine's words".into())
        );
        assert_eq!(
            map_error(server(500)),
            EngineError::Rejected {
                status: 500,
                message: "the engine's words".into()
            }
        );
        assert!(map_error(BollardError::SocketNotFoundError("/nope".into())).is_unavailable());
        assert!(map_error(BollardError::RequestTimeoutError).is_unavailable());
    }
}
