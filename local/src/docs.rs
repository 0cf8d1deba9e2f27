//! The API reference the local API serves beside its routes (the deployed
//! API has neither): `GET /docs`, Swagger UI rendering the project's
//! openapi.yaml, and `GET /openapi.yaml`, that document with its server set
//! to the page's own origin. Swagger UI's files are read at start-up from
//! `swagger-ui-dist` (`make docs-tools`), not compiled in.
//! See docs/operations.md, The local API.

use std::path::{Path, PathBuf};

use agent_server_shared::{Response, envelope};
use aws_lambda_events::encodings::Body;
use aws_lambda_events::http::{Method, StatusCode, header};

/// The API description, as committed: the same text the functions are held
/// to (tests/tests/integration/openapi.rs).
pub const OPENAPI_YAML: &str = include_str!("../../openapi.yaml");

/// Where `make docs-tools` installs Swagger UI's files, in the checkout this
/// binary was built from: the default of `--docs`.
pub const DEFAULT_ASSETS_DIR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tools/docs/node_modules/swagger-ui-dist"
);

/// The paths the reference is served at; every other path is the API's.
pub const DOCS_PATH: &str = "/docs";
/// The served API description.
pub const OPENAPI_PATH: &str = "/openapi.yaml";

/// The methods the reference's paths accept, for `Allow` on a 405.
pub const ALLOWED_METHODS: &str = "GET, HEAD";

/// Only this origin: Swagger UI needs inline styles (React sets `style`
/// attributes) and `data:` images (its icons), nothing from elsewhere.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; \
     font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The page: Swagger UI's bundle and stylesheet, then [`INIT_JS`].
const INDEX_HTML: &str = r##"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Agent Server update API: local reference</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/docs/swagger-ui.css">
<link rel="icon" type="image/png" href="/docs/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>
"##;

/// Swagger UI's configuration. A separate file, not an inline script, so the
/// page's policy can forbid inline scripts. `validatorUrl: null` turns off
/// the badge that would send the document to validator.swagger.io.
const INIT_JS: &str = r##""use strict";
window.ui = SwaggerUIBundle({
  url: "/openapi.yaml",
  dom_id: "#swagger-ui",
  deepLinking: true,
  validatorUrl: null,
  displayRequestDuration: true,
  showCommonExtensions: true,
  defaultModelsExpandDepth: 1,
  docExpansion: "list"
});
"##;

/// The page `/docs` answers when Swagger UI's files are not installed.
const NOT_INSTALLED_HTML: &str = "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
     <title>API reference not installed</title></head><body>\
     <p>Swagger UI's files are not installed, so this local API cannot render its reference.\
     Install them with <code>make docs-tools</code> (<code>make run</code> does it), then restart \
     local-api. The description itself is at <a href=\"/openapi.yaml\">/openapi.yaml</a>.</p>\
     </body></html>\n";

/// The server the served description names: the page's own origin. OpenAPI
/// resolves a relative server URL against the document's address, so the
/// requests go wherever the page was loaded from (127.0.0.1 or localhost,
/// any port), same origin.
const LOCAL_SERVERS: &str = "servers:\n  \
     - url: /\n    \
     description: This local API (the address this page was loaded from)\n";

/// Swagger UI's files, as the npm package ships them.
const ASSETS: [(&str, &str); 3] = [
    ("swagger-ui-bundle.js", "text/javascript; charset=utf-8"),
    ("swagger-ui.css", "text/css; charset=utf-8"),
    ("favicon-32x32.png", "image/png"),
];

/// One file the reference serves.
#[derive(Debug, Clone)]
struct Asset {
    name: &'static str,
    content_type: &'static str,
    bytes: Vec<u8>,
}

/// What the reference serves: the description, and Swagger UI's files when
/// they were found.
#[derive(Debug, Clone)]
pub struct Docs {
    openapi: String,
    assets: Option<Vec<Asset>>,
}

impl Default for Docs {
    /// The description only: `/docs` says how to install Swagger UI.
    fn default() -> Self {
        Self {
            openapi: local_document(OPENAPI_YAML),
            assets: None,
        }
    }
}

/// Why Swagger UI's files could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source} (install Swagger UI's files with `make docs-tools`)", path.display())]
pub struct MissingAssets {
    path: PathBuf,
    source: std::io::Error,
}

impl Docs {
    /// The reference with Swagger UI's files read from `dir` (the
    /// `swagger-ui-dist` package directory), once: later changes there are
    /// not seen until a restart.
    ///
    /// # Errors
    /// If one of the files cannot be read.
    pub fn load(dir: &Path) -> Result<Self, MissingAssets> {
        let assets = ASSETS
            .iter()
            .map(|&(name, content_type)| {
                let path = dir.join(name);
                std::fs::read(&path)
                    .map(|bytes| Asset {
                        name,
                        content_type,
                        bytes,
                    })
                    .map_err(|source| MissingAssets { path, source })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            assets: Some(assets),
            ..Self::default()
        })
    }

