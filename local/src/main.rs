//! `local-api [--addr 127.0.0.1:3000] [--setup] (--jwt-secret S | --jwks FILE | --no-auth)`:
//! serves the three update routes on loopback, behind an emulation of API
//! Gateway's JWT authorizer, configured by the same environment variables
//! as the Lambda functions. `--setup` first creates the tables and loads
//! the sample records; `local-api token` prints a development token.
//! `--help` lists every option (clap, from the declarations below).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use agent_server_shared::App;
use agent_server_shared::app::AllRoutes;
use clap::error::ErrorKind;
use clap::{Args, CommandFactory, Parser, Subcommand};
use local_api::docs::Docs;
use local_api::functions::{Emulators, Functions};
use local_api::gateway::{self, Authorizer, JwtAuthorizer};
use local_api::{LocalApi, samples, serve, setup};
use tokio::net::TcpListener;

/// Serves PUT and PATCH /api/agent-server/{api-keys,mcp-servers,models}/{id}
/// over HTTP, as API Gateway and the Lambda functions do, behind an emulation
/// of API Gateway's JWT authorizer (give exactly one of --jwt-secret, --jwks,
/// --no-auth).
#[derive(Debug, Parser)]
#[command(name = "local-api", args_conflicts_with_subcommands = true, after_help = ENVIRONMENT)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: Options,
}

const ENVIRONMENT: &str = "Environment: SECRETS_KEY_ID (required: the KMS key that seals api_key and MCP \
header values), API_KEYS_TABLE, MCP_SERVERS_TABLE, MODELS_TABLE, PROJECTS_CLAIM, ALLOW_PRIVATE_ENDPOINTS, \
AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_KMS, AWS_REGION, credentials.";

#[derive(Debug, Subcommand)]
enum Command {
    /// Print a development token (HS256) for a local-api started with the
    /// same --jwt-secret
    Token(TokenArgs),
}

#[derive(Debug, Args)]
struct TokenArgs {
    /// The secret local-api checks tokens with
    #[arg(long, value_name = "SECRET", allow_hyphen_values = true)]
    jwt_secret: String,
    /// What the projects claim lists: ids separated by spaces, or *
    #[arg(long, value_name = "IDS", default_value = "*", allow_hyphen_values = true)]
    projects: String,
    /// The token's subject
    #[arg(
        long,
        value_name = "SUB",
        default_value = "developer",
        allow_hyphen_values = true
    )]
    sub: String,
    /// Its lifetime, in minutes
    #[arg(long, value_name = "N", default_value_t = 720)]
    minutes: u64,
}

#[derive(Debug, Args)]
struct Options {
    /// Where to listen
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:3000")]
    addr: SocketAddr,
    /// Create the tables and load the sample records first
    #[arg(long)]
    setup: bool,
    /// Create the tables, load the sample records, and exit
    #[arg(long)]
    setup_only: bool,
    /// Serve GET /docs, the API reference, with Swagger UI's files from DIR
    /// (the npm package swagger-ui-dist; default: tools/docs/node_modules/
    /// swagger-ui-dist of the checkout built from, installed by make
    /// docs-tools), and GET /openapi.yaml
    #[arg(long, value_name = "DIR")]
    docs: Option<PathBuf>,
    /// Invoke FUNCTION (update-api-key, update-mcp-server, update-model;
    /// give every function) under the Lambda Runtime Interface Emulator
    /// listening there, instead of in this process
    #[arg(long = "rie", value_name = "FUNCTION=HOST:PORT")]
    emulators: Vec<String>,
    /// With --setup: the URL of an MCP server to show a `verify=true`
    /// example against (make run starts MCP's reference server there)
    #[arg(long, value_name = "URL")]
    mcp_example: Option<String>,
    /// With --setup: show a `verify=true` example on an API key (make run
    /// points the providers' base URLs at a local mock)
    #[arg(long)]
    key_example: bool,
    /// AUTH: HS256 tokens signed with SECRET
    // A generated secret may start with `-` (URL-safe base64): a value,
    // never an option.
    #[arg(long, value_name = "SECRET", group = "auth", allow_hyphen_values = true)]
    jwt_secret: Option<String>,
    /// AUTH: RS256/ES256 tokens signed by a key of this JWKS file
    #[arg(long, value_name = "FILE", group = "auth")]
    jwks: Option<String>,
    /// AUTH: no tokens: every request may change every project
    #[arg(long, group = "auth")]
    no_auth: bool,
    /// With a JWT mode: require iss = ISS
    #[arg(long, value_name = "ISS", allow_hyphen_values = true)]
    jwt_issuer: Option<String>,
    /// With a JWT mode: require aud (or client_id) = AUD (repeat for several)
    #[arg(long = "jwt-audience", value_name = "AUD", allow_hyphen_values = true)]
    jwt_audiences: Vec<String>,
}

/// How long the development tokens `--setup --jwt-secret` prints are valid.
const DEVELOPMENT_TOKEN_SECONDS: u64 = 12 * 60 * 60;

enum Auth {
    Secret(String),
    Jwks(String),
    None,
}

