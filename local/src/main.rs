//! `local-api [--addr 127.0.0.1:3000] [--setup] (--jwt-secret S | --jwks FILE | --no-auth)`:
//! serves the three update routes on loopback, behind an emulation of API
//! Gateway's JWT authorizer, configured by the same environment variables
//! as the Lambda functions. `--setup` first creates the tables and loads
//! the sample records.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use agent_server_shared::App;
use agent_server_shared::app::AllRoutes;
use local_api::docs::Docs;
use local_api::functions::{Emulators, Functions};
use local_api::gateway::{self, Authorizer, JwtAuthorizer};
use local_api::{LocalApi, samples, serve, setup};
use tokio::net::TcpListener;

const USAGE: &str = "usage: local-api [--addr HOST:PORT] [--setup] [--rie FUNCTION=HOST:PORT]... AUTH
       local-api token --jwt-secret SECRET [--projects IDS] [--sub SUB] [--minutes N]

Serves PUT /api/agent-server/{api-keys,mcp-servers,models}/{id} over HTTP.
  --addr HOST:PORT      where to listen (default 127.0.0.1:3000)
  --setup               create the tables and load the sample records first
  --setup-only          create the tables, load the sample records, and exit
  --docs DIR            serve GET /docs, the API reference, with Swagger UI's
                        files from DIR (the npm package swagger-ui-dist; default:
                        tools/docs/node_modules/swagger-ui-dist of the checkout
                        built from, installed by make docs-tools), and
                        GET /openapi.yaml
  --rie FUNCTION=HOST:PORT
                        invoke FUNCTION (update-api-key, update-mcp-server,
                        update-model; give all three) under the Lambda Runtime
                        Interface Emulator listening there, instead of in
                        this process
AUTH, as API Gateway's JWT authorizer (exactly one of):
  --jwt-secret SECRET   HS256 tokens signed with SECRET
  --jwks FILE           RS256/ES256 tokens signed by a key of this JWKS file
  --no-auth             no tokens: every request may change every project
  --jwt-issuer ISS      with a JWT mode: require iss = ISS
  --jwt-audience AUD    with a JWT mode: require aud (or client_id) = AUD
                        (repeat for several)
`token` prints a development token (HS256) for a local-api started with
the same --jwt-secret: PROJECTS (default *) is what its projects claim
lists (ids separated by spaces, or *), SUB its subject (default developer),
N its lifetime in minutes (default 720).
Environment: SECRETS_KEY_ID (required: the KMS key that seals api_key and MCP header values),
API_KEYS_TABLE, MCP_SERVERS_TABLE, MODELS_TABLE, PROJECTS_CLAIM,
ALLOW_PRIVATE_ENDPOINTS, AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_KMS,
AWS_REGION, credentials.";

/// How long the development tokens `--setup --jwt-secret` prints are valid.
const DEVELOPMENT_TOKEN_SECONDS: u64 = 12 * 60 * 60;

enum Auth {
    Secret(String),
    Jwks(String),
    None,
}

struct Options {
    addr: SocketAddr,
    setup: bool,
    setup_only: bool,
    auth: Option<Auth>,
    issuer: Option<String>,
    audiences: Vec<String>,
    emulators: Vec<String>,
    docs: Option<PathBuf>,
}

fn options() -> Result<Options, String> {
    let mut options = Options {
        addr: SocketAddr::from(([127, 0, 0, 1], 3000)),
        setup: false,
        setup_only: false,
        auth: None,
        issuer: None,
        audiences: Vec::new(),
        emulators: Vec::new(),
        docs: None,
    };
    let mut args = std::env::args().skip(1);
    let set_auth = |auth: &mut Option<Auth>, value: Auth| {
        if auth.replace(value).is_some() {
            Err("give only one of --jwt-secret, --jwks, --no-auth".to_string())
        } else {
            Ok(())
        }
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--addr" => {
                let value = args.next().ok_or("--addr needs HOST:PORT")?;
                options.addr = value
                    .parse()
                    .map_err(|_| format!("--addr: not HOST:PORT: {value}"))?;
            }
            "--setup" => options.setup = true,
            "--rie" => options
                .emulators
                .push(args.next().ok_or("--rie needs FUNCTION=HOST:PORT")?),
            "--setup-only" => options.setup_only = true,
            "--docs" => options.docs = Some(args.next().ok_or("--docs needs a directory")?.into()),
            "--jwt-secret" => {
                let secret = args.next().ok_or("--jwt-secret needs a secret")?;
                set_auth(&mut options.auth, Auth::Secret(secret))?;
            }
            "--jwks" => {
                let file = args.next().ok_or("--jwks needs a file")?;
                set_auth(&mut options.auth, Auth::Jwks(file))?;
            }
            "--no-auth" => set_auth(&mut options.auth, Auth::None)?,
            "--jwt-issuer" => options.issuer = Some(args.next().ok_or("--jwt-issuer needs an issuer")?),
            "--jwt-audience" => options
                .audiences
                .push(args.next().ok_or("--jwt-audience needs an audience")?),
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument: {other}")),
        }
    }
    match options.auth {
        _ if options.setup_only => Ok(options),
        None => Err("choose how requests are authenticated: --jwt-secret, --jwks or --no-auth".into()),
        Some(Auth::None) if options.issuer.is_some() || !options.audiences.is_empty() => {
            Err("--jwt-issuer and --jwt-audience need --jwt-secret or --jwks".into())
        }
        _ => Ok(options),
    }
}