    /// Whether Swagger UI's files were found, so `/docs` renders.
    pub fn renders(&self) -> bool {
        self.assets.is_some()
    }

    /// The answer to `method` on `path` when the path is the reference's,
    /// `None` for every other path (the API's own routing answers those).
    /// A 405 names `request_id`, as the API's own do.
    pub fn answer(&self, method: &Method, path: &str, request_id: &str) -> Option<Response> {
        let is_reference = path == OPENAPI_PATH
            || path
                .strip_prefix(DOCS_PATH)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
        if !is_reference {
            return None;
        }
        let mut response = match self.file(path) {
            None => envelope::error_envelope(
                404,
                "not_found",
                "No such file of the API reference",
                None,
                request_id,
            ),
            Some(_) if method != Method::GET && method != Method::HEAD => {
                envelope::method_not_allowed(ALLOWED_METHODS, request_id)
            }
            Some(file) => return Some(file),
        };
        secure(&mut response);
        Some(response)
    }

    /// The file at `path`, if the path is the reference's.
    fn file(&self, path: &str) -> Option<Response> {
        if path == OPENAPI_PATH {
            return Some(page(
                StatusCode::OK,
                "application/yaml; charset=utf-8",
                self.openapi.clone().into_bytes(),
            ));
        }
        let rest = path.strip_prefix(DOCS_PATH)?;
        if rest.is_empty() || rest == "/" {
            return Some(match self.assets {
                Some(_) => page(StatusCode::OK, "text/html; charset=utf-8", INDEX_HTML.into()),
                None => page(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "text/html; charset=utf-8",
                    NOT_INSTALLED_HTML.into(),
                ),
            });
        }
        let name = rest.strip_prefix('/')?;
        if name == "init.js" {
            return Some(page(
                StatusCode::OK,
                "text/javascript; charset=utf-8",
                INIT_JS.into(),
            ));
        }
        let asset = self.assets.as_ref()?.iter().find(|asset| asset.name == name)?;
        Some(page(StatusCode::OK, asset.content_type, asset.bytes.clone()))
    }
}

/// A response of the reference, under its content policy.
fn page(status: StatusCode, content_type: &str, body: Vec<u8>) -> Response {
    let mut response = Response::new(Body::Binary(body));
    *response.status_mut() = status;
    envelope::set_header(&mut response, header::CONTENT_TYPE, content_type);
    secure(&mut response);
    response
}

/// The reference's security headers, on every answer it gives.
fn secure(response: &mut Response) {
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::CACHE_CONTROL, "no-cache"),
        (header::REFERRER_POLICY, "no-referrer"),
    ] {
        envelope::set_header(response, name, value);
    }
}

