//! What the day-2 commands print: the server's own JSON for `--json`
//! (so scripts get exactly the shape docs/api.md and
//! `GET /v1/openapi.json` describe), table cells, and API errors with
//! their code. The calls themselves go through `raftlock-client`
//! (`Endpoints::client`), with its failover.

use raftlock_client::ClientError;

/// `--json` on a read command.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct Output {
    /// Print the API's JSON answer instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Prints a body the server sent as indented JSON (`null` for an empty
/// one).
pub fn print_body(body: &[u8]) -> anyhow::Result<()> {
    let value: serde_json::Value = if body.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::from_slice(body)?
    };
    println!("{}", serde_json::to_string_pretty(&value)?);
    Ok(())
}

/// A text field as a table cell: absent or empty as `-`.
pub fn text(value: Option<&str>) -> String {
    match value {
        None | Some("") => "-".into(),
        Some(s) => s.to_string(),
    }
}

/// A number that may be absent, as a table cell.
pub fn number(value: Option<u64>) -> String {
    value.map_or_else(|| "-".into(), |v| v.to_string())
}

/// An API error as the day-2 commands report it: `code (status):
/// message`, the code first so scripts (and people) can match on it.
pub fn failure(e: ClientError) -> anyhow::Error {
    match e.code() {
        Some(code) => anyhow::anyhow!("{code} ({}): {}", code.status(), e.message()),
        None => anyhow::Error::new(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_their_code_and_cells_mark_what_is_absent() {
        let e = failure(ClientError::SessionNotFound("no such session".into()));
        assert_eq!(e.to_string(), "session_not_found (404): no such session");
        let e = failure(ClientError::Rejected {
            code: "version_mismatch".into(),
            message: "at 2".into(),
        });
        assert_eq!(e.to_string(), "version_mismatch (409): at 2");
        let e = failure(ClientError::Unavailable("a: refused".into()));
        assert!(e.to_string().contains("a: refused"), "{e}");
        assert_eq!(text(None), "-");
        assert_eq!(text(Some("")), "-");
        assert_eq!(text(Some("w")), "w");
        assert_eq!(number(Some(7)), "7");
        assert_eq!(number(None), "-");
    }
}