/// `local-api token ...`: prints a development token and exits.
fn token(mut args: impl Iterator<Item = String>) -> Result<String, String> {
    let (mut secret, mut projects, mut sub, mut minutes) =
        (None, "*".to_string(), "developer".to_string(), 720);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--jwt-secret" => secret = Some(value()?),
            "--projects" => projects = value()?,
            "--sub" => sub = value()?,
            "--minutes" => {
                minutes = value()?
                    .parse::<u64>()
                    .map_err(|_| "--minutes takes a whole number".to_string())?;
            }
            other => return Err(format!("unknown argument: {other}")),
        }
    }
    let secret = secret.ok_or("token needs --jwt-secret")?;
    let claim = agent_server_shared::Settings::from_env()
        .map_err(|e| e.to_string())?
        .projects_claim;
    gateway::development_token(secret.as_bytes(), &sub, &claim, &projects, minutes * 60)
        .map_err(|e| format!("cannot sign the token: {e}"))
}

#[tokio::main]
async fn main() -> ExitCode {
    if std::env::args().nth(1).as_deref() == Some("token") {
        return match token(std::env::args().skip(2)) {
            Ok(token) => {
                println!("{token}");
                ExitCode::SUCCESS
            }
            Err(message) => {
                eprintln!("local-api token: {message}\n{USAGE}");
                ExitCode::from(2)
            }
        };
    }
    let options = match options() {
        Ok(options) => options,
        Err(message) => {
            if !message.is_empty() {
                eprintln!("local-api: {message}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    agent_server_shared::logging::init();
    match run(options).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("local-api: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run(options: Options) -> Result<(), String> {
    let app = App::from_env::<AllRoutes>().await.map_err(|e| e.to_string())?;
    let authorizer = authorizer(&options)?;
    let docs = docs(options.docs.as_deref())?;
    let functions = if options.emulators.is_empty() {
        Functions::InProcess
    } else {
        Functions::Emulated(Box::new(Emulators::new(
            options.emulators.iter().map(String::as_str),
        )?))
    };
    if options.setup || options.setup_only {
        setup::prepare(
            app.store.client(),
            app.store.tables(),
            app.sealer.as_ref(),
            Duration::from_secs(30),
        )
        .await
        .map_err(|e| format!("could not prepare DynamoDB (is DynamoDB Local running?): {e}"))?;
        if options.setup_only {
            return Ok(());
        }
    }
    let listener = TcpListener::bind(options.addr).await.map_err(|e| {
        format!(
            "cannot listen on {}: {e} (is another local-api running?)",
            options.addr
        )
    })?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    tracing::info!(%addr, "listening");
    if matches!(authorizer, Authorizer::Open) {
        tracing::warn!("--no-auth: requests need no token, and every request may change every project");
        eprintln!("local-api: --no-auth: no tokens are checked; every request may change every project");
    }
    if options.setup {
        let tokens = match &options.auth {
            Some(Auth::Secret(secret)) => Some(development_tokens(secret, &app.settings.projects_claim)?),
            _ => None,
        };
        eprintln!("{}", try_these(addr, tokens.as_ref(), docs.renders()));
    }
    let shutdown = async {
        // If the signal handler cannot be installed, serve until killed.
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
        tracing::info!("shutting down");
    };
    let local = LocalApi {
        app,
        authorizer,
        functions,
        docs,
    };
    serve(listener, Arc::new(local), shutdown)
        .await
        .map_err(|e| e.to_string())
}

/// The API reference: Swagger UI's files from `dir` (it is an error if they
/// are missing there), or from the default install (where, if missing, a
/// warning, and `/docs` says how to install them).
fn docs(dir: Option<&Path>) -> Result<Docs, String> {
    match dir {
        Some(dir) => Docs::load(dir).map_err(|e| format!("--docs: {e}")),
        None => Ok(
            Docs::load(Path::new(local_api::docs::DEFAULT_ASSETS_DIR)).unwrap_or_else(|error| {
                tracing::warn!(%error, "no Swagger UI: /docs cannot render the API reference");
                Docs::default()
            }),
        ),
    }
}

fn authorizer(options: &Options) -> Result<Authorizer, String> {
    let jwt = match &options.auth {
        Some(Auth::Secret(secret)) => JwtAuthorizer::with_secret(secret.as_bytes()),
        Some(Auth::Jwks(file)) => {
            let jwks = std::fs::read_to_string(file).map_err(|e| format!("--jwks {file}: {e}"))?;
            JwtAuthorizer::with_jwks(&jwks)
        }
        Some(Auth::None) | None => return Ok(Authorizer::Open),
    };
    let mut jwt = jwt
        .map_err(|e| e.to_string())?
        .audiences(options.audiences.clone());
    if let Some(issuer) = &options.issuer {
        jwt = jwt.issuer(issuer.clone());
    }
    Ok(Authorizer::Jwt(Box::new(jwt)))
}

/// Two development tokens: one granting every project, one granting only
/// the sample project.
struct DevelopmentTokens {
    all: String,
    sample_project: String,
}

fn development_tokens(secret: &str, projects_claim: &str) -> Result<DevelopmentTokens, String> {
    let token = |sub: &str, projects: &str| {
        gateway::development_token(
            secret.as_bytes(),
            sub,
            projects_claim,
            projects,
            DEVELOPMENT_TOKEN_SECONDS,
        )
        .map_err(|e| format!("cannot sign a development token: {e}"))
    };
    Ok(DevelopmentTokens {
        all: token("developer-all-projects", "*")?,
        sample_project: token("developer-sample-project", samples::PROJECT_ID)?,
    })
}

fn try_these(addr: SocketAddr, tokens: Option<&DevelopmentTokens>, docs: bool) -> String {
    let base = format!("http://{addr}/api/agent-server");
    let project = samples::PROJECT_ID;
    let (intro, all, one) = match tokens {
        Some(tokens) => (
            format!(
                "\nDevelopment tokens (HS256, valid {hours} h):\n\n\
                 ALL_PROJECTS_TOKEN={all}\n\
                 SAMPLE_PROJECT_TOKEN={one}\n\n\
                 Paste those two lines into your shell, then try:\n",
                hours = DEVELOPMENT_TOKEN_SECONDS / 3600,
                all = tokens.all,
                one = tokens.sample_project,
            ),
            " -H \"Authorization: Bearer $ALL_PROJECTS_TOKEN\"",
            " -H \"Authorization: Bearer $SAMPLE_PROJECT_TOKEN\"",
        ),
        None => ("Try:\n".to_string(), "", ""),
    };
    let mut text = format!(
        "\nlocal-api is ready on http://{addr} (Ctrl-C stops it); its API reference: \
         http://{addr}{docs}\n{intro}\n\
         curl -sS -X PUT '{base}/api-keys/{key}'{all} -H 'Content-Type: application/json' \\\n  \
         -d '{{\"name\": \"Production OpenAI key\", \"enabled\": false}}'\n\n\
         curl -sS -X PUT '{base}/mcp-servers/{mcp}?project_id={project}'{one} -H 'Content-Type: application/json' \\\n  \
         -d '{{\"endpoint\": \"http://localhost:8931/mcp\", \"headers\": {{\"Authorization\": \"Bearer new-token\"}}}}'\n\n\
         curl -sS -X PUT '{base}/models/{model}?project_id={project}'{one} -H 'Content-Type: application/json' \\\n  \
         -d '{{\"provider_type\": \"Anthropic\", \"parameters\": {{\"temperature\": 0.2, \"max_tokens\": 8192}}}}'\n",
        key = samples::API_KEY_ID,
        mcp = samples::MCP_SERVER_ID,
        model = samples::MODEL_ID,
        docs = local_api::docs::DOCS_PATH,
    );
    if tokens.is_some() {
        text.push_str(&format!(
            "\nThe sample-project token may not change another project's records (403 forbidden),\n\
             nor API keys, which belong to no project:\n\n\
             curl -sS -X PUT '{base}/models/{model}?project_id={other}'{one} -H 'Content-Type: application/json' \\\n  \
             -d '{{\"name\": \"Not yours\"}}'\n",
            model = samples::OTHER_MODEL_ID,
            other = samples::OTHER_PROJECT_ID,
        ));
    }
    let reference = format!("http://{addr}{}", local_api::docs::DOCS_PATH);
    if !docs {
        text.push_str(&format!(
            "\nThe API reference ({reference}) needs Swagger UI's files: make docs-tools, then restart.\n"
        ));
    } else if tokens.is_some() {
        text.push_str(&format!(
            "\nOr in a browser: {reference}, the API reference. Authorize with a token above\n\
             (paste it without \"Bearer\"), then \"Try it out\" on any route.\n"
        ));
    } else {
        text.push_str(&format!(
            "\nOr in a browser: {reference}, the API reference; \"Try it out\" on any route.\n"
        ));
    }
    text
}
