//! The console's assets: `console/dist` (built with Vite from `console/`,
//! docs/console.md) embedded in the binary with rust-embed, so the broker
//! serves it with no Node.js at run time. Paths that are not files are the
//! single-page app's routes and get its `index.html`. A binary built
//! without the assets (no Node.js on the build machine) serves a plain page
//! that says so and links the JSON API and the metrics.

use axum::http::{header, StatusCode, Uri};
use axum::response::{Html, IntoResponse, Response};
use rust_embed::RustEmbed;

#[derive(RustEmbed)]
#[folder = "../../console/dist"]
#[allow_missing = true]
struct Assets;

/// The plain page of a binary without the console's assets.
const PLAIN_PAGE: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>es</title></head>
<body style="font-family: sans-serif; max-width: 40em; margin: 2em auto">
<h1>es</h1>
<p>This es-broker was built without its console (Node.js was not there to
build <code>console/</code>; see docs/console.md). Everything the console
shows is in the JSON API and the metrics:</p>
<ul>
<li><a href="api/v1/overview">api/v1/overview</a>, <a href="api/v1/topics">api/v1/topics</a>,
<a href="api/v1/groups">api/v1/groups</a> (docs/admin-api.md)</li>
<li><a href="metrics">metrics</a> (docs/metrics.md)</li>
<li><a href="readyz">readyz</a></li>
</ul>
</body></html>
"#;

/// Serves `uri`'s asset, `index.html` for the app's routes, or the plain
/// page.
pub async fn serve(uri: Uri) -> Response {
    let path = uri.path().trim_start_matches('/');
    let path = if path.is_empty() { "index.html" } else { path };
    if let Some(file) = Assets::get(path) {
        return asset(path, file);
    }
    if path.starts_with("api/") || path.contains('.') {
        return (StatusCode::NOT_FOUND, "not found\n").into_response();
    }
    match Assets::get("index.html") {
        Some(file) => asset("index.html", file),
        None => Html(PLAIN_PAGE).into_response(),
    }
}

fn asset(path: &str, file: rust_embed::EmbeddedFile) -> Response {
    let mime = file.metadata.mimetype().to_string();
    // Vite names its bundles by content hash: cache them; never the page.
    let cache = if path.starts_with("assets/") {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    (
        [
            (header::CONTENT_TYPE, mime),
            (header::CACHE_CONTROL, cache.to_string()),
        ],
        file.data.into_owned(),
    )
        .into_response()
}
