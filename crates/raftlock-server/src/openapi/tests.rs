//! The document against the code and docs/api.md. Every list compared
//! here is read from the real thing: the routes from the router `build`
//! serves, the codes from `ErrorCode::ALL` (declared with the enum
//! itself), the documented routes and codes from docs/api.md.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::document;
use crate::error::ErrorCode;

type Routes = BTreeMap<String, BTreeSet<String>>;

/// The methods a route can have in the document (HEAD comes with GET).
const METHODS: [&str; 5] = ["GET", "POST", "PUT", "DELETE", "PATCH"];

/// Path → methods of the router the server runs. axum lists its routes
/// nowhere but in the router's `Debug` output: `RouteId(n): "/path"` for
/// the paths and `RouteId(n): MethodRouter(… allow_header: Bytes(b"GET,HEAD"))`
/// for the methods. Only the path router is read (the fallback router
/// holds axum's catch-all).
fn router_routes() -> Routes {
    let debug = format!("{:?}", crate::routes());
    let (section, _) = debug
        .split_once("fallback_router:")
        .expect("axum's Router Debug output changed: no fallback_router field");
    let mut paths: BTreeMap<u32, String> = BTreeMap::new();
    let mut methods: BTreeMap<u32, BTreeSet<String>> = BTreeMap::new();
    for piece in section.split("RouteId(").skip(1) {
        let (id, rest) = piece.split_once("): ").expect("RouteId(n): …");
        let id: u32 = id.parse().expect("a numeric route id");
        if let Some(path) = rest.strip_prefix('"') {
            let (path, _) = path.split_once('"').expect("a quoted path");
            paths.insert(id, path.to_string());
        } else if rest.starts_with("MethodRouter(") {
            let (_, allow) = rest
                .split_once("allow_header: Bytes(b\"")
                .unwrap_or_else(|| panic!("route {id} has no Allow list: {rest:.200}"));
            let (allow, _) = allow.split_once('"').expect("a quoted Allow list");
            let set = allow
                .split(',')
                .filter(|m| *m != "HEAD")
                .map(str::to_string)
                .collect();
            methods.insert(id, set);
        } else {
            panic!("route {id} is neither a path nor a method router: {rest:.100}");
        }
    }
    let routes: Routes = paths
        .into_iter()
        .map(|(id, path)| {
            let m = methods
                .remove(&id)
                .unwrap_or_else(|| panic!("no methods for {path}"));
            (path, m)
        })
        .collect();
    assert!(
        routes.len() >= 10 && routes.contains_key("/v1/sessions"),
        "could not read the router's routes: {routes:?}"
    );
    routes
}

fn spec() -> Value {
    serde_json::to_value(document()).expect("the document serializes")
}

/// Path → methods of the document.
fn spec_routes(spec: &Value) -> Routes {
    let paths = spec["paths"].as_object().expect("paths");
    paths
        .iter()
        .map(|(path, item)| {
            let methods = METHODS
                .iter()
                .filter(|m| item.get(m.to_ascii_lowercase()).is_some())
                .map(|m| m.to_string())
                .collect();
            (path.clone(), methods)
        })
        .collect()
}

fn api_md() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/api.md");
    std::fs::read_to_string(path).expect("docs/api.md")
}

/// The routes docs/api.md documents: every `` `METHOD /path` `` on a
/// bullet line (`- …`), query strings dropped.
fn documented_routes(md: &str) -> Routes {
    let mut routes = Routes::new();
    for line in md.lines().filter(|l| l.starts_with("- ")) {
        for span in line.split('`').skip(1).step_by(2) {
            let Some((method, path)) = span.split_once(' ') else {
                continue;
            };
            if !METHODS.contains(&method) || !path.starts_with('/') {
                continue;
            }
            let path = path.split(['?', ' ']).next().unwrap_or(path);
            routes
                .entry(path.to_string())
                .or_default()
                .insert(method.to_string());
        }
    }
    routes
}

/// A concrete request path for a document path (`{name}` → `x`).
fn concrete(path: &str) -> String {
    path.split('/')
        .map(|seg| if seg.starts_with('{') { "x" } else { seg })
        .collect::<Vec<_>>()
        .join("/")
}

#[test]
fn the_document_and_the_router_have_the_same_routes() {
    let router = router_routes();
    let spec = spec_routes(&spec());
    // Wildcard routes (`/v1/locks/{*rest}`) serve several documented
    // operations: route each documented path as axum would.
    let mut matcher = matchit::Router::new();
    for path in router.keys() {
        matcher
            .insert(path.as_str(), path.clone())
            .expect("axum paths are matchit paths");
    }
    let mut covered: BTreeSet<(String, String)> = BTreeSet::new();
    let mut problems = Vec::new();
    for (path, methods) in &spec {
        let request = concrete(path);
        let Ok(hit) = matcher.at(&request) else {
            problems.push(format!("{path}: in the document, no route serves it"));
            continue;
        };
        for method in methods {
            if router[hit.value].contains(method) {
                covered.insert((hit.value.clone(), method.clone()));
            } else {
                problems.push(format!(
                    "{method} {path}: in the document, not in the router"
                ));
            }
        }
    }
    for (path, methods) in &router {
        for method in methods {
            if !covered.contains(&(path.clone(), method.clone())) {
                problems.push(format!(
                    "{method} {path}: in the router, not in the document \
                     (annotate the handler with #[utoipa::path] and list it in its module's Api)"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn the_document_and_docs_api_md_list_the_same_routes() {
    let documented = documented_routes(&api_md());
    let spec = spec_routes(&spec());
    assert!(
        documented.len() >= 10,
        "could not read docs/api.md: {documented:?}"
    );
    let flat = |r: &Routes| -> BTreeSet<String> {
        r.iter()
            .flat_map(|(p, ms)| ms.iter().map(move |m| format!("{m} {p}")))
            .collect()
    };
    let (documented, spec) = (flat(&documented), flat(&spec));
    let only_docs: Vec<_> = documented.difference(&spec).collect();
    let only_spec: Vec<_> = spec.difference(&documented).collect();
    assert!(
        only_docs.is_empty() && only_spec.is_empty(),
        "in docs/api.md only: {only_docs:#?}\nin the document only: {only_spec:#?}"
    );
}

#[test]
fn every_error_code_is_in_the_document_and_in_docs_api_md() {
    let spec = spec();
    let listed: BTreeSet<&str> = spec["components"]["schemas"]["ErrorCode"]["enum"]
        .as_array()
        .expect("ErrorCode is an enum of strings")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let code: BTreeSet<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
    let md = api_md();
    let documented: BTreeSet<&str> = md
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once("` |").map(|(code, _)| code))
        .filter(|c| c.chars().all(|ch| ch.is_ascii_lowercase() || ch == '_'))
        .collect();
    assert_eq!(code, listed, "ErrorCode vs the document's ErrorCode schema");
    assert_eq!(code, documented, "ErrorCode vs docs/api.md's error tables");
}

#[test]
fn every_operation_documents_its_error_body() {
    let spec = spec();
    let mut missing = Vec::new();
    for (path, item) in spec["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("a path item") {
            let error =
                &op["responses"]["default"]["content"]["application/json"]["schema"]["$ref"];
            if error != "#/components/schemas/ErrorBody" {
                missing.push(format!("{method} {path}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "no `default` ErrorBody response: {missing:?}"
    );
}

#[test]
fn the_document_is_openapi_3_1() {
    let spec = spec();
    assert_eq!(spec["openapi"], "3.1.0");
    assert_eq!(spec["info"]["version"], env!("CARGO_PKG_VERSION"));
}
