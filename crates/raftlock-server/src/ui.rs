//! `/ui`: the operator dashboard. Four static files compiled into the
//! binary (`crates/raftlock-server/ui/`), so every member serves the page
//! without a build step or files on disk. The page holds no data; it reads
//! the API from the browser (with the operator's bearer token when the
//! cluster has tokens), so these routes are public (`auth/policy.rs`).

use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS};
use axum::http::HeaderName;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;

use crate::state::AppState;

const INDEX_HTML: &str = include_str!("../ui/index.html");
const APP_JS: &str = include_str!("../ui/app.js");
/// The plots: inline SVG drawn from `/metrics` (no library, no CDN).
const PLOTS_JS: &str = include_str!("../ui/plots.js");
const APP_CSS: &str = include_str!("../ui/app.css");

/// The page may only talk to the member that served it: no inline script,
/// no third-party origin.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                   connect-src 'self'; img-src 'self' data:; base-uri 'none'; \
                   form-action 'none'; frame-ancestors 'none'";

/// The dashboard routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/ui", get(redirect))
        .route("/ui/", get(index))
        .route("/ui/app.js", get(app_js))
        .route("/ui/plots.js", get(plots_js))
        .route("/ui/app.css", get(app_css))
}

/// The dashboard routes in the OpenAPI document (`openapi.rs`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(redirect, index, app_js, plots_js, app_css))]
pub(crate) struct Api;

#[utoipa::path(get, path = "/ui", tag = "dashboard",
    responses((status = 308, description = "To `/ui/`")))]
async fn redirect() -> Redirect {
    Redirect::permanent("/ui/")
}

#[utoipa::path(get, path = "/ui/", tag = "dashboard",
    responses((status = 200, description = "The dashboard page", content_type = "text/html", body = String)))]
async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

#[utoipa::path(get, path = "/ui/app.js", tag = "dashboard",
    responses((status = 200, description = "Its script", content_type = "text/javascript", body = String)))]
async fn app_js() -> Response {
    asset("text/javascript; charset=utf-8", APP_JS)
}

#[utoipa::path(get, path = "/ui/plots.js", tag = "dashboard",
    responses((status = 200, description = "The script of its plots", content_type = "text/javascript", body = String)))]
async fn plots_js() -> Response {
    asset("text/javascript; charset=utf-8", PLOTS_JS)
}

#[utoipa::path(get, path = "/ui/app.css", tag = "dashboard",
    responses((status = 200, description = "Its style sheet", content_type = "text/css", body = String)))]
async fn app_css() -> Response {
    asset("text/css; charset=utf-8", APP_CSS)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (CONTENT_TYPE, content_type),
            // A member upgraded in place must serve its own page, not a
            // cached one of the old version.
            (CACHE_CONTROL, "no-cache"),
            (X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (HeaderName::from_static("content-security-policy"), CSP),
        ],
        body,
    )
        .into_response()
}