/// `yaml` with its top-level `servers` replaced by `LOCAL_SERVERS` (or
/// given it, if it had none). Text, not a YAML round trip: the served
/// document keeps every comment, key order and example exactly as written.
pub fn local_document(yaml: &str) -> String {
    let mut out = String::with_capacity(yaml.len() + LOCAL_SERVERS.len());
    let mut in_servers = false;
    let mut replaced = false;
    for line in yaml.split_inclusive('\n') {
        let top_level = !line.starts_with([' ', '\t', '#', '\n', '\r']);
        if top_level {
            in_servers = line.starts_with("servers:");
            if in_servers && !replaced {
                out.push_str(LOCAL_SERVERS);
                replaced = true;
            }
        }
        // A comment or blank line inside the block goes with it.
        if !in_servers {
            out.push_str(line);
        }
    }
    if !replaced {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(LOCAL_SERVERS);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(response: &Response) -> String {
        String::from_utf8_lossy(response.body().as_ref()).into_owned()
    }

    #[test]
    fn the_served_description_names_only_this_server() {
        let served = local_document(OPENAPI_YAML);
        assert_eq!(served.matches("\nservers:\n").count(), 1, "{served}");
        assert!(served.contains(LOCAL_SERVERS));
        // Everything else is the committed text, line for line.
        let without = |text: &str| -> Vec<String> {
            let mut skipping = false;
            text.lines()
                .filter(|line| {
                    if !line.starts_with([' ', '#']) && !line.is_empty() {
                        skipping = line.starts_with("servers:");
                    }
                    !skipping
                })
                .map(String::from)
                .collect()
        };
        assert_eq!(without(&served), without(OPENAPI_YAML));
        assert!(without(OPENAPI_YAML).len() > 500);
        assert!(served.contains("\npaths:\n"));
    }

    #[test]
    fn a_servers_block_anywhere_is_replaced_and_a_missing_one_added() {
        let yaml =
            "openapi: 3.1.0\nservers:\n  - url: https://a\n\n  # note\n  - url: https://b\npaths: {}\n";
        assert_eq!(
            local_document(yaml),
            format!("openapi: 3.1.0\n{LOCAL_SERVERS}paths: {{}}\n")
        );
        assert_eq!(
            local_document("openapi: 3.1.0\npaths: {}"),
            format!("openapi: 3.1.0\npaths: {{}}\n{LOCAL_SERVERS}")
        );
        // `servers` inside an operation is not the document's.
        let nested = "paths:\n  /a:\n    servers:\n      - url: https://c\n";
        assert_eq!(local_document(nested), format!("{nested}{LOCAL_SERVERS}"));
    }

    #[test]
    fn only_its_own_paths_and_methods() {
        let docs = Docs::default();
        for path in [
            "/",
            "/doc",
            "/docsx",
            "/api/agent-server/models/a",
            "/openapi.json",
        ] {
            assert!(docs.answer(&Method::GET, path, "r").is_none(), "{path}");
        }
        // Under the reference's own paths, a missing file is its 404.
        for path in ["/docs/x", "/docs/swagger-ui.css", "/docs/a/b"] {
            for method in [Method::GET, Method::PUT] {
                let missing = docs.answer(&method, path, "r");
                assert_eq!(
                    missing.as_ref().map(Response::status),
                    Some(StatusCode::NOT_FOUND),
                    "{path}"
                );
                let headers = missing.map(|answer| answer.headers().clone()).unwrap_or_default();
                assert_eq!(
                    headers["content-security-policy"], CONTENT_SECURITY_POLICY,
                    "{path}"
                );
                assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
            }
        }
        let Some(spec) = docs.answer(&Method::GET, OPENAPI_PATH, "r") else {
            panic!("no /openapi.yaml");
        };
        assert_eq!(spec.status(), 200);
        assert_eq!(spec.headers()["content-type"], "application/yaml; charset=utf-8");
        assert!(body(&spec).starts_with("openapi: 3.1.0\n"));
        for method in [Method::PUT, Method::POST, Method::DELETE, Method::PATCH] {
            let Some(refused) = docs.answer(&method, DOCS_PATH, "r") else {
                panic!("{method}: no answer");
            };
            assert_eq!(refused.status(), 405, "{method}");
            assert_eq!(refused.headers()["allow"], ALLOWED_METHODS);
            assert_eq!(
                refused.headers()["content-security-policy"],
                CONTENT_SECURITY_POLICY
            );
            assert_eq!(refused.headers()["x-content-type-options"], "nosniff");
            let envelope: serde_json::Value =
                serde_json::from_slice(refused.body().as_ref()).unwrap_or_default();
            assert_eq!(envelope["errorDetails"]["code"], "method_not_allowed");
        }
        assert!(docs.answer(&Method::HEAD, OPENAPI_PATH, "r").is_some());
    }

    #[test]
    fn without_swagger_ui_docs_says_how_to_install_it() {
        let docs = Docs::default();
        assert!(!docs.renders());
        let Some(page) = docs.answer(&Method::GET, DOCS_PATH, "r") else {
            panic!("no /docs");
        };
        assert_eq!(page.status(), 503);
        assert!(body(&page).contains("make docs-tools"));
        let Err(error) = Docs::load(Path::new("/nonexistent")) else {
            panic!("loaded from nowhere");
        };
        assert!(
            error.to_string().contains("/nonexistent/swagger-ui-bundle.js"),
            "{error}"
        );
    }

    #[test]
    fn with_swagger_ui_every_file_is_served_under_the_policy() {
        let dir = std::env::temp_dir().join(format!("local-api-docs-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, _) in ASSETS {
            std::fs::write(dir.join(name), format!("contents of {name}")).unwrap();
        }
        let docs = Docs::load(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(docs.renders());
        for path in ["/docs", "/docs/"] {
            let Some(page) = docs.answer(&Method::GET, path, "r") else {
                panic!("{path}: no answer");
            };
            assert_eq!(page.status(), 200);
            assert!(body(&page).contains(r#"<script src="/docs/swagger-ui-bundle.js">"#));
        }
        let Some(init) = docs.answer(&Method::GET, "/docs/init.js", "r") else {
            panic!("no init.js");
        };
        assert!(body(&init).contains(r#"url: "/openapi.yaml""#));
        assert!(body(&init).contains("validatorUrl: null"));
        for (name, content_type) in ASSETS {
            let Some(file) = docs.answer(&Method::GET, &format!("/docs/{name}"), "r") else {
                panic!("{name}: no answer");
            };
            assert_eq!(file.status(), 200);
            assert_eq!(file.headers()["content-type"], content_type);
            assert_eq!(body(&file), format!("contents of {name}"));
            let policy = file.headers()["content-security-policy"]
                .to_str()
                .unwrap_or_default();
            assert!(
                policy.starts_with("default-src 'none'; script-src 'self';"),
                "{policy}"
            );
            assert!(!policy.contains("http"), "{policy}");
        }
        // Only the files it read: nothing else of the directory, no traversal.
        for path in [
            "/docs/../Cargo.toml",
            "/docs/index.html",
            "/docs/swagger-ui-bundle.js.map",
        ] {
            let answer = docs.answer(&Method::GET, path, "r");
            assert_eq!(answer.map(|a| a.status()), Some(StatusCode::NOT_FOUND), "{path}");
        }
    }
}
