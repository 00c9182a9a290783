//! [`ErrorCode`]'s table rendered for the Python and Go clients, so they
//! classify errors with the same retry classes as the Rust callers
//! instead of lists of their own (docs/adr/0020-one-client-generated-codes.md).
//!
//! The `raftlock-codes` binary writes the rendered files
//! ([`PYTHON_PATH`], [`GO_PATH`]) and, with `--check`, fails when a
//! committed one differs; the clients' `ci.sh` run the check, and so does
//! this crate's test suite.

use std::fmt::Write as _;

use crate::ErrorCode;

/// The Python client's generated module, from the repository root.
pub const PYTHON_PATH: &str = "clients/python/src/raftlock/_codes.py";
/// The Go client's generated file, from the repository root.
pub const GO_PATH: &str = "clients/go/codes_gen.go";

/// Who wrote a generated file and how to write it again.
const ORIGIN: &str = "generated from ErrorCode (crates/raftlock-api/src/error.rs) by \
`cargo run -p raftlock-api --bin raftlock-codes`";

/// A retry class: its name in the generated tables, and its method.
type Class = (&'static str, fn(ErrorCode) -> bool);

/// The four retry classes.
fn classes() -> [Class; 4] {
    [
        ("not_applied", ErrorCode::not_applied),
        ("outcome_unknown", ErrorCode::outcome_unknown),
        ("retry_elsewhere", ErrorCode::retry_elsewhere),
        ("retry_later", ErrorCode::retry_later),
    ]
}

/// `bad_request` → `BadRequest`: the Go constant's name after `Code`.
fn camel(code: &str) -> String {
    code.split('_')
        .map(|word| {
            let mut chars = word.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect()
}

/// `_codes.py`: the codes' statuses, `Retry-After` seconds and classes.
pub fn python() -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Code {ORIGIN}. DO NOT EDIT.");
    out.push_str(
        "\"\"\"The API's error codes (docs/api.md, \"Errors\"): each one's HTTP status,\n\
         ``Retry-After`` seconds and retry classes, as raftlock-api's ``ErrorCode``\n\
         defines them for every client.\n\n\
         - ``NOT_APPLIED``: a definite refusal, nothing changed;\n\
         - ``OUTCOME_UNKNOWN``: a write may or may not have been applied;\n\
         - ``RETRY_ELSEWHERE``: this member cannot serve now, another can;\n\
         - ``RETRY_LATER``: nothing was done and the cause passes by itself.\n\
         \"\"\"\n\n\
         from typing import Dict, FrozenSet\n\n",
    );
    out.push_str("STATUS: Dict[str, int] = {\n");
    for code in ErrorCode::ALL {
        let _ = writeln!(out, "    \"{code}\": {},", code.status());
    }
    out.push_str("}\n\"\"\"Every code the API answers with, and its HTTP status.\"\"\"\n\n");
    out.push_str("RETRY_AFTER_SECS: Dict[str, int] = {\n");
    for code in ErrorCode::ALL {
        if let Some(secs) = code.retry_after_secs() {
            let _ = writeln!(out, "    \"{code}\": {secs},");
        }
    }
    out.push_str("}\n\"\"\"The ``Retry-After`` the API sends with a code, if any.\"\"\"\n");
    for (name, class) in classes() {
        let _ = write!(
            out,
            "\n{}: FrozenSet[str] = frozenset(\n    {{\n",
            name.to_uppercase()
        );
        for code in ErrorCode::ALL.iter().filter(|c| class(**c)) {
            let _ = writeln!(out, "        \"{code}\",");
        }
        out.push_str("    }\n)\n");
    }
    out
}

/// `codes_gen.go`: the code constants and one function per class.
pub fn go() -> String {
    let mut out = String::new();
    let _ = writeln!(out, "// Code {ORIGIN}. DO NOT EDIT.\n");
    out.push_str("package raftlock\n\n");
    out.push_str("// API error codes (docs/api.md, \"Errors\").\nconst (\n");
    let width = ErrorCode::ALL
        .iter()
        .map(|c| camel(c.as_str()).len())
        .max()
        .unwrap_or(0);
    for code in ErrorCode::ALL {
        let name = format!("Code{}", camel(code.as_str()));
        let _ = writeln!(out, "\t{name:<w$} = \"{code}\"", w = width + 4);
    }
    out.push_str(")\n\n");
    out.push_str(
        "// codeStatus is the HTTP status the API answers code with; 0 for a\n\
         // code it does not have.\nfunc codeStatus(code string) int {\n\tswitch code {\n",
    );
    let mut statuses: Vec<u16> = ErrorCode::ALL.iter().map(|c| c.status()).collect();
    statuses.sort_unstable();
    statuses.dedup();
    for status in statuses {
        let names: Vec<String> = ErrorCode::ALL
            .iter()
            .filter(|c| c.status() == status)
            .map(|c| format!("Code{}", camel(c.as_str())))
            .collect();
        let _ = writeln!(out, "\tcase {}:\n\t\treturn {status}", names.join(", "));
    }
    out.push_str("\t}\n\treturn 0\n}\n");
    let docs = [
        "a definite refusal: the request changed nothing",
        "a write may or may not have been applied",
        "this member cannot serve now and another can",
        "nothing was done and the cause passes by itself: retry after a pause",
    ];
    for ((name, class), doc) in classes().into_iter().zip(docs) {
        let func = format!("code{}", camel(name));
        let _ = write!(
            out,
            "\n// {func} reports whether code says {doc}.\nfunc {func}(code string) bool {{\n\tswitch code {{\n\tcase "
        );
        let names: Vec<String> = ErrorCode::ALL
            .iter()
            .filter(|c| class(**c))
            .map(|c| format!("Code{}", camel(c.as_str())))
            .collect();
        let _ = write!(
            out,
            "{}:\n\t\treturn true\n\t}}\n\treturn false\n}}\n",
            names.join(", ")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_codes_in_camel_case() {
        assert_eq!(camel("bad_request"), "BadRequest");
        assert_eq!(camel("unsupported_media_type"), "UnsupportedMediaType");
        assert_eq!(camel("timeout"), "Timeout");
    }

    #[test]
    fn the_tables_follow_the_classes() {
        let python = python();
        assert!(
            python.contains("    \"storage_failed\": 503,\n"),
            "{python}"
        );
        let unknown = python
            .split("OUTCOME_UNKNOWN: FrozenSet[str] = frozenset(\n")
            .nth(1)
            .and_then(|rest| rest.split(")\n").next())
            .unwrap_or_default();
        assert_eq!(
            unknown,
            "    {\n        \"outcome_unknown\",\n        \"shutting_down\",\n        \"internal\",\n    }\n"
        );
        let go = go();
        assert!(go.contains("\tCodeBadRequest"), "{go}");
        assert!(go.contains(
            "func codeRetryElsewhere(code string) bool {\n\tswitch code {\n\tcase CodeShuttingDown, CodeMemberReplaced, CodeStorageFailed, CodeDiskFull, CodeOverloaded:\n"
        ), "{go}");
        for code in ErrorCode::ALL {
            assert!(python.contains(&format!("\"{code}\": {}", code.status())));
            assert!(go.contains(&format!("= \"{code}\"\n")));
        }
    }

    /// The committed files are what the generator writes now: a change to
    /// `ErrorCode` that was not regenerated fails here (and in the
    /// clients' ci.sh, `raftlock-codes --check`).
    #[test]
    fn the_committed_client_tables_are_current() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for (path, text) in [(PYTHON_PATH, python()), (GO_PATH, go())] {
            let committed = std::fs::read_to_string(root.join(path)).unwrap_or_default();
            assert!(
                committed == text,
                "{path} is stale: run `cargo run -p raftlock-api --bin raftlock-codes`"
            );
        }
    }
}