impl Options {
    /// How requests are authenticated, once the options agree.
    fn auth(&self) -> Result<Option<Auth>, String> {
        let auth = match (&self.jwt_secret, &self.jwks, self.no_auth) {
            (Some(secret), _, _) => Some(Auth::Secret(secret.clone())),
            (_, Some(file), _) => Some(Auth::Jwks(file.clone())),
            (_, _, true) => Some(Auth::None),
            _ => None,
        };
        match auth {
            _ if self.setup_only => Ok(auth),
            None => Err("choose how requests are authenticated: --jwt-secret, --jwks or --no-auth".into()),
            Some(Auth::None) if self.jwt_issuer.is_some() || !self.jwt_audiences.is_empty() => {
                Err("--jwt-issuer and --jwt-audience need --jwt-secret or --jwks".into())
            }
            auth => Ok(auth),
        }
    }
}

/// `local-api token ...`: a development token.
fn token(args: &TokenArgs) -> Result<String, String> {
    let claim = agent_server_shared::Settings::from_env()
        .map_err(|e| e.to_string())?
        .projects_claim;
    gateway::development_token(
        args.jwt_secret.as_bytes(),
        &args.sub,
        &claim,
        &args.projects,
        args.minutes * 60,
    )
    .map_err(|e| format!("cannot sign the token: {e}"))
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(Command::Token(args)) = &cli.command {
        return match token(args) {
            Ok(token) => {
                println!("{token}");
                ExitCode::SUCCESS
            }
            Err(message) => {
                eprintln!("local-api token: {message}");
                ExitCode::FAILURE
            }
        };
    }
    let options = cli.serve;
    let auth = match options.auth() {
        Ok(auth) => auth,
        Err(message) => Cli::command().error(ErrorKind::ArgumentConflict, message).exit(),
    };
    agent_server_shared::logging::init();
    match run(options, auth).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("local-api: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run(options: Options, auth: Option<Auth>) -> Result<(), String> {
    let app = App::from_env::<AllRoutes>().await.map_err(|e| e.to_string())?;
    let authorizer = authorizer(&options, auth.as_ref())?;
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
        let tokens = match &auth {
            Some(Auth::Secret(secret)) => Some(development_tokens(secret, &app.settings.projects_claim)?),
            _ => None,
        };
        let mcp = options.mcp_example.as_deref();
        let examples = Examples {
            mcp,
            key: options.key_example,
        };
        eprintln!("{}", try_these(addr, tokens.as_ref(), docs.renders(), examples));
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

fn authorizer(options: &Options, auth: Option<&Auth>) -> Result<Authorizer, String> {
    let jwt = match auth {
        Some(Auth::Secret(secret)) => JwtAuthorizer::with_secret(secret.as_bytes()),
        Some(Auth::Jwks(file)) => {
            let jwks = std::fs::read_to_string(file).map_err(|e| format!("--jwks {file}: {e}"))?;
            JwtAuthorizer::with_jwks(&jwks)
        }
        Some(Auth::None) | None => return Ok(Authorizer::Open),
    };
    let mut jwt = jwt
        .map_err(|e| e.to_string())?
        .audiences(options.jwt_audiences.clone());
    if let Some(issuer) = &options.jwt_issuer {
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

/// The `verify=true` examples the printout shows, where their peers run.
struct Examples<'a> {
    /// An MCP server's URL.
    mcp: Option<&'a str>,
    /// Whether the providers' base URLs point at a local mock.
    key: bool,
}

fn try_these(
    addr: SocketAddr,
    tokens: Option<&DevelopmentTokens>,
    docs: bool,
    examples: Examples<'_>,
) -> String {
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
         -d '{{\"provider_type\": \"Anthropic\", \"parameters\": {{\"temperature\": 0.2, \"max_tokens\": 8192}}}}'\n\n\
         # PATCH, a JSON Merge Patch: one parameter changed, one removed, the rest kept\n\
         curl -sS -X PATCH '{base}/models/{model}?project_id={project}'{one} -H 'Content-Type: application/merge-patch+json' \\\n  \
         -d '{{\"parameters\": {{\"temperature\": 0.7, \"max_tokens\": null}}}}'\n",
        key = samples::API_KEY_ID,
        mcp = samples::MCP_SERVER_ID,
        model = samples::MODEL_ID,
        docs = local_api::docs::DOCS_PATH,
    );
    if examples.key {
        text.push_str(&format!(
            "\n# verify=true on an API key: written only if its provider (here a local mock) accepts\n\
             # it; the record then shows `verification`, else 422 key_unverified with the stage\n\
             curl -sS -X PUT '{base}/api-keys/{key}?verify=true'{all} -H 'Content-Type: application/json' \\\n  \
             -d '{{\"api_key\": \"sk-local-example-key\"}}'\n",
            key = samples::API_KEY_ID,
        ));
    }
    if let Some(endpoint) = examples.mcp {
        text.push_str(&format!(
            "\n# verify=true: written only if an MCP handshake with the endpoint succeeds; the record\n\
             # then shows what the server announced (`verification`), else 422 with the failed stage\n\
             curl -sS -X PUT '{base}/mcp-servers/{mcp}?project_id={project}&verify=true'{one} -H 'Content-Type: application/json' \\\n  \
             -d '{{\"endpoint\": \"{endpoint}\"}}'\n",
            mcp = samples::MCP_SERVER_ID,
        ));
    }
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
